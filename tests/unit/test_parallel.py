"""Several trials at once: optimizers asked for a batch before results come back; the parallel loop (the store as
the queue, workers in threads) that tells results in suggestion order, so that it replays exactly on resume; a
worker that dies mid-trial (its trial goes stale and is given again once, nothing lost or counted twice); the
command line on the recorded surrogate. Trials are analytic or the surrogate here; Ray is in integration."""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from nosqltune.knobs.space import TuningSpace
from nosqltune.optimizers import make_optimizer
from nosqltune.store import TrialState, open_store
from nosqltune.tuning.executors import LocalExecutor
from nosqltune.tuning.loop import TuneSpec
from nosqltune.tuning.parallel import ParallelLoop

from . import analytic


@pytest.fixture(scope="module")
def space():
    return TuningSpace(analytic.space())


@pytest.mark.parametrize("name, options", [("random", {}), ("gp", {"initial": 3}), ("smac", {"initial": 3}),
                                           ("surrogate-sa", {"initial": 3}),
                                           ("gp", {"initial": 3, "space_adapter": "llamatune",
                                                   "llamatune_dims": 3})])
def test_a_batch_of_pending_suggestions_holds_no_configuration_twice(space, tmp_path, name, options):
    optimizer = make_optimizer(name, space, seed=3, budget=40, workloads=["w"], workdir=tmp_path,
                               options=options)
    try:
        assert optimizer.max_pending is None
        seen = set()
        for _ in range(4):   # batches of 4 asked before any is told: the model phase is reached in the 2nd
            batch = [optimizer.ask() for _ in range(4)]
            keys = {space.key(s.config) for s in batch}
            assert len(keys) == 4, f"{name} repeated a pending configuration"
            seen |= keys
            for s in batch:
                optimizer.tell(s, -analytic.throughput(s.config))
        assert len(seen) >= 15
    finally:
        optimizer.close()


@pytest.fixture
def needs_irace():
    from .test_optimizers import has_irace

    if not has_irace():
        pytest.skip("irace (r-cran-irace) not installed: run scripts/setup.sh")


def test_irace_races_in_parallel_and_a_resume_finds_its_trials_by_name(space, tmp_path, needs_irace):
    """irace's own parallel racing (N target-runners at once): more than one trial runs at a time, every request is
    one trial; resumed, irace starts over with its seed and every request is answered from the store, whatever
    order the batch's requests come in."""
    url = f"sqlite:///{tmp_path / 'irace.db'}"
    busy, peak = [0], [0]
    lock = threading.Lock()
    inner = _analytic_worker(url, "t", delay_s=0.1)

    def work():
        with lock:
            busy[0] += 1
            peak[0] = max(peak[0], busy[0])
        try:
            return inner()
        finally:
            with lock:
                busy[0] -= 1

    loop, store, study, executor = _parallel_loop(space, tmp_path, url, budget=40, window=3, optimizer="irace",
                                                  work=work)
    loop.run()
    executor.close()
    assert "parallel = 3" in (tmp_path / "w" / "scenario.txt").read_text()
    rows = store.trials(study)
    assert len(rows) >= 20 and {r["state"] for r in rows} == {"COMPLETE"} and peak[0] >= 2
    names = [(r["meta"]["opt"]["irace_config"], r["meta"]["opt"]["irace_instance"], r["meta"]["opt"]["irace_seed"])
             for r in rows]
    assert len(set(names)) == len(names)
    loop2, _, _, executor2 = _parallel_loop(space, tmp_path, url, budget=40, window=3, optimizer="irace")
    loop2.run()
    executor2.close()
    assert [r["id"] for r in store.trials(study)] == [r["id"] for r in rows]     # nothing run again


# ---------------------------------------------------------------------------------------------- the loop
def _analytic_worker(url: str, study: str, *, die_on: set | None = None, delay_s: float | tuple = 0.0):
    """A worker as tuning.workers.run_one, running the analytic function; `die_on`: suggestion numbers whose
    first trial it claims and abandons (a worker killed mid-trial: no heartbeat, no result)."""
    lock = threading.Lock()

    def work():
        store = open_store(url)
        try:
            study_id = store.find_study(study)["id"]
            me = f"w-{threading.get_ident()}"
            row = store.claim_trial(study_id, me, tag="tune")
            if row is None:
                return None
            with lock:
                if die_on is not None and row["meta"]["suggestion"] in die_on and row["retry_of"] is None:
                    die_on.discard(row["meta"]["suggestion"])
                    return "died"
            with store.trial_heartbeat(row["id"], me, ttl_s=0.6):
                time.sleep(random.uniform(*delay_s) if isinstance(delay_s, tuple) else delay_s)
                outcome = analytic.runner(row["config"], row["meta"]["instance"])
            store.finish_trial(row["id"], TrialState.COMPLETE, metrics={"summary": outcome.summary}, worker=me)
            return row["id"]
        finally:
            store.close()
    return work


