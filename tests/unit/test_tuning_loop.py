"""The tuning loop: storing, failures, budgets, objectives with constraints, and resume (including after a
real SIGKILL of the tuning process). Trials are analytic here; real-Cassandra runs are in integration."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nosqltune.knobs.space import TuningSpace
from nosqltune.store import open_store
from nosqltune.tuning.loop import Outcome, TuneSpec, TuningLoop
from nosqltune.objective import Constraint, Objective, geometric_mean, metric_value

from . import analytic

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def space():
    return TuningSpace(analytic.space())


def make_loop(space, tmp_path, runner, *, optimizer="random", budget=10, store=None, **spec_args):
    store = store or open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer=optimizer, workloads=spec_args.pop("workloads", ["w"]), budget=budget,
                    objective=spec_args.pop("objective", {"metric": "throughput", "constraints": []}), **spec_args)
    return TuningLoop(store, study, spec, space, runner, workdir=tmp_path / optimizer), store, study


def test_every_trial_is_stored_and_the_default_comes_first(space, tmp_path):
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=7)
    assert loop.run() == "budget"
    rows = store.trials(study)
    assert len(rows) == 7 and all(r["state"] == "COMPLETE" for r in rows)
    assert rows[0]["meta"]["kind"] == "default" and rows[0]["config"] == space.default()
    assert [r["meta"]["suggestion"] for r in rows] == list(range(7))
    assert all("cost" in r["meta"] for r in rows)
    assert loop.best.evaluation.value == max(r["metrics"]["summary"]["throughput_ops_s"] for r in rows)


def test_no_default_when_asked(space, tmp_path):
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=5, include_default=False)
    loop.run()
    assert all(r["meta"]["kind"] == "suggested" for r in store.trials(study))


def test_failed_trials_get_the_worst_value_and_the_study_goes_on(space, tmp_path):
    def runner(config, workload):
        if config["threads"] > 40:
            return Outcome("FAIL", failure_kind="refused", error="Cassandra refused the configuration")
        return analytic.runner(config, workload)

    loop, store, study = make_loop(space, tmp_path, runner, budget=30, seed=3)
    loop.run()
    rows = store.trials(study)
    failed = [r for r in rows if r["state"] == "FAIL"]
    ok = [r for r in rows if r["state"] == "COMPLETE"]
    assert failed and len(rows) == 30
    worst_before = {}
    for r in rows:  # each failure was told the worst throughput measured before it
        if r["state"] == "FAIL":
            assert r["meta"]["cost"] == -min(worst_before.values()) if worst_before else r["meta"]["cost"] == 0.0
        else:
            worst_before[r["id"]] = r["metrics"]["summary"]["throughput_ops_s"]
    assert loop.best.config["threads"] <= 40
    assert loop.best.evaluation.value == max(r["metrics"]["summary"]["throughput_ops_s"] for r in ok)


def test_several_workloads_are_aggregated_by_geometric_mean(space, tmp_path):
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=6, workloads=["w", "second"])
    loop.run()
    rows = store.trials(study)
    assert len(rows) == 6 and [r["meta"]["instance"] for r in rows[:2]] == ["w", "second"]
    first = rows[:2]
    values = [r["metrics"]["summary"]["throughput_ops_s"] for r in first]
    assert loop.points[0].evaluation.value == pytest.approx(math.sqrt(values[0] * values[1]))


def test_budget_not_split_across_a_suggestion(space, tmp_path):
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=5, workloads=["w", "second"])
    assert loop.run() == "budget"
    assert len(store.trials(study)) == 4  # a third configuration would need 2 trials; 1 was left


def test_constraint_keeps_infeasible_configurations_out_of_best(space, tmp_path):
    objective = {"metric": "throughput", "constraints": ["p99-read<=40"]}  # read_p99_ms = 1e5 / throughput
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=25, objective=objective, seed=2)
    loop.run()
    feasible = [r for r in store.trials(study) if r["metrics"]["summary"]["read_p99_ms"] <= 40]
    infeasible = [r for r in store.trials(study) if r["metrics"]["summary"]["read_p99_ms"] > 40]
    assert feasible and infeasible
    assert loop.best.evaluation.value == max(r["metrics"]["summary"]["throughput_ops_s"] for r in feasible)
    for r in infeasible:  # penalized below anything measured
        assert -r["meta"]["cost"] < r["metrics"]["summary"]["throughput_ops_s"]


def test_latency_objective_is_minimized(space, tmp_path):
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=12, objective={"metric": "p99-read",
                                                                                            "constraints": []})
    loop.run()
    p99 = [r["metrics"]["summary"]["read_p99_ms"] for r in store.trials(study)]
    assert loop.best.evaluation.value == min(p99)
    assert all(r["meta"]["cost"] > 0 for r in store.trials(study))


def test_patience_stops_when_the_best_stops_changing(space, tmp_path):
    loop, store, study = make_loop(space, tmp_path, analytic.runner, budget=200, patience=5, seed=1)
    assert loop.run() == "converged"
    assert len(store.trials(study)) < 200


def test_time_budget(space, tmp_path):
    def slow(config, workload):
        time.sleep(0.05)
        return analytic.runner(config, workload)

    loop, store, study = make_loop(space, tmp_path, slow, budget=1000, max_seconds=0.5)
    assert loop.run() == "time"
    assert 5 <= len(store.trials(study)) <= 15


@pytest.mark.parametrize("optimizer", ["random", "gp", "smac", "irace"])
def test_resume_after_interrupt_repeats_and_loses_nothing(space, tmp_path, optimizer):
    from .test_optimizers import has_irace

    if optimizer == "irace" and not has_irace():
        pytest.skip("irace not installed")
    budget = 40 if optimizer == "irace" else 12
    options = {"candidates": 300} if optimizer == "gp" else {}
    reference, store, study = make_loop(space, tmp_path, analytic.runner, optimizer=optimizer, budget=budget,
                                        options=options)
    reference.run()
    expected = [(r["config"], r["meta"]["instance"]) for r in store.trials(study)]

    calls = []

    def interrupted(config, workload):
        calls.append(config)
        if len(calls) == 7:
            raise KeyboardInterrupt
        return analytic.runner(config, workload)

    first, store2, study2 = make_loop(space, tmp_path, interrupted, optimizer=optimizer, budget=budget,
                                      options=options)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    rows = store2.trials(study2)
    assert len(rows) == 7 and rows[-1]["failure_kind"] == "interrupted"
    calls.clear()
    again, _, _ = make_loop(space, tmp_path, lambda c, w: (calls.append(c), analytic.runner(c, w))[1],
                            optimizer=optimizer, budget=budget, store=store2, options=options)
    again.run()
    done = [(r["config"], r["meta"]["instance"]) for r in store2.trials(study2) if r["failure_kind"] != "interrupted"]
    assert done == expected
    assert len(calls) == len(expected) - 6  # only what was not finished before ran again


CHILD = """
import sys, time
sys.path[:0] = [{src!r}, {root!r}]
from pathlib import Path
from nosqltune.knobs.space import TuningSpace
from nosqltune.store import open_store
from nosqltune.tuning.loop import TuneSpec, TuningLoop
from tests.unit import analytic

