"""A study resumed on another machine: the default re-run there as its reference, and every run valued as on the
study's first machine (tuning.machine_reference). The machines are analytic: the second runs every configuration at
a fixed share of its speed, as the transfer study's second host did (0.4)."""

from __future__ import annotations

import math

import pytest

from nosqltune.knobs.space import TuningSpace
from nosqltune.objective import metric_keys, metric_value
from nosqltune.store import open_store
from nosqltune.tuning.loop import Outcome, TuneSpec, TuningLoop
from nosqltune.tuning.machine_reference import FACTOR_KEY, REFERENCE_KEY, hardware_of, home_summary, \
    machine_factors, needs_reference, reference_kind
from nosqltune.tuning.results import best_configuration

from . import analytic

SLOW = 0.4


@pytest.fixture(scope="module")
def space():
    return TuningSpace(analytic.space())


def machine(speed: float):
    def run(config, workload):
        value = analytic.throughput(config) * speed
        return Outcome("COMPLETE", summary={"throughput_ops_s": value, "read_p99_ms": 1e5 / value})
    return run


def loop_on(store, env: int, runner, space, tmp_path, budget: int, metric: str = "throughput"):
    spec = TuneSpec(optimizer="random", workloads=["w"], budget=budget, seed=4,
                    objective={"metric": metric, "constraints": []})
    return TuningLoop(store, store.study("t"), spec, space, runner, workdir=tmp_path / "random", environment_id=env)


def two_machines(space, tmp_path, metric="throughput", first=6, budget=14):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "AMD EPYC"}), store.environment({"cpu_model": "Intel Xeon"})
    loop_on(store, fast, machine(1.0), space, tmp_path, first, metric).run()
    second = loop_on(store, slow, machine(SLOW), space, tmp_path, budget, metric)
    second.run()
    return store, second, fast, slow


def test_a_resume_on_another_machine_runs_the_default_and_the_incumbent_there_first(space, tmp_path):
    store, loop, fast, slow = two_machines(space, tmp_path)
    rows = store.trials(store.study("t"))
    assert len(rows) == 14
    assert [r["environment_id"] for r in rows[:6]] == [fast] * 6
    default, incumbent = rows[6], rows[7]
    assert default["environment_id"] == slow and default["meta"][REFERENCE_KEY] == "default"
    assert default["meta"]["kind"] == "default" and default["config"] == space.default()
    # the incumbent: the best of the first machine's runs, re-run here
    best = max(rows[1:6], key=lambda r: r["metrics"]["summary"]["throughput_ops_s"])
    assert incumbent["meta"][REFERENCE_KEY] == "incumbent" and incumbent["config"] == best["config"]
    assert incumbent["meta"]["suggestion"] == best["meta"]["suggestion"]
    assert not any(r["meta"].get(REFERENCE_KEY) for r in rows[8:])
    # every run on the slow machine carries the factor both references give: 1 / 0.4
    assert all(r["meta"][FACTOR_KEY] == pytest.approx(1 / SLOW) for r in rows[6:])
    assert not any(r["meta"].get(FACTOR_KEY) for r in rows[:6])
    assert loop.machine.ratios[(loop.machine.machine(slow), "w")] == pytest.approx({"default": 1 / SLOW,
                                                                                     "incumbent": 1 / SLOW})
    assert loop.machine.apart() == [] and "(the best so far: x2.500)" in loop.machine.describe()


def test_every_run_is_valued_as_on_the_first_machine(space, tmp_path):
    store, loop, _, _ = two_machines(space, tmp_path)
    rows = store.trials(store.study("t"))
    told = [r for r in rows if not r["meta"].get(REFERENCE_KEY)]   # the references are no suggestion's
    assert len(told) == 12
    for row in told:   # what the optimizer was told: the configuration's value on the first machine
        assert -row["meta"]["cost"] == pytest.approx(analytic.throughput(row["config"]))
    # best and report read the same values as the loop: the best of all 12 runs at its first-machine value
    found = best_configuration(rows, loop.objective, ["w"], loop.space)
    assert found["value"] == pytest.approx(max(analytic.throughput(r["config"]) for r in rows))
    assert found["value"] == pytest.approx(loop.best.evaluation.value)
    assert loop.default_point.evaluation.value == pytest.approx(analytic.throughput(space.default()))


