#!/usr/bin/env python3
"""The surrogate's strategy ranking checked on real trials: the top two strategies of
bench/results/strategies_v5.json (by their confirmed best over the seeds, without --denoise) and random search, each
a --budget-trial study of real cold trials on the scenario the dataset was recorded on (cloud-disk, knob set
`cloud`, its own read ratio), the confirmation included; then every strategy's final best and the default in
--rounds interleaved cold rounds (`compare`, ABCD DCBA ...: one default run per round serves all three), each
against the default with the mean of the per-round ratios, its 95% bootstrap interval and the Wilcoxon signed-rank
p-value, beside the I/Os and the node's CPU per operation of the same runs.

One real study per strategy is one sample of what the strategy finds: the surrogate ranking's intervals come from 10
seeds, these from one. The comparison says whether each real best beats the default, not whether one strategy beats
another. SMAC's and irace's real studies on the same scenario are in bench/results/impact/cloud-disk.db
(impact_tuning.md) and are drawn beside these in the figure.

Store: bench/results/strategies_v5/cloud-disk-real.db (a study per strategy, named as in strategies_v5; the
comparison runs in the `random` study). Resumable at every step (tune --resume; compare continues its rounds).
Writes bench/results/strategies_real.{md,json,png} after every step. Hours of cold trials (about 220 of 42 s, and
the builds of new data shapes): nothing else may run beside it.

    python3 bench/strategies_real.py                 # every study, then the comparison
    python3 bench/strategies_real.py --write-only    # the figures again from the stores, no trials
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path

from common import RESULTS, best_as_yaml, kept_notes, log, machines, nosqltune, ratio_text, tune_or_resume  # bench/common.py

FOLDER = RESULTS / "strategies_v5"
DB = FOLDER / "cloud-disk-real.db"
IMPACT = RESULTS / "impact" / "cloud-disk.db"   # SMAC's and irace's real studies of the same scenario and knobs
RANKING = RESULTS / "strategies_v5.json"
FLAGS = {"random": ("--optimizer", "random"), "gp": ("--optimizer", "gp"), "smac": ("--optimizer", "smac"),
         "irace": ("--optimizer", "irace"), "rafiki": ("--optimizer", "rafiki"),
         "surrogate-sa": ("--optimizer", "surrogate-sa"),
         "gp+llamatune": ("--optimizer", "gp", "--space-adapter", "llamatune", "--llamatune-dims", "8"),
         "smac+llamatune": ("--optimizer", "smac", "--space-adapter", "llamatune", "--llamatune-dims", "8")}
METRICS = ("throughput", "io-per-op", "cpu-per-op")
COMPARED_IN = "random"


def ranked() -> tuple[list[str], dict]:
    """The top two strategies of the surrogate ranking (without --denoise), then random; and the ranking's summary."""
    (report,) = json.loads(RANKING.read_text()).values()
    summary = {k: v for k, v in report["summary"].items() if "denoise" not in k}
    order = sorted(summary, key=lambda k: -summary[k]["confirmed"][0])
    return [*[k for k in order if k != "random"][:2], "random"], summary


def curves(db: Path, names: list[str]) -> dict[str, list[float]]:
    """Per study: the best single-run throughput so far after each of its search trials (the confirmation left out),
    a failed trial keeping the incumbent."""
    out: dict = {}
    if not db.exists():
        return out
    with sqlite3.connect(db) as conn:
        for name in names:
            rows = conn.execute("SELECT t.state, t.metrics FROM trials t JOIN studies s ON s.id = t.study_id "
                                "WHERE s.name = ? AND t.tag = 'tune' ORDER BY t.number", (name,)).fetchall()
            best, curve = 0.0, []
            for state, metrics in rows:
                if state == "COMPLETE":
                    best = max(best, json.loads(metrics or "{}").get("throughput_ops_s") or 0.0)
                if state in ("COMPLETE", "FAILED"):
                    curve.append(best)
            if curve:
                out[name] = curve
    return out


def figure(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for label, curve in results["curves"].items():
        dashed = label.endswith("(impact)")
        axes[0].plot(range(1, len(curve) + 1), curve, label=label, linestyle="--" if dashed else "-")
    axes[0].set_xlabel("search trial (real, cold)")
    axes[0].set_ylabel("best single-run throughput so far (ops/s)")
    axes[0].set_title("convergence of one real study per strategy")
    axes[0].legend(fontsize=8)
    stats = results.get("comparison", {}).get("stats", {})
    labels = [s for s in results["strategies"] if stats.get(f"{s}-best", {}).get("mean_speedup")]
    if labels:
        means = [stats[f"{s}-best"]["mean_speedup"] for s in labels]
        errors = [[m - stats[f"{s}-best"]["ci_low"] for s, m in zip(labels, means)],
                  [stats[f"{s}-best"]["ci_high"] - m for s, m in zip(labels, means)]]
        axes[1].bar(labels, means, yerr=errors, capsize=4, color="tab:blue", label="real, 95% CI over the rounds")
        surrogate = [results["surrogate"][s]["confirmed"][0] for s in labels]
        axes[1].scatter(labels, surrogate, color="tab:orange", zorder=3, label="surrogate ranking (mean of 10 seeds)")
        axes[1].axhline(1.0, color="grey", linewidth=0.8)
        axes[1].set_ylabel("throughput against the default")
        axes[1].set_title(f"final best vs default, {results['comparison']['rounds']} interleaved cold rounds")
        axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "strategies_real.png", dpi=110)
    plt.close(fig)


