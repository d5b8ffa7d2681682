"""The surrogate pipeline on analytic functions and synthetic data: collection design, the knob codec, GA and
annealing, the ensemble's pruning, grouped splits, importance scoring, and the model-based strategies."""

import math
import random
from pathlib import Path

import numpy as np
import pytest

from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.optimizers import make_optimizer
from nosqltune.knobs.space import TuningSpace, categorical, choices_of
from nosqltune.surrogate.accuracy import grouped_splits, leave_one_group_out, scores
from nosqltune.surrogate.collect import design, done_entries, extremes, parse_ratios, plan_entries
from nosqltune.surrogate.importance import key_count, level_config, levels, score
from nosqltune.surrogate.models import NNEnsemble, TreeModel, load, save
from nosqltune.surrogate.search import Codec, anneal, genetic

from . import analytic


@pytest.fixture(scope="module")
def wide():
    return TuningSpace(load_space("cassandra").subset("wide24"))


@pytest.fixture(scope="module")
def mixed():
    return TuningSpace(analytic.space())


# ------------------------------------------------------------------------------------------- collection
def test_read_ratio_ranges():
    assert parse_ratios("0:1:0.25") == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert parse_ratios("0:1:0.1")[3] == 0.3 and len(parse_ratios("0:1:0.1")) == 11
    assert parse_ratios("0.9,0.1,0.5,0.5") == [0.1, 0.5, 0.9]
    for bad in ("0:2:0.5", "a,b", "0:1", "0:1:0", ""):
        with pytest.raises(Exception, match="--read-ratios"):
            parse_ratios(bad)


def test_design_has_default_first_and_every_extreme(wide):
    configs = design(wide, 30, seed=3)
    assert len(configs) == 30 and configs[0] == wide.default()
    assert all(c == wide.canonical(c) for c in configs)
    present = {(n, repr(v)) for c in configs for n, v in c.items() if wide.is_active(n, c)}
    missing = [e for e in extremes(wide) if (e[0], repr(e[1])) not in present]
    assert missing == []
    # conditional knobs got their extremes with the switch that makes them count
    assert any(c["file_cache_enabled"] is True and c["file_cache_size"] == 2048 for c in configs)
    assert design(wide, 30, seed=3) == configs and design(wide, 30, seed=4) != configs


def test_design_extends_without_changing_the_first(wide):
    first = design(wide, 12, seed=1)
    more = design(wide, 40, seed=1, existing=first)
    assert more[:12] == first and len(more) == 40
    present = {(n, repr(v)) for c in more for n, v in c.items() if wide.is_active(n, c)}
    assert all((n, repr(v)) in present for n, v in extremes(wide))


def test_plan_is_the_full_cross_plus_noise_and_extends_in_place():
    plan = plan_entries(4, ["r10", "r90"], 2, seed=1)
    keys = [(e["config"], e["workload"], e["repeat"]) for e in plan]
    assert len(keys) == len(set(keys)) == 4 * 2 + 2 * 2
    assert {(c, w) for c, w, r in keys if r == 0} == {(c, w) for c in range(4) for w in ("r10", "r90")}
    assert {(c, r) for c, _, r in keys if r} == {(0, 1), (0, 2)}
    assert keys != sorted(keys)  # shuffled: drift spreads over the design
    longer = plan_entries(6, ["r10", "r90", "r50"], 2, seed=1, existing=plan)
    assert longer[:len(plan)] == plan and len(longer) == 6 * 3 + 3 * 2
    rows = [{"meta": {"collect": plan[0]}, "state": "COMPLETE", "failure_kind": None},
            {"meta": {"collect": plan[1]}, "state": "FAIL", "failure_kind": "refused"},
            {"meta": {"collect": plan[2]}, "state": "FAIL", "failure_kind": "interrupted"}]
    assert done_entries(rows) == {keys[0], keys[1]}


# ------------------------------------------------------------------------------------------- codec, search
@pytest.mark.parametrize("which", ["wide", "mixed"])
def test_codec_rows_match_the_optimizers_encoding(which, request):
    space = request.getfixturevalue(which)
    codec = Codec(space, prefix=[0.25])
    genomes = codec.random(np.random.default_rng(0), 300)
    rows = codec.rows(genomes)
    for g, row in zip(genomes, rows):
        config = codec.config(g)
        assert config == space.canonical(config)
        assert np.allclose(row, [0.25] + space.encode(config))
        assert codec.config(codec.genome(config)) == config


def _quadratic(space):
    """A function of model rows with its maximum (0) at the analytic space's known best configuration."""
    best = {"threads": 24, "ratio": 0.7, "mode": "fast", "level": 14, "flag": True}
    target = np.array(space.encode(best))
    names = [k.name for k in space.knobs for _ in (choices_of(k) if categorical(k) else [0])]
    weight = np.array([0.0 if n.startswith("noise") else 1.0 for n in names])
    return best, lambda rows: -(((rows - target) ** 2) * weight).sum(axis=1)


@pytest.mark.parametrize("method", [genetic, anneal])
def test_search_finds_the_known_maximum(mixed, method):
    best, fn = _quadratic(mixed)
    codec = Codec(mixed)
    for seed in range(3):
        result = method(codec, fn, seed=seed)
        assert result.value > -1e-3, result
        assert {k: result.config[k] for k in ("threads", "mode", "level", "flag")} == \
            {k: best[k] for k in ("threads", "mode", "level", "flag")}
        assert abs(result.config["ratio"] - 0.7) < 0.02
        assert result.history == sorted(result.history) or method is genetic  # annealing keeps its best


