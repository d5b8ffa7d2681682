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


def test_each_profiles_goal_comparison_runs_as_soon_as_its_search_is_confirmed(transfer):
    todo = transfer.steps("cloud-disk", 10, 3)
    names = [(s[0], s[1], [f.stem for f in s[2]], s[3]) if s[0] == "compare" else s for s in todo]
    at = names.index(("search", "timeseries"))
    assert names[at + 1] == ("compare", "timeseries", ["timeseries-best", "ycsb-b-best"], 10)
    assert names.index(("search", "messaging")) > at + 1
    # YCSB's search comes first: every profile's comparison needs its best
    assert names[0] == ("search", "ycsb-b")
    # every best meets every workload: 4 own or YCSB cells per row in 10 rounds, the rest in 3
    met = {(target, best) for s in names if s[0] == "compare" for target, best in [(s[1], b) for b in s[2]]}
    assert len(met) == 16
    few = [s for s in names if s[0] == "compare" and s[3] == 3]
    assert len(few) == 4 and {s[1] for s in few} == set(transfer.WORKLOADS)
    # the other bests' rounds run the workload's own best beside them: its 10 rounds may have run on another machine
    assert all(s[2][0] == f"{s[1]}-best" and len(s[2]) == 3 + (s[1] == "ycsb-b") for s in few)


def test_the_plan_counts_the_runs_its_steps_make(transfer):
    # each compare runs the default beside its bests in every round: 4 rows' close cells (3 of them with YCSB's
    # best) in 10 rounds, 4 rows' other bests with their own best in 3
    assert transfer.matrix_runs(60, 10, 3) == (240, 10 * (3 * 3 + 2) + 3 * (4 + 4 + 4 + 5))


def _measured(values: dict[str, list[float]]) -> dict:
    default = values["default"]
    stats = {name: {"mean_speedup": sum(v / d for v, d in zip(runs, default)) / len(runs), "p_value": 0.25}
             for name, runs in values.items() if name != "default"}
    return {"workloads": {"profile-timeseries": {"stats": stats, "values": values}}}


@pytest.mark.parametrize("stored_first", [True, False])
def test_a_three_round_cell_is_judged_against_the_own_best_of_its_own_rounds(transfer, monkeypatch, stored_first):
    """The own best's 10 rounds ran on a machine 1.7 times slower: against them the messaging best would seem x1.5
    of it; beside it in the same 3 rounds it is x0.8 and does not transfer. A comparison of the same 3 rounds
    without the own best (stored by an older bench) does not decide, in either order."""
    row = _measured({"default": [3000.0] * 10, "timeseries-best": [6000.0] * 10, "ycsb-b-best": [4000.0] * 10})
    without = _measured({"default": [5000.0] * 3, "messaging-best": [15000.0] * 3, "keyvalue-best": [9000.0] * 3})
    beside = _measured({"default": [5000.0] * 3, "timeseries-best": [18000.0, 19000.0, 20000.0],
                        "messaging-best": [15000.0, 15200.0, 15400.0], "keyvalue-best": [9000.0] * 3})
    stored = {"row": row, **({"old": without, "new": beside} if stored_first else {"new": beside, "old": without})}
    monkeypatch.setattr(transfer, "study_settings",
                        lambda db, name: {"compare": stored} if name == "timeseries" else None)
    cells = transfer.cells("cloud-disk")["timeseries"]
    assert cells["timeseries"]["rounds"] == 10                       # the own cell: its 10 rounds
    messaging = cells["messaging"]
    assert messaging["rounds"] == 3 and messaging["vs_own"]["rounds"] == 3
    assert messaging["vs_own"]["mean_ratio"] == pytest.approx((15000 / 18000 + 15200 / 19000 + 15400 / 20000) / 3)
    assert messaging["transfers"] is False
    assert cells["ycsb-b"]["vs_own"]["mean_ratio"] == pytest.approx(4000 / 6000)


def test_a_cell_says_how_many_of_its_warmups_reached_no_plateau(transfer, monkeypatch):
    beside = _measured({"default": [2238.0, 2234.0, 2222.0], "messaging-best": [6309.0, 6079.0, 6578.0],
                        "keyvalue-best": [2842.0, 3793.0, 6429.0]})
    beside["workloads"]["profile-timeseries"]["unsettled"] = {"default": 0, "messaging-best": 0, "keyvalue-best": 2}
    monkeypatch.setattr(transfer, "study_settings",
                        lambda db, name: {"compare": {"new": beside}} if name == "timeseries" else None)
    cells = transfer.cells("cloud-disk")["timeseries"]
    assert "2 of 3 warm-ups reached no plateau" in transfer._cell_text(cells["keyvalue"], own=False)
    assert "plateau" not in transfer._cell_text(cells["messaging"], own=False)


def test_every_comparison_of_the_matrix_runs_at_the_tiered_jit(transfer, monkeypatch):
    calls = []
    monkeypatch.setattr(transfer, "search", lambda *a: calls.append(("search", a[1])))
    monkeypatch.setattr(transfer, "compare", lambda *args: calls.append(("compare", args)))
    monkeypatch.setattr(transfer, "checkpoint", lambda db: None)
    monkeypatch.setattr(transfer.Path, "mkdir", lambda self, **kw: None)   # run() makes its folders: none here
    transfer.run(["cloud-disk"], 60, 10, 3)
    compares = [args for kind, args in calls if kind == "compare"]
    assert len(compares) == len([s for s in transfer.steps("cloud-disk", 10, 3) if s[0] == "compare"])
    for args in compares:
        at = args.index("--jit")
        assert args[at + 1] == "tiered"
    assert [c[1] for c in calls if c[0] == "search"] == list(transfer.WORKLOADS)


