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
