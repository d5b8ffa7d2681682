"""Knob spaces: which settings of a datastore can be tuned, their types, ranges, defaults and where they go.

A knob space is data (`<system>.yaml` next to this module), checked when it is loaded. This module gives the
typed view of it: `load_space("cassandra")` -> `KnobSpace` of `Knob`s, validation and coercion of user
values (`--set knob=value`, override files), named knob sets and user-narrowed subsets.

Importing this module is cheap: PyYAML, difflib and importlib.resources are imported only when needed.
"""

from __future__ import annotations

import dataclasses

import math
import numbers
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from ..errors import NosqltuneError

__all__ = ["KnobError", "Knob", "KnobSpace", "load_space", "load_space_file", "parse_assignments",
           "load_overrides_file", "load_config", "named_configs", "is_named_config"]

TYPES = ("int", "float", "bool", "enum")
APPLIES = ("yaml", "table", "keyspace", "jvm", "config", "design", "volume")
# config: a directive of the datastore's own config file (redis.conf); design: the physical design of the trial
# (a field of trial.TrialSettings, named by the knob's key), e.g. the number of nodes; volume: a setting of the
# node's own volume (--volume), e.g. its read-ahead
DESIGN_KEYS = ("nodes", "replication_factor")
# unit suffixes of Cassandra 5.0 (storage, rate, duration); values are integers in the given unit
UNITS = ("B", "KiB", "MiB", "GiB", "B/s", "KiB/s", "MiB/s", "ns", "us", "ms", "s", "m", "h", "d")

_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_LEGACY_SUFFIXES = ("_in_mb", "_in_kb", "_mb_per_sec", "_megabits_per_sec", "_in_ms", "_in_minutes")

_KNOB_FIELDS = frozenset({
    "type", "range", "bounds", "choices", "default", "default_rule", "unit", "log", "applies", "key",
    "value_map", "reload", "live", "condition", "special", "description", "sources", "notes", "best_practice",
    "implies"})
_REQUIRED_FIELDS = ("type", "default", "applies", "key", "description")
_TOP_FIELDS = frozenset({"system", "version", "reference_setup", "knobs", "knob_sets", "rules"})
_SET_FIELDS = frozenset({"description", "source", "knobs", "ranges", "choices"})


class KnobError(NosqltuneError, ValueError):
    """A bad knob, value or knob file; str(e) is one line meant for the user."""

    exit_code = 2  # bad input

    def __init__(self, message: Any) -> None:
        super().__init__(" ".join(str(message).split()))


def _num(value: Any) -> str:
    """A number as a user reads it: 512, 0.33."""
    return repr(float(value)) if isinstance(value, float) else str(value)