def test_uncorrected_the_slow_machine_s_runs_would_lose(space, tmp_path):
    """The defect this fixes: a configuration measured only on the slow machine is told 0.4 of its value."""
    store, loop, _, slow = two_machines(space, tmp_path)
    late = [r for r in store.trials(store.study("t")) if r["environment_id"] == slow]
    raw = [metric_value("throughput", r["metrics"]["summary"]) for r in late]
    valued = [metric_value("throughput", home_summary(r, "throughput")) for r in late]
    assert all(v == pytest.approx(x / SLOW) for v, x in zip(valued, raw))


def test_a_latency_objective_is_brought_home_too(space, tmp_path):
    store, loop, _, _ = two_machines(space, tmp_path, metric="p99-read")
    rows = store.trials(store.study("t"))
    assert rows[6]["meta"][FACTOR_KEY] == pytest.approx(SLOW)   # latencies 1/0.4 as long: multiplied by 0.4
    assert rows[7]["meta"][REFERENCE_KEY] == "incumbent"       # the lowest p99 of the first machine
    for row in (r for r in rows if not r["meta"].get(REFERENCE_KEY)):
        assert row["meta"]["cost"] == pytest.approx(1e5 / analytic.throughput(row["config"]))


def test_the_same_machine_runs_no_reference(space, tmp_path):
    store = open_store(":memory:")
    env = store.environment({"cpu_model": "AMD EPYC"})
    loop_on(store, env, machine(1.0), space, tmp_path, 5).run()
    loop_on(store, env, machine(1.0), space, tmp_path, 9).run()
    rows = store.trials(store.study("t"))
    assert len(rows) == 9 and not any(r["meta"].get(REFERENCE_KEY) or r["meta"].get(FACTOR_KEY) for r in rows)
    assert [r["meta"]["suggestion"] for r in rows] == list(range(9))


def test_no_reference_when_the_budget_is_spent(space, tmp_path):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})
    loop_on(store, fast, machine(1.0), space, tmp_path, 5).run()
    loop_on(store, slow, machine(SLOW), space, tmp_path, 5).run()
    assert len(store.trials(store.study("t"))) == 5


def test_failed_references_leave_the_default_alone_and_are_not_run_again(space, tmp_path):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A", "cores": 2}), store.environment({"cpu_model": "B", "cores": 2})
    loop_on(store, fast, machine(1.0), space, tmp_path, 5).run()
    first = store.trials(store.study("t"))

    def refusing(config, workload):   # the default and every configuration the first machine ran
        if any(config == r["config"] for r in first):
            return Outcome("FAIL", failure_kind="timeout", error="the node did not start in time")
        return machine(SLOW)(config, workload)

    second = loop_on(store, slow, refusing, space, tmp_path, 9)
    second.run()
    third = loop_on(store, slow, refusing, space, tmp_path, 12)
    third.run()
    rows = store.trials(store.study("t"))
    references = [r for r in rows if r["meta"].get(REFERENCE_KEY)]
    assert [(r["meta"][REFERENCE_KEY], r["state"]) for r in references] == [("default", "FAIL"),
                                                                            ("incumbent", "FAIL")]   # tried once
    assert not any(r["meta"].get(FACTOR_KEY) for r in rows)                      # valued as measured, as said
    assert third.default_point.evaluation.value == pytest.approx(analytic.throughput(space.default()))
    assert third.machine.unreferenced == ((slow, "w"),)
    assert len(rows) == 12 and [r["meta"]["suggestion"] for r in rows if not r["meta"].get(REFERENCE_KEY)] == \
        list(range(10))


