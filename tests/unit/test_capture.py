"""A capture made from a full query log's entries (as loadgen's QueryLogReader prints them): query kinds with their
shares and tables, literals made markers, what is left out and its share, the pace, logs merged by start time, the
value sample, the redaction (same sizes, same repeat pattern, no value of the log's left), and the bad inputs of
`nosqltune capture` refused in one line before anything is read or written. The reader on a real node's log is in
tests/integration/test_capture.py."""

from __future__ import annotations

import json
import random
import re

from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.workloads.capture import (CaptureBuilder, CaptureError, Redactor, fill_template, literal_template,
                                         read_capture, redact, statement_table, write_capture)

T0 = 1_764_400_000_000


def single(t, query, values=(), ks="shop", cl="LOCAL_ONE"):
    return {"t": t, "type": "single", "ks": ks, "cl": cl, "query": query, "values": list(values)}


def end(**skipped):
    return {"end": True, "entries": 0, "skipped": skipped}


def test_literals_become_markers_and_come_back():
    cql = ("SELECT * FROM shop.carts WHERE user = 'o''brien' AND id = 123e4567-e89b-12d3-a456-426614174000 "
           "AND n > -5 AND x = 1.5e3 AND b = 0xCAFE AND field0 = \"Col 7\" LIMIT 10")
    template, literals = literal_template(cql)
    assert literals == ["'o''brien'", "123e4567-e89b-12d3-a456-426614174000", "-5", "1.5e3", "0xCAFE", "10"]
    assert template == ("SELECT * FROM shop.carts WHERE user = ? AND id = ? AND n > ? AND x = ? AND b = ? "
                        "AND field0 = \"Col 7\" LIMIT ?")
    assert fill_template(template, literals) == cql
    # names with digits, quoted names and keywords are not literals
    assert literal_template('UPDATE ks.t2 SET "a?b" = true WHERE k1 = ?') == ('UPDATE ks.t2 SET "a?b" = true WHERE k1 = ?', [])


def test_the_table_a_statement_names_or_the_sessions_keyspace():
    assert statement_table("SELECT a FROM Shop.Carts WHERE k = ?", None) == ("shop", "carts")
    assert statement_table('select a from "MyKs"."T" where k = ?', None) == ("MyKs", "T")
    assert statement_table("INSERT INTO carts (k) VALUES (?)", "shop") == ("shop", "carts")
    assert statement_table("UPDATE carts SET a = ? WHERE k = ?", "shop") == ("shop", "carts")
    assert statement_table("DELETE a FROM shop . carts WHERE k = ?", None) == ("shop", "carts")
    assert statement_table("SELECT * FROM carts", None) is None   # no keyspace anywhere


def _log():
    return [
        single(T0 + 5, "SELECT * FROM shop.carts WHERE user = ?", ["7531"]),
        single(T0 + 1, "SELECT * FROM shop.carts WHERE user = ?", ["7532"]),   # completion order, not start order
        single(T0 + 1200, "UPDATE carts SET n = ? WHERE user = ?", ["00000001", "7531"], cl="QUORUM"),
        single(T0 + 2100, "SELECT * FROM shop.carts WHERE user = 'u3'"),
        single(T0 + 2200, "SELECT * FROM   shop.carts WHERE user = 'u4'"),
        single(T0 + 2300, "SELECT * FROM system.local WHERE key = 'local'", ks=None),
        single(T0 + 2400, "CREATE TABLE shop.x (k int PRIMARY KEY)"),
        single(T0 + 2500, "USE shop"),
        {"t": T0 + 2600, "type": "batch", "ks": "shop", "cl": "ONE", "batch_type": "LOGGED",
         "queries": ["INSERT INTO shop.carts (user) VALUES (?)"], "values": [["7533"]]},
        end(audit=2),
    ]


