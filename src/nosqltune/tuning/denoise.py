"""`--denoise`: a study's values corrected for the machine's drift, and configurations whose repeats disagree.

The machine drifts by 10-40% within and between sessions (docs/trials.md), so a single run's value is partly the
hour it ran in. Three things, all from figures each trial already stores:

- **The probe's elasticity.** Every trial times a fixed piece of work before the datastore starts
  (runtime/probe.py: `cpu_mb_s`, SHA-256 over 8 MiB; `disk_read_ms`, random 4 KiB O_DIRECT reads). A
  throughput (or CPU-per-operation) objective is paired with the CPU probe, a latency objective with the disk
  probe (bench/results/p99_noise.md: a capped volume's read p99 followed the disk's time per I/O, r = +0.82 to
  +0.94). The elasticity b (value ~ probe^b) is the pooled slope of log value on log probe *within*
  configurations measured more than once, each centred on its own means: configurations differing in speed do not
  enter it, so it cannot learn that slow configurations ran on slow machines. It is used only when it is clear
  (|t| >= 3 on at least 6 degrees of freedom); otherwise b = 0 and values are told as measured, and the study says
  so. bench/results/drift.md is why it is never assumed: on the stores measured so far the CPU probe explained
  none of a capped node's spread.
- **The adjustment.** value x (centre / probe)^b, the centre being the median probe of the study's runs: a run on
  a fast moment is brought down to the study's usual machine, one on a slow moment up.
- **Unstable configurations.** A configuration's repeats (in logs, about relative) are tested against the
  pooled spread of the *other* configurations' repeats (F test, one-sided, p < 0.01 by default): one that
  disagrees with itself beyond the noise is flagged unstable (an edge of its memory, a collector that sometimes
  stalls) and never becomes a study's best.

The tuning loop re-measures each new incumbent once (the single run that made it best is the lucky draw of
many), so a study run with --denoise has the repeats these need; the confirmation's rounds are repeats too.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from ..objective import COST_METRICS
from .machine_reference import home_summary

T_MIN = 3.0            # the elasticity is used when its t statistic is at least this ...
DOF_MIN = 6            # ... on at least this many degrees of freedom (runs - configurations)
UNSTABLE_P = 0.01      # a configuration whose repeats' spread has p below this against the others' is unstable
NOISE_DOF_MIN = 3      # a configuration is judged beside at least this many others run more than once


def probe_for(metric: str) -> str:
    """The probe a metric is corrected by: the CPU's for throughput and CPU cost, the disk's for latencies."""
    return "cpu_mb_s" if metric == "throughput" or metric in COST_METRICS else "disk_read_ms"


def probe_of(row: dict[str, Any], probe: str) -> float | None:
    """A stored trial's probe figure (internals.machine_probe), None when it has none or it is not positive."""
    value = ((row.get("internals") or {}).get("machine_probe") or {}).get(probe)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


@dataclass(frozen=True)
class Elasticity:
    """The pooled within-configuration slope of log value on log probe, and whether it is used. `dof`: the
    residual degrees of freedom of its t statistic (runs - configurations - 1)."""

    probe: str
    slope: float = 0.0
    t: float | None = None
    dof: int = 0
    r2: float | None = None
    centre: float | None = None        # the probe the values are brought to

    @property
    def used(self) -> bool:
        return self.t is not None and abs(self.t) >= T_MIN and self.dof >= DOF_MIN and self.centre is not None

    def factor(self, probe: float | None) -> float:
        """What a run's value is multiplied by: (centre / probe)^slope when used, 1 otherwise."""
        if not self.used or probe is None:
            return 1.0
        return (self.centre / probe) ** self.slope

    def describe(self) -> str:
        if self.t is None:
            return (f"denoise: {self.dof} degrees of freedom of repeats with the {self.probe} probe, too few to "
                    "fit its elasticity; values told as measured")
        fit = f"elasticity {self.slope:+.2f} on {self.probe} (t {self.t:+.1f}, {self.dof} dof, R² {self.r2:.2f})"
        if self.used:
            return f"denoise: {fit}: values brought to the probe {self.centre:g}"
        return f"denoise: {fit}: not clear (|t| < {T_MIN:g} or dof < {DOF_MIN}), values told as measured"

    def to_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "slope": self.slope, "t": self.t, "dof": self.dof, "r2": self.r2,
                "centre": self.centre, "used": self.used}


