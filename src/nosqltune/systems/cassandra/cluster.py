"""A local cluster of N Cassandra nodes on one machine, each on its own loopback address (127.0.0.1,
127.0.0.2, ...) with the same CQL and storage ports, as Cassandra's ccm does (Linux routes all of 127/8 to the
loopback device). Nodes start one after another, the first is the seed; the cluster is up when every node
lists every other as a peer and answers CQL. Each node has its own JMX port (JMX listens on 127.0.0.1 only).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import TrialError, UsageError
from ...runtime import process
from .node import CassandraNode, NodePorts
from .provision import DEFAULT_VERSION

MAX_NODES = 9
DEFAULT_HEAP_MB = 2048          # a node's heap unless the user names one (what the figures here were measured with)
MIN_FITTED_HEAP_MB = 512        # below this, a node spends its trial collecting garbage: refuse instead
NODE_OVERHEAD_MB = 600          # a node's memory beyond its heap (metaspace, off-heap, threads), measured ~0.5 GiB
CLIENT_RESERVE_MB = 1536        # the YCSB client JVM and the harness
# joining an empty cluster: no bootstrap streaming, no 30 s ring delay per node. The schema wait goes back to
# Cassandra's 30 s (jvm17.options cuts it to 1 s for a lone node): a node that joins a running one waits for
# their schemas to agree, which took more than a second on a busy machine ("Could not achieve schema readiness
# in PT1S", the node exits); the wait ends as soon as they agree.
CLUSTER_JVM_FLAGS = ["-Dcassandra.ring_delay_ms=1000", "-Dcassandra.skip_wait_for_gossip_to_settle=0",
                     "-Dcassandra.schema_delay_ms=30000"]
# A restored node knows its peers and, before it serves CQL, waits up to 10 s for them to connect
# (StartupClusterConnectivityChecker); the seed starts alone, so it waited the whole 10 s every trial. A
# negative timeout skips that wait: start() itself waits until every node sees every other.
BLOCK_FOR_PEERS_S = -1
STATE_FILE = "cluster.json"


def address(index: int) -> str:
    """The loopback address of node `index` (1-based)."""
    return f"127.0.0.{index}"


def available_mb() -> int | None:
    from ...runtime.environment import meminfo_kib

    kib = meminfo_kib("MemAvailable")
    return None if kib is None else kib // 1024


def check_fits(nodes: int, heap_mb: int, available: int | None = None) -> None:
    """Refuse (one line) a cluster whose nodes and client would not fit in the machine's memory."""
    if not 1 <= nodes <= MAX_NODES:
        raise UsageError(f"--nodes must be within 1..{MAX_NODES}, got {nodes}")
    available = available_mb() if available is None else available
    need = nodes * (heap_mb + NODE_OVERHEAD_MB) + CLIENT_RESERVE_MB
    if available is not None and need > available:
        fit = max(0, (available - CLIENT_RESERVE_MB) // nodes - NODE_OVERHEAD_MB)
        what = "a node" if nodes == 1 else f"{nodes} nodes"
        raise UsageError(f"{what} with a {heap_mb} MiB heap need{'s' if nodes == 1 else ''} about {need} MiB with the "
                         f"client; {available} MiB are available: use a heap of at most {fit} MiB (--heap)"
                         + ("" if nodes == 1 else " or fewer nodes"))


def check_trials_fit(parallel: int, nodes_per_trial: int, heap_mb: int) -> None:
    """Refuse (one line) `parallel` trials at once on this machine whose nodes, each with its heap, would not fit
    together (more nodes than run side by side, or more memory than the machine has)."""
    nodes = parallel * nodes_per_trial
    if nodes > MAX_NODES:
        raise UsageError(f"--parallel {parallel}: {nodes} Cassandra nodes at once on this machine, at most "
                         f"{MAX_NODES} run side by side; give a smaller --parallel, or --executor ray")
    try:
        check_fits(nodes, heap_mb)
    except UsageError as exc:
        raise UsageError(f"--parallel {parallel} runs {nodes} nodes at once: {exc}") from None


def fitting_heap(nodes: int, wanted: int = DEFAULT_HEAP_MB, available: int | None = None) -> int:
    """The heap per node of a cluster for which the user named none: `wanted`, or when `nodes` nodes with
    it would not fit, the largest multiple of 256 MiB that fits; refused (check_fits) below 512 MiB."""
    available = available_mb() if available is None else available
    if available is None:
        return wanted
    fit = (available - CLIENT_RESERVE_MB) // nodes - NODE_OVERHEAD_MB
    heap = min(wanted, fit // 256 * 256)
    if heap < MIN_FITTED_HEAP_MB:
        check_fits(nodes, MIN_FITTED_HEAP_MB, available)   # says how much there is and what would fit
        heap = MIN_FITTED_HEAP_MB
    return heap


@dataclass
class LocalCluster:
    """N nodes under `home` (home/node1, home/node2, ...). Use as a context manager: it always stops them."""

    home: Path
    nodes: int
    heap_mb: int = 1024
    version: str = DEFAULT_VERSION
    yaml_overrides: dict[str, Any] = field(default_factory=dict)       # the same for every node
    per_node: dict[int, dict[str, Any]] = field(default_factory=dict)  # node index -> overrides on top
    jvm_flags: list[str] = field(default_factory=list)
    detached: bool = False
    memory_limit_mb: int | None = None   # a memory cgroup per node (disk-bound)
    volumes: dict[int, Any] = field(default_factory=dict)   # node index -> its own volume (systems.volume.NodeVolume)
    members: list[CassandraNode] = field(default_factory=list)

    @property
    def addresses(self) -> list[str]:
        return [address(i) for i in range(1, self.nodes + 1)]

    @property
    def native_port(self) -> int:
        return self.members[0].ports.native

    def start(self, timeout: float = 180.0, restored: bool = False) -> float:
        """Start the nodes and wait until each sees all the others; returns the seconds taken. A new cluster
        joins one node after another; a `restored` one (every node's data, with its tokens, restored) starts
        the seed, then all the others at once."""
        check_fits(self.nodes, self.heap_mb)
        started = time.monotonic()
        native, storage, *jmx = process.free_ports(2 + self.nodes)
        seeds = [{"class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
                  "parameters": [{"seeds": f"{address(1)}:{storage}"}]}]
        try:
            for i in range(1, self.nodes + 1):
                overrides = {**self.yaml_overrides, **self.per_node.get(i, {}), "seed_provider": seeds,
                             "auto_bootstrap": False, "block_for_peers_timeout_in_secs": BLOCK_FOR_PEERS_S}
                node = CassandraNode(home=self.home / f"node{i}", version=self.version, heap_mb=self.heap_mb,
                                     yaml_overrides=overrides, jvm_flags=CLUSTER_JVM_FLAGS + self.jvm_flags,
                                     address=address(i), ports=NodePorts(native=native, storage=storage,
                                                                         jmx=jmx[i - 1]),
                                     detached=self.detached, memory_limit_mb=self.memory_limit_mb,
                                     volume=self.volumes.get(i))
                self.members.append(node)
                if i == 1 or not restored:
                    node.start(timeout)
            if restored:
                for node in self.members[1:]:
                    node.prepare()
                    node.launch()
                for node in self.members[1:]:
                    node.wait_ready(max(10.0, timeout - (time.monotonic() - started)))
            self.wait_all_up(max(10.0, timeout - (time.monotonic() - started)))
        except BaseException:
            self.stop(drain=False)
            raise
        return time.monotonic() - started

    def wait_all_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            seen = self.peers_seen()
            if all(len(peers) == self.nodes - 1 for peers in seen.values()):
                return
            if time.monotonic() > deadline:
                raise TrialError("timeout", f"the nodes did not all see each other within {timeout:.0f} s: "
                                 + "; ".join(f"{a} sees {sorted(p) or 'none'}" for a, p in seen.items()))
            time.sleep(0.5)

    def peers_seen(self) -> dict[str, set[str]]:
        storage = self.members[0].ports.storage   # every node listens on the same ports, each on its address
        return {addr: peers_of(addr, self.native_port, storage) for addr in self.addresses}

    def stop(self, drain: bool = True) -> None:
        for node in reversed(self.members):
            node.stop(drain=drain, timeout=30 if drain else 0)

    def state(self) -> dict[str, Any]:
        """What `cluster status/down` need later: addresses, ports, pids, homes."""
        return {"nodes": self.nodes, "heap_mb": self.heap_mb, "version": self.version,
                "native_port": self.native_port, "storage_port": self.members[0].ports.storage,
                "members": [{"address": n.address, "home": str(n.home), "pid": n.proc.pid, "jmx_port": n.ports.jmx}
                            for n in self.members]}

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc) -> None:
        self.stop(drain=False)


def peers_of(node_address: str, port: int, storage_port: int | None = None) -> set[str]:
    """The peers a node lists (system.peers_v2), as addresses; empty when it does not answer. With `storage_port`,
    only the rows of peers on this start's ports: a restored node's system keyspace holds rows of the ports its
    dataset was built with, there from its first answer, and a peer has a row on the new ports only once its
    gossip reached the node. Counting the old rows let a restored cluster's trial begin while node 1 still sent
    node 2's requests to the old port (a test-all run lost 129 of 3,000 operations so)."""
    from .cql import session

    try:
        with session(node_address, port, timeout=5.0) as sess:
            rows = sess.execute("SELECT peer, peer_port, native_port FROM system.peers_v2")
            return {str(row.peer) for row in rows
                    if storage_port is None or (row.peer_port == storage_port and row.native_port == port)}
    except Exception:
        return set()


def gossip_generations(node_address: str, port: int) -> dict[str, int]:
    """The gossip generation of every endpoint a node knows (system_views.gossip_info), by address: a node's
    generation grows each time it starts, so a peer's answer with a higher one has seen it come back. Empty when
    the node does not answer."""
    from .cql import session

    try:
        with session(node_address, port, timeout=5.0) as sess:
            return {str(row.address): int(row.generation)
                    for row in sess.execute("SELECT address, generation FROM system_views.gossip_info")}
    except Exception:
        return {}


# ------------------------------------------------------------------------------------------------ the CLI's side

def cluster_home(root: Path, name: str) -> Path:
    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"--name {name!r}: a cluster name is a plain word such as local (no '/', no leading '.')")
    return root / "clusters" / name


