"""A local multi-node cluster (issue 8, first part): real Cassandra nodes on 127.0.0.1, 127.0.0.2, ..."""

import json

import pytest

from nosqltune.cli import main


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


def test_two_node_cluster_up_status_down(nosqltune_home, capsys):
    run_cluster(capsys, 2, "768M")


@pytest.mark.slow
def test_three_node_cluster(nosqltune_home, capsys):
    run_cluster(capsys, 3, "768M")


def test_bench_on_a_two_node_cluster(nosqltune_home, tmp_path, capsys):
    """Cold trials on a cluster: the data loaded once with RF 2, each node's folder restored, the client on
    both nodes at consistency ALL (no failed operation: both replicas hold every record), the design stored."""
    from nosqltune.store import open_store

    study = tmp_path / "cluster.db"
    code = main(["bench", "--nodes", "2", "--rf", "2", "--consistency", "ALL", "--heap", "768M", "--workload",
                 "ycsb-a", "--records", "2000", "--operations", "3000", "--threads", "4", "--warmup-ops", "1000",
                 "--study", str(study), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    (row,) = open_store(str(study)).trials()
    assert row["state"] == "COMPLETE" and row["metrics"]["errors"] == 0
    harness = row["workload"]["harness"]
    assert (harness["nodes"], harness["replication_factor"], harness["read_consistency"]) == (2, 2, "ALL")
    assert row["internals"]["live_disk_space_used_bytes"] > 2000 * 1000   # node 1 holds a replica of every row
    (dataset,) = [d for d in (nosqltune_home / "datasets").iterdir()
                  if (d / "data" / "node2").is_dir()]
    assert json.loads((dataset / "meta.json").read_text())["design"] == {"nodes": 2, "replication_factor": 2}
