#!/usr/bin/env python3
"""A surrogate benchmark's dataset: real Cassandra trials over a knob space and several read ratios (wide24 by
default; `--name cloud13 --scenario cloud-disk --knobs cloud` for the capped volume's).

1. `nosqltune collect` of 50 configurations (the default, and random ones covering every knob's extremes)
   x read ratios 0.1, 0.3, 0.5, 0.7, 0.9, plus 3 extra runs of the default per read ratio (the noise);
   30K measured operations after the 20K warm-up, 100K records, 16 threads, C1 JIT (a reduced setup: the
   calibrated CV at 30K operations was 3.1%, bench/results/noise-pretouch.md).
2. Trials slowed down by another program on the machine are set aside and run again. The first trials
   of this dataset ran before `collect` checked that the machine was idle, while other work ran beside
   them: such a trial whose node took longer than CONTENDED_BOOT_S to boot (3.6-4.6 s on a quiet machine;
   5-6 s while something else used the CPU) gets the tag `contended` (kept in the store, left out of
   every model) and its plan entry runs again. Trials run since then waited for an idle CPU and record
   the busy share they saw (`busy_before`); they are not set aside.
3. The study is exported to src/nosqltune/surrogate/datasets/wide24.json.gz (trials + environment
   fingerprint), the dataset `--system surrogate:wide24` answers from (`--name N`: N.json.gz, surrogate:N).

Resumable: run it again with the same flags. Results: bench/results/surrogate/<name>.db and collection.md (wide24),
collection-<name>.md otherwise. The capped volume's recorded landscape, begun 2026-11-27 (cloud13.db, resumable; about a
trial a minute here, dataset builds included):
  python3 bench/surrogate_collect.py --name cloud13 --scenario cloud-disk --knobs cloud \
      --read-ratios 0.5,0.7,0.95 --configs 96 --noise-repeats 5 --operations 30000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
RESULTS = ROOT / "bench" / "results" / "surrogate"
DATASETS = ROOT / "src" / "nosqltune" / "surrogate" / "datasets"
CONTENDED_BOOT_S = 4.6


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def collect(db: Path, a: argparse.Namespace) -> None:
    scenario = ["--scenario", a.scenario] if a.scenario else []
    cmd = [sys.executable, "-m", "nosqltune", "collect", *scenario, "--knobs", a.knobs, "--read-ratios",
           a.read_ratios, "--configs", str(a.configs), "--noise-repeats", str(a.noise_repeats), "--operations",
           str(a.operations), "--study", str(db)]
    proc = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if proc.returncode not in (0, 1):  # 1: some trials failed (stored as failed): the collection goes on
        raise SystemExit(f"collect stopped ({proc.returncode})")


def set_aside_contended(db: Path) -> int:
    from nosqltune.store import open_store

    store = open_store(str(db))
    try:
        study = store.find_study("collect")
        n = 0
        for row in store.trials(study["id"]):
            boot = (row.get("timings") or {}).get("boot_s")
            guarded = "busy_before" in (row.get("meta") or {})   # ran after a check that the machine was idle
            if row["tag"] == "collect" and row["state"] == "COMPLETE" and not guarded and boot \
                    and boot > CONTENDED_BOOT_S:
                store.retag(row["id"], "contended")
                n += 1
        return n
    finally:
        store.close()


def summary(db: Path) -> dict:
    from nosqltune.store import open_store
    from nosqltune.surrogate.features import load_table
    from nosqltune.surrogate.pipeline import noise

    store = open_store(str(db))
    try:
        rows = store.trials(store.find_study("collect")["id"])
    finally:
        store.close()
    used = [r for r in rows if r["tag"] == "collect" and r["state"] == "COMPLETE"]
    table = load_table(str(db))
    by_ratio: dict[str, list[float]] = {}
    for r in used:
        by_ratio.setdefault(r["workload"]["name"], []).append(r["metrics"]["summary"]["throughput_ops_s"])
    return {"trials_used": len(used), "contended_set_aside": sum(r["tag"] == "contended" for r in rows),
            "failed": [{"workload": r["workload"]["name"], "kind": r["failure_kind"], "error": r["error"]}
                       for r in rows if r["state"] == "FAIL" and r["failure_kind"] != "interrupted"],
            "trial_seconds_mean": statistics.fmean((r["timings"] or {}).get("total_s", 0) for r in used),
            "noise_cv": noise(table, "throughput")["cv"],
            "throughput_by_workload": {k: {"min": min(v), "median": statistics.median(v), "max": max(v), "n": len(v)}
                                       for k, v in sorted(by_ratio.items())}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--read-ratios", default="0.1,0.3,0.5,0.7,0.9")
    p.add_argument("--configs", type=int, default=50)
    p.add_argument("--noise-repeats", type=int, default=3)
    p.add_argument("--operations", type=int, default=30000)
    p.add_argument("--rounds", type=int, default=2, help="collect / set aside contended trials rounds")
    p.add_argument("--name", default="wide24", help="the dataset's name: surrogate/datasets/NAME.json.gz")
    p.add_argument("--scenario", default=None, help="the scenario its trials run in (default: collect's own)")
    p.add_argument("--knobs", default="wide24", help="the knob set sampled (default wide24)")
    a = p.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    db = RESULTS / f"{a.name}.db"
    dataset = DATASETS / f"{a.name}.json.gz"
    for round_ in range(a.rounds):
        log(f"collect, round {round_ + 1}")
        collect(db, a)
        aside = set_aside_contended(db)
        log(f"{aside} contended trials set aside")
        if not aside:
            break
    from nosqltune.store import open_store
    from nosqltune.surrogate.dataset import export_dataset

    store = open_store(str(db))
    store.checkpoint()
    store.close()
    data = export_dataset(str(db), dataset, name=a.name)
    info = summary(db)
    info["dataset"] = str(dataset.relative_to(ROOT))
    info["environment"] = data["environments"]
    report = "collection" if a.name == "wide24" else f"collection-{a.name}"
    (RESULTS / f"{report}.json").write_text(json.dumps(info, indent=2) + "\n")
    lines = [f"# Surrogate dataset {a.name}", "",
             f"Made by `{' '.join(['python3', 'bench/surrogate_collect.py', *sys.argv[1:]])}`.", "",
             f"{info['trials_used']} complete cold trials used ({info['contended_set_aside']} set aside as contended "
             f"and run again; {len(info['failed'])} failed), {info['trial_seconds_mean']:.1f} s per trial.",
             f"Noise (CV of the repeated default per read ratio, pooled): {info['noise_cv'] * 100:.1f}%.", "",
             "| workload | trials | min ops/s | median | max |", "|---|---|---|---|---|"]
    for name, s in info["throughput_by_workload"].items():
        lines.append(f"| {name} | {s['n']} | {s['min']:.0f} | {s['median']:.0f} | {s['max']:.0f} |")
    if info["failed"]:
        lines += ["", "Failed trials:"] + [f"- {f['workload']}: {f['kind']}: {f['error']}" for f in info["failed"]]
    env = info["environment"][0] if info["environment"] else {}
    lines += ["", f"Measured on: {env.get('cpu_model')}, {env.get('cores')} cores, {env.get('memory_gib')} GiB, "
              f"Cassandra {env.get('system_version')}, {env.get('java')}."]
    (RESULTS / f"{report}.md").write_text("\n".join(lines) + "\n")
    log(f"dataset {dataset} ({len(data['trials'])} trials)")


if __name__ == "__main__":
    main()
