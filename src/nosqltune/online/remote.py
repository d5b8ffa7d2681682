"""A running cluster as a rollout reaches it (rollout.py's ClusterActions): JMX through loadgen's NodeInternals and
CQL through the python driver, each with credentials and TLS from files when the cluster asks for them
(systems/cassandra/internals.JmxAccess, systems/cassandra/cql.CqlAccess), never a password on a command line or in
the store.

Restarts: a cluster nosqltune did not start is restarted by the operator's own command (`--restart-command`), run
here once per node after the node is drained, with the node and the plan in its environment:
NOSQLTUNE_NODE (its name), NOSQLTUNE_HOST (its address), NOSQLTUNE_PLAN (the plan's folder: cassandra.yaml.patch,
jvm-server.options), NOSQLTUNE_CONFIG (`plan`, or `previous` to go back to what it ran). The command returns once
the node's service is started again (systemctl restart cassandra, a configuration manager's run, a pod's rollout);
readiness is then waited for here. A cluster `nosqltune cluster up` started is restarted by nosqltune itself
(systems/cassandra/cluster.restart_member), its cassandra.yaml keys and JVM options placed as the plan says.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..errors import UsageError
from ..systems.cassandra import internals
from ..systems.cassandra.cql import CqlAccess
from ..systems.cassandra.internals import JmxAccess
from .observe import JmxNode, _one_line, check_cql_name, read_snapshot
from .rollout import RolloutPlan
from .window import Snapshot

RESTART_COMMAND_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class RemoteNode:
    """One node: its name in the rollout, its JMX port and host (None: loopback), its address as the others list it
    (defaults to the JMX host)."""

    name: str
    jmx_port: int
    jmx_host: str | None = None
    address: str | None = None

    @property
    def listed_as(self) -> str:
        return self.address or self.jmx_host or "127.0.0.1"


@dataclass
class RemoteCluster:
    """ClusterActions over JMX and CQL. `restart`: (node, plan or None) -> None, the operator's command or a local
    cluster's own restart."""

    nodes: Sequence[RemoteNode]
    cql: tuple[str, int]
    restart_node: Callable[[RemoteNode, RolloutPlan | None], None] | None = None
    jmx_access: JmxAccess | None = None
    cql_access: CqlAccess | None = None
    timeout: float = 30.0
    say: Callable[[str], None] = lambda _: None
    table_option_names: Sequence[str] = ()
    judged_table: str | None = None   # KS.T: windows of this table's own reads and writes on each node
    homes: Mapping[str, str] = field(default_factory=dict)   # node -> its folder, for nodes on this machine
    _by_name: dict[str, RemoteNode] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_name = {n.name: n for n in self.nodes}

    def _node(self, name: str) -> RemoteNode:
        return self._by_name[name]

    def _session(self):
        from ..systems.cassandra import cql

        return cql.session(self.cql[0], self.cql[1], timeout=self.timeout, access=self.cql_access)

    # -- reading
    def status(self, node: str) -> dict[str, Any]:
        n = self._node(node)
        return internals.node_status(n.jmx_port, timeout=self.timeout, host=n.jmx_host, access=self.jmx_access)

    def address(self, node: str) -> str:
        return self._node(node).listed_as

    def counters(self) -> Snapshot:
        jmx = [JmxNode(n.name, n.jmx_port, n.jmx_host) for n in self.nodes]

        def read(port, timeout, host):
            return internals.client_requests(port, timeout=timeout, host=host, access=self.jmx_access,
                                             table=self.judged_table)

        return read_snapshot(jmx, timeout=self.timeout, say=self.say, read=read)

    def pending_compactions(self, node: str) -> int | None:
        n = self._node(node)
        stats = internals.node_stats(n.jmx_port, timeout=self.timeout, host=n.jmx_host, access=self.jmx_access)
        value = stats.get("pending_compactions")
        return None if value is None else int(value)

    def table_bytes(self, node: str, table: str) -> int | None:
        """The table's live data on the node (what a rewrite writes once more beside it)."""
        n = self._node(node)
        ks, t = table.split(".")
        stats = internals.node_stats(n.jmx_port, ks, t, timeout=self.timeout, host=n.jmx_host, access=self.jmx_access)
        value = stats.get("live_disk_space_used_bytes")
        return None if value is None else int(value)

    def free_disk(self, node: str) -> int | None:
        """Free bytes where the node keeps its data: known for nodes on this machine, None for others (JMX does
        not say)."""
        home = self.homes.get(node)
        if not home:
            return None
        found = os.statvfs(home)
        return found.f_bavail * found.f_frsize

    def check_tables(self, tables: Sequence[str], need_rf: int) -> None:
        with self._session() as sess:
            for table in tables:
                ks, t = table.split(".")
                check_cql_name("keyspace", ks)
                check_cql_name("table", t)
                if sess.execute("SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND "
                                "table_name = %s", (ks, t)).one() is None:
                    raise UsageError(f"no table {table} on the cluster (--table names your tables)")
                row = sess.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                                   (ks,)).one()
                rf = replication_factor(dict(row.replication) if row else {})
                if rf < need_rf:
                    raise UsageError(f"keyspace {ks} keeps {rf} replica(s): a node restarted makes its data "
                                     f"unavailable; a rollout with restarts needs a replication factor of {need_rf} "
                                     "or more")

    def table_options(self, tables: Sequence[str]) -> dict[str, dict[str, Any]]:
        out = {}
        with self._session() as sess:
            for table in tables:
                ks, t = table.split(".")
                row = sess.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                                   (ks, t)).one()
                values = row._asdict() if row is not None else {}
                out[table] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in values.items()
                              if k in self.table_option_names}
        return out

    # -- changing
    def set_live(self, node: str, knob: str, value: Any) -> dict[str, Any]:
        n = self._node(node)
        try:
            answer = internals.set_live(n.jmx_port, knob, value, timeout=self.timeout, host=n.jmx_host,
                                        access=self.jmx_access)
        except Exception as exc:   # refused or unanswered: the rollout stops on it
            return {"error": _one_line(exc, 300)}
        return {"before": answer.get("value_before"), "read_back": answer.get("value_read_back"),
                "unit": answer.get("unit"), "error": None}

    def alter(self, statements: Sequence[str]) -> None:
        with self._session() as sess:
            for statement in statements:
                sess.execute(statement)

    def restore_tables(self, options: Mapping[str, Mapping[str, Any]]) -> None:
        from ..systems.cassandra.config import alter_table

        with self._session() as sess:
            for table, values in options.items():
                if values:
                    ks, t = table.split(".")
                    sess.execute(alter_table(ks, t, dict(values)))

    def restart(self, node: str, plan: RolloutPlan | None) -> None:
        if self.restart_node is None:
            raise UsageError("the plan restarts nodes: give --restart-command (how your nodes are restarted)")
        n = self._node(node)
        try:
            internals.drain(n.jmx_port, timeout=120, host=n.jmx_host, access=self.jmx_access)
        except Exception as exc:   # said: a node that cannot drain is restarted anyway, its commit log replays
            self.say(f"  node {node}: drain failed ({_one_line(exc)}); restarting anyway")
        self.restart_node(n, plan)

    def rewrite(self, node: str, table: str, throttle_mib_s: int) -> dict[str, Any]:
        n = self._node(node)
        ks, t = table.split(".")
        return internals.rewrite_table(n.jmx_port, ks, t, throttle_mib_s, host=n.jmx_host, access=self.jmx_access)


