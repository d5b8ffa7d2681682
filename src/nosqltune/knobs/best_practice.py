"""The "best practice" baseline (Vorstella's blog post on Bayesian-optimization tuning compares against it):
knob values computed from the rules of thumb Cassandra documents, for this machine.

Each rule is data: a knob's `best_practice: {rule: EXPRESSION, source: TEXT}` in the knob file, where
EXPRESSION uses the machine facts `cores`, `drives` (data directories: one in our harness), `ssd` (1 when
the data directory's disk is not rotational) and `heap_mib`, numbers, + - * / //, min, max and
`A if COND else B` (the grammar of the knob rules, knobs.rules, whose evaluator computes it). A value is
rounded for integer knobs and kept within what the datastore accepts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..runtime.environment import disk_queue
from .knob_space import KnobSpace
from .rules import Expression

FACTS = ("cores", "drives", "ssd", "heap_mib")


def evaluate(rule: str, facts: dict[str, float]) -> float:
    """The value of a rule; KnobError for anything outside the grammar of knobs.rules (with the facts as names)."""
    return Expression(rule, facts, "best-practice rule").value(facts)


def rotational(path: Path, sysfs: Path = Path("/sys")) -> bool | None:
    """Whether the disk holding `path` spins (sysfs), or None when it cannot be told."""
    queue = disk_queue(path, sysfs)
    try:
        return (queue / "rotational").read_text().strip() == "1" if queue else None
    except OSError:
        return None


def cpu_list(text: str) -> set[int]:
    """A taskset CPU list ('0', '0-1,3') as a set of CPU numbers."""
    cpus: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def machine_facts(*, heap_mb: int | None, data_path: Path, server_cpus: str | None = None) -> dict[str, Any]:
    """cores (the CPUs Cassandra may use), drives (our node has one data directory), ssd, heap_mib (None: the
    datastore has no JVM heap)."""
    if server_cpus:
        cores = len(cpu_list(server_cpus))
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    spins = rotational(data_path)
    return {"cores": cores, "drives": 1, "ssd": 0 if spins is None or spins else 1, "heap_mib": heap_mb,
            "disk": "unknown" if spins is None else ("rotational" if spins else "ssd")}


def best_practice(space: KnobSpace, facts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(knob overrides, knob -> {rule, source, value}) for every knob of `space` that has a rule."""
    overrides, why = {}, {}
    numbers = {k: facts[k] for k in FACTS}
    for knob in space.knobs.values():
        if not knob.best_practice:
            continue
        raw = evaluate(knob.best_practice["rule"], numbers)
        lo, hi = knob.bounds or (None, None)
        if lo is not None:
            raw = max(raw, lo)
        if hi is not None:
            raw = min(raw, hi)
        value = int(round(raw)) if knob.type == "int" else float(raw)
        overrides[knob.name] = value
        why[knob.name] = {**knob.best_practice, "value": value}
    return overrides, why
