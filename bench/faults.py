#!/usr/bin/env python3
"""bench/results/faults.md from the fault campaign's own run.

`make faults` runs the tests marked `faults` (all of them, the slow ones too) with NOSQLTUNE_FAULT_LOG naming a
JSON-lines file; each test writes its row there after its assertions passed. This script turns that file into
the table: per fault and phase, what the user saw, the faulted trial's stored state and reason, trials lost,
trials counted twice, processes and files left behind, whether the study finished (resumed when the tuner
itself was stopped), and the time a hang took to be detected; then the count of bad inputs tried (each exit 2,
one line) and the security checks. The reading written by hand under the fault table, between its notes
markers, is kept when the file is written again.

    python3 bench/faults.py test-artifacts/faults.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from common import RESULTS, kept_notes  # bench/common.py


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return str(value).replace("|", "/").replace("\n", " ")


def write(rows: list[dict], out: Path) -> str:
    faults = [r for r in rows if r["kind"] == "fault"]
    bad = [r for r in rows if r["kind"] == "bad_input" and r["exit_code"] == 2]
    setup = [r for r in rows if r["kind"] == "bad_input" and r["exit_code"] != 2]   # e.g. no Java: exit 3
    security = [r for r in rows if r["kind"] == "security"]
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(min((r["time"] for r in rows), default=time.time())))
    lost = sum(int(r.get("lost") or 0) for r in faults)
    twice = sum(int(r.get("counted_twice") or 0) for r in faults)
    orphans = sum(int(r.get("orphans") or 0) for r in faults)
    stray = sum(int(r.get("files_outside") or 0) for r in faults)
    unresumed = [r for r in faults if r.get("resumed") is False]
    md = ["# Faults and bad input: what the campaign saw", "",
          f"From the suite's own run (`make faults`, started {when} UTC): every row is a test whose assertions "
          "passed; a failing test writes no row. Studies of 3 trials (Redis unless the system says otherwise), "
          "the fault at the named phase of trial 2; a stopped tuner is resumed with `tune --resume`.", "",
          f"**Totals**: {len(faults)} faults; trials lost {lost}, counted twice {twice}, processes left {orphans}, "
          f"files left outside our folders {stray}, studies not finished {len(unresumed)}; "
          f"**{len(bad)} bad inputs**, each exit 2 with one line (and {len(setup)} missing tools, exit 3); "
          f"{len(security)} security checks passed.", "",
          "| fault | phase | system | what the user sees | faulted trial stored as | lost | twice | orphans | "
          "files outside | finished | detected after (s) |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in faults:
        stored = f"{r.get('state')} ({r.get('reason')})" if r.get("state") else "-"
        sees = r.get("user_sees") or r.get("outcome") or ""
        if r.get("exit_code") not in (None, 0):
            sees = f"exit {r['exit_code']}: {sees}"
        if r.get("state") and r.get("outcome"):
            stored += ": " + r["outcome"].split(": ", 1)[-1][:160]
        md.append(f"| {_cell(r['fault'])} | {_cell(r['phase'])} | {_cell(r['system'])} | {_cell(sees[:200])} | "
                  f"{_cell(stored)} | {_cell(r.get('lost'))} | {_cell(r.get('counted_twice'))} | "
                  f"{_cell(r.get('orphans'))} | {_cell(r.get('files_outside'))} | {_cell(r.get('resumed'))} | "
                  f"{_cell(r.get('detect_s'))} |")
    md += [""] + kept_notes(out, Path(__file__).name)   # the reading written by hand under the table
    md += ["## Bad inputs", "",
           f"{len(bad)} distinct bad inputs (tests/unit/test_bad_input.py), each exiting 2 with one line naming the "
           "problem and the fix, nothing written; below them, the missing tools (exit 3, a setup problem):", "",
           "| command | input | exit | message |", "|---|---|---|---|"]
    md += [f"| {_cell(r['command'])} | {_cell(r['input'])} | {r['exit_code']} | {_cell(r['message'])} |"
           for r in bad + setup]
    if security:
        md += ["", "## Security checks", "", "| check | outcome | detail |", "|---|---|---|"]
        md += [f"| {_cell(r['check'])} | {_cell(r['outcome'])} | {_cell(r.get('detail'))[:300]} |" for r in security]
    text = "\n".join(md) + "\n"
    out.write_text(text)
    (out.with_suffix(".json")).write_text(json.dumps(rows, indent=1) + "\n")
    return text


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log", type=Path, help="the JSON-lines file the tests wrote (NOSQLTUNE_FAULT_LOG)")
    p.add_argument("--out", type=Path, default=RESULTS / "faults.md")
    a = p.parse_args()
    if not a.log.exists():
        print(f"faults: no log {a.log}: run the campaign first (make faults)", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in a.log.read_text().splitlines() if line.strip()]
    write(rows, a.out)
    print(f"wrote {a.out} ({len(rows)} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
