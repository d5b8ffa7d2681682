"""What a tuning run optimizes: a metric of a trial, its direction, optional constraints, and the cost an
optimizer minimizes.

Objectives: `throughput` (maximize ops/s), and `<stat>-<op>` to minimize, stat in avg / p95 / p99, op in
read / update / insert / scan / all (e.g. p99-read; p999 is the 99.9th percentile). For `all`, avg is the count-weighted mean over the
operation types; p95/p99 are the worst (largest) of the per-operation percentiles, since YCSB reports
percentiles per operation type only. The node's own cost, minimized: `cpu-per-op` (the datastore's CPU time,
user + system, per operation of the measured phase, summed over a cluster's nodes, in microseconds) and
`gc-per-op` (its garbage-collection pause time per operation, microseconds): on a machine where the client
shares the cores, throughput measures the pair, these the server alone. Its disk per operation, minimized:
`io-per-op` (reads and writes its own volume's device served per operation: --volume) and `bytes-per-op` (bytes
read and written per operation: the volume's device's, else what the process itself caused the storage layer to
move): where a volume's cap is the limit, these are what a configuration can cut.

Constraints (a piece the RF/GBDT tuning paper did not have): `p99-read<=5` or `throughput>=3000`; a trial that
breaks one is infeasible: it never becomes the best configuration, and the optimizer sees a penalty.

Several workloads: a configuration's value is the geometric mean over the workloads (scale-free, so a fast
workload does not drown a slow one). With `combine="worst-gain"` (tune --data-sizes: one workload at several data
sizes) it is the worst of its gains against the default's values on the same workloads, times the geometric mean of
the default's values: in the metric's unit, the default's own value for the default, and a configuration whose gain
falls off a cliff at one size is ranked by that size.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .errors import UsageError

STATS = ("avg", "p95", "p99", "p999")
OPS = ("read", "update", "insert", "scan", "readmodifywrite", "all")
_CONSTRAINT = re.compile(r"^\s*([a-z0-9-]+)\s*(<=|>=)\s*([0-9.]+(?:e-?[0-9]+)?)\s*$")


COMBINE = ("geometric-mean", "worst-gain")

# the node's cost per operation: metric -> summary key (workloads/ycsb.cost_summary)
COST_METRICS = {"cpu-per-op": "node_cpu_us_per_op", "gc-per-op": "node_gc_us_per_op",
                "io-per-op": "node_io_per_op", "bytes-per-op": "node_bytes_per_op"}
COST_UNITS = {"cpu-per-op": "us/op", "gc-per-op": "us/op", "io-per-op": "I/Os per op", "bytes-per-op": "B/op"}


def _metric_names() -> list[str]:
    return ["throughput", *COST_METRICS] + [f"{s}-{o}" for s in STATS for o in OPS]


def metric_value(name: str, summary: dict[str, Any]) -> float | None:
    """The figure `name` of one trial's summary (None when the trial has no such operations)."""
    keys = metric_keys(name, summary)
    if name.endswith("-all") and name != "avg-all":   # a percentile over every kind of operation: the worst
        values = [summary[k] for k in keys if summary.get(k) is not None]
        return max(values) if values else None
    return summary.get(keys[0])


def metric_keys(name: str, summary: dict[str, Any]) -> list[str]:
    """The keys of a trial's summary that metric_value reads for `name` (to scale a metric's figures alike)."""
    if name == "throughput":
        return ["throughput_ops_s"]
    if name in COST_METRICS:
        return [COST_METRICS[name]]
    stat, _, op = name.partition("-")
    if op != "all":
        return [f"{op}_{stat}_ms"]
    if stat == "avg":
        return ["all_avg_ms"]
    return [k for k in summary if k.endswith(f"_{stat}_ms") and not k.startswith("cleanup_")]


def check_metric(name: str, what: str = "objective") -> str:
    name = name.strip().lower()
    if name not in _metric_names():
        raise UsageError(f"unknown {what} '{name}': use throughput, cpu-per-op, gc-per-op, io-per-op, bytes-per-op "
                         "or <avg|p95|p99|p999>-"
                         "<read|update|insert|scan|readmodifywrite|all>, e.g. p99-read")
    return name


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str      # <= or >=
    limit: float

    @classmethod
    def parse(cls, text: str) -> "Constraint":
        match = _CONSTRAINT.match(text.lower())
        if not match:
            raise UsageError(f"cannot read constraint '{text}': expected METRIC<=NUMBER or METRIC>=NUMBER, "
                                 "e.g. p99-read<=5")
        return cls(check_metric(match.group(1), "constraint metric"), match.group(2), float(match.group(3)))

    def violation(self, value: float | None) -> float:
        """0 when satisfied; otherwise how far off, as a ratio > 0 (inf when the metric is missing)."""
        if value is None:
            return math.inf
        if self.op == "<=":
            return 0.0 if value <= self.limit else (value - self.limit) / max(self.limit, 1e-12)
        return 0.0 if value >= self.limit else (self.limit - value) / max(self.limit, 1e-12)

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.limit:g}"