def _parallel_loop(space, tmp_path, url, *, budget, window, slots=None, optimizer="gp", work=None, ttl_s=5.0):
    store = open_store(url)
    study = store.study("t")
    spec = TuneSpec(optimizer=optimizer, workloads=["w"], budget=budget, seed=7,
                    objective={"metric": "throughput", "constraints": []},
                    options={"initial": 3, "parallel": window})
    executor = LocalExecutor(work or _analytic_worker(url, "t"), slots or window)
    loop = ParallelLoop(store, study, spec, space, analytic.runner, workdir=tmp_path / "w", executor=executor,
                        window=window, ttl_s=ttl_s, poll_s=0.02)
    return loop, store, study, executor


def _suggestions(store, study) -> list[tuple[int, str]]:
    rows = [r for r in store.trials(study) if r["state"] == "COMPLETE"]
    return sorted((r["meta"]["suggestion"], json.dumps(r["config"], sort_keys=True)) for r in rows)


def test_the_parallel_loop_runs_the_budget_once_each_and_replays_on_resume(space, tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    loop, store, study, executor = _parallel_loop(space, tmp_path, url, budget=9, window=3,
                                                  work=_analytic_worker(url, "t", delay_s=0.02))
    assert loop.run() == "budget"
    executor.close()
    rows = store.trials(study)
    assert len(rows) == 9 and {r["state"] for r in rows} == {"COMPLETE"}
    assert sorted(r["meta"]["suggestion"] for r in rows) == list(range(9))
    assert rows[0]["meta"]["kind"] == "default" and rows[0]["worker"].startswith("w-")
    assert len({json.dumps(r["config"], sort_keys=True) for r in rows}) == 9
    assert loop.best.evaluation.value == max(r["metrics"]["summary"]["throughput_ops_s"] for r in rows)
    # resumed with a larger budget: the stored suggestions are replayed (none run again), then 5 more; the
    # result is the study a single run with that budget makes
    loop2, _, _, executor2 = _parallel_loop(space, tmp_path, url, budget=14, window=3)
    loop2.run()
    executor2.close()
    assert len(store.trials(study)) == 14
    fresh_url = f"sqlite:///{tmp_path / 'fresh.db'}"
    loop3, fresh, fresh_study, executor3 = _parallel_loop(space, tmp_path, fresh_url, budget=14, window=3)
    loop3.run()
    executor3.close()
    assert _suggestions(store, study) == _suggestions(fresh, fresh_study)


def test_the_order_trials_finish_in_does_not_change_the_study(space, tmp_path):
    """Results are told in suggestion order: 1 worker or 4, the same suggestions come out."""
    studies = []
    for slots in (1, 4):
        url = f"sqlite:///{tmp_path / f's{slots}.db'}"
        loop, store, study, executor = _parallel_loop(space, tmp_path, url, budget=10, window=4, slots=slots,
                                                      work=_analytic_worker(url, "t", delay_s=(0.0, 0.05)))
        loop.run()
        executor.close()
        studies.append(_suggestions(store, study))
    assert studies[0] == studies[1] and len(studies[0]) == 10


def test_a_resume_runs_again_what_an_earlier_session_left_running_and_keeps_the_budget(space, tmp_path):
    """A coordinator that died left one trial WAITING (taken by a worker now) and one RUNNING without a live worker
    (cut short: run again, not a stale retry); the resumed study ends with exactly its budget of trials."""
    full = f"sqlite:///{tmp_path / 'full.db'}"
    loop, whole, whole_study, executor = _parallel_loop(space, tmp_path, full, budget=8, window=2, optimizer="random")
    loop.run()
    executor.close()
    later = {r["meta"]["suggestion"]: r for r in whole.trials(whole_study) if r["meta"]["suggestion"] in (6, 7)}
    url = f"sqlite:///{tmp_path / 'cut.db'}"
    loop, store, study, executor = _parallel_loop(space, tmp_path, url, budget=6, window=2, optimizer="random")
    loop.run()
    executor.close()
    store.enqueue_trial(study, later[6]["config"], later[6]["workload"], tag="tune",
                        meta={k: later[6]["meta"][k] for k in ("suggestion", "kind", "optimizer", "instance")})
    cut = store.start_trial(study, later[7]["config"], later[7]["workload"], tag="tune",
                            meta={k: later[7]["meta"][k] for k in ("suggestion", "kind", "optimizer", "instance")})
    loop, _, _, executor = _parallel_loop(space, tmp_path, url, budget=8, window=2, optimizer="random")
    assert loop.run() == "budget"
    executor.close()
    rows = store.trials(study)
    assert store.trial(cut)["failure_kind"] == "interrupted"
    completed = [r for r in rows if r["state"] == "COMPLETE"]
    assert sorted(r["meta"]["suggestion"] for r in completed) == list(range(8)) and len(rows) == 9
    assert _suggestions(store, study) == _suggestions(whole, whole_study)


def test_workers_that_keep_failing_stop_the_study_with_their_error(space, tmp_path):
    from nosqltune.errors import NosqltuneError

    def broken():
        raise ConnectionError("the store refused the worker")

    loop, _, _, executor = _parallel_loop(space, tmp_path, f"sqlite:///{tmp_path / 'b.db'}", budget=4, window=2,
                                          work=broken)
    with pytest.raises(NosqltuneError, match="5 workers in a row .* the store refused the worker"):
        loop.run()
    executor.close()


def test_a_worker_killed_mid_trial_loses_nothing_and_counts_nothing_twice(space, tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    dying = {2, 5}
    loop, store, study, executor = _parallel_loop(space, tmp_path, url, budget=8, window=2,
                                                  work=_analytic_worker(url, "t", die_on=dying), ttl_s=0.5)
    assert loop.run() == "budget"
    executor.close()
    rows = store.trials(study)
    stale = [r for r in rows if r["failure_kind"] == "stale"]
    assert sorted(r["meta"]["suggestion"] for r in stale) == [2, 5] and not dying
    completed = [r for r in rows if r["state"] == "COMPLETE"]
    assert sorted(r["meta"]["suggestion"] for r in completed) == list(range(8))     # every suggestion exactly once
    assert {r["retry_of"] for r in completed if r["retry_of"]} == {r["id"] for r in stale}
    assert not [r for r in rows if r["state"] in ("WAITING", "RUNNING")]


def test_a_retry_that_dies_too_is_a_failed_trial_told_as_such(space, tmp_path):
    url = f"sqlite:///{tmp_path / 'k2.db'}"

    def always_dies_on_3():
        work = _analytic_worker(url, "t")

        def run():
            store = open_store(url)
            try:
                study_id = store.find_study("t")["id"]
                waiting = [r for r in store.trials(study_id) if r["state"] == "WAITING"]
                if waiting and waiting[0]["meta"]["suggestion"] == 3:
                    store.claim_trial(study_id, "doomed", tag="tune")
                    return "died"
            finally:
                store.close()
            return work()
        return run

    loop, store, study, executor = _parallel_loop(space, tmp_path, url, budget=6, window=1, slots=1,
                                                  work=always_dies_on_3(), ttl_s=0.4)
    loop.run()
    executor.close()
    rows = [r for r in store.trials(study) if r["meta"]["suggestion"] == 3]
    assert [(r["state"], r["failure_kind"]) for r in rows] == [("FAIL", "stale"), ("FAIL", "stale")]
    point = next(p for p in loop.points if p.number == 3)
    assert point.evaluation.value is None and point.cost is not None     # the penalty was told


# ---------------------------------------------------------------------------------------------- the command
def test_tune_parallel_on_the_surrogate_from_the_command_line(tmp_path, capsys):
    from nosqltune.cli import main

    db = tmp_path / "cli.db"
    argv = ["tune", "--system", "surrogate:wide24", "--knobs", "wide24", "--workload", "read90", "--optimizer",
            "random", "--budget", "10", "--confirm-top", "0", "--parallel", "3", "--study", str(db), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["trials"] == 10
    store = open_store(str(db))
    study = store.find_study("tune")
    assert study["settings"]["tune"]["spec"]["options"]["parallel"] == 3
    rows = store.trials(study["id"])
    assert len(rows) == 10 and {r["state"] for r in rows} == {"COMPLETE"}
    assert all(r["worker"] and r["environment_id"] for r in rows)


@pytest.mark.parametrize("extra, message", [
    (["--parallel", "0"], "--parallel must be at least 1"),
    (["--address", "x:1"], "--address names a Ray cluster"),
    (["--parallel", "2", "--study", ":memory:"], "not :memory:"),
    (["--stale-after", "-1"], "--stale-after must be a positive"),
])
def test_bad_parallel_flags_are_one_line_errors(tmp_path, capsys, extra, message):
    from nosqltune.cli import main

    argv = ["tune", "--system", "surrogate:wide24", "--knobs", "wide24", "--workload", "read90", "--budget", "4",
            "--study", str(tmp_path / "x.db"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.db").exists()