def _is_number(value: Any) -> bool:
    """int or float (numpy scalars included), not bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


# ------------------------------------------------------------------------------------------------ conditions

_CLAUSE = re.compile(r"\s*([a-z][a-z0-9_]*)\s*(==|!=|>=|<=|>|<|not\s+in\b|in\b)\s*(.+?)\s*$")


def _scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    low = text.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


@lru_cache(maxsize=None)
def _parse_condition(text: str) -> tuple[tuple[str, str, Any], ...]:
    """'a == x and b in [1, 2]' -> (('a', '==', 'x'), ('b', 'in', (1, 2))); KnobError when malformed."""
    clauses = []
    for part in re.split(r"\s+and\s+", text.strip()):
        match = _CLAUSE.fullmatch(part)
        if not match:
            raise KnobError(f"cannot read condition '{text}': expected 'knob == value', 'knob in [a, b]' "
                            "or 'knob > number' (clauses joined by 'and')")
        name, op, rest = match.group(1), " ".join(match.group(2).split()), match.group(3)
        if op in ("in", "not in"):
            if not (rest.startswith("[") and rest.endswith("]")):
                raise KnobError(f"cannot read condition '{text}': '{op}' needs a list like [a, b]")
            items = [i for i in rest[1:-1].split(",") if i.strip()]
            if not items:
                raise KnobError(f"cannot read condition '{text}': empty list")
            value: Any = tuple(_scalar(i) for i in items)
        else:
            value = _scalar(rest)
            if op not in ("==", "!=") and not _is_number(value):
                raise KnobError(f"cannot read condition '{text}': '{op}' needs a number")
        clauses.append((name, op, value))
    return tuple(clauses)


def _condition_refs(condition: str | None) -> tuple[str, ...]:
    return tuple(name for name, _, _ in _parse_condition(condition)) if condition else ()


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    return str(a).lower() == str(b).lower()


# ------------------------------------------------------------------------------------------------ Knob

@dataclass(frozen=True)
class Knob:
    """One tunable setting. Numeric values are plain numbers in `unit` (the unit of the 5.0 key)."""

    name: str
    type: str                      # int | float | bool | enum
    default: Any                   # effective default of the reference setup
    description: str
    applies: str                   # yaml | table | keyspace | jvm
    key: str                       # dotted yaml key, dotted CQL option, or JVM flag template with {value}
    range: tuple | None = None     # tuning range [lo, hi] for int/float
    choices: tuple | None = None   # for enum
    unit: str | None = None
    log: bool = False
    value_map: dict | None = field(default=None, hash=False)  # enum choice -> value written
    reload: bool = False           # a change needs the data loaded again
    live: str | None = None        # how Cassandra changes it while running
    condition: str | None = None   # when the knob has an effect at all
    special: tuple = ()            # special values (0 = disabled, ...)
    sources: tuple = ()
    notes: str | None = None
    default_rule: str | None = None
    bounds: tuple | None = None    # what the datastore accepts (None side: unbounded)
    best_practice: dict | None = field(default=None, hash=False)  # {rule, source}: a documented rule of thumb
    implies: dict | None = field(default=None, hash=False)  # enum choice -> {yaml key: value} it needs beside it

    def __post_init__(self) -> None:
        for name in ("range", "choices", "bounds"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        for name in ("special", "sources"):
            value = getattr(self, name)
            if not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value or ()))

    # -- values
    def _strip_unit(self, text: str) -> str:
        if self.unit and text.lower().endswith(self.unit.lower()) and len(text) > len(self.unit):
            return text[: -len(self.unit)].strip()
        return text

    def _typed(self, value: Any) -> Any:
        """The value converted to the knob's type, without range checks."""
        kind = self.type
        if kind == "int":
            if _is_number(value):
                if isinstance(value, numbers.Integral):
                    return int(value)
                if math.isfinite(value) and float(value).is_integer():
                    return int(value)
            elif isinstance(value, str):
                text = self._strip_unit(value.strip())
                try:
                    return int(text)
                except ValueError:
                    try:
                        number = float(text)
                    except ValueError:
                        number = math.nan
                    if math.isfinite(number) and number.is_integer():
                        return int(number)
            raise KnobError(f"knob {self.name} expects an integer, got {value!r}")
        if kind == "float":
            number = math.nan
            if _is_number(value):
                number = float(value)
            elif isinstance(value, str):
                try:
                    number = float(self._strip_unit(value.strip()))
                except ValueError:
                    pass
            if math.isfinite(number):
                return number
            raise KnobError(f"knob {self.name} expects a number, got {value!r}")
        if kind == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, numbers.Integral) and value in (0, 1):
                return bool(value)
            if isinstance(value, str):
                low = value.strip().lower()
                if low in _TRUE:
                    return True
                if low in _FALSE:
                    return False
            raise KnobError(f"knob {self.name} expects true or false, got {value!r}")
        # enum: the canonical choice, matched case-insensitively; the written form (value_map) works too
        choices = self.choices or ()
        if value is not None and not isinstance(value, bool):
            for choice in choices:
                if _is_number(value) and _is_number(choice):
                    if value == choice:
                        return choice
                elif str(value).strip().lower() == str(choice).lower():
                    return choice
            if isinstance(value, str) and self.value_map:
                for choice, written in self.value_map.items():
                    if choice in choices and value.strip().lower() == str(written).lower():
                        return choice
        raise KnobError(f"knob {self.name} expects one of {', '.join(map(str, choices))}, got {value!r}")

    def _accepted(self) -> tuple[Any, Any]:
        lo, hi = self.bounds if self.bounds else (None, None)
        if lo is None and self.unit:  # 5.0 quantities with a unit are never negative
            lo = 0
        return lo, hi

    def coerce(self, value: Any, *, allow_outside_range: bool = False) -> Any:
        """The typed value; KnobError (one line) for a wrong type or a value outside the tuning range."""
        typed = self._typed(value)
        if self.range is not None:
            lo, hi = self.range
            if not lo <= typed <= hi:
                if not allow_outside_range:
                    raise KnobError(f"knob {self.name}={_num(typed)} is outside its range "
                                    f"[{_num(lo)}, {_num(hi)}]")
                blo, bhi = self._accepted()
                if (blo is not None and typed < blo) or (bhi is not None and typed > bhi):
                    accepted = (f"[{_num(blo)}, {_num(bhi)}]" if blo is not None and bhi is not None
                                else f">= {_num(blo)}" if blo is not None else f"<= {_num(bhi)}")
                    raise KnobError(f"knob {self.name}={_num(typed)} is outside the values the datastore "
                                    f"accepts ({accepted})")
        return typed

    def rendered(self, value: Any) -> Any:
        """The value as written where the knob applies: value_map applied; unit suffix for yaml ('512MiB')."""
        typed = self._typed(value)
        if self.type == "enum" and self.value_map:
            typed = self.value_map.get(typed, typed)
        if self.type == "bool":
            return bool(typed)
        if self.applies == "yaml" and self.unit:
            return f"{typed}{self.unit}"
        return typed

    def is_active(self, config: Mapping[str, Any]) -> bool:
        """Whether the knob has an effect under `config` (a full config: defaults filled in)."""
        if not self.condition:
            return True
        for name, op, literal in _parse_condition(self.condition):
            if name not in config:
                raise KnobError(f"cannot evaluate the condition of knob {self.name}: {name} is not in the config")
            value = config[name]
            if op == "==":
                ok = _same(value, literal)
            elif op == "!=":
                ok = not _same(value, literal)
            elif op in ("in", "not in"):
                ok = any(_same(value, item) for item in literal) == (op == "in")
            else:
                if not _is_number(value):
                    raise KnobError(f"cannot evaluate the condition of knob {self.name}: {name}={value!r} "
                                    "is not a number")
                ok = {">": value > literal, ">=": value >= literal,
                      "<": value < literal, "<=": value <= literal}[op]
            if not ok:
                return False
        return True


