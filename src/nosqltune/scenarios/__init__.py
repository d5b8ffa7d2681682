"""Benchmark scenarios as data (scenarios.yaml beside this file): a bundle of workload, data size, memory allowance,
measured-phase length, knob values and objective that a command takes as its defaults (`--scenario NAME`).

A scenario's sizes are calibrated (`nosqltune calibrate --scenario NAME`): the shipped ones were measured on the
project's reference machine; a calibration run on another machine stores its pick in the user's cache
(calibration_file()), and that pick is the scenario's default on that machine from then on.

Importing this module is cheap: PyYAML is read only when the scenarios are first asked for."""

from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..runtime.paths import cache_dir

DEFAULT = "in-memory"
_SIZES = ("records", "operations", "warmup_ops", "max_seconds", "threads")
CALIBRATED_SIZES = ("records", "operations", "warmup_ops", "threads")   # what a calibration picks
_FIELDS = {"summary", "why", "workload", "distribution", "heap", "memory", "volume", "knobs", "objective",
           "rate_fraction", "calibration", "sources", "knob_set", "screening", *_SIZES}
_CALIBRATION = {"metric", "max_cv", "max_trial_s", "measured"}
_SCREENING = {"limited_by", "moves", "found", "otherwise", "measured"}


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
    warm_page_cache: bool = False       # the node's page cache filled with its data after boot (memory: warm: true)
    volume: str | None = None           # each node on a volume of its own: a preset of volumes/volumes.yaml,
    volume_caps: dict[str, float] = field(default_factory=dict)   # over the preset's: iops, mbps, latency_ms
    knobs: dict[str, Any] = field(default_factory=dict)
    objective: str = "throughput"
    rate_fraction: float | None = None
    sources: tuple[str, ...] = ()
    # the calibration's goal: the figure whose CV over cold repeats of the default must be at most max_cv,
    # within max_trial_s seconds per cold trial; `measured` says where the shipped sizes come from
    calibration_metric: str = "throughput"
    max_cv: float = 0.05
    max_trial_s: float = 60.0
    measured: str | None = None
    calibrated_here: dict[str, Any] | None = None    # this machine's own pick (calibration_file()), if any
    knob_set: str | None = None                       # the Cassandra 5.0 knob set `tune` searches here by default
    screening: dict[str, Any] = field(default_factory=dict)   # limited_by, moves, found, otherwise, measured

    def outlook(self, searched: Any = None, label: str | None = None) -> list[str]:
        """What a search in this scenario can expect, from the screening's stored answer: what limited the default,
        the knobs that moved it (and those of them `searched`, a collection of knob names, leaves out), what a
        confirmed search found, and where to go when nothing here moves. [] for a scenario without one."""
        if not self.screening:
            return []
        s = self.screening
        lines = [f"scenario {self.name}: the default was limited by {s['limited_by']}"]
        moves = list(s.get("moves") or ())
        if moves:
            left_out = [k for k in moves if searched is not None and k not in searched]
            lines.append("knobs that moved it in the screening: " + ", ".join(moves)
                         + (f" ({', '.join(left_out)} not in {label or 'the searched set'})" if left_out else ""))
        else:
            lines.append("no knob moved it beyond the noise in the screening")
        if s.get("found"):
            lines.append(f"what a confirmed search found here: {s['found']}")
        if s.get("otherwise"):
            lines.append(f"when nothing here moves your objective: --scenario {s['otherwise']} "
                         f"(nosqltune scenarios says what it needs)")
        lines.append(f"measured on the project's 2-core machine ({s['measured']}); `nosqltune bench --scenario "
                     f"{self.name}` prints what limits the default on yours")
        return lines

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
            sets["memory"] = {"offheap_mb": self.offheap_mb, "page_cache_mb": self.page_cache_mb,
                              **({"warm": True} if self.warm_page_cache else {})}
        if self.volume:
            sets["volume"] = self.volume + "".join(f", {k} {v:g}" for k, v in self.volume_caps.items())
        if self.knobs:
            sets["knobs"] = dict(self.knobs)
        if self.rate_fraction is not None:
            sets["rate_fraction"] = self.rate_fraction
        sets["objective"] = self.objective
        calibration = {"metric": self.calibration_metric, "max_cv": self.max_cv, "max_trial_s": self.max_trial_s,
                       "measured": self.measured}
        if self.calibrated_here:
            calibration["calibrated_here"] = {**self.calibrated_here, "file": str(calibration_file())}
        return {"name": self.name, "summary": self.summary, "why": self.why, "sets": sets,
                "calibration": calibration, "knob_set": self.knob_set, "screening": dict(self.screening),
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
    if set(memory) - {"offheap_mb", "page_cache_mb", "warm"} or (memory and "page_cache_mb" not in memory):
        raise ValueError(f"{where}: memory takes offheap_mb, page_cache_mb and warm")
    if not isinstance(memory.get("warm", False), bool):
        raise ValueError(f"{where}: memory's warm is true or false")
    calibration = spec.get("calibration") or {}
    if not isinstance(calibration, dict) or set(calibration) - _CALIBRATION:
        raise ValueError(f"{where}: calibration takes {', '.join(sorted(_CALIBRATION))}")
    if not 0 < float(calibration.get("max_cv", 0.05)) < 1 or float(calibration.get("max_trial_s", 60)) <= 0:
        raise ValueError(f"{where}: calibration needs 0 < max_cv < 1 and max_trial_s > 0")
    volume, caps = spec.get("volume"), {}
    if isinstance(volume, dict):   # {preset: NAME, iops: N, mbps: M, latency_ms: L}: the scenario's over the preset's
        caps = {k: v for k, v in volume.items() if k != "preset"}
        whole = {k: v for k, v in caps.items() if k != "latency_ms"}
        if set(whole) - {"iops", "mbps"} or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0
                                                for v in whole.values()):
            raise ValueError(f"{where}: volume takes preset, positive whole iops and mbps, and latency_ms")
        volume = volume.get("preset")
        if volume is None:
            raise ValueError(f"{where}: volume names its preset (volume: {{preset: NAME, ...}})")
    if volume is not None:
        from ..volumes import checked_latency, presets

        if "latency_ms" in caps:
            caps["latency_ms"] = checked_latency(caps["latency_ms"], f"{where}: volume's latency_ms", ValueError)

        if volume not in presets():
            raise ValueError(f"{where}: volume {volume!r} is not a preset of volumes.yaml")
    screening = spec.get("screening") or {}
    if not isinstance(screening, dict) or set(screening) - _SCREENING or (screening and not all(
            isinstance(screening.get(k), str) for k in ("limited_by", "measured"))):
        raise ValueError(f"{where}: screening takes {', '.join(sorted(_SCREENING))}, limited_by and measured "
                         "among them")
    if not isinstance(screening.get("moves", []), list):
        raise ValueError(f"{where}: screening's moves is a list of knobs")
    fraction = spec.get("rate_fraction")
    if fraction is not None and not 0 < float(fraction) <= 1:
        raise ValueError(f"{where}: rate_fraction must be within (0, 1]")
    return Scenario(name=name, summary=" ".join(spec["summary"].split()), why=" ".join(spec["why"].split()),
                    workload=spec.get("workload"), distribution=spec.get("distribution"), sizes=sizes,
                    heap=spec.get("heap"), offheap_mb=memory.get("offheap_mb"),
                    page_cache_mb=memory.get("page_cache_mb"), warm_page_cache=memory.get("warm", False),
                    volume=volume, volume_caps=caps,
                    knobs=dict(spec.get("knobs") or {}),
                    objective=spec.get("objective", "throughput"),
                    rate_fraction=None if fraction is None else float(fraction),
                    sources=tuple(spec.get("sources") or ()),
                    knob_set=spec.get("knob_set"),
                    screening={k: (" ".join(v.split()) if isinstance(v, str) else v) for k, v in screening.items()},
                    calibration_metric=calibration.get("metric", spec.get("objective", "throughput")),
                    max_cv=float(calibration.get("max_cv", 0.05)),
                    max_trial_s=float(calibration.get("max_trial_s", 60)),
                    measured=" ".join(str(calibration["measured"]).split()) if calibration.get("measured") else None)


