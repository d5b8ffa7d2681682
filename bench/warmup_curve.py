"""How long does a cold node + cold client take to reach steady state? Per-second throughput after boot.

Runs --trials cold trials of default Cassandra with no warm-up and a long measured phase, and records
the per-second throughput from the first operation on. Writes bench/results/warmup_curve.{json,md}.

    python bench/warmup_curve.py [--trials 2] [--operations 200000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nosqltune.runtime.environment import fingerprint  # noqa: E402
from nosqltune.knobs import load_space  # noqa: E402
from nosqltune.systems import TrialSettings, run_trial  # noqa: E402
from nosqltune.workloads.spec import make_workload  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--operations", type=int, default=200_000)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--workload", default="ycsb-a")
    parser.add_argument("--jit", default="tiered", help="c1 or tiered (the JVMs' default)")
    args = parser.parse_args()
    space, settings = load_space("cassandra"), TrialSettings(jit=args.jit)
    name = "warmup_curve" if args.jit == "tiered" else f"warmup_curve-{args.jit}"
    workload = make_workload(args.workload, records=100_000, operations=args.operations, threads=args.threads,
                             warmup_operations=0)
    curves = []
    for i in range(args.trials):
        r = run_trial(space, {}, workload, settings)
        curves.append(r.metrics.get("intervals_ops_s", []))
        print(f"trial {i + 1}: {r.state} {r.error or ''}", flush=True)
        print(" ".join(f"{v:.0f}" for v in curves[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"args": vars(args), "curves": curves,
                                                           "environment": fingerprint("cassandra", "5.0.6"),
                                                           "measured_at": time.time()}, indent=2))
    lines = [f"# Throughput per second after a cold boot ({args.workload}, 100K records, {args.threads} threads, "
             f"no warm-up, JIT {args.jit})", "", "| second | " + " | ".join(f"trial {i + 1}" for i in range(len(curves))) + " |",
             "|---|" + "---|" * len(curves)]
    for sec in range(max(len(c) for c in curves)):
        lines.append(f"| {sec + 1} | " + " | ".join(f"{c[sec]:.0f}" if sec < len(c) else "" for c in curves) + " |")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
