"""Gaussian-process Bayesian optimization (Vorstella's blog post tuned Cassandra's p99 latency this way).

The model is scikit-learn's GaussianProcessRegressor (maintained, CPU-only, no torch): a Matern 5/2 kernel
with one length scale per input plus a white-noise term, since cold trials are noisy. Inputs are the knobs
mapped to [0, 1] (log scale where the knob says so) and categories one-hot (integers are rounded when
decoded), which is how mixed integer / real / categorical spaces are usually given to a GP. The acquisition
function is expected improvement, maximized over random configurations plus neighbours of the best ones.
The first `initial` suggestions are random (a space-filling start). Knob rules are kept by rejection: the random
candidates are drawn among the configurations that keep them, and a neighbour that breaks one is dropped before
the acquisition function sees it.

With `cost_aware` (tune --cost-aware), expected improvement is divided by the machine time the suggestion is
expected to take, as Snoek, Larochelle and Adams proposed ("Practical Bayesian optimization of machine learning
algorithms", NIPS 2012: EI per second). Where their model of the time is a second GP, ours has two levels, because
a cold trial's time here is set by one thing: a configuration whose dataset-shaping knobs (`reload: true`:
compression, chunk length, SSTable format, compaction, bloom filter chance where it is not `restaged`) match a
dataset the study already built costs a trial (the mean of the trials that built nothing); one that needs a new
dataset costs a trial and a build (the mean of the builds so far). Until a build and a plain trial have both been
seen, plain EI decides. A configuration that needs a build is still chosen when its EI is worth the build: the
search gives up no region, it only stops paying a build for a small expected gain.

Asked again before earlier suggestions are told (a parallel study), the GP is fitted with each pending
configuration given the best cost seen so far as a stand-in (the "constant liar" CL-min of Ginsbourger, Le Riche
and Carraro, "Kriging is well-suited to parallelize optimization", 2010): expected improvement vanishes near a
pending point, so one batch spreads over the space instead of asking for the same optimum N times.
"""

from __future__ import annotations

import random
from typing import Any

from .base import Optimizer, Suggestion
from ..knobs.space import categorical, choices_of, from_unit, to_unit


