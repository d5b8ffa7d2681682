#!/usr/bin/env python3
"""Default Redis vs tuned Redis: SMAC, 30 trials, on YCSB C and A, for two knob sets: the six knobs of the
MLOS/LlamaTune report (`mlos6`, its Table 2; Dhawan et al., "Optimizing KV stores for workloads using Machine
Learning", which found +0.8% on Redis) and an operator's set (`operator`: io-threads, persistence, listpack
limits, lazyfree, hz...). Then each study's best configuration against the default in --repeat interleaved cold
rounds (`nosqltune compare`: mean speedup, bootstrap 95% interval, Wilcoxon p), and which knobs mattered: the permutation importance of a random forest fitted to the
study's trials (`nosqltune importance --from-study`).

Studies: bench/results/tuning/redis-<workload>-<set>.db. Resumable: run it again after an interruption (a
finished study is not re-run; a comparison already stored is recomputed only with --recompare). Writes
bench/results/redis_tuning.{md,json} after every study.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys

from common import RESULTS, log, nosqltune  # bench/common.py

WORKLOADS = ("ycsb-c", "ycsb-a")
KNOB_SETS = ("mlos6", "operator")


def study_path(workload: str, knobs: str):
    return RESULTS / "tuning" / f"redis-{workload}-{knobs}.db"


def stored_compare(path) -> dict | None:
    """The comparison already stored in the study (nosqltune compare stores it), if any."""
    if not path.exists():
        return None
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT settings FROM studies WHERE name = 'tune'").fetchone()
    return (json.loads(row[0]) if row else {}).get("compare", {}).get("x1")


def run_one(workload: str, knobs: str, a) -> dict:
    path = study_path(workload, knobs)
    path.parent.mkdir(parents=True, exist_ok=True)
    sizes = ["--records", str(a.records), "--operations", str(a.operations), "--warmup-ops", str(a.warmup_ops),
             "--threads", str(a.threads), "--max-seconds", str(a.max_seconds)]
    if path.exists():
        tuned = json.loads(nosqltune("tune", "--study", str(path), "--resume", "--json"))
    else:
        tuned = json.loads(nosqltune("tune", "--system", "redis", "--study", str(path), "--workload", workload,
                                     "--knobs", knobs, "--optimizer", "smac", "--budget", str(a.budget),
                                     "--seed", "1", *sizes, "--json"))
    compared = stored_compare(path)
    if compared is None or a.recompare:
        compared = json.loads(nosqltune("compare", "--study", str(path), "--candidates", "best",
                                        "--repeat", str(a.repeat), "--json"))
    importance = json.loads(nosqltune("importance", "--from-study", str(path), "--json",
                                      "--chart", str(path.with_suffix(".importance.png"))))
    return {"workload": workload, "knobs": knobs, "tune": tuned, "compare": compared, "importance": importance}


def stats_of(entry: dict) -> dict:
    workloads = entry["compare"]["workloads"]
    return workloads[entry["workload"]]["stats"]["best"]


def write(results: list[dict], a) -> None:
    (RESULTS / "redis_tuning.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lines = ["# Default vs tuned Redis", "",
             f"Debian's redis-server 7.0, one local process per cold trial (started from a dump.rdb of "
             f"{a.records:,} records, 10 fields of 100 B), YCSB through loadgen's Redis binding, {a.threads} "
             f"client threads, {a.warmup_ops:,} warm-up then {a.operations:,} measured operations (capped at "
             f"{a.max_seconds} s). Server and client share the machine's 2 cores. SMAC, {a.budget} trials per "
             f"study (the default first), then best vs default in {a.repeat} interleaved cold rounds.", "",
             "| workload | knob set | default (tuning) | best (tuning) | compare: default mean (CV) | best mean "
             "| mean speedup | 95% interval | Wilcoxon p | verdict | knobs that mattered (importance) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in results:
        t, s = e["tune"], stats_of(e)
        values = e["compare"]["workloads"][e["workload"]]["values"]
        default, best = [v for v in values["default"] if v], [v for v in values["best"] if v]
        cv = statistics.stdev(default) / statistics.mean(default) * 100 if len(default) > 1 else float("nan")
        top = ", ".join(f"{r['knob']} ({r['score']:.2f})" for r in e["importance"]["ranking"][:3])
        lines.append(f"| {e['workload']} | {e['knobs']} | {t['default']['value']:,.0f} ops/s | "
                     f"{t['best']['value']:,.0f} ops/s | {statistics.mean(default):,.0f} ({cv:.1f}%) | "
                     f"{statistics.mean(best):,.0f} | x{s['mean_speedup']:.3f} | [{s['ci_low']:.3f}, "
                     f"{s['ci_high']:.3f}] | {s['p_value']:.3g} | {s['verdict']} | {top} |")
    lines += ["", "Importance: permutation importance of a random forest fitted to the study's 30 trials (the drop "
              "of its R^2 when the knob's values are shuffled; near 0: the knob explains nothing measurable)."]
    lines += ["", "Best configurations (changes from the default):", ""]
    for e in results:
        changed = e["tune"]["changed"]
        lines.append(f"- {e['workload']} / {e['knobs']}: " + (", ".join(f"{k} {old} -> {new}" for k, (old, new)
                                                                      in changed.items()) or "the default"))
    lines += ["", "Importance charts: `bench/results/tuning/redis-<workload>-<set>.importance.png`."]
    (RESULTS / "redis_tuning.md").write_text("\n".join(lines) + "\n")
    log("written bench/results/redis_tuning.md")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=int, default=30)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--operations", type=int, default=400_000)
    p.add_argument("--warmup-ops", type=int, default=50_000)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--max-seconds", type=int, default=30)
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--knob-sets", default=",".join(KNOB_SETS))
    p.add_argument("--recompare", action="store_true", help="run the comparisons again even if stored")
    a = p.parse_args()
    results = []
    for workload in a.workloads.split(","):
        for knobs in a.knob_sets.split(","):
            results.append(run_one(workload, knobs, a))
            write(results, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