def slow(config, workload):
    time.sleep(0.3)
    return analytic.runner(config, workload)

store = open_store({db!r})
study = store.study("t")
spec = TuneSpec(optimizer="smac", workloads=["w"], budget=14, objective={{"metric": "throughput", "constraints": []}})
TuningLoop(store, study, spec, TuningSpace(analytic.space()), slow, workdir=Path({work!r})).run()
"""


# as `nosqltune tune` runs itself (cli.main): SMAC's suggestions depend on the process's string hashing
ENV = {**os.environ, "PYTHONHASHSEED": "0"}


def test_resume_after_sigkill(tmp_path):
    """Kill the tuning process with SIGKILL in the middle of a trial; the next run finishes the study with
    the same trials as an uninterrupted one, none lost or repeated."""
    def child(db: Path):
        code = CHILD.format(src=str(ROOT / "src"), root=str(ROOT), db=str(db), work=str(tmp_path / "w"))
        return subprocess.Popen([sys.executable, "-c", code], env=ENV)

    subprocess.run([sys.executable, "-c", CHILD.format(src=str(ROOT / "src"), root=str(ROOT),
                                                       db=str(tmp_path / "ref.db"), work=str(tmp_path / "w"))],
                   check=True, timeout=300, env=ENV)
    store = open_store(tmp_path / "ref.db")
    expected = [r["config"] for r in store.trials()]
    store.close()

    db = tmp_path / "killed.db"
    proc = child(db)
    deadline = time.time() + 240
    while time.time() < deadline:
        time.sleep(0.1)
        if db.exists():
            store = open_store(db)
            rows = store.trials()
            store.close()
            if len(rows) >= 6 and rows[-1]["state"] == "RUNNING":
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = open_store(db)
    assert store.trials()[-1]["state"] == "RUNNING"
    store.close()
    assert child(db).wait(timeout=300) == 0
    store = open_store(db)
    rows = store.trials()
    store.close()
    assert [r["config"] for r in rows if r["failure_kind"] != "interrupted"] == expected
    assert sum(r["failure_kind"] == "interrupted" for r in rows) == 1


# ---------------------------------------------------------------------------------------- objectives

def test_metric_values_from_a_summary():
    summary = {"throughput_ops_s": 5000.0, "read_p99_ms": 4.0, "update_p99_ms": 6.0, "cleanup_p99_ms": 90.0,
               "all_avg_ms": 1.5, "read_avg_ms": 1.0}
    assert metric_value("throughput", summary) == 5000.0
    assert metric_value("p99-read", summary) == 4.0
    assert metric_value("p99-all", summary) == 6.0  # the worst operation type, CLEANUP excluded
    assert metric_value("avg-all", summary) == 1.5
    assert metric_value("p95-scan", summary) is None


def test_objective_parsing_and_errors():
    assert Objective.parse("P99-Read").metric == "p99-read"
    assert not Objective.parse("p99-read").maximize and Objective.parse("throughput").maximize
    assert Constraint.parse("p99-read <= 5") == Constraint("p99-read", "<=", 5.0)
    assert Constraint.parse("throughput>=3e3").limit == 3000.0
    for bad in ("p99-read", "p99-read<5", "p42-read<=5", "latency<=3"):
        with pytest.raises(Exception) as info:
            Constraint.parse(bad)
        assert getattr(info.value, "exit_code", None) == 2
    with pytest.raises(Exception):
        Objective.parse("p100")


def test_costs_of_failed_and_infeasible_configurations():
    up = Objective.parse("throughput", ["p99-read<=10"])
    ok = up.evaluate([{"throughput_ops_s": 100.0, "read_p99_ms": 5.0}])
    assert ok.feasible and up.cost(ok, worst=50.0) == -100.0
    bad = up.evaluate([{"throughput_ops_s": 300.0, "read_p99_ms": 20.0}])
    assert not bad.feasible and bad.violation == pytest.approx(1.0)
    assert up.cost(bad, worst=50.0) == pytest.approx(-25.0)  # worst / (1 + violation)
    failed = up.evaluate([None])
    assert up.cost(failed, worst=50.0) == -50.0 and up.cost(failed, worst=None) == 0.0
    down = Objective.parse("p99-read")
    assert down.cost(down.evaluate([None]), worst=8.0) == 8.0
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
