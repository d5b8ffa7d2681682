"""A real 5.0.6 node's full query log read back (loadgen's QueryLogReader): turned on over JMX as `nodetool
enablefullquerylog` does, fed prepared statements with bound values of several types, a statement with its values
in the text, a batch and a schema change from the Python driver, then turned off; the capture holds each kind with
the exact bytes it was sent, its consistency level, the pace, and counts what it left out. `nosqltune capture
--redact` on the same log keeps none of the values. The node is conftest's module fixture `node`."""

from __future__ import annotations

import json
import struct
import uuid

import pytest

from nosqltune.cli import main
from nosqltune.systems.cassandra.cql import session
from nosqltune.systems.cassandra.internals import query_log
from nosqltune.systems.cassandra.querylog import capture_logs

USERS = [f"user-{i:03d}" for i in range(12)]


@pytest.fixture(scope="module")
def logged(node, tmp_path_factory):
    """The log directory of a short run of known statements, and what was sent."""
    from cassandra import ConsistencyLevel
    from cassandra.query import BatchStatement, SimpleStatement

    log_dir = tmp_path_factory.mktemp("fql") / "log"
    ids = [uuid.uuid1() for _ in range(3)]
    with session(node.address, node.ports.native) as cql:
        cql.execute("CREATE KEYSPACE IF NOT EXISTS shop WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}")
        cql.execute("CREATE TABLE IF NOT EXISTS shop.carts (user text, item timeuuid, n int, note blob, "
                    "PRIMARY KEY (user, item))")
        query_log(node.ports.jmx, str(log_dir))
        try:
            insert = cql.prepare("INSERT INTO shop.carts (user, item, n, note) VALUES (?, ?, ?, ?)")
            insert.consistency_level = ConsistencyLevel.ONE
            read = cql.prepare("SELECT n FROM shop.carts WHERE user = ?")
            read.consistency_level = ConsistencyLevel.LOCAL_QUORUM
            for i, user in enumerate(USERS):
                cql.execute(insert, (user, ids[i % 3], i, bytes([i, 255])))
            for user in USERS[:6]:
                cql.execute(read, (user,))
            cql.execute(SimpleStatement("SELECT n FROM shop.carts WHERE user = 'user-007' LIMIT 5"))
            batch = BatchStatement()
            batch.add(insert, ("user-b", ids[0], 1, b"x"))
            cql.execute(batch)
            cql.execute("CREATE TABLE IF NOT EXISTS shop.other (k int PRIMARY KEY)")
        finally:
            query_log(node.ports.jmx, None)
    return log_dir, ids


def test_a_real_nodes_log_gives_each_kind_with_the_bytes_it_was_sent(logged):
    log_dir, ids = logged
    capture = capture_logs([log_dir], sample=100)
    kinds = {k["cql"]: k for k in capture["kinds"]}
    insert = kinds["INSERT INTO shop.carts (user, item, n, note) VALUES (?, ?, ?, ?)"]
    assert insert["count"] == 12 and insert["consistency"] == "ONE" and insert["operation"] == "write"
    sent = [[u.encode().hex(), ids[i % 3].bytes.hex(), struct.pack(">i", i).hex(), bytes([i, 255]).hex()]
            for i, u in enumerate(USERS)]
    assert sorted(insert["values"]) == sorted(sent)
    read = kinds["SELECT n FROM shop.carts WHERE user = ?"]
    assert read["count"] == 6 and read["consistency"] == "LOCAL_QUORUM" and read["literals"] is False
    assert sorted(read["values"]) == sorted([[u.encode().hex()] for u in USERS[:6]])
    literal = next(k for k in capture["kinds"] if k["literals"])
    assert literal["cql"] == "SELECT n FROM shop.carts WHERE user = ? LIMIT ?" and literal["values"] == [["'user-007'", "5"]]
    assert capture["statements"] == 19 and capture["tables"] == ["shop.carts"]
    assert capture["left_out"]["batch"]["count"] == 1 and capture["left_out"]["schema"]["count"] == 1
    # the pace covers the run: every replayable statement is in the sequence, in start order
    assert sum(capture["pace"]["statements"]) == 19 and len(capture["events"]["t_ms"]) == 19
    assert capture["events"]["t_ms"] == sorted(capture["events"]["t_ms"]) and capture["events"]["t_ms"][0] == 0


