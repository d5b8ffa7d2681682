"""Restoring a dataset: large immutable SSTable files are linked, everything else copied; the dataset
never changes whatever the trial's node does to its copy."""

import json
import os

import pytest

from nosqltune.systems.cassandra.trial import cassandra_dataset_key as dataset_key
from nosqltune.systems.dataset import Dataset, create_dataset
from nosqltune.systems.base import TrialSettings


def _make(root):
    table = root / "data" / "ycsb" / "usertable-1234"
    table.mkdir(parents=True)
    for component, body in (("Data.db", b"rows" * 1000), ("Index.db", b"idx"), ("Summary.db", b"sum"),
                            ("Statistics.db", b"stats"), ("TOC.txt", b"toc")):
        (table / f"nb-1-big-{component}").write_bytes(body)
    (root / "meta.json").write_text(json.dumps({"records": 10}))
    return Dataset(key="k", root=root), table


def test_link_mode_links_immutable_components_and_copies_the_rest(tmp_path):
    dataset, table = _make(tmp_path / "ds")
    target = tmp_path / "node" / "data"
    dataset.restore_into(target, "link")
    restored = target / "ycsb" / "usertable-1234"
    for name in ("nb-1-big-Data.db", "nb-1-big-Index.db"):
        assert os.stat(restored / name).st_ino == os.stat(table / name).st_ino
    for name in ("nb-1-big-Summary.db", "nb-1-big-Statistics.db", "nb-1-big-TOC.txt"):
        assert os.stat(restored / name).st_ino != os.stat(table / name).st_ino
        assert (restored / name).read_bytes() == (table / name).read_bytes()


def test_what_a_node_does_to_its_copy_leaves_the_dataset_intact(tmp_path):
    dataset, table = _make(tmp_path / "ds")
    target = tmp_path / "node" / "data"
    dataset.restore_into(target, "link")
    restored = target / "ycsb" / "usertable-1234"
    (restored / "nb-1-big-Statistics.db").write_bytes(b"rewritten in place")  # small components may change
    (restored / "nb-1-big-Data.db").unlink()                                    # compaction deletes files
    (restored / "nb-2-big-Data.db").write_bytes(b"new")                          # and writes new ones
    assert (table / "nb-1-big-Statistics.db").read_bytes() == b"stats"
    assert (table / "nb-1-big-Data.db").read_bytes() == b"rows" * 1000
    assert not (table / "nb-2-big-Data.db").exists()
    # a second restore starts from the dataset again, not from the first node's state
    dataset.restore_into(target, "copy")
    assert sorted(p.name for p in restored.iterdir()) == sorted(p.name for p in table.iterdir())


def test_dataset_key_depends_on_what_shapes_the_data():
    base = dataset_key("5.0.6", {"records": 100}, {}, 2048)
    assert base == dataset_key("5.0.6", {"records": 100}, {}, 2048)
    assert base != dataset_key("5.0.6", {"records": 101}, {}, 2048)
    assert base != dataset_key("5.0.6", {"records": 100}, {"num_tokens": 4}, 2048)
    assert base != dataset_key("5.0.5", {"records": 100}, {}, 2048)


def test_failed_build_leaves_nothing_half_made(tmp_path):
    dataset = Dataset(key="k", root=tmp_path / "datasets" / "k")

    def build(home):
        (home / "data").mkdir(parents=True)
        raise RuntimeError("load failed")

    with pytest.raises(RuntimeError):
        create_dataset(dataset, build)
    assert not dataset.exists() and list((tmp_path / "datasets").iterdir()) == []


def test_jit_modes():
    assert TrialSettings(jit="c1").jvm_flags() == ["-XX:TieredStopAtLevel=1"]
    assert TrialSettings(jit="tiered").jvm_flags() == []
    with pytest.raises(ValueError):
        TrialSettings(jit="graal").jvm_flags()
