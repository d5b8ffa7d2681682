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
