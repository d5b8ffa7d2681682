"""A local multi-node cluster (issue 8, first part): real Cassandra nodes on 127.0.0.1, 127.0.0.2, ..."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nosqltune.cli import main

from .conftest import assert_cost_measured, dataset_dirs, our_jvms, sigint_default

TWO_NODES = ["--nodes", "2", "--rf", "2", "--heap", "768M", "--workload", "ycsb-a", "--records", "2000",
             "--operations", "3000", "--threads", "4", "--warmup-ops", "1000"]


def write_and_read_at_all(addresses, port, rf):
    """A row written at consistency ALL through the first node, read at ALL through the last."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    from nosqltune.systems.cassandra.cql import session

    with session(addresses[0], port) as sess:
        sess.execute("CREATE KEYSPACE IF NOT EXISTS t WITH replication = "
                     f"{{'class': 'SimpleStrategy', 'replication_factor': {rf}}}")
        sess.execute("CREATE TABLE IF NOT EXISTS t.kv (k int PRIMARY KEY, v text)")
        for k in range(20):
            sess.execute(SimpleStatement(f"INSERT INTO t.kv (k, v) VALUES ({k}, 'v{k}')",
                                         consistency_level=ConsistencyLevel.ALL))
    with session(addresses[-1], port) as sess:
        rows = [sess.execute(SimpleStatement(f"SELECT v FROM t.kv WHERE k = {k}",
                                             consistency_level=ConsistencyLevel.ALL)).one() for k in range(20)]
    assert [r.v for r in rows] == [f"v{k}" for k in range(20)]


