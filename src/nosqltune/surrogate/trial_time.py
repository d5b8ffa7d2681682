"""How long a trial answered by a recorded surrogate would have taken on the machine that recorded it.

A recorded dataset keeps each real trial's timings (seconds per phase, tuning/cost.py). From them:

- a trial's time outside a dataset build is fitted as `fixed + per_op / throughput` over the recorded trials (least
  squares: restoring, booting and stopping are fixed; the warm-up and the measured phase last as long as their
  operations take at the trial's rate), capped at the longest such time recorded (a trial's phases are bounded by
  its harness's time limits);
- a build is charged the first time a data shape (TuningSpace.dataset_shape: what keyed the recording machine's
  datasets) is asked for in the clock's life, the default's included, as on a machine whose dataset cache starts
  empty: the median of that shape's recorded builds, or of all recorded builds where the shape never was. One clock
  serves a process (the targets of a study's search and of its confirmation share it, as trials share a machine's
  dataset cache); a resumed study's new process pays its shapes' builds again.

So strategies on a surrogate can be compared against machine time as well as trials
(bench/results/strategies_v5.md). Datasets exported before timings were kept (wide24) have no clock: None."""

from __future__ import annotations

import statistics
from typing import Any, Callable

Shape = Callable[[dict[str, Any]], Any]   # a configuration -> its dataset's key


class TrialClock:
    """Predicted seconds per surrogate trial, fitted to a dataset's recorded timings."""

    def __init__(self, fixed_s: float, per_op_s: float, longest_s: float, builds: dict[str, float],
                 build_s: float, shape: Shape) -> None:
        self.fixed_s, self.per_op_s, self.longest_s = fixed_s, per_op_s, longest_s
        self.builds, self.build_s = builds, build_s
        self.shape = lambda config: repr(shape(config))
        self.built: set[str] = set()

    @classmethod
    def fit(cls, trials: list[dict[str, Any]], shape: Shape) -> "TrialClock | None":
        """From a dataset's trials (config, metrics.summary, timings); None when fewer than 10 carry timings."""
        points, builds = [], {}
        for t in trials:
            timings, throughput = t.get("timings") or {}, (t.get("metrics") or {}).get("summary", {}).get(
                "throughput_ops_s")
            if not timings.get("total_s") or not throughput:
                continue
            build = timings.get("dataset_build_s") or 0.0   # a reload per trial (load_s) is the trial's own time
            points.append((1.0 / throughput, timings["total_s"] - build))
            if build:
                builds.setdefault(repr(shape(t["config"])), []).append(build)
        if len(points) < 10:
            return None
        x_mean = statistics.fmean(x for x, _ in points)
        y_mean = statistics.fmean(y for _, y in points)
        sxx = sum((x - x_mean) ** 2 for x, _ in points)
        per_op = max(0.0, sum((x - x_mean) * (y - y_mean) for x, y in points) / sxx) if sxx else 0.0
        every_build = [s for runs in builds.values() for s in runs]
        return cls(fixed_s=max(0.0, y_mean - per_op * x_mean), per_op_s=per_op,
                   longest_s=max(y for _, y in points),
                   builds={key: statistics.median(runs) for key, runs in builds.items()},
                   build_s=statistics.median(every_build) if every_build else 0.0, shape=shape)

    def trial(self, config: dict[str, Any], throughput: float) -> dict[str, float]:
        """One trial's timings (total_s, and dataset_build_s when its data shape is new) at this throughput."""
        run = min(self.longest_s, self.fixed_s + self.per_op_s / max(throughput, 1e-9))
        out = {"total_s": run, "restore_s": 0.0}   # restored: its data shape counts as built (tune --build-share)
        shape = self.shape(config)
        if shape not in self.built:
            self.built.add(shape)
            build = self.builds.get(shape, self.build_s)
            if build:
                out = {**out, "dataset_build_s": build, "total_s": run + build}
        return out

    def describe(self) -> dict[str, Any]:
        return {"fixed_s": self.fixed_s, "per_op_s": self.per_op_s, "longest_s": self.longest_s,
                "build_s": self.build_s, "shapes_recorded": len(self.builds)}
