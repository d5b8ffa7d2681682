"""SMAC3 through its ask/tell interface (the MLOS / LlamaTune report used SMAC, through MLOS, on Cassandra
and Redis).

The facade is SMAC's hyperparameter-optimization one: a random-forest surrogate, which handles integer,
real and categorical knobs and conditions natively through ConfigSpace, a Sobol initial design and
log-expected-improvement. A configuration is evaluated once (cold trials are the repeats the loop decides
on; SMAC's intensifier is told max_config_calls=1).

Knob rules reach SMAC in two ways. A rule ConfigSpace can state becomes a forbidden clause of the space (the
region where the rule fails, with the fixed values and defaults of the knobs outside the search put in:
`memtable_heap_space <= heap_size / 2` with the heap fixed at 1024 is `memtable_heap_space > 512` forbidden), so
SMAC's sampling and local search never propose it. A rule it cannot state (arithmetic between two searched knobs,
as the same rule with the heap searched) is kept by rejection: a suggestion that breaks a rule is told back to
SMAC at once as crashed, with the penalty a failed trial gets, and SMAC is asked again. Every suggestion is
checked, forbidden clauses or not (ConfigSpace does not apply a clause to a knob whose condition is off, where the
rule sees the knob's default).
"""

from __future__ import annotations

import logging
import shutil
from typing import Any

from .base import Optimizer, Refusals, Suggestion
from ..runtime.paths import make_folders, nearest_existing, remove_folders
from ..knobs.rules import SYMBOLS, Expression, compare, equal
from ..knobs.space import TuningSpace, categorical, choices_of