class GaussianProcessBO(Optimizer):
    name = "gp"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        dims = len(self.space.knobs)
        default_initial = max(3, min(2 * dims, self.budget // 4))
        self.initial = int(self.options.get("initial", default_initial))
        self.candidates = int(self.options.get("candidates", 1000))
        self.xi = float(self.options.get("xi", 0.01))
        self._rng = random.Random(self.seed)
        self._configs: list[dict[str, Any]] = []
        self._costs: list[float] = []
        self._pending: dict[int, dict[str, Any]] = {}   # asked, not told yet: id(suggestion) -> config
        self._replaced: set = set()              # asked, and run as another configuration (tell_ran): never again
        self._asked = 0
        self.cost_aware = bool(self.options.get("cost_aware", False))
        self._datasets: set[tuple] = set()       # the dataset keys the study has (built or restored)
        self._run_s: list[float] = []            # trials that built nothing
        self._build_s: list[float] = []          # trials that built their dataset
        self.last_choice: dict[str, Any] | None = None   # the cost-aware choice of the last ask

    # -- the interface
    def ask(self) -> Suggestion:
        self._asked += 1
        if len(self._costs) < self.initial or len(set(self._costs)) < 2:
            suggestion = Suggestion(self._fresh(lambda: self.space.sample(self._rng)), meta={"phase": "initial"})
        else:
            self.last_choice = None
            config, ei = self._maximize_ei()
            suggestion = Suggestion(config, meta={"phase": "ei", "ei": ei,
                                                  **({"pending": len(self._pending)} if self._pending else {}),
                                                  **({"expected_s": self.last_choice["seconds"]}
                                                     if self.last_choice else {})})
        self._pending[id(suggestion)] = suggestion.config
        return suggestion

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        self._pending.pop(id(suggestion), None)
        self.observe(suggestion.config, cost)

    def tell_ran(self, suggestion: Suggestion, config: dict[str, Any], cost: float) -> None:
        self._pending.pop(id(suggestion), None)
        self._replaced.add(self.space.key(suggestion.config))
        self.observe(config, cost)

    def observe(self, config: dict[str, Any], cost: float) -> None:
        self._configs.append(self.space.canonical(config))
        self._costs.append(float(cost))

    def spent(self, config: dict[str, Any], seconds: float, built: bool) -> None:
        if seconds <= 0:   # a trial with no stored time (a failure before it ran): nothing learnt
            return
        self._datasets.add(self._dataset(config))
        (self._build_s if built else self._run_s).append(float(seconds))

    def _dataset(self, config: dict[str, Any]) -> tuple:
        return self.space.dataset_shape(config)

    def expected_seconds(self, configs: list[dict[str, Any]]) -> list[float] | None:
        """The machine time each configuration's trial is expected to take: a plain trial, plus a build when its
        dataset is not one the study has; None until both a plain trial and a building one were seen."""
        if not (self._run_s and self._build_s):
            return None
        run = sum(self._run_s) / len(self._run_s)
        build = max(0.0, sum(self._build_s) / len(self._build_s) - run)
        return [run + (0.0 if self._dataset(c) in self._datasets else build) for c in configs]

    # -- internals
    def _seen(self) -> set:
        return {self.space.key(c) for c in [*self._configs, *self._pending.values()]} | self._replaced

    def _fresh(self, draw) -> dict[str, Any]:
        seen = self._seen()
        config = draw()
        for _ in range(50):
            if self.space.key(config) not in seen:
                break
            config = draw()
        return config

    def _fit(self):
        import numpy as np
        from sklearn.gaussian_process import GaussianProcessRegressor
        from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

        lie = min(self._costs)   # pending configurations: the constant liar
        X = np.array([self.space.encode(c) for c in [*self._configs, *self._pending.values()]])
        y = np.array([*self._costs, *[lie] * len(self._pending)])
        kernel = (ConstantKernel(1.0, (1e-3, 1e3))
                  * Matern(length_scale=np.full(X.shape[1], 0.5), length_scale_bounds=(1e-2, 1e2), nu=2.5)
                  + WhiteKernel(1e-2, (1e-6, 1.0)))
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=1,
                                      random_state=self._rng.randrange(2**31))
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence warnings of the kernel fit on few points
            gp.fit(X, y)
        return gp

    def _neighbour(self, config: dict[str, Any], scale: float) -> dict[str, Any]:
        out = dict(config)
        for knob in self.space.knobs:
            if categorical(knob):
                if self._rng.random() < 0.2:
                    out[knob.name] = self._rng.choice(choices_of(knob))
            elif self._rng.random() < 0.5:
                u = to_unit(knob, out[knob.name]) + self._rng.gauss(0.0, scale)
                out[knob.name] = from_unit(knob, u)
        return self.space.canonical(out)

    def _maximize_ei(self) -> tuple[dict[str, Any], float]:
        import numpy as np
        from scipy.stats import norm

        gp = self._fit()
        seen = self._seen()
        order = np.argsort(self._costs)
        best = [self._configs[i] for i in order[:5]]
        pool = [self.space.sample(self._rng) for _ in range(self.candidates)]
        pool += [self._neighbour(c, s) for c in best for s in (0.05, 0.15) for _ in range(self.candidates // 20)]
        keys, unique = set(), []
        for c in pool:
            k = self.space.key(c)
            if k not in seen and k not in keys and self.space.allowed(c):
                keys.add(k)
                unique.append(c)
        if not unique:
            return self.space.sample(self._rng), 0.0
        X = np.array([self.space.encode(c) for c in unique])
        mu, sigma = gp.predict(X, return_std=True)
        y_best = min(self._costs)
        spread = float(np.std(self._costs)) or 1.0
        improvement = y_best - mu - self.xi * spread
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(sigma > 0, improvement / sigma, 0.0)
            ei = np.where(sigma > 0, improvement * norm.cdf(z) + sigma * norm.pdf(z), np.maximum(improvement, 0))
        seconds = self.expected_seconds(unique) if self.cost_aware else None
        if seconds is None:
            i = int(np.argmax(ei))
            return unique[i], float(ei[i])
        per_second = ei / np.array(seconds)
        i = int(np.argmax(per_second))
        self.last_choice = {"ei": float(ei[i]), "seconds": round(seconds[i], 1), "ei_best": float(np.max(ei))}
        return unique[i], float(ei[i])
