#!/usr/bin/env python3
"""The optimizers' own overhead per suggestion (ask time) at 40 and 200 trials.

Each optimizer is driven through ask/tell for 200 suggestions over a Cassandra knob set, with a synthetic
cost (an analytic function of the knobs plus noise: the optimizer's work does not depend on where the cost
comes from). Reported: mean wall time and CPU time of this process per ask over suggestions 36-40 and
196-200. For irace the wall time is from answering one request to receiving the next (R's own work and
the target-runner's start); its CPU time is in the R process, not here. Writes bench/results/ask_overhead.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
RESULTS = ROOT / "bench" / "results"

from nosqltune.knobs import load_space  # noqa: E402
from nosqltune.optimizers import make_optimizer  # noqa: E402
from nosqltune.knobs.space import TuningSpace, categorical, to_unit  # noqa: E402

N = 200
CAP_SECONDS = 600  # per optimizer and knob set: what is not reached in this time is reported as not reached
WINDOWS = {"40": range(35, 40), "200": range(195, 200)}


def cost_fn(space: TuningSpace, rng: random.Random):
    weights = {k.name: rng.uniform(0.5, 2.0) for k in space.knobs}
    targets = {k.name: rng.random() for k in space.knobs}

    def cost(config: dict) -> float:
        total = 0.0
        for knob in space.knobs:
            if categorical(knob):
                total += 0.0 if config[knob.name] == knob.default else 0.3 * weights[knob.name]
            else:
                total += weights[knob.name] * (to_unit(knob, config[knob.name]) - targets[knob.name]) ** 2
        return -10000 * math.exp(-total) * rng.gauss(1.0, 0.03)
    return cost


def run(optimizer: str, knob_set: str) -> dict:
    space = TuningSpace(load_space("cassandra").subset(knob_set))
    rng = random.Random(0)
    cost = cost_fn(space, rng)
    with tempfile.TemporaryDirectory() as tmp:
        # irace stops when its experiments are spent and races leave some unused: give it room for N asks
        budget = int(N * 1.6) if optimizer == "irace" else N
        opt = make_optimizer(optimizer, space, seed=1, budget=budget, workloads=["w"], workdir=Path(tmp) / "opt")
        walls, cpus = [], []
        try:
            began = time.perf_counter()
            for _ in range(N):
                if time.perf_counter() - began > CAP_SECONDS:
                    break
                w0, c0 = time.perf_counter(), time.process_time()
                suggestion = opt.ask()
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                if suggestion is None:
                    break
                opt.tell(suggestion, cost(suggestion.config))
        finally:
            opt.close()
    out = {"suggestions": len(walls), "knobs": len(space.knobs)}
    for label, window in WINDOWS.items():
        if len(walls) > window[-1]:
            out[f"wall_s_at_{label}"] = statistics.mean(walls[i] for i in window)
            out[f"cpu_s_at_{label}"] = statistics.mean(cpus[i] for i in window)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--busy", action="store_true",
                   help="say in the results that a Cassandra benchmark ran alongside (start it yourself)")
    p.add_argument("--optimizers", default="random,smac,irace,gp",
                   help="measure these again; the other rows are kept from the last results")
    a = p.parse_args()
    saved = RESULTS / "ask_overhead.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    for knob_set in ("rafiki5", "irace23"):
        for optimizer in a.optimizers.split(","):
            print(f"{knob_set} {optimizer}", file=sys.stderr, flush=True)
            results[f"{knob_set}/{optimizer}"] = run(optimizer, knob_set)
            write(results, a.busy)
    return 0


def write(results: dict, busy: bool) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "ask_overhead.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["# Optimizer overhead per suggestion", "",
             "Mean time of one `ask` over suggestions 36-40 and 196-200 (200 suggestions with a synthetic noisy "
             "cost over the knob set; irace gets a budget of 320 experiments, since its races leave some unused "
             "and it stops when the rest cannot fund another race). Wall time includes everything the suggestion waits for; CPU time is this process's "
             f"(irace's work is in the R process, so only its wall time counts). Each run stops after "
             f"{CAP_SECONDS} s; '-' means not reached in that time. Machine: 2 cores"
             + (", a Cassandra benchmark running at the same time" if busy else "") + ".", "",
             "| knob set | optimizer | knobs | suggestions | wall s at 40 | CPU s at 40 | wall s at 200 | CPU s at 200 |",
             "|---|---|---|---|---|---|---|---|"]
    for key, r in results.items():
        knob_set, optimizer = key.split("/")
        cells = [f"{r[k]:.4f}" if k in r else "-" for k in ("wall_s_at_40", "cpu_s_at_40", "wall_s_at_200",
                                                             "cpu_s_at_200")]
        lines.append(f"| {knob_set} | {optimizer} | {r['knobs']} | {r['suggestions']} | " + " | ".join(cells) + " |")
    (RESULTS / "ask_overhead.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
