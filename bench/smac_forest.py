#!/usr/bin/env python3
"""SMAC's surrogate forest as SMAC 2.4's facade builds it against the one nosqltune builds (the same forest: 10 trees,
every feature, leaves of 1; no 2**20 leaf cap and one thread instead of every core), side by side in one run:
time to draw 200 suggestions over a Cassandra knob set with the synthetic cost of bench/ask_overhead.py,
alternating the two forests for --rounds rounds. Writes bench/results/smac_forest.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import ask_overhead  # bench/ask_overhead.py: run() drives an optimizer through N ask/tell

RESULTS = ask_overhead.RESULTS


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    import smac.model.random_forest as forests

    ours = forests.RandomForest

    class SmacDefault(ours):   # what HPO.get_model passes: neither max_leaf_nodes nor n_jobs (2**20 and -1)
        def __init__(self, *args, **kwargs):
            kwargs.pop("max_leaf_nodes", None)
            kwargs.pop("n_jobs", None)
            super().__init__(*args, **kwargs)

    runs = []
    for round_ in range(a.rounds):
        for name, cls in (("smac-default", SmacDefault), ("nosqltune", ours)):
            forests.RandomForest = cls
            for knob_set in ("rafiki5", "irace23"):
                began = time.perf_counter()
                r = ask_overhead.run("smac", knob_set)
                runs.append({"round": round_, "forest": name, "knob_set": knob_set, "knobs": r["knobs"],
                             "suggestions": r["suggestions"], "seconds": time.perf_counter() - began,
                             "wall_s_at_200": r.get("wall_s_at_200")})
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    write(runs, a)
    return 0


def write(runs: list, a) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "smac_forest.json").write_text(json.dumps({"rounds": a.rounds, "runs": runs}, indent=1) + "\n")
    lines = ["# SMAC's forest: SMAC 2.4's facade default against nosqltune's", "",
             f"Time for {ask_overhead.N} SMAC suggestions (ask and tell, synthetic cost), the two forests alternated "
             f"in one run, {a.rounds} rounds, mean over rounds. Same forest settings; the default caps leaves at 2**20 "
             "(scikit-learn then grows best-first and reserves room for that many) and asks joblib for every "
             "core. Machine: 2 cores, nothing else running.", "",
             "| knob set | knobs | SMAC default s | nosqltune s | speedup | ask at 200, default s | ask at 200, "
             "nosqltune s |", "|---|---|---|---|---|---|---|"]
    def mean(knob_set, forest, key):
        return statistics.mean(r[key] for r in runs if r["knob_set"] == knob_set and r["forest"] == forest)
    for knob_set in dict.fromkeys(r["knob_set"] for r in runs):
        base, ours = mean(knob_set, "smac-default", "seconds"), mean(knob_set, "nosqltune", "seconds")
        knobs = next(r["knobs"] for r in runs if r["knob_set"] == knob_set)
        lines.append(f"| {knob_set} | {knobs} | {base:.1f} | {ours:.1f} | x{base / ours:.2f} | "
                     f"{mean(knob_set, 'smac-default', 'wall_s_at_200'):.3f} | "
                     f"{mean(knob_set, 'nosqltune', 'wall_s_at_200'):.3f} |")
    (RESULTS / "smac_forest.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
