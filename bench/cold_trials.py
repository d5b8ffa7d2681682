"""Cost and repeatability of cold trials of default Cassandra, on real nodes.

Runs --repeat cold trials (restore, boot, warm-up, measure, stop) of the default configuration at
the setup given (by default the one `nosqltune calibrate` recommended here), then --repeat-100k
trials at the irace paper's setup of 100K records / 100K operations, and writes the per-phase wall
times, throughput, and the coefficient of variation to bench/results/cold_trials.{json,md}.

    python bench/cold_trials.py [--operations 30000] [--threads 16] [--repeat 10] [--repeat-100k 3]
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
PHASES = ("restore_s", "boot_s", "apply_s", "warmup_s", "measure_s", "client_s", "stop_s", "total_s")


def run_setup(label, workload, settings, repeat, space) -> dict:
    ensure_dataset(space, {}, workload, settings, progress=print)  # loading is a one-off, not a trial cost
    trials = []
    for i in range(repeat):
        result = run_trial(space, {}, workload, settings)
        trials.append({"state": result.state, "error": result.error,
                       "throughput_ops_s": result.summary.get("throughput_ops_s"),
                       "median_interval_ops_s": result.summary.get("throughput_median_interval_ops_s"),
                       "timings": result.timings})
        print(f"{label} {i + 1}/{repeat}: {result.state} {result.summary.get('throughput_ops_s')} ops/s "
              f"{result.timings.get('total_s', 0):.1f} s", flush=True)
    ok = [t for t in trials if t["state"] == "COMPLETE"]
    tp = [t["throughput_ops_s"] for t in ok]
    med = [t["median_interval_ops_s"] for t in ok if t["median_interval_ops_s"]]
    cv = statistics.stdev(tp) / statistics.mean(tp) if len(tp) > 1 else None
    cv_med = statistics.stdev(med) / statistics.mean(med) if len(med) > 1 else None
    return {"label": label, "jit": settings.jit, "workload": workload.to_dict(), "trials": trials, "completed": len(ok),
            "throughput_mean": statistics.mean(tp) if tp else None, "throughput_cv": cv,
            "median_interval_cv": cv_med,
            "phase_means": {p: statistics.mean(t["timings"].get(p, 0) for t in ok) for p in PHASES} if ok else {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="ycsb-a")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--operations", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--warmup-ops", type=int, default=20_000)
    parser.add_argument("--jit", default="c1", help="JIT mode of the calibrated setup (c1 or tiered)")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--repeat-100k", type=int, default=5,
                        help="trials of 100K records / 100K operations with the same JIT as the calibrated setup")
    parser.add_argument("--repeat-tiered", type=int, default=3,
                        help="trials of 100K records / 100K operations with the JVMs' default tiered JIT")
    parser.add_argument("--server-cpus")
    parser.add_argument("--client-cpus")
    args = parser.parse_args()
    space = load_space("cassandra")
    settings = TrialSettings(server_cpus=args.server_cpus, client_cpus=args.client_cpus, jit=args.jit)
    setups = [run_setup("calibrated", make_workload(args.workload, records=args.records, operations=args.operations,
                                                    threads=args.threads, warmup_operations=args.warmup_ops),
                        settings, args.repeat, space)]
    if args.repeat_100k:
        setups.append(run_setup("100k/100k", make_workload(args.workload, records=100_000, operations=100_000,
                                                           threads=args.threads, warmup_operations=args.warmup_ops),
                                settings, args.repeat_100k, space))
    if args.repeat_tiered:
        tiered = TrialSettings(server_cpus=args.server_cpus, client_cpus=args.client_cpus, jit="tiered")
        setups.append(run_setup("100k/100k tiered", make_workload(args.workload, records=100_000, operations=100_000,
                                                                  threads=args.threads,
                                                                  warmup_operations=args.warmup_ops),
                                tiered, args.repeat_tiered, space))
    result = {"setups": setups, "harness": settings.to_dict(),
              "environment": fingerprint("cassandra", settings.cassandra.cassandra_version), "measured_at": time.time()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cold_trials.json").write_text(json.dumps(result, indent=2))
    lines = ["# Cold trials of default Cassandra", "",
             f"workload {args.workload}, {args.threads} client threads, warm-up {args.warmup_ops} ops in the "
             f"measuring client; server cpus {args.server_cpus or 'shared'}, client cpus "
             f"{args.client_cpus or 'shared'}", "",
             "| setup | JIT | trials | mean ops/s | CV | CV of median 1-s interval | restore s | boot s | warm-up s | "
             "measure s | stop s | trial s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in setups:
        w, p = s["workload"], s["phase_means"]
        fmt = lambda v: "-" if v is None else f"{v * 100:.2f}%"  # noqa: E731
        lines.append(f"| {w['records']} rec / {w['operations']} ops | {s['jit']} | {s['completed']}/{len(s['trials'])} | "
                     f"{s['throughput_mean'] or 0:.0f} | {fmt(s['throughput_cv'])} | {fmt(s['median_interval_cv'])} | "
                     f"{p.get('restore_s', 0):.2f} | {p.get('boot_s', 0):.1f} | {p.get('warmup_s', 0):.1f} | "
                     f"{p.get('measure_s', 0):.1f} | {p.get('stop_s', 0):.1f} | {p.get('total_s', 0):.1f} |")
    (RESULTS / "cold_trials.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
