"""Bulk loading (systems/cassandra/bulk.py): the writer JVM's classpath, the table it writes, what the writers left
behind, and which datasets load in bulk."""

import pytest

from nosqltune.errors import TrialError
from nosqltune.knobs import load_space
from nosqltune.systems.base import CassandraSettings, TrialSettings
from nosqltune.systems.cassandra import bulk
from nosqltune.systems.cassandra.config import place
from nosqltune.systems.cassandra.trial import cassandra_dataset_key, load_method
from nosqltune.systems.dataset import dataset_key
from nosqltune.workloads.spec import make_workload


def _jar(group: str, artifact: str, version: str, classifier: str = "") -> str:
    return f"/repo/{group}/{artifact}/{version}/{artifact}-{version}{classifier}.jar"


def test_writer_classpath_puts_cassandra_before_loadgen_dependencies_and_leaves_out_logback(monkeypatch):
    loadgen = ["/checkout/loadgen/target/nosqltune-loadgen.jar", _jar("site/ycsb", "core", "0.17.0"),
               _jar("org/hdrhistogram", "HdrHistogram", "2.1.4"), _jar("io/netty", "netty-handler", "4.1.94.Final"),
               _jar("org/slf4j", "slf4j-api", "1.7.36"), _jar("org/slf4j", "slf4j-simple", "1.7.36")]
    cassandra = [_jar("org/apache/cassandra", "cassandra-all", "5.0.6"),
                 _jar("org/hdrhistogram", "HdrHistogram", "2.1.12"),
                 _jar("io/netty", "netty-handler", "4.1.119.Final"),
                 _jar("io/netty", "netty-transport-native-epoll", "4.1.119.Final", "-linux-x86_64"),
                 _jar("org/slf4j", "slf4j-api", "1.7.36"), _jar("ch/qos/logback", "logback-classic", "1.2.12"),
                 _jar("ch/qos/logback", "logback-core", "1.2.12")]
    monkeypatch.setattr(bulk, "loadgen_classpath", lambda: tuple(loadgen))
    monkeypatch.setattr(bulk, "cassandra_classpath", lambda version: list(cassandra))
    path = bulk.writer_classpath("5.0.6")
    assert path[0] == loadgen[0]   # loadgen's own classes (and its simplelogger.properties) first
    assert path[1:7] == [jar for jar in cassandra if "logback-classic" not in jar]
    assert path[7:] == [loadgen[1], loadgen[5]]   # YCSB and slf4j-simple: Cassandra brings the others itself


def test_the_writer_table_is_the_ycsb_table_with_the_options_that_shape_sstables():
    assert bulk.table_statement("ycsb", "usertable", 2) == \
        "CREATE TABLE ycsb.usertable (y_id varchar PRIMARY KEY, field0 varchar, field1 varchar)"
    zstd = place(load_space("cassandra"), {"compression": "ZstdCompressor", "compression_chunk_length": 64})
    assert bulk.table_statement("ycsb", "usertable", 1, zstd.reload_table_options()) == \
        ("CREATE TABLE ycsb.usertable (y_id varchar PRIMARY KEY, field0 varchar) "
         "WITH compression = {'class': 'ZstdCompressor', 'chunk_length_in_kb': '64', 'compression_level': '3'}")
    leveled = place(load_space("cassandra"), {"compaction_method": "Leveled"})   # the strategy shapes SSTables too
    assert leveled.reload_table_options() == "compaction = {'class': 'LeveledCompactionStrategy'}"
    assert place(load_space("cassandra"), {"memtable": "trie"}).reload_table_options() is None


def test_heap_follows_the_buffers_in_hand():
    # one buffer filling, two being written: three times their bytes each
    assert bulk.BulkSettings(threads=2).heap(100) == 512 + 3 * 3 * 100
    assert bulk.BulkSettings(threads=4, buffers="thread", flushers=1).heap(50) == 512 + 5 * 3 * 50
    assert bulk.BulkSettings(heap_mb=3000).heap(100) == 3000