def test_the_incumbent_s_reference_checks_and_does_not_value(space, tmp_path):
    """The incumbent's value on the first machine is the best of many runs, its luck with it: its ratio is no part
    of the factor. With the default's reference failed, the machine's runs are valued as measured."""
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})
    loop_on(store, fast, machine(1.0), space, tmp_path, 5).run()

    def refusing(config, workload):
        if config == space.default():
            return Outcome("FAIL", failure_kind="timeout", error="the node did not start in time")
        return machine(SLOW)(config, workload)

    second = loop_on(store, slow, refusing, space, tmp_path, 9)
    second.run()
    assert second.machine.ratios[(second.machine.machine(slow), "w")] == pytest.approx({"incumbent": 1 / SLOW})
    assert second.machine.factors == {} and second.machine.unreferenced == ((slow, "w"),)
    assert not any(r["meta"].get(FACTOR_KEY) for r in store.trials(store.study("t")))


def test_a_machine_that_moves_the_best_less_than_the_default_is_said(space, tmp_path):
    """The machine change costs the default more than the best (say, the best is held by a volume's cap): the
    factor stays the default's, and the line says configurations like the best are over-credited there."""
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})
    loop_on(store, fast, machine(1.0), space, tmp_path, 5).run()

    def uneven(config, workload):
        return machine(SLOW if config == space.default() else SLOW * 1.5)(config, workload)

    second = loop_on(store, slow, uneven, space, tmp_path, 9)
    second.run()
    key = (second.machine.machine(slow), "w")
    assert second.machine.ratios[key] == pytest.approx({"default": 1 / SLOW, "incumbent": 1 / (SLOW * 1.5)})
    assert second.machine.factors[key] == pytest.approx(1 / SLOW)
    assert second.machine.apart() == [(key, pytest.approx(1 / 1.5))]
    assert "over-credited" in second.machine.describe()


@pytest.mark.parametrize("metric, here, said", [
    ("throughput", {"default": 50.0, "best": 150.0}, None),           # both at half their speed: alike
    ("throughput", {"default": 50.0, "best": 75.0}, "under-credited"),   # the best lost x2 of the default's loss
    ("throughput", {"default": 50.0, "best": 250.0}, "over-credited"),   # the best lost nothing
    ("p99-read", {"default": 2.0, "best": 0.5}, None),                # latencies twice as long
    ("p99-read", {"default": 2.0, "best": 1.0}, "under-credited"),     # the best's four times as long
    ("p99-read", {"default": 2.0, "best": 0.25}, "over-credited"),     # the best's as short as before
])
def test_the_check_reads_the_loss_in_the_objective_s_direction(metric, here, said):
    key = "throughput_ops_s" if metric == "throughput" else "read_p99_ms"
    home = {"default": 100.0, "best": 300.0} if metric == "throughput" else {"default": 1.0, "best": 0.25}

    def row(i, env, config, value, reference=None):
        return {"id": i, "state": "COMPLETE", "environment_id": env, "started_at": i, "config": {"c": config},
                "meta": {"kind": "default" if config == "default" else "suggested", "instance": "w",
                         **({REFERENCE_KEY: reference} if reference else {})},
                "metrics": {"summary": {key: value}}}

    rows = [row(1, 1, "default", home["default"]), row(2, 1, "best", home["best"]),
            row(3, 2, "default", here["default"], "default"), row(4, 2, "best", here["best"], "incumbent")]
    factors = machine_factors(rows, metric)
    assert factors.factors == {(2, "w"): pytest.approx(home["default"] / here["default"])}
    line = factors.describe()
    assert (said in line) if said else ("credited" not in line and factors.apart() == [])


