"""`online --nodes N`: a local cluster the run starts, loads and may restart, stopped when the run ends.

`LocalCluster` (systems/cassandra/cluster.py) starts N nodes on loopback addresses; the run creates YCSB's table
at the replication factor given, loads the trace's records, and watches the nodes over JMX like any cluster. What
a cluster the run did not start cannot have is a `Restarter`: `LocalRestarter` rolls a restart through the nodes
one at a time, each

1. drained (memtables flushed, no new writes taken) and stopped;
2. given the restart changes on top of what it ran (cassandra.yaml keys and JVM options, placed as a trial places
   them: systems/cassandra/config.place), and started on the same address, ports and data;
3. waited for until it answers CQL and every node lists every other as a peer, before the next node's turn.

A node that does not come back is started again on its previous settings and the roll stops there, so the
cluster never runs two configurations because of a failure. Each node's turn is timed from the drain to serving
again: the loop prices its next decisions with these times (controller.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import UsageError
from .controller import NodeRestart, Say
from .observe import JmxNode
from .plan import Change

RESTART_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class LocalSetup:
    """The local cluster of a run: its nodes, their heap, and where its folders live (removed at the end). The
    replication factor and the records loaded are the run's (OnlineSettings)."""

    nodes: int
    home: Path
    heap_mb: int = 1024
    config: Mapping[str, Any] = field(default_factory=dict)   # knob values the nodes start with (checked)

    def __post_init__(self) -> None:
        from ..systems.cassandra.cluster import MAX_NODES, MIN_FITTED_HEAP_MB

        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or not 1 <= self.nodes <= MAX_NODES:
            raise UsageError(f"--nodes must be within 1..{MAX_NODES}, got {self.nodes!r}")
        if isinstance(self.heap_mb, bool) or not isinstance(self.heap_mb, int) or self.heap_mb < MIN_FITTED_HEAP_MB:
            raise UsageError(f"a node's heap must be at least {MIN_FITTED_HEAP_MB} MiB, got {self.heap_mb!r}")

    def record(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "heap_mb": self.heap_mb, "home": str(self.home), "config": dict(self.config)}


class LocalRestarter:
    """The controller's Restarter for the nodes of a LocalCluster this process runs; `names` name them as the
    windows do. It keeps what it has rolled out, so a later roll places those values with the new ones."""

    def __init__(self, cluster, names: Sequence[str], space, timeout: float = RESTART_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if len(names) != len(cluster.members):
            raise ValueError("one name per node")
        self.cluster, self.names, self.space, self.timeout, self.clock = cluster, tuple(names), space, timeout, clock
        self.base = [(dict(n.yaml_overrides), list(n.jvm_flags)) for n in cluster.members]
        self.rolled: dict[str, Any] = {}

    def settings_with(self, values: Mapping[str, Any]) -> list[tuple[dict[str, Any], list[str]]]:
        """Each node's cassandra.yaml overrides and JVM flags with these restart knobs' values."""
        from ..systems.cassandra.config import place

        placed = place(self.space, dict(values))
        if placed.table or placed.keyspace or placed.volume:
            raise UsageError("a rolling restart sets cassandra.yaml keys and JVM options only, not "
                             + ", ".join(sorted({**placed.table, **placed.keyspace, **placed.volume})))
        return [({**yaml, **placed.yaml}, [*flags, *placed.jvm]) for yaml, flags in self.base]

    def roll(self, changes: Sequence[Change], say: Say) -> tuple[NodeRestart, ...]:
        values = {**self.rolled, **{c.knob: c.after for c in changes}}
        wanted = self.settings_with(values)
        turns: list[NodeRestart] = []
        for name, node, (yaml, flags) in zip(self.names, self.cluster.members, wanted):
            started = self.clock()
            before = (dict(node.yaml_overrides), list(node.jvm_flags))
            try:
                say(f"node {name}: draining and restarting with "
                    + ", ".join(f"{c.knob} = {c.after}" for c in changes))
                self._restart(node, yaml, flags)
                turns.append(NodeRestart(name, True, self.clock() - started))
                say(f"node {name}: serving again after {turns[-1].seconds:.0f} s")
            except Exception as exc:   # the node did not come back: back to what it ran, and the roll stops here
                error = " ".join(str(exc).split())[:300] or type(exc).__name__
                try:
                    self._restart(node, *before)
                except Exception as again:
                    why = " ".join(str(again).split())[:200]
                    error += f"; on its previous settings it did not come back either ({why})"
                turns.append(NodeRestart(name, False, self.clock() - started, error))
                say(f"node {name}: restart failed ({error}); the roll stops")
                return tuple(turns)
        self.rolled = values
        return tuple(turns)

    def _restart(self, node, yaml: dict[str, Any], flags: list[str]) -> None:
        node.stop(drain=True, timeout=60)
        node.yaml_overrides, node.jvm_flags = yaml, flags
        node.start(self.timeout)
        self.cluster.wait_all_up(self.timeout)


@dataclass
class Started:
    """A started and loaded local cluster: the nodes as the loop watches them, the CQL address, the restarter."""

    nodes: tuple[JmxNode, ...]
    cql: tuple[str, int]
    restarter: LocalRestarter
    boot_seconds: float
    load_seconds: float


@contextmanager
def local_cluster(setup: LocalSetup, trace, records: int, replication_factor: int, space,
                  say: Say = lambda _: None) -> Iterator[Started]:
    """Start the cluster with `setup.config` (its cassandra.yaml keys and JVM options on every node, its table
    options on YCSB's table before the load), create the table at the replication factor, load `records`
    records of the trace's first phase's workload, and yield; the nodes are stopped (and their folder removed)
    however the block ends."""
    import shutil

    from ..systems.cassandra.cluster import LocalCluster, check_fits
    from ..systems.cassandra.config import place
    from ..systems.cassandra.trial import KEYSPACE, TABLE, _create_schema
    from ..workloads.ycsb import client_timeout, run_client

    check_fits(setup.nodes, setup.heap_mb)
    placed = place(space, dict(setup.config))
    design = [k for k in setup.config if space[k].applies == "design"]
    if placed.keyspace or placed.volume or design:
        raise UsageError("a local cluster starts with cassandra.yaml, JVM and table settings only (its design is "
                         "--nodes and --rf), not " + ", ".join(sorted({*placed.keyspace, *placed.volume, *design})))
    if setup.home.exists():
        shutil.rmtree(setup.home)
    cluster = LocalCluster(home=setup.home, nodes=setup.nodes, heap_mb=setup.heap_mb, yaml_overrides=placed.yaml,
                           jvm_flags=list(placed.jvm))
    try:
        with cluster:
            say(f"starting {setup.nodes} local node(s) in {setup.home}")
            boot = cluster.start()
            first = cluster.members[0]
            workload = trace.phases[0].client_workload(records)
            _create_schema(first.address, first.ports.native, workload.fieldcount,
                           replication_factor=replication_factor,
                           table_statements=placed.table_statements(KEYSPACE, TABLE))
            say(f"loading {records:,} records (replication factor {replication_factor})")
            t0 = time.monotonic()
            run_client("load", workload, host=first.address, port=first.ports.native, trial_dir=setup.home / "load",
                       timeout=client_timeout(workload, "load"))
            names = [f"node{i}" for i in range(1, setup.nodes + 1)]
            nodes = tuple(JmxNode(name, m.ports.jmx) for name, m in zip(names, cluster.members))
            yield Started(nodes, (first.address, first.ports.native), LocalRestarter(cluster, names, space), boot,
                          time.monotonic() - t0)
    finally:
        shutil.rmtree(setup.home, ignore_errors=True)
