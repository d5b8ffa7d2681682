"""Environment fingerprint stored with every trial: what machine and software produced a figure."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from pathlib import Path

from .. import __version__
from .paths import loadgen_dir, loadgen_sources


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def meminfo_kib(field: str) -> int | None:
    """A /proc/meminfo figure in KiB (e.g. MemTotal, MemAvailable); None where there is none."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def disk_queue(path: Path, sysfs: Path = Path("/sys")) -> Path | None:
    """The sysfs queue folder (rotational, read_ahead_kb, ...) of the disk holding `path`; None when `path` is on
    no block device (tmpfs, procfs) or cannot be found."""
    try:
        dev = os.stat(path).st_dev
        base = (sysfs / "dev" / "block" / f"{os.major(dev)}:{os.minor(dev)}").resolve()
    except OSError:
        return None
    for queue in (base / "queue", base.parent / "queue"):   # a partition's queue is its disk's
        if queue.is_dir():
            return queue
    return None


def read_ahead_kb(path: Path, sysfs: Path = Path("/sys")) -> int | None:
    """The read-ahead (KiB) of the disk holding `path`, None where none is found. A memory-mapped read that
    faults reads this much around the page it needs."""
    queue = disk_queue(path, sysfs)
    try:
        return int((queue / "read_ahead_kb").read_text()) if queue else None
    except (OSError, ValueError):
        return None


def _memory_gib() -> float | None:
    kib = meminfo_kib("MemTotal")
    return None if kib is None else round(kib / 1024 / 1024, 1)


@functools.lru_cache(maxsize=None)
def _sources_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in loadgen_sources(root):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def loadgen_digest() -> str:
    """A digest of the load generator's sources (its pom.xml and src/main): the client that measured a run is part
    of what produced its figure, so runs of two versions of it are two environments, never mixed unseen."""
    try:
        return _sources_digest(loadgen_dir())
    except Exception:  # a fingerprint never fails a run
        return "unknown"


def fingerprint(system: str, system_version: str) -> dict:
    from .java import java_executable, java_version

    try:
        java = f"{java_version()} ({java_executable()})"
    except Exception:  # a fingerprint never fails a run
        java = "unknown"
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "java": java,
        "system": system,
        "system_version": system_version,
        "nosqltune": __version__,
        "loadgen": loadgen_digest(),
    }
