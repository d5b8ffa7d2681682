"""Restored SSTables staged for an import that rebuilds a component with the trial's value (issue 42)."""

from __future__ import annotations

import dataclasses
import os

from nosqltune.systems.cassandra.restage import STAGED, restages, stage
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


def test_the_tables_sstables_move_beside_the_data_without_the_rebuilt_component(tmp_path):
    built = _dataset(tmp_path / "dataset")
    data = tmp_path / "node" / "data"
    copy_tree(tmp_path / "dataset", data, "link")   # as a trial restores it: hard links where Cassandra never writes
    out = stage(data, ["Filter.db"], "ycsb", "usertable")

    staged = tmp_path / "node" / STAGED / "ycsb" / "usertable"
    assert out == {"directory": str(staged), "sstables": 2, "dropped": 2}
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


def test_only_a_single_restored_node_of_cassandra_5_restages():
    one = TrialSettings()
    assert restages(one)
    assert not restages(dataclasses.replace(one, restore_mode="reload"))   # it loads with the knob anyway
    assert not restages(TrialSettings(datastore=CassandraSettings(nodes=2, replication_factor=2)))
    assert not restages(TrialSettings(datastore=CassandraSettings(cassandra_version="4.1.7")))
