#!/usr/bin/env python3
"""Each tuning strategy on real Cassandra, then its best configuration against the default.

For every workload: `nosqltune tune` with each optimizer (same knob set, same budget, one study each in
bench/results/tuning/<workload>.db), then the best configuration of each optimizer and the default run
--repeats interleaved cold rounds (study `compare` in the same file): mean speedup over the default, 95%
bootstrap interval, Wilcoxon signed-rank p-value. Writes bench/results/tuning_strategies.{md,json}.

Resumable: a tuning study continues where it stopped (--resume), and the comparison skips rounds already in
the store. Run it again after an interruption with the same flags.

    python bench/tuning_strategies.py                         # ycsb-a and read95, all four optimizers
    python bench/tuning_strategies.py --workloads ycsb-a --optimizers gp,smac --budget 20
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from common import RESULTS, ROOT, log, nosqltune  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))




def has_trials(db: Path, name: str) -> bool:
    from nosqltune.store import open_store

    if not db.exists():
        return False
    store = open_store(str(db))
    try:
        study = store.find_study(name)
        return bool(study and store.trials(study["id"]))
    finally:
        store.close()


def tune(db: Path, workload: str, optimizer: str, a: argparse.Namespace) -> dict:
    common = ["--study", str(db), "--study-name", optimizer]
    if has_trials(db, optimizer):
        log(f"{workload}/{optimizer}: resuming")
        out = nosqltune("tune", *common, "--resume", "--json", capture=True)
    else:
        log(f"{workload}/{optimizer}: tuning, budget {a.budget}")
        out = nosqltune("tune", *common, "--workload", workload, "--knobs", a.knobs, "--optimizer", optimizer,
                        "--budget", str(a.budget), "--operations", str(a.operations), "--seed", str(a.seed),
                        "--json", capture=True)
    return json.loads(out)


def curve(db: Path, optimizer: str) -> list[float | None]:
    """Best-so-far throughput per trial of a tuning study (single cold runs)."""
    from nosqltune.store import open_store

    store = open_store(str(db))
    try:
        rows = store.trials(store.find_study(optimizer)["id"])
    finally:
        store.close()
    best, out = None, []
    for row in rows:
        if row["tag"] != "tune" or row["failure_kind"] == "interrupted":
            continue
        if row["state"] == "COMPLETE":
            value = row["metrics"]["summary"]["throughput_ops_s"]
            best = value if best is None else max(best, value)
        out.append(best)
    return out


def compare(db: Path, workload_name: str, bests: dict[str, dict], a: argparse.Namespace) -> dict:
    from nosqltune.runtime.environment import fingerprint
    from nosqltune.evaluation.compare import run_interleaved
    from nosqltune.evaluation.stats import compare as paired
    from nosqltune.knobs import load_space
    from nosqltune.store import open_store
    from nosqltune.systems import TrialSettings, run_trial
    from nosqltune.workloads.spec import make_workload

    space = load_space("cassandra")
    candidates = {"default": {}}
    for name, best in bests.items():
        candidates[name] = {**best.get("fixed", {}), **best["best"]["config"]}
    workload = make_workload(workload_name, operations=a.operations)
    settings = TrialSettings(jit="c1")
    store = open_store(str(db))
    try:
        study_id = store.study("compare", "cassandra", {"candidates": candidates, "rounds": a.repeats})
        env_id = store.environment(fingerprint("cassandra", settings.cassandra.cassandra_version))
        rows = run_interleaved(store, study_id, candidates, a.repeats,
                               lambda overrides: run_trial(space, overrides, workload, settings),
                               workload_info={**workload.to_dict(), "harness": settings.to_dict()},
                               environment_id=env_id, say=log)
    finally:
        store.close()
    values = {k: [r["metrics"]["summary"]["throughput_ops_s"] if r else None for r in v] for k, v in rows.items()}
    stats = {k: paired(k, values[k], values["default"], maximize=True).to_dict() for k in candidates if k != "default"}
    return {"values": values, "stats": stats, "candidates": candidates}


def write_report(report: dict, a: argparse.Namespace) -> None:
    (RESULTS / "tuning_strategies.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    lines = ["# Tuning strategies on real Cassandra", "",
             f"Knob set `{a.knobs}`, budget {a.budget} trials per optimizer (the default included), "
             f"{a.operations} operations per trial (100K records, 16 threads, C1 JIT, cold trials), then the "
             f"best configuration of each optimizer against the default in {a.repeats} interleaved cold rounds. "
             "Speedup = candidate / default throughput of the same round; interval: 95% bootstrap of the mean; "
             "p: two-sided Wilcoxon signed-rank. Machine: 2 cores shared by Cassandra and the client.", ""]
    for workload, w in report["workloads"].items():
        lines += [f"## {workload}", "", "| optimizer | trials | best in tuning (ops/s, 1 run) | default in tuning | "
                  "rounds | mean speedup | 95% interval | median | p | verdict | changed knobs |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for name, t in w["tuning"].items():
            s = (w.get("compare") or {}).get("stats", {}).get(name)
            best = t["best"]
            changed = ", ".join(f"{k}={v[1]}" for k, v in t["changed"].items()) or "(default)"
            dflt = t["default"]["value"] if t.get("default") else None
            if s and s["mean_speedup"] is not None:
                cells = [str(s["pairs"]), f"{s['mean_speedup']:.3f}",
                         f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["ci_low"] is not None else "-",
                         f"{s['median_speedup']:.3f}", f"{s['p_value']:.4f}" if s["p_value"] is not None else "-",
                         s["verdict"]]
            else:
                cells = ["-"] * 6
            lines.append(f"| {name} | {t['trials']} | {best['value']:.0f} | {dflt:.0f} | " if dflt else
                         f"| {name} | {t['trials']} | {best['value']:.0f} | - | ")
            lines[-1] += " | ".join(cells) + f" | {changed} |"
        if w.get("compare"):
            vals = w["compare"]["values"]
            lines += ["", "Throughput per round (ops/s):", "", "| candidate | " +
                      " | ".join(str(i + 1) for i in range(len(vals["default"]))) + " |",
                      "|---|" + "---|" * len(vals["default"])]
            for k, v in vals.items():
                lines.append(f"| {k} | " + " | ".join("FAIL" if x is None else f"{x:.0f}" for x in v) + " |")
        lines += ["", "Best-so-far throughput by trial (single cold runs):", ""]
        for name, c in w["curves"].items():
            lines.append(f"- {name}: " + ", ".join("-" if x is None else f"{x:.0f}" for x in c))
        lines.append("")
    (RESULTS / "tuning_strategies.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="ycsb-a,read95")
    p.add_argument("--optimizers", default="random,irace,gp,smac")
    p.add_argument("--knobs", default="rafiki5")
    p.add_argument("--budget", type=int, default=40)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--operations", type=int, default=50000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tune-only", action="store_true", help="skip the comparison")
    a = p.parse_args()
    out_dir = RESULTS / "tuning"
    out_dir.mkdir(parents=True, exist_ok=True)
    report_path = RESULTS / "tuning_strategies.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"workloads": {}}
    for workload in a.workloads.split(","):
        db = out_dir / f"{workload}.db"
        w = report["workloads"].setdefault(workload, {})
        w["tuning"], w["curves"] = {}, {}
        bests = {}
        for optimizer in a.optimizers.split(","):
            result = tune(db, workload, optimizer, a)
            bests[optimizer] = {**result, "fixed": {}}
            w["tuning"][optimizer] = {k: result[k] for k in ("trials", "best", "default", "changed", "speedup",
                                                             "ask_seconds_mean", "stopped")}
            w["curves"][optimizer] = curve(db, optimizer)
            write_report(report, a)
        if not a.tune_only:
            log(f"{workload}: comparing {', '.join(bests)} against the default, {a.repeats} rounds")
            w["compare"] = compare(db, workload, bests, a)
            write_report(report, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
