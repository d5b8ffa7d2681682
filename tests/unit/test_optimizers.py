"""The optimizers on an analytic function over a mixed space (integers, a log-scaled integer, reals, a
categorical, a boolean, a conditional knob, irrelevant knobs): each beats random search on average over
several seeds for the same budget and always suggests valid configurations. The function is analytic; the
optimizers, the loop and (for irace) the real R package are what is tested."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from nosqltune.optimizers.irace import (configurations_file, digits_for, irace_executable, minimum_budget,
                                        parameters_file, race_settings)
from nosqltune.knobs.space import TuningSpace, from_unit, to_unit
from nosqltune.store import open_store
from nosqltune.tuning.loop import TuneSpec, TuningLoop

from . import analytic

SEEDS = (1, 2, 3, 4)


def has_irace() -> bool:
    try:
        irace_executable()
        return True
    except Exception:
        return False


needs_irace = pytest.mark.skipif(not has_irace(), reason="irace (r-cran-irace) not installed: run scripts/setup.sh")


@pytest.fixture(scope="module")
def space():
    return TuningSpace(analytic.space())


def valid(space: TuningSpace, config: dict) -> bool:
    for knob in space.knobs:
        value = config[knob.name]
        if knob.type == "int" and not (isinstance(value, int) and knob.range[0] <= value <= knob.range[1]):
            return False
        if knob.type == "float" and not (isinstance(value, float) and knob.range[0] <= value <= knob.range[1]):
            return False
        if knob.type == "bool" and not isinstance(value, bool):
            return False
        if knob.type == "enum" and value not in knob.choices:
            return False
    if config["mode"] != "fast" and config["level"] != 5:  # inactive knob holds its default
        return False
    return True


def tune(space, optimizer: str, seed: int, budget: int, tmp_path: Path, options=None):
    store = open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer=optimizer, workloads=["w"], budget=budget, seed=seed,
                    objective={"metric": "throughput", "constraints": []}, options=options or {})
    loop = TuningLoop(store, study, spec, space, analytic.noisy_runner(seed), workdir=tmp_path / f"{optimizer}{seed}")
    loop.run()
    configs = [r["config"] for r in store.trials(study)]
    return analytic.throughput(loop.best.config), configs


def mean_quality(space, optimizer, budget, tmp_path, options=None):
    values = []
    for seed in SEEDS:
        quality, configs = tune(space, optimizer, seed, budget, tmp_path, options)
        assert all(valid(space, c) for c in configs), f"{optimizer} suggested an invalid configuration"
        assert len(configs) <= budget
        values.append(quality)
    return statistics.mean(values)


@pytest.mark.slow   # a claim about the optimizers' quality over many seeds: make test-all
@pytest.mark.parametrize("optimizer,budget", [("gp", 25), ("smac", 25), ("irace", 150)])
def test_optimizer_beats_random_search(space, optimizer, budget, tmp_path):
    if optimizer == "irace" and not has_irace():
        pytest.skip("irace not installed")
    options = {"candidates": 500} if optimizer == "gp" else None
    ours = mean_quality(space, optimizer, budget, tmp_path, options)
    baseline = mean_quality(space, "random", budget, tmp_path)
    assert ours > baseline, f"{optimizer}: {ours:.0f} vs random {baseline:.0f} (true value of the returned best)"


def test_random_search_is_uniform_and_log_uniform(space):
    rng = random.Random(0)
    samples = [space.sample(rng) for _ in range(4000)]
    threads = [s["threads"] for s in samples]
    # log-uniform over [1, 128]: about half the draws are below sqrt(128) ~ 11
    assert 0.42 < sum(t <= 11 for t in threads) / len(threads) < 0.58
    ratios = [s["ratio"] for s in samples]
    assert 0.45 < sum(r < 0.5 for r in ratios) / len(ratios) < 0.55
    modes = {m: sum(s["mode"] == m for s in samples) / len(samples) for m in ("slow", "medium", "fast")}
    assert all(0.28 < share < 0.39 for share in modes.values()), modes
    assert all(valid(space, s) for s in samples)
    assert min(threads) == 1 and max(threads) == 128


def test_unit_mapping_round_trips_integers(space):
    for knob in space.knobs:
        if knob.type == "int":
            for value in range(knob.range[0], knob.range[1] + 1):
                assert from_unit(knob, to_unit(knob, value)) == value


def test_canonical_puts_inactive_knobs_at_default(space):
    config = space.canonical({"mode": "slow", "level": 17, "ratio": 0.123456})
    assert config["level"] == 5 and config["ratio"] == 0.123
    assert space.canonical({"mode": "fast", "level": 17})["level"] == 17
    assert space.key({"mode": "slow", "level": 17}) == space.key({"mode": "slow", "level": 3})


def test_a_log_scaled_float_keeps_significant_digits_near_its_small_bound():
    from nosqltune.knobs import load_space

    tuning = TuningSpace(load_space("cassandra").subset(["bloom_filter_fp_chance", "memtable_cleanup_threshold"]))
    config = tuning.canonical({"bloom_filter_fp_chance": 0.0012345, "memtable_cleanup_threshold": 0.123456})
    assert config == {"bloom_filter_fp_chance": 0.00123, "memtable_cleanup_threshold": 0.123}
    assert tuning.key({"bloom_filter_fp_chance": 0.0012}) != tuning.key({"bloom_filter_fp_chance": 0.001})
    assert tuning.canonical({"bloom_filter_fp_chance": 0.0512345})["bloom_filter_fp_chance"] == 0.0512


def test_knob_that_can_never_take_effect_is_left_out():
    from nosqltune.knobs import load_space

    tuning = TuningSpace(load_space("cassandra").subset("rafiki5"))
    assert "file_cache_size" in tuning.inert and "file_cache_size" not in tuning.names
    enabled = TuningSpace(load_space("cassandra").subset("rafiki5"), {"file_cache_enabled": True})
    assert "file_cache_size" in enabled.names


@pytest.mark.parametrize("optimizer", ["random", "gp", "smac"])
def test_same_seed_same_suggestions(space, optimizer, tmp_path):
    first = tune(space, optimizer, 7, 8, tmp_path)[1]
    second = tune(space, optimizer, 7, 8, tmp_path)[1]
    assert first == second


def test_smac_configspace_has_the_condition(space):
    from nosqltune.optimizers.smac_bo import configspace_of

    cs = configspace_of(space, 0)
    assert [p.name for p in cs.parents_of["level"]] == ["mode"]
    assert cs["threads"].log and not cs["ratio"].log


def test_smac_writes_in_the_studys_side_folder_not_the_machines_temporary_one(space, tmp_path, monkeypatch):
    """A tuner killed while SMAC runs leaves SMAC's folder behind: it must be one of ours, never /tmp."""
    import tempfile

    from nosqltune.optimizers import make_optimizer

    machine_tmp = tmp_path / "tmp"
    machine_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(machine_tmp))
    side = tmp_path / "study.tune.smac"
    smac = make_optimizer("smac", space, seed=1, budget=4, workloads=["w"], workdir=side)
    suggestion = smac.ask()
    smac.tell(suggestion, -analytic.throughput(suggestion.config))
    assert (side / "smac").is_dir() and not list(machine_tmp.iterdir())
    smac.close()
    assert not side.exists()       # made for SMAC alone, so taken away with its run history