# ------------------------------------------------------------------------------------------------ KnobSpace

class KnobSpace:
    """The knobs of one datastore version (or a subset of them), in file order."""

    def __init__(self, system: str, version: str, knobs: Mapping[str, Knob],
                 knob_sets: Mapping[str, Mapping[str, Any]] | None = None, *,
                 reference_setup: str | None = None, context: Mapping[str, Knob] | None = None,
                 label: str | None = None, rules: tuple = ()) -> None:
        self.system = system
        self.version = version
        self.knobs: Mapping[str, Knob] = MappingProxyType(dict(knobs))
        self.knob_sets: Mapping[str, Mapping[str, Any]] = MappingProxyType(dict(knob_sets or {}))
        self.reference_setup = reference_setup
        self.label = label  # knob set name, subset file name or "subset"; None for the whole space
        self.recipe: dict[str, Any] | None = None  # the mapping that rebuilds a subset made from a knob set
        # every knob of the whole space: conditions may refer to knobs a subset leaves out
        self._context: Mapping[str, Knob] = MappingProxyType(dict(context if context is not None else knobs))
        # relations between knobs (knobs.rules.Rule) every configuration keeps; a subset keeps all of the space's,
        # since a rule may refer to knobs the subset leaves out (they hold their defaults or fixed values)
        self.rules: tuple = tuple(rules)

    # -- mapping-like access
    def __getitem__(self, name: str) -> Knob:
        return self._lookup(name)

    def __contains__(self, name: object) -> bool:
        return name in self.knobs

    def __iter__(self) -> Iterator[Knob]:
        return iter(self.knobs.values())

    def __len__(self) -> int:
        return len(self.knobs)

    def __repr__(self) -> str:
        label = f" {self.label}" if self.label else ""
        return f"<KnobSpace {self.system} {self.version}{label}: {len(self)} knobs>"

    def _native_name(self, name: str) -> str | None:
        """Our name of a knob given in the datastore's own spelling: its configuration key (redis.conf's
        `maxmemory-policy`), or the name with dashes for underscores; None when nothing matches."""
        keys: dict[str, list[str]] = {}
        for knob in self.knobs.values():
            if knob.key and knob.key != knob.name:
                keys.setdefault(knob.key, []).append(knob.name)
        if len(keys.get(name, [])) == 1:
            return keys[name][0]
        underscored = name.replace("-", "_")
        return underscored if underscored != name and underscored in self.knobs else None

    def _lookup(self, name: Any) -> Knob:
        if isinstance(name, str) and name in self.knobs:
            return self.knobs[name]
        if not isinstance(name, str):
            raise KnobError(f"knob names are strings, got {name!r}")
        if name in self._context:
            raise KnobError(f"knob {name} is not in {self._where()}")
        native = self._native_name(name)
        if native is not None:
            return self.knobs[native]
        import difflib

        candidates = []
        for suffix in _LEGACY_SUFFIXES:  # a pre-4.1 name: suggest the 5.0 one
            if name.endswith(suffix) and name[: -len(suffix)] in self.knobs:
                candidates.append(name[: -len(suffix)])
        if not candidates:
            # the closest names (up to 3), keeping only those about as close as the best one
            low = name.lower()
            scored = [(difflib.SequenceMatcher(None, low, m).ratio(), m)
                      for m in difflib.get_close_matches(low, list(self.knobs), n=3, cutoff=0.6)]
            best = max((score for score, _ in scored), default=0.0)
            candidates = [m for score, m in scored if score >= best - 0.1]
        hint = f"; did you mean {', '.join(candidates[:3])}?" if candidates else ""
        raise KnobError(f"unknown knob '{name}' for {self.system}{hint}")

    def _where(self) -> str:
        if self.label and self.label.endswith((".yaml", ".yml")):
            return f"knob subset {self.label}"
        if self.label and self.label != "subset":
            return f"knob set {self.label}"
        return f"this {self.system} knob subset"

    # -- values
    def defaults(self) -> dict[str, Any]:
        return {knob.name: knob.default for knob in self}

    def validate(self, overrides: Mapping[str, Any], *, allow_outside_range: bool = False) -> dict[str, Any]:
        """The overrides coerced to their knobs' types (only those given); KnobError on the first bad one."""
        if overrides is None:
            return {}
        if not isinstance(overrides, Mapping):
            raise KnobError(f"knob overrides must be a mapping of knob: value, got {type(overrides).__name__}")
        typed: dict[str, Any] = {}
        for name, value in overrides.items():
            knob = self._lookup(name)
            typed[knob.name] = knob.coerce(value, allow_outside_range=allow_outside_range)
        return typed

    def with_defaults(self, overrides: Mapping[str, Any] | None = None, *,
                      allow_outside_range: bool = False) -> dict[str, Any]:
        """Full config: every knob's default, updated by the validated overrides. A subset also carries the
        defaults of the knobs its conditions refer to, so `Knob.is_active` can be evaluated on it."""
        full = self.defaults()
        refs = [ref for knob in self for ref in _condition_refs(knob.condition)]
        refs += [ref for rule in self.rules for ref in rule.knobs]
        for ref in refs:
            if ref not in full and ref in self._context:
                full[ref] = self._context[ref].default
        full.update(self.validate(overrides or {}, allow_outside_range=allow_outside_range))
        return full

    def check_rules(self, overrides: Mapping[str, Any], *, searched: Any = ()) -> None:
        """KnobError (one line: the rule, the values, why) when the configuration `overrides` (validated values;
        every other knob at its default, the trial settings' heap included) breaks a knob rule. Rules that use
        a knob of `searched` are left to the search, which keeps them."""
        from .rules import check

        searched = set(searched)
        rules = [rule for rule in self.rules if not searched & set(rule.knobs)]
        check(rules, self.with_defaults(overrides, allow_outside_range=True), overrides)

    # -- subsets
    def with_knob_defaults(self, defaults: Mapping[str, Any]) -> "KnobSpace":
        """The same space with these knobs' defaults set from the harness (e.g. the heap: the default
        configuration runs with the heap the trial settings give); a range is widened to hold its default."""
        def moved(knob: Knob) -> Knob:
            value = knob._typed(defaults[knob.name])   # the harness may sit outside the tuning range
            if knob.range is None:
                return dataclasses.replace(knob, default=value)
            lo, hi = knob.range   # the default stays a value of the knob's range
            return dataclasses.replace(knob, default=value, range=(min(lo, value), max(hi, value)))

        knobs = {name: moved(knob) if name in defaults else knob for name, knob in self.knobs.items()}
        context = {name: knobs.get(name, knob) for name, knob in self._context.items()}
        out = KnobSpace(self.system, self.version, knobs, self.knob_sets, reference_setup=self.reference_setup,
                        context=context, label=self.label, rules=self.rules)
        out.recipe = self.recipe
        return out

    def subset(self, spec: Any) -> "KnobSpace":
        """A knob set name ('irace23'), a list of knob names, a mapping or a YAML file path of the form
        {knobs: [names]} or {knobs: {name: {range: [lo, hi]} | {choices: [...]}}} (narrowing only)."""
        if isinstance(spec, Mapping):
            return self._subset_from_mapping(spec, "knob subset")
        if isinstance(spec, (list, tuple, set, frozenset)):
            return self._subset_from_mapping({"knobs": list(spec)}, "knob subset")
        if isinstance(spec, (str, os.PathLike)):
            text = os.fspath(spec)
            if isinstance(spec, str) and text in self.knob_sets:
                return self._subset_from_set(text)
            path = Path(text)
            if path.suffix.lower() in (".yaml", ".yml") or path.exists() or "/" in text or os.sep in text:
                if not path.is_file():
                    raise KnobError(f"knob subset file not found: {text}")
                data = _read_yaml(path, "knob subset file")
                if not isinstance(data, Mapping):
                    raise KnobError(f"knob subset file {text} must be a mapping with a 'knobs' entry")
                return self._subset_from_mapping(data, str(path), label=path.name)
            available = ", ".join(self.knob_sets) or "none"
            raise KnobError(f"unknown knob set '{text}' for {self.system}; available: {available}")
        raise KnobError(f"a knob subset is a set name, a list of knob names or a YAML file, got {spec!r}")

    def _subset_from_set(self, name: str) -> "KnobSpace":
        spec = self.knob_sets[name]
        ranges, choices = spec.get("ranges") or {}, spec.get("choices") or {}
        knobs = {}
        for knob_name in spec["knobs"]:
            knob = self._lookup(knob_name)
            knobs[knob_name] = _narrow(knob, ranges.get(knob_name), choices.get(knob_name),
                                       f"knob set {name}", within="bounds")
        return self._make_subset(knobs, label=name)

    def _subset_from_mapping(self, data: Mapping[str, Any], origin: str, label: str | None = None) -> "KnobSpace":
        """{knobs: names or name -> narrowing}, optionally on top of a knob set (`set: NAME`, whose ranges stay)
        and with some of its knobs left out (`leave_out: [names]`)."""
        unknown = set(data) - {"knobs", "description", "set", "leave_out"}
        if unknown:
            raise KnobError(f"{origin}: unknown entry {', '.join(sorted(map(str, unknown)))} "
                            "(expected 'knobs' and optionally 'set', 'leave_out' and 'description')")
        base = data.get("set")
        if base is not None and (not isinstance(base, str) or base not in self.knob_sets):
            raise KnobError(f"{origin}: set {base!r} is not a knob set of {self.system} "
                            f"({', '.join(self.knob_sets) or 'none'})")
        knobs = dict(self._subset_from_set(base).knobs) if base else {}
        entries = data.get("knobs") or ({} if base else None)
        if isinstance(entries, (list, tuple)):
            entries = {name: None for name in entries}
        if not isinstance(entries, Mapping) or not (entries or knobs):
            raise KnobError(f"{origin}: 'knobs' must be a non-empty list of knob names or a mapping "
                            "name -> {range: [lo, hi]} | {choices: [...]}")
        for name, narrowing in entries.items():
            knob = knobs.get(name) or self._lookup(name)
            if narrowing is None:
                narrowing = {}
            if not isinstance(narrowing, Mapping) or set(narrowing) - {"range", "choices"}:
                raise KnobError(f"{origin}: knob {name} takes {{range: [lo, hi]}} or {{choices: [...]}}, "
                                f"got {narrowing!r}")
            knobs[knob.name] = _narrow(knob, narrowing.get("range"), narrowing.get("choices"), origin,
                                       within="range")
        for name in data.get("leave_out") or ():
            if knobs.pop(name, None) is None:
                raise KnobError(f"{origin}: leave_out names {name!r}, which is not in the subset")
        if not knobs:
            raise KnobError(f"{origin}: no knob left")
        subset = self._make_subset(knobs, label=label or "subset")
        if base or data.get("leave_out"):
            subset.recipe = {k: data[k] for k in ("set", "knobs", "leave_out") if data.get(k)}
        return subset

    def _make_subset(self, knobs: Mapping[str, Knob], label: str) -> "KnobSpace":
        ordered = {name: knobs[name] for name in self.knobs if name in knobs}  # file order
        return KnobSpace(self.system, self.version, ordered, {}, reference_setup=self.reference_setup,
                         context=self._context, label=label, rules=self.rules)


