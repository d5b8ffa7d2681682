#!/usr/bin/env python3
"""Tuned vs default Cassandra per physical design (the point of the RF/GBDT tuning paper, Eppinger &
Stoerl: the best knobs differ per design).

For each fixed design (--designs, e.g. 1x1 and 2x2: nodes x replication factor), tune the RF/GBDT paper's seven
knobs (`eppinger`) with its strategy (random forest + simulated annealing, `surrogate-sa`), then compare the
best configuration with the default in --repeat interleaved cold rounds (`nosqltune compare`: mean speedup,
bootstrap 95% interval, Wilcoxon p). Then the design searched with the knobs (`tune --design`, the paper's
tuning domain TD1): its best configuration against the default (the smallest design) and against Cassandra's default knobs
on the best design (`design-default`), which splits the gain into the design's and the knobs'.

Studies: bench/results/tuning/design-<name>.db. Resumable: run it again after an interruption (a finished
study is not re-run, a stored comparison is kept unless --recompare). Writes bench/results/design_tuning.{md,json}
after every study. All nodes and the client share the machine's 2 cores: ratios are the point.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys

from common import RESULTS, log, nosqltune  # bench/common.py


def study_path(name: str):
    return RESULTS / "tuning" / f"design-{name}.db"


def stored(path, key: str) -> dict | None:
    if not path.exists():
        return None
    with sqlite3.connect(path) as db:
        row = db.execute("SELECT settings FROM studies WHERE name = 'tune'").fetchone()
    return (json.loads(row[0]) if row else {}).get("compare", {}).get(key)


def run_one(name: str, design_flags: list[str], candidates: str, repeat: int, a) -> dict:
    path = study_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    sizes = ["--records", str(a.records), "--operations", str(a.operations), "--threads", str(a.threads),
             "--heap", a.heap]
    if path.exists():
        tuned = json.loads(nosqltune("tune", "--study", str(path), "--resume", "--json"))
    else:
        tuned = json.loads(nosqltune("tune", *design_flags, "--study", str(path), "--workload", "ycsb-a",
                                     "--knobs", a.knobs, "--optimizer", a.optimizer, "--budget", str(a.budget),
                                     "--seed", "1", *sizes, "--json"))
    key = "x1" if candidates == "best" else "x1:" + candidates.replace(",", "+")
    compared = stored(path, key)
    if compared is None or a.recompare:
        compared = json.loads(nosqltune("compare", "--study", str(path), "--candidates", candidates,
                                        "--repeat", str(repeat), "--json"))
    return {"name": name, "design": design_flags, "tune": tuned, "compare": compared}


def write(results: list[dict], a) -> None:
    (RESULTS / "design_tuning.json").write_text(json.dumps({"settings": vars(a), "studies": results}, indent=1,
                                                           default=str) + "\n")
    lines = ["# Tuned vs default Cassandra per physical design", "",
             f"Workload A, {a.records:,} records, {a.operations:,} measured operations, {a.threads} client threads, "
             f"consistency ONE, heap {a.heap} per node. Per study: {a.optimizer} on knob set {a.knobs} (the RF/GBDT paper's "
             f"knobs), {a.budget} cold trials (the default first), then the candidates against the default in "
             "interleaved cold rounds. All nodes and the client share the machine's 2 cores, so absolute figures "
             "say little; the ratios are the point.", "",
             "| study | design | default (tuning) | best (tuning) | candidate | rounds | default mean | candidate mean "
             "| mean speedup | 95% interval | Wilcoxon p | verdict |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in results:
        t = e["tune"]
        workload = e["compare"]["workloads"]["ycsb-a"]
        values = workload["values"]
        default = [v for v in values["default"] if v]
        for cand, s in workload["stats"].items():
            mine = [v for v in values[cand] if v]
            lines.append(
                f"| {e['name']} | {' '.join(e['design'])} | {t['default']['value']:,.0f} | {t['best']['value']:,.0f} | "
                f"{cand} | {len(mine)} | {sum(default) / len(default):,.0f} | {sum(mine) / len(mine):,.0f} | "
                f"x{s['mean_speedup']:.3f} | [{s['ci_low']:.3f}, {s['ci_high']:.3f}] | {s['p_value']:.3g} | "
                f"{s['verdict']} |")
    lines += ["", "Best configurations (changes from the default):", ""]
    for e in results:
        changed = e["tune"]["changed"]
        lines.append(f"- {e['name']}: " + (", ".join(f"{k} {old} -> {new}" for k, (old, new) in changed.items())
                                          or "the default"))
    (RESULTS / "design_tuning.md").write_text("\n".join(lines) + "\n")
    log("written bench/results/design_tuning.md")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--designs", default="1x1,2x2", help="fixed designs NODESxRF, comma-separated (default 1x1,2x2)")
    p.add_argument("--search", default="nodes=1..3,rf=1..2", help="the searched design (tune --design); '' skips it")
    p.add_argument("--knobs", default="eppinger")
    p.add_argument("--optimizer", default="surrogate-sa")
    p.add_argument("--budget", type=int, default=12)
    p.add_argument("--repeat", type=int, default=6)
    p.add_argument("--search-repeat", type=int, default=4)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--operations", type=int, default=30_000)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--heap", default="768M")
    p.add_argument("--recompare", action="store_true", help="run the comparisons again even if stored")
    a = p.parse_args()
    results = []
    for design in (d for d in a.designs.split(",") if d):
        nodes, _, rf = design.partition("x")
        results.append(run_one(f"{nodes}n-rf{rf}", ["--nodes", nodes, "--rf", rf], "best", a.repeat, a))
        write(results, a)
    if a.search:
        results.append(run_one("search", ["--design", a.search], "best,design-default", a.search_repeat, a))
        write(results, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
