"""`online --nodes N` without nodes: the rolling restart of a local cluster turn by turn (the changes placed as a
trial places them, one node at a time, a node that does not come back put back on the running configuration and the
roll stopped there), and the one-line refusals of a local run. tests/integration/test_online_local.py runs it on
real nodes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nosqltune.cli import main
from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.online.local import LocalRestarter, LocalSetup
from nosqltune.online.observe import JmxNode
from nosqltune.online.plan import Change
from nosqltune.online.settings import OnlineSettings


class FakeNode:
    """A node's side of a restart: its settings, its gossip generation (one more at each start), and what happened
    to it in order."""

    def __init__(self, index, events, fail_with=None):
        self.name, self.events, self.fail_with = f"node{index}", events, fail_with
        self.address, self.ports, self.generation = f"127.0.0.{index}", SimpleNamespace(native=9042), 100
        self.yaml_overrides = {"seed_provider": ["seeds"], "auto_bootstrap": False}
        self.jvm_flags = ["-Dcassandra.ring_delay_ms=1000"]

    def stop(self, drain, timeout):
        self.events.append((self.name, "stop", drain))

    def start(self, timeout):
        self.events.append((self.name, "start", dict(self.yaml_overrides), list(self.jvm_flags)))
        self.generation += 1
        if self.fail_with is not None and self.fail_with(self):
            raise RuntimeError("Cassandra did not answer CQL within 180 s:\nlog tail ...")


class FakeCluster:
    def __init__(self, n, fail_with=None):
        self.events = []
        self.members = [FakeNode(i, self.events, fail_with if i == 2 else None) for i in range(1, n + 1)]

    def seen_by(self, address, port):
        """system_views.gossip_info of the node at `address`: every node's current generation."""
        self.events.append((next(m.name for m in self.members if m.address == address), "gossip"))
        return {m.address: m.generation for m in self.members}


@pytest.fixture
def cluster_of(monkeypatch):
    from nosqltune.systems.cassandra import cluster as cluster_module

    def make(n, fail_with=None):
        fake = FakeCluster(n, fail_with)
        monkeypatch.setattr(cluster_module, "gossip_generations", fake.seen_by)
        monkeypatch.setattr(cluster_module, "check_fits", lambda nodes, heap: None if heap <= 2048 else
                            (_ for _ in ()).throw(UsageError(f"{nodes} nodes with a {heap} MiB heap need more")))
        return fake
    return make


def restarter_for(cluster, **kw):
    names = [m.name for m in cluster.members]
    return LocalRestarter(cluster, names, load_space("cassandra"), clock=Clock(), settle_s=0.0,
                          sleep=lambda _: None, **kw)


def changes(**values):
    space = load_space("cassandra")
    return [Change(k, space[k].applies, space[k].default, v, "restart", "rolling restart", "test")
            for k, v in values.items()]


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 7.5
        return self.t


def test_a_roll_restarts_one_node_at_a_time_into_the_running_configuration_with_the_changes(cluster_of):
    cluster, said = cluster_of(2), []
    restarter = restarter_for(cluster)
    running = {"concurrent_reads": 48, "memtable": "trie"}    # changed live before: a restart must keep it
    turns = restarter.roll(changes(heap_size=768, memtable_allocation_type="offheap_objects"), running, said.append)
    assert [(t.node, t.ok) for t in turns] == [("node1", True), ("node2", True)]
    # the other node asked for the node's gossip generation, the node drained, started, and seen again by the
    # other node (a higher generation), before the next node's turn
    assert [e[:2] for e in cluster.events] == [("node2", "gossip"), ("node1", "stop"), ("node1", "start"),
                                               ("node2", "gossip"), ("node1", "gossip"), ("node2", "stop"),
                                               ("node2", "start"), ("node1", "gossip")]
    assert all(e[2] is True for e in cluster.events if e[1] == "stop")   # drained
    for node in cluster.members:   # the live value kept, the table option left to ALTER TABLE
        assert node.yaml_overrides == {"seed_provider": ["seeds"], "auto_bootstrap": False, "concurrent_reads": 48,
                                       "memtable_allocation_type": "offheap_objects"}
        assert node.jvm_flags == ["-Dcassandra.ring_delay_ms=1000", "-Xms768M", "-Xmx768M"]
    assert len(said) == 4 and all("\n" not in line for line in said)
    # a second roll from the configuration now running: flags do not pile up
    restarter.roll(changes(heap_size=1024), {**running, "heap_size": 768}, said.append)
    assert cluster.members[0].jvm_flags == ["-Dcassandra.ring_delay_ms=1000", "-Xms1024M", "-Xmx1024M"]


def test_the_configuration_a_cluster_started_with_is_replaced_not_added_to(cluster_of):
    """A cluster started with ZGC (its flag in the nodes' settings): a roll to G1 must not leave both flags, which
    the JVM refuses."""
    from nosqltune.systems.cassandra.config import place

    cluster = cluster_of(1)
    started = place(load_space("cassandra"), {"gc": "ZGC"})
    cluster.members[0].jvm_flags += started.jvm
    restarter = restarter_for(cluster, started_with=started)
    restarter.roll(changes(gc="G1"), {"gc": "ZGC"}, lambda _: None)
    flags = cluster.members[0].jvm_flags
    assert "-XX:+UseG1GC" in flags and "-XX:+UseZGC" not in flags


