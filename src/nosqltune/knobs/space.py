"""The search space an optimizer sees: the tunable knobs of a knob (sub)space, with their conditions.

A knob whose condition can never hold inside the subset (it refers to a knob left out of the subset whose
default switches it off, e.g. file_cache_size while file_cache_enabled stays false) is inert: it is left out
of the search and reported in `inert`. Conditions that refer only to knobs outside the subset and hold at
their defaults are dropped (always true). What remains are clauses between knobs of the subset.

Configurations are canonical: every tunable knob has a typed value, floats are rounded to `FLOAT_DIGITS`
decimals (significant digits on a log scale, where 0.0012 and 0.001 differ by a fifth), and a knob whose
condition is off under the configuration holds its default (so two configurations that set Cassandra up the
same way compare equal).

Knob rules (knobs.rules) bind the search: `allowed` says whether a configuration keeps every rule that uses a
searched knob (on the full configuration: fixed values and defaults filled in), `sample` draws until it does, and
each optimizer either asks `allowed` of its candidates or passes the rules on in its own terms.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any, Mapping

import orjson

from .knob import Knob, KnobError, _parse_condition
from .knob_space import KnobSpace

FLOAT_DIGITS = 3
MAX_DRAWS = 10_000   # draws `sample` makes before it gives up on finding a configuration that keeps the rules
CANONICAL_MEMO = 100_000   # configurations a space remembers in canonical form (a few KB each at most)


def round_float(knob: Knob, value: float) -> float:
    """A float knob's value as configurations keep it: FLOAT_DIGITS decimals, or FLOAT_DIGITS significant
    digits when the knob is searched on a log scale (bloom_filter_fp_chance over [0.001, 0.1])."""
    if knob.log and value > 0:
        return float(f"{value:.{FLOAT_DIGITS}g}")
    return round(float(value), FLOAT_DIGITS)


class TuningSpace:
    def __init__(self, space: KnobSpace, fixed: Mapping[str, Any] | None = None) -> None:
        """`fixed`: values of knobs outside the subset that hold during tuning (validated by the caller);
        conditions that refer to them are evaluated on these values instead of the defaults."""
        self.knob_space = space
        defaults = {**space.with_defaults({}), **(fixed or {})}
        self.defaults_full = defaults
        self.knobs: list[Knob] = []
        self.inert: list[str] = []
        self.clauses: dict[str, tuple[tuple[str, str, Any], ...]] = {}
        for knob in space:
            kept = []
            always_off = False
            for name, op, literal in (_parse_condition(knob.condition) if knob.condition else ()):
                if name in space:
                    kept.append((name, op, literal))
                else:
                    single = Knob(name=knob.name, type=knob.type, default=knob.default, description="",
                                  applies=knob.applies, key=knob.key, condition=_clause_text(name, op, literal))
                    if not single.is_active(defaults):
                        always_off = True
            if always_off:
                self.inert.append(knob.name)
                continue
            self.knobs.append(knob)
            self.clauses[knob.name] = tuple(kept)
        if not self.knobs:
            raise ValueError(f"{space!r} has no knob that can take effect: nothing to tune")
        self.names = [k.name for k in self.knobs]
        self.by_name = {k.name: k for k in self.knobs}
        # the rules that bind the search: over a searched knob, and binding with the knobs searched or fixed (a rule
        # over fixed knobs alone is the caller's to check, KnobSpace.check_rules: a stored study is read as it ran)
        set_knobs = {*self.names, *(fixed or {})}
        self.rules = tuple(rule for rule in space.rules if rule.binds(set_knobs) and set(rule.knobs) & set(self.names))

    # -- conditions
    def is_active(self, name: str, config: Mapping[str, Any]) -> bool:
        if not self.clauses[name]:   # most knobs have no condition
            return True
        full = {**self.defaults_full, **config}
        for ref, single in self._clause_knobs(name):
            if not single.is_active(full):
                return False
            if ref in self.by_name and not self.is_active(ref, config):  # a parent that is off switches off
                return False
        return True

    def _clause_knobs(self, name: str) -> list[tuple[str, Knob]]:
        """Each clause of the knob's condition as (the knob it refers to, a knob holding that clause alone), made
        once: reading a study of thousands of trials asks this for every knob of every trial."""
        cache = self.__dict__.setdefault("_clause_cache", {})
        if name not in cache:
            cache[name] = [(ref, Knob(name=name, type="int", default=0, description="", applies="yaml", key=name,
                                      condition=_clause_text(ref, op, literal)))
                           for ref, op, literal in self.clauses[name]]
        return cache[name]

    # -- rules
    def full(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The configuration a trial runs with: the canonical values over the fixed values and defaults."""
        return {**self.defaults_full, **self.canonical(config)}

    def broken(self, config: Mapping[str, Any]) -> list:
        """The rules `config` breaks (knobs.rules.Rule; empty when it keeps them all)."""
        if not self.rules:
            return []
        full = self.full(config)
        return [rule for rule in self.rules if not rule.holds(full)]

    def allowed(self, config: Mapping[str, Any]) -> bool:
        return not self.broken(config)

    # -- datasets
    def shaping(self) -> list[Knob]:
        """The searched knobs that shape the loaded data (`reload: true`)."""
        return [k for k in self.knobs if k.reload]

    def dataset_shape(self, config: Mapping[str, Any]) -> tuple:
        """What keys the configuration's dataset, as far as the knobs tell: the values of its dataset-shaping
        knobs, less those a single node brings restored data to (`restaged`, e.g. the bloom filter's chance on big
        SSTables; a cluster builds for them too, which this does not know)."""
        full = self.full(config)
        return tuple((k.name, full[k.name]) for k in self.shaping() if not k.is_restaged(full))

    def allowed_columns(self, columns: Mapping[str, Any], n: int) -> Any:
        """Which of `n` configurations keep the rules, given as columns (knob -> numpy array of its values:
        choices for enums and booleans, numbers otherwise); knobs without a column hold their fixed value or
        default. A numpy array of n booleans."""
        import numpy as np

        ok = np.ones(n, dtype=bool)
        values = {**self.defaults_full, **columns}
        for rule in self.rules:
            ok &= np.broadcast_to(np.asarray(rule.expression.values(values), dtype=bool), (n,))
        return ok

    # -- values
    def default(self) -> dict[str, Any]:
        return {k.name: k.default for k in self.knobs}

    def canonical(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The configuration as the space holds it: every searched knob typed and rounded, knobs switched off by
        their condition at their default. Remembered by content (a reader of a study of thousands of trials
        asks again for the same ones); a copy is returned."""
        try:   # orjson: the memo's key only (a reader of 10,000 trials makes 10,000 of them)
            text = orjson.dumps(config, option=orjson.OPT_SORT_KEYS)
        except TypeError:   # orjson.JSONEncodeError: a value JSON cannot hold
            return self._canonical(config)
        memo = self.__dict__.setdefault("_canonical_memo", {})
        if text not in memo:
            if len(memo) >= CANONICAL_MEMO:
                memo.clear()
            memo[text] = self._canonical(config)
        return dict(memo[text])

    def _canonical(self, config: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for knob in self.knobs:
            value = config.get(knob.name, knob.default)
            if not (type(value) is int and knob.type == "int" and knob.range   # typed and in range already
                    and knob.range[0] <= value <= knob.range[1]):
                value = knob.coerce(value, allow_outside_range=True)
            if knob.type == "float":
                value = round_float(knob, value)
            out[knob.name] = value
        for knob in self.knobs:
            if not self.is_active(knob.name, out):
                out[knob.name] = knob.default
        return out

    def key(self, config: Mapping[str, Any]) -> str:
        """A string that is equal for equal canonical configurations."""
        return json.dumps(self.canonical(config), sort_keys=True)

    def sample(self, rng: random.Random) -> dict[str, Any]:
        """Uniform over each knob's range (log-uniform where the knob says so), uniform over choices, among the
        configurations that keep the rules (rejection: drawn again until one does)."""
        for _ in range(MAX_DRAWS):
            config = self.canonical({k.name: sample_knob(k, rng) for k in self.knobs})
            if self.allowed(config):
                return config
        names = ", ".join(rule.name for rule in self.rules)
        raise KnobError(f"no configuration in {MAX_DRAWS} random draws keeps the knob rules ({names}): the fixed "
                        "values leave them no room; fix other values or search other knobs")

    # -- numeric view for models: numbers to [0, 1] (log scale where set), categories one-hot
    def width(self) -> int:
        return sum(len(choices_of(k)) if categorical(k) else 1 for k in self.knobs)

    def encode(self, config: Mapping[str, Any]) -> list[float]:
        config = self.canonical(config)
        row: list[float] = []
        for knob in self.knobs:
            if categorical(knob):
                row.extend(1.0 if _same(config[knob.name], c) else 0.0 for c in choices_of(knob))
            else:
                row.append(to_unit(knob, config[knob.name]))
        return row


def categorical(knob: Knob) -> bool:
    return knob.type in ("bool", "enum")


def choices_of(knob: Knob) -> tuple:
    return (False, True) if knob.type == "bool" else tuple(knob.choices or ())


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def to_unit(knob: Knob, value: float) -> float:
    lo, hi = knob.range
    if hi == lo:
        return 0.5
    value = min(max(float(value), lo), hi)
    if knob.type == "int":  # the middle of the integer's cell, so that from_unit(to_unit(v)) == v
        if knob.log and lo > 0:
            return (math.log(value + 0.5) - math.log(lo)) / (math.log(hi + 1) - math.log(lo))
        return (value - lo + 0.5) / (hi - lo + 1)
    if knob.log and lo > 0:
        return (math.log(value) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return (value - lo) / (hi - lo)


def from_unit(knob: Knob, u: float) -> Any:
    lo, hi = knob.range
    u = min(max(float(u), 0.0), 1.0)
    if knob.type == "int":
        if knob.log and lo > 0:
            # equal width per integer on the log scale: log-uniform over [lo, hi + 1)
            value = math.exp(math.log(lo) + u * (math.log(hi + 1) - math.log(lo)))
            return int(min(max(math.floor(value), lo), hi))
        return int(min(max(math.floor(lo + u * (hi - lo + 1)), lo), hi))
    if knob.log and lo > 0:
        return math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    return lo + u * (hi - lo)


def sample_knob(knob: Knob, rng: random.Random) -> Any:
    if categorical(knob):
        return rng.choice(choices_of(knob))
    return from_unit(knob, rng.random())


def _clause_text(name: str, op: str, literal: Any) -> str:
    if isinstance(literal, tuple):
        return f"{name} {op} [{', '.join(map(str, literal))}]"
    return f"{name} {op} {literal}"
