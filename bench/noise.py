"""Which harness choices make cold measurements repeatable? Variants interleaved, CV of each.

Each round runs one cold trial of default Cassandra per variant (ABAB... so drift of the shared
machine hits every variant alike). Variants: CPU sharing vs pinning server and client to separate
cores, and warm-up by fixed count vs steady-state detection. For each: CV of overall throughput
and of the median one-second throughput, and mean trial time. Writes bench/results/noise.{json,md}.

    python bench/noise.py [--rounds 5] [--operations 30000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nosqltune.runtime.environment import fingerprint  # noqa: E402
from nosqltune.knobs import load_space  # noqa: E402
from nosqltune.systems.cassandra.trial import ensure_dataset  # noqa: E402
from nosqltune.systems import TrialSettings, run_trial  # noqa: E402
from nosqltune.workloads.spec import make_workload  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
VARIANTS = {
    "shared-steady": {"cpus": (None, None), "steady": 5},   # both JVMs on both cores; steady-state warm-up
    "pinned-steady": {"cpus": ("0", "1"), "steady": 5},     # Cassandra on core 0, YCSB client on core 1
    "shared-fixed": {"cpus": (None, None), "steady": 0},    # warm-up of a fixed 30K operations
    "c1-fixed": {"cpus": (None, None), "steady": 0, "jit": "c1", "warmup": 20_000},  # both JVMs at C1 only
    "c1-steady": {"cpus": (None, None), "steady": 3, "jit": "c1", "warmup": 10_000},
}


def cv(values):
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--operations", type=int, default=30_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated variant names")
    parser.add_argument("--label", default="", help="suffix of the result files")
    args = parser.parse_args()
    space = load_space("cassandra")
    chosen = [v.strip() for v in args.variants.split(",")]
    trials = {name: [] for name in chosen}
    for rnd in range(args.rounds):
        for name in chosen:
            spec = VARIANTS[name]
            settings = TrialSettings(server_cpus=spec["cpus"][0], client_cpus=spec["cpus"][1],
                                     jit=spec.get("jit", "tiered"))
            warmup = spec.get("warmup", 20_000 if spec["steady"] else 30_000)
            workload = make_workload("ycsb-a", records=100_000, operations=args.operations, threads=args.threads,
                                     warmup_operations=warmup,
                                     warmup_steady_window=spec["steady"], warmup_max_seconds=40)
            ensure_dataset(space, {}, workload, settings)
            r = run_trial(space, {}, workload, settings)
            trials[name].append({"state": r.state, "throughput": r.summary.get("throughput_ops_s"),
                                 "median_interval": r.summary.get("throughput_median_interval_ops_s"),
                                 "warmup": r.metrics.get("warmup"), "timings": r.timings})
            print(f"round {rnd + 1} {name}: {r.state} {r.summary.get('throughput_ops_s')} "
                  f"{r.timings.get('total_s', 0):.1f} s", flush=True)
    summary = {}
    for name, rows in trials.items():
        ok = [t for t in rows if t["state"] == "COMPLETE"]
        summary[name] = {"n": len(ok), "mean": statistics.mean(t["throughput"] for t in ok) if ok else None,
                         "cv": cv([t["throughput"] for t in ok]),
                         "cv_median_interval": cv([t["median_interval"] for t in ok if t["median_interval"]]),
                         "trial_s": statistics.mean(t["timings"]["total_s"] for t in ok) if ok else None}
    RESULTS.mkdir(exist_ok=True)
    suffix = f"-{args.label}" if args.label else ""
    (RESULTS / f"noise{suffix}.json").write_text(json.dumps({"summary": summary, "trials": trials, "args": vars(args),
                                                    "environment": fingerprint("cassandra", "5.0.6"),
                                                    "measured_at": time.time()}, indent=2))
    lines = [f"# Noise of cold trials: {args.rounds} interleaved rounds, ycsb-a, 100K records, "
             f"{args.operations} measured ops, {args.threads} threads", "",
             "| variant | n | mean ops/s | CV | CV of median 1-s interval | trial s |", "|---|---|---|---|---|---|"]
    for name, s in summary.items():
        pct = lambda v: "-" if v is None else f"{v * 100:.2f}%"  # noqa: E731
        lines.append(f"| {name} | {s['n']} | {s['mean'] or 0:.0f} | {pct(s['cv'])} | {pct(s['cv_median_interval'])} "
                     f"| {s['trial_s'] or 0:.1f} |")
    (RESULTS / f"noise{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