def test_kinds_shares_left_out_and_pace():
    builder = CaptureBuilder()
    source = builder.add_log("n1", _log())
    assert source == {"path": "n1", "entries": 9, "first_ms": T0 + 1, "last_ms": T0 + 2600}
    capture = builder.capture()
    kinds = {k["name"]: k for k in capture["kinds"]}
    assert list(kinds) == ["select-carts", "select-carts-2", "update-carts"]   # most run first
    assert kinds["select-carts"]["count"] == 2 and kinds["select-carts"]["literals"] is False
    assert kinds["select-carts"]["values"] == [["7531"], ["7532"]]
    assert kinds["select-carts-2"]["cql"] == "SELECT * FROM shop.carts WHERE user = ?"
    assert kinds["select-carts-2"]["literals"] is True and kinds["select-carts-2"]["values"] == [["'u3'"], ["'u4'"]]
    assert kinds["update-carts"]["keyspace"] == "shop" and kinds["update-carts"]["consistency"] == "QUORUM"
    assert kinds["update-carts"]["operation"] == "write" and kinds["select-carts"]["operation"] == "read"
    assert sum(k["share"] for k in capture["kinds"]) == pytest.approx(1)
    assert capture["statements"] == 5 and capture["tables"] == ["shop.carts"]
    assert {r: v["count"] for r, v in capture["left_out"].items()} == {"batch": 1, "schema": 1, "other": 1,
                                                                       "system": 1}
    assert capture["left_out"]["batch"]["share"] == pytest.approx(1 / 9)
    assert capture["skipped_types"] == {"audit": 2}
    # the pace: statements started in each second from the first start; the replay sequence sorted by start
    assert capture["start_ms"] == T0 + 1
    assert capture["pace"]["statements"] == [2, 1, 2]
    assert capture["events"]["t_ms"] == [0, 4, 1199, 2099, 2199]
    assert [capture["kinds"][k]["name"] for k in capture["events"]["kind"]] == [
        "select-carts", "select-carts", "update-carts", "select-carts-2", "select-carts-2"]
    assert "one node's log" in capture["view"]


def test_logs_of_two_nodes_merge_by_start_time():
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0 + 10, "SELECT * FROM shop.carts WHERE user = ?", ["01"]), end()])
    builder.add_log("n2", [single(T0 + 3, "UPDATE shop.carts SET n = ? WHERE user = ?", ["02", "03"]),
                           single(T0 + 20, "SELECT * FROM shop.carts WHERE user = ?", ["04"]), end()])
    capture = builder.capture()
    assert capture["start_ms"] == T0 + 3 and capture["events"]["t_ms"] == [0, 7, 17]
    assert "2 logs merged" in capture["view"] and [s["path"] for s in capture["sources"]] == ["n1", "n2"]


def test_the_sample_is_a_uniform_reservoir_of_each_kinds_runs():
    builder = CaptureBuilder(sample=100)
    rows = [single(T0 + i, "SELECT * FROM shop.carts WHERE user = ?", [f"{i % 10:02x}"]) for i in range(10_000)]
    builder.add_log("n1", [*rows, end()])
    kind = builder.capture()["kinds"][0]
    assert kind["count"] == 10_000 and len(kind["values"]) == 100
    # each of the 10 values is a tenth of the runs: a uniform sample of 100 holds each about 10 times
    counts = [sum(v == [f"{i:02x}"] for v in kind["values"]) for i in range(10)]
    assert all(2 <= c <= 22 for c in counts), counts


def test_a_log_nothing_of_which_can_be_replayed_is_refused_saying_what_it_held():
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0, "CREATE KEYSPACE k WITH replication = {}"), end()])
    with pytest.raises(CaptureError, match="nothing in the log can be replayed: 1 schema changes"):
        builder.capture()
    audit = CaptureBuilder()
    audit.add_log("n1", [end(audit=5)])
    with pytest.raises(CaptureError, match="audit log"):
        audit.capture()
    cut = CaptureBuilder()
    with pytest.raises(CaptureError, match="not read to its end"):
        cut.add_log("n1", [single(T0, "SELECT * FROM shop.carts WHERE user = ?", ["01"])])


