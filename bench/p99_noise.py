#!/usr/bin/env python3
"""What moves the read p99 of repeated runs of one configuration: cloud-slo's p99 varied by
about 25% from run to run, more than any configuration moved it, so no gain could be claimed there.

Reads the committed stores (no trial is run): every configuration with at least --min-runs complete runs (search,
confirmation and comparison runs alike), and per configuration the spread of its read p99, p50 and mean, and the
correlation of its p99 with what each run measured beside it: the volume device's milliseconds per read I/O (the
host disk's service time under the loop device: the blkio caps delay I/Os before they reach it, so this is the
machine's own disk speed, not the cap), the node's and the client's CPU per operation, the node's GC time, its
I/Os per operation and the CPU and disk probes taken before the trial (internals.machine_probe; the disk's since
2026-11-26). Then the pooled within-configuration elasticity of the p99 on the device's time per I/O (a
regression of log p99 on log ms per I/O, each configuration centred on its own means) and each configuration's
p99 spread once that part is taken out: how much of the noise a measure of the disk's speed taken in the same
trial could remove (tune's --denoise). Writes bench/results/p99_noise.{md,json}.

  python3 bench/p99_noise.py                       # the cloud-slo stores and the latency-slo study
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time

import numpy as np

from common import RESULTS, kept_notes, log  # bench/common.py

STORES = {"cloud-slo": RESULTS / "impact" / "cloud-slo.db",   # at 92% of the maximum since 2026-11-27, no wait per I/O
          "cloud-slo at 70%": RESULTS / "impact" / "cloud-slo-70.db",   # as it was before
          "latency-slo": RESULTS / "impact" / "latency-slo.db"}
BESIDE = {"node_dev_read_ms_per_io": "device ms per read I/O", "node_cpu_us_per_op": "node CPU us/op",
          "client_cpu_us_per_op": "client CPU us/op", "node_gc_ms": "node GC ms", "node_io_per_op": "I/Os per op",
          "probe_cpu_mb_s": "machine probe MB/s", "probe_disk_read_ms": "disk probe ms"}


def runs_by_configuration(path) -> dict[str, list[dict]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT config, metrics, internals FROM trials WHERE state = 'COMPLETE' "
                          "ORDER BY started_at").fetchall()
    finally:
        db.close()
    out: dict[str, list[dict]] = {}
    for config, metrics, internals in rows:
        summary = dict((json.loads(metrics) if metrics else {}).get("summary") or {})
        probe = (json.loads(internals) if internals else {}).get("machine_probe") or {}
        summary["probe_cpu_mb_s"] = probe.get("cpu_mb_s")   # the CPU probe every trial stores (runtime/probe.py)
        summary["probe_disk_read_ms"] = probe.get("disk_read_ms")   # the disk probe, in trials after 2026-11-26
        if summary.get("read_p99_ms"):
            out.setdefault(config, []).append(summary)
    return out


def _cv(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1) / np.mean(values))


def analyse(name: str, path, min_runs: int) -> dict:
    groups = {c: runs for c, runs in runs_by_configuration(path).items() if len(runs) >= min_runs}
    configs = []
    centred_x, centred_y = [], []
    others = 0
    for config, runs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        p99 = np.array([r["read_p99_ms"] for r in runs], dtype=float)
        others += config != "{}"
        row = {"label": "default" if config == "{}" else f"configuration {others}", "runs": len(runs),
               "p99_ms": float(np.mean(p99)), "p99_cv": _cv(p99),
               "p50_cv": _cv(np.array([r["read_p50_ms"] for r in runs], dtype=float)),
               "avg_cv": _cv(np.array([r["read_avg_ms"] for r in runs], dtype=float)), "correlation": {}}
        for key in BESIDE:
            values = np.array([r.get(key) if r.get(key) is not None else np.nan for r in runs], dtype=float)
            ok = ~np.isnan(values)
            if ok.sum() >= min_runs and np.std(values[ok]) > 0:
                row["correlation"][key] = float(np.corrcoef(p99[ok], values[ok])[0, 1])
                row[f"{key}_cv"] = _cv(values[ok])
        device = np.array([r.get("node_dev_read_ms_per_io") or np.nan for r in runs], dtype=float)
        if not np.isnan(device).any():
            centred_x += list(np.log(device) - np.log(device).mean())
            centred_y += list(np.log(p99) - np.log(p99).mean())
            row["_logs"] = (np.log(p99), np.log(device))
        configs.append(row)
    elasticity = float(np.dot(centred_x, centred_y) / np.dot(centred_x, centred_x)) if centred_x else None
    for row in configs:
        logs = row.pop("_logs", None)
        if logs is not None and elasticity is not None:
            ly, lx = logs
            row["p99_log_sd"] = float(np.std(ly, ddof=1))
            row["p99_log_sd_adjusted"] = float(np.std(ly - elasticity * (lx - lx.mean()), ddof=1))
    return {"scenario": name, "store": str(path.relative_to(RESULTS.parent.parent)), "configurations": configs,
            "elasticity_on_device_ms_per_io": elasticity}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min-runs", type=int, default=5, help="configurations with at least this many runs (5)")
    a = p.parse_args()
    results = {"at": time.strftime("%Y-%m-%d %H:%M"), "min_runs": a.min_runs,
               "scenarios": [analyse(name, path, a.min_runs) for name, path in STORES.items() if path.exists()]}
    (RESULTS / "p99_noise.json").write_text(json.dumps(results, indent=1) + "\n")
    write(results)
    return 0


def write(results: dict) -> None:
    path = RESULTS / "p99_noise.md"
    lines = ["# What moves a configuration's read p99 from run to run", "",
             f"Generated by `bench/p99_noise.py` ({results['at']}) from the committed stores; no trial was run. "
             f"Configurations with at least {results['min_runs']} complete runs.", ""]
    lines += kept_notes(path, "p99_noise.py")
    for s in results["scenarios"]:
        e = s["elasticity_on_device_ms_per_io"]
        lines += [f"## {s['scenario']} (`{s['store']}`)", "",
                  "| configuration | runs | p99 (ms) | CV p99 / p50 / mean | r(p99, " + ") | r(p99, ".join(BESIDE.values())
                  + ") | CV device ms per I/O | p99 log-sd, raw -> without the device's part |",
                  "|---|---|---|---|" + "---|" * len(BESIDE) + "---|---|"]
        for c in s["configurations"]:
            corr = " | ".join(f"{c['correlation'][k]:+.2f}" if k in c["correlation"] else "-" for k in BESIDE)
            adjusted = f"{c['p99_log_sd']:.3f} -> {c['p99_log_sd_adjusted']:.3f}" if "p99_log_sd" in c else "-"
            device_cv = f"{c['node_dev_read_ms_per_io_cv']:.0%}" if "node_dev_read_ms_per_io_cv" in c else "-"
            lines.append(f"| {c['label']} | {c['runs']} | {c['p99_ms']:.2f} | {c['p99_cv']:.0%} / {c['p50_cv']:.0%} / "
                         f"{c['avg_cv']:.0%} | {corr} | {device_cv} | {adjusted} |")
        lines += ["", "Pooled within-configuration elasticity of the p99 on the device's ms per read I/O: "
                      + (f"{e:.2f}." if e is not None else "not measured (no device figures).")]
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
