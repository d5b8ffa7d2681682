#!/usr/bin/env python3
"""Throughput and p99 of the default configuration per physical design (the shape of Table 4 of
the RF/GBDT tuning paper, Eppinger & Stoerl): nodes x replication factor in {1,2,3} x {1,2,3} (RF <= nodes), local clusters on 127.0.0.x, and the
cost of one cold trial versus node count. Rounds go over every design in turn (design order rotated each
round) so that slow drift of the machine spreads over all designs alike.

All nodes and the client share this machine's 2 cores: absolute figures say little about real clusters; the
ratios between designs and the cost of a trial are the point.

Study: bench/results/cluster/designs.db (one study per design). Resumable. Writes
bench/results/cluster_designs.{md,json} and bench/results/cluster_designs.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from common import RESULTS, log, nosqltune, study_rows  # bench/common.py

STUDY = RESULTS / "cluster" / "designs.db"
DESIGNS = [(n, rf) for n in (1, 2, 3) for rf in (1, 2, 3) if rf <= n]


def name(nodes: int, rf: int) -> str:
    return f"n{nodes}-rf{rf}"


def done(study_name: str) -> list[dict]:
    return study_rows(STUDY, study_name)


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.mean(values) if values else None


def sd(values):
    values = [v for v in values if v is not None]
    return statistics.stdev(values) if len(values) > 1 else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--operations", type=int, default=30_000)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--heap", default="768M")
    a = p.parse_args()
    STUDY.parent.mkdir(parents=True, exist_ok=True)
    for round_ in range(a.repeat):
        order = DESIGNS[round_ % len(DESIGNS):] + DESIGNS[:round_ % len(DESIGNS)]
        for nodes, rf in order:
            if len(done(name(nodes, rf))) > round_:
                continue
            log(f"round {round_ + 1}/{a.repeat}: {nodes} node(s), RF {rf}")
            nosqltune("bench", "--nodes", str(nodes), "--rf", str(rf), "--heap", a.heap, "--workload", "ycsb-a",
                      "--records", str(a.records), "--operations", str(a.operations), "--threads", str(a.threads),
                      "--study", str(STUDY), "--study-name", name(nodes, rf), "--json")
        write(a)   # after every round: a partial table is committed if the run is cut short
    return 0


def write(a) -> None:
    table = []
    for nodes, rf in DESIGNS:
        rows = [r for r in done(name(nodes, rf)) if r["state"] == "COMPLETE"]
        summaries = [r["metrics"]["summary"] for r in rows]
        table.append({"nodes": nodes, "rf": rf, "runs": len(rows),
                      "throughput": mean([s["throughput_ops_s"] for s in summaries]),
                      "throughput_sd": sd([s["throughput_ops_s"] for s in summaries]),
                      "read_p99_ms": mean([s.get("read_p99_ms") for s in summaries]),
                      "update_p99_ms": mean([s.get("update_p99_ms") for s in summaries]),
                      "boot_s": mean([r["timings"].get("boot_s") for r in rows]),
                      # a cold trial's own cost: the first trial of a design also loaded its dataset
                      "trial_s": mean([r["timings"]["total_s"] - r["timings"].get("dataset_build_s", 0.0)
                                       for r in rows if r["timings"].get("total_s") is not None]),
                      "load_s": next((r["timings"]["dataset_build_s"] for r in done(name(nodes, rf))
                                      if r["timings"].get("dataset_build_s")), None)})
    (RESULTS / "cluster_designs.json").write_text(json.dumps({"settings": vars(a), "designs": table}, indent=1) + "\n")
    base = table[0]["throughput"]
    lines = ["# Default Cassandra per physical design", "",
             f"Workload A, {a.records:,} records, {a.operations:,} measured operations, {a.threads} client threads, "
             f"consistency ONE, heap {a.heap} per node, {a.repeat} cold trials per design, rounds interleaved. "
             "All nodes and the client share 2 cores: the ratios between designs and the trial costs are the "
             "point, not the absolute figures. Cold trial s: restore, boot, warm-up, measured run and stop "
             "(without the dataset load, which happens once per design; '-' where the dataset was loaded before "
             "this study).", "",
             "| nodes | RF | runs | throughput ops/s (sd) | vs 1 node | read p99 ms | update p99 ms | boot s | "
             "cold trial s | data load s (once) |", "|---|---|---|---|---|---|---|---|---|---|"]

    def f(v, fmt="{:.1f}"):
        return "-" if v is None else fmt.format(v)
    for t in table:
        lines.append(f"| {t['nodes']} | {t['rf']} | {t['runs']} | {f(t['throughput'], '{:,.0f}')} "
                     f"({f(t['throughput_sd'], '{:,.0f}')}) | "
                     f"{f(t['throughput'] / base if t['throughput'] and base else None, 'x{:.2f}')} | "
                     f"{f(t['read_p99_ms'])} | {f(t['update_p99_ms'])} | {f(t['boot_s'])} | {f(t['trial_s'])} | "
                     f"{f(t['load_s'])} |")
    (RESULTS / "cluster_designs.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
        labels = [f"{t['nodes']}n rf{t['rf']}" for t in table]
        ax1.bar(labels, [t["throughput"] or 0 for t in table], yerr=[t["throughput_sd"] or 0 for t in table])
        ax1.set_ylabel("throughput ops/s")
        ax1.set_title("default configuration per design")
        ax2.bar(labels, [t["trial_s"] or 0 for t in table], label="cold trial")
        ax2.bar(labels, [t["boot_s"] or 0 for t in table], label="of which boot")
        ax2.set_ylabel("seconds")
        ax2.set_title("cost of one cold trial")
        ax2.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "cluster_designs.png", dpi=110)
    except ImportError:
        pass
    log("written bench/results/cluster_designs.md")


if __name__ == "__main__":
    sys.exit(main())