def cluster_cli(capsys, *args):
    code = main(["cluster", *args, "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def run_cluster(capsys, nodes: int, heap: str):
    code, up = cluster_cli(capsys, "up", "--nodes", str(nodes), "--heap", heap, "--set", "concurrent_writes=48")
    try:
        assert code == 0, up
        assert [m["address"] for m in up["members"]] == [f"127.0.0.{i}" for i in range(1, nodes + 1)]
        for m in up["members"]:   # every node runs and sees all the others
            assert m["running"] and len(m["peers"]) == nodes - 1
        code, status = cluster_cli(capsys, "status")
        assert code == 0 and status["up"]
        write_and_read_at_all([m["address"] for m in up["members"]], up["native_port"], rf=nodes)
        code = main(["cluster", "up", "--nodes", str(nodes)])
        assert code == 2 and "already running" in capsys.readouterr().err
    finally:
        code, down = cluster_cli(capsys, "down")
    assert code == 0 and sorted(down["stopped"]) == [m["address"] for m in up["members"]]
    assert main(["cluster", "status"]) == 2        # nothing left to report; no_orphans checks the JVMs


@pytest.mark.slow   # 26 s: make test-all (make test keeps the cluster code's unit tests and a 2-node Ray cluster)
def test_two_node_cluster_up_status_down(nosqltune_home, capsys):
    run_cluster(capsys, 2, "768M")


@pytest.mark.slow
def test_three_node_cluster(nosqltune_home, capsys):
    run_cluster(capsys, 3, "768M")


@pytest.mark.slow   # cluster trials: make test-all (the cluster command itself runs above)
def test_bench_on_a_two_node_cluster(nosqltune_home, dataset_cache, tmp_path, capsys):
    """Cold trials on a cluster: the data loaded once with RF 2, each node's folder restored, the client on
    both nodes at consistency ALL (no failed operation: both replicas hold every record), the design stored."""
    from nosqltune.store import open_store

    study = tmp_path / "cluster.db"
    code = main(["bench", *TWO_NODES, "--consistency", "ALL", "--study", str(study), "--json"])
    capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0, (row["failure_kind"], row["error"])
    assert row["state"] == "COMPLETE" and row["metrics"]["errors"] == 0
    assert_cost_measured(row["metrics"]["summary"], nodes=2)
    cost = row["metrics"]["cost"]      # each node's own, summed in the summary
    assert {"node1", "node2", "client"} <= set(cost) and all(cost[n]["cpu_ms"] > 0 for n in ("node1", "node2"))
    assert row["metrics"]["summary"]["node_cpu_ms"] == pytest.approx(cost["node1"]["cpu_ms"] + cost["node2"]["cpu_ms"])
    harness = row["workload"]["harness"]["datastore"]   # Cassandra's part of the stored settings
    assert (harness["nodes"], harness["replication_factor"], harness["read_consistency"]) == (2, 2, "ALL")
    assert row["internals"]["live_disk_space_used_bytes"] > 2000 * 1000   # node 1 holds a replica of every row
    (dataset,) = [d for d in dataset_dirs(dataset_cache) if (d / "data" / "node2").is_dir()]
    assert json.loads((dataset / "meta.json").read_text())["design"] == {"nodes": 2, "replication_factor": 2}


@pytest.mark.slow   # cluster trials: make test-all (the cluster command itself runs above)
def test_disk_bound_caps_every_node_of_a_cluster(nosqltune_home, tmp_path, capsys):
    """The disk-bound scenario on 2 nodes: each node in its own memory cgroup, both reading from the disk."""
    from nosqltune.runtime.cgroup import usable
    from nosqltune.store import open_store

    if usable():
        pytest.skip(f"no memory cgroup here: {usable()}")
    study = tmp_path / "disk.db"
    code = main(["bench", "--scenario", "disk-bound", "--nodes", "2", "--rf", "1", "--heap", "768M", "--records",
                 "20000", "--operations", "3000", "--threads", "4", "--warmup-ops", "500", "--page-cache", "4M",
                 "--study", str(study), "--json"])
    capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0, (row["failure_kind"], row["error"])
    memory = row["internals"]["memory_cgroup"]
    assert set(memory) == {"node1", "node2"}
    assert all(m["limit_bytes"] == (768 + 768 + 4) << 20 and m["oom_kills"] == 0 for m in memory.values())
    cost = row["metrics"]["cost"]
    assert all(cost[n]["read_bytes"] > 0 for n in ("node1", "node2"))     # each node read from its disk
    assert row["metrics"]["summary"]["node_disk_read_bytes_per_op"] > 1024


@pytest.mark.slow   # cluster trials: make test-all (the cluster command itself runs above)
def test_tune_searches_the_design(nosqltune_home, tmp_path, capsys):
    """tune --design: each trial runs on the design its configuration names (1 or 2 nodes; RF 2, which one node
    gets as a schema setting on its restored data), a per-node knob reaches its node only, and the best
    configuration's YAML names its design."""
    from nosqltune.store import open_store

    study, knobs, config = tmp_path / "design.db", tmp_path / "knobs.yaml", tmp_path / "config.yaml"
    knobs.write_text("knobs: [concurrent_writes]\n")
    config.write_text("per_node:\n  2: {concurrent_reads: 16}\n")
    code = main(["tune", "--design", "nodes=1..2", "--rf", "2", "--knobs", str(knobs), "--config", str(config),
                 "--optimizer", "random", "--seed", "1", "--budget", "2", "--heap", "768M", "--workload", "ycsb-a",
                 "--records", "2000", "--operations", "3000", "--threads", "4", "--warmup-ops", "1000",
                 "--study", str(study), "--json"])
    capsys.readouterr()
    assert code == 0
    rows = {r["config"]["nodes"]: r for r in open_store(str(study)).trials()}
    assert sorted(rows) == [1, 2]                     # seed 1: the default (1 node), then 2 nodes
    for nodes, row in rows.items():
        assert row["state"] == "COMPLETE" and row["metrics"]["errors"] == 0
        assert row["internals"]["design"] == {"nodes": nodes, "replication_factor": 2}
        assert row["internals"]["keyspace_replication"]["replication_factor"] == "2"
    assert "per_node_settings" not in rows[1]["internals"]        # one node: node 2's knob has no node
    assert {n: s["concurrent_reads"] for n, s in rows[2]["internals"]["per_node_settings"].items()} == \
        {"1": "32", "2": "16"}
    assert main(["best", "--study", str(study), "--format", "yaml"]) == 0
    best = capsys.readouterr().out
    winner = max(rows.values(), key=lambda r: r["metrics"]["summary"]["throughput_ops_s"])   # the study's best
    nodes = winner["config"]["nodes"]
    assert f"# physical design: {nodes} node(s), keyspace ycsb with replication_factor 2" in best
    assert ("nodes: 1 -> 2" in best) == (nodes == 2)


@pytest.mark.slow   # loads a 2-node dataset first: make test-all
def test_ctrl_c_while_a_cluster_boots_leaves_no_node(nosqltune_home, tmp_path):
    """Ctrl-C while the restored nodes boot (the seed up, node 2 starting): every JVM goes, the trial is
    stored as interrupted, the command exits 130."""
    from nosqltune.store import open_store

    study = tmp_path / "interrupted.db"
    env = {**os.environ, "NOSQLTUNE_HOME": str(nosqltune_home),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "nosqltune", "bench", *TWO_NODES, "--study", str(study)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=sigint_default)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and \
            len([p for p in our_jvms(str(nosqltune_home)) if "CassandraDaemon" in p and "/nodes/" in p]) < 2:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    deadline = time.monotonic() + 15
    while our_jvms(str(nosqltune_home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert our_jvms(str(nosqltune_home)) == []
    (row,) = open_store(str(study)).trials()
    assert (row["state"], row["failure_kind"]) == ("FAIL", "interrupted")
