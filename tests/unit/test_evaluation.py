"""Statistics of a comparison against known values, and the interleaving of repeated runs."""

import pytest

from nosqltune.evaluation.compare import run_interleaved, run_summary, schedule
from nosqltune.evaluation.stats import bootstrap_interval, compare, mann_whitney_p, speedups, wilcoxon_p
from nosqltune.store import open_store
from nosqltune.systems.base import TrialResult


def test_schedule_alternates_direction():
    assert schedule(["a", "b", "c"], 3) == [(0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"),
                                             (2, "a"), (2, "b"), (2, "c")]


def test_speedups_are_better_above_one_for_both_directions():
    assert speedups([110, 90, None], [100, 100, 100], maximize=True) == [1.1, 0.9]
    assert speedups([2.0, 4.0], [4.0, 2.0], maximize=False) == [2.0, 0.5]


def test_wilcoxon_exact_values():
    # six pairs, all better: the exact two-sided p is 2 / 2^6
    assert wilcoxon_p([11, 12, 13, 14, 15, 16], [10, 10, 10, 10, 10, 10]) == pytest.approx(0.03125)
    # ranks 1..5 with signs + - + - +: W+ = 1+3+5 = 9 of 15, two-sided exact p = 0.8125 (scipy agrees)
    assert wilcoxon_p([11, 8, 13, 6, 15], [10, 10, 10, 10, 10]) == pytest.approx(0.8125)
    assert wilcoxon_p([1, 2], [1, 2]) is None


def test_mann_whitney_exact_value():
    # complete separation of 3 vs 3: two-sided exact p = 2 / C(6, 3) = 0.1
    assert mann_whitney_p([4, 5, 6], [1, 2, 3]) == pytest.approx(0.1)


def test_bootstrap_interval_brackets_the_mean_and_collapses_without_spread():
    values = [1.0, 1.1, 0.9, 1.05, 0.95, 1.2, 0.8]
    lo, hi = bootstrap_interval(values)
    assert lo < sum(values) / len(values) < hi and 0.85 < lo and hi < 1.15
    assert bootstrap_interval([1.3, 1.3, 1.3]) == (1.3, 1.3)


def test_verdicts():
    better = compare("x", [120, 121, 119, 122, 118, 120], [100] * 6, maximize=True)
    assert better.verdict == "better" and better.mean_speedup == pytest.approx(1.2, abs=0.01)
    worse = compare("x", [80, 81, 79, 82, 78, 80], [100] * 6, maximize=True)
    assert worse.verdict == "worse"
    same = compare("x", [101, 99, 100, 102, 98], [100] * 5, maximize=True)
    assert same.verdict == "no significant difference"
    assert compare("x", [None, 100], [100, 100], maximize=True).verdict == "not enough runs"


def test_interleaved_runs_are_stored_and_resumed(tmp_path):
    store = open_store(tmp_path / "c.db")
    study = store.study("compare")
    calls = []

    def runner(overrides):
        calls.append(dict(overrides))
        if len(calls) == 4:
            raise KeyboardInterrupt
        return TrialResult("COMPLETE", summary={"throughput_ops_s": 100.0 + overrides.get("x", 0)})

    candidates = {"default": {}, "tuned": {"x": 10}}
    with pytest.raises(KeyboardInterrupt):
        run_interleaved(store, study, candidates, 3, runner, workload_info={})
    calls.clear()
    rows = run_interleaved(store, study, candidates, 3, lambda o: TrialResult(
        "COMPLETE", summary={"throughput_ops_s": 100.0 + o.get("x", 0)}), workload_info={})
    assert [r["metrics"]["summary"]["throughput_ops_s"] for r in rows["tuned"]] == [110.0] * 3
    done = [r for r in store.trials(study) if r["failure_kind"] != "interrupted"]
    assert [(r["meta"]["round"], r["meta"]["candidate"]) for r in done] == \
        [(0, "default"), (0, "tuned"), (1, "tuned"), (1, "default"), (2, "default"), (2, "tuned")]


def test_a_run_in_progress_shows_the_read_p99_a_latency_study_is_judged_by():
    assert run_summary({"throughput_ops_s": 5336.4, "read_p99_ms": 2.851}) == "5,336 ops/s, read p99 2.85 ms"
    assert run_summary({"throughput_ops_s": 7000.0}) == "7,000 ops/s"  # a write-only run has no read p99


def test_a_warmup_that_reached_no_plateau_is_counted_and_printed():
    """Two runs of three ended their warm-up at its cap (on messaging: 1.6M operations and 80 compactions behind
    them against 0.9M and 17 for the run that settled); a failed run and a run without the record count for none."""
    from nosqltune.cli.compare import _metric_lines
    from nosqltune.evaluation.compare import unsettled

    def run(steady):
        return {"metrics": {"warmup": {"steady": steady, "runtime_ms": 300000 if not steady else 137000}}}

    rows = [run(False), run(False), run(True), None, {"metrics": {}}]
    assert unsettled(rows, steady_window=20) == 2
    assert unsettled(rows, steady_window=0) is None            # a warm-up by time or count has no plateau to reach
    assert unsettled([run(True)] * 3, steady_window=20) == 0
    measured = {"values": {"default": [2238.0, 2234.0, 2222.0], "keyvalue-best": [2842.0, 3793.0, 6429.0]},
                "stats": {}, "unsettled": {"default": 0, "keyvalue-best": 2}}
    said = [line for line in _metric_lines(measured) if "plateau" in line]
    assert said == ["  keyvalue-best: 2 of 3 warm-ups reached no plateau before their time cap: those runs did more "
                    "work before measuring than the others"]
