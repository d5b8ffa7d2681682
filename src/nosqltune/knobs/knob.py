"""The knob: one setting of a datastore that can be tuned, its type, range, default, unit and where it goes, and
its condition on other knobs; checked and coerced values of it."""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..errors import NosqltuneError

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
    "implies", "restaged", "bounds_why"})
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
    bounds_why: str | None = None  # why the upper bound is below the datastore's own (thread counts)
    best_practice: dict | None = field(default=None, hash=False)  # {rule, source}: a documented rule of thumb
    implies: dict | None = field(default=None, hash=False)  # enum choice -> {yaml key: value} it needs beside it
    # a reload knob that restored data can be brought to: {"when": condition, "component": file suffix}. Where
    # `when` holds, the dataset is not keyed by it; a trial imports the restored SSTables again without the
    # component, which the datastore rebuilds with the knob's value as each one opens (bloom filters: Filter.db)
    restaged: dict | None = field(default=None, hash=False)

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

    def bounds_text(self, above: bool) -> str:
        """The accepted values as an error message names them: the datastore's, or, for a value `above` a bound
        narrower than the datastore's own (thread counts), that bound and why."""
        lo, hi = self._accepted()
        if self.bounds_why and not above:
            hi = None   # the datastore's own upper bound is none
        shown = (f"[{_num(lo)}, {_num(hi)}]" if lo is not None and hi is not None
                 else f">= {_num(lo)}" if lo is not None else f"<= {_num(hi)}")
        if above and self.bounds_why:
            return f"the values it takes ({shown}: {self.bounds_why})"
        return f"the values the datastore accepts ({shown})"

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
                    raise KnobError(f"knob {self.name}={_num(typed)} is outside "
                                    f"{self.bounds_text(bhi is not None and typed > bhi)}")
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
        return self._holds(self.condition, config)

    def is_restaged(self, config: Mapping[str, Any]) -> bool:
        """Whether restored data is brought to this knob's value under `config` (a full config) rather than
        loaded with it (see `restaged`)."""
        return bool(self.restaged) and self._holds(self.restaged["when"], config)

    def _holds(self, condition: str | None, config: Mapping[str, Any]) -> bool:
        if not condition:
            return True
        for name, op, literal in _parse_condition(condition):
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


def _read_yaml(path: Path, what: str) -> Any:
    import yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KnobError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KnobError(f"cannot read {what} {path}: {exc}") from None
    try:   # libyaml's loader where PyYAML was built with it: the same answers, about 8x faster on cassandra.yaml
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 (a safe loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise KnobError(f"cannot parse {what} {path}{where}: {problem}") from None
