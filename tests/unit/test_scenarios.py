"""Scenarios as data: what each sets, and how a command's flags win over them."""

import pytest

from nosqltune.cli import build_parser, main
from nosqltune.cli.options import _build_workload, _overrides
from nosqltune.cli.harness import trial_settings
from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.scenarios import _parse, scenario, scenarios


def _args(*argv):
    return build_parser().parse_args(["bench", *argv])


def test_the_four_scenarios_and_what_makes_each():
    assert list(scenarios()) == ["in-memory", "disk-bound", "write-heavy", "latency-slo", "cloud-disk", "cloud-slo"]
    disk = scenario("disk-bound")
    assert disk.memory_capped and disk.memory_limit_mb(1024) == 1024 + 768 + 256
    assert disk.sizes["records"] >= 1_000_000 and disk.distribution == "uniform"
    assert scenario("write-heavy").knobs == {"memtable_heap_space": 32}
    slo = scenario("latency-slo")
    assert slo.rate_fraction == 0.6 and slo.objective == "p99-read"
    assert scenario(None).name == "in-memory" and not scenario("in-memory").memory_capped
    with pytest.raises(UsageError, match="in-memory, disk-bound"):
        scenario("fast")


def test_the_default_scenario_leaves_the_calibrated_harness_unchanged():
    workload, settings = _build_workload(_args()), trial_settings(_args())
    assert (workload.name, workload.records, workload.operations, workload.max_seconds) == ("ycsb-a", 100_000,
                                                                                            100_000, None)
    assert settings.scenario == "in-memory" and settings.cassandra.memory_limit_mb() is None
    assert settings.cassandra.heap_mb == 2048


def test_a_scenario_gives_defaults_and_every_flag_wins():
    args = _args("--scenario", "disk-bound")
    workload, settings = _build_workload(args), trial_settings(args)
    assert (workload.name, workload.mix["requestdistribution"], workload.records) == ("ycsb-b-uniform", "uniform",
                                                                                       2_000_000)
    assert settings.cassandra.heap_mb == 1024 and settings.cassandra.memory_limit_mb() == 1024 + 768 + 256
    args = _args("--scenario", "disk-bound", "--workload", "ycsb-a", "--records", "5000", "--heap", "2G")
    workload, settings = _build_workload(args), trial_settings(args)
    # the user's mix brings its own key choice; sizes and heap are the flags'; the memory cap stays
    assert (workload.name, workload.records, workload.operations) == ("ycsb-a", 5000, 150_000)
    assert settings.cassandra.heap_mb == 2048 and settings.cassandra.memory_limit_mb() == 2048 + 768 + 256
    # a read ratio on the scenario's data keeps its key choice (what its memory cap is sized for), unless the
    # flag names another; the default scenario's mixes stay zipfian, YCSB's
    for flags, keys in (((), "uniform"), (("--distribution", "zipfian"), "zipfian")):
        workload = _build_workload(_args("--scenario", "cloud-disk", *flags), name=None, read_ratio=0.7)
        assert (workload.mix["readproportion"], workload.mix["requestdistribution"]) == (0.7, keys)
    assert _build_workload(_args(), name=None, read_ratio=0.7).mix["requestdistribution"] == "zipfian"


def test_scenario_knobs_are_fixed_values_under_set():
    space = load_space("cassandra")
    assert _overrides(_args("--scenario", "write-heavy"), space) == {"memtable_heap_space": 32}   # below the range
    assert _overrides(_args("--scenario", "write-heavy", "--set", "memtable_heap_space=512"), space) == \
        {"memtable_heap_space": 512}


