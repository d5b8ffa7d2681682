"""--denoise (tuning/denoise.py): the probe's elasticity fitted within configurations, the correction, unstable
configurations, and the tuning loop that re-measures new incumbents. Trials are analytic with an injected drift
of the machine's speed that the trial's probe sees."""

from __future__ import annotations

import math
import random

import pytest

from nosqltune.knobs.space import TuningSpace
from nosqltune.store import open_store
from nosqltune.tuning.denoise import Elasticity, denoise_rounds, fit_elasticity, probe_for, unstable
from nosqltune.tuning.loop import Display, Outcome, TuneSpec, TuningLoop

from . import analytic


def test_the_probe_follows_the_objective():
    assert probe_for("throughput") == "cpu_mb_s" and probe_for("cpu-per-op") == "cpu_mb_s"
    assert probe_for("p99-read") == "disk_read_ms" and probe_for("avg-all") == "disk_read_ms"


def test_the_elasticity_is_the_slope_within_configurations_not_between_them():
    rng = random.Random(1)
    groups = []
    for speed in (500.0, 1000.0, 2000.0, 4000.0):       # a configuration's own speed ...
        runs = []
        for _ in range(4):
            probe = rng.uniform(800, 1200)              # ... and the machine's at each run
            runs.append((speed * (probe / 1000) ** 0.7 * rng.gauss(1, 0.005), probe))
        groups.append(runs)
    # slow configurations happen to have run on slow moments: a between-configuration slope would be steep
    groups = [[(v, p * s) for v, p in g] for g, s in zip(groups, (0.8, 0.9, 1.1, 1.2))]
    fit = fit_elasticity(groups, "cpu_mb_s")
    assert fit.dof == 16 - 4 - 1 and fit.used
    assert fit.slope == pytest.approx(0.7, abs=0.08)
    assert fit.r2 > 0.9


def test_an_unclear_elasticity_is_not_used():
    rng = random.Random(2)
    groups = [[(1000 * rng.gauss(1, 0.05), rng.uniform(900, 1100)) for _ in range(3)] for _ in range(4)]
    fit = fit_elasticity(groups, "cpu_mb_s")
    assert not fit.used and fit.factor(900.0) == 1.0 and "not clear" in fit.describe()
    few = fit_elasticity([[(1000, 900), (1100, 1000)]], "cpu_mb_s")       # no residual degree of freedom
    assert few.dof == 0 and not few.used and "too few" in few.describe()


def test_the_correction_brings_a_run_to_the_median_probe():
    fit = Elasticity("cpu_mb_s", slope=1.0, t=10.0, dof=10, r2=0.9, centre=1000.0)
    assert fit.factor(1250.0) == pytest.approx(0.8)       # a run on a fast moment comes down
    assert fit.factor(None) == 1.0                        # a trial without a probe is told as measured
    assert Elasticity("cpu_mb_s", slope=1.0, t=2.0, dof=10, centre=1000.0).factor(1250.0) == 1.0


def test_a_configuration_that_disagrees_with_itself_is_unstable():
    rng = random.Random(3)
    steady = {f"c{i}": [1000 * rng.gauss(1, 0.02) for _ in range(3)] for i in range(4)}
    flagged = unstable({**steady, "edge": [1000, 1600, 700]})
    assert list(flagged) == ["edge"] and flagged["edge"] < 0.01
    # too few repeats beside it: no judgement
    assert unstable({"a": [1000, 1010], "edge": [1000, 1600, 700]}) == {}


def test_confirmation_rounds_corrected_and_judged():
    rng = random.Random(4)

    def trial(probe):
        return {"internals": {"machine_probe": {"cpu_mb_s": probe}}}

    values, rows = {}, {}
    for label, speed in (("default", 1000.0), ("top1", 1200.0), ("top2", 1100.0)):
        probes = [rng.uniform(700, 1300) for _ in range(5)]
        values[label] = [speed * p / 1000 * rng.gauss(1, 0.01) for p in probes]     # 1% noise besides the machine
        rows[label] = [[trial(p)] for p in probes]
    values["top3"] = [1300, 2100, 900, 1250, 1300]
    rows["top3"] = [[trial(1000.0)] for _ in range(5)]
    out = denoise_rounds("throughput", values, rows)
    assert out["elasticity"]["used"]
    for label, speed in (("default", 1000.0), ("top1", 1200.0), ("top2", 1100.0)):
        spread = max(out["values"][label]) / min(out["values"][label])
        assert spread < max(values[label]) / min(values[label]) and spread < 1.06
    assert set(out["unstable"]) == {"top3"}