def _label(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def configspace_of(space: TuningSpace, seed: int):
    """The ConfigSpace of a tuning space: categories as strings, conditions between knobs of the subset."""
    from ConfigSpace import (AndConjunction, Categorical, ConfigurationSpace, EqualsCondition, Float,
                             GreaterThanCondition, InCondition, Integer, LessThanCondition, NotEqualsCondition)

    cs = ConfigurationSpace(seed=seed)
    hps = {}
    for knob in space.knobs:
        if categorical(knob):
            hp = Categorical(knob.name, [_label(c) for c in choices_of(knob)], default=_label(knob.default))
        elif knob.type == "int":
            lo, hi = knob.range
            hp = Integer(knob.name, (int(lo), int(hi)), log=bool(knob.log and lo > 0),
                         default=int(min(max(knob.default, lo), hi)))
        else:
            lo, hi = knob.range
            hp = Float(knob.name, (float(lo), float(hi)), log=bool(knob.log and lo > 0),
                       default=float(min(max(knob.default, lo), hi)))
        hps[knob.name] = hp
    cs.add(list(hps.values()))
    conditions = []
    for knob in space.knobs:
        parts = []
        for ref, op, literal in space.clauses[knob.name]:
            child, parent = hps[knob.name], hps[ref]
            parent_knob = space.by_name[ref]
            value = (lambda v: _label(parent_knob.coerce(v))) if categorical(parent_knob) else (lambda v: v)
            if op == "==":
                parts.append(EqualsCondition(child, parent, value(literal)))
            elif op == "!=":
                parts.append(NotEqualsCondition(child, parent, value(literal)))
            elif op == "in":
                parts.append(InCondition(child, parent, [value(v) for v in literal]))
            elif op == "not in":
                others = [c for c in choices_of(parent_knob) if _label(c) not in {value(v) for v in literal}]
                parts.append(InCondition(child, parent, [_label(c) for c in others]))
            elif op in (">", ">="):
                parts.append(GreaterThanCondition(child, parent, literal if op == ">" else literal - 1e-9))
            else:
                parts.append(LessThanCondition(child, parent, literal if op == "<" else literal + 1e-9))
        if len(parts) == 1:
            conditions.append(parts[0])
        elif parts:
            conditions.append(AndConjunction(*parts))
    if conditions:
        cs.add(conditions)
    default = space.full(space.default())
    for rule in space.rules:
        if not rule.holds(default):   # ConfigSpace refuses a clause that forbids the default configuration
            continue
        forbidden = _forbidden(rule.expression.tree, space, hps, negate=False)
        if forbidden is not None and forbidden not in (_NOTHING, _EVERYTHING):
            cs.add(forbidden)
    return cs


# the region a part of a rule forbids when ConfigSpace needs no clause for it: none of the space, or all of it
_NOTHING, _EVERYTHING = "nothing", "everything"
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _forbidden(node, space: TuningSpace, hps: dict, negate: bool):
    """The ConfigSpace forbidden clause of the configurations where `node` is false (true, when `negate`): a
    clause, _NOTHING, _EVERYTHING, or None when ConfigSpace cannot state it."""
    import ast

    from ConfigSpace import ForbiddenAndConjunction, ForbiddenOrConjunction

    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _forbidden(node.operand, space, hps, not negate)
    if isinstance(node, ast.BoolOp):
        parts = [_forbidden(v, space, hps, negate) for v in node.values]
        if any(p is None for p in parts):
            return None
        # forbidden where (A and B) fails = where A fails or B fails; where (A or B) fails = where both fail
        union = isinstance(node.op, ast.And) != negate
        if union:
            if _EVERYTHING in parts:
                return _EVERYTHING
            parts = [p for p in parts if p != _NOTHING]
            return _NOTHING if not parts else parts[0] if len(parts) == 1 else ForbiddenOrConjunction(*parts)
        if _NOTHING in parts:
            return _NOTHING
        parts = [p for p in parts if p != _EVERYTHING]
        return _EVERYTHING if not parts else parts[0] if len(parts) == 1 else ForbiddenAndConjunction(*parts)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        op = SYMBOLS[type(node.ops[0])]
        if op in ("in", "not in"):
            return _forbidden_in(node, space, hps, op == "in" and not negate or op == "not in" and negate)
        left, right = _side(node.left, space), _side(node.comparators[0], space)
        if left is None or right is None:
            return None
        if not isinstance(left, tuple) and not isinstance(right, tuple):   # no searched knob: true or false
            return _EVERYTHING if compare(left, op, right) == negate else _NOTHING
        op = _NEGATE[op] if not negate else op   # the comparison that holds where the rule part fails
        if isinstance(left, tuple) and not isinstance(right, tuple):
            return _clause(left[1], op, right, space, hps)
        if isinstance(right, tuple) and not isinstance(left, tuple):
            return _clause(right[1], _FLIP[op], left, space, hps)
        return _relation(left[1], op, right[1], space, hps)
    return None


def _side(node, space: TuningSpace):
    """A comparison's operand: ('knob', name) for a searched knob, else its constant value (a fixed knob's value
    and any arithmetic without a searched knob folded), or None when it mixes a searched knob with arithmetic."""
    import ast

    if isinstance(node, ast.Name) and node.id in space.by_name:
        return ("knob", node.id)
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if names & set(space.by_name):
        return None
    return Expression(ast.unparse(node), space.defaults_full, "knob rule part").value(space.defaults_full)


def _clause(name: str, op: str, value: Any, space: TuningSpace, hps: dict):
    """The clause forbidding `knob op value` (the value a constant)."""
    import math

    from ConfigSpace import (ForbiddenEqualsClause, ForbiddenGreaterThanClause, ForbiddenGreaterThanEqualsClause,
                             ForbiddenInClause, ForbiddenLessThanClause, ForbiddenLessThanEqualsClause,
                             ForbiddenOrConjunction)

    knob, hp = space.by_name[name], hps[name]
    if categorical(knob):
        if op not in ("==", "!="):
            return None
        hit = [_label(c) for c in choices_of(knob) if equal(c, value) == (op == "==")]
        return _NOTHING if not hit else _EVERYTHING if len(hit) == len(choices_of(knob)) else \
            ForbiddenInClause(hp, hit) if len(hit) > 1 else ForbiddenEqualsClause(hp, hit[0])
    if isinstance(value, (bool, str)):
        return None
    lo, hi = knob.range
    if knob.type == "int":   # the same region in integers, with an integer bound
        if op in (">", "<="):
            value = math.floor(value)
        elif op in ("<", ">="):
            value = math.ceil(value)
        elif not float(value).is_integer():
            return _NOTHING if op == "==" else _EVERYTHING
        value = int(value)
    if op == "!=":
        return ForbiddenOrConjunction(_clause(name, "<", value, space, hps), _clause(name, ">", value, space, hps)) \
            if lo < value < hi else _clause(name, ">" if value <= lo else "<", value, space, hps)
    empty = {"<": value <= lo, "<=": value < lo, ">": value >= hi, ">=": value > hi, "==": not lo <= value <= hi}[op]
    full = {"<": value > hi, "<=": value >= hi, ">": value < lo, ">=": value <= lo, "==": False}[op]
    if empty:
        return _NOTHING
    if full:
        return _EVERYTHING
    kind = {"<": ForbiddenLessThanClause, "<=": ForbiddenLessThanEqualsClause, ">": ForbiddenGreaterThanClause,
            ">=": ForbiddenGreaterThanEqualsClause, "==": ForbiddenEqualsClause}[op]
    return kind(hp, value)


def _relation(left: str, op: str, right: str, space: TuningSpace, hps: dict):
    """The relation forbidding `left op right`, both searched numeric knobs."""
    from ConfigSpace import (ForbiddenEqualsRelation, ForbiddenGreaterThanEqualsRelation,
                             ForbiddenGreaterThanRelation, ForbiddenLessThanEqualsRelation, ForbiddenLessThanRelation,
                             ForbiddenOrConjunction)

    if categorical(space.by_name[left]) or categorical(space.by_name[right]):
        return None
    a, b = hps[left], hps[right]
    if op == "!=":
        return ForbiddenOrConjunction(ForbiddenLessThanRelation(a, b), ForbiddenGreaterThanRelation(a, b))
    return {"<": ForbiddenLessThanRelation, "<=": ForbiddenLessThanEqualsRelation, ">": ForbiddenGreaterThanRelation,
            ">=": ForbiddenGreaterThanEqualsRelation, "==": ForbiddenEqualsRelation}[op](a, b)


def _forbidden_in(node, space: TuningSpace, hps: dict, fails_outside: bool):
    """`knob in [...]` (or not in) on a searched categorical knob: forbidden outside the list (or inside it)."""
    import ast

    from ConfigSpace import ForbiddenEqualsClause, ForbiddenInClause

    if not (isinstance(node.left, ast.Name) and node.left.id in space.by_name):
        return None
    knob = space.by_name[node.left.id]
    if not categorical(knob) or not all(isinstance(e, (ast.Constant, ast.Name)) for e in node.comparators[0].elts):
        return None
    listed = [_side(e, space) for e in node.comparators[0].elts]
    if any(v is None or isinstance(v, tuple) for v in listed):
        return None
    inside = [c for c in choices_of(knob) if any(equal(c, v) for v in listed)]
    hit = [_label(c) for c in choices_of(knob) if (c in inside) != fails_outside]
    hp = hps[knob.name]
    return _NOTHING if not hit else _EVERYTHING if len(hit) == len(choices_of(knob)) else \
        ForbiddenInClause(hp, hit) if len(hit) > 1 else ForbiddenEqualsClause(hp, hit[0])


class SMACOptimizer(Optimizer):
    name = "smac"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        from smac import HyperparameterOptimizationFacade as HPO
        from smac.model.random_forest import RandomForest
        from smac import Scenario

        self.cs = configspace_of(self.space, self.seed)
        # SMAC writes its run history to a folder: the study's own side folder, not the machine's temporary one
        # (a killed tuner leaves it behind; the next run of the study reuses and clears it)
        self._made = make_folders(nearest_existing(self.workdir)[1])
        self._outdir = self.workdir / "smac"
        n = max(self.budget, 2)
        scenario = Scenario(self.cs, name="nosqltune", output_directory=self._outdir, deterministic=True,
                            n_trials=n, seed=self.seed)
        initial = self.options.get("initial")
        design = HPO.get_initial_design(scenario, n_configs=int(initial) if initial else None,
                                        n_configs_per_hyperparameter=10, max_ratio=0.25)
        intensifier = HPO.get_intensifier(scenario, max_config_calls=1)
        # HPO's own random forest (10 trees, every feature, leaves of 1) with two changes that leave what it
        # models alone: no leaf cap (SMAC 2.4 sets 2**20 leaves, which makes scikit-learn grow the trees
        # best-first and reserve room for them: ~0.15 s per tree on 10 points, against 2 ms uncapped), and
        # fitted and queried in this thread (SMAC asks joblib for every core, whose thread hand-offs cost more
        # than 10 small trees and take the cores from the datastore under test).
        model = RandomForest(scenario.configspace, log_y=True, n_trees=10, ratio_features=1.0, min_samples_split=2,
                             min_samples_leaf=1, max_leaf_nodes=None, instance_features=scenario.instance_features,
                             seed=scenario.seed, n_jobs=1)
        self.smac = HPO(scenario, _never_called, initial_design=design, intensifier=intensifier, model=model,
                        logging_level=logging.ERROR, overwrite=True)
        logging.getLogger("smac").setLevel(logging.ERROR)
        self._pending: dict[int, Any] = {}
        self._refusals = Refusals(self._tell_crashed)

    def _tell_crashed(self, info, cost: float) -> None:
        from smac.runhistory.dataclasses import TrialValue
        from smac.runhistory.enumerations import StatusType

        self.smac.tell(info, TrialValue(cost=float(cost), status=StatusType.CRASHED), save=False)

    def _to_config(self, configuration) -> dict[str, Any]:
        values = dict(configuration)
        return self.space.canonical({name: values[name] for name in values})

    def ask(self) -> Suggestion:
        import warnings

        from ..knobs import KnobError
        from ..knobs.space import MAX_DRAWS

        for _ in range(MAX_DRAWS):
            with warnings.catch_warnings():
                # SMAC's local search logs the mean time of its steps at debug level, computed also when it took
                # none (numpy warns of an empty mean): the warning says nothing about the search
                warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
                warnings.filterwarnings("ignore", "invalid value encountered in scalar divide", RuntimeWarning)
                info = self.smac.ask()
            config = self._to_config(info.config)
            if self.space.allowed(config):
                break
            self._refusals.refuse(info)   # a knob rule ConfigSpace could not state: SMAC hears it crashed
        else:
            raise KnobError(f"SMAC proposed {MAX_DRAWS} configurations in a row that break the knob rules")
        meta = {"origin": str(getattr(info.config, "origin", None) or "")}
        if self._refusals.count:
            meta["refused"] = self._refusals.count   # suggestions refused so far for a knob rule
        suggestion = Suggestion(config, meta=meta)
        self._pending[id(suggestion)] = info
        return suggestion

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        info = self._pending.pop(id(suggestion))
        self.smac.tell(info, self._value(cost), save=False)
        self._refusals.seen(float(cost))

    def tell_ran(self, suggestion: Suggestion, config: dict[str, Any], cost: float) -> None:
        # the asked trial stays without a result: SMAC's intensifier skips a configuration still running, and its
        # forest learns only finished trials; what ran is told as a configuration SMAC did not suggest
        info = self._pending.pop(id(suggestion))
        if not self._observe(config, cost):   # what ran is outside SMAC's space: told as the suggestion's cost
            self.smac.tell(info, self._value(cost), save=False)

    def observe(self, config: dict[str, Any], cost: float) -> None:
        self._observe(config, cost)

    def _observe(self, config: dict[str, Any], cost: float) -> bool:
        """Tell SMAC a configuration it did not suggest; False when its values are outside SMAC's space (a default
        outside the tuning range), which SMAC cannot be told."""
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo

        self._refusals.seen(float(cost))
        canonical = self.space.canonical(config)
        values = {}
        for knob in self.space.knobs:
            if self.space.is_active(knob.name, canonical):
                value = canonical[knob.name]
                values[knob.name] = _label(value) if categorical(knob) else value
        try:
            configuration = Configuration(self.cs, values=values)
        except Exception:  # noqa: BLE001 - ConfigSpace refuses a value in several ways
            return False
        # on the seed SMAC's own trials use (its intensifier takes the first one its run history holds), so that
        # the configuration is compared with them and never asked for again on another seed
        rh = self.smac.runhistory
        seed = next(iter(rh.keys())).seed if len(rh) else self.seed
        self.smac.tell(TrialInfo(config=configuration, seed=seed), self._value(cost), save=False)
        return True

    @staticmethod
    def _value(cost: float):
        from smac.runhistory.dataclasses import TrialValue

        return TrialValue(cost=float(cost))

    def close(self) -> None:
        shutil.rmtree(self._outdir, ignore_errors=True)
        remove_folders(self._made)


def _never_called(config, seed: int = 0) -> float:  # SMAC wants a target function; ask/tell never calls it
    raise RuntimeError("SMAC's target function is not used with ask/tell")