def test_smac_asks_without_numpys_empty_mean_warning(space, tmp_path):
    """SMAC's local search averages its step times for a debug line also when it took no step: numpy's warning
    of it is not shown (it printed two lines of warnings every few trials of a study)."""
    import warnings

    import numpy as np

    from nosqltune.optimizers import make_optimizer

    smac = make_optimizer("smac", space, seed=1, budget=4, workloads=["w"], workdir=tmp_path / "smac")
    ask = smac.smac.ask
    smac.smac.ask = lambda: (np.mean(np.array([])), ask())[1]     # what SMAC's local search does
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        suggestion = smac.ask()
    assert set(suggestion.config) == set(space.names)
    smac.close()


def test_irace_parameters_file_has_types_log_and_conditions(space):
    text = parameters_file(space)
    lines = {line.split()[0]: line for line in text.splitlines() if not line.startswith("#")}
    assert lines["threads"] == 'threads "--threads=" i,log (1, 128)'
    assert lines["ratio"] == 'ratio "--ratio=" r (0.0, 1.0)'
    assert lines["mode"] == 'mode "--mode=" c ("slow", "medium", "fast")'
    assert lines["flag"] == 'flag "--flag=" c ("false", "true")'
    assert lines["level"].endswith('| mode == "fast"')
    table = configurations_file(space, [space.default()]).splitlines()
    assert table[0].split() == space.names
    assert table[1].split()[space.names.index("level")] == "NA"  # inactive under mode=slow


