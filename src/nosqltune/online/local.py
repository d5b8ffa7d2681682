"""`online --nodes N`: a local cluster the run starts, loads and may restart, stopped when the run ends.

`LocalCluster` (systems/cassandra/cluster.py) starts N nodes on loopback addresses; the run creates YCSB's table
at the replication factor given, loads the trace's records, and watches the nodes over JMX like any cluster. What
a cluster the run did not start cannot have is a `Restarter`: `LocalRestarter` rolls a restart through the nodes
one at a time, each

1. drained (memtables flushed, no new writes taken) and stopped;
2. given the running configuration with the restart changes (its cassandra.yaml keys and JVM options, the ones
   changed live included, placed as a trial places them: systems/cassandra/config.place), and started on the same
   address, ports and data;
3. waited for until it answers CQL and every other node has seen its new incarnation in gossip, then a few
   seconds for the failure detectors and the clients' drivers, before the next node's turn.

A node that does not come back is started again on the running configuration (live changes included, the roll's
changes not), the roll stops there, and the nodes restarted before it are put back on it too, so the cluster runs
one configuration. A roll whose heaps would not fit in the machine's memory is not begun. Each node's turn is timed
from the drain to serving again: the loop prices its next decisions with these times (controller.py).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..errors import UsageError
from .controller import NodeRestart, Say
from .observe import JmxNode, _one_line
from .plan import Change

RESTART_TIMEOUT_S = 180.0
SETTLE_S = 5.0   # after the others saw a restarted node: their failure detectors and the clients' drivers mark it up


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
    windows do. `started_with`: the configuration the nodes started with, as placed (its keys and flags are taken
    out of each node's own settings, so a roll places the running configuration whole instead of piling flags up).
    `explicit`: the knobs that configuration set; a roll writes those and the knobs whose running value is not the
    knob file's default, and leaves the others to Cassandra (which derives some from the heap: the memtable space,
    the key cache)."""

    def __init__(self, cluster, names: Sequence[str], space, started_with=None, timeout: float = RESTART_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic, settle_s: float = SETTLE_S,
                 sleep: Callable[[float], None] = time.sleep, explicit: Sequence[str] = ()) -> None:
        if len(names) != len(cluster.members):
            raise ValueError("one name per node")
        self.cluster, self.names, self.space, self.timeout, self.clock = cluster, tuple(names), space, timeout, clock
        self.settle_s, self.sleep, self.explicit = settle_s, sleep, frozenset(explicit)
        yaml0, jvm0 = (dict(started_with.yaml), list(started_with.jvm)) if started_with is not None else ({}, [])
        # each node's own settings (seeds, ports, the cluster's flags) without the configuration it started with
        self.base = [({k: v for k, v in n.yaml_overrides.items() if k not in yaml0},
                      [f for f in n.jvm_flags if f not in jvm0]) for n in cluster.members]

    def settings_with(self, values: Mapping[str, Any]) -> list[tuple[dict[str, Any], list[str]]]:
        """Each node's cassandra.yaml overrides and JVM flags for a configuration: its cassandra.yaml and JVM knobs
        (the live ones too: a restarted node must keep what was changed live) placed on the node's own settings."""
        from ..systems.cassandra.config import place

        node_settings = {k: v for k, v in values.items()
                         if k in self.space and self.space[k].applies in ("yaml", "jvm")}
        placed = place(self.space, node_settings)
        return [({**yaml, **placed.yaml}, [*flags, *placed.jvm]) for yaml, flags in self.base]

    def roll(self, changes: Sequence[Change], running: Mapping[str, Any], say: Say) -> tuple[NodeRestart, ...]:
        """Restart every node with the running configuration and the changes; a node that does not come back is put
        back on what it ran, and so are the nodes restarted before it, so the cluster runs one configuration."""
        from ..systems.cassandra.cluster import check_fits

        outside = [c.knob for c in changes if self.space[c.knob].applies not in ("yaml", "jvm")]
        if outside:
            raise UsageError("a rolling restart sets cassandra.yaml keys and JVM options only, not "
                             + ", ".join(sorted(outside)))
        set_now = {k: v for k, v in running.items() if k in self.explicit or k not in self.space
                   or self.space[k].default != v}
        values = {**set_now, **{c.knob: c.after for c in changes}}
        what = ", ".join(f"{c.knob} = {c.after}" for c in changes)
        try:
            if "heap_size" in values:   # the new heaps must fit beside the client, as at the start
                check_fits(len(self.cluster.members), int(values["heap_size"]))
            wanted = self.settings_with(values)
            # a node that does not come back goes back to the running configuration, live changes included (its
            # settings at its last start lack what was changed live since)
            back = self.settings_with(set_now)
        except UsageError as exc:
            say(f"rolling restart with {what} not begun: {exc}")
            return (NodeRestart(self.names[0], False, 0.0, f"not begun: {exc}"),)
        turns: list[NodeRestart] = []
        done: list[tuple[str, Any, tuple]] = []
        for name, node, (yaml, flags), before in zip(self.names, self.cluster.members, wanted, back):
            started = self.clock()
            try:
                say(f"node {name}: draining and restarting with {what}")
                self._restart(node, yaml, flags)
                turns.append(NodeRestart(name, True, self.clock() - started))
                done.append((name, node, before))
                say(f"node {name}: serving again after {turns[-1].seconds:.0f} s")
            except Exception as exc:   # the node did not come back: back to what it ran, and the roll stops here
                error = _line(exc, 300)
                try:
                    self._restart(node, *before)
                except Exception as again:
                    error += f"; on the running configuration it did not come back either ({_line(again, 200)})"
                turns.append(NodeRestart(name, False, self.clock() - started, error))
                say(f"node {name}: restart failed ({error}); the roll stops, and the nodes restarted before it go "
                    "back to what they ran")
                for earlier, other, settings in reversed(done):   # one configuration on every node again
                    began = self.clock()
                    try:
                        self._restart(other, *settings)
                        turns.append(NodeRestart(earlier, False, self.clock() - began,
                                                 f"put back on the running configuration after {name} failed"))
                    except Exception as again:
                        turns.append(NodeRestart(earlier, False, self.clock() - began,
                                                 f"not back on the running configuration: {_line(again, 200)}"))
                return tuple(turns)
        return tuple(turns)

    def _restart(self, node, yaml: dict[str, Any], flags: list[str]) -> None:
        """Drain and stop the node, start it with these settings on its address, ports and data, and wait until
        every other node has seen its new incarnation (a higher gossip generation in system_views.gossip_info):
        the peers table alone holds rows from before the restart. Then `settle_s` for the failure detectors and
        the clients' drivers to mark it up."""
        from ..systems.cassandra.cluster import gossip_generations

        others = [m for m in self.cluster.members if m is not node]
        seen = gossip_generations(others[0].address, others[0].ports.native).get(node.address) if others else None
        node.stop(drain=True, timeout=60)
        node.yaml_overrides, node.jvm_flags = yaml, flags
        node.start(self.timeout)
        deadline = self.clock() + self.timeout
        while others:
            now = [gossip_generations(m.address, m.ports.native).get(node.address) for m in others]
            if all(g is not None and (seen is None or g > seen) for g in now):
                break
            if self.clock() > deadline:
                raise RuntimeError(f"the other nodes did not see {node.address} come back within {self.timeout:.0f} s "
                                   f"(gossip generations {now}, before the restart {seen})")
            self.sleep(0.5)
        self.sleep(self.settle_s)