@dataclass(frozen=True)
class Objective:
    metric: str = "throughput"
    constraints: tuple[Constraint, ...] = field(default_factory=tuple)
    combine: str = "geometric-mean"    # over the workloads: geometric-mean | worst-gain (against the default's)

    def __post_init__(self) -> None:
        if self.combine not in COMBINE:
            raise UsageError(f"unknown way to combine workloads {self.combine!r}: {' or '.join(COMBINE)}")

    @classmethod
    def parse(cls, metric: str, constraints: Iterable[str] = (), combine: str = "geometric-mean") -> "Objective":
        return cls(check_metric(metric), tuple(Constraint.parse(c) for c in constraints), combine)

    @property
    def maximize(self) -> bool:
        return self.metric == "throughput"

    @property
    def unit(self) -> str:
        return metric_unit(self.metric)

    def describe(self) -> str:
        text = ("maximize " if self.maximize else "minimize ") + self.metric
        if self.combine == "worst-gain":
            text += " at the worst of its gains over the workloads"
        if self.constraints:
            text += " subject to " + ", ".join(map(str, self.constraints))
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "constraints": [str(c) for c in self.constraints],
                **({"combine": self.combine} if self.combine != "geometric-mean" else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Objective":
        return cls.parse(data["metric"], data.get("constraints", ()), data.get("combine", "geometric-mean"))

    # -- values of configurations
    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    def evaluate(self, summaries: list[dict[str, Any]],
                 reference: list[dict[str, Any] | None] | None = None) -> "Evaluation":
        """One configuration's value from the summaries of its trials, one per workload (None: failed).
        `reference`: the default's summaries on the same workloads, in the same order (worst-gain only; without
        them, or with one missing, the geometric mean stands in)."""
        if any(s is None for s in summaries) or not summaries:
            return Evaluation(None, False, math.inf)
        values = [metric_value(self.metric, s) for s in summaries]
        # a phase without a GC pause costs 0 GC time per operation: a value, not a failure
        floor_ok = self.metric in COST_METRICS
        if any(v is None or v < 0 or (v == 0 and not floor_ok) for v in values):
            return Evaluation(None, False, math.inf)
        value = geometric_mean(values)
        base = ([metric_value(self.metric, s) if s else None for s in reference]
                if self.combine == "worst-gain" and reference and len(reference) == len(values) else None)
        if base and all(b and v for b, v in zip(base, values)):
            gains = [v / b if self.maximize else b / v for v, b in zip(values, base)]
            value = geometric_mean(base) * min(gains) if self.maximize else geometric_mean(base) / min(gains)
        violation = max((c.violation(metric_value(c.metric, s)) for c in self.constraints for s in summaries),
                        default=0.0)
        return Evaluation(value, violation == 0.0, violation)

    def cost(self, evaluation: "Evaluation", worst: float | None) -> float:
        """What the optimizer minimizes. Failed: the worst value seen so far; infeasible: the worst value seen
        made worse by the violation (so the optimizer still sees which way the limit lies)."""
        if evaluation.value is None:
            value = worst if worst is not None else (0.0 if self.maximize else 1e6)
        elif not evaluation.feasible:
            base = worst if worst is not None else evaluation.value
            factor = 1.0 + min(evaluation.violation, 10.0)
            value = base / factor if self.maximize else base * factor
        else:
            value = evaluation.value
        return -value if self.maximize else value

    def worst(self, values: Iterable[float]) -> float | None:
        values = [v for v in values if v is not None]
        if not values:
            return None
        return min(values) if self.maximize else max(values)


@dataclass(frozen=True)
class Evaluation:
    value: float | None     # None: the trial failed (or lacks the metric)
    feasible: bool
    violation: float


def metric_unit(name: str) -> str:
    return "ops/s" if name == "throughput" else COST_UNITS[name] if name in COST_METRICS else "ms"


def geometric_mean(values: list[float]) -> float:
    if len(values) == 1:
        return float(values[0])
    if any(v == 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))
