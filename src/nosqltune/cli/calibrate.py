"""`nosqltune calibrate`: how reliable one measurement is (as in the irace paper's reliable-setup study): CV and
cost per setup, and a pick."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from typing import Any

from ..errors import UsageError
from .options import _common


def _ints(text: str | None, fallback: int, flag: str) -> list[int]:
    if not text:
        return [fallback]
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} expects a comma-separated list of integers like 30000,60000, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise UsageError(f"{flag} expects positive integers, got {text!r}")
    return values


def recommend(cells: list[dict[str, Any]], max_cv: float, metric: str = "throughput",
              max_trial_seconds: float | None = None) -> dict[str, Any] | None:
    """The cheapest setup (mean trial seconds) whose CV of `metric` is at most `max_cv`, and whose mean cold
    trial took at most `max_trial_seconds` (a dataset build excluded) when given."""
    key = "cv" if metric == "throughput" else f"{metric}_cv"
    eligible = [c for c in cells if c.get(key) is not None and c["n"] >= 2 and c[key] <= max_cv
                and (max_trial_seconds is None or c["trial_seconds"] <= max_trial_seconds)]
    return min(eligible, key=lambda c: c["trial_seconds"]) if eligible else None


def _goal(args: argparse.Namespace) -> tuple[str, float, float | None]:
    """The metric, CV threshold and trial-time cap: the flags', else the scenario's calibration goal when
    --scenario is given, else throughput, 3% and no cap."""
    from ..objective import check_metric
    from .options import _scenario

    given = getattr(args, "scenario", None) is not None
    scenario = _scenario(args)
    metric = check_metric(args.metric or (scenario.calibration_metric if given else "throughput"), "--metric")
    max_cv = args.max_cv if args.max_cv is not None else (scenario.max_cv if given else 0.03)
    if not max_cv > 0:
        raise UsageError(f"--max-cv must be positive, got {max_cv:g}")
    cap = args.max_trial_seconds if args.max_trial_seconds is not None else (scenario.max_trial_s if given else None)
    if cap is not None and cap <= 0:
        raise UsageError(f"--max-trial-seconds must be positive, got {cap:g}")
    return metric, max_cv, cap


def _trial_seconds(row: dict[str, Any]) -> float:
    """A trial's time without the dataset build it may have started with (built once, then reused)."""
    timings = row["timings"]
    return timings["total_s"] - (timings.get("dataset_build_s") or 0)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..evaluation.runs import run_trials
    from ..objective import metric_value
    from .options import _build_workload, _overrides, _progress, _scenario, _stats, scenario_rate, trial_target
    from .harness import trial_settings
    from ..workloads.spec import Workload

    metric, max_cv, max_trial_seconds = _goal(args)
    settings = trial_settings(args)
    target = trial_target(settings)
    space = target.knob_space(settings)
    overrides = _overrides(args, space)      # the scenario's knob values (a calibration measures the default)
    base, sizes = Workload(name="base", mix={}), _scenario(args).sizes   # where no grid or flag is given
    grid = list(itertools.product(_ints(args.grid_records, args.records or sizes.get("records", base.records),
                                        "--grid-records"),
                                  _ints(args.grid_operations, args.operations
                                        or sizes.get("operations", base.operations), "--grid-operations"),
                                  _ints(args.grid_threads, args.threads or sizes.get("threads", base.threads),
                                        "--grid-threads"),
                                  _ints(args.grid_warmup, args.warmup_ops or sizes.get("warmup_ops",
                                                                                       base.warmup_operations),
                                        "--grid-warmup")))
    for records, operations, threads, warmup in grid:   # bad input (e.g. too many records for Redis) said first
        target.preflight(_build_workload(args, records=records, operations=operations, threads=threads,
                                         warmup_operations=warmup), settings)
    say = _progress(args)
    repeats = args.repeat
    per_cell: dict[tuple, list[dict]] = {cell: [] for cell in grid}
    # round-robin over the grid so slow drift of the machine spreads over every setup alike
    for rep in range(repeats):
        for records, operations, threads, warmup in grid:
            say(f"calibrate: round {rep + 1}/{repeats}, {records} records, {warmup} warm-up and {operations} "
                f"measured ops, {threads} threads")
            workload, _ = scenario_rate(args, settings, _build_workload(args, records=records, operations=operations,
                                                                        threads=threads, warmup_operations=warmup))
            per_cell[(records, operations, threads, warmup)] += run_trials(
                args.study, space, overrides, workload, settings, repeat=1,
                tag=f"calibrate r{records} o{operations} t{threads} w{warmup}",
                study_name=args.study_name or "calibrate", progress=say)
    cells = []
    for (records, operations, threads, warmup), rows in per_cell.items():
        ok = [r for r in rows if r["state"] == "COMPLETE"]
        st = _stats([r["metrics"]["summary"]["throughput_ops_s"] for r in ok])
        times = _stats([_trial_seconds(r) for r in ok])
        cell = {"records": records, "operations": operations, "threads": threads, "warmup_ops": warmup, "n": st["n"],
                "failed": len(rows) - len(ok), "mean_ops_s": st["mean"], "sd_ops_s": st["sd"], "cv": st["cv"],
                "trial_seconds": times["mean"],
                "measure_seconds": _stats([r["timings"]["measure_s"] for r in ok])["mean"]}
        # the node's own cost per operation (and the objective asked for), with their spread
        for name in dict.fromkeys(["cpu-per-op", metric]):
            if name != "throughput":
                figure = _stats([metric_value(name, r["metrics"]["summary"]) for r in ok])
                cell.update({f"{name}_mean": figure["mean"], f"{name}_cv": figure["cv"]})
        cells.append(cell)
    pick = recommend(cells, max_cv, metric, max_trial_seconds)
    picked_cv = None if pick is None else pick["cv" if metric == "throughput" else f"{metric}_cv"]
    saved = _save(args, pick, metric, picked_cv, max_cv, max_trial_seconds) if pick else None
    within = "" if max_trial_seconds is None else f" within {max_trial_seconds:g} s per cold trial"
    if args.json:
        print(json.dumps({"max_cv": max_cv, "metric": metric, "max_trial_seconds": max_trial_seconds,
                          "cells": cells, "recommended": pick, "saved_to": saved}))
    else:
        print(f"{'records':>8} {'warm-up':>8} {'ops':>8} {'threads':>7} {'n':>3} {'mean ops/s':>10} {'sd':>8} "
              f"{'cv %':>6} {'cpu us/op':>9} {'cv %':>6} {'trial s':>7} {'measure s':>9}")
        for c in cells:
            print(f"{c['records']:>8} {c['warmup_ops']:>8} {c['operations']:>8} {c['threads']:>7} {c['n']:>3} "
                  f"{_f(c['mean_ops_s'], 0):>10} {_f(c['sd_ops_s'], 0):>8} {_pct(c['cv']):>6} "
                  f"{_f(c['cpu-per-op_mean'], 1):>9} {_pct(c['cpu-per-op_cv']):>6} {_f(c['trial_seconds'], 1):>7} "
                  f"{_f(c['measure_seconds'], 1):>9}")
            if metric not in ("throughput", "cpu-per-op"):
                print(f"{'':>8} {metric}: mean {_f(c[f'{metric}_mean'], 3)}, CV {_pct(c[f'{metric}_cv'])} %")
        if pick:
            print(f"recommended: --records {pick['records']} --warmup-ops {pick['warmup_ops']} --operations "
                  f"{pick['operations']} --threads {pick['threads']} ({metric} CV {picked_cv * 100:.2f}% <= "
                  f"{max_cv * 100:.1f}%, {pick['trial_seconds']:.1f} s per cold trial)")
            if saved:
                print(f"saved as scenario {_scenario(args).name}'s defaults on this machine ({saved}; "
                      "--no-save leaves them as they were)")
        else:
            print(f"no setup reached a {metric} CV <= {max_cv * 100:.1f}%{within}; try more operations or a "
                  "longer warm-up", file=sys.stderr)
    return 0 if pick else 1


