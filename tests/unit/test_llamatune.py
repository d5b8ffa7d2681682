"""LlamaTune's space adapter: valid configurations from every synthetic point, special values at the set
rate, bucketization, determinism, and fewer evaluations for SMAC on a function of few effective knobs."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from nosqltune.knobs import Knob, KnobSpace, load_space
from nosqltune.optimizers import make_optimizer
from nosqltune.optimizers.llamatune import Projection
from nosqltune.optimizers.space import TuningSpace
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


# ------------------------------------------------------------------ sample efficiency

EFFECTIVE = 3
TOTAL = 30


def wide_space() -> TuningSpace:
    """30 real knobs of which the first 3 matter (LlamaTune's premise: few knobs carry most of the effect)."""
    knobs = {f"k{i:02d}": Knob(name=f"k{i:02d}", type="float", default=0.5, range=(0.0, 1.0), applies="yaml",
                               key=f"k{i:02d}", description="synthetic") for i in range(TOTAL)}
    return TuningSpace(KnobSpace("synthetic", "1", knobs))


def quality(config: dict) -> float:
    return 1000.0 * math.exp(-sum(8 * (config[f"k{i:02d}"] - 0.8) ** 2 for i in range(EFFECTIVE)))


def first_reaching(values: list[float], level: float) -> int:
    for i, v in enumerate(values):
        if v >= level:
            return i + 1
    return len(values) + 1


def run_smac(space, seed: int, budget: int, options: dict, tmp_path) -> list[float]:
    store = open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer="smac", workloads=["w"], budget=budget, seed=seed, include_default=False,
                    objective={"metric": "throughput", "constraints": []}, options=options)
    loop = TuningLoop(store, study, spec, space,
                      lambda config, workload: Outcome("COMPLETE", summary={"throughput_ops_s": quality(config)}),
                      workdir=tmp_path)
    loop.run()
    best, curve = 0.0, []
    for row in store.trials(study):
        best = max(best, row["metrics"]["summary"]["throughput_ops_s"])
        curve.append(best)
    return curve


def test_smac_with_llamatune_needs_fewer_evaluations(tmp_path):
    space = wide_space()
    level = 900.0  # 90% of the optimum
    plain, adapted = [], []
    for seed in (1, 2, 3):
        plain.append(first_reaching(run_smac(space, seed, 30, {}, tmp_path / f"p{seed}"), level))
        adapted.append(first_reaching(run_smac(space, seed, 30, {"space_adapter": "llamatune", "llamatune_dims": 4},
                                               tmp_path / f"l{seed}"), level))
    assert statistics.mean(adapted) < statistics.mean(plain), (adapted, plain)