def _line(exc: BaseException, limit: int) -> str:
    return _one_line(exc, limit) or type(exc).__name__


@dataclass
class Started:
    """A started and loaded local cluster: the nodes as the loop watches them, the CQL address, the restarter."""

    nodes: tuple[JmxNode, ...]
    cql: tuple[str, int]
    contact: str             # every node's address, comma separated: the trace's client contact points
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
            _create_schema(first.address, first.ports.native, workload,
                           replication_factor=replication_factor,
                           table_statements=placed.table_statements(KEYSPACE, TABLE))
            say(f"loading {records:,} records (replication factor {replication_factor})")
            t0 = time.monotonic()
            run_client("load", workload, host=first.address, port=first.ports.native, trial_dir=setup.home / "load",
                       timeout=client_timeout(workload, "load"))
            names = [f"node{i}" for i in range(1, setup.nodes + 1)]
            nodes = tuple(JmxNode(name, m.ports.jmx) for name, m in zip(names, cluster.members))
            contact = ",".join(m.address for m in cluster.members)   # the trace's client: every node a contact
            yield Started(nodes, (first.address, first.ports.native), contact,
                          LocalRestarter(cluster, names, space, started_with=placed, explicit=list(setup.config)),
                          boot, time.monotonic() - t0)
    finally:
        shutil.rmtree(setup.home, ignore_errors=True)