def _save(args: argparse.Namespace, pick: dict[str, Any], metric: str, cv: float, max_cv: float,
          max_trial_seconds: float | None) -> str | None:
    """With --scenario (and not --no-save): the picked sizes become the scenario's defaults for this datastore
    on this machine, with the goal that chose them. Not when the trials measured something else than the
    scenario's default configuration at its own rate (--set, --config, --target)."""
    if getattr(args, "scenario", None) is None or args.no_save:
        return None
    from ..scenarios import save_calibration
    from .options import _scenario

    if args.assignments or args.config or args.target is not None or \
            args.rate_fraction not in (None, _scenario(args).rate_fraction):
        print("not saved as the scenario's defaults: --set, --config, --target or --rate-fraction measured another "
              "setup than the scenario's own", file=sys.stderr)
        return None

    figures = {"metric": metric, "cv": cv, "max_cv": max_cv, "max_trial_seconds": max_trial_seconds,
               "n": pick["n"], "trial_seconds": pick["trial_seconds"]}
    sizes = {k: pick[k] for k in ("records", "operations", "warmup_ops", "threads")}
    return str(save_calibration(_scenario(args).name, sizes, figures, args.system or "cassandra"))


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
    p.add_argument("--grid-warmup", default=None, metavar="LIST", help="comma-separated warm-up operation counts "
                   "(default: --warmup-ops, or the scenario's)")
    p.add_argument("--max-cv", type=float, default=None, help="CV threshold of --metric (default: the scenario's "
                   "goal with --scenario, e.g. 0.05; else 0.03)")
    p.add_argument("--max-trial-seconds", type=float, default=None, metavar="S",
                   help="recommend only setups whose cold trial takes at most S seconds, a dataset build "
                        "excluded (default: the scenario's cap with --scenario, 60; else none)")
    p.add_argument("--metric", default=None, metavar="METRIC",
                   help="the figure whose CV picks the setup: throughput, cpu-per-op (the node's CPU per "
                        "operation; at a fixed --target rate throughput cannot vary), p99-read, ... (default: "
                        "the scenario's objective with --scenario, else throughput); the node's CPU per "
                        "operation and its CV are shown for every setup")
    p.add_argument("--no-save", action="store_true",
                   help="with --scenario, do not store the recommended setup as the scenario's defaults on this "
                        "machine (by default it is stored in the user's cache and used from then on)")
    p.set_defaults(func=cmd_calibrate)
