"""Against real Cassandra: each shipped cassandra-stress profile's dataset written as SSTables for its own table
and imported, then its operations run by loadgen's ProfileWorkload with prepared statements, every query kind
measured apart, with the bottleneck line; and rows with a TTL as old as when they were written, on a node whose
clock runs at the dataset's time."""

import json

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store
from nosqltune.systems.cassandra import cql
from nosqltune.systems.cassandra.node import CassandraNode
from nosqltune.systems.cassandra.trial import cassandra_dataset_key
from nosqltune.systems.dataset import dataset_for
from nosqltune.workloads.loadgen import loadgen_classpath
from nosqltune.workloads.spec import make_workload

from .conftest import OPERATIONS

FLAGS = ["--operations", str(OPERATIONS), "--threads", "8", "--warmup-ops", "300", "--heap", "1G"]
RECORDS = {"timeseries": 6000, "messaging": 6000, "keyvalue": 5000}
QUERIES = {"timeseries": {"insert", "latest"}, "messaging": {"insert", "page", "older", "remove"},
           "keyvalue": {"insert", "lookup", "retag"}}


# make test-all (about 28 s each): make test runs a profile on a node where test_capture.py records the key-value
# profile's run and replays it through `bench`
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_shipped_profile_runs_on_a_node(nosqltune_home, tmp_path, capsys, name):
    study = tmp_path / f"{name}.db"
    code = main(["bench", "--workload", f"profile:{name}", "--records", str(RECORDS[name]), *FLAGS,
                 "--study", str(study)])
    printed = capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", (row["error"], printed.err[-2000:])
    summary = row["metrics"]["summary"]
    assert row["metrics"]["errors"] == 0
    for query in QUERIES[name]:   # each query kind measured apart, with its percentiles
        assert summary[f"{query}_count"] > 0, (query, sorted(summary))
        assert 0 < summary[f"{query}_p50_ms"] <= summary[f"{query}_p99_ms"] <= summary[f"{query}_p999_ms"]
    assert sum(summary[f"{q}_count"] for q in QUERIES[name]) == OPERATIONS
    assert (row["internals"] or {}).get("bottleneck", {}).get("limit"), "the bottleneck line"
    assert "limited by" in printed.err or "limited by" in printed.out
    assert row["workload"]["profile"]["name"] == name


@pytest.mark.slow   # 30 s: make test-all
def test_rows_with_a_ttl_are_as_old_as_when_they_were_written(nosqltune_home, tmp_path, capsys):
    """The time-series profile's rows were written as if at times within their 7-day TTL. On a node whose clock
    runs at the dataset's time they are all there; 8 days later every one has expired; 3.5 days later about half,
    whatever time the dataset was built."""
    records = RECORDS["timeseries"]
    assert main(["bench", "--workload", "profile:timeseries", "--records", str(records), *FLAGS,
                 "--study", str(tmp_path / "s.db")]) == 0
    capsys.readouterr()
    workload = make_workload("profile:timeseries", records=records)
    dataset = dataset_for(cassandra_dataset_key("5.0.6", workload.dataset_properties(), {}, 1024, "bulk"))
    meta = json.loads(dataset.meta_path.read_text())
    assert meta["bulk"]["windows"] > 1 and meta["bulk"]["sstables"] == meta["bulk"]["windows"], \
        "one SSTable per window of TimeWindowCompactionStrategy"
    written = meta["bulk"]["rows"]

    def alive(days_later: float) -> int:
        home = tmp_path / f"at{days_later}"
        dataset.restore_into(home / "data")
        offset = int(meta["created_at"] * 1000 + days_later * 86_400_000) - _now_ms()
        flags = ["-Dcassandra.clock=nosqltune.loadgen.OffsetClock", f"-Dnosqltune.clock.offset_ms={offset}"]
        with CassandraNode(home=home, heap_mb=1024, jvm_flags=flags, extra_classpath=[loadgen_classpath()[0]]) as node:
            node.start()
            with cql.session(node.address, node.ports.native) as sess:
                return sess.execute("SELECT count(*) FROM telemetry.readings").one()[0]

    assert alive(0) == written
    assert alive(8) == 0
    assert 0.3 * written < alive(3.5) < 0.7 * written


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