def test_redaction_keeps_sizes_and_the_repeat_pattern_and_no_value():
    rng = random.Random(3)
    users = [f"user-{rng.randrange(10**6):06d}".encode().hex() for _ in range(20)]
    uuid = "123e4567e89b12d3a456426614174000"   # a version-1 UUID (a timeuuid)
    rows = [single(T0 + i, "UPDATE shop.carts SET n = ?, id = ? WHERE user = ?",
                   [f"{i:08x}", uuid, users[i % 20]]) for i in range(200)]
    rows += [single(T0 + 300, "SELECT * FROM shop.carts WHERE user = 'o''brien' AND n = 1234 AND b = 0xcafe")]
    builder = CaptureBuilder()
    builder.add_log("n1", [*rows, end()])
    capture = builder.capture()
    hidden = redact(capture, Redactor(key=b"k" * 32))
    assert hidden["redacted"] and not capture["redacted"]
    originals = {v for k in capture["kinds"] for vs in k["values"] for v in vs}
    replaced = {v for k in hidden["kinds"] for vs in k["values"] for v in vs}
    assert not originals & replaced
    text = json.dumps(hidden)
    for value in originals:   # no value of the log is anywhere in the file
        assert json.dumps(value) not in text
    assert "brien" not in text and "user-".encode().hex() not in text
    for kind, was in zip(hidden["kinds"], capture["kinds"]):
        for new_values, old_values in zip(kind["values"], was["values"]):
            assert [len(v) for v in new_values] == [len(v) for v in old_values]
    # the same value, the same replacement: the keys' repeat pattern is kept
    update = next(k for k in hidden["kinds"] if k["name"] == "update-carts")
    old_update = next(k for k in capture["kinds"] if k["name"] == "update-carts")
    pairs = {(o[2], n[2]) for o, n in zip(old_update["values"], update["values"])}
    assert len(pairs) == 20 == len({n for _, n in pairs})
    # a text value stays text; a UUID keeps its version and variant (a timeuuid stays one)
    assert all(re.fullmatch(r"[a-z0-9]+", bytes.fromhex(n).decode()) for _, n in pairs)
    new_uuid = update["values"][0][1]
    assert new_uuid[12] == uuid[12] and int(new_uuid[16], 16) & 0xC == 0x8
    literal = next(k for k in hidden["kinds"] if k["literals"])["values"][0]
    assert literal[0].startswith("'") and len(literal[0]) == len("'o''brien'") and re.fullmatch(r"[1-9]\d{3}", literal[1])
    assert re.fullmatch(r"0x[0-9a-f]{4}", literal[2]) and literal[2] != "0xcafe"
    # a second key gives other replacements; redacting twice changes nothing more
    assert redact(capture, Redactor(key=b"j" * 32))["kinds"] != hidden["kinds"]
    assert redact(hidden) is hidden


def test_a_capture_file_round_trips_and_anything_else_is_refused(tmp_path):
    builder = CaptureBuilder()
    builder.add_log("n1", _log())
    capture = builder.capture()
    path = tmp_path / "c" / "shop.json"
    write_capture(capture, path)
    assert read_capture(path) == capture and path.stat().st_mode & 0o077 == 0   # owner only: it holds data
    (tmp_path / "bad.json").write_text('{"rows": []}')
    with pytest.raises(CaptureError, match="not a capture file of format"):
        read_capture(tmp_path / "bad.json")
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(CaptureError, match="not a capture file"):
        read_capture(tmp_path / "junk.json")
    with pytest.raises(CaptureError, match="nosqltune capture LOG_DIR"):
        read_capture(tmp_path / "missing.json")