def _narrow(knob: Knob, new_range: Any, new_choices: Any, origin: str, *, within: str) -> Knob:
    """The knob with a replaced range or choice list. within='range': only narrowing (user files);
    within='bounds': may differ from the tuning range but must stay inside the datastore's bounds."""
    changes: dict[str, Any] = {}
    if new_range is not None:
        if knob.type not in ("int", "float"):
            raise KnobError(f"{origin}: knob {knob.name} is {knob.type}; it takes choices, not a range")
        if not isinstance(new_range, (list, tuple)) or len(new_range) != 2:
            raise KnobError(f"{origin}: range of knob {knob.name} must be [lo, hi], got {new_range!r}")
        lo, hi = (knob._typed(v) for v in new_range)
        if lo > hi:
            raise KnobError(f"{origin}: range [{_num(lo)}, {_num(hi)}] of knob {knob.name} has lo > hi")
        if within == "range":
            klo, khi = knob.range
            if lo < klo or hi > khi:
                raise KnobError(f"{origin}: range [{_num(lo)}, {_num(hi)}] of knob {knob.name} is not inside "
                                f"its range [{_num(klo)}, {_num(khi)}]; a subset can only narrow a range")
        else:
            blo, bhi = knob._accepted()
            if (blo is not None and lo < blo) or (bhi is not None and hi > bhi):
                raise KnobError(f"{origin}: range [{_num(lo)}, {_num(hi)}] of knob {knob.name} goes beyond "
                                "the values the datastore accepts")
        if knob.applies == "design" and not lo <= knob.default <= hi:
            # a design range may leave the default design out (nodes 2..4): its nearest end is the default
            changes["default"] = lo if knob.default < lo else hi
        elif not lo <= knob.default <= hi:
            raise KnobError(f"{origin}: range [{_num(lo)}, {_num(hi)}] of knob {knob.name} leaves out its "
                            f"default {_num(knob.default)}")
        if knob.log and lo <= 0:
            raise KnobError(f"{origin}: knob {knob.name} is log-scaled; its range must stay above 0")
        changes["range"] = (lo, hi)
        changes["special"] = tuple(v for v in knob.special if lo <= v <= hi)
    if new_choices is not None:
        if knob.type != "enum":
            raise KnobError(f"{origin}: knob {knob.name} is {knob.type}; it takes a range, not choices")
        if not isinstance(new_choices, (list, tuple)) or not new_choices:
            raise KnobError(f"{origin}: choices of knob {knob.name} must be a non-empty list")
        picked = []
        for value in new_choices:
            try:
                choice = knob._typed(value)
            except KnobError:
                raise KnobError(f"{origin}: {value!r} is not a choice of knob {knob.name} "
                                f"({', '.join(map(str, knob.choices))})") from None
            if choice not in picked:
                picked.append(choice)
        if knob.default not in picked:
            raise KnobError(f"{origin}: choices of knob {knob.name} leave out its default {knob.default}")
        changes["choices"] = tuple(c for c in knob.choices if c in picked)
        changes["special"] = tuple(v for v in knob.special if v in picked)
    return replace(knob, **changes) if changes else knob


