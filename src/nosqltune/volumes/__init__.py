"""Cloud block volumes as data (volumes.yaml beside this file): the caps on I/Os and bandwidth, and the read-ahead, of
the volume a node's data lives on, and the `Volume` a trial's settings carry (`--volume`, `--disk-iops`,
`--disk-mbps`, `--disk-latency-ms`). The emulation itself (a loop-mounted filesystem per node, throttled by a blkio
cgroup, each I/O made to wait through delayfs when the volume has a latency) is runtime/volume.py and
runtime/delayfs.py.

Importing this module is cheap: PyYAML is read only when the presets are first asked for."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from importlib import resources
from typing import Any

from ..errors import UsageError

DEFAULT_READ_AHEAD_KB = 128   # Linux's default read-ahead of a block device (VM_READAHEAD_PAGES)
READ_AHEAD_RANGE = (4, 4096)  # the read_ahead_kb knob's range, KiB
MAX_IOPS = 1_000_000          # beyond any volume a provider sells (io2 Block Express: 256,000)
MAX_MBPS = 100_000
MAX_LATENCY_MS = 100.0        # a wait per I/O beyond any block volume sold (HDD-backed ones: about 10 ms)
_FIELDS = {"summary", "iops", "mbps", "read_iops", "write_iops", "read_mbps", "write_mbps", "read_ahead_kb",
           "latency_ms", "source", "read_on"}


@dataclass(frozen=True)
class Volume:
    """The volume each node of a trial gets: caps per direction (None: not capped) and its read-ahead."""

    name: str | None = None          # the preset, or None for caps given by flags alone
    read_iops: int | None = None
    write_iops: int | None = None
    read_mbps: int | None = None     # MiB/s
    write_mbps: int | None = None
    read_ahead_kb: int = DEFAULT_READ_AHEAD_KB
    latency_ms: float = 0.0          # the wait added to every read and write before it reaches the device

    @property
    def capped(self) -> bool:
        return any(v is not None for v in (self.read_iops, self.write_iops, self.read_mbps, self.write_mbps))

    def caps(self) -> dict[str, int]:
        """The caps set, by name (read_iops, write_iops, read_mbps, write_mbps)."""
        return {k: v for k, v in asdict(self).items() if k.endswith(("_iops", "_mbps")) and v is not None}

    def to_dict(self) -> dict[str, Any]:
        """As stored with a trial's harness; no latency_ms when there is none, so a volume stored before latencies
        existed and the same volume now are the same settings."""
        data = asdict(self)
        if not self.latency_ms:
            del data["latency_ms"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Volume | None:
        return None if not data else cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def describe(self) -> str:
        """One line: 'aws-gp3: 3000 IOPS, 125 MiB/s, read-ahead 128 KiB'."""
        def pair(read: int | None, write: int | None, unit: str) -> str | None:
            if read is None and write is None:
                return None
            if read == write:
                return f"{read} {unit}"
            return f"{'-' if read is None else read} read / {'-' if write is None else write} write {unit}"

        parts = [p for p in (pair(self.read_iops, self.write_iops, "IOPS"),
                             pair(self.read_mbps, self.write_mbps, "MiB/s")) if p]
        if self.latency_ms:
            parts.append(f"{self.latency_ms:g} ms per I/O")
        parts.append(f"read-ahead {self.read_ahead_kb} KiB")
        return (f"{self.name}: " if self.name else "") + ", ".join(parts)


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    volume: Volume
    source: str
    read_on: str


def _parse(name: str, spec: Any) -> Preset:
    where = f"volume preset {name}"
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: expected a mapping")
    unknown = set(spec) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
    for needed in ("summary", "source", "read_on"):
        if not str(spec.get(needed) or "").strip():
            raise ValueError(f"{where}: {needed} is required (a preset's figures need their public source and "
                             "the day they were read)")
    figures = {}
    for direction in ("read", "write"):
        for unit in ("iops", "mbps"):
            value = spec.get(f"{direction}_{unit}", spec.get(unit))
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{where}: {direction}_{unit} must be a positive whole number")
            figures[f"{direction}_{unit}"] = value
    ahead = spec.get("read_ahead_kb", DEFAULT_READ_AHEAD_KB)
    if not isinstance(ahead, int) or not READ_AHEAD_RANGE[0] <= ahead <= READ_AHEAD_RANGE[1]:
        raise ValueError(f"{where}: read_ahead_kb must be within {READ_AHEAD_RANGE[0]}-{READ_AHEAD_RANGE[1]}")
    latency = checked_latency(spec.get("latency_ms", 0.0), f"{where}: latency_ms", ValueError)
    volume = Volume(name=name, read_ahead_kb=ahead, latency_ms=latency, **figures)
    if not volume.capped:
        raise ValueError(f"{where}: give at least one cap (iops, mbps or a direction's own)")
    return Preset(name=name, summary=" ".join(str(spec["summary"]).split()), volume=volume,
                  source=" ".join(str(spec["source"]).split()), read_on=str(spec["read_on"]))


@functools.lru_cache(maxsize=None)
def presets() -> dict[str, Preset]:
    """Every preset of volumes.yaml, by name, in the file's order."""
    import yaml

    data = yaml.safe_load((resources.files(__name__) / "volumes.yaml").read_text())
    return {name: _parse(name, spec) for name, spec in (data.get("volumes") or {}).items()}


