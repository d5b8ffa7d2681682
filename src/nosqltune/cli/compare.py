"""`nosqltune compare`: a tuning study's best (and other candidates) against the default, interleaved."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .options import DEFAULT_STUDY, multiples


def unsettled_line(label: str, count: int, runs: int) -> str:
    """A candidate whose warm-ups ended at their time cap without a plateau (evaluation.compare.unsettled)."""
    return (f"  {label}: {count} of {runs} warm-ups reached no plateau before their time cap: those runs did more "
            "work before measuring than the others")


def format_confirmation(result: dict[str, Any]) -> str:
    unit = result["unit"]

    def value(v):
        return "-" if v is None else (f"{v:,.0f}" if unit == "ops/s" else f"{v:.3g}")

    lines = [f"confirmation: the top {result['top']} configurations by single runs and the default, "
             f"{result['rounds']} interleaved cold rounds ({result['trials']} trials)"]
    for label, c in result["candidates"].items():
        interval = (f" [{value(c['interval'][0])}, {value(c['interval'][1])}]" if c["interval"] else "")
        lines.append(f"  {label:<8} mean {value(c['mean'])} {unit}{interval} over {c['feasible_rounds']} rounds; "
                     f"single run {value(c['single_run'])}" + ("  <- confirmed best" if label == result["best"] else "")
                     + (f"  unstable (its rounds disagree beyond the others' spread, p = {c['unstable']:.2g})"
                        if c.get("unstable") is not None else ""))
    if result.get("denoise"):
        lines.append(f"  {result['denoise']['described']}")
    runs = result["trials"] // len(result["candidates"])    # each candidate's: a run per round and workload
    lines.extend(unsettled_line(label, count, runs) for label, count in (result.get("unsettled") or {}).items()
                 if count)
    s = result["vs_default"]
    if s and s["mean_speedup"] is not None:
        interval = f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["ci_low"] is not None else "-"
        p = f"{s['p_value']:.3g}" if s["p_value"] is not None else "-"
        lines.append(f"  {result['best']} vs default: x{s['mean_speedup']:.3f}, 95% interval {interval}, Wilcoxon "
                     f"p = {p} over {s['pairs']} pairs: {s['verdict']}"
                     + (f" ({s['pairs']} pairs cannot reach p < 0.05: `compare --repeat 10` tests it)"
                        if s["pairs"] < 6 else ""))
    elif result["best"] is None:
        lines.append("  no configuration held the study's constraints in every round")
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> int:
    from ..evaluation.compare import CompareSettings, compare_study
    from ..evaluation.study import open_study
    from ..surrogate.features import existing_store

    settings = CompareSettings(candidates=args.candidates, rounds=args.repeat, scale=args.scale, jit=args.jit,
                               warmup_seconds=args.warmup_seconds, operations=args.operations,
                               metrics=tuple(m.strip() for m in args.metrics.split(",") if m.strip()))
    store = existing_store(args.study)
    try:
        study = open_study(store, args.study, args.study_name, "compare")
        if args.ablation:
            from ..evaluation.ablation import AblationSettings, ablate, format_ablation

            ablation = ablate(study, AblationSettings(rounds=args.repeat), say=_say(args))
            print(json.dumps(ablation, default=str) if args.json else format_ablation(ablation))
            return 0
        if args.data_growth:
            from ..evaluation.compare import compare_growth, growth_table

            grown = compare_growth(study, settings, multiples(args.data_growth, "--data-growth"), say=_say(args))
            table = growth_table(study.reread().record["settings"].get("compare") or {})
            if args.json:
                print(json.dumps({"study": args.study, **grown, "table": table}, default=str))
            else:
                for result in grown["sizes"].values():
                    print(format_comparison(result, study.objective.unit) + "\n")
                print(format_growth(table))
            failed = sum(r["failed_runs"] for r in grown["sizes"].values())
            return 1 if failed else 0
        result = {"study": args.study, **compare_study(study, settings, say=_say(args))}
    finally:
        store.close()
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(format_comparison(result, study.objective.unit))
    if result["failed_runs"]:   # as bench and tune: a failed trial is exit 1; the runs that completed are compared
        print(f"nosqltune: {result['failed_runs']} of {result['runs']} comparison runs failed (stored with their "
              "reasons: `nosqltune export`)", file=sys.stderr)
        return 1
    return 0


def format_growth(table: list[dict[str, Any]]) -> str:
    """The gain of each candidate against the default at each data size, as `best` and `compare` print it."""
    if not table:
        return "no comparison at more than one data size (compare --data-growth 1,2,4 makes them)"
    lines = ["gain against the data size (records multiplied, operations held; each size its own interleaved rounds):"]
    for row in table:
        interval = (f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]" if row.get("ci_low") is not None else "")
        p = "-" if row.get("p_value") is None else f"{row['p_value']:.3g}"
        speedup = "-" if row.get("mean_speedup") is None else f"x{row['mean_speedup']:.3f}"
        label = row["candidate"] + (f" ({row['variant']})" if row.get("variant") else "")   # e.g. another JIT
        lines.append(f"  {row['workload']}  {label:<14} data x{row['multiple']:g}: {speedup}{interval}, "
                     f"p = {p} over {row['pairs']} pairs")
    return "\n".join(lines)


def _say(args):
    from .options import _progress

    return _progress(args)


def format_comparison(result: dict[str, Any], unit: str) -> str:
    size = f"scale x{result['scale']:g}" + (f", data x{result['data']:g}" if result.get("data", 1) != 1 else "")
    size += f", JIT {result['jit']}" if result.get("jit") else ""
    size += f", warm-up {result['warmup_seconds']} s" if result.get("warmup_seconds") else ""
    size += f", {result['operations']:,} operations per run" if result.get("operations") else ""
    lines = [f"{result['metric']} ({unit}), study {result['study_name']}, {size}: "
             "speedup = candidate / default of the same round (> 1 is better)"
             + (f"; best = {result['best_is']}" if result.get("best_is") and "best" in result["candidates"] else "")]
    for name, w in result["workloads"].items():
        lines.append(f"\n{name}:")
        lines += _metric_lines(w)
        if w.get("machines"):
            lines.append(f"  machines: {w['machines']['line']}")
        for metric, side in (w.get("also") or {}).items():
            lines.append(f"  -- {metric} ({side['unit']}):")
            lines += _metric_lines(side)
    return "\n".join(lines)


def _metric_lines(w: dict[str, Any]) -> list[str]:
    """Means per candidate, then each candidate's speedup and test against the default."""
    lines = []
    for label, values in w["values"].items():
        got = [v for v in values if v is not None]
        mean = sum(got) / len(got) if got else float("nan")
        lines.append(f"  {label:<14} mean {mean:10.4g} over {len(got)} runs"
                     + (f" ({len(values) - len(got)} failed)" if len(got) < len(values) else ""))
    for label, s in w["stats"].items():
        if s["mean_speedup"] is None:
            lines.append(f"  {label}: {s['verdict']}")
            continue
        interval = f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["ci_low"] is not None else "-"
        p = f"{s['p_value']:.4f}" if s["p_value"] is not None else "-"
        lines.append(f"  {label} vs default: mean x{s['mean_speedup']:.3f}, median x{s['median_speedup']:.3f}, "
                     f"95% interval {interval}, Wilcoxon p = {p} over {s['pairs']} pairs: {s['verdict'].upper()}")
    for label, said in (w.get("bottlenecks") or {}).items():
        if said:
            lines.append(f"  {label} {said['line']} ({said['of']} of {said['trials']} runs)")
    lines.extend(unsettled_line(label, count, len(w["values"][label]))
                 for label, count in (w.get("unsettled") or {}).items() if count)
    return lines


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "compare", help="a tuning study's best configuration (and others) against the default, with statistics",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the candidates and the default in interleaved cold rounds (ABC CBA ...) on the study's "
                    "workloads and harness, then per candidate: speedup over the default of the same round (mean, "
                    "median, 95% bootstrap interval), Wilcoxon signed-rank p-value, and a verdict (better / no "
                    "significant difference / worse). Runs are stored in the study; an interrupted comparison "
                    "continues where it stopped.\n\nExamples:\n"
                    "  nosqltune compare --study runs/a.db --repeat 10\n"
                    "  nosqltune compare --study runs/a.db --candidates best,mine.yaml --repeat 10 --scale 10")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store: SQLite path or postgresql:// URL (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="tuning study within the store (default tune)")
    p.add_argument("--candidates", default="best", metavar="LIST",
                   help="comma-separated: best (the study's best), default, best-practice (Cassandra's documented "
                        "rules of thumb for this machine: concurrent_writes = 8 x cores, concurrent_reads = 16 x "
                        "drives, ...; see `nosqltune knobs`), design-default (the default knobs on the best "
                        "configuration's design, for a study of tune --design), latest (Cassandra 5.0's "
                        "cassandra_latest.yaml settings), or YAML files of knob values (default "
                        "best; the default configuration is always run as the reference)")
    p.add_argument("--repeat", type=int, default=10, metavar="N", help="interleaved rounds (default 10)")
    p.add_argument("--scale", type=float, default=1.0, metavar="X",
                   help="multiply records and operations by X, e.g. 10 to validate at 10x the tuning load (like the "
                        "irace paper's heavier test scenario TS2; a new dataset is loaded once) (default 1)")
    p.add_argument("--metrics", default="throughput,cpu-per-op", metavar="LIST",
                   help="figures tested beside the study's objective, from the same runs (default throughput,"
                        "cpu-per-op: the node's CPU per operation separates configurations that the throughput of a "
                        "client sharing the cores cannot; '' for none)")
    p.add_argument("--jit", choices=["c1", "tiered"], default=None,
                   help="both JVMs' JIT for these rounds, whatever the study was tuned with (its trials ran c1 unless "
                        "tune said otherwise): tiered measures at production's JIT, whose plateau takes a minute or "
                        "more on 2 cores, so its runs warm up at least 120 s, then until two 20 s windows of throughput "
                        "agree within 5%%, at most 300 s (--warmup-seconds S: by time instead); stored as its own "
                        "comparison")
    p.add_argument("--warmup-seconds", type=int, default=None, metavar="S",
                   help="warm up each run for S seconds (by time, not operations) instead of the study's warm-up; "
                        "stored as its own comparison")
    p.add_argument("--operations", type=int, default=None, metavar="N",
                   help="measure N operations in every run instead of the study's, the records held: a longer "
                        "measured phase, e.g. at the tiered JIT, whose faster runs measure fewer seconds; stored as "
                        "its own comparison (default: the study's)")
    p.add_argument("--data-growth", default=None, metavar="LIST",
                   help="data multiples, e.g. 1,2,4: the records multiplied and the operations held, the "
                        "candidates, the default and latest measured at each size in its own interleaved rounds "
                        "(--repeat each); prints the gain against the data size (best shows it too)")
    p.add_argument("--ablation", action="store_true",
                   help="instead of the candidates: the study's best with each changed setting reverted to its "
                        "default, one at a time, beside the best and the default in --repeat interleaved cold "
                        "rounds; each setting's share of the gain, and which are optional")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_compare)