def test_a_searched_set_leaves_out_the_scenarios_knobs_and_a_resume_rebuilds_it(capsys):
    """write-heavy's 32 MiB of memtable space is the scenario: a set holding memtable_heap_space must not start
    its search (and its default trial) from Cassandra's 512 MiB."""
    from nosqltune.cli.options import _searched_space
    from nosqltune.tuning.results import stored_subset

    full = load_space("cassandra")
    args = build_parser().parse_args(["tune", "--scenario", "write-heavy", "--knobs", "eppinger"])
    fixed, subset, searched = _searched_space(args, full, "tuned")
    assert "memtable_heap_space" not in subset.knobs and "memtable_heap_space" not in searched.names
    assert fixed == {"memtable_heap_space": 32}
    assert len(subset.knobs) == len(full.subset("eppinger").knobs) - 1
    assert "memtable_heap_space left out of the search: scenario write-heavy holds memtable_heap_space=32" \
        in capsys.readouterr().err
    stored = stored_subset(subset, full)          # what the study keeps: the set and what was left out
    assert stored == {"set": "eppinger", "leave_out": ["memtable_heap_space"]}
    assert list(full.subset(stored).knobs) == list(subset.knobs)
    # without the scenario the set is searched whole, and stored by its name
    fixed, subset, _ = _searched_space(build_parser().parse_args(["tune", "--knobs", "eppinger"]), full, "tuned")
    assert fixed == {} and "memtable_heap_space" in subset.knobs and stored_subset(subset, full) == "eppinger"
    # a held knob also given by --set is the user's clash, said as before
    clash = build_parser().parse_args(["tune", "--scenario", "write-heavy", "--knobs", "eppinger",
                                       "--set", "memtable_heap_space=512"])
    with pytest.raises(UsageError, match="memtable_heap_space is tuned; it cannot also be fixed"):
        _searched_space(clash, full, "tuned")
    # a user's subset (names listed, some left out) keeps what it left out, and loses the held knob too
    user = {"set": "eppinger", "knobs": ["compression"], "leave_out": ["concurrent_reads"]}
    _, subset, _ = _searched_space(args, full, "tuned", user)
    assert {"compression"} <= set(subset.knobs)
    assert not {"concurrent_reads", "memtable_heap_space"} & set(subset.knobs)
    assert list(full.subset(stored_subset(subset, full)).knobs) == list(subset.knobs)
    plain = {"knobs": ["memtable_heap_space", "concurrent_reads", "concurrent_writes"], "leave_out": ["concurrent_reads"]}
    _, subset, _ = _searched_space(args, full, "tuned", plain)
    assert list(subset.knobs) == ["concurrent_writes"]
    assert subset.label.endswith("without memtable_heap_space")
    # a set made only of what the scenario holds leaves nothing to search: one line, exit 2
    only = build_parser().parse_args(["tune", "--scenario", "write-heavy", "--knobs", "memtable_heap_space.yaml"])
    with pytest.raises(Exception) as err:
        _searched_space(only, full, "tuned", ["memtable_heap_space"])
    assert getattr(err.value, "exit_code", None) == 2 and "nothing is left to search" in str(err.value)


def test_under_a_memory_cap_the_heaps_range_ends_where_the_cap_leaves_room_and_a_resume_keeps_it(capsys):
    """disk-bound caps the node at 1 GiB of heap + 768 MiB beside it + 256 MiB of page cache: a heap above
    1,280 MiB would eat the off-heap allowance (1,888 MiB was killed at boot every time), so v5's [512, 2048]
    is searched as [512, 1280] there, and the study stores that range."""
    from dataclasses import replace

    from nosqltune.cli.options import _searched_space
    from nosqltune.tuning.results import stored_subset

    args = build_parser().parse_args(["tune", "--scenario", "disk-bound", "--knobs", "v5"])
    settings = trial_settings(args)
    assert settings.cassandra.largest_heap_mb() == 1024 + 256
    full = load_space("cassandra").with_knob_defaults({"heap_size": settings.cassandra.heap_mb})
    assert full.subset("v5").knobs["heap_size"].range == (512, 2048)
    _, subset, searched = _searched_space(args, full, "tuned", settings=settings)
    assert subset.knobs["heap_size"].range == (512, 1280) and "heap_size" in searched.names
    assert len(subset.knobs) == len(full.subset("v5").knobs)
    assert "heap_size searched over [512, 1280] MiB, not up to 2048" in capsys.readouterr().err
    stored = stored_subset(subset, full)
    assert stored == {"set": "v5", "knobs": {"heap_size": {"range": [512, 1280]}}}
    assert full.subset(stored).knobs["heap_size"].range == (512, 1280)     # what a resume rebuilds
    # no cap (in-memory): the set's own range, stored by its name
    plain = build_parser().parse_args(["tune", "--knobs", "v5"])
    _, subset, _ = _searched_space(plain, full, "tuned", settings=trial_settings(plain))
    assert subset.knobs["heap_size"].range == (512, 2048) and stored_subset(subset, full) == "v5"
    # a cap too small for the range's low end: one line, exit 2
    with pytest.raises(UsageError, match="allows at most 384 MiB"):
        _searched_space(args, full, "tuned",
                        settings=replace(settings, datastore=replace(settings.cassandra, heap_mb=256, page_cache_mb=128)))