def test_search_respects_bounds_types_and_conditions(mixed):
    # a function that rewards leaving the ranges and wants `level` high whatever `mode` says
    codec = Codec(mixed)
    level_col = sum(len(choices_of(k)) if categorical(k) else 1 for k in mixed.knobs[:mixed.names.index("level")])
    result = genetic(codec, lambda rows: rows.sum(axis=1) + 5 * rows[:, level_col], seed=0)
    config = result.config
    for knob in mixed.knobs:
        value = config[knob.name]
        if categorical(knob):
            assert value in choices_of(knob)
        else:
            assert knob.range[0] <= value <= knob.range[1]
            assert isinstance(value, int) == (knob.type == "int")
    assert config["mode"] == "fast" and config["level"] == 20  # level only counts (and is encoded) under fast


def test_genetic_penalizes_infeasible_genomes(mixed):
    codec = Codec(mixed)
    inside = codec.genome(mixed.default())
    outside = inside.copy()
    outside[0] = codec.hi[0] + 1.0
    fractional = inside.copy()
    fractional[mixed.names.index("level")] += 0.45
    pen = codec.penalty(np.array([inside, outside, fractional]))
    assert pen[0] == pytest.approx(0.0, abs=1e-12) and pen[1] > 0 and pen[2] > 0


# ------------------------------------------------------------------------------------------- models
def _analytic_data(space, n, seed):
    rng = random.Random(seed)
    configs = [space.sample(rng) for _ in range(n)]
    return np.array([space.encode(c) for c in configs]), np.array([analytic.throughput(c) for c in configs])


def test_ensemble_drops_the_worst_nets_and_averages_the_rest(mixed):
    X, y = _analytic_data(mixed, 60, 0)
    model = NNEnsemble(nets=10, drop=0.3, seed=1).fit(X, y)
    assert len(model.weights) == 7 and len(model.train_errors) == 10
    assert model.train_errors == sorted(model.train_errors)
    Z = model.x_scale(X[:5])
    by_hand = np.exp(np.mean([model._forward(w, Z) for w in model.weights], axis=0) * model.t_sd + model.t_mean)
    assert np.allclose(model.predict(X[:5]), by_hand)
    # the kept nets fit better than the dropped ones
    kept = [float(np.sqrt(np.mean((model._forward(w, model.x_scale(X)) - (np.log(y) - model.t_mean) / model.t_sd) ** 2)))
            for w in model.weights]
    assert max(kept) <= model.train_errors[7] + 1e-9


def test_forest_prediction_is_sklearns_own():
    """The forest's tree-by-tree mean (fast for the searches' small batches) is what sklearn predicts."""
    rng = np.random.default_rng(3)
    X, weights = rng.random((60, 6)), rng.random(6)
    model = TreeModel("rf", tune=False, trees=40).fit(X, np.exp(X @ weights))
    rows = rng.random((25, 6))
    assert np.allclose(model.predict(rows), np.exp(model.model.predict(rows)), rtol=1e-12)
    assert model.predict(rows[0]).shape == (1,)


@pytest.mark.parametrize("make", [lambda: NNEnsemble(nets=8, seed=0), lambda: TreeModel("rf", tune=False),
                                  lambda: TreeModel("gbdt")])
def test_models_learn_an_analytic_function(mixed, make, tmp_path):
    X, y = _analytic_data(mixed, 200, 1)
    Xt, yt = _analytic_data(mixed, 200, 2)
    model = make().fit(X, y, groups=list(range(len(X))))
    assert scores(np.log(yt), np.log(model.predict(Xt)))["r2"] > 0.75
    save(tmp_path / "m", model, {"kind": "x"})
    again, meta = load(tmp_path / "m")
    assert np.allclose(again.predict(Xt[:3]), model.predict(Xt[:3])) and meta == {"kind": "x"}


def test_scores_against_hand_computed_values():
    s = scores(np.array([100.0, 200.0, 300.0]), np.array([110.0, 190.0, 300.0]))
    assert s["mape"] == pytest.approx((10 / 100 + 10 / 200) / 3 * 100)
    assert s["rmse"] == pytest.approx(math.sqrt(200 / 3))
    assert s["r2"] == pytest.approx(1 - 200 / 20000)


def test_grouped_splits_keep_groups_apart():
    groups = [f"c{i % 13}" for i in range(130)]
    for train, test in grouped_splits(groups, repeats=6, seed=2):
        assert not {groups[i] for i in train} & {groups[i] for i in test}
        assert len(train) + len(test) == 130 and len(test) > 0
    folds = leave_one_group_out(["a", "b", "a", "c"])
    assert [sorted(test.tolist()) for _, test in folds] == [[0, 2], [1], [3]]


