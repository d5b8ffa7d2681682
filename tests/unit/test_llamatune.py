"""LlamaTune's space adapter: valid configurations from every synthetic point, special values at the set
rate, bucketization, determinism, wrapping of any optimizer, and SMAC needing fewer evaluations with it on
an analytic function of many knobs, few of them effective."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from nosqltune.knobs import Knob, KnobSpace, load_space
from nosqltune.optimizers import make_optimizer
from nosqltune.optimizers.llamatune import Projection
from nosqltune.knobs.space import TuningSpace
from nosqltune.store import open_store
from nosqltune.tuning.loop import Outcome, TuneSpec, TuningLoop

from . import analytic
from .test_optimizers import valid


def points(projection: Projection, n: int, seed: int = 0):
    rng = random.Random(seed)
    return [{f"y{i}": rng.uniform(-1, 1) for i in range(projection.dims)} for _ in range(n)]


def in_space(space: TuningSpace, config: dict) -> bool:
    for knob in space.knobs:
        value = config[knob.name]
        if knob.type in ("int", "float") and not knob.range[0] <= value <= knob.range[1]:
            return False
        if knob.type == "int" and not isinstance(value, int):
            return False
        if knob.type == "enum" and value not in knob.choices:
            return False
        if knob.type == "bool" and not isinstance(value, bool):
            return False
        if not space.is_active(knob.name, config) and value != knob.default:
            return False
    return True


def test_every_synthetic_point_maps_to_a_valid_configuration():
    analytic_space = TuningSpace(analytic.space())
    projection = Projection(analytic_space, dims=3, seed=5)
    corners = [{f"y{i}": float(c) for i, c in enumerate(bits)} for bits in
               [(-1, -1, -1), (1, 1, 1), (-1, 1, -1), (0, 0, 0)]]
    for low in points(projection, 2000) + corners:
        assert valid(analytic_space, projection.config(low))
    cassandra = TuningSpace(load_space("cassandra").subset("irace23"))
    projection = Projection(cassandra, dims=16, seed=1)
    for low in points(projection, 2000):
        assert in_space(cassandra, projection.config(low))


def test_special_values_come_up_at_the_set_rate():
    cassandra = TuningSpace(load_space("cassandra").subset("irace23"))
    for bias in (0.2, 0.5):
        projection = Projection(cassandra, dims=8, special_bias=bias, seed=2)
        configs = [projection.config(low) for low in points(projection, 6000)]
        share = sum(c["key_cache_size"] == 0 for c in configs) / len(configs)  # special: 0 disables the cache
        assert abs(share - bias) < 0.03, share
    unbiased = Projection(cassandra, dims=8, special_bias=0.0, seed=2)
    share = sum(unbiased.config(low)["key_cache_size"] == 0 for low in points(unbiased, 6000)) / 6000
    assert share < 0.02


def test_bucketization_bounds_distinct_values():
    cassandra = TuningSpace(load_space("cassandra").subset("irace23"))
    projection = Projection(cassandra, dims=8, max_unique=5, seed=3)
    configs = [projection.config(low) for low in points(projection, 3000)]
    for knob in cassandra.knobs:
        if knob.type in ("int", "float"):
            distinct = {c[knob.name] for c in configs} - set(knob.special) - {knob.default}
            assert len(distinct) <= 5, (knob.name, sorted(distinct))
    wide = Projection(cassandra, dims=8, seed=3)
    assert len({wide.config(low)["memtable_heap_space"] for low in points(wide, 3000)}) > 100


def test_same_seed_same_mapping():
    space = TuningSpace(load_space("cassandra").subset("irace23"))
    a, b, c = (Projection(space, dims=6, seed=s) for s in (4, 4, 5))
    lows = points(a, 50)
    assert [a.config(p) for p in lows] == [b.config(p) for p in lows]
    assert a.assignment == b.assignment and a.assignment != c.assignment
    assert set(d for d, _ in a.assignment.values()) == set(range(6))  # every synthetic dimension is used


def test_adapter_wraps_any_optimizer_and_records_the_synthetic_point(tmp_path):
    space = TuningSpace(analytic.space())
    for inner in ("random", "gp"):
        opt = make_optimizer(inner, space, seed=1, budget=10, workloads=["w"], workdir=tmp_path / inner,
                             options={"space_adapter": "llamatune", "llamatune_dims": 3, "candidates": 200})
        for _ in range(6):
            s = opt.ask()
            assert valid(space, s.config) and len(s.meta["low"]) == 3
            assert s.config == opt.projection.config({f"y{i}": v for i, v in enumerate(s.meta["low"])})
            opt.tell(s, -analytic.throughput(s.config))
        opt.close()


MANY_KNOBS, EFFECTIVE_BEST = 24, 1000.0


def many_knobs_space() -> TuningSpace:
    """24 integer knobs in [0, 1000], default 500, each with the special value 0 (as 'disabled' in the knob
    data)."""
    return TuningSpace(KnobSpace("many", "1", {
        f"k{i}": Knob(name=f"k{i}", type="int", default=500, range=(0, 1000), applies="yaml", key=f"k{i}",
                      special=(0,), description="analytic knob") for i in range(MANY_KNOBS)}))


def few_effective(c: dict) -> float:
    """Three of the 24 knobs act: k0 and k1 are best at their maximum; k2 is best disabled (its special value
    0), and any other value costs a step plus a slope, as a feature that is cheaper off than at its lowest
    setting. The other 21 knobs are irrelevant. Peak EFFECTIVE_BEST."""
    score = 3 * (1 - c["k0"] / 1000) ** 2 + 3 * (1 - c["k1"] / 1000) ** 2
    score += 0.0 if c["k2"] == 0 else 0.7 + c["k2"] / 1000
    return EFFECTIVE_BEST * math.exp(-score)


def smac_run(seed: int, budget: int, tmp_path, options: dict) -> list[float]:
    """True value of the incumbent (best measured so far, 3% noise) after each trial."""
    rng = random.Random(seed)

    def runner(config, _workload):
        return Outcome("COMPLETE", summary={"throughput_ops_s": few_effective(config) * rng.gauss(1.0, 0.03)})
    store = open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer="smac", workloads=["w"], budget=budget, seed=seed, options=options,
                    objective={"metric": "throughput", "constraints": []})
    TuningLoop(store, study, spec, many_knobs_space(), runner, workdir=tmp_path / f"s{seed}{len(options)}").run()
    curve, best_measured, incumbent = [], -1.0, 0.0
    for row in store.trials(study):
        measured = row["metrics"]["summary"]["throughput_ops_s"]
        if measured > best_measured:
            best_measured, incumbent = measured, few_effective(row["config"])
        curve.append(incumbent)
    return curve


@pytest.mark.slow   # a claim about search efficiency over many seeds: make test-all
def test_smac_with_llamatune_needs_fewer_evaluations_on_few_effective_knobs(tmp_path):
    """The projection lets 4 synthetic dimensions steer all 24 knobs, and special-value biasing tries k2's
    'disabled' value in about a fifth of the draws, where plain SMAC must hit 0 of 1001 integers. HeSBO can
    put two effective knobs on one dimension with opposite signs (then both cannot reach their best), so this
    is judged over several seeds: the mean number of evaluations to reach half the peak (budget + 1 when not
    reached) must be lower with the adapter, and so must the mean quality after the budget. SMAC's suggestions
    also depend on the process's string hashing (PYTHONHASHSEED), so the figures vary from run to run; over
    hash seeds 0-4 and seeds 1-8, plain SMAC reached half the peak once in 40 runs, SMAC + LlamaTune in 29 of
    40 (mean final quality ~2x). One CI run with seeds 1-4 saw a plain mean final quality of 562 against 689:
    hence six seeds and a 1.15x margin on the final quality."""
    budget, level = 30, 0.5 * EFFECTIVE_BEST
    adapter = {"space_adapter": "llamatune", "llamatune_dims": 4}
    seeds = range(1, 7)

    def reach(curve):
        return next((i + 1 for i, value in enumerate(curve) if value >= level), budget + 1)
    plain = [smac_run(seed, budget, tmp_path, {}) for seed in seeds]
    llama = [smac_run(seed, budget, tmp_path, adapter) for seed in seeds]
    assert statistics.mean(map(reach, llama)) < statistics.mean(map(reach, plain)) - 5
    assert statistics.mean(c[-1] for c in llama) > 1.15 * statistics.mean(c[-1] for c in plain)
