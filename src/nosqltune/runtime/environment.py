"""Environment fingerprint stored with every trial: what machine and software produced a figure."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from .. import __version__


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


def read_ahead_kb(path: Path) -> int | None:
    """The read-ahead (KiB) of the block device holding `path`; None when it is on no block device (tmpfs) or
    the kernel does not say. A memory-mapped read that faults reads this much around the page it needs."""
    try:
        dev = os.stat(path).st_dev
        block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
        for folder in (block, block.parent):   # a partition's queue is its disk's
            if (folder / "queue" / "read_ahead_kb").exists():
                return int((folder / "queue" / "read_ahead_kb").read_text())
    except (OSError, ValueError):
        pass
    return None


def _memory_gib() -> float | None:
    kib = meminfo_kib("MemTotal")
    return None if kib is None else round(kib / 1024 / 1024, 1)


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
    }
