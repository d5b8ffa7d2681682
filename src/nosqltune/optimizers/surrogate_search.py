"""The surrogate pipelines of RAFIKI and of the RF/GBDT tuning paper (Eppinger & Stoerl) as tuning strategies.

- `rafiki`: a few random configurations, then at every step: fit the neural-net ensemble to all
  measurements, search it with the genetic algorithm, and measure the configuration it recommends.
- `surrogate-sa`: the same loop with a random forest (hyperparameters tuned by grouped cross-validation on
  the measurements) searched by simulated annealing (the RF/GBDT paper's search).

RAFIKI searches its model over the whole space because it trains on hundreds of trials first; a tuning run
has a few dozen, and a model fitted to so few is wrong far from them (its optimum is then a corner it
extrapolated to). So the search runs in a trust region around the best measurement, which grows after an
improvement and shrinks after misses. When the search returns a configuration that was measured already, it searches again from another seed,
and after three tries takes a random configuration, so that every trial measures something new.

Knob rules: the random configurations are drawn among those that keep them, and both searches (surrogate.search)
return only a configuration that keeps them; what they return is checked again here.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from .base import Optimizer, Suggestion


class SurrogateSearch(Optimizer):
    name = "surrogate"
    model_kind = "rf"
    method = "anneal"
    RADIUS = (0.3, 0.02)     # trust region: start (share of each knob's range), smallest before a restart
    SEARCH = {"ga": {"population": 40, "generations": 40}, "anneal": {"chains": 32, "steps": 100}}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rng = random.Random(self.seed)
        initial = self.options.get("initial") or max(5, min(15, self.budget // 4))
        self._initial = [self.space.sample(self._rng) for _ in range(initial)]
        self._observed: dict[str, tuple[dict[str, Any], float]] = {}
        self._pending: dict[int, str] = {}   # asked, not told yet (a parallel study): never suggested twice
        self._replaced: set[str] = set()     # asked, and run as another configuration (tell_ran): never again
        self._asked = 0
        self._radius = self.RADIUS[0]
        self._best: float | None = None
        self._misses = 0

    def ask(self) -> Suggestion:
        suggestion = self._next()
        self._pending[id(suggestion)] = self.space.key(suggestion.config)
        return suggestion

    def _taken(self, config: dict[str, Any]) -> bool:
        key = self.space.key(config)
        return key in self._observed or key in self._pending.values() or key in self._replaced

    def _next(self) -> Suggestion:
        self._asked += 1
        while self._initial:
            config = self._initial.pop(0)
            if not self._taken(config):
                return Suggestion(config, meta={"phase": "initial"})
        if len(self._observed) < 3:
            return Suggestion(self.space.sample(self._rng), meta={"phase": "random"})
        return self._recommend()

    def _recommend(self) -> Suggestion:
        from ..surrogate.models import make_model
        from ..surrogate.search import Codec, search

        configs = [c for c, _ in self._observed.values()]
        costs = np.array([v for _, v in self._observed.values()], dtype=float)
        maximize = bool(np.all(costs <= 0))        # throughput costs are negated values; latencies positive
        y = np.maximum(-costs if maximize else costs, 1e-9)
        X = np.array([self.space.encode(c) for c in configs])
        options = {} if self.model_kind == "nn-ensemble" else {"trees": 100, "tune": len(configs) >= 30}
        model = make_model(self.model_kind, seed=self.seed + self._asked, **options)
        model.fit(X, y, groups=[self.space.key(c) for c in configs])
        sign = 1.0 if maximize else -1.0
        best = configs[int(np.argmax(sign * y))]
        # the model is searched in a trust region around the best measurement: a model fitted to a few dozen
        # points is wrong far from them, and its optimum there is usually a corner it extrapolated to
        full = Codec(self.space)
        codec = full.around(full.genome(best), self._radius)
        for attempt in range(3):
            try:
                result = search(codec, lambda rows: sign * np.log(model.predict(rows)), method=self.method,
                                seed=self.seed * 7919 + self._asked * 31 + attempt, start=[codec.genome(best)],
                                **self.SEARCH[self.method])
            except ValueError:   # nothing in the trust region keeps the knob rules
                break
            if not self._taken(result.config) and self.space.allowed(result.config):
                predicted = float(np.exp(sign * result.value))
                return Suggestion(result.config, meta={"phase": "model", "predicted": round(predicted, 6)})
        return Suggestion(self.space.sample(self._rng), meta={"phase": "random (model repeated itself)"})

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        self._pending.pop(id(suggestion), None)
        self.observe(suggestion.config, cost)

    def tell_ran(self, suggestion: Suggestion, config: dict[str, Any], cost: float) -> None:
        self._replaced.add(self._pending.pop(id(suggestion), self.space.key(suggestion.config)))
        self.observe(config, cost)

    def observe(self, config: dict[str, Any], cost: float) -> None:
        # the trust region grows after an improvement and shrinks after two misses in a row; when it gets
        # too small, it starts again at full size around the best (TuRBO's rule, Eriksson et al. 2019)
        if self._best is None or cost < self._best:
            if self._best is not None:
                self._radius = min(self.RADIUS[0], self._radius * 1.5)
            self._best, self._misses = cost, 0
        else:
            self._misses += 1
            if self._misses >= 2:
                self._radius, self._misses = self._radius / 2, 0
                if self._radius < self.RADIUS[1]:
                    self._radius = self.RADIUS[0]
        key = self.space.key(config)
        if key in self._observed:   # a configuration measured twice: keep the mean
            old = self._observed[key][1]
            cost = (old + cost) / 2
        self._observed[key] = (self.space.canonical(config), float(cost))


class Rafiki(SurrogateSearch):
    name = "rafiki"
    model_kind = "nn-ensemble"
    method = "ga"


class SurrogateAnnealing(SurrogateSearch):
    name = "surrogate-sa"
    model_kind = "rf"
    method = "anneal"
