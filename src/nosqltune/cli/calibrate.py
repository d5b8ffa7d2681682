"""`nosqltune calibrate`: how reliable one measurement is (seed 001): CV and cost per setup, and a pick."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any

from .options import _common


def _ints(text: str | None, fallback: int) -> list[int]:
    from ..errors import NosqltuneError

    if not text:
        return [fallback]
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise NosqltuneError(f"expected a comma-separated list of integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise NosqltuneError(f"expected positive integers, got {text!r}")
    return values


def recommend(cells: list[dict[str, Any]], max_cv: float, metric: str = "throughput") -> dict[str, Any] | None:
    """The cheapest setup (mean trial seconds) whose CV of `metric` is at most `max_cv`."""
    key = "cv" if metric == "throughput" else f"{metric}_cv"
    eligible = [c for c in cells if c.get(key) is not None and c["n"] >= 2 and c[key] <= max_cv]
    return min(eligible, key=lambda c: c["trial_seconds"]) if eligible else None


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..evaluation.runs import run_trials
    from ..objective import check_metric, metric_value
    from .options import _build_workload, _overrides, _progress, _scenario, _settings, _stats, scenario_rate, trial_target
    from ..workloads.spec import Workload

    metric = check_metric(args.metric, "--metric")
    settings = _settings(args)
    space = trial_target(settings).knob_space(settings)
    overrides = _overrides(args, space)      # the scenario's knob values (a calibration measures the default)
    base, sizes = Workload(name="base", mix={}), _scenario(args).sizes   # where no grid or flag is given
    grid = list(itertools.product(_ints(args.grid_records, args.records or sizes.get("records", base.records)),
                                  _ints(args.grid_operations, args.operations
                                        or sizes.get("operations", base.operations)),
                                  _ints(args.grid_threads, args.threads or base.threads)))
    say = _progress(args)
    repeats = args.repeat
    per_cell: dict[tuple, list[dict]] = {cell: [] for cell in grid}
    # round-robin over the grid so slow drift of the machine spreads over every setup alike
    for rep in range(repeats):
        for records, operations, threads in grid:
            say(f"calibrate: round {rep + 1}/{repeats}, {records} records, {operations} ops, {threads} threads")
            workload, _ = scenario_rate(args, settings, _build_workload(args, records=records, operations=operations,
                                                                        threads=threads))
            per_cell[(records, operations, threads)] += run_trials(
                args.study, space, overrides, workload, settings, repeat=1,
                tag=f"calibrate r{records} o{operations} t{threads}",
                study_name=args.study_name or "calibrate", progress=say)
    cells = []
    for (records, operations, threads), rows in per_cell.items():
        ok = [r for r in rows if r["state"] == "COMPLETE"]
        st = _stats([r["metrics"]["summary"]["throughput_ops_s"] for r in ok])
        times = _stats([r["timings"]["total_s"] for r in ok])
        cell = {"records": records, "operations": operations, "threads": threads, "n": st["n"],
                "failed": len(rows) - len(ok), "mean_ops_s": st["mean"], "sd_ops_s": st["sd"], "cv": st["cv"],
                "trial_seconds": times["mean"],
                "measure_seconds": _stats([r["timings"]["measure_s"] for r in ok])["mean"]}
        # the node's own cost per operation (and the objective asked for), with their spread
        for name in dict.fromkeys(["cpu-per-op", metric]):
            if name != "throughput":
                figure = _stats([metric_value(name, r["metrics"]["summary"]) for r in ok])
                cell.update({f"{name}_mean": figure["mean"], f"{name}_cv": figure["cv"]})
        cells.append(cell)
    pick = recommend(cells, args.max_cv, metric)
    picked_cv = None if pick is None else pick["cv" if metric == "throughput" else f"{metric}_cv"]
    if args.json:
        print(json.dumps({"max_cv": args.max_cv, "metric": metric, "cells": cells, "recommended": pick}))
    else:
        print(f"{'records':>8} {'ops':>8} {'threads':>7} {'n':>3} {'mean ops/s':>10} {'sd':>8} {'cv %':>6} "
              f"{'cpu us/op':>9} {'cv %':>6} {'trial s':>7} {'measure s':>9}")
        for c in cells:
            print(f"{c['records']:>8} {c['operations']:>8} {c['threads']:>7} {c['n']:>3} "
                  f"{_f(c['mean_ops_s'], 0):>10} {_f(c['sd_ops_s'], 0):>8} {_pct(c['cv']):>6} "
                  f"{_f(c['cpu-per-op_mean'], 1):>9} {_pct(c['cpu-per-op_cv']):>6} {_f(c['trial_seconds'], 1):>7} "
                  f"{_f(c['measure_seconds'], 1):>9}")
        if pick:
            print(f"recommended: --records {pick['records']} --operations {pick['operations']} --threads "
                  f"{pick['threads']} ({metric} CV {picked_cv * 100:.2f}% <= {args.max_cv * 100:.1f}%, "
                  f"{pick['trial_seconds']:.1f} s per cold trial)")
        else:
            print(f"no setup reached a {metric} CV <= {args.max_cv * 100:.1f}%; try more operations or a longer "
                  "warm-up", file=sys.stderr)
    return 0 if pick else 1


def _pct(value: float | None) -> str:
    return _f(value * 100 if value is not None else None, 2)


def _f(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def add_parsers(sub) -> None:
    p = sub.add_parser("calibrate", help="how reliable is one measurement: CV per setup, and the cheapest "
                       "setup under a CV threshold",
                       description="Run the default configuration --repeat times for each combination of the "
                                   "given operation counts, record counts and thread counts; report mean, sd, "
                                   "CV and time per run, and recommend the cheapest setup whose CV is under "
                                   "--max-cv.")
    _common(p, repeat=10)
    p.add_argument("--grid-operations", default=None, metavar="LIST",
                   help="comma-separated operation counts (default: --operations, or the scenario's)")
    p.add_argument("--grid-records", default=None, metavar="LIST", help="comma-separated record counts "
                   "(default: --records)")
    p.add_argument("--grid-threads", default=None, metavar="LIST", help="comma-separated thread counts "
                   "(default: --threads)")
    p.add_argument("--max-cv", type=float, default=0.03, help="CV threshold of --metric (default 0.03)")
    p.add_argument("--metric", default="throughput", metavar="METRIC",
                   help="the figure whose CV picks the setup: throughput, cpu-per-op (the node's CPU per "
                        "operation; at a fixed --target rate throughput cannot vary), p99-read, ... (default "
                        "throughput); the node's CPU per operation and its CV are shown for every setup")
    p.set_defaults(func=cmd_calibrate)