@pytest.mark.parametrize("setup, args, said", [
    (None, ["{d}/missing"], "is not a directory"),
    ("empty", ["{d}/log"], "holds no Chronicle queue"),
    ("queue", ["{d}/log", "{d}/other"], "other is not a directory"),
    ("queue", ["{d}/log", "--sample", "0"], "--sample must be at least 1"),
    ("queue", ["{d}/log", "--name", "../x"], "--name '../x'"),
    ("queue", ["{d}/log", "--out", "{d}"], "is a directory"),
])
def test_capture_refuses_bad_input_in_one_line_before_reading(tmp_path, capsys, monkeypatch, setup, args, said):
    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    if setup:
        (tmp_path / "log").mkdir()
    if setup == "queue":
        (tmp_path / "log" / "metadata.cq4t").write_bytes(b"")
    read = []
    monkeypatch.setattr("nosqltune.systems.cassandra.querylog.read_log", lambda *a, **k: read.append(a) or iter(()))
    code = main(["capture", *(a.replace("{d}", str(tmp_path)) for a in args)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and said in err and len(err.splitlines()) == 1, err
    assert read == [] and not (tmp_path / "datasets").exists()


def test_a_replay_spec_names_its_pace():
    from nosqltune.workloads.replay import split_spec

    assert split_spec("replay:/a/b.json") == (__import__("pathlib").Path("/a/b.json"), "recorded")
    assert split_spec("replay:b.json:x2.5")[1] == "x2.5" and split_spec("replay:b.json:MAX")[1] == "max"
    for bad, said in (("replay:b.json:x0", "F > 0"), ("replay:b.json:xfast", "recorded, max, or xF"),
                      ("replay:", "needs the capture file")):
        with pytest.raises(CaptureError, match=said):
            split_spec(bad)


def test_a_replay_keeps_the_kinds_on_the_datas_tables_and_its_plan_holds_their_statements(tmp_path, monkeypatch):
    from nosqltune.workloads.replay import plan_file, replay_of

    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0, "SELECT * FROM shop.carts WHERE user = ?", ["7531"]),
                           single(T0 + 10, "SELECT * FROM shop.other WHERE k = ?", ["01"]),
                           single(T0 + 20, "SELECT * FROM shop.carts WHERE user = 'u1'"),
                           single(T0 + 30, "UPDATE shop.carts SET n = ? WHERE user = ?", [None, "7532"]), end()])
    path = tmp_path / "c.json"
    write_capture(builder.capture(), path)
    replay = replay_of(path, "x2", {"shop.carts"})
    assert [k["name"] for k in replay["kinds"]] == ["select-carts", "select-carts-2", "update-carts"]
    assert replay["left_out"] == {"select-other": 0.25} and replay["statements"] == 3
    assert "values" not in json.dumps(replay)   # what a study stores: no value
    made = plan_file(replay)
    assert made.parent == tmp_path / "datasets" / "captures" and made.stat().st_mode & 0o077 == 0
    plan = made.read_text().splitlines()
    assert plan[:2] == ["K\t0\tLOCAL_ONE\t0\tselect-carts\tSELECT * FROM shop.carts WHERE user = ?", "V\t0\t7531"]
    assert "V\t1\t" + "'u1'".encode().hex() in plan and "V\t2\t-,7532" in plan   # a literal as its text, a null
    assert [line for line in plan if line.startswith("E")] == ["E\t0\t0", "E\t20\t1", "E\t30\t2"]
    with pytest.raises(CaptureError, match="are not in the data"):
        replay_of(path, "max", {"ycsb.usertable"})
    path.write_text(path.read_text().replace("7531", "7533"))   # the capture changed since the study recorded it
    plan_file(replay).unlink()
    with pytest.raises(CaptureError, match="gone or changed"):
        plan_file(replay)


SCHEMA = """CREATE TABLE IF NOT EXISTS shop.carts (
    user text,
    n int,
    PRIMARY KEY (user)
) WITH ID = 5a1c395e-b41f-11e5-9f22-ba0be0483c18
    AND compaction = {'class': 'org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy'}
    AND gc_grace_seconds = 864000;
"""


def _snapshot(folder, schema=SCHEMA, data=True):
    folder.mkdir(parents=True)
    (folder / "schema.cql").write_text(schema)
    (folder / "manifest.json").write_text("{}")
    if data:
        for part in ("Data.db", "Index.db", "TOC.txt"):
            (folder / f"nb-1-big-{part}").write_bytes(b"x" * 100)
    return folder