def test_the_plan_takes_this_benchs_own_times_once_it_has_stored_trials(transfer, monkeypatch):
    said = []
    monkeypatch.setattr(transfer, "log", said.append)
    theirs = [_trial(100), _trial(100)] + [dict(_trial(50), tag="compare")]
    mine = [_trial(60), _trial(80), dict(_trial(200), tag="compare"), dict(_trial(30), state="FAIL")]

    def rows(db, name):
        if db == transfer.MEASURED["cloud-disk"][0]:
            return theirs
        return mine if (db, name) == (transfer.db_of("cloud-disk"), "ycsb-b") else []

    monkeypatch.setattr(transfer, "study_rows", rows)
    transfer.plan(["cloud-disk"], 60, 10, 3)
    searches, compared = transfer.matrix_runs(60, 10, 3)
    confirms = (transfer.tune_budget(60) - 60) * len(transfer.WORKLOADS)
    hours = (searches * 70 + (confirms + compared * 1.2) * 200) / 3600   # own means: 70 s a trial, 200 s tiered
    assert f"about {hours:.1f} machine hours, {(60 + 80 + 200 + 30) / 3600:.1f} spent" in said[0]
    assert "this bench's own: 2 search trials, 1 tiered runs" in said[0]



def _store(path, finished: int, failure_kind=None):
    import sqlite3

    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS trials (id INTEGER PRIMARY KEY, finished_at REAL, failure_kind TEXT)")
        conn.executemany("INSERT INTO trials (finished_at, failure_kind) VALUES (?, ?)",
                         [(1.0, failure_kind)] * finished)
        conn.execute("INSERT INTO trials (finished_at) VALUES (NULL)")   # a trial under way counts none


def test_a_deadline_stops_after_the_first_trial_that_finishes_past_it_not_before(bench_script, tmp_path):
    import subprocess
    import time

    common = bench_script("common")
    db = tmp_path / "a store.db"   # a path a URI must escape
    _store(db, 3)
    running = common.RUNNING[0] = subprocess.Popen(["sleep", "30"])
    try:
        watch = common.Deadline(time.time() - 1, lambda: [db, tmp_path / "missing.db"], poll_s=0.05).start()
        assert watch.armed.wait(5.0)
        # no trial finished since the deadline: no stop; nor when a resumed command marks a cut trial interrupted
        _store(db, 1, failure_kind="interrupted")
        assert not common.STOPPED.wait(0.4)
        assert running.poll() is None
        _store(db, 1)   # the first past it: the running command is stopped as a stop from outside stops it
        assert common.STOPPED.wait(5.0)
        assert running.wait(5.0) == -15
    finally:
        running.kill()
        running.wait()


def test_a_deadline_waits_for_its_time(bench_script, tmp_path):
    import time

    common = bench_script("common")
    _store(tmp_path / "s.db", 1)
    watch = common.Deadline(time.time() + 60, lambda: [tmp_path / "s.db"], poll_s=0.05, stop=lambda: None).start()
    _store(tmp_path / "s.db", 2)
    assert not watch.armed.wait(0.3) and not common.STOPPED.is_set()


def test_a_stopped_bench_starts_no_further_command_and_ends_quietly(bench_script):
    common = bench_script("common")
    common.STOPPED.set()
    with pytest.raises(SystemExit, match="the same command resumes"):
        common.nosqltune("--version")
    common.until(None, list, lambda: common.nosqltune("--version"))   # the deadline's stop: no error
    common.STOPPED.clear()

    def fails():
        raise SystemExit("failed (1): nosqltune tune")

    with pytest.raises(SystemExit, match="failed"):   # any other end is the bench's own
        common.until(None, list, fails)


def test_a_deadline_is_the_next_time_of_that_clock_and_a_bad_one_is_refused(bench_script):
    import argparse
    import datetime

    common = bench_script("common")
    noon = datetime.datetime(2026, 11, 30, 12, 0).timestamp()
    assert common.deadline_time("13:30", now=noon) - noon == 5400
    assert common.deadline_time("11:00", now=noon) - noon == 23 * 3600
    parser = argparse.ArgumentParser()
    common.stop_at_option(parser)
    assert parser.parse_args([]).stop_at is None
    with pytest.raises(SystemExit) as refused:   # argparse's error: exit 2 with the reason
        parser.parse_args(["--stop-at", "25:00"])
    assert refused.value.code == 2


def test_the_picture_colours_each_cell_by_its_ratio_to_the_own_best(transfer, monkeypatch, tmp_path):
    import matplotlib.image

    monkeypatch.setattr(transfer, "FOLDER", tmp_path)
    found = {"timeseries": {"timeseries": {"vs_default": {"mean_speedup": 2.0}},
                            "ycsb-b": {"vs_default": {"mean_speedup": 1.3}, "vs_own": {"mean_ratio": 0.65}}},
             "ycsb-b": {"ycsb-b": {"vs_default": {"mean_speedup": 2.4}}}}
    path = transfer.picture("cloud-disk", found)
    assert path == tmp_path / "matrix-cloud-disk.png" and matplotlib.image.imread(path).shape[2] == 4
    assert transfer.picture("cloud-disk", {}) is None                 # nothing measured: no picture
