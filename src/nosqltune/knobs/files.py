"""Reading knob files (`<system>.yaml` next to this package, or a user's), named configurations and override
files into typed knob spaces and values; everything is checked when it is read."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from .knob import (APPLIES, DESIGN_KEYS, TYPES, UNITS, _KNOB_FIELDS, _NAME, _REQUIRED_FIELDS, _SET_FIELDS,
                   _TOP_FIELDS, Knob, KnobError, _condition_refs, _is_number, _num, _parse_condition, _read_yaml)
from .knob_space import KnobSpace, _narrow

# ------------------------------------------------------------------------------------------------ loading

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
    def own_condition(where: str, condition: str) -> None:   # readable, and not about the knob itself
        try:
            refs = _condition_refs(condition)
        except KnobError as exc:
            raise fail(f"field {where}: {exc}") from None
        if name in refs:
            raise fail(f"field {where} refers to the knob itself")

    if spec.get("condition"):
        own_condition("condition", spec["condition"])
    restaged = spec.get("restaged")
    if restaged is not None:
        if not spec.get("reload") or not isinstance(restaged, Mapping) or set(restaged) != {"when", "component"} \
                or not all(isinstance(v, str) and v.strip() and "\n" not in v for v in restaged.values()):
            raise fail("field restaged is {when: CONDITION, component: FILE SUFFIX}, for a knob with reload true")
        own_condition("restaged", restaged["when"])
        restaged = {"when": restaged["when"].strip(), "component": restaged["component"].strip()}
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
                default_rule=spec.get("default_rule"), bounds=bounds, bounds_why=spec.get("bounds_why"),
                best_practice=best, implies=implies,
                restaged=restaged)
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


def _check_fields(spec: Mapping, allowed: frozenset, required: tuple[str, ...], unknown_said: str, missing_said: str,
                  *, empty_is_missing: bool = True) -> None:
    """One line for the first unknown field of `spec`, or for the first required one it lacks (or leaves empty)."""
    unknown = sorted(set(map(str, spec)) - allowed)
    if unknown:
        raise KnobError(f"{unknown_said} {', '.join(unknown)}")
    for req in required:
        if (not spec.get(req)) if empty_is_missing else req not in spec:
            raise KnobError(f"{missing_said} {req} is missing")


def _build_space(data: Any, origin: str, system: str | None = None) -> KnobSpace:
    if not isinstance(data, Mapping):
        raise KnobError(f"{origin}: a knob space file is a mapping with system, version and knobs")
    _check_fields(data, _TOP_FIELDS, ("system", "version", "knobs"), f"{origin}: unknown top-level field",
                  f"{origin}: top-level field", empty_is_missing=False)
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
    # conditions (and the conditions of `restaged`) refer to existing knobs, with values those knobs can take
    for knob in knobs.values():
        for where, condition in (("condition", knob.condition), ("restaged", (knob.restaged or {}).get("when"))):
            for ref, op, literal in _parse_condition(condition) if condition else ():
                if ref not in knobs:
                    raise KnobError(f"{origin}: knob {knob.name}: field {where} refers to unknown knob {ref}")
                target = knobs[ref]
                if op in (">", ">=", "<", "<=") and target.type not in ("int", "float"):
                    raise KnobError(f"{origin}: knob {knob.name}: field {where} compares {ref} ({target.type}) "
                                    f"with '{op}'")
                for value in literal if isinstance(literal, tuple) else (literal,):
                    try:
                        target.coerce(value, allow_outside_range=True)
                    except KnobError as exc:
                        raise KnobError(f"{origin}: knob {knob.name}: field {where}: {exc}") from None

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
        _check_fields(spec, _SET_FIELDS, ("description", "source", "knobs"), f"{where}: unknown field",
                      f"{where}: field")
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

    return sorted(entry.name[: -len(".yaml")] for entry in resources.files(__package__).iterdir()
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
    resource = resources.files(__package__) / f"{system}.yaml"
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
