"""Statistics of a comparison: paired speedups, bootstrap interval, Wilcoxon signed-rank test, verdict.

Runs of a candidate and of the default in the same round are paired (they ran next to each other, so they
share the machine's drift); the speedup of a pair is candidate / default for throughput and default /
candidate for latencies, so > 1 always means better.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, asdict
from typing import Sequence

ALPHA = 0.05


def speedups(candidate: Sequence[float | None], default: Sequence[float | None], *, maximize: bool) -> list[float]:
    """Per-pair speedups; a pair with a missing (failed) side is dropped."""
    out = []
    for c, d in zip(candidate, default):
        if c is None or d is None or c <= 0 or d <= 0:
            continue
        out.append(c / d if maximize else d / c)
    return out


def bootstrap_interval(values: Sequence[float], *, level: float = 0.95, resamples: int = 10000,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean."""
    if not values:
        return (math.nan, math.nan)
    if len(values) == 1:
        return (values[0], values[0])
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choice(values) for _ in range(n)) / n for _ in range(resamples))
    lo = means[int(math.floor((1 - level) / 2 * resamples))]
    hi = means[min(int(math.ceil((1 + level) / 2 * resamples)) - 1, resamples - 1)]
    return (lo, hi)


def wilcoxon_p(candidate: Sequence[float], default: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of paired runs (scipy; exact for small samples without ties)."""
    diffs = [c - d for c, d in zip(candidate, default)]
    if len(diffs) < 2 or all(x == 0 for x in diffs):
        return None
    from scipy.stats import wilcoxon

    return float(wilcoxon(list(candidate), list(default)).pvalue)


def mann_whitney_p(candidate: Sequence[float], default: Sequence[float]) -> float | None:
    """Two-sided Mann-Whitney U p-value, for runs that are not paired."""
    if len(candidate) < 1 or len(default) < 1:
        return None
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(list(candidate), list(default), alternative="two-sided").pvalue)


@dataclass
class Comparison:
    candidate: str
    pairs: int
    mean_speedup: float | None
    median_speedup: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    test: str
    verdict: str                  # better | no significant difference | worse | not enough runs

    def to_dict(self) -> dict:
        return asdict(self)


def compare(name: str, candidate: Sequence[float | None], default: Sequence[float | None], *, maximize: bool,
            alpha: float = ALPHA) -> Comparison:
    """Paired comparison of per-round values (same length, None = failed run)."""
    pairs = [(c, d) for c, d in zip(candidate, default) if c is not None and d is not None and c > 0 and d > 0]
    ups = speedups([c for c, _ in pairs], [d for _, d in pairs], maximize=maximize)
    if len(ups) < 2:
        return Comparison(name, len(ups), ups[0] if ups else None, ups[0] if ups else None, None, None, None,
                          "wilcoxon signed-rank", "not enough runs")
    mean = statistics.mean(ups)
    lo, hi = bootstrap_interval(ups)
    p = wilcoxon_p([c for c, _ in pairs], [d for _, d in pairs])
    if p is not None and p < alpha:
        verdict = "better" if mean > 1 else "worse"
    else:
        verdict = "no significant difference"
    return Comparison(name, len(ups), mean, statistics.median(ups), lo, hi, p, "wilcoxon signed-rank", verdict)


def mean_interval(values: Sequence[float], *, level: float = 0.95) -> tuple[float, float] | None:
    """Student's t interval of the mean of independent runs (None under two values)."""
    if len(values) < 2:
        return None
    from scipy.stats import t

    mean, sd = statistics.mean(values), statistics.stdev(values)
    half = t.ppf((1 + level) / 2, len(values) - 1) * sd / math.sqrt(len(values))
    return (mean - half, mean + half)
