"""A datastore's knob space: its knobs in file order, their named sets and user-narrowed subsets, the rules between
them, and validation of whole configurations."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping

from .knob import _LEGACY_SUFFIXES, Knob, KnobError, _condition_refs, _num, _read_yaml

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
        defaults of the knobs its conditions refer to, so `Knob.is_active` (and `is_restaged`) can be evaluated
        on it."""
        full = self.defaults()
        refs = [ref for knob in self for ref in _condition_refs(knob.condition)]
        refs += [ref for knob in self if knob.restaged for ref in _condition_refs(knob.restaged["when"])]
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

        return self._replaced(lambda knob: moved(knob) if knob.name in defaults else knob)

    def without_restaging(self) -> "KnobSpace":
        """The same space where no knob is brought to restored data (`restaged` off): for trials that load their
        data with every dataset-shaping knob (a cluster, data loaded per trial)."""
        return self._replaced(lambda knob: dataclasses.replace(knob, restaged=None) if knob.restaged else knob)

    def with_recorded(self, recorded: Mapping[str, Knob]) -> "KnobSpace":
        """The same space (its sets, rules and other knobs) where these knobs are as a recording defined them: a
        surrogate's dataset answers only within the ranges and choices it was measured over, which the datastore's
        may have outgrown since (5.0's UnifiedCompaction beside wide24's SizeTiered and Leveled)."""
        return self._replaced(lambda knob: recorded.get(knob.name, knob))

    def _replaced(self, change) -> "KnobSpace":
        knobs = {name: change(knob) for name, knob in self.knobs.items()}
        context = {name: knobs[name] if name in knobs else change(knob) for name, knob in self._context.items()}
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

    def _subset_from_set(self, name: str, leave_out: Iterable[str] = ()) -> "KnobSpace":
        """A named set, less the knobs `leave_out` names (never narrowed: a set's choices for a knob left out may
        not hold its default here, e.g. v5's compaction strategies beside the time-series table's TimeWindow)."""
        spec = self.knob_sets[name]
        ranges, choices = spec.get("ranges") or {}, spec.get("choices") or {}
        knobs = {}
        for knob_name in spec["knobs"]:
            if knob_name in leave_out:
                continue
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
        leave_out = list(data.get("leave_out") or ())
        in_base = set(self.knob_sets[base]["knobs"]) if base else set()
        knobs = dict(self._subset_from_set(base, leave_out).knobs) if base else {}
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
            # a user's file may narrow a range or widen it (a node larger than the rig: a larger heap, more
            # threads), within the values the datastore accepts (the knob's bounds); the physical design only
            # within its range (the nodes this machine can run)
            knobs[knob.name] = _narrow(knob, narrowing.get("range"), narrowing.get("choices"), origin,
                                       within="range" if knob.applies == "design" else "bounds")
        for name in leave_out:
            if knobs.pop(name, None) is None and name not in in_base:
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
                                f"{knob.bounds_text(bhi is not None and hi > bhi)}")
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