# ------------------------------------------------------------------------------------------- importance
def test_levels_cover_range_and_choices_not_the_default(wide):
    lv = levels(wide, 4)
    by_knob = {}
    for name, value in lv:
        by_knob.setdefault(name, []).append(value)
    assert by_knob["concurrent_writes"][0] == 8 and by_knob["concurrent_writes"][-1] == 64
    assert 32 not in by_knob["concurrent_writes"]  # the default is the baseline trial
    assert by_knob["compaction_method"] == ["Leveled"]
    assert by_knob["memtable_allocation_type"] == ["offheap_buffers", "offheap_objects"]
    config, enabled = level_config(wide, "file_cache_size", 2048)
    assert config["file_cache_size"] == 2048 and enabled == ["file_cache_enabled"] and config["file_cache_enabled"]


def test_anova_scores_rank_by_spread_and_cut_at_the_largest_drop():
    measured = {"a": {1: [100.0], 2: [140.0]}, "b": {1: [101.0], 2: [99.0]}, "c": {1: [60.0], 2: [130.0]},
                "d": {1: [100.0]}}
    ranked = score([100.0], measured)
    assert [r["knob"] for r in ranked] == ["c", "a", "b", "d"]
    assert ranked[0]["score"] == pytest.approx(np.std([100, 60, 130]))
    assert ranked[-1]["score"] == 0.0 and ranked[0]["best_level"] == 2
    assert key_count([r["score"] for r in ranked]) == 2
    assert key_count([10.0, 1.0, 0.9]) == 1 and key_count([5.0]) == 1


# ------------------------------------------------------------------------------------------- strategies
def _run(name, space, seed, budget=25):
    opt = make_optimizer(name, space, seed=seed, budget=budget, workloads=["w"], workdir=Path("/nonexistent"))
    default = space.default()
    opt.observe(default, -analytic.throughput(default))
    best, seen = analytic.throughput(default), []
    for _ in range(budget - 1):
        suggestion = opt.ask()
        assert suggestion.config == space.canonical(suggestion.config)
        seen.append(space.key(suggestion.config))
        value = analytic.throughput(suggestion.config)
        opt.tell(suggestion, -value)
        best = max(best, value)
    return best, seen


@pytest.mark.slow
def test_surrogate_annealing_beats_random_search(mixed):
    sa = [_run("surrogate-sa", mixed, seed)[0] for seed in range(4)]
    rnd = [_run("random", mixed, seed)[0] for seed in range(4)]
    assert sum(sa) / 4 > sum(rnd) / 4, (sa, rnd)


def test_rafiki_strategy_suggests_new_valid_configurations(mixed):
    best, seen = _run("rafiki", mixed, 0, budget=12)
    assert len(set(seen)) == len(seen)  # every trial measures something new
    assert best > analytic.throughput(mixed.default())