def test_no_reference_where_the_machine_ran_the_study_before(space, tmp_path):
    """A reference after runs told as measured would revalue them: none then. A session cut short between the two
    references runs the second next time; a reference stored as True (before the incumbent's) is the default's."""
    store, loop, fast, slow = two_machines(space, tmp_path, budget=10)
    rows = store.trials(store.study("t"))
    assert needs_reference(rows, slow, ["w"], incumbent=True) == []
    assert needs_reference(rows[:7], slow, ["w"], incumbent=True) == [("w", "incumbent")]
    assert needs_reference(rows[:7], slow, ["w"]) == []
    legacy = [*rows[:6], {**rows[6], "meta": {**rows[6]["meta"], REFERENCE_KEY: True}}]
    assert reference_kind(legacy[6]) == "default"
    assert needs_reference(legacy, slow, ["w"], incumbent=True) == [("w", "incumbent")]
    unreferenced = [*rows[:6], {**rows[8], "meta": {k: v for k, v in rows[8]["meta"].items() if k != FACTOR_KEY}}]
    assert needs_reference(unreferenced, slow, ["w"], incumbent=True) == []   # ran here before: valued as measured


def test_a_run_carries_its_factor_from_its_start(space, tmp_path):
    """Readers of the store (the live dashboard) see a run valued as the optimizer is told, as soon as it is."""
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})
    loop_on(store, fast, machine(1.0), space, tmp_path, 5).run()
    seen = []

    def watched(config, workload):
        running = [r for r in store.trials(store.study("t")) if r["state"] == "RUNNING"]
        seen.append((running[0]["meta"].get(REFERENCE_KEY), running[0]["meta"].get(FACTOR_KEY)))
        return machine(SLOW)(config, workload)

    loop_on(store, slow, watched, space, tmp_path, 9).run()
    assert seen[:2] == [("default", None), ("incumbent", None)]     # a reference's factor comes from its result
    assert [f for _, f in seen[2:]] == pytest.approx([1 / SLOW] * 2)


def test_a_run_before_its_machine_s_references_is_not_revalued():
    def row(i, env, kind, value, reference=None):
        return {"id": i, "state": "COMPLETE", "environment_id": env, "started_at": i, "config": {"c": kind},
                "meta": {"kind": kind, "instance": "w", **({REFERENCE_KEY: reference} if reference else {})},
                "metrics": {"summary": {"throughput_ops_s": value}}}

    rows = [row(1, 1, "default", 100.0), row(2, 2, "suggested", 40.0), row(3, 2, "default", 50.0, "default"),
            row(4, 2, "suggested", 60.0)]
    factors = machine_factors(rows, "throughput")
    assert factors.of(rows[1]) is None and factors.of(rows[3]) == pytest.approx(2.0)
    assert factors.of(rows[2]) == pytest.approx(2.0)


def test_two_workloads_take_the_default_s_references_first(space, tmp_path):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})

    def spec_loop(env, budget):
        spec = TuneSpec(optimizer="random", workloads=["w", "second"], budget=budget, seed=2,
                        objective={"metric": "throughput", "constraints": []})
        return TuningLoop(store, store.study("t"), spec, space, machine(1.0 if env == fast else SLOW),
                          workdir=tmp_path / "r", environment_id=env)

    spec_loop(fast, 6).run()
    spec_loop(slow, 8).run()
    rows = store.trials(store.study("t"))
    assert [(r["meta"]["instance"], r["meta"].get(REFERENCE_KEY)) for r in rows[6:]] == [("w", "default"),
                                                                                         ("second", "default")]


def test_the_references_take_what_the_budget_leaves_the_default_s_first(space, tmp_path):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})
    loop_on(store, fast, machine(1.0), space, tmp_path, 5).run()
    loop_on(store, slow, machine(SLOW), space, tmp_path, 6).run()
    rows = store.trials(store.study("t"))
    assert len(rows) == 6 and rows[5]["meta"][REFERENCE_KEY] == "default"    # no unreferenced suggestion here
    loop_on(store, slow, machine(SLOW), space, tmp_path, 8).run()
    rows = store.trials(store.study("t"))
    assert [r["meta"].get(REFERENCE_KEY) for r in rows[5:]] == ["default", "incumbent", None]


