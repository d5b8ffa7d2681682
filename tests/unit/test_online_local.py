"""`online --nodes N` without nodes: the rolling restart of a local cluster turn by turn (the changes placed as a
trial places them, one node at a time, a node that does not come back put back on its previous settings and the
roll stopped there), and the one-line refusals of a local run. tests/integration/test_online_local.py runs it on
real nodes."""

from __future__ import annotations

from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.online.local import LocalRestarter, LocalSetup
from nosqltune.online.observe import JmxNode
from nosqltune.online.plan import Change
from nosqltune.online.settings import OnlineSettings


class FakeNode:
    """A node's side of a restart: its settings, and what happened to it in order."""

    def __init__(self, name, events, fail_with=None):
        self.name, self.events, self.fail_with = name, events, fail_with
        self.yaml_overrides = {"seed_provider": ["seeds"], "auto_bootstrap": False}
        self.jvm_flags = ["-Dcassandra.ring_delay_ms=1000"]

    def stop(self, drain, timeout):
        self.events.append((self.name, "stop", drain))

    def start(self, timeout):
        self.events.append((self.name, "start", dict(self.yaml_overrides), list(self.jvm_flags)))
        if self.fail_with is not None and self.fail_with(self):
            raise RuntimeError("Cassandra did not answer CQL within 180 s:\nlog tail ...")


class FakeCluster:
    def __init__(self, n, fail_with=None):
        self.events = []
        self.members = [FakeNode(f"node{i}", self.events, fail_with if i == 2 else None) for i in range(1, n + 1)]

    def wait_all_up(self, timeout):
        self.events.append(("cluster", "up"))


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


def test_a_roll_restarts_one_node_at_a_time_with_the_changes_placed_as_a_trial_places_them():
    cluster, said = FakeCluster(2), []
    restarter = LocalRestarter(cluster, ["node1", "node2"], load_space("cassandra"), clock=Clock())
    turns = restarter.roll(changes(concurrent_reads=48, heap_size=768), said.append)
    assert [(t.node, t.ok, t.seconds) for t in turns] == [("node1", True, 7.5), ("node2", True, 7.5)]
    # drained, started with the changes, and the cluster whole again, before the next node's turn
    assert [e[:2] for e in cluster.events] == [("node1", "stop"), ("node1", "start"), ("cluster", "up"),
                                               ("node2", "stop"), ("node2", "start"), ("cluster", "up")]
    assert all(e[2] is True for e in cluster.events if e[1] == "stop")
    for node in cluster.members:
        assert node.yaml_overrides == {"seed_provider": ["seeds"], "auto_bootstrap": False, "concurrent_reads": 48}
        assert node.jvm_flags == ["-Dcassandra.ring_delay_ms=1000", "-Xms768M", "-Xmx768M"]
    assert len(said) == 4 and all("\n" not in line for line in said)
    # a second roll keeps what the first rolled out, and flags do not pile up
    restarter.roll(changes(concurrent_writes=64), said.append)
    assert cluster.members[0].yaml_overrides["concurrent_reads"] == 48
    assert cluster.members[0].yaml_overrides["concurrent_writes"] == 64
    assert cluster.members[0].jvm_flags == ["-Dcassandra.ring_delay_ms=1000", "-Xms768M", "-Xmx768M"]


def test_a_node_that_does_not_come_back_is_put_back_and_the_roll_stops_there():
    cluster, said = FakeCluster(3, fail_with=lambda node: node.yaml_overrides.get("concurrent_reads") == 48), []
    restarter = LocalRestarter(cluster, ["node1", "node2", "node3"], load_space("cassandra"), clock=Clock())
    turns = restarter.roll(changes(concurrent_reads=48), said.append)
    assert [(t.node, t.ok) for t in turns] == [("node1", True), ("node2", False)]
    assert "did not answer CQL" in turns[1].error and "\n" not in turns[1].error
    node2 = cluster.members[1]
    assert "concurrent_reads" not in node2.yaml_overrides                 # back on what it ran
    assert [e[1] for e in cluster.events if e[0] == "node2"] == ["stop", "start", "stop", "start"]
    assert not any(e[0] == "node3" for e in cluster.events)               # the roll stopped at node2
    assert restarter.rolled == {}                                         # nothing counts as rolled out
    assert any("restart failed" in line and "the roll stops" in line for line in said)


