#!/usr/bin/env python3
"""The node's CPU per operation against throughput: does the node's own cost separate configurations
that the throughput of a client sharing the 2 cores cannot?

Each comparison is the default against one configuration that plausibly changes the node's cost, on the
workload where it should show, in interleaved cold rounds (default first in even rounds, the candidate first in
odd ones; the comparisons take turns within a round so slow drift spreads over all of them):
- compression-off: SSTables written uncompressed (the data loaded so), YCSB A;
- row-cache: 512 MiB row cache, the table caching its rows, read-heavy zipfian (YCSB B);
- trie-offheap: trie memtable with offheap_objects, an update-heavy zipfian mix (10% reads, 90% updates).
Each comparison runs in two modes, both in every round: saturated (16 client threads at full speed: the
throughput) and at a fixed rate below saturation (--rate, default 4,000 ops/s, 60K operations: there the node's
CPU per operation is its own cost; at saturation the node takes a near-constant share of the 2 cores, so its CPU
per operation is that share divided by the throughput and says nothing new, see the calibration).
Per comparison and mode: mean of each figure on each side, the paired ratio (> 1 better), its 95% bootstrap
interval and the Wilcoxon signed-rank p (nosqltune.evaluation.stats).

Study: bench/results/cpu_per_op/compare.db (one study per comparison and side). Resumable: run it again after an
interruption. Writes bench/results/cpu_per_op.{md,json} after every round, with the calibration of
bench/results/cpu_per_op/calibrate-*.json (`nosqltune calibrate --metric cpu-per-op`, see the md) when present.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from common import RESULTS, ROOT, log, nosqltune, counted_rows  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))
from nosqltune.evaluation.stats import compare  # noqa: E402

STUDY = RESULTS / "cpu_per_op" / "compare.db"
COMPARISONS = {
    "compression-off": (["--workload", "ycsb-a"], ["--set", "compression=none"]),
    "row-cache": (["--workload", "ycsb-b"], ["--set", "caching_rows_per_partition=ALL", "--set",
                                             "row_cache_size=512", "--force"]),
    "trie-offheap": (["--read-ratio", "0.1", "--distribution", "zipfian"],
                     ["--set", "memtable=trie", "--set", "memtable_allocation_type=offheap_objects"]),
}
FIGURES = (("throughput", "throughput_ops_s", True), ("node CPU us/op", "node_cpu_us_per_op", False),
           ("node cores busy", "node_cpu_cores", False), ("client CPU us/op", "client_cpu_us_per_op", False),
           ("node GC us/op", "node_gc_us_per_op", False))
MODES = ("saturated", "rate")


def rows(study_name: str) -> list[dict]:
    return counted_rows(STUDY, study_name)


def run_side(name: str, mode: str, side: str, a) -> None:
    workload, knobs = COMPARISONS[name]
    sizes = (["--operations", str(a.operations)] if mode == "saturated"
             else ["--operations", str(a.rate_operations), "--target", str(a.rate)])
    nosqltune("bench", *workload, *(knobs if side == "candidate" else []), "--records", str(a.records), *sizes,
              "--study", str(STUDY), "--study-name", f"{name}:{mode}:{side}", "--json", ok=(0, 1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--operations", type=int, default=100_000)
    p.add_argument("--rate", type=int, default=4000, help="ops/s of the fixed-rate mode")
    p.add_argument("--rate-operations", type=int, default=60_000)
    p.add_argument("--only", default=",".join(COMPARISONS), help="comma-separated comparisons")
    a = p.parse_args()
    names = [n for n in a.only.split(",") if n]
    STUDY.parent.mkdir(parents=True, exist_ok=True)
    for round_ in range(a.rounds):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            for mode in MODES:
                sides = ("default", "candidate") if round_ % 2 == 0 else ("candidate", "default")
                for side in sides:
                    if len(rows(f"{name}:{mode}:{side}")) > round_:
                        continue
                    log(f"round {round_ + 1}/{a.rounds}: {name} {mode} {side}")
                    run_side(name, mode, side, a)
        write(a, names)
    return 0


def _value(row: dict, key: str):
    return row["metrics"]["summary"].get(key) if row["state"] == "COMPLETE" else None


def summarize(name: str, mode: str) -> dict:
    by_side = {side: rows(f"{name}:{mode}:{side}") for side in ("default", "candidate")}
    n = min(len(v) for v in by_side.values())
    out = {"rounds": n, "figures": {}}
    for label, key, maximize in FIGURES:
        default = [_value(r, key) for r in by_side["default"][:n]]
        candidate = [_value(r, key) for r in by_side["candidate"][:n]]
        got_d, got_c = [v for v in default if v is not None], [v for v in candidate if v is not None]
        stats = compare(name, candidate, default, maximize=maximize).to_dict()
        out["figures"][label] = {"default_mean": statistics.mean(got_d) if got_d else None,
                                 "candidate_mean": statistics.mean(got_c) if got_c else None,
                                 "default_cv": _cv(got_d), "candidate_cv": _cv(got_c),
                                 "default": default, "candidate": candidate, "stats": stats}
    out["trial_s"] = statistics.mean([r["timings"]["total_s"] for side in by_side.values() for r in side
                                      if r["timings"].get("total_s")] or [0])
    return out


def _cv(values):
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 and statistics.mean(values) else None


def _calibration() -> list[str]:
    lines = []
    for path, what in ((RESULTS / "cpu_per_op" / "calibrate-saturated.json", "saturated (16 threads, no rate cap)"),
                       (RESULTS / "cpu_per_op" / "calibrate-rate4000.json", "fixed rate 4,000 ops/s")):
        if not path.exists() or not path.read_text().strip():
            continue
        for cell in json.loads(path.read_text())["cells"]:
            lines.append(f"| {what} | {cell['n']} | {cell['mean_ops_s']:.0f} | {cell['cv'] * 100:.2f}% | "
                         f"{cell['cpu-per-op_mean']:.1f} | {cell['cpu-per-op_cv'] * 100:.2f}% | "
                         f"{cell['trial_seconds']:.1f} |")
    return lines


def write(a, names: list[str]) -> None:
    results = {f"{name} ({mode})": summarize(name, mode) for name in names for mode in MODES}
    (RESULTS / "cpu_per_op.json").write_text(json.dumps({"settings": vars(a), "comparisons": results}, indent=1))
    md = ["# The node's CPU per operation against throughput", "",
          "Generated by `bench/cpu_per_op.py`. Cassandra 5.0.6, one node, the harness defaults (2 GiB heap, C1 JIT, "
          f"16 client threads, {a.records:,} records, {a.operations:,} measured operations after a 20K warm-up); "
          "client and node share the machine's 2 cores. The node's CPU is its process CPU time (user + system) "
          "read by the client over JMX at the measured phase's start and end, divided by the phase's operations. "
          f"Saturated: {a.operations:,} operations at full speed; rate: {a.rate_operations:,} operations at "
          f"{a.rate:,} ops/s.", ""]
    calibration = _calibration()
    if calibration:
        md += ["## Calibration: 10 cold default trials (YCSB A)", "",
               "| setup | trials | mean ops/s | throughput CV | node CPU us/op | CPU/op CV | trial s |",
               "|---|---|---|---|---|---|---|", *calibration, ""]
    md += ["## Default against one change, interleaved cold rounds", "",
           "Ratio: candidate / default for throughput, default / candidate for the costs, per round, so > 1 is "
           "better. p: Wilcoxon signed-rank, two-sided, over the rounds.", "",
           "| comparison | rounds | figure | default | candidate | ratio | 95% interval | p | verdict |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        for label, f in r["figures"].items():
            if name.endswith("(rate)") and label == "throughput":
                continue    # the rate fixes it
            s = f["stats"]
            ratio = f"x{s['mean_speedup']:.3f}" if s["mean_speedup"] else "-"
            interval = f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["ci_low"] is not None else "-"
            p = f"{s['p_value']:.4f}" if s["p_value"] is not None else "-"
            md.append(f"| {name} | {r['rounds']} | {label} | {_fmt(f['default_mean'])} | {_fmt(f['candidate_mean'])} "
                      f"| {ratio} | {interval} | {p} | {s['verdict']} |")
    (RESULTS / "cpu_per_op.md").write_text("\n".join(md) + "\n")
    log(f"wrote {RESULTS / 'cpu_per_op.md'}")


def _fmt(value) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.2f}"


if __name__ == "__main__":
    sys.exit(main())