# ------------------------------------------------------------------------------------------------ the loop
def drifting(seed: int, wild=None, spread: float = 0.4):
    """The analytic throughput times the machine's speed at the run (seen by its CPU probe, uniform within
    +-`spread`), and noise of 1%; `wild(config)` True: that configuration's runs swing, x1.5 then x0.6 (a
    configuration at an edge)."""
    rng = random.Random(seed)
    seen: dict[tuple, int] = {}

    def run(config: dict, workload: str) -> Outcome:
        probe = rng.uniform(1000 * (1 - spread), 1000 * (1 + spread))
        value = analytic.throughput(config) * probe / 1000 * rng.gauss(1, 0.01)
        if wild and wild(config):
            key = tuple(sorted(config.items()))
            seen[key] = seen.get(key, 0) + 1
            value *= 1.5 if seen[key] % 2 else 0.6
        return Outcome("COMPLETE", summary={"throughput_ops_s": value},
                       internals={"machine_probe": {"cpu_mb_s": probe}})
    return run


def loop_for(tmp_path, runner, store=None, budget=30, denoise=True, seed=5, display=None, objective="throughput"):
    space = TuningSpace(analytic.space())
    store = store or open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer="random", workloads=["w"], budget=budget, seed=seed,
                    objective={"metric": objective, "constraints": []}, denoise=denoise)
    return TuningLoop(store, study, spec, space, runner, workdir=tmp_path / "random", display=display), store, study



def test_each_new_incumbent_is_measured_twice_and_told_its_corrected_mean(tmp_path):
    loop, store, study = loop_for(tmp_path, drifting(6), budget=60, seed=7)   # 7 incumbents: dof enough to fit
    loop.run()
    rows = store.trials(study)
    repeats = [r for r in rows if r["meta"].get("repeat")]
    assert repeats and rows[1]["meta"].get("repeat")                  # the default, the first incumbent
    by_suggestion = {}
    for r in rows:
        by_suggestion.setdefault(r["meta"]["suggestion"], []).append(r)
    assert all(len(g) <= 2 for g in by_suggestion.values())
    # the best was measured twice, and every complete trial keeps its corrected value
    space = TuningSpace(analytic.space())
    assert sum(space.key(r["config"]) == space.key(loop.best.config) for r in rows) == 2
    assert all(r["meta"].get("denoised") is not None for r in rows if r["state"] == "COMPLETE")
    # the elasticity (1 by construction) was clear on the study's own repeats, so corrected values of a
    # configuration's two runs agree far better than the raw ones
    fit = loop.denoiser.elasticity
    assert fit.used and fit.slope == pytest.approx(1.0, abs=0.15)
    pairs = [g for g in by_suggestion.values() if len(g) == 2]
    raw = [abs(math.log(g[0]["metrics"]["summary"]["throughput_ops_s"] / g[1]["metrics"]["summary"]
                        ["throughput_ops_s"])) for g in pairs]
    corrected = [abs(math.log(g[0]["meta"]["denoised"] / g[1]["meta"]["denoised"])) for g in pairs]
    assert sum(corrected) < sum(raw) / 3


def test_without_denoise_nothing_is_repeated(tmp_path):
    loop, store, study = loop_for(tmp_path, drifting(6), denoise=False)
    loop.run()
    rows = store.trials(study)
    assert not any(r["meta"].get("repeat") or "denoised" in r["meta"] for r in rows)


def test_an_unstable_configuration_never_becomes_the_best(tmp_path):
    def wild(config):   # the analytic optimum's neighbourhood swings
        return config["mode"] == "fast" and config["flag"]

    bests = []

    class Watch(Display):     # the incumbent after every trial, during the search
        def trial_finished(self, loop, row, evaluation):
            bests.append(None if loop.best is None else loop.best.config)

    # the machine within +-10% per run: a pair of runs of a steady configuration disagrees by a few percent
    loop, store, study = loop_for(tmp_path, drifting(7, wild, spread=0.1), budget=60, seed=1, display=Watch())
    loop.run()
    rows = store.trials(study)
    flagged = {r["meta"]["suggestion"] for r in rows if r["meta"].get("unstable") is not None}
    assert flagged, "the swinging configurations were never re-measured: the test checks nothing"
    assert bests and not any(b is not None and wild(b) for b in bests)    # never the incumbent, even for a moment
    assert not wild(loop.best.config)
    assert all(wild(r["config"]) for r in rows if r["meta"].get("unstable") is not None)


