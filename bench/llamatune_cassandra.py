#!/usr/bin/env python3
"""LlamaTune's confirmation on real Cassandra: SMAC + LlamaTune on workload A over the 24-knob space
of the surrogate benchmark (`wide24`: irace23 without num_tokens, a reload knob, plus the two switches that
let its cache knobs act in 5.0), 30 trials, then its best configuration against the default in --repeat
interleaved cold rounds (`nosqltune compare`): mean speedup, 95% bootstrap interval, Wilcoxon p.

Study: bench/results/tuning/llamatune-a.db. Resumable: run it again after an interruption. Writes
bench/results/llamatune_cassandra.{md,json}. Needs the machine to itself for about 45 minutes.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import RESULTS, log, nosqltune  # bench/common.py

STUDY = RESULTS / "tuning" / "llamatune-a.db"




def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=int, default=30)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--operations", type=int, default=50000)
    a = p.parse_args()
    STUDY.parent.mkdir(parents=True, exist_ok=True)
    if STUDY.exists():
        tuned = json.loads(nosqltune("tune", "--study", str(STUDY), "--resume", "--json"))
    else:
        tuned = json.loads(nosqltune("tune", "--study", str(STUDY), "--workload", "ycsb-a", "--knobs", "wide24",
                                     "--optimizer", "smac", "--space-adapter", "llamatune", "--budget", str(a.budget),
                                     "--operations", str(a.operations), "--seed", "1", "--json"))
    compared = json.loads(nosqltune("compare", "--study", str(STUDY), "--candidates", "best",
                                    "--repeat", str(a.repeat), "--json"))
    out = {"tune": tuned, "compare": compared}
    (RESULTS / "llamatune_cassandra.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    stats = compared["workloads"]["ycsb-a"]["stats"]["best"]
    lines = ["# SMAC + LlamaTune on real Cassandra", "",
             f"Workload A, 100K records, {a.operations} measured operations per cold trial, knob set `wide24` "
             f"(24 knobs), SMAC with the LlamaTune adapter (16 synthetic dimensions, special-value bias 0.2, "
             f"10,000 buckets), {a.budget} trials; then the best configuration against the default in "
             f"{a.repeat} interleaved cold rounds.", "",
             f"- in tuning (one cold run each): default {tuned['default']['value']:.0f} ops/s, best "
             f"{tuned['best']['value']:.0f} ops/s, x{tuned['speedup']:.3f} ({tuned['trials']} trials, "
             f"{tuned['failed_trials']} failed)",
             f"- best vs default over {stats['pairs']} interleaved pairs: mean x{stats['mean_speedup']:.3f}, median "
             f"x{stats['median_speedup']:.3f}, 95% interval [{stats['ci_low']:.3f}, {stats['ci_high']:.3f}], "
             f"Wilcoxon p = {stats['p_value']:.3g}: **{stats['verdict']}**", "",
             "The best configuration's changes from the default:", "",
             "| knob | default | best |", "|---|---|---|",
             *[f"| {k} | {old} | {new} |" for k, (old, new) in tuned["changed"].items()]]
    (RESULTS / "llamatune_cassandra.md").write_text("\n".join(lines) + "\n")
    log("written bench/results/llamatune_cassandra.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
