"""Against real Cassandra: a dataset loaded in bulk (YCSB's records written as SSTables by Cassandra's own writer,
then imported into the node), the default on one node, serves every record."""

import json

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store
from nosqltune.systems.cassandra import cql, internals
from nosqltune.systems.cassandra.bulk import BulkSettings, import_written, table_statement, write_sstables
from nosqltune.systems.cassandra.node import CassandraNode
from nosqltune.systems.cassandra.trial import cassandra_dataset_key
from nosqltune.systems.dataset import dataset_for
from nosqltune.workloads.spec import make_workload

from .conftest import OPERATIONS, SMALL

RECORDS = int(SMALL[SMALL.index("--records") + 1])


@pytest.mark.slow   # 30 s: make test-all (make test keeps datasets loaded by YCSB)
def test_a_bulk_loaded_dataset_serves_every_record(nosqltune_home, tmp_path, capsys):
    # the session's dataset of SMALL (loaded in bulk by this test or an earlier one: the key says bulk)
    study = tmp_path / "bulk.db"
    code = main(["bench", "--workload", "ycsb-c", *SMALL, "--study", str(study), "--json"])
    capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", row["error"]
    # every read found its record (a NOT_FOUND would count as an error)
    assert row["metrics"]["errors"] == 0 and row["metrics"]["summary"]["read_count"] == OPERATIONS

    shape = make_workload("ycsb-c", records=RECORDS).dataset_properties()
    dataset = dataset_for(cassandra_dataset_key("5.0.6", shape, {}, 1024, "bulk"))
    meta = json.loads(dataset.meta_path.read_text())
    assert meta["load_method"] == "bulk"
    assert meta["bulk"]["rows"] == RECORDS and meta["bulk"]["sstables"] == 1 and meta["bulk"]["import_s"] > 0

    # all the records, with YCSB's field count and lengths, on a node restored from the dataset
    node_home = tmp_path / "count"
    dataset.restore_into(node_home / "data")
    with CassandraNode(home=node_home, heap_mb=1024) as node:
        node.start()
        with cql.session(node.address, node.ports.native) as sess:
            count = sess.execute("SELECT count(*) FROM ycsb.usertable").one()[0]
            record = sess.execute("SELECT * FROM ycsb.usertable LIMIT 1").one()._asdict()
    assert count == RECORDS
    assert record["y_id"].startswith("user")
    assert sorted(len(record[f"field{i}"]) for i in range(10)) == [100] * 10


@pytest.mark.slow   # 40 s: make test-all
def test_an_import_starts_the_tables_compactions_at_once(tmp_path):
    """Imported SSTables are compacted right after the import, not at the node's first periodic check 5 minutes
    after it started: a leveled dataset's build waited that long with the CPU idle (issue 42). Leveled with 1 MiB
    SSTables, and the writer's buffers at most 1 MiB: several SSTables in level 0 (leveled compaction leaves a
    single one there alone), so the table has compactions pending after the import."""
    workload = make_workload("ycsb-c", records=RECORDS)
    options = "compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': 1}"
    schema = table_statement("ycsb", "usertable", workload.fieldcount, options)
    with CassandraNode(home=tmp_path / "node", heap_mb=1024) as node:
        node.start()
        written = write_sstables(workload, tmp_path / "node" / "bulk", schema, version="5.0.6",
                                 settings=BulkSettings(largest_mb=1))
        with cql.session(node.address, node.ports.native) as sess:
            sess.execute("CREATE KEYSPACE ycsb WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
            sess.execute(schema)
        import_written(written, node.ports.jmx)
        settled = internals.wait_compactions(node.ports.jmx, timeout=90)
    assert written["sstables"] >= 3
    assert settled["pending"] == 0 and settled["settle_s"] < 60, settled
