"""Which machine a figure came from, and whether figures set side by side came from machines of one speed.

This machine's speed moved up to 4x between days (the default's in-memory YCSB A from 3.5K to 14K ops/s, the
node's CPU per operation from 120 to 450 us), so two figures measured on different days are two machines even on
one host. Every stored run carries the machine's record: its environment (`environment_id`, the fingerprint of
runtime/environment.py) and the speed probes taken before it (internals.machine_probe: runtime/probe.py). Here
the runs are grouped by machine, each group's speed is summed up in two figures, and groups whose speeds are apart
by more than a tolerance (20%) are named:

- the CPU probe, `cpu_mb_s` (SHA-256 MB/s of one core, best of five passes): no datastore setting changes it;
- the default configuration's node CPU per operation (`node_cpu_us_per_op`), where the default ran in the group:
  the datastore's own cost on that machine, which the probe does not always follow (a busy neighbour slows the
  node but not always the probe's best pass). It is compared only between groups of the same workload at the same
  JIT (another mix or scenario costs another CPU per operation on the same machine, and so does C1 against tiered
  compilation: the key-value default cost 562 us per operation at C1 and 172 at tiered on one machine).

A group is one environment on one day (UTC) unless the caller groups otherwise (by study, by store). Runs without
a probe (stores older than the probes, online windows before they carried one) count as unknown: a group with
none is said to be unknown, not assumed equal.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping

TOLERANCE = 0.20    # speeds further apart than this (as a ratio, 1.2) are different machines


@dataclass(frozen=True)
class MachineSpeed:
    """One group of runs: how many, how many carried a probe, and the medians of the two speed figures."""

    label: str
    runs: int
    probed: int
    cpu_mb_s: float | None                      # the median CPU probe (higher: faster)
    default_cpu_us_per_op: float | None         # the median node CPU per operation of the default's runs (lower: faster)
    default_runs: int = 0
    environment: str | None = None              # the fingerprint's CPU model and cores, when known
    workload: str | None = None                 # the workload the default's runs measured (their most common)

    def line(self) -> str:
        probe = f"probe {self.cpu_mb_s:,.0f} MB/s ({self.probed} of {self.runs} runs)" if self.cpu_mb_s else \
            f"no probe ({self.runs} runs)"
        cost = (f", the default's node CPU {self.default_cpu_us_per_op:,.0f} us/op ({self.default_runs} runs)"
                if self.default_cpu_us_per_op is not None else "")
        return f"{self.label}: {probe}{cost}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class MachineCheck:
    """The groups, and the verdict: `apart` when any two known groups' speeds differ by more than the tolerance
    (`ratio`: the largest ratio found, `by`: which figure), `unknown` when some group has no probe."""

    groups: tuple[MachineSpeed, ...]
    apart: bool
    ratio: float | None = None
    by: str | None = None
    unknown: tuple[str, ...] = ()
    tolerance: float = TOLERANCE

    def verdict(self) -> str:
        """The verdict alone, without the groups' figures."""
        if self.apart:
            said = (f"figures from machines whose speeds differ x{self.ratio:.2f} by {self.by} (more than "
                    f"{self.tolerance:.0%} apart): compare ratios within one machine only")
        elif len(self.groups) <= 1:
            said = "one machine" if self.groups else "no runs"
        else:
            said = f"{len(self.groups)} machine groups within {self.tolerance:.0%} of each other's speed"
        if self.unknown:
            said += f"; no machine record for {', '.join(self.unknown)}"
        return said

    def line(self) -> str:
        """One line for a page or a terminal: the verdict and each group's figures."""
        return "; ".join([self.verdict(), *(g.line() for g in self.groups)])

    def to_dict(self) -> dict[str, Any]:
        return {"groups": [g.to_dict() for g in self.groups], "apart": self.apart, "ratio": self.ratio,
                "by": self.by, "unknown": list(self.unknown), "tolerance": self.tolerance, "line": self.line()}