def test_a_snapshot_gives_its_table_without_its_id_and_its_size(tmp_path):
    from nosqltune.workloads.snapshot import SnapshotError, read_snapshot, sstable_files

    snap = read_snapshot(_snapshot(tmp_path / "s"))
    assert (snap["keyspace"], snap["table"], snap["sstables"], snap["bytes"]) == ("shop", "carts", 1, 302 + len(SCHEMA))
    assert snap["schema"].startswith("CREATE TABLE IF NOT EXISTS shop.carts (") and "ID =" not in snap["schema"]
    assert "WITH compaction = {" in snap["schema"] and snap["schema"].rstrip().endswith("864000")
    assert [[p.name for p in node] for node in sstable_files(snap)] == [["nb-1-big-Data.db", "nb-1-big-Index.db",
                                                                         "nb-1-big-TOC.txt"]]
    (tmp_path / "s" / "nb-1-big-Data.db").write_bytes(b"y" * 101)   # a snapshot that changed since it was read
    with pytest.raises(SnapshotError, match="changed since the study recorded it"):
        sstable_files(snap)


@pytest.mark.parametrize("make, said", [
    (lambda d: d, "not a directory"),
    (lambda d: _snapshot(d).joinpath("schema.cql").unlink() or d, "no schema.cql"),
    (lambda d: _snapshot(d, data=False), "no SSTable"),
    (lambda d: _snapshot(d, schema="CREATE TYPE shop.addr (street text);\n" + SCHEMA), "user types"),
    (lambda d: _snapshot(d, schema=SCHEMA + SCHEMA.replace("carts", "other")), "2 CREATE TABLE statements"),
])
def test_a_folder_that_is_not_one_tables_snapshot_is_refused(tmp_path, make, said):
    from nosqltune.workloads.snapshot import SnapshotError, read_snapshot

    with pytest.raises(SnapshotError, match=said):
        read_snapshot(make(tmp_path / "s"))


def test_a_snapshot_larger_than_the_disk_and_a_capture_of_other_tables_are_refused(tmp_path, monkeypatch):
    from nosqltune.workloads.snapshot import SnapshotError, read_snapshot
    from nosqltune.workloads.spec import WorkloadError, make_workload

    folder = _snapshot(tmp_path / "s")
    with pytest.raises(SnapshotError, match="need about"):
        read_snapshot(folder, free_bytes=500)
    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0, "SELECT * FROM shop.other WHERE k = ?", ["01"]), end()])
    write_capture(builder.capture(), tmp_path / "c.json")
    with pytest.raises(CaptureError, match=r"capture's tables \(shop.other\) are not in the data \(shop.carts\)"):
        make_workload(f"replay:{tmp_path / 'c.json'}", data=f"snapshot:{folder}")
    with pytest.raises(WorkloadError, match="--records sizes generated data"):
        make_workload(f"replay:{tmp_path / 'c.json'}", data=f"snapshot:{folder}", records=10)
    with pytest.raises(WorkloadError, match="give profile:NAME or snapshot:DIR"):
        make_workload(f"replay:{tmp_path / 'c.json'}", data=f"table:{folder}")
    with pytest.raises(WorkloadError, match="--data goes with --workload replay"):
        make_workload("ycsb-a", data=f"snapshot:{folder}")


