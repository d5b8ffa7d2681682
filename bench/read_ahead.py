#!/usr/bin/env python3
"""Does the data disk's read-ahead decide what disk-bound's `disk_access_mode` does? (a reading of
bench/results/landscape.md)

In the disk-bound screening, `disk_access_mode=mmap` ran at x0.04 of the default's throughput. A memory-mapped
read that faults makes the kernel read up to the device's read-ahead around the page it needs (8 MiB on this
machine's virtual disk), and Cassandra 5.0's start-up check warns about a read-ahead above 128 KiB (it recommends
8 KiB or less on SSDs, 64 KiB on spinning disks). This benchmark sets the data disk's read-ahead (as root, in
/sys/block/<disk>/queue/read_ahead_kb) to each level in turn and runs each configuration at each level, in
--rounds interleaved cold rounds (the order alternates between rounds). The machine's own read-ahead is kept in
bench/results/read_ahead/machine-read-ahead-kb before the first change and put back at the end, on Ctrl-C,
SIGTERM and SIGHUP too; after a SIGKILL the next run (or --write-only) puts it back. Every trial records the
read-ahead it ran with (internals read_ahead_kb): a trial that ran at another does not count.

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
from nosqltune.runtime.environment import disk_queue  # noqa: E402
from nosqltune.runtime.paths import work_dir  # noqa: E402

FOLDER = RESULTS / "read_ahead"
DB = FOLDER / "read-ahead.db"
CONFIGS = {"default": [], "mmap": ["--set", "disk_access_mode=mmap"]}
SAVED = FOLDER / "machine-read-ahead-kb"   # the machine's own read-ahead while this benchmark changes it
THROUGHPUT = "throughput_ops_s"
FIGURES = ((THROUGHPUT, "ops/s"), ("read_p99_ms", "ms"), ("node_disk_read_bytes_per_op", "B/op"))


def control_file(folder: Path) -> Path:
    """The read-ahead file of the disk that holds `folder` (the trials' work directory)."""
    queue = disk_queue(folder)
    if queue is None or not (queue / "read_ahead_kb").exists():
        raise SystemExit(f"read_ahead: {folder} is on no block device with a read-ahead setting")
    return queue / "read_ahead_kb"


def machine_level(control: Path) -> int:
    """The machine's own read-ahead: the one saved by a run that was stopped before it put it back (which is
    put back now), else the disk's current one."""
    if SAVED.exists():
        control.write_text(SAVED.read_text().strip())
        SAVED.unlink()
    return int(control.read_text())


def rows(label: str) -> list[dict]:
    """The label's finished trials (a failed one included), without those that ran at another read-ahead."""
    level = int(label.rsplit("@", 1)[1])
    return [r for r in study_rows(DB, label)
            if r["state"] in ("COMPLETE", "FAIL") and r["failure_kind"] != "interrupted"
            and (r["state"] == "FAIL" or r["internals"].get("read_ahead_kb") == level)]


def _mean(runs: list[dict | None], key: str) -> float | None:
    values = [s[key] for s in runs if s and s.get(key) is not None]
    return statistics.mean(values) if values else None


def summarize(configs: list[str], levels: list[int], rounds: int, own: int) -> dict:
    from scipy.stats import ttest_1samp

    out: dict = {"levels_kb": levels, "machine_read_ahead_kb": own, "rounds": rounds, "configs": {}}
    for config in configs:
        runs = {level: [r["metrics"].get("summary") if r["state"] == "COMPLETE" else None
                        for r in rows(f"{config}@{level}")][:rounds] for level in levels}
        entry: dict = {"levels": {}}
        for level in levels:
            done = [x for x in runs[level] if x]
            entry["levels"][str(level)] = {"rounds": len(done), "failed": len(runs[level]) - len(done),
                                           **{key: _mean(done, key) for key, _ in FIGURES}}
        base, *others = levels
        for level in others:   # per round: this level's throughput over the first level's
            ratios = [x[THROUGHPUT] / b[THROUGHPUT] for x, b in zip(runs[level], runs[base])
                      if x and b and x.get(THROUGHPUT) and b.get(THROUGHPUT)]
            logs = [math.log(x) for x in ratios]
            p = float(ttest_1samp(logs, 0.0).pvalue) if len(logs) >= 2 and statistics.pstdev(logs) > 0 else None
            interval = mean_interval(ratios)
            entry[f"throughput_ratio_{level}_vs_{base}"] = {
                "mean": statistics.mean(ratios) if ratios else None,
                "interval": list(interval) if interval else None, "p": p, "pairs": len(ratios)}
        out["configs"][config] = entry
    return out


def write(configs: list[str], levels: list[int], rounds: int, own: int) -> None:
    data = summarize(configs, levels, rounds, own)
    (RESULTS / "read_ahead.json").write_text(json.dumps(data, indent=1) + "\n")
    base = levels[0]
    md = ["# The data disk's read-ahead under disk-bound", "",
          f"Scenario disk-bound (2M records of 1 KB, the node in a memory group), {rounds} interleaved cold rounds; "
          f"read-ahead levels {', '.join(f'{x} KiB' for x in levels)} (the machine's own: {own} KiB). "
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
    levels = [x for x in a.levels.split(",") if x]
    configs = [c for c in a.configs.split(",") if c]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown or a.rounds < 2 or not all(x.isdigit() for x in levels) or len(set(levels)) != len(levels) \
            or len(levels) == 1:
        print(f"read_ahead: give configurations of {', '.join(CONFIGS)}, two different levels in KiB or more and 2 "
              "rounds or more", file=sys.stderr)
        return 2
    if not os.access(control, os.W_OK):
        print(f"read_ahead: {control} is not writable: run as root", file=sys.stderr)
        return 3
    FOLDER.mkdir(parents=True, exist_ok=True)
    own = machine_level(control)
    levels = [int(x) for x in levels] or ([own, 8] if own != 8 else [own, 64])
    if a.write_only:
        write(configs, levels, a.rounds, own)
        return 0

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):   # the finally below puts the read-ahead back
        signal.signal(signum, stop)
    SAVED.write_text(f"{own}\n")
    try:
        plan = [(config, level) for config in configs for level in levels]
        for round_ in range(a.rounds):
            for config, level in (plan if round_ % 2 == 0 else list(reversed(plan))):
                label = f"{config}@{level}"
                if len(rows(label)) > round_:
                    continue
                control.write_text(str(level))
                if int(control.read_text()) != level:   # the kernel keeps whole pages: 4 KiB steps
                    raise SystemExit(f"read_ahead: the disk took {control.read_text().strip()} KiB for {level}")
                log(f"round {round_ + 1}/{a.rounds}: {config} at read-ahead {level} KiB")
                before = len(study_rows(DB, label))
                nosqltune("bench", "--scenario", "disk-bound", "--repeat", "1", *CONFIGS[config], "--study", str(DB),
                          "--study-name", label, "--json", ok=(0, 1))
                if len(study_rows(DB, label)) == before:
                    raise SystemExit(f"read_ahead: {label} stored no trial (see the lines above)")
            write(configs, levels, a.rounds, own)
    finally:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):   # nothing stops the putting back
            signal.signal(signum, signal.SIG_IGN)
        control.write_text(str(own))
        SAVED.unlink(missing_ok=True)
        log(f"read-ahead put back to {own} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
