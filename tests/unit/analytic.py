"""An analytic 'throughput' over tests/unit/data/analytic_space.yaml, for testing optimizers honestly."""

from __future__ import annotations

import math
from pathlib import Path

from nosqltune.knobs import load_space_file
from nosqltune.tuning.loop import Outcome

SPACE_FILE = Path(__file__).parent / "data" / "analytic_space.yaml"
BEST = 10000.0


def space():
    return load_space_file(SPACE_FILE)


def throughput(c: dict) -> float:
    """Peaks at BEST for threads=24, ratio=0.7, mode=fast, level=14, flag=true."""
    score = (math.log(c["threads"] / 24.0)) ** 2 / 2.0 + 4.0 * (c["ratio"] - 0.7) ** 2
    score += {"slow": 1.0, "medium": 0.5, "fast": 0.0}[c["mode"]]
    if c["mode"] == "fast":
        score += ((c["level"] - 14) / 10.0) ** 2
    else:
        score += 0.3
    score += 0.0 if c["flag"] else 0.05
    return BEST * math.exp(-score)


def runner(config: dict, workload: str) -> Outcome:
    value = throughput(config) * (1.05 if workload == "second" else 1.0)
    return Outcome("COMPLETE", summary={"throughput_ops_s": value, "read_p99_ms": 1e5 / value})


def noisy_runner(seed: int, cv: float = 0.05):
    """Measurements with multiplicative noise (cold trials vary by a few percent): the optimizer must cope
    with it; judge it by the true value of the configuration it returns."""
    import random

    rng = random.Random(seed)

    def run(config: dict, workload: str) -> Outcome:
        value = throughput(config) * max(0.5, rng.gauss(1.0, cv))
        return Outcome("COMPLETE", summary={"throughput_ops_s": value, "read_p99_ms": 1e5 / value})
    return run


def memtable_share(c: dict) -> float:
    """A 'throughput' over Cassandra's memtable_heap_space and heap_size that grows with the memtables' share of
    the heap up to 0.9, past the knob rule memtable_within_half_heap (a share of at most 0.5): an optimizer that
    ignores the rule is drawn into the forbidden region, and the best configurations it may suggest lie on the
    rule's edge."""
    share = c["memtable_heap_space"] / c["heap_size"]
    return BEST * math.exp(-4.0 * (share - 0.9) ** 2)


def memtable_runner(config: dict, workload: str) -> Outcome:
    value = memtable_share(config)
    return Outcome("COMPLETE", summary={"throughput_ops_s": value, "read_p99_ms": 1e5 / value})
