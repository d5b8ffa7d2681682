"""Fit a surrogate to a study, and recommend a configuration for a workload by searching it."""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..objective import Objective


def noise(table, metric: str) -> dict[str, Any]:
    """The measurement noise: the coefficient of variation of repeated runs of one configuration on one
    workload (a collection repeats the default), pooled over the workloads."""
    groups: dict[tuple[str, str], list[float]] = {}
    y, mask = table.target(metric)
    for i in np.flatnonzero(mask):
        groups.setdefault((table.configs[i], table.workloads[i]), []).append(float(y[i]))
    cvs = [statistics.stdev(v) / statistics.fmean(v) for v in groups.values() if len(v) > 1]
    return {"cv": math.sqrt(statistics.fmean([c * c for c in cvs])) if cvs else None, "groups": len(cvs)}


def best_measured(table, metric: str) -> dict[str, Any]:
    """Per workload: the best configuration measured in the data (the RF/GBDT paper compared its tuned
    configurations with the best training example)."""
    maximize = Objective.parse(metric).maximize
    y, mask = table.target(metric)
    out: dict[str, Any] = {}
    for i in np.flatnonzero(mask):
        name = table.workloads[i]
        better = name not in out or (y[i] > out[name]["value"] if maximize else y[i] < out[name]["value"])
        if better:
            out[name] = {"value": float(y[i]), "config": table.raw_configs[i], "read_ratio": table.read_ratios[i]}
    return out


def fit(table, kind: str, metric: str, seed: int = 0, **options: Any) -> tuple[Any, dict[str, Any]]:
    from .accuracy import scores
    from .models import make_model

    y, mask = table.target(metric)
    if mask.sum() < 5:
        from ..errors import UsageError

        raise UsageError(f"only {int(mask.sum())} trials have {metric}: too few to fit a model")
    started = time.perf_counter()
    model = make_model(kind, seed=seed, **options)
    model.fit(table.X[mask], y[mask], groups=[c for c, m in zip(table.configs, mask) if m])
    seconds = time.perf_counter() - started
    meta = {"kind": kind, "metric": metric, "maximize": Objective.parse(metric).maximize,
            "spec": table.spec.to_dict(), "trials": int(mask.sum()), "seed": seed, "fit_seconds": seconds,
            "params": getattr(model, "params", {}), "training": scores(y[mask], model.predict(table.X[mask])),
            "noise": noise(table, metric), "best_measured": best_measured(table, metric),
            "workloads": sorted(set(table.workloads)), "fitted_at": time.time()}
    return model, meta


@dataclass
class Recommendation:
    config: dict[str, Any]
    predicted: float
    predicted_default: float
    search: str
    evaluations: int
    search_seconds: float

    @property
    def predicted_gain(self) -> float:
        return self.predicted / self.predicted_default


class Surrogate:
    """A fitted model with its feature spec: predicts the metric of configurations on a workload."""

    def __init__(self, model: Any, meta: Mapping[str, Any]) -> None:
        from .features import FeatureSpec

        self.model, self.meta = model, dict(meta)
        self.spec = FeatureSpec.from_dict(meta["spec"])
        self.space = self.spec.space()
        self.maximize = bool(meta["maximize"])

    def codec(self, features: Mapping[str, Any]):
        from .search import Codec

        return Codec(self.space, self.spec.workload_row(features))

    def predict(self, configs: list[Mapping[str, Any]], features: Mapping[str, Any]) -> np.ndarray:
        rows = np.array([self.spec.row(self.space, c, features) for c in configs], dtype=float)
        return self.model.predict(rows)

    def recommend(self, features: Mapping[str, Any], method: str = "ga", seed: int = 0,
                  **options: Any) -> Recommendation:
        from .search import search

        codec = self.codec(features)
        sign = 1.0 if self.maximize else -1.0

        def score(rows: np.ndarray) -> np.ndarray:
            return sign * np.log(self.model.predict(rows))

        start = [codec.genome(self.space.default())]
        result = search(codec, score, method=method, seed=seed, start=start, **options)
        default = float(self.predict([self.space.default()], features)[0])
        value = float(math.exp(sign * result.value))
        return Recommendation(result.config, value, default, method, result.evaluations, result.seconds)
