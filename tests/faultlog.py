"""What the fault and bad-input tests saw, for bench/results/faults.md (issue 22).

A test calls `record(...)` with one row; the rows go to the JSON-lines file named by NOSQLTUNE_FAULT_LOG (set by
`make faults`), and nowhere when it is unset. `bench/faults.py` turns the file into faults.md. A row is written
only after the test's own assertions passed, so the table holds what was checked, not what was hoped."""

from __future__ import annotations

import json
import os
import time


def record(kind: str, **fields) -> None:
    """kind: "fault" (fields: fault, phase, system, outcome, state, reason, lost, counted_twice, orphans,
    files_outside, resumed, detect_s) or "bad_input" (fields: command, input, exit_code, message)."""
    path = os.environ.get("NOSQLTUNE_FAULT_LOG")
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps({"kind": kind, "time": time.time(), **fields}, default=str) + "\n")