@needs_irace
def test_irace_accepts_the_parameters_of_every_cassandra_knob_set(tmp_path):
    # irace rounds real parameters to `digits` places and refuses a log domain that rounds to zero: v5's
    # bloom_filter_fp_chance (0.001-0.1, log) failed irace's own check at the 2 places of seed 001
    import subprocess

    from nosqltune.knobs import load_space

    full = load_space("cassandra")
    for name in full.knob_sets:
        space = TuningSpace(full.subset(name))
        d = tmp_path / name
        d.mkdir()
        (d / "parameters.txt").write_text(parameters_file(space))
        (d / "instances.txt").write_text("w\n")
        (d / "target-runner").write_text("#!/bin/sh\necho 1\n")
        (d / "target-runner").chmod(0o755)
        (d / "scenario.txt").write_text(f'parameterFile = "parameters.txt"\ntargetRunner = "./target-runner"\n'
                                        f'trainInstancesFile = "instances.txt"\nmaxExperiments = 100\n'
                                        f'digits = {digits_for(space)}\n')
        check = subprocess.run([irace_executable(), "--check", "--scenario", "scenario.txt"], cwd=d,
                               capture_output=True, text=True)
        assert check.returncode == 0 and "Check successful" in check.stdout, (name, check.stdout[-500:])
    assert digits_for(TuningSpace(full.subset(["bloom_filter_fp_chance"]))) == 3
    assert digits_for(TuningSpace(full.subset(["concurrent_reads"]))) == 2   # seed 001's places otherwise


def test_irace_race_settings_fit_the_budget():
    # irace's own defaults (nbIterations = minNbSurvival = floor(2 + log2(p)), firstTest 5) when they fit
    assert race_settings(23, 2000) == {"nbIterations": 6, "minNbSurvival": 6, "firstTest": 5, "mu": 5}
    for params, budget in [(4, 40), (23, 40), (7, 150), (23, 200), (2, 6)]:
        s = race_settings(params, budget)
        assert minimum_budget(s["nbIterations"], s["minNbSurvival"], s["firstTest"]) <= budget
    with pytest.raises(ValueError):
        race_settings(4, 5)


@needs_irace
def test_irace_races_workloads_as_instances(space, tmp_path):
    store = open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer="irace", workloads=["first", "second"], budget=40, seed=3,
                    objective={"metric": "throughput", "constraints": []})
    loop = TuningLoop(store, study, spec, space, analytic.runner, workdir=tmp_path / "irace")
    assert loop.run() == "optimizer finished"
    rows = store.trials(study)
    assert {r["meta"]["instance"] for r in rows} == {"first", "second"}
    assert rows[0]["config"] == space.canonical(space.default())  # the initial configuration (D-x)
    assert len(rows) <= 40
    assert all(r["meta"]["opt"]["irace_config"] >= 1 for r in rows)
    scenario = (tmp_path / "irace" / "scenario.txt").read_text()
    assert "maxExperiments = 40" in scenario and "digits = 2" in scenario


