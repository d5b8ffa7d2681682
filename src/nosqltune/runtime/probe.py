"""The machine's own speed, measured in every trial before the datastore starts (bench/results/drift.md): a fixed piece
of work that no datastore setting can change, timed the same way each time, so trials run hours apart can be told
apart by the machine they ran on, not only by their configuration.

The work is SHA-256 over a fixed 8 MiB buffer (C code, one core), best of five passes: the best pass is the core's
speed with the least interference, the spread of the five says how busy the machine was while probing. About 0.1 s.
The disk's part (`disk_probe`): random 4 KiB reads of a probe file in the trials' folder, opened with O_DIRECT so
that the page cache does not answer them, each read's time; the median and the 90th percentile. About 0.05 s. On a
capped volume a read p99 followed the host disk's time per I/O far more than chance in its tail
(bench/results/p99_noise.md), and the disk of a virtual machine drifts with the CPU but not in step with it.

The figures are stored with the trial (`internals.machine_probe`); `tune --denoise` corrects values by them where the
study's own repeats show they matter (tuning/denoise.py, docs/trials.md)."""

from __future__ import annotations

import hashlib
import mmap
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

PROBE_BYTES = 8 << 20
PASSES = 5
DISK_FILE = ".disk-probe"       # in the trials' folder, written once and kept
DISK_FILE_BYTES = 32 << 20
DISK_READS = 200
BLOCK = 4096


def machine_probe(passes: int = PASSES, size: int = PROBE_BYTES) -> dict[str, Any]:
    """{'cpu_mb_s': best pass's MB/s, 'cpu_spread': slowest over fastest pass, 'seconds': the probe's own time}."""
    data = bytes(range(256)) * (size // 256)
    times = []
    began = time.perf_counter()
    for _ in range(passes):
        t0 = time.perf_counter()
        hashlib.sha256(data).digest()
        times.append(time.perf_counter() - t0)
    best, worst = min(times), max(times)
    return {"cpu_mb_s": round(size / best / 1e6, 1), "cpu_spread": round(worst / best, 3),
            "seconds": round(time.perf_counter() - began, 3), "method": f"sha256 {size >> 20} MiB, best of {passes}"}


def disk_probe(folder: Path, reads: int = DISK_READS, size: int = DISK_FILE_BYTES) -> dict[str, Any]:
    """{'disk_read_ms': median ms of `reads` random 4 KiB O_DIRECT reads of a probe file in `folder`,
    'disk_read_ms_p90', 'disk_seconds'}; the same offsets every time. The file (`size` bytes of random data) is
    written on first use and kept. {'disk_error': why} when the filesystem refuses O_DIRECT (tmpfs) or anything
    else fails: a probe never fails a trial."""
    path = Path(folder) / DISK_FILE
    began = time.perf_counter()
    try:
        if not path.exists() or path.stat().st_size != size:
            folder.mkdir(parents=True, exist_ok=True)
            scratch = path.with_name(f"{DISK_FILE}.{os.getpid()}")
            try:
                with open(scratch, "wb") as out:
                    for _ in range(size // (1 << 20)):
                        out.write(os.urandom(1 << 20))
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(scratch, path)
            finally:   # a full disk leaves no part of it behind
                scratch.unlink(missing_ok=True)
        offsets = random.Random(0).sample(range(size // BLOCK), min(reads, size // BLOCK))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        buffer = mmap.mmap(-1, BLOCK)   # page-aligned, as O_DIRECT wants
        try:
            times = []
            for block in offsets:
                t0 = time.perf_counter()
                if os.preadv(fd, [buffer], block * BLOCK) != BLOCK:
                    raise OSError("short read")
                times.append(time.perf_counter() - t0)
        finally:
            buffer.close()
            os.close(fd)
    except OSError as exc:
        return {"disk_error": f"{type(exc).__name__}: {exc.strerror or exc}"[:200]}
    times.sort()
    return {"disk_read_ms": round(statistics.median(times) * 1000, 4),
            "disk_read_ms_p90": round(times[int(0.9 * (len(times) - 1))] * 1000, 4),
            "disk_seconds": round(time.perf_counter() - began, 3),
            "disk_method": f"{len(times)} random {BLOCK // 1024} KiB O_DIRECT reads of {size >> 20} MiB"}


def machine_record(folder: Path, **context: Any) -> dict[str, Any]:
    """Both probes at once, the core's and the disk's under `folder`, with `context` (when and how it was taken,
    e.g. under_load=True for a probe beside a running cluster): what every stored run carries as
    internals.machine_probe."""
    return {**machine_probe(), **disk_probe(folder), **context}