def test_a_node_that_does_not_come_back_is_put_back_and_so_are_the_nodes_before_it(cluster_of):
    cluster, said = cluster_of(3, fail_with=lambda node: node.yaml_overrides.get("concurrent_writes") == 64), []
    restarter = restarter_for(cluster)
    turns = restarter.roll(changes(concurrent_writes=64), {}, said.append)
    assert [(t.node, t.ok) for t in turns] == [("node1", True), ("node2", False), ("node1", False)]
    assert "did not answer CQL" in turns[1].error and "\n" not in turns[1].error
    assert "put back on the running configuration after node2 failed" in turns[2].error
    assert all("concurrent_writes" not in m.yaml_overrides for m in cluster.members)   # one configuration again
    assert [e[1] for e in cluster.events if e[0] == "node2" and e[1] != "gossip"] == ["stop", "start", "stop",
                                                                                      "start"]
    assert not any(e[0] == "node3" and e[1] != "gossip" for e in cluster.events)       # the roll stopped at node2
    assert any("restart failed" in line and "the roll stops" in line for line in said)


def test_a_roll_writes_only_what_was_set_and_a_failed_one_keeps_the_live_changes(cluster_of):
    """The controller's running configuration holds every knob of the model's space, unset ones at the knob file's
    defaults: a roll must not write those (Cassandra derives the memtable space and the key cache from the heap),
    and a node put back after a failure gets the running configuration, live changes included, not its settings
    at its last start."""
    space = load_space("cassandra")
    cluster = cluster_of(3, fail_with=lambda node: node.yaml_overrides.get("concurrent_writes") == 64)
    running = {**{k.name: k.default for k in space}, "concurrent_reads": 48,
               "key_cache_size": space["key_cache_size"].default}
    restarter = restarter_for(cluster, explicit=["key_cache_size"])
    turns = restarter.roll(changes(concurrent_writes=64), running, lambda _: None)
    assert [(t.node, t.ok) for t in turns] == [("node1", True), ("node2", False), ("node1", False)]
    started = [e for e in cluster.events if e[1] == "start"]
    first = started[0][2]      # node1 with the change: only what was set, the explicit knob at its default too
    assert first["concurrent_writes"] == 64 and first["concurrent_reads"] == 48 and "key_cache_size" in first
    assert "memtable_heap_space" not in first and "concurrent_compactors" not in first
    for node in cluster.members[:2]:     # put back: the live value kept, the change gone
        assert node.yaml_overrides["concurrent_reads"] == 48 and "concurrent_writes" not in node.yaml_overrides


def test_a_roll_that_does_not_fit_or_holds_a_table_option_is_not_begun(cluster_of):
    cluster = cluster_of(2)
    said = []
    turns = restarter_for(cluster).roll(changes(heap_size=3072), {}, said.append)
    assert [(t.node, t.ok) for t in turns] == [("node1", False)] and "need more" in turns[0].error
    assert cluster.events == [] and "not begun" in said[0]
    with pytest.raises(UsageError, match="cassandra.yaml keys and JVM options only"):
        restarter_for(cluster).roll(changes(compression="ZstdCompressor"), {}, said.append)


def test_a_local_run_is_refused_in_one_line_before_anything_starts(tmp_path):
    from nosqltune.workloads.trace import load_trace

    trace = load_trace("shifting")
    setup = LocalSetup(nodes=2, home=tmp_path / "c")
    ok = OnlineSettings(nodes=(), model="m", study="s.db", local=setup, trace=trace, replication_factor=2)
    assert ok.node_count == 2 and ok.record()["local"]["nodes"] == 2
    bad = [dict(local=setup, replication_factor=3, trace=trace),                  # more replicas than nodes
           dict(local=setup),                                                      # no traffic to watch
           dict(local=setup, trace=trace, nodes=(JmxNode("n1", 7199),)),           # both
           dict(local=setup, trace=trace, cql=("127.0.0.1", 9042))]
    for extra in bad:
        with pytest.raises(UsageError) as info:
            OnlineSettings(**{"nodes": (), "model": "m", "study": "s.db", **extra})
        assert "\n" not in str(info.value)
    for nodes, heap in ((0, 1024), (10, 1024), (2, 256)):
        with pytest.raises(UsageError):
            LocalSetup(nodes=nodes, home=tmp_path, heap_mb=heap)