def summarize_comparison(comparison: dict) -> dict:
    (workload,) = comparison["workloads"].values()
    side = {m: {label: s.get("mean_speedup") for label, s in w["stats"].items()}
            for m, w in workload.get("also", {}).items()}
    return {"workload": next(iter(comparison["workloads"])), "rounds": len(workload["values"]["default"]),
            "stats": workload["stats"], "values": workload["values"], "side": side,
            "configs": comparison.get("candidates", {})}


def write(results: dict, a: argparse.Namespace) -> None:
    results["curves"] = {**curves(DB, results["strategies"]),
                         **{f"{k} (impact)": v for k, v in curves(IMPACT, ["smac", "irace"]).items()}}
    (RESULTS / "strategies_real.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    figure(results)
    path = RESULTS / "strategies_real.md"
    lines = ["# The strategy ranking checked on real trials", "",
             f"Generated by `python3 bench/strategies_real.py`: the top two strategies of strategies_v5.md and random "
             f"search, one study of {a.budget} real cold trials each on `{a.scenario}` (knob set `{a.knobs}`, the "
             "confirmation included), then each final best and the default in interleaved cold rounds. One real "
             "study per strategy is one sample of what it finds. Store: "
             "bench/results/strategies_v5/cloud-disk-real.db. "
             "Figure: strategies_real.png (left: the single-run best so far per search trial, with SMAC's and irace's "
             "studies of impact_tuning.md dashed; right: each best against the default).", ""]
    lines += kept_notes(path, Path(__file__).name)
    # the figure and the cost notes set SMAC's and irace's studies beside these: on which machines each ran
    check = machines({**{s: (DB, s) for s in results["strategies"]},
                      **{f"{k} (impact_tuning.md)": (IMPACT, k) for k in ("smac", "irace")}})
    lines += [f"**Machines** (the CPU probe stored with each run, the default's node CPU per operation): "
              f"{check.line()}.", ""]
    comparison = results.get("comparison") or {}
    lines += ["| strategy | surrogate ranking (confirmed, 10 seeds) | real study: search trials, failed | its own "
              "confirmation | vs default, interleaved (mean, 95% CI) | p | I/Os per op vs default | node CPU per op "
              "vs default |", "|---|---|---|---|---|---|---|---|"]
    for strategy in results["strategies"]:
        study = results["studies"].get(strategy) or {}
        s = comparison.get("stats", {}).get(f"{strategy}-best") or {}
        side = comparison.get("side", {})
        p = "-" if s.get("p_value") is None else f"{s['p_value']:.3g}"
        io, cpu = (side.get(m, {}).get(f"{strategy}-best") for m in ("io-per-op", "cpu-per-op"))
        lines.append(f"| {strategy} | {ratio_text(_as_stats(results['surrogate'][strategy]['confirmed']))} | "
                     f"{study.get('trials', '-')}, {study.get('failed_trials', '-')} | "
                     f"{'-' if study.get('speedup') is None else 'x%.3f' % study['speedup']} | {ratio_text(s)} | {p} | "
                     f"{'-' if io is None else 'x%.3f' % io} | {'-' if cpu is None else 'x%.3f' % cpu} |")
    if comparison:
        runs = [v for v in comparison["values"]["default"] if v is not None]
        lines += ["", f"The default over its {len(runs)} runs: {min(runs):,.0f} to {max(runs):,.0f} ops/s. Ratios of "
                  "I/Os and CPU per operation are default / candidate (> 1: the candidate needs fewer).", "",
                  "## The final bests", ""]
        for strategy in results["strategies"]:
            config = comparison["configs"].get(f"{strategy}-best") or {}
            lines.append(f"- {strategy}: " + (", ".join(f"{k}={v}" for k, v in sorted(config.items())) or "-"))
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


def _as_stats(interval: list[float]) -> dict:
    return {"mean_speedup": interval[0], "ci_low": interval[1], "ci_high": interval[2]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default="cloud-disk")
    p.add_argument("--knobs", default="cloud")
    p.add_argument("--budget", type=int, default=60)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--write-only", action="store_true", help="the results files again from the stores; no trials")
    a = p.parse_args()
    FOLDER.mkdir(parents=True, exist_ok=True)
    old = RESULTS / "strategies_real.json"
    results = json.loads(old.read_text()) if old.exists() else {"studies": {}}
    strategies, surrogate = ranked()
    results.update({"strategies": strategies, "surrogate": {s: {"confirmed": surrogate[s]["confirmed"]}
                                                            for s in strategies}})
    for strategy in strategies if not a.write_only else ():
        log(f"{strategy}: tuning")
        out = tune_or_resume(DB, strategy, "--scenario", a.scenario, "--knobs", a.knobs, *FLAGS[strategy], "--budget",
                             str(a.budget), "--seed", "1")
        results["studies"][strategy] = {k: out.get(k) for k in ("trials", "failed_trials", "speedup", "bottlenecks")}
        write(results, a)
    if not a.write_only:
        candidates = ",".join(str(best_as_yaml(DB, s, FOLDER / f"{s}-best.yaml")) for s in strategies)
        comparison = json.loads(nosqltune("compare", "--study", str(DB), "--study-name", COMPARED_IN, "--candidates",
                                          candidates, "--repeat", str(a.rounds), "--metrics", ",".join(METRICS),
                                          "--json", ok=(0, 1)))
        results["comparison"] = summarize_comparison(comparison)
    write(results, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
