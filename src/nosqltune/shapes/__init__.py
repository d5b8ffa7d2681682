"""Node shapes (`tune --node-shape FILE|NAME`): the production node a study is tuned for, and the trial rig on this
machine derived from it.

A search finds what pays on the rig it runs on, and the rig is not the user's node: a gain that lives where 2 GB of
data meets 2 GiB of memory is gone at 10 times the data (bench/results/growth.md). So the rig keeps the shape's
proportions where it can, and says which it cannot:

- **data against page cache**: the rig's records fill its page cache as many times over as the shape's data fills
  the shape's (the shape's page cache: its memory less Cassandra's default heap for it and a tenth beside the heap,
  at least OFFHEAP_MB);
- **the heap's share of memory**: the rig's heap is the shape's default heap's share of the rig's memory cap, never
  below HEAP_FLOOR_MB (a node below it spends its time collecting);
- **the volume per core**: the volume's IOPS and bandwidth caps times the rig's cores over the shape's (a node's
  throughput grows with its cores, so a per-core cap keeps the I/Os a request can have); the latency per I/O as it
  is; a request rate per node the same way;
- **threads per core**: knob ranges of request threads scale with the node's cores; the heap's range is a share of
  the memory cap.

What the rig cannot keep is printed: cores beyond this machine's (the node gets all but one, the client the last),
and the memory beside the heap, which the rig holds at what a node needs here (OFFHEAP_MB).

Scaling a value found on the rig back to the shape is an assumption, not a measurement: every scaled value is
printed with its rule (`scale_back`), never as tuned.
"""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import UsageError

RIG_MEMORY_MB = 2048     # the rig's memory cap per node (the cloud scenarios': 1 GiB heap, 768 MiB beside, 256 cache)
HEAP_FLOOR_MB = 512      # the smallest heap a trial's node gets
OFFHEAP_MB = 768         # what a node needs beside its heap on this rig (metaspace, buffers, threads: disk-bound)
OFFHEAP_SHARE = 0.10     # the shape's memory beside its heap, as an estimate
YCSB_ROW_BYTES = 1000    # a YCSB row's values: what records count in
TOLERANCE = 0.05         # a ratio is kept when the rig's is within 5% of the shape's
_FIELDS = {"summary", "cores", "memory_gib", "volume", "data_gib", "rate", "source", "read_on"}


@dataclass(frozen=True)
class NodeShape:
    name: str
    cores: int
    memory_gib: float
    data_gib: float
    volume: str | None = None              # a volumes.yaml preset, or None
    iops: int | None = None                # caps of a volume given by figures (or over the preset's)
    mbps: int | None = None
    latency_ms: float | None = None
    rate: float | None = None              # requests per second per node
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "NodeShape":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def has_volume(self) -> bool:
        """Whether the node's data sits on a volume of its own (a preset, or caps given by figures)."""
        return bool(self.volume or self.iops or self.mbps)

    def default_heap_mb(self) -> int:
        """Cassandra's default heap for the shape's memory: max(min(1/2 RAM, 1 GiB), min(1/4 RAM, 8 GiB))."""
        memory = self.memory_gib * 1024
        return int(max(min(memory / 2, 1024), min(memory / 4, 8192)))

    def beside_heap_mb(self) -> float:
        """The memory beside the heap: a tenth of the node's, at least what a node needs here (OFFHEAP_MB)."""
        return max(OFFHEAP_MB, OFFHEAP_SHARE * self.memory_gib * 1024)

    def page_cache_mb(self) -> float:
        return self.memory_gib * 1024 - self.default_heap_mb() - self.beside_heap_mb()


@functools.lru_cache(maxsize=1)
def _presets() -> dict[str, dict[str, Any]]:
    import yaml

    return yaml.safe_load((resources.files(__package__) / "shapes.yaml").read_text())["shapes"]


def presets() -> list[str]:
    return sorted(_presets())


