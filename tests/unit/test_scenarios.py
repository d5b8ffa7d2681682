"""Scenarios as data: what each sets, and how a command's flags win over them."""

import pytest

from nosqltune.cli import build_parser, main
from nosqltune.cli.options import _build_workload, _overrides, _settings
from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.scenarios import scenario, scenarios


def _args(*argv):
    return build_parser().parse_args(["bench", *argv])


def test_the_four_scenarios_and_what_makes_each():
    assert list(scenarios()) == ["in-memory", "disk-bound", "write-heavy", "latency-slo"]
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
    workload, settings = _build_workload(_args()), _settings(_args())
    assert (workload.name, workload.records, workload.operations, workload.max_seconds) == ("ycsb-a", 100_000,
                                                                                            100_000, None)
    assert settings.scenario == "in-memory" and settings.memory_limit_mb() is None and settings.heap_mb == 2048


def test_a_scenario_gives_defaults_and_every_flag_wins():
    args = _args("--scenario", "disk-bound")
    workload, settings = _build_workload(args), _settings(args)
    assert (workload.name, workload.mix["requestdistribution"], workload.records) == ("ycsb-b-uniform", "uniform",
                                                                                       2_000_000)
    assert settings.heap_mb == 1024 and settings.memory_limit_mb() == 1024 + 768 + 256
    args = _args("--scenario", "disk-bound", "--workload", "ycsb-a", "--records", "5000", "--heap", "2G")
    workload, settings = _build_workload(args), _settings(args)
    # the user's mix brings its own key choice; sizes and heap are the flags'; the memory cap stays
    assert (workload.name, workload.records, workload.operations) == ("ycsb-a", 5000, 60_000)
    assert settings.heap_mb == 2048 and settings.memory_limit_mb() == 2048 + 768 + 256


def test_scenario_knobs_are_fixed_values_under_set_and_left_to_a_search():
    space = load_space("cassandra")
    assert _overrides(_args("--scenario", "write-heavy"), space) == {"memtable_heap_space": 32}   # below the range
    assert _overrides(_args("--scenario", "write-heavy", "--set", "memtable_heap_space=512"), space) == \
        {"memtable_heap_space": 512}
    assert _overrides(_args("--scenario", "write-heavy"), space, searched={"memtable_heap_space"}) == {}


def test_scenarios_command_lists_what_each_sets(capsys):
    assert main(["scenarios", "--json"]) == 0
    import json

    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert listed["disk-bound"]["sets"]["memory"] == {"offheap_mb": 768, "page_cache_mb": 256}
    assert listed["latency-slo"]["sets"]["rate_fraction"] == 0.6 and listed["latency-slo"]["why"]
    assert main(["scenarios", "write-heavy"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("write-heavy:") and "memtable_heap_space: 32" in out
