"""Against real Cassandra (issue 42): the bloom filter's chance brought to restored big SSTables instead of a
dataset built with it. The trial finds the dataset of the default, imports its SSTables again without their
Filter.db after setting the chance, and the node's filter is the size of one written with that chance."""

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store
from nosqltune.systems.cassandra.trial import cassandra_dataset_key
from nosqltune.systems.settings import CASSANDRA_VERSION
from nosqltune.systems.dataset import dataset_for
from nosqltune.workloads.spec import make_workload

from .conftest import OPERATIONS, SMALL, dataset_dirs

RECORDS = int(SMALL[SMALL.index("--records") + 1])


def _bench(study, capsys, *extra) -> dict:
    code = main(["bench", "--workload", "ycsb-c", *SMALL, "--study", str(study), "--json", *extra])
    capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", row["error"]
    assert row["metrics"]["errors"] == 0 and row["metrics"]["summary"]["read_count"] == OPERATIONS
    return row


def _default_dataset():
    """The session's dataset of SMALL for the default (its bloom filter chance Cassandra's 0.01)."""
    shape = make_workload("ycsb-c", records=RECORDS).dataset_properties()
    return dataset_for(cassandra_dataset_key(CASSANDRA_VERSION, shape, {}, 1024, "bulk"))


@pytest.mark.slow   # 55 s (a build and a restaged trial): make test-all; make test keeps within 10 minutes
def test_a_bloom_filter_chance_is_brought_to_restored_data_without_a_build(nosqltune_home, dataset_cache,
                                                                          tmp_path, capsys):
    dataset = _default_dataset()
    if not dataset.exists():   # built by an earlier test of the session, or now
        _bench(tmp_path / "default.db", capsys)
    assert dataset.meta()["table_options"] == {"bloom_filter_fp_chance": 0.01}   # what the table was loaded with
    default_filters = sum(f.stat().st_size for f in (dataset.data_dir / "ycsb").glob("usertable-*/*-Filter.db"))
    datasets = dataset_dirs(dataset_cache)
    brought = _bench(tmp_path / "brought.db", capsys, "--set", "bloom_filter_fp_chance=0.1")
    assert dataset_dirs(dataset_cache) == datasets and "dataset_build_s" not in brought["timings"]   # no build
    restaged = brought["internals"]["restaged"]
    assert restaged["knobs"] == ["bloom_filter_fp_chance"] and restaged["sstables"] >= 1
    assert restaged["dropped"] == restaged["sstables"] and restaged["import_s"] > 0 and restaged["bytes"] > 0
    assert "evicted_bytes" not in restaged   # in memory: the page cache is left as the restore filled it
    assert brought["internals"]["table_options"]["bloom_filter_fp_chance"] == 0.1   # the node's schema says so
    # and its filters were rebuilt with it: 0.1 takes about half the bits per key of the default's 0.01
    small = brought["internals"]["bloom_filter_disk_bytes"]
    assert 0.3 < small / default_filters < 0.7, (small, default_filters)


@pytest.mark.slow   # 60 s: make test-all
def test_a_restaged_filter_is_the_size_of_one_loaded_with_the_chance(nosqltune_home, tmp_path, capsys):
    brought = _bench(tmp_path / "brought.db", capsys, "--set", "bloom_filter_fp_chance=0.1")
    # the same chance set by the node that loads the data for the trial itself
    built = _bench(tmp_path / "built.db", capsys, "--set", "bloom_filter_fp_chance=0.1", "--restore", "reload")
    assert "restaged" in brought["internals"] and "restaged" not in built["internals"]
    assert built["timings"]["load_s"] > 0
    small, loaded = brought["internals"]["bloom_filter_disk_bytes"], built["internals"]["bloom_filter_disk_bytes"]
    assert abs(loaded - small) <= 0.2 * loaded, (small, loaded)