def cpu_per_op_of(row: Mapping[str, Any]) -> float | None:
    """A stored run's node CPU per operation (us), None where it has none."""
    value = (((row.get("metrics") or {}).get("summary")) or {}).get("node_cpu_us_per_op")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def workload_of(row: Mapping[str, Any]) -> str | None:
    """The workload a stored run measured (its name, with the scenario it ran in and its JIT where stored)."""
    workload = row.get("workload") or {}
    harness = workload.get("harness") or {}
    name = workload.get("name")
    if name is None:
        return None
    jit = harness.get("jit")
    return f"{name} ({harness.get('scenario', '-')}" + (f", {jit})" if jit else ")")


def by_day(row: Mapping[str, Any]) -> str:
    """The default grouping: the run's environment and the UTC day it started."""
    started = row.get("started_at")
    day = time.strftime("%Y-%m-%d", time.gmtime(started)) if started else "an unknown day"
    env = row.get("environment_id")
    return day if env is None else f"{day} (environment {env})"


def is_default_config(row: Mapping[str, Any]) -> bool:
    """A run of the default configuration: a compare or confirmation round's `default` candidate, a tuning study's
    default point (meta kind "default"), or a run with no knob set."""
    meta = row.get("meta") or {}
    if "candidate" in meta:
        return meta["candidate"] == "default"
    if "kind" in meta:
        return meta["kind"] == "default"
    return not (row.get("config") or {})


def speed_of(label: str, rows: list[Mapping[str, Any]], is_default: Callable[[Mapping[str, Any]], bool],
             environments: Mapping[int, Mapping[str, Any]] | None = None) -> MachineSpeed:
    from ..tuning.denoise import probe_of

    probes = [p for p in (probe_of(dict(r), "cpu_mb_s") for r in rows) if p is not None]
    defaults = [r for r in rows if is_default(r) and cpu_per_op_of(r) is not None]
    names = [workload_of(r) for r in defaults]
    workload = max(set(names), key=names.count) if names else None
    costs = [cpu_per_op_of(r) for r in defaults if workload_of(r) == workload]
    env = None
    if environments:
        ids = {r.get("environment_id") for r in rows} - {None}
        fps = [environments[i] for i in sorted(ids) if i in environments]
        if fps:
            env = "; ".join(sorted({f"{fp.get('cpu_model', '?')}, {fp.get('cores', '?')} cores" for fp in fps}))
    return MachineSpeed(label=label, runs=len(rows), probed=len(probes),
                        cpu_mb_s=round(statistics.median(probes), 1) if probes else None,
                        default_cpu_us_per_op=round(statistics.median(costs), 1) if costs else None,
                        default_runs=len(costs), environment=env, workload=workload)


def check_machines(rows: Iterable[Mapping[str, Any]], *, group: Callable[[Mapping[str, Any]], str] = by_day,
                   is_default: Callable[[Mapping[str, Any]], bool] = is_default_config,
                   environments: Mapping[int, Mapping[str, Any]] | None = None,
                   tolerance: float = TOLERANCE) -> MachineCheck:
    """Group completed runs by machine (`group`: a label per run) and judge whether their speeds are apart."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("state", "COMPLETE") == "COMPLETE":
            groups.setdefault(group(row), []).append(row)
    return judge([speed_of(label, members, is_default, environments) for label, members in groups.items()],
                 tolerance)


def judge(speeds: list[MachineSpeed], tolerance: float = TOLERANCE) -> MachineCheck:
    """The verdict over groups already summed up (e.g. one per study or per store): the largest ratio of each figure
    among the groups that have it."""
    worst: tuple[float, str] | None = None
    comparable = [("the CPU probe", [s.cpu_mb_s for s in speeds])]
    for workload in sorted({s.workload for s in speeds if s.workload}):   # CPU per op: one workload at a time
        comparable.append(("the default's node CPU per operation",
                           [s.default_cpu_us_per_op for s in speeds if s.workload == workload]))
    for figure, values in comparable:
        known = [v for v in values if v]
        if len(known) >= 2:
            ratio = max(known) / min(known)
            if worst is None or ratio > worst[0]:
                worst = (ratio, figure)
    apart = worst is not None and worst[0] > 1 + tolerance
    return MachineCheck(groups=tuple(speeds), apart=apart, ratio=round(worst[0], 3) if worst else None,
                        by=worst[1] if worst else None,
                        unknown=tuple(s.label for s in speeds if s.cpu_mb_s is None and s.default_cpu_us_per_op is None),
                        tolerance=tolerance)
