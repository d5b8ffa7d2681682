"""bench/transfer.py's machine-time plan counts only trials of the settings its searches can reach."""

from __future__ import annotations

import pytest


@pytest.fixture()
def transfer(bench_script):
    return bench_script("transfer")


def _trial(seconds: float, **config) -> dict:
    return {"config": config, "timings": {"total_s": seconds}, "tag": "tune", "state": "COMPLETE"}


def test_the_plan_leaves_out_trials_that_set_a_knob_the_search_leaves_out(transfer):
    rows = [_trial(100, compaction_method="SizeTiered", heap=1024),      # the study's first trial: the default
            _trial(420, compaction_method="Leveled", heap=1024),
            _trial(90, compaction_method="SizeTiered", heap=2048),
            _trial(380, compaction_method="UnifiedCompaction", heap=512)]
    kept = transfer.reachable(rows, ["compaction_method"])
    assert [r["timings"]["total_s"] for r in kept] == [100, 90]
    assert transfer.reachable(rows, []) == rows


def test_the_disk_bound_searches_leave_out_the_compaction_strategy_and_the_cloud_set_nothing(transfer):
    assert set(transfer.left_out("disk-bound")) == {"compaction_method", "ucs_scaling_parameters"}
    assert transfer.left_out("cloud-disk") == []


def test_a_search_of_60_trials_asks_tune_for_60_plus_its_confirmation(transfer):
    from nosqltune.evaluation.confirmation import CONFIRM_ROUNDS, CONFIRM_TOP, confirm_plan

    budget = transfer.tune_budget(60)
    assert confirm_plan(budget, 1, CONFIRM_TOP, CONFIRM_ROUNDS)["search_budget"] == 60
