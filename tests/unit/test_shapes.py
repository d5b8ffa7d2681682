"""Node shapes: the rig derived from a production node keeps its ratios (data against page cache, the heap's share
of memory, the volume per core) within 5% where it can, says which it cannot keep, and refuses a shape or a cap
that cannot work; size-like values found on the rig are carried back with their rule."""

from __future__ import annotations

import pytest

from nosqltune.cli import main
from nosqltune.errors import UsageError
from nosqltune.shapes import HEAP_FLOOR_MB, NodeShape, derive, load_shape, presets, scale_back


@pytest.mark.parametrize("name", presets())
def test_the_presets_derive_a_rig_that_keeps_their_proportions(name):
    shape = load_shape(name)
    rig = derive(shape, machine_cores=2)
    ratios = {r.name: r for r in rig.ratios}
    assert ratios["data per page cache"].kept
    assert abs(ratios["data per page cache"].rig / ratios["data per page cache"].shape - 1) <= 0.05
    assert rig.heap_mb + rig.offheap_mb + rig.page_cache_mb == rig.memory_mb
    assert rig.node_cores == 1 and not ratios["cores"].kept   # 8 cores cannot be had on 2
    if shape.volume:
        assert ratios["IOPS per core"].kept and ratios["MiB/s per core"].kept
        assert rig.volume["iops"] == round(3000 / 8)           # gp3's baseline, per core
    else:
        assert rig.volume is None
    assert rig.ranges["concurrent_reads"] == [2, 32] and rig.ranges["heap_size"][0] == HEAP_FLOOR_MB
    assert any("NOT kept: cores 8" in line for line in rig.lines())


def test_a_local_drives_read_ahead_is_linuxs_default_and_the_rigs_disk_says_its_own():
    """A shape without a volume runs on this machine's disk as it is set: its read-ahead (8 MiB here) is a ratio the
    rig keeps only when the disk is at Linux's 128 KiB (read_ahead.md: mmap 16x slower at 8 MiB than at 8 KiB). A
    volume's read-ahead is its preset's on the rig too, so it is no ratio."""
    local = load_shape("local-ssd-node")
    ahead = {r.name: r for r in derive(local, machine_cores=2, disk_read_ahead_kb=8192).ratios}["read-ahead"]
    assert (ahead.shape, ahead.rig, ahead.kept) == (128, 8192, False)
    assert any("NOT kept: read-ahead 128 KiB on the shape, 8,192 KiB on the rig" in line
               for line in derive(local, machine_cores=2, disk_read_ahead_kb=8192).lines())
    assert {r.name: r for r in derive(local, machine_cores=2, disk_read_ahead_kb=128).ratios}["read-ahead"].kept
    assert "read-ahead" not in {r.name for r in derive(local, machine_cores=2).ratios}   # not found: not said
    gp3 = derive(load_shape("gp3-node"), machine_cores=2, disk_read_ahead_kb=8192)
    assert "read-ahead" not in {r.name for r in gp3.ratios}


def test_the_heaps_share_is_kept_until_its_floor():
    big = NodeShape("big", cores=4, memory_gib=64, data_gib=100)          # 8 GiB heap: 12.5% of memory
    rig = derive(big, memory_mb=8192, machine_cores=2)
    assert rig.heap_mb == 1024 and {r.name: r for r in rig.ratios}["heap per memory"].kept
    floored = derive(big, memory_mb=2048, machine_cores=2)                # 12.5% of 2 GiB is below the floor
    assert floored.heap_mb == HEAP_FLOOR_MB and not {r.name: r for r in floored.ratios}["heap per memory"].kept
    small = NodeShape("small", cores=2, memory_gib=4, data_gib=40)        # Cassandra's 1 GiB default: 25%
    assert derive(small, machine_cores=2).heap_mb == HEAP_FLOOR_MB