def fit_elasticity(groups: Iterable[Sequence[tuple[float, float | None]]], probe: str,
                   centre: float | None = None) -> Elasticity:
    """`groups`: per configuration, its runs as (value, probe). Runs without a probe or a positive value are left
    out; configurations with fewer than two runs left give no degree of freedom. `centre`: the probe values are
    brought to (default: the median of the runs')."""
    sets = [[(math.log(v), math.log(p)) for v, p in g if v and v > 0 and p] for g in groups]
    everything = [p for g in sets for _, p in g]
    if centre is None and everything:
        centre = math.exp(statistics.median(everything))
    sets = [g for g in sets if len(g) >= 2]
    dof = sum(len(g) for g in sets) - len(sets) - 1
    xs, ys = [], []
    for g in sets:
        my, mx = statistics.fmean(y for y, _ in g), statistics.fmean(x for _, x in g)
        xs += [x - mx for _, x in g]
        ys += [y - my for y, _ in g]
    sxx, syy = sum(x * x for x in xs), sum(y * y for y in ys)
    if dof < 1 or sxx <= 0:
        return Elasticity(probe, dof=max(dof, 0), centre=centre)
    slope = sum(x * y for x, y in zip(xs, ys)) / sxx
    resid = syy - slope * slope * sxx
    r2 = 1 - resid / syy if syy > 0 else 0.0
    se = math.sqrt(max(resid, 0.0) / dof / sxx)
    t = slope / se if se > 0 else math.copysign(math.inf, slope) if slope else 0.0
    return Elasticity(probe, slope=slope, t=t, dof=dof, r2=r2, centre=centre)


def log_spread(values: Sequence[float]) -> tuple[float, int]:
    """(sum of squared deviations of the logs from their mean, degrees of freedom)."""
    logs = [math.log(v) for v in values if v and v > 0]
    if len(logs) < 2:
        return 0.0, 0
    mean = statistics.fmean(logs)
    return sum((x - mean) ** 2 for x in logs), len(logs) - 1


NOISE_FLOOR = 0.001 ** 2   # no two runs agree better than 0.1% (log variance): rounding never flags a configuration


def unstable(groups: dict[Any, Sequence[float]], p_max: float = UNSTABLE_P, judge=None,
             family: bool = False) -> dict[Any, float]:
    """The configurations (keys of `groups`, each its repeated values) whose repeats disagree beyond the noise:
    key -> p of the one-sided F test of its log variance against the noise of the others. The noise is robust to
    unstable ones among them: the median of the other configurations' log variances, each scaled by the median of
    its chi-square (a pair's variance has a median of 0.45 sigma²), with as many degrees of freedom as there are
    others. A configuration is judged only beside NOISE_DOF_MIN others run more than once. `judge`: the keys to
    judge (default all). `family`: many judged at once, so each at p_max / their number (Bonferroni)."""
    from scipy.stats import chi2, f as f_dist

    spreads = {k: log_spread(v) for k, v in groups.items()}
    scaled = {k: (ss / dof) / (chi2.median(dof) / dof) for k, (ss, dof) in spreads.items() if dof >= 1}
    judged = [k for k in (spreads if judge is None else judge) if k in scaled
              and len(scaled) - 1 >= NOISE_DOF_MIN]
    limit = p_max / len(judged) if family and judged else p_max
    out = {}
    for key in judged:
        ss, dof = spreads[key]
        others = [v for k, v in scaled.items() if k != key]
        noise = max(statistics.median(others), NOISE_FLOOR)
        p = float(f_dist.sf((ss / dof) / noise, dof, len(others)))
        if p < limit:
            out[key] = p
    return out


def combine(per_workload: Sequence[Sequence[float]], maximize: bool, unstable_runs: bool) -> float:
    """A configuration's value from its corrected runs, per workload: their mean (the worst run when its repeats
    are unstable), then the geometric mean over the workloads, as the objective combines workloads."""
    from ..objective import geometric_mean

    pick = (min if maximize else max) if unstable_runs else statistics.fmean
    return geometric_mean([pick(runs) for runs in per_workload])


def judge(groups: dict[Any, list[tuple[float | None, float | None]]], probe: str, centre: float | None,
          keys=None, family: bool = False) -> dict[Any, float]:
    """Which of `keys` (default: every configuration run more than once) are unstable: key -> p. Each is judged
    with the elasticity fitted on the *other* configurations (an unstable pair of runs on different probes would
    otherwise bend the fit that is to judge it), all runs corrected by that fit, its spread against theirs."""
    clean = {k: [(v, p) for v, p in runs if v is not None] for k, runs in groups.items()}
    out = {}
    candidates = [k for k in (clean if keys is None else keys) if k in clean and len(clean[k]) >= 2]
    limit = UNSTABLE_P / len(candidates) if family and candidates else UNSTABLE_P
    for key in candidates:
        fit = fit_elasticity([runs for k, runs in clean.items() if k != key], probe, centre)
        corrected = {k: [v * fit.factor(p) for v, p in runs] for k, runs in clean.items() if len(runs) >= 2}
        found = unstable(corrected, p_max=limit, judge=[key])
        if key in found:
            out[key] = found[key]
    return out


