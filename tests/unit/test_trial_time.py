"""The machine time a surrogate trial is charged (surrogate/trial_time.py): fitted to a dataset's recorded timings."""

from __future__ import annotations

import random

import pytest

from nosqltune.surrogate.trial_time import TrialClock


def SHAPE(config):   # the dataset's key: its compression (LZ4 by default), as TuningSpace.dataset_shape gives it
    return (("compression", config.get("compression", "LZ4Compressor")),)


def _trials(n=60, fixed=20.0, ops=40000.0, seed=3):
    """Recorded trials whose time outside a build is fixed + ops / throughput (1% jitter); the first of each data
    shape built its dataset (Zstd builds take 300 s, LZ4's 100 s)."""
    rng, seen, out = random.Random(seed), set(), []
    for i in range(n):
        compression = rng.choice(["LZ4Compressor", "ZstdCompressor"])
        throughput = rng.uniform(500, 3000)
        run = (fixed + ops / throughput) * rng.uniform(0.99, 1.01)
        timings = {"total_s": run}
        if compression not in seen:
            seen.add(compression)
            build = 300.0 if compression == "ZstdCompressor" else 100.0
            timings = {"total_s": run + build, "dataset_build_s": build}
        out.append({"config": {"compression": compression, "heap_size": rng.choice([512, 1024])},
                    "metrics": {"summary": {"throughput_ops_s": throughput}}, "timings": timings})
    return out


def test_the_fit_recovers_the_fixed_and_per_operation_time():
    clock = TrialClock.fit(_trials(), SHAPE)
    assert clock.fixed_s == pytest.approx(20.0, rel=0.1) and clock.per_op_s == pytest.approx(40000.0, rel=0.05)
    assert clock.builds == {repr(SHAPE({})): 100.0, repr(SHAPE({"compression": "ZstdCompressor"})): 300.0}
    clock.trial({}, 1000.0)                                       # the default's data built
    slow, fast = clock.trial({}, 800.0), clock.trial({"heap_size": 512}, 2500.0)
    assert slow["total_s"] - fast["total_s"] == pytest.approx(clock.per_op_s * (1 / 800 - 1 / 2500))
    assert clock.trial({"heap_size": 512}, 1.0)["total_s"] == pytest.approx(clock.longest_s)   # never longer


def test_a_build_is_charged_once_per_data_shape_the_default_included():
    clock = TrialClock.fit(_trials(), SHAPE)
    first = clock.trial({}, 1000.0)                               # the default's shape: LZ4, built once
    assert first["dataset_build_s"] == 100.0 and first["total_s"] == pytest.approx(100.0 + 20 + 40, rel=0.1)
    assert "dataset_build_s" not in clock.trial({"compression": "LZ4Compressor", "heap_size": 512}, 1000.0)
    assert clock.trial({"compression": "ZstdCompressor"}, 1000.0)["dataset_build_s"] == 300.0
    # a shape never recorded costs the median recorded build
    assert clock.trial({"compression": "none"}, 1000.0)["dataset_build_s"] == pytest.approx(200.0)
    assert "dataset_build_s" not in clock.trial({"compression": "none"}, 1000.0)


def test_without_recorded_timings_there_is_no_clock():
    trials = _trials()
    for t in trials:
        del t["timings"]
    assert TrialClock.fit(trials, SHAPE) is None
    assert TrialClock.fit(_trials(n=9), SHAPE) is None     # too few to fit


def test_a_surrogate_target_charges_its_trials_from_the_dataset(monkeypatch, surrogate_cache):
    """wide24 kept no timings (no clock, no timings on its trials); with recorded timings every trial gets its
    machine time, a build once per data shape in the process (the confirmation's target shares the clock)."""
    from nosqltune.surrogate import dataset
    from nosqltune.surrogate.datafile import read_dataset, resolve
    from nosqltune.workloads.spec import make_workload

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    w = make_workload("read90").to_dict()
    plain = dataset.SurrogateTarget("wide24", seed=0)
    assert plain.clock() is None and plain.run(plain.space.default(), w).timings == {}

    trials = read_dataset(resolve("wide24"))["trials"]
    rng = random.Random(1)
    for t in trials:
        per_op = 30000.0 / t["metrics"]["summary"]["throughput_ops_s"]
        t["timings"] = {"total_s": 15.0 + per_op * rng.uniform(0.98, 1.02)}
    trials[0]["timings"] = {"total_s": trials[0]["timings"]["total_s"] + 120.0, "dataset_build_s": 120.0}
    monkeypatch.setitem(dataset._CLOCKS, plain.data_hash, TrialClock.fit(trials, plain.space.dataset_shape))
    first = plain.run(plain.space.default(), w)
    again = dataset.SurrogateTarget("wide24", seed=0).run(plain.space.default(), w)   # another target, same clock
    assert first.timings["dataset_build_s"] == 120.0        # the only recorded build: the median of all
    assert "dataset_build_s" not in again.timings
    expected = 15.0 + 30000.0 / again.summary["throughput_ops_s"]
    assert again.timings["total_s"] == pytest.approx(expected, rel=0.05)
