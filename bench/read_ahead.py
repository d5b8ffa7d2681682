#!/usr/bin/env python3
"""Does the data disk's read-ahead decide what disk-bound's `disk_access_mode` does? (issue 20's reading)

In the disk-bound screening, `disk_access_mode=mmap` ran at x0.04 of the default's throughput. A memory-mapped
read that faults makes the kernel read the device's read-ahead around the page it needs (8 MiB on this machine's
virtual disk, 4 KiB per page asked), and Cassandra's own start-up check warns about read-ahead above 8 KiB on an
SSD. This benchmark sets the data disk's read-ahead (as root, in /sys/block/<disk>/queue/read_ahead_kb) to each
level in turn and runs each configuration at each level, in --rounds interleaved cold rounds (the order
alternates between rounds); the machine's own read-ahead is put back at the end, also when stopped. Every
trial records the read-ahead it ran with (internals read_ahead_kb): a trial that ran at another is an error.

Per configuration: each level's throughput, read p99 and disk bytes read per operation (means over the rounds),
and the ratio of the lower level to the machine's own per round, with its 95% Student t interval and a paired
t-test on the logarithms.

Study: bench/results/read_ahead/read-ahead.db (one study per configuration and level). Resumable: finished
rounds are not run again. Writes bench/results/read_ahead.{md,json}, keeping the hand-written notes.

    python3 bench/read_ahead.py --levels 8192,8 --configs default,mmap --rounds 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
from pathlib import Path

from common import RESULTS, ROOT, kept_notes, log, nosqltune, study_rows  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))

from nosqltune.evaluation.stats import mean_interval  # noqa: E402
from nosqltune.runtime.environment import read_ahead_kb  # noqa: E402
from nosqltune.runtime.paths import work_dir  # noqa: E402

FOLDER = RESULTS / "read_ahead"
DB = FOLDER / "read-ahead.db"
CONFIGS = {"default": [], "mmap": ["--set", "disk_access_mode=mmap"]}
FIGURES = (("throughput_ops_s", "ops/s"), ("read_p99_ms", "ms"), ("node_disk_read_bytes_per_op", "B/op"))


def control_file(folder: Path) -> Path:
    """The read-ahead file of the disk that holds `folder` (the trials' work directory)."""
    dev = os.stat(folder).st_dev
    block = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
    for candidate in (block, block.parent):
        if (candidate / "queue" / "read_ahead_kb").exists():
            return candidate / "queue" / "read_ahead_kb"
    raise SystemExit(f"read_ahead: {folder} is on no block device with a read-ahead setting")


def rows(label: str) -> list[dict]:
    return [r for r in study_rows(DB, label) if r["failure_kind"] != "interrupted"]


def summarize(configs: list[str], levels: list[int], rounds: int) -> dict:
    from scipy.stats import ttest_1samp

    out: dict = {"levels_kb": levels, "rounds": rounds, "configs": {}}
    for config in configs:
        runs = {level: [r["metrics"].get("summary") if r["state"] == "COMPLETE" else None
                        for r in rows(f"{config}@{level}")][:rounds] for level in levels}
        entry: dict = {"levels": {}}
        for level in levels:
            done = [s for s in runs[level] if s]
            entry["levels"][str(level)] = {"rounds": len(done), "failed": len(runs[level]) - len(done),
                                           **{key: statistics.mean(s[key] for s in done) if done else None
                                              for key, _ in FIGURES}}
        base, *others = levels
        for level in others:
            ratios = [s[FIGURES[0][0]] / b[FIGURES[0][0]] for s, b in zip(runs[level], runs[base]) if s and b]
            logs = [math.log(x) for x in ratios]
            p = float(ttest_1samp(logs, 0.0).pvalue) if len(logs) >= 2 and statistics.pstdev(logs) > 0 else None
            entry[f"throughput_ratio_{level}_vs_{base}"] = {
                "mean": statistics.mean(ratios) if ratios else None,
                "interval": list(mean_interval(ratios) or []) or None, "p": p, "pairs": len(ratios)}
        out["configs"][config] = entry
    return out


def write(configs: list[str], levels: list[int], rounds: int) -> None:
    data = summarize(configs, levels, rounds)
    (RESULTS / "read_ahead.json").write_text(json.dumps(data, indent=1) + "\n")
    base = levels[0]
    md = ["# The data disk's read-ahead under disk-bound (issue 20)", "",
          f"Scenario disk-bound (2M records of 1 KB, the node in a memory group), {rounds} interleaved cold rounds; "
          f"read-ahead levels {', '.join(f'{x} KiB' for x in levels)} ({base} KiB: the machine's own). "
          "Written by bench/read_ahead.py.", "",
          "| configuration | read-ahead | rounds | throughput | read p99 | disk read per op | "
          f"throughput vs {base} KiB [95%] | p |", "|---|---|---|---|---|---|---|---|"]
    for config, entry in data["configs"].items():
        for level in levels:
            got = entry["levels"][str(level)]
            ratio = entry.get(f"throughput_ratio_{level}_vs_{base}", {})
            interval = ratio.get("interval")
            shown = (f"x{ratio['mean']:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval
                     else f"x{ratio['mean']:.3f}" if ratio.get("mean") else "-")
            figures = [f"{got[key]:,.0f} {unit}" if got[key] is not None and unit != "ms"
                       else f"{got[key]:.2f} {unit}" if got[key] is not None else "-" for key, unit in FIGURES]
            md.append(f"| {config} | {level} KiB | {got['rounds']} (failed {got['failed']}) | "
                      f"{' | '.join(figures)} | {shown} | "
                      f"{'-' if ratio.get('p') is None else format(ratio['p'], '.3g')} |")
    md += ["", *kept_notes(RESULTS / "read_ahead.md", Path(__file__).name)]
    (RESULTS / "read_ahead.md").write_text("\n".join(md) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", default="", help="read-ahead levels in KiB, comma-separated; the first is the "
                   "baseline (default: the machine's own, then 8)")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"of {', '.join(CONFIGS)}")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--write-only", action="store_true", help="run nothing: write read_ahead.md/json")
    a = p.parse_args()
    folder = work_dir()
    folder.mkdir(parents=True, exist_ok=True)
    control = control_file(folder)
    own = int(control.read_text())
    levels = [x for x in a.levels.split(",") if x] or [own, 8]
    configs = [c for c in a.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or len(levels) < 2 or a.rounds < 2 or not all(str(x).isdigit() for x in levels):
        print(f"read_ahead: give configurations of {', '.join(CONFIGS)}, two levels in KiB or more and 2 rounds or "
              "more", file=sys.stderr)
        return 2
    levels = [int(x) for x in levels]
    FOLDER.mkdir(parents=True, exist_ok=True)
    if a.write_only:
        write(configs, levels, a.rounds)
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # the finally below puts the read-ahead back
    try:
        plan = [(config, level) for config in configs for level in levels]
        for round_ in range(a.rounds):
            for config, level in (plan if round_ % 2 == 0 else list(reversed(plan))):
                label = f"{config}@{level}"
                if len(rows(label)) > round_:
                    continue
                control.write_text(str(level))
                log(f"round {round_ + 1}/{a.rounds}: {config} at read-ahead {level} KiB")
                nosqltune("bench", "--scenario", "disk-bound", "--repeat", "1", *CONFIGS[config], "--study", str(DB),
                          "--study-name", label, "--json", ok=(0, 1))
                last = rows(label)[-1]
                ran = last["internals"].get("read_ahead_kb")
                if last["state"] == "COMPLETE" and ran != level:
                    raise SystemExit(f"read_ahead: {label} ran at read-ahead {ran} KiB, not {level}")
            write(configs, levels, a.rounds)
    finally:
        control.write_text(str(own))
        log(f"read-ahead put back to {own} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
