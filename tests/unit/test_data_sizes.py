"""`tune --data-sizes 1,2`: every configuration runs at each multiple of the records and is ranked by its worst gain
over the default at the same size, so that a best living on a cliff (a large gain at the size where its data just
fits in memory, little at twice the data) loses to one that holds at both. The ranking on analytic values; the
search's structure on the recorded surrogate."""

from __future__ import annotations

import json
import re

import pytest

from nosqltune.cli import main
from nosqltune.objective import Objective
from nosqltune.store import open_store
from nosqltune.workloads.spec import Workload, WorkloadError, at_data_sizes


def _runs(*throughputs):
    return [{"throughput_ops_s": t, "read_p99_ms": 1000 / t} for t in throughputs]


DEFAULT = _runs(1000, 500)       # the default at x1 and x2
CLIFF = _runs(3000, 550)         # x3.0 at x1, x1.1 at x2: the geometric mean of its gains is x1.82
LEVEL = _runs(1600, 800)         # x1.6 at both sizes


def test_the_worst_gain_ranks_a_level_gain_above_a_cliff():
    mean, worst = Objective.parse("throughput"), Objective.parse("throughput", combine="worst-gain")
    assert mean.evaluate(CLIFF).value > mean.evaluate(LEVEL).value
    assert worst.evaluate(LEVEL, DEFAULT).value > worst.evaluate(CLIFF, DEFAULT).value
    # in the metric's unit: the default's own value is its geometric mean, a gain multiplies it
    base = (1000 * 500) ** 0.5
    assert worst.evaluate(DEFAULT, DEFAULT).value == pytest.approx(base)
    assert worst.evaluate(LEVEL, DEFAULT).value == pytest.approx(1.6 * base)
    assert worst.evaluate(CLIFF, DEFAULT).value == pytest.approx(1.1 * base)


def test_a_studys_stored_trials_are_ranked_by_their_worst_gain():
    """The ranking `best` and the report read from the store (tuning.results.configurations): each configuration's
    gains are against the default's runs at the same size, so the level configuration ranks above the cliff."""
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.tuning.results import configurations

    space = TuningSpace(load_space("cassandra").subset("rafiki5"))
    default = space.default()
    configs = {"default": default, "cliff": {**default, "concurrent_writes": 64},
               "level": {**default, "concurrent_writes": 96}}
    runs = {"default": DEFAULT, "cliff": CLIFF, "level": LEVEL}
    rows = [{"id": len(configs) * i + j, "config": configs[name], "state": "COMPLETE", "failure_kind": None,
             "meta": {"instance": size}, "metrics": {"summary": runs[name][j]}}
            for i, name in enumerate(configs) for j, size in enumerate(("w", "w-data2"))]
    objective = Objective.parse("throughput", combine="worst-gain")
    got = {c["config"]["concurrent_writes"]: c["value"] for c in configurations(rows, objective, ["w", "w-data2"],
                                                                                 space)}
    base = (1000 * 500) ** 0.5
    assert got[64] == pytest.approx(1.1 * base) and got[96] == pytest.approx(1.6 * base)
    assert got[default["concurrent_writes"]] == pytest.approx(base)


def test_the_worst_gain_of_a_latency_is_its_least_cut():
    worst = Objective.parse("p99-read", combine="worst-gain")
    cliff, level = worst.evaluate(CLIFF, DEFAULT).value, worst.evaluate(LEVEL, DEFAULT).value
    assert level < cliff          # lower is better: the level cut wins
    base = (1.0 * 2.0) ** 0.5     # the default's p99s: 1 ms and 2 ms
    assert level == pytest.approx(base / 1.6)


def test_without_the_defaults_runs_the_geometric_mean_stands_in():
    worst = Objective.parse("throughput", combine="worst-gain")
    assert worst.evaluate(LEVEL).value == pytest.approx(Objective.parse("throughput").evaluate(LEVEL).value)
    assert worst.evaluate(LEVEL, [DEFAULT[0], None]).value == pytest.approx((1600 * 800) ** 0.5)


def test_the_combination_is_stored_with_the_objective():
    stored = Objective.parse("throughput", ["p99-read<=5"], "worst-gain").to_dict()
    assert Objective.from_dict(stored).combine == "worst-gain"
    assert "combine" not in Objective.parse("throughput").to_dict()   # studies stored before keep their form
    with pytest.raises(Exception, match="worst-gain"):
        Objective.parse("throughput", combine="median")


def test_sizes_multiply_the_records_and_hold_the_rest():
    w = Workload(name="ycsb-b", mix={"readproportion": 0.95}, records=1000, operations=500)
    small, large = at_data_sizes([w], (2, 1))
    assert (small.name, small.records) == ("ycsb-b", 1000)
    assert (large.name, large.records, large.operations) == ("ycsb-b-data2", 2000, 500)
    for bad in ((), (1, 1), (0, 2), (-1,)):
        with pytest.raises(WorkloadError):
            at_data_sizes([w], bad)


@pytest.fixture()
def surrogate(monkeypatch, surrogate_cache):
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))


SEARCH = ["tune", "--system", "surrogate:cloud13", "--read-ratio", "0.95", "--distribution", "uniform",
          "--optimizer", "random", "--seed", "1"]


def test_a_search_runs_every_configuration_at_each_size(surrogate, tmp_path, capsys):
    path = tmp_path / "s.db"
    assert main([*SEARCH, "--budget", "12", "--data-sizes", "1,2", "--study", str(path), "--json"]) == 0
    said = capsys.readouterr().err   # what the sizes cost, before the first trial: trials per configuration
    assert "every configuration runs at each size" in said, said[-2000:]
    cost = re.search(r"the search's (\d+) trials are (\d+) configurations", said)
    assert cost and int(cost[1]) == 2 * int(cost[2]), said[-2000:]
    store = open_store(str(path))
    try:
        record = store.find_study("tune")["settings"]["tune"]
        rows = [r for r in store.trials() if r["tag"] != "compare" and r["state"] == "COMPLETE"]
    finally:
        store.close()
    assert record["spec"]["objective"]["combine"] == "worst-gain"
    sizes = {w["name"]: w["records"] for w in record["workloads"]}
    assert len(sizes) == 2 and sorted(sizes.values())[1] == 2 * sorted(sizes.values())[0]
    by_config: dict = {}
    for row in rows:
        by_config.setdefault(json.dumps(row["config"], sort_keys=True), set()).add(row["meta"]["instance"])
    assert by_config and all(v == set(sizes) for v in by_config.values())
    assert main(["best", "--study", str(path), "--format", "json"]) == 0
    assert "worst of its gains" in json.loads(capsys.readouterr().out)["objective"]


@pytest.mark.parametrize("flags, message", [
    (["--data-sizes", "1,1"], "distinct positive multiples"),
    (["--data-sizes", "two"], "--data-sizes takes multiples"),
    (["--data-sizes", "1,2", "--no-default"], "needs the default"),
    (["--data-sizes", "1,2", "--denoise"], "give one of them"),
])
def test_bad_data_sizes_are_one_line_and_leave_no_store(surrogate, tmp_path, capsys, flags, message):
    path = tmp_path / "bad.db"
    assert main([*SEARCH, "--budget", "4", "--study", str(path), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not path.exists()