def test_every_nodes_snapshot_gathered_in_one_folder_is_one_dataset_imported_node_by_node(tmp_path):
    """A folder of node folders, each a snapshot of the table: their SSTables (the same names on every node) are
    copied into a folder each, all imported; the digest of one node's snapshot is what it was before sets existed."""
    from nosqltune.systems.cassandra.bulk import copy_snapshot
    from nosqltune.workloads.snapshot import SnapshotError, read_snapshot

    one = read_snapshot(_snapshot(tmp_path / "set" / "node1"))
    _snapshot(tmp_path / "set" / "node2")
    (tmp_path / "set" / "notes").mkdir()   # a folder without schema.cql is not a node's
    both = read_snapshot(tmp_path / "set")
    assert both["nodes"] == ["node1", "node2"] and "nodes" not in one
    assert (both["sstables"], both["bytes"]) == (2, 2 * one["bytes"]) and both["digest"] != one["digest"]
    assert (both["keyspace"], both["table"], both["schema"]) == (one["keyspace"], one["table"], one["schema"])
    copied = copy_snapshot(both, tmp_path / "bulk")
    assert copied["directories"] == [str(tmp_path / "bulk" / n / "shop" / "carts") for n in ("0", "1")]
    assert all(sorted(p.name for p in Path(d).iterdir()) == ["nb-1-big-Data.db", "nb-1-big-Index.db",
                                                              "nb-1-big-TOC.txt"] for d in copied["directories"])
    (tmp_path / "set" / "node2" / "schema.cql").write_text(SCHEMA.replace("864000", "3600"))
    with pytest.raises(SnapshotError, match="the schema.cql of node2 differs from node1's"):
        read_snapshot(tmp_path / "set")
    (tmp_path / "set" / "node2" / "schema.cql").write_text(SCHEMA.replace("carts", "orders"))
    with pytest.raises(SnapshotError, match="node2 holds shop.orders and node1 shop.carts"):
        read_snapshot(tmp_path / "set")
    with pytest.raises(SnapshotError, match="a folder of several nodes' snapshots holds one in each"):
        read_snapshot(tmp_path / "set" / "notes")


def test_a_capture_of_more_nodes_than_its_snapshot_says_so(tmp_path, monkeypatch):
    from nosqltune.workloads.replay import replay_lines
    from nosqltune.workloads.spec import make_workload

    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    builder = CaptureBuilder()
    for node in ("n1", "n2"):
        builder.add_log(node, [single(T0, "SELECT * FROM shop.carts WHERE user = ?", ["01"]), end()])
    write_capture(builder.capture(), tmp_path / "c.json")
    _snapshot(tmp_path / "set" / "node1")
    said = "the capture merges 2 logs and the data holds 1 node(s)' snapshots"
    assert any(said in line for line in replay_lines(make_workload(f"replay:{tmp_path / 'c.json'}",
                                                                   data=f"snapshot:{tmp_path / 'set'}")))
    _snapshot(tmp_path / "set" / "node2")
    lines = replay_lines(make_workload(f"replay:{tmp_path / 'c.json'}", data=f"snapshot:{tmp_path / 'set'}"))
    assert not any("the capture merges" in line or "the capture holds" in line for line in lines), lines


def test_a_snapshot_of_another_schema_leaves_out_what_names_its_missing_columns_and_refuses_when_nothing_is_left(
        tmp_path, monkeypatch):
    from nosqltune.workloads.replay import replay_lines
    from nosqltune.workloads.spec import make_workload

    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    _snapshot(tmp_path / "s")   # shop.carts (user, n)
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0, "SELECT n FROM shop.carts WHERE user = ?", ["01"]),
                           single(T0 + 1, "SELECT n FROM shop.carts WHERE user = ?", ["02"]),
                           single(T0 + 2, "UPDATE shop.carts SET note = ? WHERE user = ?", ["03", "01"]),
                           single(T0 + 3, "SELECT total FROM shop.carts WHERE user = ?", ["01"]), end()])
    write_capture(builder.capture(), tmp_path / "c.json")
    workload = make_workload(f"replay:{tmp_path / 'c.json'}", data=f"snapshot:{tmp_path / 's'}")
    assert [k["cql"] for k in workload.replay["kinds"]] == ["SELECT n FROM shop.carts WHERE user = ?"]
    lines = replay_lines(workload)
    assert any("(25.0% of the capture's statements), it names note, which the data's table lacks" in line
               for line in lines), lines
    assert any("it names total, which" in line for line in lines), lines
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0, "SELECT total FROM shop.carts WHERE user = ?", ["01"]), end()])
    write_capture(builder.capture(), tmp_path / "c.json")
    with pytest.raises(CaptureError, match=r"lacks the column\(s\) total the capture's statements name: its "
                                           "schema does not match"):
        make_workload(f"replay:{tmp_path / 'c.json'}", data=f"snapshot:{tmp_path / 's'}")