def _buckets(sizes: list[float]) -> list[list[float]]:
    """Size-tiered compaction's buckets (5.0's defaults: bucket_low 0.5, bucket_high 1.5, min_sstable_size 50 MiB)."""
    buckets: list[list[float]] = []
    for size in sorted(sizes):
        for bucket in buckets:
            mean = sum(bucket) / len(bucket)
            if 0.5 * mean < size < 1.5 * mean or (size < 50 and mean < 50):
                bucket.append(size)
                break
        else:
            buckets.append([size])
    return buckets


@pytest.mark.parametrize("records", [2_000, 100_000, 400_000, 1_000_000, 3_000_000])
def test_the_buffers_leave_size_tiered_compaction_nothing_to_merge(records):
    """Whatever the data, no 4 SSTables of similar size (what a load over CQL converges to), the largest first, as
    long as the memory allows; the heap then stays within half of it."""
    settings = bulk.BulkSettings()
    size = records * 1024 / (1 << 20)
    largest = settings.largest(size, memory_mb=23_000)
    plan = bulk.buffer_plan(size, largest)
    sstables = []   # the sizes the plan cuts the data into (the last size repeats)
    left = size
    for i in range(100):
        if left <= 0:
            break
        sstables.append(min(left, plan[min(i, len(plan) - 1)]))
        left -= sstables[-1]
    assert max(len(bucket) for bucket in _buckets(sstables)) < 4, (plan, sstables)
    assert plan == sorted(plan, reverse=True) and max(plan) <= max(largest, size * 1.1)
    assert settings.heap(max(plan)) <= 23_000 / 2
    assert (len(plan) == 1) == (size <= bulk.SINGLE_MB)   # one SSTable for what one memtable flush would hold


def test_data_too_large_for_the_memory_gets_buffers_of_the_largest_size():
    assert bulk.buffer_plan(10_000, 500) == [500]
    assert bulk.data_mb(make_workload("ycsb-c", records=1 << 20)) == 24 + 10 * 100


def _writer(root, number, rows, sstables, finished=True):
    folder = root / str(number) / "ycsb" / "usertable"
    folder.mkdir(parents=True)
    for generation in range(1, sstables + 1):
        (folder / f"nb-{generation}-big-Data.db").write_bytes(b"x" * 100)
        (folder / f"nb-{generation}-big-Index.db").write_bytes(b"i" * 10)
    if finished:
        (root / str(number) / bulk.ROWS_FILE).write_text(f"{rows}\n")
    return folder


def test_written_sstables_adds_up_what_every_flusher_left(tmp_path):
    first, second = _writer(tmp_path, 1, 600, 2), _writer(tmp_path, 2, 400, 1)
    (tmp_path / "load.properties").write_text("db=x\n")   # nor are files and other folders beside the flushers'
    (tmp_path / "node" / "data").mkdir(parents=True)
    assert bulk.written_sstables(tmp_path) == {"directories": [str(first), str(second)], "rows": 1000,
                                              "sstables": 3, "bytes": 3 * 110}


def test_a_flusher_that_did_not_finish_fails_the_load(tmp_path):
    _writer(tmp_path, 1, 600, 2)
    _writer(tmp_path, 2, 400, 1, finished=False)
    with pytest.raises(TrialError, match="did not finish"):
        bulk.written_sstables(tmp_path)


def test_a_single_node_loads_in_bulk_a_cluster_over_cql():
    assert load_method(TrialSettings()) == "bulk"
    assert load_method(TrialSettings(datastore=CassandraSettings(load_method="cql"))) == "cql"
    assert load_method(TrialSettings(datastore=CassandraSettings(nodes=3))) == "cql"


def test_the_load_method_is_part_of_the_dataset_key_and_cql_datasets_keep_theirs():
    parts = {"cassandra": "5.0.6", "data": {"records": 100}, "knobs": {}, "heap_mb": 2048}
    cql = cassandra_dataset_key("5.0.6", {"records": 100}, {}, 2048, "cql")
    assert cql == dataset_key(parts) == cassandra_dataset_key("5.0.6", {"records": 100}, {}, 2048)
    assert cassandra_dataset_key("5.0.6", {"records": 100}, {}, 2048, "bulk") not in (cql, None)
