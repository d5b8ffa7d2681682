#!/usr/bin/env python3
"""The benchmark that matters: does tuning 5.0 pay where users tune, and does it beat Cassandra's own
modern recommendation (`latest`, cassandra_latest.yaml)?

Per scenario (disk-bound, write-heavy, latency-slo): a --budget-trial study with SMAC and one with irace on the
knob set (each ends with its confirmation: the top 3 by single runs re-measured beside the default, counted in
the budget); then, in the SMAC study, `compare` runs the default, SMAC's confirmed best, irace's best and `latest`
in --rounds interleaved cold rounds (ABCD DCBA ...). Per candidate against the default: the mean of the
per-round ratios with its 95% bootstrap interval and the Wilcoxon signed-rank p-value (compare's own
statistics); the best of the two studies against `latest` the same way, from the same rounds.

Goal: at least +30% throughput, or at least -40% read p99 (latency-slo), against the default with
p < 0.05 in two of the three scenarios, and better than `latest` in at least one.

Study files: bench/results/impact/<scenario>.db (studies `smac`, `irace`; the comparison is stored in `smac`;
cloud-slo's in cloud-slo-1ms.db).
Resumable at every step (tune --resume, compare continues its rounds). Writes
bench/results/impact_tuning.{md,json} after every scenario. Hours of cold trials: nothing else may run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import mean

from nosqltune.objective import metric_unit

from common import (RESULTS, machines, best_as_yaml, kept_notes, log, nosqltune, paired, ratio_text,  # bench/common.py
                    tune_or_resume)

FOLDER = RESULTS / "impact"
SCENARIOS = ("disk-bound", "write-heavy", "latency-slo", "cloud-disk", "cloud-slo")
GOAL = {"throughput": 1.30, "p99-read": 1 / 0.60}   # as ratios where > 1 is better
# the goals on a capped volume (the cloud scenarios): x1.5 throughput in cloud-disk (and x1.15 against latest), a 40% lower p99
SCENARIO_GOAL = {"cloud-disk": 1.50}
KNOBS = {"cloud-disk": "cloud", "cloud-slo": "cloud"}   # the knob set searched there (else --knobs)
# the store per scenario, where it is not <scenario>.db: cloud-slo's volume waits 1 ms per I/O since e54913c, and
# cloud-slo.db holds its runs without the wait (bench/cloud_tuning.py keeps both)
STORE = {"cloud-slo": "cloud-slo-1ms"}
SIDE_METRICS = ("throughput", "p99-read", "cpu-per-op")   # tested beside the objective, from the same runs


def tune(scenario: str, optimizer: str, knobs: str, budget: int) -> dict:
    return tune_or_resume(FOLDER / f"{STORE.get(scenario, scenario)}.db", optimizer, "--scenario", scenario, "--knobs",
                          knobs, "--optimizer", optimizer, "--budget", str(budget))


def best_yaml(scenario: str, optimizer: str) -> str:
    store = STORE.get(scenario, scenario)
    return str(best_as_yaml(FOLDER / f"{store}.db", optimizer, FOLDER / f"{store}-{optimizer}-best.yaml"))


def compare(scenario: str, rounds: int, irace_best: str) -> dict:
    db = FOLDER / f"{STORE.get(scenario, scenario)}.db"
    out = nosqltune("compare", "--study", str(db), "--study-name", "smac", "--candidates",
                    f"best,latest,{irace_best}", "--repeat", str(rounds), "--metrics", ",".join(SIDE_METRICS), "--json")
    return json.loads(out)


def summarize(scenario: str, tunes: dict, comparison: dict) -> dict:
    metric = comparison["metric"]
    maximize = metric == "throughput"
    (workload,) = comparison["workloads"].values()
    values, stats = workload["values"], workload["stats"]
    irace_label = next(k for k in values if k not in ("default", "best", "latest"))
    tuned = {"smac": "best", "irace": irace_label}
    goal = SCENARIO_GOAL.get(scenario, GOAL.get(metric, GOAL["throughput"]))
    # the other figures of the same runs (throughput, read p99, node CPU per operation) against the default
    side = {m: {label: w["stats"][label].get("mean_speedup") for label in w["stats"]}
            for m, w in workload.get("also", {}).items()}
    rows = {}
    for optimizer, label in tuned.items():
        s = stats[label]
        rows[optimizer] = {"vs_default": s, "vs_latest": paired(values[label], values["latest"], maximize),
                           "meets_goal": bool(s.get("mean_speedup") and s["mean_speedup"] >= goal
                                             and (s.get("p_value") or 1) < 0.05),
                           "side": {m: by_label.get(label) for m, by_label in side.items()},
                           "config": comparison["candidates"][label],
                           "study": {k: tunes[optimizer].get(k) for k in ("trials", "failed_trials", "speedup")}}
    return {"scenario": scenario, "metric": metric, "latest_vs_default": stats["latest"],
            "latest_side": {m: by_label.get("latest") for m, by_label in side.items()}, "tuned": rows,
            "rounds": len(values["default"]), "default_values": values["default"]}


def _p(s: dict) -> str:
    return "-" if s.get("p_value") is None else f"{s['p_value']:.3g}"


def _side(side: dict) -> str:
    return ", ".join(f"{m} x{v:.3f}" for m, v in side.items() if v is not None) or "-"


def write(results: dict) -> None:
    (RESULTS / "impact_tuning.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    path = RESULTS / "impact_tuning.md"
    lines = ["# Does tuning 5.0 pay? Confirmed bests against the default and against `latest`", "",
             "Generated by `bench/impact_tuning.py`: per scenario a SMAC and an irace study on the knob set "
             f"(`{results.get('knobs')}`, {results.get('budget')} cold trials each, the confirmation included); "
             "then the default, both bests and `latest` (cassandra_latest.yaml) in interleaved cold rounds. Ratio > 1 "
             "is better (for the read p99 and the node's CPU per operation: default / candidate); p from the "
             "Wilcoxon signed-rank test over the rounds. Goal: >= x1.30 throughput or a read p99 40% lower, p < "
             "0.05, in two of three scenarios, and better than `latest` in one.", ""]
    lines += kept_notes(path, Path(__file__).name)
    # the table sets the scenarios' studies side by side: on which machines each ran
    studies = {f"{scenario} {optimizer}": (FOLDER / f"{STORE.get(scenario, scenario)}.db", optimizer)
               for scenario, r in results["scenarios"].items() for optimizer in r["tuned"]}
    lines += [f"**Machines** (the CPU probe stored with each run, the default's node CPU per operation; compare the "
              f"ratios of one row, each measured within its own rounds, not absolute figures across rows): "
              f"{machines(studies).line()}.", ""]
    lines += ["| scenario | objective | rounds | candidate | vs default (mean, 95% CI) | p | vs latest | p | goal | "
              "same runs, vs default |", "|---|---|---|---|---|---|---|---|---|---|"]
    for scenario, r in results["scenarios"].items():
        latest = r["latest_vs_default"]
        lines.append(f"| {scenario} | {r['metric']} | {r['rounds']} | latest | {ratio_text(latest)} | {_p(latest)} | - | - "
                     f"| - | {_side(r.get('latest_side', {}))} |")
        for optimizer, t in r["tuned"].items():
            s, v = t["vs_default"], t["vs_latest"]
            lines.append(f"| {scenario} | {r['metric']} | {r['rounds']} | {optimizer} best | {ratio_text(s)} | {_p(s)} | "
                         f"{'x%.3f' % v['mean_ratio'] if v['mean_ratio'] else '-'} | "
                         f"{'%.3g' % v['p'] if v['p'] is not None else '-'} | {'yes' if t['meets_goal'] else 'no'} | "
                         f"{_side(t.get('side', {}))} |")
    lines += [""]
    for scenario, r in results["scenarios"].items():
        runs = [v for v in r.get("default_values", []) if v is not None]
        if runs:
            lines.append(f"- {scenario}: the default's {r['metric']} over its {len(runs)} runs: mean "
                         f"{mean(runs):,.4g} {metric_unit(r['metric'])}, from {min(runs):,.4g} to {max(runs):,.4g}")
    lines += ["", "## The tuned configurations", ""]
    for scenario, r in results["scenarios"].items():
        for optimizer, t in r["tuned"].items():
            config = ", ".join(f"{k}={v}" for k, v in sorted((t.get("config") or {}).items()))
            lines.append(f"- {scenario}, {optimizer} (study: {t['study'].get('trials')} trials; its best against the "
                         f"default in its own 3 confirmation rounds: {_speedup(t['study'].get('speedup'))}): "
                         f"{config or '-'}")
    (path).write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


def _speedup(x) -> str:
    return "-" if x is None else f"x{x:.3f}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--knobs", default="v5", help="the knob set searched (v5: named from the screening, landscape.md)")
    p.add_argument("--budget", type=int, default=60)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--write-only", action="store_true",
                   help="rewrite impact_tuning.md from impact_tuning.json (keeping its hand-written notes); no trials")
    a = p.parse_args()
    FOLDER.mkdir(parents=True, exist_ok=True)
    old = RESULTS / "impact_tuning.json"
    results = json.loads(old.read_text()) if old.exists() else {"scenarios": {}}
    if a.write_only:
        write(results)
        return 0
    results.update({"knobs": a.knobs, "budget": a.budget})
    for scenario in [s for s in a.scenarios.split(",") if s]:
        log(f"{scenario}: tuning")
        tunes = {opt: tune(scenario, opt, KNOBS.get(scenario, a.knobs), a.budget) for opt in ("smac", "irace")}
        comparison = compare(scenario, a.rounds, best_yaml(scenario, "irace"))
        results["scenarios"][scenario] = summarize(scenario, tunes, comparison)
        write(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
