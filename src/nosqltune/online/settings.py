"""The settings of an online run (typed, checked at once: bad input is one line before anything starts) and the
summary it returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import UsageError
from .guard import GuardSettings
from .observe import JmxNode, check_cql_name
from .shift import ShiftSettings


@dataclass(frozen=True)
class OnlineSettings:
    """An online run: the nodes watched, the model, where it is recorded, and the loop's rules' settings."""

    nodes: tuple[JmxNode, ...]
    model: str
    study: str
    study_name: str | None = None
    window_seconds: float = 60.0
    horizon_seconds: float = 1800.0
    duration_seconds: float | None = None
    dry_run: bool = False
    canary: bool = False                      # a live change goes to one node first, to the others once the guard
    #                                           keeps it there (guard.py rules 5, 6); False: every node at once
    replication_factor: int = 1
    replicas_needed: int = 1                  # at the clients' consistency level (ONE: 1)
    system: str = "cassandra"
    knobs: str | None = None                  # the cluster's knob set when known: a model of another is refused
    running: Mapping[str, Any] = field(default_factory=dict)   # knob values the cluster runs (others: defaults)
    restart_seconds: tuple[float, ...] = ()   # restarts of one node measured on this cluster before
    data_bytes_per_node: float | None = None  # None: not measured, a rewrite is not weighed
    search: str = "ga"
    seed: int = 0
    shift: ShiftSettings = ShiftSettings()
    guard: GuardSettings = GuardSettings()
    guard_windows: int = 3                    # full windows of the mix before a change that the guard compares
    guard_max_waits: int = 3                  # partial windows a pending change may wait before it is rolled back
    trace: Any = None                         # a workloads.trace.Trace driven against `cql` while watched
    cql: tuple[str, int] | None = None        # a node's CQL address: live table options change through it (ALTER
    #                                           TABLE, once for the cluster) and a trace's client sends to it
    keyspace: str = "ycsb"                    # the table whose options are tuned (YCSB's)
    table: str = "usertable"
    trace_records: int = 100_000              # the records the cluster holds (the keys the trace's client picks)
    local: Any = None                         # online.local.LocalSetup: a cluster the run starts, loads (the
    #                                           trace's records) and may restart; `nodes` and `cql` are then its own
    jmx_access: Any = None                    # internals.JmxAccess: credentials and TLS from files (a remote cluster)
    cql_access: Any = None                    # cql.CqlAccess: the same for CQL

    def __post_init__(self) -> None:
        if self.local is not None:
            if self.nodes or self.cql is not None:
                raise UsageError("a local cluster's nodes and CQL address are its own: give --nodes or --hosts, "
                                 "not both, and no --cql with --nodes")
            if self.trace is None:
                raise UsageError("a local cluster has no traffic but a trace's: give --trace with --nodes")
            if self.replication_factor > self.local.nodes:
                raise UsageError(f"--rf {self.replication_factor} needs at least as many nodes; --nodes is "
                                 f"{self.local.nodes}")
        elif not self.nodes:
            raise UsageError("online needs at least one node to watch")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise UsageError(f"a node is given twice: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
        for name in ("window_seconds", "horizon_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise UsageError(f"{name.replace('_seconds', '')} must be a number of seconds > 0, got {value!r}")
        d = self.duration_seconds
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, float)) or not math.isfinite(d)
                              or d <= 0):
            raise UsageError(f"duration must be a number of seconds > 0, got {d!r}")
        if not (isinstance(self.replication_factor, int) and self.replication_factor >= 1):
            raise UsageError(f"the replication factor must be a whole number >= 1, got {self.replication_factor!r}")
        if not (isinstance(self.replicas_needed, int) and 1 <= self.replicas_needed <= self.replication_factor):
            raise UsageError(f"replicas needed must be within 1..{self.replication_factor}, got "
                             f"{self.replicas_needed!r}")
        if any(not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0) for s in self.restart_seconds):
            raise UsageError(f"measured restarts must be seconds > 0, got {self.restart_seconds!r}")
        b = self.data_bytes_per_node
        if b is not None and not (isinstance(b, (int, float)) and math.isfinite(b) and b > 0):
            raise UsageError(f"the data size per node must be bytes > 0, got {b!r}")
        for name in ("guard_windows", "guard_max_waits"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise UsageError(f"{name} must be a whole number >= 1, got {getattr(self, name)!r}")
        check_cql_name("keyspace", self.keyspace)
        check_cql_name("table", self.table)
        if self.trace is not None:
            if self.cql is None and self.local is None:
                raise UsageError("a trace needs the CQL address its client sends to (--cql HOST:PORT)")
            if isinstance(self.trace_records, bool) or not isinstance(self.trace_records, int) \
                    or self.trace_records < 1:
                raise UsageError(f"the records the cluster holds must be a whole number >= 1, got "
                                 f"{self.trace_records!r}")
            if self.duration_seconds is not None and self.duration_seconds < self.trace.seconds:
                raise UsageError(f"duration {self.duration_seconds:g} s is shorter than the trace "
                                 f"({self.trace.seconds:g} s): leave --duration out to watch the whole trace")

    @property
    def node_count(self) -> int:
        return self.local.nodes if self.local is not None else len(self.nodes)

    def table_target(self):
        """Where live table options change (observe.TableTarget), or None without a CQL address."""
        from .observe import TableTarget

        return None if self.cql is None else TableTarget(self.cql[0], self.cql[1], self.keyspace, self.table)

    @property
    def watch_seconds(self) -> float | None:
        """How long the run watches: the duration given, else the trace's length, else until stopped (None)."""
        if self.duration_seconds is not None or self.trace is None:
            return self.duration_seconds
        return float(self.trace.seconds)

    def record(self) -> dict[str, Any]:
        """The settings as stored in the study."""
        return {"model": self.model, "hosts": [n.name for n in self.nodes],
                "nodes": [{"name": n.name, "host": n.host, "jmx_port": n.jmx_port} for n in self.nodes],
                "window_seconds": self.window_seconds, "horizon_seconds": self.horizon_seconds,
                "duration_seconds": self.duration_seconds, "dry_run": self.dry_run, "canary": self.canary,
                "replication_factor": self.replication_factor, "replicas_needed": self.replicas_needed,
                "system": self.system, "knobs": self.knobs, "running_given": dict(self.running),
                "restart_seconds": list(self.restart_seconds), "data_bytes_per_node": self.data_bytes_per_node,
                "search": self.search, "seed": self.seed,
                "cql": None if self.cql is None else f"{self.cql[0]}:{self.cql[1]}", "keyspace": self.keyspace,
                "table": self.table,
                "jmx_access": self.jmx_access.record() if self.jmx_access is not None else None,
                "cql_access": self.cql_access.record() if self.cql_access is not None else None} \
            | ({"local": self.local.record()} if self.local is not None else {}) \
            | ({"trace": self.trace_record()} if self.trace else {})

    def trace_record(self) -> dict[str, Any]:
        t = self.trace
        return {"name": t.name, "seconds": t.seconds, "records": self.trace_records,
                "target": None if self.cql is None else f"{self.cql[0]}:{self.cql[1]}",
                "phases": [{"name": p.name, "workload": p.workload, "seconds": p.seconds, "rate": p.rate,
                            "threads": p.threads, "node_mix": p.node_mix()} for p in t.phases]}


