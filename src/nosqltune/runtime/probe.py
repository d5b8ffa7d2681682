"""The machine's own speed, measured in every trial before the datastore starts (issue 38's drift): a fixed piece
of work that no datastore setting can change, timed the same way each time, so trials run hours apart can be told
apart by the machine they ran on, not only by their configuration.

The work is SHA-256 over a fixed 8 MiB buffer (C code, one core), best of five passes: the best pass is the core's
speed with the least interference, the spread of the five says how busy the machine was while probing. About 0.1 s.
The figure is stored with the trial (`internals.machine_probe`); it is not yet used to adjust what an optimizer is
told (that needs a model checked on real studies: docs/trials.md)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

PROBE_BYTES = 8 << 20
PASSES = 5


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