# ------------------------------------------------------------------------------------------------ loading

def _read_yaml(path: Path, what: str) -> Any:
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KnobError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KnobError(f"cannot read {what} {path}: {exc}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise KnobError(f"cannot parse {what} {path}{where}: {problem}") from None


def _build_knob(name: str, spec: Any, origin: str) -> Knob:
    def fail(what: str) -> KnobError:
        return KnobError(f"{origin}: knob {name}: {what}")

    if not isinstance(spec, Mapping):
        raise fail("spec must be a mapping of fields")
    unknown = sorted(set(map(str, spec)) - _KNOB_FIELDS)
    if unknown:
        raise fail(f"unknown field {', '.join(unknown)}")
    for req in _REQUIRED_FIELDS:
        if req not in spec:
            raise fail(f"field {req} is missing")
    kind = spec["type"]
    if kind not in TYPES:
        raise fail(f"field type must be one of {', '.join(TYPES)}, got {kind!r}")
    numeric = kind in ("int", "float")

    def number_pair(field_name: str, allow_none: bool) -> tuple | None:
        value = spec.get(field_name)
        if value is None:
            return None
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise fail(f"field {field_name} must be [lo, hi]")
        for v in value:
            if v is None and allow_none:
                continue
            if not _is_number(v) or (kind == "int" and not isinstance(v, int)):
                raise fail(f"field {field_name} must hold {'integers' if kind == 'int' else 'numbers'}, "
                           f"got {v!r}")
        return tuple(value)

    rng = bounds = choices = None
    if numeric:
        rng = number_pair("range", False)
        if rng is None:
            raise fail("field range is missing ([lo, hi] for int and float knobs)")
        if not rng[0] < rng[1]:
            raise fail(f"field range [{_num(rng[0])}, {_num(rng[1])}] must have lo < hi")
        bounds = number_pair("bounds", True)
        if bounds is not None:
            blo, bhi = bounds
            if (blo is not None and rng[0] < blo) or (bhi is not None and rng[1] > bhi):
                raise fail("field range goes beyond field bounds")
        if "choices" in spec:
            raise fail("field choices is only for enum knobs")
    else:
        for field_name in ("range", "bounds"):
            if field_name in spec:
                raise fail(f"field {field_name} is only for int and float knobs")
        if kind == "enum":
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise fail("field choices must be a non-empty list")
            seen = set()
            for c in choices:
                if isinstance(c, bool) or not isinstance(c, (str, int, float)):
                    raise fail(f"field choices holds {c!r}; choices are strings or numbers")
                if str(c).lower() in seen:
                    raise fail(f"field choices holds {c!r} twice")
                seen.add(str(c).lower())
            choices = tuple(choices)
        elif "choices" in spec:
            raise fail("field choices is only for enum knobs")

    unit = spec.get("unit")
    if unit is not None:
        if unit not in UNITS:
            raise fail(f"field unit must be one of {', '.join(UNITS)}, got {unit!r}")
        if kind == "float" or kind == "bool" or (kind == "enum" and not all(_is_number(c) for c in choices)):
            raise fail("field unit needs integer values (5.0 quantities are integers in their unit)")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise fail("field log must be true or false")
    if log and (not numeric or rng[0] <= 0):
        raise fail("field log needs a numeric range above 0")
    applies = spec["applies"]
    if applies not in APPLIES:
        raise fail(f"field applies must be one of {', '.join(APPLIES)}, got {applies!r}")
    key = spec["key"]
    if not isinstance(key, str) or not key.strip():
        raise fail("field key must be a non-empty string")
    if applies == "jvm":
        if "{value}" not in key:
            raise fail("field key of a jvm knob must be a flag template holding {value}")
    elif applies == "design":
        if key not in DESIGN_KEYS:
            raise fail(f"field key of a design knob must be one of {', '.join(DESIGN_KEYS)}, got {key!r}")
    elif applies == "config":
        if not re.fullmatch(r"[a-z][a-z0-9-]*( [^\n]*)?", key) or (" " in key and "{value}" not in key):
            raise fail(f"field key of a config knob must be a directive name, or a directive line holding "
                       f"{{value}}, got {key!r}")
    elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
        raise fail(f"field key must be a dotted name, got {key!r}")
    value_map = spec.get("value_map")
    if value_map is not None:
        if kind != "enum" or not isinstance(value_map, Mapping):
            raise fail("field value_map is a mapping for enum knobs only")
        for choice, written in value_map.items():
            if choice not in choices:
                raise fail(f"field value_map maps {choice!r}, which is not a choice")
            if isinstance(written, bool) or not isinstance(written, (str, int, float)):
                raise fail(f"field value_map maps {choice!r} to {written!r}; expected a string or number")
        value_map = dict(value_map)
    implies = spec.get("implies")
    if implies is not None:
        if kind != "enum" or applies != "yaml" or not isinstance(implies, Mapping):
            raise fail("field implies is a mapping for enum knobs of the yaml only")
        for choice, settings in implies.items():
            if choice not in choices:
                raise fail(f"field implies names {choice!r}, which is not a choice")
            if not isinstance(settings, Mapping) or not settings or not all(
                    isinstance(k, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", k) for k in settings):
                raise fail(f"field implies for {choice!r} must map yaml keys to values")
        implies = {choice: dict(settings) for choice, settings in implies.items()}
    for flag in ("reload",):
        if not isinstance(spec.get(flag, False), bool):
            raise fail(f"field {flag} must be true or false")
    for text_field in ("description", "live", "notes", "default_rule", "condition"):
        value = spec.get(text_field)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise fail(f"field {text_field} must be a non-empty string")
    for one_line in ("description", "live", "default_rule", "condition"):
        if "\n" in (spec.get(one_line) or ""):
            raise fail(f"field {one_line} must be one line")
    if spec.get("condition"):
        try:
            refs = _condition_refs(spec["condition"])
        except KnobError as exc:
            raise fail(f"field condition: {exc}") from None
        if name in refs:
            raise fail("field condition refers to the knob itself")
    sources = spec.get("sources", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) and s for s in sources):
        raise fail("field sources must be a list of strings")
    best = spec.get("best_practice")
    if best is not None:
        if not isinstance(best, Mapping) or set(best) != {"rule", "source"} \
                or not all(isinstance(v, str) and v.strip() for v in best.values()):
            raise fail("field best_practice must be {rule: EXPRESSION, source: TEXT}")
        if kind not in ("int", "float"):
            raise fail("field best_practice is for numeric knobs")
        from .best_practice import FACTS, evaluate

        try:
            evaluate(best["rule"], {f: 1 for f in FACTS})
        except KnobError as exc:
            raise fail(f"field {exc}") from None
        best = {"rule": best["rule"].strip(), "source": " ".join(best["source"].split())}
    special = spec.get("special", [])
    if not isinstance(special, list):
        raise fail("field special must be a list")

    knob = Knob(name=name, type=kind, default=None, description=spec["description"].strip(), applies=applies,
                key=key, range=rng, choices=choices, unit=unit, log=log, value_map=value_map,
                reload=spec.get("reload", False), live=spec.get("live"), condition=spec.get("condition"),
                special=(), sources=tuple(sources), notes=spec.get("notes"),
                default_rule=spec.get("default_rule"), bounds=bounds, best_practice=best, implies=implies)
    try:
        default = knob.coerce(spec["default"])
    except KnobError as exc:
        raise fail(f"field default: {exc}") from None
    typed_special = []
    for value in special:
        try:
            typed_special.append(knob.coerce(value))
        except KnobError as exc:
            raise fail(f"field special: {exc}") from None
    return replace(knob, default=default, special=tuple(typed_special))


def _build_space(data: Any, origin: str, system: str | None = None) -> KnobSpace:
    if not isinstance(data, Mapping):
        raise KnobError(f"{origin}: a knob space file is a mapping with system, version and knobs")
    unknown = sorted(set(map(str, data)) - _TOP_FIELDS)
    if unknown:
        raise KnobError(f"{origin}: unknown top-level field {', '.join(unknown)}")
    for req in ("system", "version", "knobs"):
        if req not in data:
            raise KnobError(f"{origin}: top-level field {req} is missing")
    if not isinstance(data["system"], str) or (system is not None and data["system"] != system):
        raise KnobError(f"{origin}: system must be {system or 'a name'}, got {data['system']!r}")
    if not isinstance(data["version"], str):
        raise KnobError(f"{origin}: version must be a quoted string like \"5.0\", got {data['version']!r}")
    raw_knobs = data["knobs"]
    if not isinstance(raw_knobs, Mapping) or not raw_knobs:
        raise KnobError(f"{origin}: knobs must be a non-empty mapping name -> spec")
    knobs: dict[str, Knob] = {}
    for name, spec in raw_knobs.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise KnobError(f"{origin}: knob name {name!r} must be lower_case_with_underscores")
        knobs[name] = _build_knob(name, spec, origin)
    # conditions refer to existing knobs, with values those knobs can take
    for knob in knobs.values():
        for ref, op, literal in _parse_condition(knob.condition) if knob.condition else ():
            if ref not in knobs:
                raise KnobError(f"{origin}: knob {knob.name}: field condition refers to unknown knob {ref}")
            target = knobs[ref]
            if op in (">", ">=", "<", "<=") and target.type not in ("int", "float"):
                raise KnobError(f"{origin}: knob {knob.name}: field condition compares {ref} ({target.type}) "
                                f"with '{op}'")
            for value in literal if isinstance(literal, tuple) else (literal,):
                try:
                    target.coerce(value, allow_outside_range=True)
                except KnobError as exc:
                    raise KnobError(f"{origin}: knob {knob.name}: field condition: {exc}") from None

    raw_sets = data.get("knob_sets") or {}
    if not isinstance(raw_sets, Mapping):
        raise KnobError(f"{origin}: knob_sets must be a mapping name -> set")
    space = KnobSpace(data["system"], data["version"], knobs, {},
                      reference_setup=(str(data["reference_setup"]).strip()
                                       if data.get("reference_setup") is not None else None))
    sets: dict[str, Mapping[str, Any]] = {}
    for set_name, spec in raw_sets.items():
        where = f"{origin}: knob set {set_name}"
        if not isinstance(set_name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", set_name):
            raise KnobError(f"{origin}: knob set name {set_name!r} must be a simple name")
        if not isinstance(spec, Mapping):
            raise KnobError(f"{where}: must be a mapping with description, source and knobs")
        unknown = sorted(set(map(str, spec)) - _SET_FIELDS)
        if unknown:
            raise KnobError(f"{where}: unknown field {', '.join(unknown)}")
        for req in ("description", "source", "knobs"):
            if not spec.get(req):
                raise KnobError(f"{where}: field {req} is missing")
        names = spec["knobs"]
        if not isinstance(names, list):
            raise KnobError(f"{where}: field knobs must be a list of knob names")
        for name in names:
            if name not in knobs:
                raise KnobError(f"{where}: field knobs names unknown knob {name!r}")
        if len(set(names)) != len(names):
            raise KnobError(f"{where}: field knobs names a knob twice")
        ranges, choices = spec.get("ranges") or {}, spec.get("choices") or {}
        for field_name, overrides in (("ranges", ranges), ("choices", choices)):
            if not isinstance(overrides, Mapping):
                raise KnobError(f"{where}: field {field_name} must be a mapping knob -> value")
            for name in overrides:
                if name not in names:
                    raise KnobError(f"{where}: field {field_name} names {name!r}, which is not in the set")
        for name in names:  # check every override now, as subset() applies it
            _narrow(knobs[name], ranges.get(name), choices.get(name), where, within="bounds")
        sets[set_name] = MappingProxyType({
            "description": " ".join(str(spec["description"]).split()),
            "source": " ".join(str(spec["source"]).split()),
            "knobs": tuple(names),
            "ranges": MappingProxyType({k: tuple(v) for k, v in ranges.items()}),
            "choices": MappingProxyType({k: tuple(v) for k, v in choices.items()}),
        })
    from .rules import build_rules

    rules = build_rules(data.get("rules"), knobs, origin)
    return KnobSpace(space.system, space.version, knobs, sets, reference_setup=space.reference_setup, rules=rules)


def _available_systems() -> list[str]:
    from importlib import resources

    return sorted(entry.name[: -len(".yaml")] for entry in resources.files(__name__).iterdir()
                  if entry.name.endswith(".yaml"))


def load_space(system: str = "cassandra") -> KnobSpace:
    """The knob space of `system`, read from <system>.yaml in this package (cached: one object per system)."""
    return _load_space(system)


@lru_cache(maxsize=None)
def _load_space(system: str) -> KnobSpace:
    from importlib import resources

    if not isinstance(system, str) or not _NAME.fullmatch(system) or system not in _available_systems():
        available = ", ".join(_available_systems())
        raise KnobError(f"unknown system {system!r}; available: {available}")
    resource = resources.files(__name__) / f"{system}.yaml"
    with resources.as_file(resource) as path:
        data = _read_yaml(path, "knob space")
    return _build_space(data, f"{system}.yaml", system=system)


def load_space_file(path: str | os.PathLike) -> KnobSpace:
    """A knob space read from any file (not cached): for tests and for spaces kept outside the package."""
    path = Path(path)
    return _build_space(_read_yaml(path, "knob space"), path.name)


# ------------------------------------------------------------------------------------------------ user input

def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """['concurrent_writes=64', ...] -> {'concurrent_writes': '64'}; values stay strings (validate coerces)."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = str(item).partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise KnobError(f"expected knob=value, got {item!r}")
        out[name] = value
    return out


def named_configs(system: str) -> list[str]:
    """The named configurations shipped for `system` (configs/<system>-<name>.yaml beside this module), e.g.
    Cassandra's `latest`."""
    folder = Path(__file__).parent / "configs"
    prefix = f"{system}-"
    return sorted(f.name[len(prefix):-len(".yaml")] for f in folder.iterdir()
                  if f.name.startswith(prefix) and f.name.endswith(".yaml"))


def is_named_config(ref: str | os.PathLike, system: str) -> bool:
    """Whether `ref` names a shipped configuration of `system` (and no file of that name exists)."""
    return not Path(ref).is_file() and str(ref) in named_configs(system)


def load_config(ref: str | os.PathLike, system: str) -> dict[str, Any]:
    """Knob values from a YAML file, or from a named configuration of `system` (e.g. `latest`) when `ref` is
    no file."""
    path = Path(ref)
    if is_named_config(ref, system):
        return load_overrides_file(Path(__file__).parent / "configs" / f"{system}-{ref}.yaml")
    if not path.is_file():
        names = named_configs(system)
        also = f" (or a named configuration of {system}: {', '.join(names)})" if names else ""
        raise KnobError(f"knob overrides file not found: {path}{also}")
    return load_overrides_file(path)


def load_overrides_file(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML mapping knob -> value; an empty file is no overrides."""
    path = Path(path)
    if not path.is_file():
        raise KnobError(f"knob overrides file not found: {path}")
    data = _read_yaml(path, "knob overrides file")
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise KnobError(f"knob overrides file {path} must be a mapping of knob: value, "
                        f"got {type(data).__name__}")
    for name in data:
        if not isinstance(name, str):
            raise KnobError(f"knob overrides file {path}: knob names are strings, got {name!r}")
    return dict(data)
