"""`nosqltune bench`: repeated cold trials of one configuration."""

from __future__ import annotations

import argparse
import json

from ..bottleneck import of_trial
from .text import text_table
from ..evaluation.runs import run_trials
from .options import _build_workload, _common, _overrides, _progress, _stats, scenario_rate, trial_target
from .harness import trial_settings


_TIMING_ROWS = [("data load s (once)", "dataset_build_s"), ("restore s", "restore_s"), ("boot s", "boot_s"), ("warm-up s", "warmup_s"),
                ("measure s", "measure_s"), ("stop s", "stop_s"), ("trial s", "total_s")]


# the measured phase's cost (the node's: summed over a cluster's nodes; the YCSB client's own)
_COST_ROWS = [("node CPU us/op", "node_cpu_us_per_op"), ("node cores busy", "node_cpu_cores"),
              ("node GC us/op", "node_gc_us_per_op"), ("client CPU us/op", "client_cpu_us_per_op"),
              ("client cores busy", "client_cpu_cores"),
              # the node's volume (--volume): what its device served, and at what rate (the busiest node's)
              ("volume read I/Os/op", "node_dev_read_ios_per_op"), ("volume write I/Os/op", "node_dev_write_ios_per_op"),
              ("volume read KB/op", "node_dev_read_kb_per_op"), ("volume write KB/op", "node_dev_write_kb_per_op"),
              ("volume read IOPS", "node_group_read_iops"), ("volume read MiB/s", "node_group_read_mib_s"),
              ("volume ms/read", "node_dev_read_ms_per_io"),
              # without a volume: what the node process itself read from the machine's disk
              ("disk read KB/op", "node_disk_read_kb_per_op")]


def format_table(rows: list[dict]) -> str:
    """Metrics down, runs across, then mean / sd / CV: readable whatever the operation types are."""
    ok = [r for r in rows if r["state"] == "COMPLETE"]
    ops: list[str] = []
    for r in ok:
        for op in r["metrics"]["operations"]:
            if op not in ops and op != "CLEANUP":
                ops.append(op)
    lines: list[tuple[str, list[float | None]]] = [
        ("throughput ops/s", [r["metrics"]["summary"]["throughput_ops_s"] if r["state"] == "COMPLETE" else None for r in rows])]
    for op in ops:
        if op.endswith("-MISS"):   # a replay's reads of keys the data lacks: counted apart, not failures
            lines.append((f"{op.lower()} reads", [r["metrics"]["summary"].get(f"{op.lower()}_count")
                                                  if r["state"] == "COMPLETE" else None for r in rows]))
        for stat in ("avg", "p50", "p95", "p99", "p999"):
            lines.append((f"{op.lower()} {stat.replace('p999', 'p99.9')} ms",
                          [r["metrics"]["summary"].get(f"{op.lower()}_{stat}_ms") if r["state"] == "COMPLETE" else None for r in rows]))
    for label, key in _COST_ROWS:
        values = [_summary_value(r["metrics"]["summary"], key) if r["state"] == "COMPLETE" else None for r in rows]
        if any(v is not None for v in values):
            lines.append((label, values))
    lines.append(("errors", [r["metrics"]["errors"] if r["state"] == "COMPLETE" else None for r in rows]))
    for label, key in _TIMING_ROWS:
        values = [(r["timings"] or {}).get(key) for r in rows]
        if any(v is not None for v in values):
            lines.append((label, values))
    header = ["metric"] + [f"run {i + 1}" for i in range(len(rows))] + (["mean", "sd", "cv %"] if len(rows) > 1 else [])
    table = [header]
    for label, values in lines:
        cells = [label] + ["FAIL" if rows[i]["state"] != "COMPLETE" and v is None and not label.endswith(" s")
                           else _fmt(v) for i, v in enumerate(values)]
        if len(rows) > 1:
            st = _stats([v for v in values if v is not None])
            cells += [_fmt(st["mean"]), _fmt(st["sd"]), _fmt(st["cv"] * 100 if st["cv"] is not None else None)]
        table.append(cells)
    out = text_table(table, right=set(range(1, len(header)))).split("\n")
    for r in rows:
        if r["state"] != "COMPLETE":
            out.append(f"trial {r['id']} failed ({r['failure_kind']}): {r['error']}")
        else:
            verdict = of_trial(r)
            if verdict is not None:
                out.append(f"trial {r['id']} {verdict.line()}")
    return "\n".join(out)


def _summary_value(summary: dict, key: str) -> float | None:
    """A summary figure; `..._kb_per_op` is its `..._bytes_per_op` in KB (1,000 bytes)."""
    if key.endswith("_kb_per_op"):
        moved = summary.get(key[:-len("_kb_per_op")] + "_bytes_per_op")
        return None if moved is None else moved / 1000.0
    return summary.get(key)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}"


def cmd_bench(args: argparse.Namespace) -> int:
    settings = trial_settings(args)
    target = trial_target(settings)
    space = target.knob_space(settings)
    overrides = _overrides(args, space, rules_warn=args.force)
    workload, _ = scenario_rate(args, settings, _build_workload(args))
    target.preflight(workload, settings)
    rows = run_trials(args.study, space, overrides, workload, settings, repeat=args.repeat, tag="bench",
                      study_name=args.study_name or "bench", progress=_progress(args))
    complete = [r["metrics"]["summary"] for r in rows if r["state"] == "COMPLETE"]
    if args.json:
        figures = {name: _stats([s[key] for s in complete if s.get(key) is not None])
                   for name, key in (("throughput", "throughput_ops_s"), ("node_cpu_us_per_op", "node_cpu_us_per_op"),
                                     ("node_gc_us_per_op", "node_gc_us_per_op"),
                                     ("client_cpu_us_per_op", "client_cpu_us_per_op"))}
        print(json.dumps({"study": args.study, "workload": workload.to_dict(), "config": overrides,
                          **figures, "trials": rows}, default=str))
    else:
        rate = f", at {workload.target} ops/s" if workload.target else ""
        print(f"scenario {settings.scenario}, workload {workload.name}: {workload.records} records, "
              f"{workload.operations} operations, {workload.threads} threads{rate}; config: {overrides or 'default'}; "
              f"study {args.study}")
        if workload.replay:
            from ..workloads.replay import missed_reads, replay_lines

            print("\n".join(replay_lines(workload)))
        print(format_table(rows))
        for i, row in enumerate(rows, 1):   # reads of keys the data lacks: from another node, or another time?
            said = missed_reads(row["metrics"]) if workload.replay and row["state"] == "COMPLETE" else None
            if said:
                print(f"run {i}: {said}")
    return 0 if all(r["state"] == "COMPLETE" for r in rows) else 1


def add_parsers(sub) -> None:
    p = sub.add_parser("bench", help="benchmark one configuration with repeated cold trials",
                       description="Start the datastore on restored data, warm up, run a YCSB workload, and store "
                                   "each trial. Examples: nosqltune bench --workload ycsb-a --repeat 5; "
                                   "nosqltune bench --system redis --workload ycsb-c --repeat 5")
    _common(p)
    p.set_defaults(func=cmd_bench)