@dataclass
class OnlineSummary:
    """What a run did, returned and stored in the study's settings."""

    study: str
    windows: int = 0
    shifts: int = 0
    recommendations: int = 0
    live_applied: int = 0
    live_kept: int = 0
    rollbacks: int = 0
    restarts: int = 0                                       # rolling restarts performed (or begun)
    restart_decisions: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""
    dry_run: bool = False
    running: dict[str, Any] = field(default_factory=dict)   # knobs off the model's defaults at the end
    final_rollback: dict[str, Any] | None = None   # a live change unjudged at the stop, rolled back
    trace: list[dict[str, Any]] = field(default_factory=list)   # the phases driven (workloads.trace.drive's rows)
    trace_error: str | None = None                  # why the trace's client stopped early, if it did

    def as_dict(self) -> dict[str, Any]:
        return {"study": self.study, "windows": self.windows, "shifts": self.shifts,
                "recommendations": self.recommendations, "live_applied": self.live_applied,
                "live_kept": self.live_kept, "rollbacks": self.rollbacks, "restarts": self.restarts,
                "restart_decisions": list(self.restart_decisions), "stopped": self.stopped, "dry_run": self.dry_run,
                "running": dict(self.running), "final_rollback": self.final_rollback,
                **({"trace": list(self.trace), "trace_error": self.trace_error} if self.trace or self.trace_error
                   else {})}