def load_shape(spec: str) -> NodeShape:
    """A preset's name or a YAML file with the presets' fields; one line (UsageError) for anything else."""
    path = Path(spec)
    if spec in _presets():
        data, name = dict(_presets()[spec]), spec
    elif path.is_file():
        import yaml

        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--node-shape {spec}: cannot read it ({getattr(exc, 'problem', None) or exc})") from None
        if not isinstance(data, dict):
            raise UsageError(f"--node-shape {spec}: a shape is a mapping of {', '.join(sorted(_FIELDS))}")
        name = path.stem
    else:
        raise UsageError(f"unknown node shape {spec!r}: one of {', '.join(presets())}, or a YAML file with cores, "
                         "memory_gib, volume and data_gib")
    unknown = set(data) - _FIELDS
    if unknown:
        raise UsageError(f"--node-shape {spec}: unknown field {sorted(unknown)[0]!r} ({', '.join(sorted(_FIELDS))})")
    volume = data.get("volume")
    caps = volume if isinstance(volume, dict) else {}
    try:
        shape = NodeShape(name=name, cores=int(data["cores"]), memory_gib=float(data["memory_gib"]),
                          data_gib=float(data["data_gib"]), volume=volume if isinstance(volume, str) else None,
                          iops=caps.get("iops"), mbps=caps.get("mbps"), latency_ms=caps.get("latency_ms"),
                          rate=float(data["rate"]) if data.get("rate") else None,
                          summary=str(data.get("summary") or ""))
    except KeyError as exc:
        raise UsageError(f"--node-shape {spec}: no {exc.args[0]} (cores, memory_gib, data_gib are needed)") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--node-shape {spec}: {exc}") from None
    if shape.cores < 1 or shape.memory_gib <= 0 or shape.data_gib <= 0:
        raise UsageError(f"--node-shape {spec}: cores, memory_gib and data_gib must be positive")
    if shape.page_cache_mb() <= 0:
        raise UsageError(f"--node-shape {spec}: {shape.memory_gib:g} GiB cannot hold Cassandra's default heap "
                         f"({shape.default_heap_mb()} MiB), {shape.beside_heap_mb():.0f} MiB beside it and a page "
                         "cache")
    return shape


@dataclass
class Ratio:
    name: str
    shape: float
    rig: float
    unit: str = ""
    why: str = ""

    @property
    def kept(self) -> bool:
        return abs(self.rig / self.shape - 1) <= TOLERANCE if self.shape else self.rig == 0


@dataclass
class Rig:
    """The trial rig derived from a shape."""

    shape: NodeShape
    memory_mb: int
    heap_mb: int
    offheap_mb: int
    page_cache_mb: int
    records: int
    node_cores: int
    scale: float                              # the rig's cores over the shape's: caps and rates per core
    volume: dict[str, Any] | None             # {preset, iops, mbps, latency_ms} for the rig, None: uncapped
    target: int | None
    ranges: dict[str, list[float]] = field(default_factory=dict)
    ratios: list[Ratio] = field(default_factory=list)

    def server_cpus(self) -> str:
        return ",".join(str(c) for c in range(self.node_cores))

    def lines(self) -> list[str]:
        s = self.shape
        out = [f"node shape {s.name}: {s.cores} cores, {s.memory_gib:g} GiB, {s.data_gib:g} GiB of data"
               + (f", volume {s.volume}" if s.volume else ", a local disk") + (f", {s.rate:g} requests/s" if s.rate
                                                                                else ""),
               f"the rig: {self.node_cores} core(s) for the node (--server-cpus {self.server_cpus()}), memory cap "
               f"{self.memory_mb} MiB = heap {self.heap_mb} + {self.offheap_mb} beside it + page cache "
               f"{self.page_cache_mb}, {self.records:,} records of 1 KB",
               "  volume: " + (f"{self.volume['iops']} IOPS, {self.volume['mbps']} MiB/s"
                               + (f", {self.volume['latency_ms']:g} ms per I/O" if self.volume.get('latency_ms')
                                  else "") + f" (the shape's caps x {self.scale:.3g}, per core)"
                               if self.volume else "uncapped, as a local drive")
               + (f"; a fixed {self.target:,} ops/s (the shape's rate x {self.scale:.3g})" if self.target else ""),
               "  knob ranges: " + ", ".join(f"{k} [{v[0]:g}, {v[1]:g}]" for k, v in self.ranges.items())]
        for r in self.ratios:
            state = "kept" if r.kept else "NOT kept"
            out.append(f"  {state}: {r.name} {_figure(r.shape)}{r.unit} on the shape, {_figure(r.rig)}{r.unit} on "
                       "the rig"
                       + (f" ({r.why})" if r.why and not r.kept else ""))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape.to_dict(), "memory_mb": self.memory_mb, "heap_mb": self.heap_mb,
                "offheap_mb": self.offheap_mb, "page_cache_mb": self.page_cache_mb, "records": self.records,
                "node_cores": self.node_cores, "scale": self.scale, "volume": self.volume, "target": self.target,
                "ranges": self.ranges,
                "ratios": [{**asdict(r), "kept": r.kept} for r in self.ratios]}


