"""Which knobs matter (RAFIKI 3.4, 4.5): one-knob-at-a-time measurements scored by the spread of the
objective, or permutation importance on a model fitted to an existing study.

One at a time: every knob is set to each of its levels (every choice; `levels` evenly spaced values of a
number, on its log scale where it has one) with the others at their defaults, and measured. A knob's score
is the standard deviation of the objective over its levels (the default's measurement counts as its
default level). The key knobs are the top k, cut where the drop between consecutive scores is largest.
A knob that is off under the defaults (its condition needs another knob) is measured with the knobs that
switch it on set, and says so.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from ..knobs.space import TuningSpace, categorical, choices_of, from_unit


def levels(space: TuningSpace, count: int = 4) -> list[tuple[str, Any]]:
    """(knob, value) pairs to measure, defaults left out (the baseline measures them)."""
    from ..knobs.knob import _same

    out: list[tuple[str, Any]] = []
    for knob in space.knobs:
        if categorical(knob):
            values = list(choices_of(knob))
        else:
            values = list(dict.fromkeys(from_unit(knob, i / (count - 1)) if count > 1 else knob.default
                                        for i in range(count)))
            if knob.type == "float":
                values = [round(v, 3) for v in values]
        out.extend((knob.name, v) for v in values if not _same(v, knob.default))
    return out


def level_config(space: TuningSpace, name: str, value: Any) -> tuple[dict[str, Any], list[str]]:
    """The default with one knob changed (and the knobs that switch it on, listed second)."""
    from .collect import _enable

    config = space.default()
    config[name] = value
    if not space.is_active(name, space.canonical(config)):
        before = dict(config)
        _enable(space, config, name)
        enabled = [k for k in config if config[k] != before[k]]
    else:
        enabled = []
    return space.canonical(config), enabled


def score(baseline: Sequence[float], measured: Mapping[str, Mapping[Any, Sequence[float]]]) -> list[dict]:
    """Rank knobs by the standard deviation of the mean objective over their levels (the baseline is the
    default level); the relative score is that sd over the baseline mean."""
    base = statistics.fmean(baseline)
    ranked = []
    for knob, by_level in measured.items():
        means = [base] + [statistics.fmean(v) for v in by_level.values() if v]
        sd = statistics.pstdev(means) if len(means) > 1 else 0.0
        best_level = max(by_level.items(), key=lambda kv: statistics.fmean(kv[1]) if kv[1] else float("-inf"))
        ranked.append({"knob": knob, "score": sd, "relative": sd / base if base else 0.0,
                       "levels": {str(k): statistics.fmean(v) for k, v in by_level.items() if v},
                       "best_level": best_level[0]})
    ranked.sort(key=lambda r: (-r["score"], r["knob"]))
    return ranked


def key_count(scores: Sequence[float]) -> int:
    """k such that the top k are the key knobs: the cut at the largest drop between consecutive scores."""
    if len(scores) < 2:
        return len(scores)
    drops = [scores[i] - scores[i + 1] for i in range(len(scores) - 1)]
    return drops.index(max(drops)) + 1


def permutation_importance(table, metric: str, kind: str = "rf", repeats: int = 10, seed: int = 0) -> list[dict]:
    """Importance from an existing study: fit a model, then shuffle one knob's columns (all its one-hot
    columns together) and measure how much the mean absolute error of log(metric) grows."""
    import numpy as np

    from .models import make_model

    y, mask = table.target(metric)
    X, y = table.X[mask], np.log(y[mask])
    model = make_model(kind, seed=seed).fit(X, np.exp(y), groups=[c for c, m in zip(table.configs, mask) if m])
    base = float(np.mean(np.abs(np.log(model.predict(X)) - y)))
    workload = {name: [i] for i, name in enumerate(table.spec.names()) if name in ("read_ratio", "scan_ratio")}
    columns = {**workload, **table.spec.knob_columns()}
    rng = np.random.default_rng(seed)
    ranked = []
    for name, cols in columns.items():
        losses = []
        for _ in range(repeats):
            Xp = X.copy()
            order = rng.permutation(len(X))
            Xp[:, cols] = X[order][:, cols]
            losses.append(float(np.mean(np.abs(np.log(model.predict(Xp)) - y))) - base)
        ranked.append({"knob": name, "score": float(np.mean(losses)), "sd": float(np.std(losses)),
                       "relative": float(np.mean(losses)), "feature": "workload" if name in workload else "knob"})
    ranked.sort(key=lambda r: (-r["score"], r["knob"]))
    return ranked


def bar_chart(ranked: Sequence[Mapping[str, Any]], key: int, path, title: str, xlabel: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["knob"] for r in ranked][::-1]
    values = [r["score"] for r in ranked][::-1]
    colors = ["#c44e52" if i >= len(ranked) - key else "#8c8c8c" for i in range(len(ranked))]
    fig, ax = plt.subplots(figsize=(7, 0.3 * len(ranked) + 1.2))
    ax.barh(names, values, color=colors)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