@pytest.mark.parametrize("args, message", [
    (["--nodes", "2"], "give --trace with --nodes"),
    (["--nodes", "2", "--trace", "shifting", "--cql", "127.0.0.1:9042"], "--cql and --table are for a cluster given"),
    (["--nodes", "2", "--trace", "shifting", "--table", "ycsb.other"], "--cql and --table are for a cluster given"),
    (["--nodes", "2", "--trace", "shifting", "--heap", "1G", "--set", "heap_size=768"], "give the nodes' heap once"),
    (["--hosts", "127.0.0.1:7199", "--heap", "1G"], "--heap is for a local cluster"),
    (["--nodes", "2", "--trace", "shifting", "--heap", "900G"], "need about"),
    (["--hosts", "127.0.0.1:7199", "--table", "usertable"], "not KEYSPACE.TABLE"),
    (["--hosts", "127.0.0.1:7199", "--table", "YCSB.usertable"], "lower-case"),
    (["--hosts", "127.0.0.1:7199", "--set", "concurrent_reads=1"], "concurrent_reads"),
    (["--hosts", "127.0.0.1:7199", "--set", "no_such_knob=1"], "no_such_knob"),
])
def test_the_command_refuses_a_bad_local_run_with_exit_2(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    code = main(["online", *args, "--model", str(tmp_path / "none.model"), "--study", str(tmp_path / "o.db")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o.db").exists() and not (tmp_path / "home" / "online").exists()


def test_a_local_run_without_heap_takes_a_gigabyte_and_a_heap_knob_sets_it(tmp_path, monkeypatch):
    """--nodes without --heap: 1 GiB nodes (the run stops at the missing model, after the local setup was made);
    heap_size in --set is the nodes' heap."""
    import nosqltune.online.run as online_run

    seen = []
    monkeypatch.setattr(online_run, "run_online", lambda settings, **kw: seen.append(settings) or pytest.fail("ran"))
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    for extra, heap in (([], 1024), (["--set", "heap_size=768"], 768)):
        with pytest.raises(BaseException):
            main(["online", "--nodes", "1", "--trace", "shifting", *extra, "--model", str(tmp_path / "m"), "--study",
                  str(tmp_path / "o.db")])
        assert seen[-1].local.heap_mb == heap and seen[-1].cql is None


def test_the_hysteresis_flags_reach_the_shift_rule(tmp_path, monkeypatch):
    """--confirm and --min-dwell set the shift detector's confirming windows and dwell; without them, 3 and 180 s."""
    import nosqltune.online.run as online_run

    seen = []
    monkeypatch.setattr(online_run, "run_online", lambda settings, **kw: seen.append(settings) or pytest.fail("ran"))
    for extra, confirm, dwell in (([], 3, 180.0), (["--confirm", "2", "--min-dwell", "40"], 2, 40.0)):
        with pytest.raises(BaseException):
            main(["online", "--hosts", "127.0.0.1:7199", *extra, "--model", str(tmp_path / "m"), "--study",
                  str(tmp_path / "o.db")])
        assert (seen[-1].shift.confirm, seen[-1].shift.min_dwell_seconds) == (confirm, dwell)


def test_table_options_go_to_the_cql_address_given_or_the_traces():
    from nosqltune.workloads.trace import load_trace

    nodes = (JmxNode("10.0.0.1:7199", 7199, host="10.0.0.1"),)
    target = OnlineSettings(nodes=nodes, model="m", study="s.db", cql=("10.0.0.1", 9142), keyspace="ks",
                            table="t").table_target()
    assert (target.host, target.port, target.keyspace, target.table) == ("10.0.0.1", 9142, "ks", "t")
    assert OnlineSettings(nodes=nodes, model="m", study="s.db").table_target() is None
    with pytest.raises(UsageError, match="CQL address its client sends to"):
        OnlineSettings(nodes=nodes, model="m", study="s.db", trace=load_trace("shifting"))


def test_a_local_cluster_prices_its_first_restart_by_its_own_start(monkeypatch, tmp_path):
    """Before any restart is measured, a local run's cost-benefit takes the cluster's start (seconds per node, plus
    the settle), not the 120 s stated for a cluster the run knows nothing about; a measured value given wins."""
    from contextlib import contextmanager

    from nosqltune.online import local, run
    from nosqltune.workloads.trace import load_trace

    @contextmanager
    def started(setup, trace, records, rf, space, say):
        yield local.Started((JmxNode("node1", 7199), JmxNode("node2", 7299)), ("127.0.0.1", 9042),
                            "127.0.0.1,127.0.0.2", None, 40.0, 3.0)

    seen = []
    monkeypatch.setattr(local, "local_cluster", started)
    monkeypatch.setattr(run, "_watch", lambda settings, *a, **kw: seen.append((settings, kw)))
    advisor = type("A", (), {"space": type("S", (), {"names": (), "knob_space": None})(),
                             "hold": lambda self, values: held.append(values)})()
    held = []
    base = dict(nodes=(), model="m", study=str(tmp_path / "o.db"), local=LocalSetup(nodes=2, home=tmp_path / "c"),
                trace=load_trace("shifting"), replication_factor=2)
    run.run_online(OnlineSettings(**base), advisor=advisor)
    run.run_online(OnlineSettings(**base, restart_seconds=(12.0,)), advisor=advisor)
    assert seen[0][0].restart_seconds == (40.0 / 2 + local.SETTLE_S,) and seen[1][0].restart_seconds == (12.0,)
    assert seen[0][1]["contact"] == "127.0.0.1,127.0.0.2" and seen[0][0].cql == ("127.0.0.1", 9042)
    assert held[0] == {"heap_size": 1024}    # a model without the heap keeps the rules with the nodes' own heap