def _figure(value: float) -> str:
    """A ratio's value: three significant digits, a whole number of a thousand or more in full (8,192)."""
    return f"{value:,.0f}" if value >= 1000 and value == int(value) else f"{value:.3g}"


GIVEN_FLAGS = {"heap_mb": "--heap", "page_cache_mb": "--page-cache", "records": "--records", "iops": "--disk-iops",
               "mbps": "--disk-mbps", "latency_ms": "--disk-latency-ms"}


def derive(shape: NodeShape, memory_mb: int = RIG_MEMORY_MB, machine_cores: int | None = None,
           row_bytes: float = YCSB_ROW_BYTES, given: dict[str, Any] | None = None,
           disk_read_ahead_kb: int | None = None) -> Rig:
    """The rig for `shape` within a memory cap of `memory_mb` on a machine of `machine_cores` (default: this one's),
    records counted in rows of `row_bytes`. `given`: values the user set (GIVEN_FLAGS' keys), which the rig takes
    instead of the derived ones; the ratios are the rig's that runs, so a given value shows as a ratio kept or lost.
    A page cache given sets the memory cap (heap + beside it + page cache), and the records follow it: a smaller cap
    keeps the shape's data against memory with fewer records. `disk_read_ahead_kb`: the read-ahead of the disk the
    rig's nodes keep their data on, for a shape without a volume (its local drive at Linux's default, where the rig's
    data sits on this machine's disk as it is set; a volume gets its preset's read-ahead on both)."""
    from ..volumes import DEFAULT_READ_AHEAD_KB, presets as volume_presets

    given = {k: v for k, v in (given or {}).items() if v is not None}

    def because(*keys: str) -> str:   # the flags behind a ratio's value, when the user gave them
        flags = [GIVEN_FLAGS[k] for k in keys if k in given]
        return " and ".join(flags) + " given" if flags else ""

    machine_cores = machine_cores or os.cpu_count() or 1
    shape_memory = shape.memory_gib * 1024
    heap_share = shape.default_heap_mb() / shape_memory
    heap = given.get("heap_mb") or max(HEAP_FLOOR_MB, int(heap_share * memory_mb))
    if "page_cache_mb" in given:
        page_cache = given["page_cache_mb"]
        memory_mb = heap + OFFHEAP_MB + page_cache
    else:
        page_cache = memory_mb - heap - OFFHEAP_MB
    if page_cache <= 0:
        raise UsageError(f"a memory cap of {memory_mb} MiB cannot hold the derived heap ({heap} MiB), {OFFHEAP_MB} "
                         "MiB beside it and a page cache: give a larger one")
    data_ratio = shape.data_gib * 1024 / shape.page_cache_mb()
    records = given.get("records") or int(data_ratio * page_cache * (1 << 20) / row_bytes)
    node_cores = max(1, min(shape.cores, machine_cores - 1))
    scale = node_cores / shape.cores
    volume = None
    if shape.has_volume():
        preset = volume_presets().get(shape.volume) if shape.volume else None
        if shape.volume and preset is None:
            raise UsageError(f"node shape {shape.name}: unknown volume preset {shape.volume!r}")
        iops = shape.iops or (preset.volume.read_iops if preset else None)
        mbps = shape.mbps or (preset.volume.read_mbps if preset else None)
        latency = shape.latency_ms if shape.latency_ms is not None else (preset.volume.latency_ms if preset else 0.0)
        volume = {"preset": shape.volume, "iops": given.get("iops") or (max(1, round(iops * scale)) if iops else None),
                  "mbps": given.get("mbps") or (max(1, round(mbps * scale)) if mbps else None),
                  "latency_ms": given.get("latency_ms", latency or 0.0)}
    target = int(shape.rate * scale) if shape.rate else None
    ranges = {"heap_size": [HEAP_FLOOR_MB, max(HEAP_FLOOR_MB, int(0.6 * memory_mb))],
              "concurrent_reads": [2, 32 * node_cores], "concurrent_writes": [2, 32 * node_cores],
              "concurrent_compactors": [1, max(2, node_cores)]}
    ratios = [Ratio("data per page cache", data_ratio, records * row_bytes / (1 << 20) / page_cache, "x",
                    because("records", "page_cache_mb")),
              Ratio("heap per memory", heap_share, heap / memory_mb, "",
                    because("heap_mb", "page_cache_mb") or f"the rig's heap has a floor of {HEAP_FLOOR_MB} MiB"),
              Ratio("memory beside the heap", shape.beside_heap_mb() / shape_memory, OFFHEAP_MB / memory_mb, "",
                    f"a node here needs {OFFHEAP_MB} MiB beside its heap"),
              Ratio("cores", shape.cores, node_cores, "",
                    f"this machine has {machine_cores}; the client takes one")]
    if volume and volume["iops"]:
        ratios.append(Ratio("IOPS per core", (iops or 0) / shape.cores, volume["iops"] / node_cores, "",
                            because("iops")))
    if volume and volume["mbps"]:
        ratios.append(Ratio("MiB/s per core", (mbps or 0) / shape.cores, volume["mbps"] / node_cores, "",
                            because("mbps")))
    if volume is None and disk_read_ahead_kb:
        ratios.append(Ratio("read-ahead", DEFAULT_READ_AHEAD_KB, disk_read_ahead_kb, " KiB",
                            "the rig's data is on this machine's disk, set as it is; a memory-mapped read that faults "
                            "reads this much around its page"))
    return Rig(shape, memory_mb, heap, OFFHEAP_MB, page_cache, records, node_cores, scale, volume, target, ranges,
               ratios)


def scale_back(knob: str, value: float, rig: dict[str, Any]) -> tuple[float, str] | None:
    """A value found on the rig, carried to the shape by its rule: (value, the rule), or None when the knob's value
    stands as it is (e.g. a compression choice). An assumption, printed beside the value, never shown as tuned."""
    shape = NodeShape.from_dict(rig["shape"])
    if knob == "heap_size":
        share = value / rig["memory_mb"]
        return (round(share * shape.memory_gib * 1024),
                f"the rig's heap share ({share:.0%} of {rig['memory_mb']} MiB) of the shape's {shape.memory_gib:g} GiB")
    if knob in ("concurrent_reads", "concurrent_writes", "concurrent_compactors"):
        per_core = value / rig["node_cores"]
        return (round(per_core * shape.cores),
                f"{per_core:g} per core on the rig's {rig['node_cores']}, times the shape's {shape.cores} cores")
    if knob in ("key_cache_size", "row_cache_size", "file_cache_size", "memtable_heap_space",
                "memtable_offheap_space"):
        factor = shape.memory_gib * 1024 / rig["memory_mb"]
        return (round(value * factor), f"times the shape's memory over the rig's ({factor:.3g})")
    return None