# ------------------------------------------------------------------------------------------- surrogate target
def test_a_model_being_fitted_elsewhere_is_waited_for_and_read_not_fitted_again(tmp_path, monkeypatch):
    """Two processes that need the same model: the second waits on the first's lock and reads its file. The first
    process here is the test, which holds the lock and then writes a stand-in model; a second fit would fail."""
    import fcntl
    import pickle
    import threading

    from nosqltune.surrogate import pipeline
    from nosqltune.surrogate.dataset import SurrogateTarget

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(tmp_path))
    monkeypatch.setattr(pipeline, "fit", lambda *a, **k: pytest.fail("fitted a model another process was fitting"))
    target = SurrogateTarget("wide24", seed=3)
    cache = tmp_path / "surrogates" / f"{target.data_hash}.throughput.rf.3.pkl"
    cache.parent.mkdir(parents=True)
    got = {}
    with open(cache.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        reader = threading.Thread(target=lambda: got.setdefault("model", target._model("throughput")))
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and not got             # waiting for the lock, not fitting
        cache.write_bytes(pickle.dumps(("stand-in model", 0.02)))
    reader.join(10)
    assert got["model"] == "stand-in model" and target._noise["throughput"] == 0.02


def test_surrogate_target_tune_compare_export(tmp_path, capsys, monkeypatch, surrogate_cache):
    """The recorded dataset as a target: a tuning run in seconds, its best compared with the default on the same
    surrogate (paired rounds, statistics stored in the study), the trials exported."""
    import csv
    import io
    import json

    from nosqltune.cli import main
    from nosqltune.store import open_store
    from nosqltune.surrogate.dataset import SurrogateTarget

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    target = SurrogateTarget("wide24", seed=0)
    from nosqltune.workloads.spec import make_workload

    w = make_workload("read90").to_dict()
    default = target.space.default()
    noiseless = target.predict("throughput", default, w)
    draws = [target.run(default, w).summary["throughput_ops_s"] for _ in range(40)]
    assert noiseless > 0 and len(set(draws)) == 40
    assert 0.005 < np.std(np.log(draws)) < 0.15          # the dataset's measured noise, a few percent
    assert target.predict("throughput", default, make_workload("read10").to_dict()) != noiseless

    study = tmp_path / "s.db"
    code = main(["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90",
                 "--optimizer", "random", "--budget", "12", "--study", str(study), "--json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert code == 0 and result["trials"] == 12 and result["best"]["value"] > 0
    progress = [json.loads(line) for line in captured.err.splitlines()]    # --json: progress as JSON lines
    assert sum(p["progress"].startswith("[") for p in progress) == 12 and all("time" in p for p in progress)
    (env,) = open_store(str(study)).environments().values()
    assert env["system"] == "surrogate" and (surrogate_cache / "surrogates").exists()

    code = main(["compare", "--study", str(study), "--repeat", "4", "--json"])
    comparison = json.loads(capsys.readouterr().out)
    stats = comparison["workloads"]["read90"]["stats"]["best"]
    assert code == 0 and comparison["system"] == "surrogate:wide24" and stats["pairs"] == 4
    assert stats["verdict"] in ("better", "no significant difference", "worse")
    rows = open_store(str(study)).trials()
    assert sum(r["tag"] == "compare" for r in rows) == 8 and len(rows) == 20
    assert not comparison["workloads"]["read90"]["machines"]["apart"]

    # rounds resumed on a machine twice as slow (the probe and the default's CPU per operation, stored with each
    # run): the comparison, which runs nothing more, says its pairs span two machines
    import sqlite3

    with sqlite3.connect(study) as db:
        for trial_id, meta in db.execute("SELECT id, meta FROM trials WHERE tag = 'compare'").fetchall():
            slow = json.loads(meta)["round"] >= 2
            db.execute("UPDATE trials SET started_at = started_at + ?, internals = ?, metrics = json_set(metrics, "
                       "'$.summary.node_cpu_us_per_op', ?) WHERE id = ?",
                       (86_400 * 2 * slow, json.dumps({"machine_probe": {"cpu_mb_s": 1000 if slow else 2000}}),
                        500 if slow else 250, trial_id))
    assert main(["compare", "--study", str(study), "--repeat", "4"]) == 0
    said = capsys.readouterr().out
    assert "machines: figures from machines whose speeds differ x2.00" in said

    # a run that fails makes the comparison exit 1, as a failed trial does in bench and tune; what completed is shown
    from nosqltune.systems.base import TrialResult

    real = SurrogateTarget.run_trial
    calls = []

    def second_fails(self, *a, **kw):
        calls.append(1)
        if len(calls) == 2:
            return TrialResult(state="FAIL", failure_kind="crashed", error="the node died (test)")
        return real(self, *a, **kw)

    monkeypatch.setattr(SurrogateTarget, "run_trial", second_fails)
    code = main(["compare", "--study", str(study), "--repeat", "2", "--scale", "2", "--json"])
    captured = capsys.readouterr()
    assert code == 1 and "1 of 4 comparison runs failed" in captured.err
    assert json.loads(captured.out)["workloads"]["read90"]["stats"]["best"]["pairs"] == 1
    monkeypatch.setattr(SurrogateTarget, "run_trial", real)

    code = main(["export", "--study", str(study), "--format", "csv"])
    records = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert code == 0 and len(records) == 24
    assert {"knob.concurrent_writes", "metric.throughput_ops_s", "workload", "meta.candidate"} <= set(records[0])

    # a later `tune --resume` keeps the stored comparison that `report` reads (the store merges settings)
    before = open_store(str(study)).find_study("tune")["settings"]
    assert set(before) >= {"tune", "compare"}
    code = main(["tune", "--study", str(study), "--resume", "--budget", "14", "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["trials"] == 14
    after = open_store(str(study)).find_study("tune")["settings"]
    assert after["compare"] == before["compare"] and after["tune"]["spec"]["budget"] == 14


SLOW = pytest.mark.slow   # 15 s each: make test-all (make test keeps GP through the command, rafiki's suggestions above
# and surrogate-sa's in tests/unit/test_parallel.py and test_knob_rules.py)


@pytest.mark.parametrize("optimizer, extra", [("gp", []), pytest.param("rafiki", ["--initial", "2"], marks=SLOW),
                                              pytest.param("surrogate-sa", [], marks=SLOW)])
def test_model_based_optimizers_tune_the_surrogate_target(tmp_path, capsys, monkeypatch, optimizer, extra, surrogate_cache):
    """The model-based strategies through the whole `tune` command, against the recorded surrogate (the real
    Cassandra runs of the other families are in tests/integration/test_tune.py)."""
    import json

    from nosqltune.cli import main
    from nosqltune.store import open_store

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    study = tmp_path / f"{optimizer}.db"
    code = main(["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90",
                 "--optimizer", optimizer, "--budget", "6", "--study", str(study), "--json", *extra])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["trials"] == 6
    rows = open_store(str(study)).trials()
    assert len(rows) == 6 and all(r["state"] == "COMPLETE" for r in rows)
    assert rows[0]["meta"]["kind"] == "default" and all(r["meta"]["optimizer"] == optimizer for r in rows)
    assert len({json.dumps(r["config"], sort_keys=True) for r in rows}) == 6      # every trial measures something new
    assert result["best"]["value"] == max(r["metrics"]["summary"]["throughput_ops_s"] for r in rows)
    if optimizer == "rafiki":   # past its initial random configurations, the neural-net ensemble suggests
        phases = [(r["meta"].get("opt") or {}).get("phase") for r in rows]
        assert phases.count("model") >= 1, phases


# ------------------------------------------------------------------------------- tuning domains (seed 004)
def _design_store(path, knobs, searched=False):
    """Trials of two workloads on two designs (fixed per study harness, or searched: in the configuration),
    throughput falling with the node count and rising with concurrent_writes."""
    from nosqltune.store import open_store
    from nosqltune.systems.base import CassandraSettings, TrialSettings

    store = open_store(str(path))
    study = store.study("tune", "cassandra")
    store.update_study_settings(study, {"tune": {"knobs": knobs, "fixed": {},
                                                 "harness": TrialSettings().to_dict()}})
    for ratio in (0.1, 0.9):
        for nodes in (1, 2):
            for writes in (8, 16, 32, 48, 64, 96):
                config = {"concurrent_writes": writes, **({"nodes": nodes} if searched else {})}
                harness = TrialSettings(datastore=CassandraSettings(nodes=1 if searched else nodes,
                                                                    replication_factor=1 if searched else nodes))
                workload = {"name": f"read{round(ratio * 100)}-zipfian", "harness": harness.to_dict(),
                            "mix": {"readproportion": ratio, "updateproportion": 1 - ratio}}
                trial = store.start_trial(study, config, workload, tag="tune")
                value = 5000.0 / nodes * (1 + writes / 200) * (1 + ratio)
                store.finish_trial(trial, "COMPLETE", metrics={"summary": {"throughput_ops_s": value}})
    store.close()
    return str(path)


def test_tuning_domains_choose_features_and_trials(tmp_path):
    """TD1 sees workload, design and knobs; TD2 drops the workload (the trials of one), TD3 the design (the
    trials of one), TD4 both (seed 004, Table 3)."""
    from nosqltune.errors import UsageError
    from nosqltune.surrogate.features import load_table

    path = _design_store(tmp_path / "fixed.db", ["concurrent_writes"])
    both = {"workload": "read90-zipfian", "design": {"nodes": 2, "replication_factor": 2}}
    expected = {"TD1": (["read_ratio", "nodes", "replication_factor", "concurrent_writes"], {}, 24),
                "TD2": (["nodes", "replication_factor", "concurrent_writes"], {"workload": both["workload"]}, 12),
                "TD3": (["read_ratio", "concurrent_writes"], {"design": both["design"]}, 12),
                "TD4": (["concurrent_writes"], both, 6)}
    for domain, (names, given, rows) in expected.items():
        table = load_table(path, domain=domain, **given)
        assert (table.spec.names(), len(table.X), table.X.shape[1]) == (names, rows, len(names)), domain
    td4 = load_table(path, domain="TD4", **both)
    assert set(td4.workloads) == {"read90-zipfian"} and td4.spec.scope["design"] == both["design"]
    assert td4.spec.scope["read_ratio"] == 0.9
    for domain, given, message in (("TD2", {}, "pick one with --workload"), ("TD3", {}, "pick one with --nodes"),
                                   ("TD1", {"workload": "read90-zipfian"}, "--workload goes with TD2 or TD4"),
                                   ("TD2", {"workload": "ycsb-a"}, "no trial of workload 'ycsb-a'"),
                                   ("TD3", {"design": {"nodes": 3}}, "no trial on"), ("TD5", {}, "unknown tuning")):
        with pytest.raises(UsageError, match=message):
            load_table(path, domain=domain, **given)


def test_range_scans_are_a_feature_of_a_model_whose_data_has_them(tmp_path):
    """An update-only mix and a scan-heavy one have the same read ratio (0): with scans in the data the rows carry
    the scan ratio too, so the model tells them apart (here concurrent_writes helps the one and hurts the other),
    and the online advisor gives it the scan share it observes. Data without scans keeps its old columns."""
    from nosqltune.store import open_store
    from nosqltune.surrogate.features import FeatureSpec, load_table, workload_features
    from nosqltune.surrogate.pipeline import fit
    from nosqltune.systems.base import TrialSettings

    mixes = {"updates": {"readproportion": 0, "updateproportion": 1.0},
             "scans": {"readproportion": 0, "scanproportion": 0.5, "updateproportion": 0.5}}
    store = open_store(str(tmp_path / "scan.db"))
    study = store.study("collect", "cassandra")
    store.update_study_settings(study, {"collect": {"knobs": ["concurrent_writes"], "fixed": {},
                                                    "harness": TrialSettings().to_dict()}})
    for name, mix in mixes.items():
        for writes in (8, 16, 24, 32, 48, 64, 80, 96):
            trial = store.start_trial(study, {"concurrent_writes": writes}, {"name": name, "mix": mix}, tag="collect")
            value = 4000.0 * (1 + writes / 100) if name == "updates" else 4000.0 * (1 - writes / 200)
            store.finish_trial(trial, "COMPLETE", metrics={"summary": {"throughput_ops_s": value}})
    store.close()
    assert workload_features({"mix": mixes["scans"]})["scan_ratio"] == 0.5
    assert workload_features({"mix": mixes["updates"]})["read_ratio"] == workload_features({"mix": mixes["scans"]})[
        "read_ratio"] == 0.0
    table = load_table(str(tmp_path / "scan.db"))
    assert table.spec.scans and table.spec.names() == ["read_ratio", "scan_ratio", "concurrent_writes"]
    assert FeatureSpec.from_dict(table.spec.to_dict()).scans
    model, _ = fit(table, "rf", "throughput")
    space = table.spec.space()

    def predicted(name, writes):
        row = table.spec.row(space, {"concurrent_writes": writes}, workload_features({"mix": mixes[name]}))
        return float(model.predict([row])[0])

    assert predicted("updates", 96) > predicted("updates", 8) and predicted("scans", 96) < predicted("scans", 8)
    # a store without scans: the columns it always had, and a spec stored before the field still reads
    old = FeatureSpec.from_dict({k: v for k, v in table.spec.to_dict().items() if k != "scans"})
    assert not old.scans and old.names() == ["read_ratio", "concurrent_writes"]
    assert load_table(_design_store(tmp_path / "plain.db", ["concurrent_writes"])).spec.scans is False


def test_a_searched_design_leaves_the_space_in_td3(tmp_path):
    from nosqltune.surrogate.features import load_table

    path = _design_store(tmp_path / "searched.db", {"knobs": {"concurrent_writes": None, "nodes": {"range": [1, 3]}}},
                         searched=True)
    td1 = load_table(path)
    assert td1.spec.names() == ["read_ratio", "concurrent_writes", "nodes"] and len(td1.X) == 24
    td3 = load_table(path, domain="TD3", design={"nodes": 2})
    assert td3.spec.names() == ["read_ratio", "concurrent_writes"] and len(td3.X) == 12
    assert "nodes" not in td3.spec.space().names      # the stored spec rebuilds the same space
    from nosqltune.store import open_store

    on_two = sorted(r["id"] for r in open_store(path).trials() if r["config"]["nodes"] == 2)
    assert sorted(td3.trial_ids) == on_two


@pytest.mark.slow   # 19 s: make test-all (make test keeps the TD2 and TD3 models above)
def test_a_td4_model_recommends_for_its_own_workload_only(tmp_path, capsys):
    import json

    from nosqltune.cli import main

    path = _design_store(tmp_path / "fixed.db", ["concurrent_writes"])
    model = tmp_path / "td4.model"
    assert main(["model", "fit", "--study", path, "--kind", "rf", "--domain", "TD4", "--workload", "read90-zipfian",
                 "--nodes", "2", "--rf", "2", "--out", str(model)]) == 0
    assert "tuning domain TD4 (workload read90-zipfian, 2 node(s), RF 2), 1 features" in capsys.readouterr().out
    assert main(["recommend", "--model", str(model), "--search", "anneal", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["workload"] == "read90-zipfian" and rec["read_ratio"] == 0.9
    assert rec["config"]["concurrent_writes"] > 32 and rec["predicted_gain"] > 1   # more writers (default 32) gain
    assert main(["recommend", "--model", str(model), "--workload", "read10"]) == 2
    assert "fitted on workload read90-zipfian (read ratio 0.9) only" in capsys.readouterr().err
    assert main(["model", "report", "--study", path, "--kinds", "rf", "--repeats", "2", "--domain", "TD2",
                 "--workload", "read10-zipfian", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["domain"], report["trials"], report["features"]) == ("TD2", 12, 3)


def test_best_confirm_remeasures_the_top_configurations(tmp_path, capsys, monkeypatch, surrogate_cache):
    """`best --confirm`: the top K by single runs and the default re-measured in R interleaved rounds (stored,
    resumable); the best is the best mean, shown with its interval, and `best` says whether it is confirmed."""
    import json

    from nosqltune.cli import main
    from nosqltune.store import open_store

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    study = tmp_path / "confirm.db"
    assert main(["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90",
                 "--optimizer", "random", "--budget", "8", "--study", str(study), "--json"]) == 0
    single = json.loads(capsys.readouterr().out)["best"]
    assert main(["best", "--study", str(study)]) == 0
    assert "NOT CONFIRMED" in capsys.readouterr().out
    assert main(["best", "--study", str(study), "--format", "yaml"]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    assert f"best {single['value']:.6g} ops/s over 1 trial(s)" in header
    assert header.endswith("(single cold runs)") or "%" not in header   # a ratio is said to be of single runs

    assert main(["best", "--study", str(study), "--confirm", "--top", "2", "--rounds", "3", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    confirm = result["confirm"]
    assert list(confirm["candidates"]) == ["default", "top1", "top2"] and confirm["trials"] == 9
    assert confirm["candidates"]["top1"]["single_run"] >= confirm["candidates"]["top2"]["single_run"]
    assert single["value"] >= confirm["candidates"]["top1"]["single_run"]   # the default may be the single best
    rows = [r for r in open_store(str(study)).trials() if r["tag"] == "compare"]
    assert len(rows) == 9 and {r["meta"]["group"] for r in rows} == {"confirm-after-8:read90"}
    chosen = confirm["candidates"][confirm["best"]]     # the best mean, the default's included
    assert chosen["mean"] == max(c["mean"] for c in confirm["candidates"].values()) and len(chosen["values"]) == 3
    assert chosen["mean"] == pytest.approx(sum(chosen["values"]) / 3)
    lo, hi = chosen["interval"]
    assert lo < chosen["mean"] < hi
    assert result["best"]["confirmed"] and result["best"]["value"] == chosen["mean"]
    assert confirm["best"] == "default" or confirm["vs_default"]["pairs"] == 3

    # stored and resumable: confirming again runs nothing new; `best` shows the confirmed best
    assert main(["best", "--study", str(study), "--confirm", "--top", "2", "--rounds", "3"]) == 0
    out = capsys.readouterr().out
    assert len([r for r in open_store(str(study)).trials() if r["tag"] == "compare"]) == 9
    assert "confirmed: mean of interleaved cold rounds" in out and "<- confirmed best" in out
    # the YAML fragment's header says what its figure is: a confirmed mean against the default's in the same rounds
    assert main(["best", "--study", str(study), "--format", "yaml"]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    assert f"best {chosen['mean']:.6g} " in header and "the mean of its confirmation's interleaved cold rounds" in header
    assert "single cold runs" not in header and "trial(s)" not in header
    assert main(["best", "--study", str(study), "--confirm", "--rounds", "1"]) == 2
    capsys.readouterr()
    # compare takes the confirmed best and says so
    assert main(["compare", "--study", str(study), "--repeat", "2", "--json"]) == 0
    comparison = json.loads(capsys.readouterr().out)
    assert comparison["best_is"].startswith("the confirmed best")
    assert comparison["candidates"]["best"] == chosen["config"]
    assert main(["report", "--study", str(study), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "confirmed best of study tune" in page

    # confirmed again another way (a warm-up by time): the stored rounds are not reused, and it says why
    assert main(["best", "--study", str(study), "--confirm", "--top", "2", "--rounds", "3", "--warmup-seconds", "30",
                 "--json"]) == 0
    err = capsys.readouterr().err
    assert "the stored confirmation ran as confirm-after-8 " in err and "confirming anew as confirm-after-8-warm30s" in err
    assert len([r for r in open_store(str(study)).trials() if r["tag"] == "compare"]) == 9 + 9 + 2 * 2


def test_tune_ends_with_a_confirmation_counted_in_its_budget(tmp_path, capsys, monkeypatch, surrogate_cache):
    import json

    from nosqltune.cli import main
    from nosqltune.evaluation.confirmation import CONFIRM_ROUNDS, CONFIRM_TOP, asked_confirmation, confirm_plan
    from nosqltune.store import open_store

    assert confirm_plan(60, 1, 3, 3) == {"top": 3, "rounds": 3, "trials": 12, "search_budget": 48, "skipped": None}
    assert confirm_plan(20, 1, 3, 3)["search_budget"] == 20 and "under twice" in confirm_plan(20, 1, 3, 3)["skipped"]
    assert confirm_plan(60, 2, 0, 3) == {"top": 0, "rounds": 3, "trials": 0, "search_budget": 60, "skipped": None}
    # a new study asks the defaults; a resumed one what it stored (none if stored before confirmations existed)
    assert asked_confirmation(None) == {"top": CONFIRM_TOP, "rounds": CONFIRM_ROUNDS}
    assert asked_confirmation({"spec": {}}) == {"top": 0, "rounds": CONFIRM_ROUNDS}
    assert asked_confirmation({"confirm": {"top": 2, "rounds": 4}}, rounds=5) == {"top": 2, "rounds": 5}
    assert asked_confirmation(None, top=0) == {"top": 0, "rounds": CONFIRM_ROUNDS}
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    study = tmp_path / "end.db"
    assert main(["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90",
                 "--optimizer", "random", "--budget", "14", "--confirm-top", "2", "--confirm-rounds", "2",
                 "--study", str(study), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = open_store(str(study)).trials()
    assert sum(r["tag"] == "tune" for r in rows) == 8 and sum(r["tag"] == "compare" for r in rows) == 6
    assert result["confirm_plan"]["search_budget"] == 8 and result["best"]["confirmed"]
    assert result["confirm"]["candidates"][result["confirm"]["best"]]["mean"] == result["best"]["value"]
    # the budget of a resumed study still holds the confirmation: nothing more runs
    assert main(["tune", "--study", str(study), "--resume", "--json"]) == 0
    capsys.readouterr()
    assert len(open_store(str(study)).trials()) == 14


def test_a_surrogate_study_searches_its_knobs_as_the_dataset_recorded_them(tmp_path, capsys, monkeypatch,
                                                                          surrogate_cache):
    """wide24 was measured with SizeTiered and Leveled compaction; Cassandra's space has UnifiedCompaction since.
    A study on the surrogate searches the recorded choices (it asked for UnifiedCompaction and stopped before),
    and the datastore's named knob sets still resolve."""
    import json

    from nosqltune.cli import main
    from nosqltune.systems import TrialSettings
    from nosqltune.tuning.workers import search_space

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    settings = TrialSettings()
    assert "UnifiedCompaction" in search_space(settings)["compaction_method"].choices
    recorded = search_space(settings, "surrogate:wide24")
    assert recorded["compaction_method"].choices == ("SizeTiered", "Leveled")
    assert set(recorded.subset("rafiki5").knobs) <= set(recorded.knobs)
    code = main(["tune", "--system", "surrogate:wide24", "--read-ratio", "0.9", "--optimizer", "random", "--seed",
                 "0", "--budget", "30", "--confirm-top", "0", "--study", str(tmp_path / "s.db"), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["trials"] == 30 and result["failed_trials"] == 0


def test_a_dataset_recorded_on_a_capped_node_loads_with_the_heap_it_ran_with(tmp_path):
    """cloud-disk's collection searches heap_size over [512, 1280] (its memory cap) beside a 1 GiB default heap:
    rebuilt with the knob file's 2 GiB default that range was refused, so no cloud-disk dataset could be loaded."""
    import gzip
    import json
    import random

    from nosqltune.cli import build_parser
    from nosqltune.cli.harness import trial_settings
    from nosqltune.knobs.knob import KnobError
    from nosqltune.surrogate.features import FeatureSpec, load_table
    from nosqltune.workloads.spec import make_workload

    harness = trial_settings(build_parser().parse_args(["bench", "--scenario", "cloud-disk"])).to_dict()
    knobs = {"set": "cloud", "knobs": {"heap_size": {"range": [512, 1280]}}}
    with pytest.raises(KnobError):
        FeatureSpec(knobs=knobs).space()                     # what loading did before
    rng = random.Random(4)
    workload = make_workload(read_ratio=0.95).to_dict()
    trials = [{"id": i, "config": {"heap_size": rng.choice([512, 768, 1024, 1280]), "concurrent_reads": 8 * (i + 1)},
               "workload": workload, "metrics": {"summary": {"throughput_ops_s": rng.uniform(1000, 2000)}}}
              for i in range(12)]
    path = tmp_path / "capped.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"name": "capped", "knobs": knobs, "fixed": {}, "system": "cassandra", "harness": harness,
                   "trials": trials}, fh)
    table = load_table(str(path))
    assert table.spec.defaults == {"heap_size": 1024} and len(table.configs) == 12
    space = FeatureSpec.from_dict(table.spec.to_dict()).space()    # as a fitted model's stored spec rebuilds it
    assert space.default()["heap_size"] == 1024 and space.by_name["heap_size"].range == (512, 1280)


def test_a_surrogate_refuses_a_search_wider_than_its_dataset_measured(tmp_path, capsys, monkeypatch,
                                                                      surrogate_cache):
    """A named knob set may widen a knob past what the dataset measured (eppinger's concurrent_writes [2, 256]
    against wide24's [8, 64]): the model would extrapolate, so the search is refused before any trial."""
    from nosqltune.cli import main
    from nosqltune.surrogate.dataset import SurrogateTarget
    from nosqltune.systems import TrialSettings
    from nosqltune.tuning.workers import search_space

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    target = SurrogateTarget("wide24")
    recorded = search_space(TrialSettings(), "surrogate:wide24")
    wide = recorded.subset("eppinger").subset(["concurrent_writes"])
    assert wide["concurrent_writes"].range[1] > target.space.knob_space["concurrent_writes"].range[1]
    with pytest.raises(UsageError, match="measured concurrent_writes over"):
        target.check_searched(wide, {})
    with pytest.raises(UsageError, match="has no data for num_tokens"):
        target.check_searched(recorded.subset(["concurrent_reads"]), {"num_tokens": 16})
    target.check_searched(recorded.subset("wide24"), {})          # its own set, as recorded: searched
    code = main(["tune", "--system", "surrogate:wide24", "--knobs", str(_knob_file(tmp_path, "concurrent_reads")),
                 "--read-ratio", "0.9", "--budget", "2", "--confirm-top", "0", "--study", str(tmp_path / "s.db")])
    assert code == 0
    capsys.readouterr()


def test_a_surrogate_refuses_a_request_distribution_its_dataset_never_recorded(tmp_path, capsys, monkeypatch,
                                                                                surrogate_cache):
    """cloud13 recorded cloud-disk's uniform requests only: a zipfian run (tune's default without a scenario) is
    refused in one line before any trial, instead of answered as if it were uniform; uniform is answered, over
    every knob the dataset recorded."""
    from nosqltune.cli import main

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    argv = ["tune", "--system", "surrogate:cloud13", "--read-ratio", "0.95", "--budget", "2", "--confirm-top", "0"]
    assert main([*argv, "--study", str(tmp_path / "z.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert "recorded uniform requests only" in err and "--distribution uniform" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "z.db").exists()
    assert main([*argv, "--distribution", "uniform", "--study", str(tmp_path / "u.db")]) == 0
    # its knobs searched as recorded: read_ahead_kb too, though this run has no volume (the recorded trials had)
    assert "left out of the search" not in capsys.readouterr().err


def _knob_file(tmp_path, *names):
    path = tmp_path / "knobs.yaml"
    path.write_text("knobs: [" + ", ".join(names) + "]\n")
    return path


def test_a_collection_runs_each_data_shape_together_and_spreads_the_noise_repeats():
    """collect's shuffled plan, reordered so each dataset is built once: every shape's entries contiguous, in the
    order the shapes first appear, the same entries, the default's noise repeats spread over the whole span."""
    from nosqltune.surrogate.collect import by_data_shape

    configs = [{"compression": c, "heap": h} for c in ("lz4", "zstd", "none") for h in (1, 2, 3)]
    plan = plan_entries(len(configs), ["read50", "read95"], 4, seed=3)
    ordered = by_data_shape(plan, configs, lambda config: config["compression"])
    assert sorted(map(repr, ordered)) == sorted(map(repr, plan)) and len(ordered) == len(plan)
    shapes = [configs[e["config"]]["compression"] for e in ordered if not e["repeat"]]
    runs = [s for i, s in enumerate(shapes) if i == 0 or s != shapes[i - 1]]
    first_seen = list(dict.fromkeys(configs[e["config"]]["compression"] for e in plan if not e["repeat"]))
    assert runs == first_seen                                 # each shape once, in the shuffle's order
    noise = [i for i, e in enumerate(ordered) if e["repeat"]]
    assert len(noise) == 8 and noise[0] > 0 and noise[-1] < len(ordered) - 1
    gaps = [b - a for a, b in zip(noise, noise[1:])]
    assert max(gaps) - min(gaps) <= 1                         # evenly spread
