"""Benchmark scenarios as data (scenarios.yaml beside this file): a bundle of workload, data size, memory allowance,
measured-phase length, knob values and objective that a command takes as its defaults (`--scenario NAME`).

Importing this module is cheap: PyYAML is read only when the scenarios are first asked for."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ..errors import UsageError

DEFAULT = "in-memory"
_SIZES = ("records", "operations", "warmup_ops", "max_seconds", "threads")
_FIELDS = {"summary", "why", "workload", "distribution", "heap", "memory", "knobs", "objective", "rate_fraction",
           "sources", *_SIZES}


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    why: str
    workload: str | None = None
    distribution: str | None = None
    sizes: dict[str, int] = field(default_factory=dict)      # records, operations, warmup_ops, max_seconds, threads
    heap: str | None = None
    offheap_mb: int | None = None       # with page_cache_mb: the node's memory cgroup is heap + these two
    page_cache_mb: int | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    objective: str = "throughput"
    rate_fraction: float | None = None
    sources: tuple[str, ...] = ()

    @property
    def memory_capped(self) -> bool:
        return self.page_cache_mb is not None

    def memory_limit_mb(self, heap_mb: int) -> int | None:
        """The cgroup limit of one node: its heap, its memory beyond the heap, and the page-cache allowance."""
        if not self.memory_capped:
            return None
        return heap_mb + (self.offheap_mb or 0) + self.page_cache_mb

    def describe(self) -> dict[str, Any]:
        """What the scenario sets, for `nosqltune scenarios`."""
        sets: dict[str, Any] = {}
        if self.workload:
            sets["workload"] = self.workload
        if self.distribution:
            sets["distribution"] = self.distribution
        sets.update(self.sizes)
        if self.heap:
            sets["heap"] = self.heap
        if self.memory_capped:
            sets["memory"] = {"offheap_mb": self.offheap_mb, "page_cache_mb": self.page_cache_mb}
        if self.knobs:
            sets["knobs"] = dict(self.knobs)
        if self.rate_fraction is not None:
            sets["rate_fraction"] = self.rate_fraction
        sets["objective"] = self.objective
        return {"name": self.name, "summary": self.summary, "why": self.why, "sets": sets,
                "sources": list(self.sources)}


def _parse(name: str, spec: dict[str, Any]) -> Scenario:
    where = f"scenario {name}"
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: expected a mapping")
    unknown = set(spec) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
    for needed in ("summary", "why"):
        if not isinstance(spec.get(needed), str) or not spec[needed].strip():
            raise ValueError(f"{where}: {needed} is required")
    sizes = {k: int(spec[k]) for k in _SIZES if spec.get(k) is not None}
    if any(v <= 0 for v in sizes.values()):
        raise ValueError(f"{where}: sizes must be positive")
    memory = spec.get("memory") or {}
    if set(memory) - {"offheap_mb", "page_cache_mb"} or (memory and "page_cache_mb" not in memory):
        raise ValueError(f"{where}: memory takes offheap_mb and page_cache_mb")
    fraction = spec.get("rate_fraction")
    if fraction is not None and not 0 < float(fraction) <= 1:
        raise ValueError(f"{where}: rate_fraction must be within (0, 1]")
    return Scenario(name=name, summary=" ".join(spec["summary"].split()), why=" ".join(spec["why"].split()),
                    workload=spec.get("workload"), distribution=spec.get("distribution"), sizes=sizes,
                    heap=spec.get("heap"), offheap_mb=memory.get("offheap_mb"),
                    page_cache_mb=memory.get("page_cache_mb"), knobs=dict(spec.get("knobs") or {}),
                    objective=spec.get("objective", "throughput"),
                    rate_fraction=None if fraction is None else float(fraction),
                    sources=tuple(spec.get("sources") or ()))


@functools.lru_cache(maxsize=None)
def scenarios() -> dict[str, Scenario]:
    """Every scenario of scenarios.yaml, by name, in the file's order."""
    import yaml

    data = yaml.safe_load((resources.files(__name__) / "scenarios.yaml").read_text())
    return {name: _parse(name, spec) for name, spec in data["scenarios"].items()}


def scenario(name: str | None) -> Scenario:
    """The scenario called `name` (the default, in-memory, for None); a one-line error for an unknown name."""
    found = scenarios().get((name or DEFAULT).strip().lower())
    if found is None:
        raise UsageError(f"unknown scenario {name!r}: use one of {', '.join(scenarios())} "
                         "(`nosqltune scenarios` says what each sets)")
    return found
