"""The best-practice baseline: the rule grammar, the documented rules on given machines, and the knob data."""

from __future__ import annotations

import pytest

from nosqltune.knobs.best_practice import best_practice, cpu_list, evaluate, machine_facts, rotational
from nosqltune.knobs import KnobError, load_space, load_space_file


def facts(cores=2, drives=1, ssd=0, heap_mib=2048):
    return {"cores": cores, "drives": drives, "ssd": ssd, "heap_mib": heap_mib}


def test_rule_grammar():
    assert evaluate("8 * cores", facts(cores=3)) == 24
    assert evaluate("min(heap_mib / 4, 512)", facts(heap_mib=1024)) == 256
    assert evaluate("cores if ssd else max(2, min(8, min(drives, cores)))", facts(cores=4, ssd=1)) == 4
    assert evaluate("cores if ssd else max(2, min(8, min(drives, cores)))", facts(cores=4, drives=1)) == 2
    assert evaluate("2 if drives == 1 else drives", facts(drives=3)) == 3
    for bad in ("__import__('os')", "cores.real", "open('x')", "ram * 2", "[1][0]", "8 *"):
        with pytest.raises(KnobError):
            evaluate(bad, facts())


def test_documented_rules_for_two_machines():
    space = load_space("cassandra")
    small, why = best_practice(space, facts(cores=2, drives=1, ssd=0, heap_mib=2048))
    assert small == {"concurrent_writes": 16, "concurrent_reads": 16, "concurrent_compactors": 2,
                     "memtable_flush_writers": 2, "file_cache_size": 512}
    assert all(why[k]["source"].startswith("cassandra.yaml") and why[k]["value"] == v for k, v in small.items())
    big, _ = best_practice(space, facts(cores=16, drives=4, ssd=1, heap_mib=1024))
    assert big["concurrent_writes"] == 128 and big["concurrent_reads"] == 64
    assert big["concurrent_compactors"] == 16 and big["memtable_flush_writers"] == 4
    assert big["file_cache_size"] == 256                      # a quarter of a 1 GiB heap
    tiny, _ = best_practice(space, facts(cores=0, drives=0, ssd=0))
    assert tiny["concurrent_writes"] >= space.knobs["concurrent_writes"].bounds[0]   # kept within what Cassandra accepts


def test_knob_file_rejects_a_bad_rule(tmp_path):
    text = """system: x
version: "1"
knobs:
  threads:
    type: int
    range: [1, 64]
    default: 8
    applies: yaml
    key: threads
    description: test knob
    best_practice:
      rule: "{rule}"
      source: a doc
"""
    good = tmp_path / "good.yaml"
    good.write_text(text.replace("{rule}", "4 * cores"))
    assert load_space_file(good).knobs["threads"].best_practice == {"rule": "4 * cores", "source": "a doc"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("{rule}", "4 * sockets"))
    with pytest.raises(KnobError, match="sockets"):
        load_space_file(bad)


def test_machine_facts(tmp_path):
    assert cpu_list("0-2,5") == {0, 1, 2, 5}
    got = machine_facts(heap_mb=1024, data_path=tmp_path, server_cpus="0")
    assert got["cores"] == 1 and got["drives"] == 1 and got["heap_mib"] == 1024
    assert got["disk"] in ("ssd", "rotational", "unknown") and got["ssd"] == (got["disk"] == "ssd")


@pytest.mark.parametrize("flag, expected", [("1", True), ("0", False), (None, None)])
def test_rotational_reads_the_disk_queue_of_the_path(tmp_path, flag, expected):
    import os

    dev = os.stat(tmp_path).st_dev
    sysfs = tmp_path / "sys"
    disk = sysfs / "devices" / "vda"
    partition = disk / "vda1"   # a partition's flag is its disk's
    partition.mkdir(parents=True)
    if flag is not None:
        (disk / "queue").mkdir()
        (disk / "queue" / "rotational").write_text(flag + "\n")
    (sysfs / "dev" / "block").mkdir(parents=True)
    (sysfs / "dev" / "block" / f"{os.major(dev)}:{os.minor(dev)}").symlink_to(partition)
    assert rotational(tmp_path, sysfs) is expected