def test_scenarios_command_lists_what_each_sets(capsys):
    assert main(["scenarios", "--json"]) == 0
    import json

    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert listed["disk-bound"]["sets"]["memory"] == {"offheap_mb": 768, "page_cache_mb": 256}
    assert listed["latency-slo"]["sets"]["rate_fraction"] == 0.6 and listed["latency-slo"]["why"]
    assert main(["scenarios", "write-heavy"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("write-heavy:") and "memtable_heap_space: 32" in " ".join(out.split())
    assert "calibration goal: throughput CV <= 5%" in " ".join(out.split())


def test_a_calibration_stored_here_becomes_the_scenarios_defaults(shipped_scenario_sizes, capsys):
    from nosqltune.scenarios import calibration_file, save_calibration

    assert calibration_file() == shipped_scenario_sizes
    shipped = scenario("disk-bound")
    try:
        save_calibration("disk-bound", {"operations": 150_000, "warmup_ops": 40_000},
                         {"metric": "throughput", "cv": 0.041})
        here = scenario("disk-bound")
        assert here.sizes == {**shipped.sizes, "operations": 150_000, "warmup_ops": 40_000}
        assert here.calibrated_here["figures"]["cv"] == 0.041 and scenario("write-heavy").calibrated_here is None
        assert scenario("disk-bound", "redis").sizes == shipped.sizes      # a calibration is per datastore
        workload = _build_workload(_args("--scenario", "disk-bound"))
        assert (workload.operations, workload.warmup_operations) == (150_000, 40_000)
        assert _build_workload(_args("--scenario", "disk-bound", "--operations", "7000")).operations == 7000
        assert main(["scenarios", "disk-bound"]) == 0
        out = capsys.readouterr().out
        assert "calibrated on this machine" in out and "operations 150000" in out and "CV 4.1%" in out
        with pytest.raises(ValueError, match="not a calibrated size"):
            save_calibration("disk-bound", {"heap": 4096}, {})
    finally:
        shipped_scenario_sizes.unlink(missing_ok=True)
    assert scenario("disk-bound").sizes == shipped.sizes


def test_an_unreadable_calibration_file_leaves_the_shipped_sizes(shipped_scenario_sizes):
    try:
        for text in ("{not json", "[1, 2]", '{"cassandra": {"in-memory": 3}}',
                     '{"cassandra": {"in-memory": {"sizes": {"operations": "many"}}}}'):
            shipped_scenario_sizes.write_text(text)
            assert scenario("in-memory").sizes == scenarios()["in-memory"].sizes
    finally:
        shipped_scenario_sizes.unlink()


def test_calibrate_takes_its_goal_from_the_scenario():
    from nosqltune.cli.calibrate import _goal, recommend

    def goal(*argv):
        return _goal(build_parser().parse_args(["calibrate", *argv]))

    assert goal() == ("throughput", 0.03, None)
    assert goal("--scenario", "latency-slo") == ("p99-read", 0.08, 60.0)
    assert goal("--scenario", "disk-bound", "--max-cv", "0.1", "--metric", "cpu-per-op",
                "--max-trial-seconds", "90") == ("cpu-per-op", 0.1, 90.0)
    with pytest.raises(UsageError, match="--max-cv"):
        goal("--max-cv", "-0.1")
    cells = [{"n": 10, "cv": 0.03, "trial_seconds": 70.0}, {"n": 10, "cv": 0.045, "trial_seconds": 50.0},
             {"n": 10, "cv": 0.06, "trial_seconds": 20.0}]
    assert recommend(cells, 0.05) is cells[1]
    assert recommend(cells, 0.04) is cells[0] and recommend(cells, 0.04, max_trial_seconds=60) is None


def test_no_save_or_no_scenario_keeps_the_shipped_sizes(shipped_scenario_sizes):
    from nosqltune.cli.calibrate import _save

    pick = {"records": 10, "operations": 20, "warmup_ops": 5, "threads": 2, "n": 3, "trial_seconds": 9.0}
    for argv in (["--scenario", "in-memory", "--no-save"], []):
        assert _save(build_parser().parse_args(["calibrate", *argv]), pick, "throughput", 0.01, 0.05, 60) is None
    # trials of another configuration or rate than the scenario's own are not its calibration
    for argv in (["--set", "concurrent_reads=64"], ["--target", "1000"], ["--rate-fraction", "0.3"]):
        args = build_parser().parse_args(["calibrate", "--scenario", "in-memory", *argv])
        assert _save(args, pick, "throughput", 0.01, 0.05, 60) is None
    assert not shipped_scenario_sizes.exists()


def test_rate_fraction_sets_the_fixed_rate_over_the_scenarios(monkeypatch):
    import nosqltune.evaluation.rates as rates
    from nosqltune.cli.options import scenario_rate

    # the maximum throughput is measured with real trials: here a stand-in of 1,000 ops/s
    monkeypatch.setattr(rates, "fixed_rate", lambda settings, workload, fraction, progress=None: int(fraction * 1000))
    for argv, rate in ((["--scenario", "latency-slo"], 600), (["--scenario", "latency-slo", "--rate-fraction", "0.5"],
                                                            500), (["--rate-fraction", "0.25"], 250)):
        args = _args(*argv)
        workload, constraint = scenario_rate(args, trial_settings(args), _build_workload(args))
        assert workload.target == rate and constraint == f"throughput>={0.95 * rate:g}"
    args = _args("--scenario", "latency-slo", "--target", "700", "--rate-fraction", "0.5")   # a rate given wins
    assert scenario_rate(args, trial_settings(args), _build_workload(args))[0].target == 700


def test_the_cloud_scenarios_put_each_node_on_a_capped_volume_and_flags_win(monkeypatch):
    from nosqltune.runtime import blkio, delayfs, volume

    monkeypatch.setattr(volume, "usable", lambda: None)   # this test makes no volume: it reads the settings
    monkeypatch.setattr(blkio, "usable", lambda: None)
    monkeypatch.setattr(delayfs, "usable", lambda: None)
    cloud = scenario("cloud-disk")
    assert (cloud.volume, cloud.volume_caps) == ("aws-gp3", {"iops": 1000, "mbps": 42})
    assert cloud.memory_limit_mb(1024) == scenario("disk-bound").memory_limit_mb(1024)
    settings = trial_settings(_args("--scenario", "cloud-disk"))
    assert settings.cassandra.volume == {"name": "aws-gp3", "read_iops": 1000, "write_iops": 1000, "read_mbps": 42,
                                         "write_mbps": 42, "read_ahead_kb": 128}
    # a volume named on the command line comes with its own caps; a cap given wins over both
    named = trial_settings(_args("--scenario", "cloud-disk", "--volume", "aws-gp3")).cassandra
    assert named.volume["read_iops"] == 3000
    capped = trial_settings(_args("--scenario", "cloud-disk", "--disk-iops", "500")).cassandra
    assert capped.volume["read_mbps"] == 42 and capped.volume["read_iops"] == 500
    # cloud-slo's volume waits 1 ms per I/O (a network volume's round trip); the flag wins, 0 for none
    waits = trial_settings(_args("--scenario", "cloud-slo")).cassandra
    assert waits.volume["latency_ms"] == 1.0 and waits.volume["read_iops"] == 1000
    assert trial_settings(_args("--scenario", "cloud-slo", "--disk-latency-ms", "2.5")).cassandra.volume[
        "latency_ms"] == 2.5
    none = trial_settings(_args("--scenario", "cloud-slo", "--disk-latency-ms", "0")).cassandra
    assert "latency_ms" not in none.volume
    assert "latency_ms" not in settings.cassandra.volume   # cloud-disk's throughput is set by the cap: no wait
    slo = scenario("cloud-slo")
    assert slo.rate_fraction == 0.92 and slo.objective == "p99-read" and slo.volume == "aws-gp3"
    assert trial_settings(_args()).cassandra.volume is None
    listed = scenario("cloud-disk").describe()["sets"]
    assert listed["volume"] == "aws-gp3, iops 1000, mbps 42"
    # the cloud scenarios start each node's page cache warm (a node long in service); disk-bound starts cold
    assert settings.cassandra.warm_page_cache
    assert trial_settings(_args("--scenario", "cloud-slo")).cassandra.warm_page_cache
    assert listed["memory"]["warm"] is True
    assert not trial_settings(_args("--scenario", "disk-bound")).cassandra.warm_page_cache
    cold = trial_settings(_args("--scenario", "cloud-disk", "--page-cache-start", "cold"))
    assert not cold.cassandra.warm_page_cache
    assert trial_settings(_args("--scenario", "disk-bound", "--page-cache-start", "warm")).cassandra.warm_page_cache


def test_a_warm_start_needs_a_page_cache_cap_and_a_boolean(capsys):
    from nosqltune.cli import main

    assert main(["bench", "--page-cache-start", "warm"]) == 2   # in-memory: the data is in memory anyway
    err = capsys.readouterr().err.strip()
    assert "--page-cache-start goes with a page cache cap" in err and err.count("\n") == 0, err
    with pytest.raises(ValueError, match="memory's warm is true or false"):
        _parse("x", {"summary": "s", "why": "w", "memory": {"page_cache_mb": 8, "warm": "yes"}})
    with pytest.raises(ValueError, match="memory takes offheap_mb, page_cache_mb and warm"):
        _parse("x", {"summary": "s", "why": "w", "memory": {"page_cache_mb": 8, "hot": True}})
    for volume, words in (({"preset": "aws-gp3", "latency_ms": -1}, "volume's latency_ms -1: give milliseconds"),
                          ({"preset": "aws-gp3", "latency_ms": "1"}, "volume's latency_ms 1: give milliseconds"),
                          ({"preset": "aws-gp3", "iops": True}, "volume takes preset, positive whole iops"),
                          ({"preset": "aws-gp3", "wait": 1}, "volume takes preset, positive whole iops"),
                          ({"latency_ms": 1}, "volume names its preset")):
        with pytest.raises(ValueError, match=words):
            _parse("x", {"summary": "s", "why": "w", "volume": volume})


def test_a_volume_without_its_machinery_is_one_line_exit_3_and_bad_input_exit_2(monkeypatch, capsys):
    from nosqltune.cli import main
    from nosqltune.runtime import blkio, volume

    monkeypatch.setattr(volume, "usable", lambda: None)
    monkeypatch.setattr(blkio, "usable", lambda: "no block I/O controller here: neither cgroup v1's x nor v2's y")
    assert main(["bench", "--disk-iops", "300"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "a volume per node cannot be made here: no block I/O controller" in err
    monkeypatch.setattr(volume, "usable", lambda: "a volume per node needs root (loop devices, mounts)")
    assert main(["bench", "--scenario", "cloud-disk"]) == 3
    assert "needs root" in capsys.readouterr().err
    for argv, words in ((["--disk-mbps", "0"], "--disk-mbps 0"), (["--volume", "ebs-io9"], "unknown volume"),
                        (["--system", "redis", "--volume", "aws-gp3"], "for Cassandra's nodes"),
                        (["--disk-iops", "100", "--restore", "reload"], "--restore reload with a volume"),
                        (["--set", "read_ahead_kb=64"], "read_ahead_kb sets the node's own volume"),
                        (["--disk-latency-ms", "1"], "--disk-latency-ms is the wait of a node's own volume"),
                        (["--volume", "aws-gp3", "--disk-latency-ms", "-1"], "--disk-latency-ms -1.0: give")):
        assert main(["bench", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert words in err and err.count("\n") == 0, err


def test_every_scenario_names_a_5_0_knob_set_and_a_screening_of_real_knobs():
    full = load_space("cassandra")
    for found in scenarios().values():
        assert found.knob_set in full.knob_sets, found.name
        screening = found.screening
        assert screening["limited_by"] and screening["measured"].startswith("bench/results/"), found.name
        assert set(screening["moves"]) <= set(full.knobs), found.name
        assert screening.get("otherwise") in (None, *scenarios()), found.name
    # where a volume's cap binds the cloud set; elsewhere v5
    assert {s.name: s.knob_set for s in scenarios().values() if s.knob_set == "cloud"} == \
        {"cloud-disk": "cloud", "cloud-slo": "cloud"}


def test_tune_without_knobs_searches_the_scenarios_5_0_set_and_says_what_limits_its_default(monkeypatch, tmp_path,
                                                                                           capsys):
    """The default path: no irace23 (3.x papers' knobs, num_tokens among them); at its start tune prints the
    scenario's stored screening: the limit, the knobs that moved it, and where to go when nothing here moves."""
    from nosqltune.cli.tune import _new_run
    from nosqltune.tuning.loop import TuningLoop
    from nosqltune.tuning.workers import search_space

    for argv, expected in ((["tune"], "v5"), (["tune", "--scenario", "cloud-disk"], "cloud"),
                           (["tune", "--scenario", "write-heavy"], "v5")):
        args = build_parser().parse_args(argv)
        settings = trial_settings(args, surrogate=True)
        subset = _new_run(args, search_space(settings, None), settings)[3]
        assert subset.label.split()[0] == expected, argv
        assert "num_tokens" not in subset.knobs

    class Stop(Exception):
        pass

    def stop(self):
        raise Stop

    monkeypatch.setattr(TuningLoop, "run", stop)
    capsys.readouterr()
    with pytest.raises(Stop):
        main(["tune", "--study", str(tmp_path / "s.db"), "--budget", "3"])
    err = capsys.readouterr().err
    assert "scenario in-memory: the default was limited by the node's cores" in err
    assert "knobs that moved it in the screening: disk_access_mode, memtable, heap_size" in err
    assert "when nothing here moves your objective: --scenario cloud-disk" in err
    with pytest.raises(Stop):
        main(["tune", "--study", str(tmp_path / "c.db"), "--scenario", "cloud-disk", "--budget", "3",
              "--knobs", "v5"])
    err = capsys.readouterr().err
    assert "the volume's IOPS cap" in err and "read_ahead_kb" in err and "not in v5" in err