def read_state(home: Path) -> dict[str, Any] | None:
    path = home / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def pid_alive(pid: int, home: str) -> bool:
    """The pid runs and is this node's JVM (its command line names the node's home), not a reused pid."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return f"-Dnosqltune.node={home}" in cmdline.replace("\0", " ")


def status(home: Path) -> dict[str, Any]:
    state = read_state(home)
    if state is None:
        raise UsageError(f"no cluster at {home} (start one with `nosqltune cluster up`)")
    members = []
    for member in state["members"]:
        alive = pid_alive(member["pid"], member["home"])
        peers = peers_of(member["address"], state["native_port"], state.get("storage_port")) if alive else set()
        members.append({**member, "running": alive, "cql": bool(alive and (peers or state["nodes"] == 1)),
                        "peers": sorted(peers)})
    return {**state, "home": str(home), "members": members,
            "up": all(m["running"] and len(m["peers"]) == state["nodes"] - 1 for m in members)}


def down(home: Path, timeout: float = 60.0) -> list[str]:
    """Drain and stop every node of the cluster at `home`, SIGKILL after `timeout`; returns what was stopped."""
    from .internals import drain

    state = read_state(home)
    if state is None:
        raise UsageError(f"no cluster at {home}")
    stopped = []
    for member in reversed(state["members"]):
        pid = member["pid"]
        if not pid_alive(pid, member["home"]):
            continue
        try:
            drain(member["jmx_port"], timeout=30)
        except Exception:  # a node that cannot drain is still stopped
            pass
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid, member["home"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid, member["home"]):
            os.kill(pid, signal.SIGKILL)
        stopped.append(member["address"])
    (home / STATE_FILE).unlink(missing_ok=True)
    return stopped


# ------------------------------------------------------------------------------------------------ a node's restart
BEFORE_SUFFIX = ".before-"   # + a rollout's key: a node's cassandra.yaml and command line as they were before it


def member_of(home: Path, address: str) -> dict[str, Any]:
    """The member of the cluster at `home` listening on `address`; UsageError when there is none."""
    state = read_state(home)
    if state is None:
        raise UsageError(f"no cluster at {home} (start one with `nosqltune cluster up`)")
    for member in state["members"]:
        if member["address"] == address:
            return member
    raise UsageError(f"the cluster at {home} has no node {address}")


def restart_member(home: Path, address: str, yaml_keys: dict[str, Any] | None, jvm_add: list[str] | None,
                   timeout: float = 180.0, keep_as: str = "rollout") -> float:
    """Drain, stop and start again one node of a cluster `cluster up` started, on its address, ports and data: with
    `yaml_keys` (dotted cassandra.yaml keys) and `jvm_add` (JVM options; one that names a flag the node has
    replaces it, another collector than G1 takes G1's lines with it) on top of what it ran before the first restart
    under `keep_as` (a rollout's key; that configuration is kept beside its cassandra.yaml under the key), or, with
    both None, exactly as it ran then. So a second rollout builds on the first one's settings and goes back to
    them. Returns the seconds from the drain to CQL answering; TrialError when it does not come back within
    `timeout`."""
    import yaml as yamllib

    from .cql import try_query
    from .internals import drain
    from .node import G1_ONLY, set_dotted

    member_of(home, address)   # refused in one line when there is no such node
    state = read_state(home)
    member = next(m for m in state["members"] if m["address"] == address)   # its pid changes below
    node_home = Path(member["home"])
    conf = node_home / "conf" / "cassandra.yaml"
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", keep_as):
        raise ValueError(f"a rollout's key is lower-case letters, digits and dashes, not {keep_as!r}")
    saved_conf = conf.with_name(conf.name + BEFORE_SUFFIX + keep_as)
    saved_cmd = node_home / "conf" / f"command{BEFORE_SUFFIX}{keep_as}.json"
    if not saved_cmd.exists():   # the first restart: keep what the node ran, to go back to
        if not pid_alive(member["pid"], member["home"]):
            raise UsageError(f"node {address} is not running: a rollout restarts running nodes")
        command = Path(f"/proc/{member['pid']}/cmdline").read_bytes().decode().split("\0")
        saved_conf.write_text(conf.read_text())
        saved_cmd.write_text(json.dumps([c for c in command if c]))
    command = json.loads(saved_cmd.read_text())
    settings = yamllib.safe_load(saved_conf.read_text())
    for key, value in (yaml_keys or {}).items():
        set_dotted(settings, key, value)
    for flag in jvm_add or ():
        name = flag.split("=")[0]
        if flag.startswith(("-Xms", "-Xmx")):
            command = [c for c in command if not c.startswith(flag[:4])]
        elif flag.startswith("-XX:+Use") and flag.endswith("GC"):
            command = [c for c in command if not (c.startswith(G1_ONLY) or (c.startswith("-XX:+Use")
                                                                            and c.endswith("GC")))]
        else:
            command = [c for c in command if c.split("=")[0] != name]
        command.insert(command.index("-cp"), flag)
    started = time.monotonic()
    if pid_alive(member["pid"], member["home"]):
        try:
            drain(member["jmx_port"], timeout=60)
        except Exception:  # a node that cannot drain is still stopped: its commit log replays at the start
            pass
        os.kill(member["pid"], signal.SIGTERM)
        deadline = time.monotonic() + 60
        while pid_alive(member["pid"], member["home"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(member["pid"], member["home"]):
            os.kill(member["pid"], signal.SIGKILL)
            time.sleep(0.5)
    conf.write_text(yamllib.safe_dump(settings, sort_keys=False))
    with open(node_home / "logs" / "stdout.log", "ab") as out:
        proc = process.spawn(command, stdout=out, stderr=out, cwd=str(node_home), no_mlock=True, detached=True)
    member["pid"] = proc.pid
    (home / STATE_FILE).write_text(json.dumps(state, indent=1))
    deadline = time.monotonic() + timeout
    while not try_query(address, state["native_port"]):
        if proc.poll() is not None:
            raise TrialError("internals", f"node {address} exited while starting (code {proc.returncode}); its log: "
                             f"{node_home / 'logs' / 'system.log'}")
        if time.monotonic() > deadline:
            raise TrialError("timeout", f"node {address} did not answer CQL within {timeout:.0f} s of its restart")
        time.sleep(0.5)
    return time.monotonic() - started
