"""What the benchmark scripts share: a timestamped log line, and running `nosqltune` from this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def nosqltune(*args: str, capture: bool = True, ok: tuple[int, ...] = (0,)) -> str:
    """Run one nosqltune command of this checkout; its stdout when `capture` (progress stays on stderr). A
    command that exits with a code outside `ok` ends the benchmark with the code in the message (the run can
    be resumed)."""
    cmd = [sys.executable, "-m", "nosqltune", *args]
    log(" ".join(cmd[2:]))
    proc = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          stdout=subprocess.PIPE if capture else None, text=True)
    if proc.returncode not in ok:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return proc.stdout or ""