def replication_factor(replication: Mapping[str, Any]) -> int:
    """The replicas a keyspace keeps per data centre (the smallest over its data centres), from
    system_schema.keyspaces' replication map."""
    strategy = str(replication.get("class", "")).rsplit(".", 1)[-1]
    if strategy == "SimpleStrategy":
        return int(replication.get("replication_factor", 1))
    if strategy == "LocalStrategy":
        return 1
    counts = [int(v) for k, v in replication.items() if k != "class" and str(v).isdigit()]
    return min(counts) if counts else 1


def command_restarter(command: str, plan_folder: str,
                      timeout: float = RESTART_COMMAND_TIMEOUT_S) -> Callable[[RemoteNode, RolloutPlan | None], None]:
    """The operator's restart command (module docstring) as a rollout's restart."""
    def restart(node: RemoteNode, plan: RolloutPlan | None) -> None:
        env = {**os.environ, "NOSQLTUNE_NODE": node.name, "NOSQLTUNE_HOST": node.listed_as,
               "NOSQLTUNE_PLAN": str(Path(plan_folder).resolve()), "NOSQLTUNE_CONFIG": "plan" if plan else "previous"}
        try:
            proc = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"--restart-command did not return within {timeout:.0f} s for {node.name}") from None
        if proc.returncode != 0:
            tail = " ".join((proc.stderr or proc.stdout or "").split())[-300:]
            raise RuntimeError(f"--restart-command failed for {node.name} (exit {proc.returncode}): {tail}")
    return restart


def local_restarter(home: Path, key: str,
                    timeout: float = 180.0) -> Callable[[RemoteNode, RolloutPlan | None], None]:
    """The restart of a cluster `nosqltune cluster up` started (the cluster's folder `home`), for the rollout `key`
    (its plan's digest): the plan on top of what each node ran before this rollout restarted it, and back to that."""
    from ..systems.cassandra.cluster import restart_member

    def restart(node: RemoteNode, plan: RolloutPlan | None) -> None:
        if plan is None:
            restart_member(home, node.listed_as, None, None, timeout, keep_as=key)
        else:
            restart_member(home, node.listed_as, dict(plan.yaml), list(plan.jvm_add), timeout, keep_as=key)
    return restart