def test_capture_redacts_every_value_and_refuses_a_directory_that_is_not_a_log(logged, tmp_path, capsys):
    log_dir, ids = logged
    out = tmp_path / "shop.json"
    assert main(["capture", str(log_dir), "--redact", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "select-carts" in printed and "left out: 1 batches" in printed
    text = out.read_text()
    capture = json.loads(text)
    assert capture["redacted"] is True
    for user in USERS:
        assert user.encode().hex() not in text and user not in text
    for item in ids:
        assert item.bytes.hex() not in text
    # a directory that holds no queue is refused before the reader starts: one line, exit 2, nothing written
    assert main(["capture", str(tmp_path), "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds no Chronicle queue" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.json").exists()


@pytest.fixture(scope="module")
def keyvalue_capture(nosqltune_home, tmp_path_factory):
    """A node running the keyvalue profile at 100 statements a second for 10 s under the full query log, captured
    and written: what the replays below run. Returns the capture and its file."""
    from nosqltune.systems.cassandra.querylog import record_profile
    from nosqltune.workloads.capture import write_capture
    from nosqltune.workloads.spec import make_workload

    folder = tmp_path_factory.mktemp("keyvalue-capture")
    workload = make_workload("profile:keyvalue", records=2000, operations=1000, threads=4, target=100,
                             warmup_operations=0)
    capture = record_profile(workload, folder / "record", sample=200)
    path = folder / "kv.json"
    write_capture(capture, path)
    return capture, path


def replayed(path, pace: str, study, capsys) -> dict:
    """The capture at `path` replayed at `pace` in one trial on the profile's generated data: its stored row, after
    the checks every replay must pass (no failure, every lookup finding its row, 900 measured statements)."""
    from nosqltune.store import open_store

    code = main(["bench", "--workload", f"replay:{path}:{pace}", "--data", "profile:keyvalue", "--threads", "4",
                 "--heap", "1G", "--study", str(study)])
    printed = capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", (row["error"], printed.err[-2000:])
    assert "replaying" in printed.out and "statements 1-100 warm up, 101-1000 measured" in printed.out
    assert row["metrics"]["errors"] == 0
    assert row["workload"]["records"] == 2000 and "values" not in json.dumps(row["workload"]["replay"])
    ops = row["metrics"]["operations"]
    assert not [op for op in ops if op.endswith("-MISS")], "a lookup of a key the data holds found no row"
    assert sum(s["count"] for op, s in ops.items() if op != "CLEANUP") == 900
    return row


@pytest.mark.slow   # about 75 s with its recording (a node, then a replay on another): make test-all; the snapshot
# replay below keeps a real node's replay in make test
def test_a_profiles_run_recorded_and_replayed_as_fast_as_answered(keyvalue_capture, tmp_path, capsys):
    """The recorded capture holds the run's statements, its kinds and its pace; replayed as fast as the node answers
    (the keys are the data's), every kind is measured apart and the replay outruns four times the recorded pace."""
    capture, path = keyvalue_capture
    assert capture["data"] == {"profile": "keyvalue", "records": 2000}
    kinds = {k["name"]: k for k in capture["kinds"]}
    assert capture["statements"] == 1000 and 8 <= capture["seconds"] <= 12, capture["seconds"]
    assert {k["operation"] for k in kinds.values()} == {"read", "write"}
    row = replayed(path, "max", tmp_path / "max.db", capsys)
    summary = row["metrics"]["summary"]
    for name in kinds:
        assert summary[f"{name}_count"] > 0 and summary[f"{name}_p99_ms"] > 0, (name, sorted(summary))
    assert summary["throughput_ops_s"] > 4 * 100 * 1.2, "as fast as answered outruns 4 times the recorded 100/s"


@pytest.mark.slow   # about 30 s more than the test above (a node and a replay): make test-all
def test_a_recorded_run_replayed_at_four_times_its_pace_lasts_a_quarter_of_its_span(keyvalue_capture, tmp_path,
                                                                                    capsys):
    capture, path = keyvalue_capture
    row = replayed(path, "x4", tmp_path / "x4.db", capsys)
    span = (capture["events"]["t_ms"][-1] - capture["events"]["t_ms"][100]) / 1000
    measured = row["metrics"]["runtime_ms"] / 1000
    assert span / 4 * 0.8 <= measured <= span / 4 * 1.25 + 1, (span, measured)


def test_a_capture_replays_on_the_snapshots_of_its_tables_nodes(node, logged, nosqltune_home, tmp_path, capsys):
    """The logged run's table snapshotted on its node (`nodetool snapshot`), gathered as two nodes' snapshots (the
    same SSTables twice, as two replicas at RF 2 hold them, their files of the same names), and the capture
    replayed in a trial on that data: the dataset built from the schema.cql and every node's SSTables, every read
    finding its row, each kind measured apart; the user's snapshots left as they were (the import moved copies).
    One node's snapshot alone is the slow test's below."""
    import os

    from nosqltune.store import open_store
    from nosqltune.systems.cassandra.internals import snapshot
    from nosqltune.workloads.capture import write_capture

    log_dir, _ = logged
    snapshot(node.ports.jmx, "shop", "carts", "replay")
    (folder,) = [p for p in node.home.rglob("snapshots/replay") if "carts-" in str(p)]
    held = sorted(p.name for p in folder.iterdir())
    assert "schema.cql" in held and any(n.endswith("-Data.db") for n in held)
    gathered = tmp_path / "snapshots"
    for name in ("node1", "node2"):
        (gathered / name).mkdir(parents=True)
        for p in folder.iterdir():
            os.link(p, gathered / name / p.name)
    capture = capture_logs([log_dir], sample=100)
    path = tmp_path / "shop.json"
    write_capture(capture, path)
    study = tmp_path / "s.db"
    code = main(["bench", "--workload", f"replay:{path}:max", "--data", f"snapshot:{gathered}", "--threads", "2",
                 "--warmup-ops", "0", "--operations", "200", "--heap", "1G", "--study", str(study)])
    printed = capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", (row["error"], printed.err[-2000:])
    assert row["metrics"]["errors"] == 0
    ops = row["metrics"]["operations"]
    assert not [op for op in ops if op.endswith("-MISS")], ops.keys()   # the snapshot holds every key read
    assert sum(s["count"] for op, s in ops.items() if op != "CLEANUP") == 200
    assert {"SELECT-CARTS", "INSERT-CARTS"} <= set(ops)
    stored = row["workload"]["snapshot"]
    assert stored["table"] == "carts" and row["workload"]["records"] == 0 and stored["nodes"] == ["node1", "node2"]
    data_files = sum(1 for n in held if n.endswith("-Data.db"))
    assert stored["sstables"] == 2 * data_files
    assert f"copied the snapshot's {2 * data_files} SSTables" in printed.err   # both nodes' files, same names
    assert "the capture holds 1 log(s) and the data 2 nodes' snapshots" in printed.out + printed.err
    assert sorted(p.name for p in folder.iterdir()) == held
    assert all(sorted(p.name for p in (gathered / n).iterdir()) == held for n in ("node1", "node2"))


@pytest.mark.slow   # about a minute: make test-all
def test_a_run_on_a_node_with_data_gives_a_log_and_a_snapshot_that_replay_without_a_miss(nosqltune_home, tmp_path,
                                                                                         capsys, monkeypatch):
    """What `make capture-example` makes: the keyvalue profile's statements on a node holding its data, the raw log
    and the table's snapshot kept; `nosqltune capture` on the log, then a replay on the snapshot finds every row."""
    from nosqltune.store import open_store
    from nosqltune.systems.cassandra.querylog import record_profile
    from nosqltune.workloads.spec import make_workload

    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    workload = make_workload("profile:keyvalue", records=2000, operations=600, threads=4, target=200,
                             warmup_operations=0)
    record_profile(workload, tmp_path / "example", sample=100, with_data=True)
    assert main(["capture", str(tmp_path / "example" / "querylog"), "--name", "example"]) == 0
    assert "written to" in capsys.readouterr().out
    study = tmp_path / "s.db"
    code = main(["bench", "--workload", "replay:example:max", "--data", f"snapshot:{tmp_path / 'example' / 'snapshot'}",
                 "--threads", "4", "--heap", "1G", "--study", str(study)])
    printed = capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", (row["error"], printed.err[-2000:])
    ops = row["metrics"]["operations"]
    assert not [op for op in ops if op.endswith("-MISS")] and row["metrics"]["errors"] == 0, ops.keys()
    assert row["workload"]["snapshot"]["keyspace"] == "accounts"