def checked_latency(value, what: str, error=UsageError) -> float:
    """A wait per I/O in milliseconds: 0 (none) up to MAX_LATENCY_MS; delayfs waits in whole microseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_LATENCY_MS \
            or value != value:
        raise error(f"{what} {value}: give milliseconds from 0 to {MAX_LATENCY_MS:g} (a block volume's wait per I/O)")
    if 0 < value < 0.001:
        raise error(f"{what} {value}: below a microsecond, the finest wait delayfs makes (give 0 for none)")
    return float(value)


def _cap(value: int | None, flag: str, most: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"{flag} {value}: give a positive whole number")
    if value > most:
        raise UsageError(f"{flag} {value}: at most {most:,} (no volume serves more; leave the flag out for no cap)")
    return value


def resolve(preset: str | None = None, iops: int | None = None, mbps: int | None = None,
            read_ahead_kb: int | None = None, latency_ms: float | None = None) -> Volume | None:
    """The volume of --volume NAME, --disk-iops N, --disk-mbps M and --disk-latency-ms L (the flags win over the
    preset's figures, for both directions); None when none is given. One-line UsageError for an unknown preset or
    a bad value; a latency alone is no volume (give a preset or a cap with it)."""
    iops = _cap(iops, "--disk-iops", MAX_IOPS)
    mbps = _cap(mbps, "--disk-mbps", MAX_MBPS)
    latency = None if latency_ms is None else checked_latency(latency_ms, "--disk-latency-ms")
    if preset is None and iops is None and mbps is None:
        if latency:
            raise UsageError("--disk-latency-ms is the wait of a node's own volume: give --volume NAME, --disk-iops "
                             "or --disk-mbps with it")
        return None
    if preset is not None:
        found = presets().get(preset.strip().lower())
        if found is None:
            raise UsageError(f"unknown volume {preset!r}: use one of {', '.join(presets())} "
                             "(`nosqltune volumes` lists their caps and sources), or --disk-iops/--disk-mbps")
        volume = found.volume
    else:
        volume = Volume()
    if iops is not None:
        volume = replace(volume, read_iops=iops, write_iops=iops)
    if mbps is not None:
        volume = replace(volume, read_mbps=mbps, write_mbps=mbps)
    if read_ahead_kb is not None:
        volume = replace(volume, read_ahead_kb=read_ahead_kb)
    if latency is not None:
        volume = replace(volume, latency_ms=latency)
    return volume