def test_a_snapshots_table_options_are_the_studys_defaults_for_its_table_knobs(tmp_path, monkeypatch):
    """As a profile's: a study on a snapshot starts from the user's table as it is (its compaction, chunks, gc
    grace), and a knob that moves one replaces the table's value."""
    from nosqltune.systems.settings import TrialSettings
    from nosqltune.tuning.workers import search_space
    from nosqltune.workloads.spec import make_workload

    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    schema = SCHEMA.replace("n int,\n    PRIMARY KEY (user)", "n int,\n    PRIMARY KEY (user, n)").replace(
        "SizeTieredCompactionStrategy'}", "LeveledCompactionStrategy', 'sstable_size_in_mb': '160'}\n"
        "    AND CLUSTERING ORDER BY (n DESC)\n    AND compression = {'chunk_length_in_kb': '4', 'class': "
        "'org.apache.cassandra.io.compress.LZ4Compressor'}\n    AND extensions = {}").replace("864000", "3600")
    _snapshot(tmp_path / "s", schema=schema)
    builder = CaptureBuilder()
    builder.add_log("n1", [single(T0, "SELECT * FROM shop.carts WHERE user = ?", ["01"]), end()])
    write_capture(builder.capture(), tmp_path / "c.json")
    workload = make_workload(f"replay:{tmp_path / 'c.json'}", data=f"snapshot:{tmp_path / 's'}")
    space = search_space(TrialSettings(), "cassandra", [workload.to_dict()])
    assert space["compaction_method"].default == "Leveled" and space["gc_grace_seconds"].default == 3600
    assert space["compression_chunk_length"].default == 4
    assert search_space(TrialSettings(), "cassandra")["gc_grace_seconds"].default == 864000
    # a new tune on it searches from them
    from nosqltune.cli import build_parser
    from nosqltune.cli.harness import trial_settings
    from nosqltune.cli.tune import _new_run

    args = build_parser().parse_args(["tune", "--workload", f"replay:{tmp_path / 'c.json'}:max", "--data",
                                      f"snapshot:{tmp_path / 's'}", "--budget", "2"])
    settings = trial_settings(args)
    searched = _new_run(args, search_space(settings, None), settings)[3]
    assert searched["compaction_method"].default == "Leveled", searched.label
    # an uncompressed table: compression = {'enabled': 'false'}, no class
    from nosqltune.systems.cassandra.schema import table_knob_defaults

    assert table_knob_defaults(space, {"compression": {"enabled": "false"}})["compression"] == "none"


def test_a_single_nodes_snapshot_keeps_the_digest_it_had_before_sets_of_nodes(tmp_path):
    """The dataset cache is keyed by the digest: one node's snapshot must keep the key it had (its schema.cql's
    text, then each file's name and size, in name order), so that datasets already built are found again."""
    import hashlib

    from nosqltune.workloads.snapshot import read_snapshot

    folder = _snapshot(tmp_path / "s")
    h = hashlib.sha256(SCHEMA.encode())
    for p in sorted(folder.iterdir()):
        h.update(f"{p.name}\0{p.stat().st_size}\0".encode())
    assert read_snapshot(folder)["digest"] == h.hexdigest()


def test_reads_of_keys_the_data_lacks_are_said_with_their_share():
    from nosqltune.workloads.replay import missed_reads

    assert missed_reads({"operations": {"SELECT-CARTS": {"count": 90}, "UPDATE-CARTS": {"count": 10}}}) is None
    said = missed_reads({"operations": {"SELECT-CARTS": {"count": 90}, "SELECT-CARTS-MISS": {"count": 10},
                                        "UPDATE-CARTS": {"count": 40}}})
    assert said.startswith("10 of 100 reads found no row (10.0%)")