@functools.lru_cache(maxsize=None)
def scenarios() -> dict[str, Scenario]:
    """Every scenario of scenarios.yaml, by name, in the file's order."""
    import yaml

    data = yaml.safe_load((resources.files(__name__) / "scenarios.yaml").read_text())
    return {name: _parse(name, spec) for name, spec in data["scenarios"].items()}


def scenario(name: str | None, system: str = "cassandra") -> Scenario:
    """The scenario called `name` (the default, in-memory, for None), with this machine's calibrated sizes for
    `system` over the shipped ones where `calibrate --scenario` stored a pick; a one-line error for an unknown
    name."""
    found = scenarios().get((name or DEFAULT).strip().lower())
    if found is None:
        raise UsageError(f"unknown scenario {name!r}: use one of {', '.join(scenarios())} "
                         "(`nosqltune scenarios` says what each sets)")
    try:
        here = _read_calibrations()[system][found.name]
        sizes = {k: int(v) for k, v in here["sizes"].items() if k in CALIBRATED_SIZES and int(v) > 0}
    except (KeyError, TypeError, ValueError, AttributeError):   # none stored, or not readable: the shipped sizes
        return found
    return replace(found, sizes={**found.sizes, **sizes}, calibrated_here=here)


def calibration_file() -> Path:
    """Where this machine's calibrated scenario sizes are kept: the user's cache, or NOSQLTUNE_CALIBRATION."""
    return Path(os.environ.get("NOSQLTUNE_CALIBRATION") or cache_dir() / "calibrated-scenarios.json")


def _read_calibrations() -> dict[str, Any]:
    try:
        data = json.loads(calibration_file().read_text())
    except (OSError, ValueError):   # none yet, or unreadable: the shipped sizes
        return {}
    return data if isinstance(data, dict) else {}


def save_calibration(name: str, sizes: dict[str, int], figures: dict[str, Any], system: str = "cassandra") -> Path:
    """Store `sizes` (records, operations, warmup_ops, threads) as scenario `name`'s defaults for `system` on
    this machine, with the figures (and goal) that chose them; replaces the file atomically. Returns the file."""
    name = scenario(name).name
    unknown = set(sizes) - set(CALIBRATED_SIZES)
    if unknown:
        raise ValueError(f"not a calibrated size: {sorted(unknown)}")
    path = calibration_file()
    data = _read_calibrations()
    if not isinstance(data.get(system), dict):
        data[system] = {}
    data[system][name] = {"sizes": {k: int(v) for k, v in sizes.items()}, "figures": figures,
                          "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return path
