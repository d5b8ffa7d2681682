"""Restored SSTables staged for an import that rebuilds a component with the trial's value (issue 42)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from nosqltune.errors import TrialError
from nosqltune.knobs import load_space
from nosqltune.systems.cassandra.config import place
from nosqltune.systems.cassandra.restage import STAGED, pending, restaged_columns, restages, stage
from nosqltune.systems.dataset import copy_tree
from nosqltune.systems.settings import CassandraSettings, TrialSettings

COMPONENTS = ("Data.db", "Index.db", "Summary.db", "Filter.db", "Statistics.db", "CompressionInfo.db", "TOC.txt")


def _dataset(root):
    """A dataset's data folder: the table's two big SSTables beside a system table's."""
    table = root / "ycsb" / "usertable-0123abcd"
    other = root / "system_schema" / "tables-4567"
    for folder in (table, other):
        folder.mkdir(parents=True)
        for generation in (1, 2):
            for component in COMPONENTS:
                text = "\n".join(COMPONENTS) + "\n" if component == "TOC.txt" else f"{folder.name} {generation}"
                (folder / f"nb-{generation}-big-{component}").write_text(text)
    (table / "backups").mkdir()
    return table


def _linked(source, data):
    """The dataset's folder restored with every file a hard link (the worst case: copy_tree copies some)."""
    for path in source.rglob("*"):
        target = data / path.relative_to(source)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(path, target)


def test_the_tables_sstables_move_beside_the_data_without_the_rebuilt_component(tmp_path):
    built = _dataset(tmp_path / "dataset")
    data = tmp_path / "node" / "data"
    _linked(tmp_path / "dataset", data)
    out = stage(data, ["Filter.db"], "ycsb", "usertable")

    staged = tmp_path / "node" / STAGED / "ycsb" / "usertable"
    size = sum(p.stat().st_size for p in staged.iterdir() if not p.name.endswith("TOC.txt"))
    assert out == {"directory": str(staged), "sstables": 2, "dropped": 2, "bytes": size}
    names = sorted(p.name for p in staged.iterdir())
    assert len(names) == 2 * (len(COMPONENTS) - 1) and not any(n.endswith("-Filter.db") for n in names)
    assert (staged / "nb-1-big-TOC.txt").read_text().splitlines() == [c for c in COMPONENTS if c != "Filter.db"]
    table = data / "ycsb" / "usertable-0123abcd"
    assert [p.name for p in table.iterdir()] == ["backups"]                 # the table's folder holds no SSTable
    assert len(list((data / "system_schema" / "tables-4567").iterdir())) == 2 * len(COMPONENTS)   # others stay
    # the dataset keeps every file as it was built: moved and unlinked links, a new TOC written beside
    assert len(list(built.glob("nb-*"))) == 2 * len(COMPONENTS)
    assert (built / "nb-1-big-TOC.txt").read_text() == "\n".join(COMPONENTS) + "\n"
    assert (built / "nb-2-big-Filter.db").read_text() == "usertable-0123abcd 2"
    assert os.path.samefile(built / "nb-1-big-Data.db", staged / "nb-1-big-Data.db")   # renamed, not copied


def test_a_restored_table_without_sstables_or_components_is_refused(tmp_path):
    _dataset(tmp_path / "dataset")
    data = tmp_path / "node" / "data"
    copy_tree(tmp_path / "dataset", data, "link")
    for filter_file in (data / "ycsb").glob("usertable-*/nb-2-big-Filter.db"):
        filter_file.unlink()
    with pytest.raises(TrialError, match="2 SSTables with 1 of their Filter.db files"):
        stage(data, ["Filter.db"], "ycsb", "usertable")
    with pytest.raises(TrialError, match="0 SSTables"):
        stage(tmp_path / "empty" / "data", ["Filter.db"], "ycsb", "other")


def test_only_values_other_than_the_datasets_are_restaged():
    space = load_space("cassandra")
    placed = place(space, {"bloom_filter_fp_chance": 0.1}, restage=True)
    assert pending(placed, space, {"bloom_filter_fp_chance": 0.1}) == {}            # the data has it already
    assert pending(placed, space, {"bloom_filter_fp_chance": 0.01}) == {"bloom_filter_fp_chance": "Filter.db"}
    assert pending(placed, space, {}) == {"bloom_filter_fp_chance": "Filter.db"}     # a dataset stored before
    assert restaged_columns(space) == ["bloom_filter_fp_chance"]


def test_a_trial_that_cannot_restage_keys_its_dataset_by_every_knob():
    from nosqltune.systems.cassandra.trial import knob_space

    cluster = knob_space(TrialSettings(datastore=CassandraSettings(nodes=2, replication_factor=2)))
    assert cluster["bloom_filter_fp_chance"].restaged is None
    assert place(cluster, {"bloom_filter_fp_chance": 0.1}, restage=True).reload == {"bloom_filter_fp_chance": 0.1}
    assert knob_space(TrialSettings())["bloom_filter_fp_chance"].restaged


def test_only_a_single_restored_node_of_cassandra_5_restages():
    one = TrialSettings()
    assert restages(one)
    assert not restages(dataclasses.replace(one, restore_mode="reload"))   # it loads with the knob anyway
    assert not restages(TrialSettings(datastore=CassandraSettings(nodes=2, replication_factor=2)))
    assert not restages(TrialSettings(datastore=CassandraSettings(cassandra_version="4.1.7")))