def test_a_latency_is_corrected_by_the_disk_probe():
    """p99 ~ the disk's time per read (rounds of a confirmation): a run on a slow disk moment is brought down, one
    on a fast moment up, to the median probe."""
    rng = random.Random(11)
    values, rows = {}, {}
    for label, p99 in (("default", 8.0), ("top1", 6.0), ("top2", 7.0), ("top3", 5.0)):
        disks = [rng.uniform(0.05, 0.15) for _ in range(4)]
        values[label] = [p99 * d / 0.1 * rng.gauss(1, 0.01) for d in disks]
        rows[label] = [[{"internals": {"machine_probe": {"disk_read_ms": d, "cpu_mb_s": 1000.0}}}] for d in disks]
    out = denoise_rounds("p99-read", values, rows)
    fit = out["elasticity"]
    assert fit["probe"] == "disk_read_ms" and fit["used"] and fit["slope"] == pytest.approx(1.0, abs=0.1)
    for label in values:
        for raw, corrected, trial in zip(values[label], out["values"][label], rows[label]):
            disk = trial[0]["internals"]["machine_probe"]["disk_read_ms"]
            assert (corrected < raw) == (disk > fit["centre"])
    assert out["unstable"] == {}


def spy(monkeypatch) -> list:
    """Every cost the loop tells an optimizer (tell and observe), in order."""
    import nosqltune.tuning.loop as loop_module

    told, real = [], loop_module.make_optimizer

    def make(*args, **kwargs):
        optimizer = real(*args, **kwargs)
        tell, observe = optimizer.tell, optimizer.observe
        optimizer.tell = lambda suggestion, cost: (told.append(round(cost, 9)), tell(suggestion, cost))[1]
        optimizer.observe = lambda config, cost: (told.append(round(cost, 9)), observe(config, cost))[1]
        return optimizer
    monkeypatch.setattr(loop_module, "make_optimizer", make)
    return told


def test_a_study_stopped_during_a_repeat_resumes_and_tells_the_same_values(tmp_path, monkeypatch):
    told = spy(monkeypatch)
    whole, store_a, study_a = loop_for(tmp_path, drifting(9), budget=30, seed=2)
    whole.run()
    first_told = list(told)
    rows_a = store_a.trials(study_a)
    repeats = [i for i, r in enumerate(rows_a) if r["meta"].get("repeat")]
    assert len(repeats) >= 3
    stop_at = repeats[2]          # the third repeat: stopped there, as by Ctrl-C

    base, calls = drifting(9), []

    def runner(config, workload):
        calls.append(1)
        if len(calls) == stop_at + 1:
            raise KeyboardInterrupt
        return base(config, workload)

    store = open_store(":memory:")
    first, _, study = loop_for(tmp_path, runner, store=store, budget=30, seed=2)
    with pytest.raises(KeyboardInterrupt):
        first.run()
    assert [r["failure_kind"] for r in store.trials(study)][-1] == "interrupted"
    told.clear()
    resumed, _, _ = loop_for(tmp_path, runner, store=store, budget=30, seed=2)
    resumed.run()
    assert told == first_told       # replayed and continued: every value told as in the run not stopped
    rows = [r for r in store.trials(study) if r["failure_kind"] != "interrupted"]
    assert [(r["meta"]["suggestion"], bool(r["meta"].get("repeat"))) for r in rows] == \
        [(r["meta"]["suggestion"], bool(r["meta"].get("repeat"))) for r in rows_a]


def test_a_denoised_study_is_not_resumed_with_parallel_trials(tmp_path):
    from nosqltune.errors import UsageError
    from nosqltune.tuning.parallel import ParallelLoop

    space = TuningSpace(analytic.space())
    store = open_store(":memory:")
    spec = TuneSpec(optimizer="random", workloads=["w"], budget=4, objective={"metric": "throughput",
                                                                              "constraints": []}, denoise=True)
    loop = ParallelLoop(store, store.study("t"), spec, space, drifting(1), workdir=tmp_path, executor=None, window=2)
    with pytest.raises(UsageError, match="--denoise"):
        loop.run()
    assert store.trials(store.study("t")) == []


def test_a_would_be_best_that_cannot_be_measured_again_is_not_made_the_best(tmp_path):
    space = TuningSpace(analytic.space())

    def run(config, workload):    # anything beats the default by far
        value = 100.0 if space.key(config) == space.key(space.default()) else 1000.0
        return Outcome("COMPLETE", summary={"throughput_ops_s": value}, internals={"machine_probe": {"cpu_mb_s": 1e3}})

    notes = []

    class Notes(Display):
        def note(self, message):
            notes.append(message)

    loop, store, study = loop_for(tmp_path, run, budget=3, display=Notes())
    loop.run()
    rows = store.trials(study)
    assert [bool(r["meta"].get("repeat")) for r in rows] == [False, True, False]   # the default twice, then one run
    assert rows[-1]["meta"].get("unrepeated") is True
    assert space.key(loop.best.config) == space.key(space.default())
    assert any("no budget is left" in n for n in notes)