def test_a_third_session_keeps_the_factor_and_runs_no_second_reference(space, tmp_path):
    store, loop, fast, slow = two_machines(space, tmp_path, budget=10)
    told = {r["id"]: r["meta"].get("cost") for r in store.trials(store.study("t"))}
    # the same machine, a new kernel: the same hardware, no reference; a default run here that would change a
    # recomputed mean does not move the kept factor
    kernel = store.environment({"cpu_model": "Intel Xeon", "kernel": "6.19"})
    third = loop_on(store, kernel, machine(SLOW * 1.1), space, tmp_path, 14)
    third.run()
    rows = store.trials(store.study("t"))
    assert sum(1 for r in rows if r["meta"].get(REFERENCE_KEY)) == 2
    assert all(r["meta"].get("cost") == told[r["id"]] for r in rows if r["id"] in told)    # nothing revalued
    assert all(r["meta"][FACTOR_KEY] == pytest.approx(1 / SLOW) for r in rows[6:])


def test_several_workloads_get_a_reference_and_a_factor_each(space, tmp_path):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})

    def spec_loop(env, runner, budget):
        spec = TuneSpec(optimizer="random", workloads=["w", "second"], budget=budget, seed=2,
                        objective={"metric": "throughput", "constraints": []})
        return TuningLoop(store, store.study("t"), spec, space, runner, workdir=tmp_path / "r", environment_id=env)

    def second_slower(config, workload):   # the second workload loses more on the slow machine
        return machine(SLOW if workload == "w" else SLOW / 2)(config, workload)

    spec_loop(fast, lambda c, w: machine(1.05 if w == "second" else 1.0)(c, w), 6).run()
    spec_loop(slow, second_slower, 12).run()
    rows = store.trials(store.study("t"))
    references = [r for r in rows if r["meta"].get(REFERENCE_KEY)]
    assert sorted((r["meta"]["instance"], r["meta"][REFERENCE_KEY]) for r in references) == \
        [("second", "default"), ("second", "incumbent"), ("w", "default"), ("w", "incumbent")]
    late = [r for r in rows if r["environment_id"] == slow]
    assert {r["meta"]["instance"]: round(r["meta"][FACTOR_KEY], 3) for r in late} == \
        {"w": round(1 / SLOW, 3), "second": round(1.05 * 2 / SLOW, 3)}


def test_denoise_and_a_partial_budget_run_no_reference(space, tmp_path):
    store = open_store(":memory:")
    fast, slow = store.environment({"cpu_model": "A"}), store.environment({"cpu_model": "B"})
    spec = TuneSpec(optimizer="random", workloads=["w"], budget=6, seed=4, denoise=True,
                    objective={"metric": "throughput", "constraints": []})
    TuningLoop(store, store.study("d"), spec, space, machine(1.0), workdir=tmp_path / "d", environment_id=fast).run()
    spec.budget = 9
    TuningLoop(store, store.study("d"), spec, space, machine(SLOW), workdir=tmp_path / "d", environment_id=slow).run()
    assert not any(r["meta"].get(REFERENCE_KEY) or r["meta"].get(FACTOR_KEY) for r in store.trials(store.study("d")))