def test_values_the_user_gives_make_the_rig_and_show_in_its_ratios():
    """--records, --page-cache, --heap and the volume's flags given beside --node-shape win over the derived values,
    and the rig that is printed and stored is the one that runs: a ratio they break says NOT kept, and why."""
    shape = load_shape("gp3-node")
    derived = derive(shape, machine_cores=2)
    doubled = derive(shape, machine_cores=2, given={"records": 2 * derived.records})
    ratio = {r.name: r for r in doubled.ratios}["data per page cache"]
    assert doubled.records == 2 * derived.records and abs(ratio.rig / ratio.shape - 2) <= 0.1 and not ratio.kept
    assert any("NOT kept: data per page cache" in line and "--records given" in line for line in doubled.lines())
    # a smaller page cache lowers the memory cap, and the records follow it: the shape's ratio kept with less data
    small = derive(shape, machine_cores=2, given={"page_cache_mb": derived.page_cache_mb // 2})
    assert small.memory_mb == small.heap_mb + small.offheap_mb + derived.page_cache_mb // 2 < derived.memory_mb
    assert {r.name: r for r in small.ratios}["data per page cache"].kept
    assert abs(small.records / derived.records - 0.5) <= 0.01
    capped = derive(shape, machine_cores=2, given={"iops": 4 * derived.volume["iops"], "heap_mb": 1024})
    ratios = {r.name: r for r in capped.ratios}
    assert capped.volume["iops"] == 4 * derived.volume["iops"] and not ratios["IOPS per core"].kept
    assert capped.heap_mb == 1024 and ratios["MiB/s per core"].kept


def test_more_data_against_memory_means_more_records_on_the_rig():
    a = derive(NodeShape("a", cores=8, memory_gib=32, data_gib=100), machine_cores=2)
    b = derive(NodeShape("b", cores=8, memory_gib=32, data_gib=200), machine_cores=2)
    assert b.records == pytest.approx(2 * a.records, rel=0.01)
    rate = derive(NodeShape("r", cores=8, memory_gib=32, data_gib=100, rate=8000), machine_cores=2)
    assert rate.target == 1000                                            # the rate per core


def test_values_found_on_the_rig_carry_back_by_their_rule():
    rig = derive(load_shape("gp3-node"), machine_cores=2).to_dict()
    heap, rule = scale_back("heap_size", rig["heap_mb"], rig)
    assert heap == pytest.approx(32 * 1024 * rig["heap_mb"] / rig["memory_mb"], abs=1) and "share" in rule
    threads, rule = scale_back("concurrent_reads", 12, rig)
    assert threads == 96 and "per core" in rule
    assert scale_back("compression", 1, rig) is None


def test_gp3_nodes_rig_from_its_own_figures():
    """gp3-node by hand: 32 GiB, Cassandra's default heap for it 8 GiB (a quarter, at most 8), a tenth beside it,
    so 20.8 GiB of page cache under 160 GiB of data; the rig: a 512 MiB heap (the quarter of 2 GiB), 768 beside,
    768 MiB of page cache, filled as many times over by rows of 1000 bytes."""
    rig = derive(load_shape("gp3-node"), machine_cores=2)
    shape_page_cache_mib = 32 * 1024 - 8 * 1024 - 0.1 * 32 * 1024
    assert (rig.heap_mb, rig.page_cache_mb) == (512, 768)
    assert rig.records == int(160 * 1024 / shape_page_cache_mib * 768 * 2**20 / 1000) == 6_194_664


@pytest.mark.parametrize("spec, text, message", [
    ("no-such-node", None, "unknown node shape 'no-such-node'"),
    ("gp3-node --design nodes=1..3", None, "a --design of several nodes"),
    ("small.yaml", "cores: 4\nmemory_gib: 0.5\ndata_gib: 10\n", "cannot hold Cassandra's default heap"),
    ("disk.yaml", "cores: 4\nmemory_gib: 16\ndata_gib: 10\nvolume: nope\n", "unknown volume preset 'nope'"),
])
def test_a_shape_that_cannot_work_is_one_line_before_anything(spec, text, message, tmp_path, capsys,
                                                               monkeypatch):
    monkeypatch.chdir(tmp_path)
    if text:
        (tmp_path / spec).write_text(text)
    assert main(["tune", "--node-shape", *spec.split(), "--budget", "2", "--study", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("text, message", [
    ("cores: 4\nmemory_gib: 0.5\ndata_gib: 10\n", "cannot hold Cassandra's default heap"),
    ("cores: 4\nmemory_gib: 16\n", "no data_gib"),
    ("cores: 4\nmemory_gib: 16\ndata_gib: 10\ndisk: fast\n", "unknown field 'disk'"),
    ("cores: 0\nmemory_gib: 16\ndata_gib: 10\n", "must be positive"),
])
def test_a_shape_file_that_cannot_work_is_refused(tmp_path, text, message):
    path = tmp_path / "node.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_shape(str(path))


def test_a_memory_cap_that_cannot_hold_the_heap_is_refused():
    with pytest.raises(UsageError, match="cannot hold the derived heap"):
        derive(load_shape("gp3-node"), memory_mb=1024)


def test_a_shape_file_with_its_own_volume_figures(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("cores: 4\nmemory_gib: 16\ndata_gib: 64\nvolume: {iops: 8000, mbps: 400, latency_ms: 1}\n")
    rig = derive(load_shape(str(path)), machine_cores=2)
    assert rig.volume == {"preset": None, "iops": 2000, "mbps": 100, "latency_ms": 1}


def test_best_shows_the_shape_and_the_carried_values():
    from nosqltune.cli.tune import format_shape

    rig = derive(load_shape("gp3-node"), machine_cores=2).to_dict()
    text = format_shape(rig, {"heap_size": 640, "concurrent_reads": 8, "compression": "ZstdCompressor"})
    assert "tuned for node shape gp3-node" in text and "cores" in text
    assert "heap_size: 640 on the rig -> about 10240 on the shape" in text
    assert "concurrent_reads: 8 on the rig -> about 64 on the shape" in text and "compression" not in text


def test_a_shape_on_a_capped_volume_searches_the_cloud_set_unless_a_scenario_names_one():
    """The cloud set holds the settings that trade memory against I/Os (read-ahead, caches, compression): what
    binds under a volume's caps. A local drive keeps the scenario's set."""
    from argparse import Namespace

    from nosqltune.cli.tune import _shape_knobs

    gp3 = derive(load_shape("gp3-node"), machine_cores=2)
    assert _shape_knobs(Namespace(scenario=None), gp3) == "cloud"
    assert _shape_knobs(Namespace(scenario="disk-bound"), gp3) is None
    assert _shape_knobs(Namespace(scenario=None), derive(load_shape("local-ssd-node"), machine_cores=2)) is None
    assert _shape_knobs(Namespace(scenario=None), None) is None


def test_a_study_tuned_for_a_shape_stores_it_and_best_says_so(tmp_path, capsys, monkeypatch):
    """`tune --node-shape` through the command line, its Cassandra trials answered by a function of the knobs (no
    node starts): the derived rig is printed with the ratios kept and lost, its records and heap are the trials',
    the study stores the shape, and `best` names it with the values carried back by their rules. The search runs
    C1-only; its confirmation, and `best --confirm`, run at production's tiered JIT (fidelity.md)."""
    import json

    import nosqltune.runtime.probe as probe
    from nosqltune.store import open_store
    from nosqltune.systems import TrialResult, target

    seen = []

    def trial(space, overrides, workload, settings, progress):
        seen.append((workload.records, settings.cassandra.heap_mb, settings.jit))
        return TrialResult(state="COMPLETE", summary={"throughput_ops_s": 300.0 + overrides.get("concurrent_reads", 0)})

    monkeypatch.setattr(target("cassandra").module, "run_trial", trial)
    monkeypatch.setattr(probe, "machine_record", lambda folder: {})
    monkeypatch.setattr("nosqltune.systems.cassandra.trial.check_disk", lambda *a, **k: None)   # no data is built
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    study = str(tmp_path / "s.db")
    assert main(["tune", "--node-shape", "gp3-node", "--optimizer", "random", "--budget", "8", "--seed", "1",
                 "--confirm-top", "1", "--confirm-rounds", "2", "--study", study]) == 0
    err = capsys.readouterr().err
    rig = derive(load_shape("gp3-node"))
    assert "kept: data per page cache" in err and "NOT kept: cores 8" in err
    assert seen[:4] == [(rig.records, rig.heap_mb, "c1")] * 4          # the search: the budget less its confirmation
    assert seen[4:] == [(rig.records, rig.heap_mb, "tiered")] * 4     # the best and the default, 2 rounds each
    store = open_store(study)
    try:
        stored = store.find_study("tune")["settings"]["tune"]["node_shape"]
    finally:
        store.close()
    assert stored["shape"]["name"] == "gp3-node" and stored["records"] == rig.records
    assert main(["best", "--study", study]) == 0
    out = capsys.readouterr().out
    assert "tuned for node shape gp3-node" in out and "on the shape" in out
    assert main(["best", "--study", study, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["node_shape"]["shape"]["name"] == "gp3-node"
    del seen[:]
    assert main(["best", "--study", study, "--confirm", "--top", "1", "--rounds", "3"]) == 0
    assert len(seen) == 2 and {jit for *_, jit in seen} == {"tiered"}   # round 3 only: the tune's 2 rounds stand