class Denoiser:
    """The tuning loop's --denoise: over the points evaluated so far (`points`, the loop's list, and the one being
    evaluated), the elasticity of the objective on its probe, each point's corrected value, and its stability.
    `key` groups points of equal configurations (TuningSpace.key). The values are brought to the study's first
    probe (its default's first run, usually), which stays put as the study runs."""

    def __init__(self, objective, points: list, key) -> None:
        self.objective = objective
        self.probe = probe_for(objective.metric)
        self.elasticity = Elasticity(self.probe)
        self.points = points
        self.key = key
        self.centre: float | None = None

    def _runs(self, point, name: str) -> list[tuple[float, float | None]]:
        """The point's complete runs on workload `name`: (value, probe); a value of 0 counts (gc-per-op)."""
        from ..objective import metric_value

        out = []
        for row in point.rows:
            if row["meta"]["instance"] == name and row["state"] == "COMPLETE":
                value = metric_value(self.objective.metric, home_summary(row, self.objective.metric))
                if value is not None and value >= 0:
                    out.append((float(value), probe_of(row, self.probe)))
                    if self.centre is None and out[-1][1] is not None:
                        self.centre = out[-1][1]
        return out

    def _groups(self, also=None) -> dict[tuple, list[tuple[float, float | None]]]:
        groups: dict[tuple, list] = {}
        for point in [p for p in self.points if p is not also] + ([also] if also is not None else []):
            for name in sorted({r["meta"]["instance"] for r in point.rows}):
                groups.setdefault((self.key(point.config), name), []).extend(self._runs(point, name))
        return groups

    def _fit(self, groups: dict[tuple, list], leave_out=()) -> Elasticity:
        return fit_elasticity([runs for k, runs in groups.items() if k not in leave_out], self.probe, self.centre)

    def evaluate(self, point, workloads: list[str], evaluation, refit: bool = True) -> tuple[Any, float | None]:
        """(the point's Evaluation with its value corrected, p when its repeats are unstable else None): per
        workload the mean of its runs' corrected values (the worst run's when unstable), geometric mean over
        workloads; feasibility as measured. Refits the elasticity over everything so far and this point first
        (without this point when it is unstable), unless `refit` is off."""
        from ..objective import Evaluation

        groups = self._groups(also=point)
        mine = [(self.key(point.config), name) for name in workloads]
        flagged = judge(groups, self.probe, self.centre, keys=mine)
        flag = min(flagged.values()) if flagged else None
        if refit:
            self.elasticity = self._fit(groups, leave_out=flagged)
        per_workload = [[v * self.elasticity.factor(p) for v, p in self._runs(point, name)] for name in workloads]
        if not all(per_workload):
            return evaluation, None
        value = combine(per_workload, self.objective.maximize, flag is not None)
        return Evaluation(value, evaluation.feasible, evaluation.violation), flag

    def meta(self, row: dict, point) -> dict[str, Any]:
        """What a trial's row keeps: its corrected value, the factor used, and its configuration's flag."""
        from ..objective import metric_value

        value = metric_value(self.objective.metric, home_summary(row, self.objective.metric)) if row["state"] == "COMPLETE" else None
        factor = self.elasticity.factor(probe_of(row, self.probe))
        return {"denoised": round(value * factor, 9) if value is not None else None,
                "denoise_factor": round(factor, 6), "unstable": point.unstable}

    def final(self) -> dict[tuple, float]:
        """At the end, every repeated configuration judged at once (settle); (config key, workload) -> p for the
        unstable ones. `self.elasticity` becomes the final fit."""
        self.elasticity, _, flagged = settle(self._groups(), self.probe, self.centre)
        return flagged


def settle(groups: dict[Any, list[tuple[float | None, float | None]]], probe: str, centre: float | None = None
           ) -> tuple[Elasticity, dict[Any, list[float | None]], dict[Any, float]]:
    """Everything at once (a study's end, a confirmation's rounds): key -> its runs as (value or None, probe).
    Every repeated configuration judged (judge, Bonferroni over them), the elasticity fitted without the flagged
    ones. Returns (the fit, key -> the corrected values, None kept where a run failed, key -> p for the unstable
    ones)."""
    flagged = judge(groups, probe, centre, family=True)
    fit = fit_elasticity([[(v, p) for v, p in runs if v is not None] for k, runs in groups.items()
                          if k not in flagged], probe, centre)
    values = {k: [v * fit.factor(p) if v is not None else None for v, p in runs] for k, runs in groups.items()}
    return fit, values, flagged


def denoise_rounds(metric: str, values: dict[str, list[float | None]],
                   rows: dict[str, list[list[dict]]]) -> dict[str, Any]:
    """Interleaved rounds (a confirmation's, a comparison's) corrected and judged (settle): `values` label -> the
    value per round (None when the round failed), `rows` label -> per round the trials behind it (one per
    workload). Each round's probe is the geometric mean of its trials' probes. Returns {'values': corrected values
    per label, 'elasticity', 'described', 'unstable': label -> p for the candidates whose rounds disagree beyond
    the others' spread}."""
    probe = probe_for(metric)

    def round_probe(trials: list[dict]) -> float | None:
        got = [probe_of(t, probe) for t in trials]
        return math.exp(statistics.fmean(math.log(g) for g in got)) if got and all(got) else None

    fit, corrected, flagged = settle({label: list(zip(vs, [round_probe(r) for r in rows[label]]))
                                      for label, vs in values.items()}, probe)
    return {"values": corrected, "elasticity": fit.to_dict(), "described": fit.describe(), "unstable": flagged}