def test_a_third_machine_and_the_one_without_a_reference():
    def row(i, env, kind, value, reference=False, instance="w"):
        return {"id": i, "state": "COMPLETE", "environment_id": env, "started_at": i,
                "meta": {"kind": kind, "instance": instance, **({REFERENCE_KEY: True} if reference else {})},
                "metrics": {"summary": {"throughput_ops_s": value}}}

    rows = [row(1, 1, "default", 100.0), row(2, 1, "default", 80.0), row(3, 1, "suggested", 150.0),
            row(4, 2, "default", 45.0, reference=True), row(5, 2, "default", 30.0), row(6, 2, "suggested", 60.0),
            row(7, 3, "suggested", 10.0)]
    factors = machine_factors(rows, "throughput")
    assert factors.home == 1 and factors.factors == {(2, "w"): pytest.approx(2.0)}   # mean(100, 80) / 45
    assert factors.of(rows[5]) == pytest.approx(2.0) and factors.of(rows[2]) is None and factors.of(rows[6]) is None
    assert factors.unreferenced == ((3, "w"),)
    assert "environment 3 on w" in factors.describe() and "as measured" in factors.describe()
    kept = [*rows[:3], {**rows[3], "meta": {**rows[3]["meta"], FACTOR_KEY: 2.5}}]   # a kept factor stays
    assert machine_factors(kept, "throughput").factors == {(2, "w"): 2.5}
    # environments 1 and 4 are one machine (another kernel): no factor, no reference
    same = hardware_of({1: {"cpu_model": "X", "cores": 2, "memory_gib": 23.5, "kernel": "a"},
                        4: {"cpu_model": "X", "cores": 2, "memory_gib": 23.4, "kernel": "b"}})
    assert same[1] == same[4]
    assert needs_reference(rows[:1], 4, ["w"], same) == [] and needs_reference(rows[:1], 4, ["w"]) == [("w", "default")]
    assert machine_factors([*rows[:3], row(8, 4, "suggested", 70.0)], "throughput", same).of(
        row(8, 4, "suggested", 70.0)) is None
    assert needs_reference(rows[:4], 2, ["w"]) == []                             # tried here already
    assert needs_reference([], 3, ["w"]) == []                                   # no default yet: it runs here
    unknown = [{**rows[0], "environment_id": None}]
    assert needs_reference(unknown, 3, ["w"]) == []                              # machines unknown: nothing to say
    assert machine_factors([row(1, 1, "suggested", 5.0)], "throughput").describe() is None


@pytest.mark.parametrize("metric", ["throughput", "cpu-per-op", "p99-read", "p99-all", "avg-all"])
def test_metric_keys_are_what_metric_value_reads(metric):
    summary = {"throughput_ops_s": 900.0, "node_cpu_us_per_op": 210.0, "read_p99_ms": 3.0, "update_p99_ms": 4.5,
               "cleanup_p99_ms": 99.0, "all_avg_ms": 1.2, "read_p50_ms": 0.7}
    scaled = dict(summary)
    for key in metric_keys(metric, summary):
        scaled[key] *= 3.0
    assert metric_value(metric, scaled) == pytest.approx(3.0 * metric_value(metric, summary))
    untouched = set(summary) - set(metric_keys(metric, summary))
    assert all(scaled[k] == summary[k] for k in untouched) and not math.isnan(sum(scaled.values()))


def test_the_dashboard_and_the_report_show_the_values_the_optimizer_was_told(space, tmp_path):
    """A trial's value on the dashboard and the report's predicted-against-measured plot read the run valued as on
    the first machine; the dashboard keeps the measured figure beside it and names the reference run."""
    from types import SimpleNamespace

    from nosqltune.dashboard.data import trial_view
    from nosqltune.report.plots import own_predictions

    store, loop, fast, slow = two_machines(space, tmp_path)
    rows = store.trials(store.study("t"))
    views = [trial_view(r, "throughput", []) for r in rows]
    for row, view in zip(rows, views):
        if row["meta"].get(REFERENCE_KEY):   # a reference measures the machine: shown as measured
            assert view["value"] == pytest.approx(analytic.throughput(row["config"]) * SLOW)
            assert "measured" not in view and view["kind"] == "reference"
            continue
        assert view["value"] == pytest.approx(analytic.throughput(row["config"]))
        if row["environment_id"] == slow:
            assert view["measured"] == pytest.approx(analytic.throughput(row["config"]) * SLOW)
        else:
            assert "measured" not in view
    assert [v["kind"] for v in views[5:9]] == ["suggested", "reference", "reference", "suggested"]
    told = [r for r in rows if not r["meta"].get(REFERENCE_KEY)]
    predicted = [{**r, "meta": {**r["meta"], "opt": {"predicted": 1.0}}} for r in told]   # as rafiki's are stored
    pairs = own_predictions(SimpleNamespace(rows=predicted, objective=loop.objective))
    assert [m for _, m in pairs] == pytest.approx([analytic.throughput(r["config"]) for r in told])
