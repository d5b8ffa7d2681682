"""SMAC3 through its ask/tell interface (seed 003 used SMAC, through MLOS, on Cassandra and Redis).

The facade is SMAC's hyperparameter-optimization one: a random-forest surrogate, which handles integer,
real and categorical knobs and conditions natively through ConfigSpace, a Sobol initial design and
log-expected-improvement. A configuration is evaluated once (cold trials are the repeats the loop decides
on; SMAC's intensifier is told max_config_calls=1).
"""

from __future__ import annotations

import logging
import shutil
from typing import Any

from .base import Optimizer, Suggestion
from ..runtime.paths import make_folders, nearest_existing, remove_folders
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
    return cs


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

    def _to_config(self, configuration) -> dict[str, Any]:
        values = dict(configuration)
        return self.space.canonical({name: values[name] for name in values})

    def ask(self) -> Suggestion:
        import warnings

        with warnings.catch_warnings():
            # SMAC's local search logs the mean time of its steps at debug level, computed also when it took
            # none (numpy warns of an empty mean): the warning says nothing about the search
            warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
            warnings.filterwarnings("ignore", "invalid value encountered in scalar divide", RuntimeWarning)
            info = self.smac.ask()
        suggestion = Suggestion(self._to_config(info.config),
                                meta={"origin": str(getattr(info.config, "origin", None) or "")})
        self._pending[id(suggestion)] = info
        return suggestion

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        from smac.runhistory.dataclasses import TrialValue

        info = self._pending.pop(id(suggestion))
        self.smac.tell(info, TrialValue(cost=float(cost)), save=False)

    def observe(self, config: dict[str, Any], cost: float) -> None:
        from ConfigSpace import Configuration
        from smac.runhistory.dataclasses import TrialInfo, TrialValue

        canonical = self.space.canonical(config)
        values = {}
        for knob in self.space.knobs:
            if self.space.is_active(knob.name, canonical):
                value = canonical[knob.name]
                values[knob.name] = _label(value) if categorical(knob) else value
        try:
            configuration = Configuration(self.cs, values=values)
        except Exception:  # a value outside SMAC's space (e.g. a default outside the tuning range): skip it
            return
        self.smac.tell(TrialInfo(config=configuration, seed=self.seed), TrialValue(cost=float(cost)), save=False)

    def close(self) -> None:
        shutil.rmtree(self._outdir, ignore_errors=True)
        remove_folders(self._made)


def _never_called(config, seed: int = 0) -> float:  # SMAC wants a target function; ask/tell never calls it
    raise RuntimeError("SMAC's target function is not used with ask/tell")