def test_a_restart_places_no_table_option():
    restarter = LocalRestarter(FakeCluster(1), ["node1"], load_space("cassandra"))
    with pytest.raises(UsageError, match="cassandra.yaml keys and JVM options only"):
        restarter.settings_with({"compression": "ZstdCompressor"})


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
    (["--nodes", "2", "--trace", "shifting", "--cql", "127.0.0.1:9042"], "--cql is for a cluster given by --hosts"),
    (["--hosts", "127.0.0.1:7199", "--heap", "1G"], "--heap is for a local cluster"),
    (["--nodes", "2", "--trace", "shifting", "--heap", "64G"], "need about"),
    (["--hosts", "127.0.0.1:7199", "--table", "usertable"], "not KEYSPACE.TABLE"),
    (["--hosts", "127.0.0.1:7199", "--set", "concurrent_reads=1"], "concurrent_reads"),
    (["--hosts", "127.0.0.1:7199", "--set", "no_such_knob=1"], "no_such_knob"),
])
def test_the_command_refuses_a_bad_local_run_with_exit_2(args, message, tmp_path, capsys):
    code = main(["online", *args, "--model", str(tmp_path / "none.model"), "--study", str(tmp_path / "o.db")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.db").exists() and not list(Path(tmp_path).glob("online*"))


def test_a_local_cluster_starts_with_the_configuration_given(monkeypatch, tmp_path):
    """--nodes with --config/--set: its cassandra.yaml keys and JVM options reach every node, its table options
    the table before the load (the data is loaded with them); a keyspace option is refused before any start."""
    from nosqltune.online import local
    from nosqltune.systems.cassandra import cluster as cluster_module
    from nosqltune.systems.cassandra import trial as trial_module
    from nosqltune.workloads import ycsb
    from nosqltune.workloads.trace import load_trace

    seen = {}

    class Cluster:
        def __init__(self, **kw):
            seen["cluster"] = kw
            ports = type("P", (), {"native": 9042, "jmx": 7199})
            self.members = [type("M", (), {"address": "127.0.0.1", "ports": ports, "yaml_overrides": {},
                                           "jvm_flags": []})()]

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            seen["stopped"] = True

        def start(self):
            return 12.0

    monkeypatch.setattr(cluster_module, "LocalCluster", Cluster)
    monkeypatch.setattr(cluster_module, "check_fits", lambda *a: None)
    monkeypatch.setattr(trial_module, "_create_schema", lambda *a, **kw: seen.setdefault("schema", kw))
    monkeypatch.setattr(ycsb, "run_client", lambda *a, **kw: seen.setdefault("load", a[0]))
    space = load_space("cassandra")
    config = {"concurrent_reads": 48, "heap_size": 768, "compression": "ZstdCompressor"}
    setup = LocalSetup(nodes=1, home=tmp_path / "c", config=config)
    with local.local_cluster(setup, load_trace("shifting"), 1000, 1, space) as started:
        assert started.nodes == (JmxNode("node1", 7199),) and started.cql == ("127.0.0.1", 9042)
    assert seen["cluster"]["yaml_overrides"] == {"concurrent_reads": 48}
    assert seen["cluster"]["jvm_flags"] == ["-Xms768M", "-Xmx768M"]
    assert seen["schema"]["table_statements"] == [
        "ALTER TABLE ycsb.usertable WITH compression = {'class': 'ZstdCompressor', 'chunk_length_in_kb': '16', "
        "'compression_level': '3'}"]
    assert seen["load"] == "load" and seen["stopped"] and not (tmp_path / "c").exists()
    for refused in ({"replication_factor": 2}, {"read_ahead_kb": 64}):
        with pytest.raises(UsageError, match=f"not {next(iter(refused))}"):
            with local.local_cluster(LocalSetup(nodes=1, home=tmp_path / "d", config=refused),
                                     load_trace("shifting"), 1000, 1, space):
                pytest.fail("started")