# ------------------------------------------------------------------------------------------------ cost-aware GP
def _cost_aware_run(tmp_path, cost_aware: bool, build_s: float = 300.0, run_s: float = 40.0, rounds: int = 14):
    """GP on an objective over a compression choice (a dataset-shaping knob) and a thread count, where each
    new compression costs a build: the suggestions and the machine time they took."""
    from nosqltune.knobs import load_space
    from nosqltune.optimizers import make_optimizer

    space = TuningSpace(load_space("cassandra").subset(["compression", "compression_chunk_length",
                                                        "concurrent_reads"]))
    gain = {"LZ4Compressor": 1.0, "ZstdCompressor": 1.02, "none": 0.98}

    def cost(c):   # a small gain from the dataset's shape, a larger one from the threads
        return -gain[c["compression"]] * (1.0 - ((c["concurrent_reads"] - 48) / 128) ** 2)

    gp = make_optimizer("gp", space, seed=4, budget=rounds + 1, workloads=["w"], workdir=tmp_path,
                        options={"initial": 4, "candidates": 300, "cost_aware": cost_aware})
    built, seconds, asked = set(), 0.0, []
    default = space.default()
    gp.observe(default, cost(default))
    built.add((default["compression"], default["compression_chunk_length"]))
    gp.spent(default, run_s + build_s, True)
    for _ in range(rounds):
        s = gp.ask()
        key = (s.config["compression"], s.config["compression_chunk_length"])
        took = run_s + (0.0 if key in built else build_s)
        built.add(key)
        gp.tell(s, cost(s.config))
        gp.spent(s.config, took, took > run_s)
        seconds += took
        asked.append(s.config)
    return asked, seconds, gp


def test_cost_aware_gp_builds_fewer_datasets_for_small_gains_and_keeps_to_its_seed(tmp_path):
    """Issue 42: EI per expected second. With builds 7.5x a trial and a dataset's shape worth at most 2%, the
    cost-aware GP asks for fewer new datasets than plain GP over the same rounds; the same seed gives the same
    suggestions; a configuration's expected time is a trial, plus a build when its dataset is new."""
    plain, plain_s, _ = _cost_aware_run(tmp_path / "plain", False)
    aware, aware_s, gp = _cost_aware_run(tmp_path / "aware", True)
    again, _, _ = _cost_aware_run(tmp_path / "again", True)
    assert aware == again
    shapes = lambda asked: len({(c["compression"], c["compression_chunk_length"]) for c in asked})  # noqa: E731
    assert shapes(aware) < shapes(plain) and aware_s < plain_s
    assert any(c["concurrent_reads"] != 32 for c in aware[4:])        # it still searches the threads
    seen = aware[-1]
    new = next(c for c in ({**seen, "compression": z, "compression_chunk_length": k}
                           for z in ("LZ4Compressor", "ZstdCompressor") for k in (4, 8, 16, 32, 64))
               if gp._dataset(c) not in gp._datasets)
    expected = gp.expected_seconds([seen, new])
    assert expected[0] < expected[1] and expected[1] - expected[0] > 200


def test_cost_aware_is_gps_and_refused_elsewhere(tmp_path, capsys):
    from nosqltune.cli import main

    for extra in (["--optimizer", "smac"], ["--optimizer", "gp", "--space-adapter", "llamatune"]):
        code = main(["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90",
                     "--budget", "6", "--study", str(tmp_path / "s.db"), "--cost-aware", *extra])
        assert code == 2 and "--cost-aware is gp's" in capsys.readouterr().err


def test_cost_aware_gp_knows_a_restaged_knob_needs_no_build_on_big_sstables(tmp_path):
    """Issue 42: the bloom filter's chance keys no dataset where restored big SSTables are brought to it, so the
    GP prices a change of it as a plain trial there, and as a build on bti (whose data is loaded with it)."""
    from nosqltune.knobs import load_space
    from nosqltune.optimizers import make_optimizer

    space = TuningSpace(load_space("cassandra").subset(["bloom_filter_fp_chance", "sstable_format"]))
    gp = make_optimizer("gp", space, seed=1, budget=10, workloads=["w"], workdir=tmp_path,
                        options={"cost_aware": True})
    big, bti = space.default(), {**space.default(), "sstable_format": "bti"}
    assert gp._dataset(big) == gp._dataset({**big, "bloom_filter_fp_chance": 0.05})
    assert gp._dataset(bti) != gp._dataset({**bti, "bloom_filter_fp_chance": 0.05})
