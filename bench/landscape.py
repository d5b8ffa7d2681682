#!/usr/bin/env python3
"""Where tuning Cassandra 5.0 can pay, per scenario: one-at-a-time screening of the candidate set
(`v5-screen`). Each knob at the low and the high end of its range (each other choice for an enum, the other value
for a switch), plus `latest` (cassandra_latest.yaml), against the default configuration, in --repeat interleaved
cold rounds: round r runs the default and every variant once, in an order that alternates between rounds, so
every variant is paired with a default run of the same round. A knob whose condition the default leaves off is
set together with what it needs (compression_level with Zstd, row_cache_size with row caching on, ...), and
its label says so.

Per variant: the effect on the scenario's objective (throughput, or the read p99 for latency-slo) as the mean of
the per-round ratios to the default, better > 1, with a 95% Student t interval over the rounds; the same for
throughput, read p99, the node's CPU per operation and that CPU relative to the client's (which cancels the
machine's own speed).

A round whose two default runs (its first and its last trial) differ in throughput by more than DRIFT_LIMIT ran
across a change of the machine's speed: its variants' pairs are not comparable, so the round is left out of the
effects and named under its scenario (the rule added on 2026-11-25, after in-memory's round 3 ran that way; its
trials stay in the study and in landscape.json's `rounds_left_out`). Scenarios with one default run per round
(disk-bound, write-heavy) cannot be checked this way.

Study: bench/results/landscape/<scenario>.db (one study per variant). Resumable: a variant's finished rounds are
not run again. Writes bench/results/landscape.{md,json} after every round.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from common import RESULTS, most_common, ROOT, kept_notes, log, nosqltune, counted_rows  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))

from nosqltune.bottleneck import of_trial  # noqa: E402
from nosqltune.evaluation.stats import mean_interval  # noqa: E402
from nosqltune.knobs import load_space  # noqa: E402

FOLDER = RESULTS / "landscape"
DEFAULT_END = "default-end"   # the default's second run of a round (its last trial)
ONE_DEFAULT_PER_ROUND = ("disk-bound", "write-heavy")   # screened before the second default run came in
SCENARIOS = ("disk-bound", "write-heavy", "latency-slo", "in-memory", "cloud-disk", "cloud-slo")
OBJECTIVE = {"latency-slo": ("read_p99_ms", False), "cloud-slo": ("read_p99_ms", False)}   # else throughput, higher
# the knob set screened per scenario (--knobs for the others): on a capped volume, the settings that trade memory
# against I/Os (the cloud scenarios)
SCREENED = {"cloud-disk": "cloud", "cloud-slo": "cloud"}
# stores kept for the report only, never run again: their heading (their variants are the studies they hold)
KEPT = {"cloud-disk-cold": "cloud-disk, cold (2026-11-26, before the scenario started warm; never resumed)"}
# per knob set, a knob whose only effect is through another's variant (the row cache's table switch: the size's
# variant sets it; v5-screen's screening, made before this, ran it alone and keeps its rows)
ONLY_ENABLERS = {"cloud": ("caching_rows_per_partition",)}
# per knob set, the levels screened where the range's ends cannot run: under the cloud scenarios' memory cap a heap
# above the heap + page cache is killed at boot (tune ends the range there too)
LEVELS = {"cloud": {"heap_size": [512, 1280]}}
# two default runs of a steady machine: a throughput CV of at most 5% (the scenarios' calibration) makes their
# difference's standard deviation about 7%; 15% apart is past 2 of those, and 1.20 (in-memory's round 3, whose
# client also spent 23% more CPU per operation at its end: the machine, not Cassandra) is past 3
DRIFT_LIMIT = 0.15
RELATIVE_COST = "node_per_client_cpu"
FIGURES = (("throughput_ops_s", True), ("read_p99_ms", False), ("node_cpu_us_per_op", False), (RELATIVE_COST, False),
           ("node_io_per_op", False))   # the I/Os its own volume served per operation (cloud scenarios)
# what a conditional knob needs beside it to act at all
ENABLERS = {"compression_level": {"compression": "ZstdCompressor"},
            "row_cache_size": {"caching_rows_per_partition": "ALL"},
            "file_cache_size": {"file_cache_enabled": True},
            "ucs_scaling_parameters": {"compaction_method": "UnifiedCompaction"}}


def variants(knob_set: str) -> dict[str, dict]:
    """label -> --set values: each knob at its range's ends (or each other choice), and `latest`."""
    space = load_space("cassandra").subset(knob_set)
    out: dict[str, dict] = {}
    for knob in space:
        if knob.name in ONLY_ENABLERS.get(knob_set, ()):
            continue
        if knob.name in LEVELS.get(knob_set, {}):
            levels = LEVELS[knob_set][knob.name]
        elif knob.type in ("int", "float"):
            levels = [v for v in knob.range if v != knob.default]
        elif knob.type == "bool":
            levels = [not knob.default]
        else:
            levels = [c for c in knob.choices if c != knob.default]
            if len(levels) > 2:   # ordered choices (chunk sizes; UCS from leveled to tiered): their two ends
                levels = [c for c in (knob.choices[0], knob.choices[-1]) if c != knob.default]
        for level in levels:
            setting = {**ENABLERS.get(knob.name, {}), knob.name: level}
            extra = "".join(f", {k}={v}" for k, v in ENABLERS.get(knob.name, {}).items())
            out[f"{knob.name}={level}{extra}"] = setting
    out["latest"] = {}
    return out


def args_of(label: str, setting: dict) -> list[str]:
    """The flags of a variant; --force: the set's ranges (e.g. concurrent_reads over 2-128) reach beyond the
    knobs' base tuning ranges (Cassandra's own bounds still hold)."""
    if label == "latest":
        return ["--config", "latest"]
    return ["--force", *[a for k, v in setting.items()
                         for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]]


def rows(scenario: str, label: str) -> list[dict]:
    return counted_rows(FOLDER / f"{scenario}.db", label)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--knobs", default="v5-screen")
    p.add_argument("--write-only", action="store_true",
                   help="run nothing: write landscape.md/json from the trials stored so far")
    a = p.parse_args()
    FOLDER.mkdir(parents=True, exist_ok=True)
    scenarios = [s for s in a.scenarios.split(",") if s]
    plans = {s: variants(SCREENED.get(s, a.knobs)) for s in SCENARIOS}
    if a.write_only:
        write(plans, a.repeat)
        return 0
    for scenario in scenarios:
        plan = plans[scenario]
        labels = ["default", *plan]
        # scenarios screened since 2026-11-24 22:30 run the default at both ends of every round (their mean is
        # what a round's variants are paired with: one slow default run no longer shifts a whole round)
        two = scenario not in ONE_DEFAULT_PER_ROUND
        planned = [*labels, DEFAULT_END] if two else labels
        for round_ in range(a.repeat):
            order = planned if round_ % 2 == 0 else list(reversed(planned))
            for label in order:
                if len(rows(scenario, label)) > round_:
                    continue
                log(f"{scenario} round {round_ + 1}/{a.repeat}: {label}")
                nosqltune("bench", "--scenario", scenario, "--repeat", "1", *args_of(label, plan.get(label, {})),
                          "--study", str(FOLDER / f"{scenario}.db"), "--study-name", label, "--json", ok=(0, 1))
            write(plans, a.repeat)
    return 0


def _ratios(variant: list[dict], default: list[dict], key: str, higher_better: bool) -> list[float]:
    """Per-round ratio to the default's run of the same round, > 1 better (a failed side drops the round)."""
    out = []
    for v, d in zip(variant, default):
        x = (v or {}).get(key) if v else None
        y = (d or {}).get(key) if d else None
        if x and y:
            out.append(x / y if higher_better else y / x)
    return out


def _by_round(found: list[dict], rounds: int) -> list[dict | None]:
    return [(_with_relative_cost(found[r]["metrics"].get("summary"))
             if r < len(found) and found[r]["state"] == "COMPLETE" else None) for r in range(rounds)]


def _with_relative_cost(summary: dict | None) -> dict | None:
    """The run's figures with the node's CPU per operation relative to the client's: the YCSB client does the same
    work per operation whatever the node's configuration, so the ratio cancels the machine's own speed (which moved
    the client's CPU per operation from 52 to 85 us within minutes on 2026-11-25) and keeps the node's cost."""
    if not summary:
        return summary
    node, client = summary.get("node_cpu_us_per_op"), summary.get("client_cpu_us_per_op")
    return {**summary, RELATIVE_COST: node / client} if node and client else summary


def _defaults(scenario: str, rounds: int) -> tuple[list[dict | None], list[dict]]:
    """Per round, the default's figures: the mean of its two runs (the round's first and last) where both ran,
    else the one that did; None for a round left out because its two runs' throughputs differ by more than
    DRIFT_LIMIT (those rounds are the second list)."""
    out, left_out = [], []
    for number, (first, last) in enumerate(zip(_by_round(rows(scenario, "default"), rounds),
                                               _by_round(rows(scenario, DEFAULT_END), rounds)), start=1):
        runs = [r for r in (first, last) if r]
        speeds = [r.get("throughput_ops_s") for r in runs]
        if len(runs) == 2 and all(speeds) and max(speeds) / min(speeds) - 1 > DRIFT_LIMIT:
            left_out.append({"round": number, "first_ops_s": speeds[0], "last_ops_s": speeds[1]})
            out.append(None)
            continue
        keys = {k for r in runs for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        out.append({k: statistics.mean(r[k] for r in runs if r.get(k) is not None) for k in keys
                    if any(r.get(k) is not None for r in runs)} if runs else None)
    return out, left_out


def summarize(scenario: str, labels: list[str], rounds: int) -> dict:
    objective, higher = OBJECTIVE.get(scenario, ("throughput_ops_s", True))
    rounds = max(rounds, len(rows(scenario, "default")))   # a scenario given more rounds (in-memory: 4) keeps them
    default, left_out = _defaults(scenario, rounds)
    out = {"objective": objective, "higher_is_better": higher, "variants": {},
           "default_runs_per_round": 2 if rows(scenario, DEFAULT_END) else 1, "rounds_left_out": left_out}
    for label in labels:
        found = rows(scenario, label) + (rows(scenario, DEFAULT_END) if label == "default" else [])
        # a variant's run counts only in a round whose default counts (a round left out is left out whole)
        runs = default if label == "default" else [r if d is not None else None
                                                   for r, d in zip(_by_round(found, rounds), default)]
        failed = [r for r in found if r["state"] not in ("COMPLETE", "RUNNING")]   # (RUNNING: under way)
        entry = {"rounds": sum(r is not None for r in runs), "failed": len(failed),
                 "errors": [r["error"] for r in failed][:2],
                 "limited_by": most_common([getattr(of_trial(r), "limit", None) for r in found
                                             if r["state"] == "COMPLETE"])}
        for key, better in ((objective, higher), *FIGURES):
            values = [r[key] for r in runs if r and r.get(key) is not None]
            entry[f"{key}_mean"] = statistics.mean(values) if values else None
            if label != "default":
                ratios = _ratios(runs, default, key, better)
                interval = mean_interval(ratios)
                entry[f"{key}_effect"] = statistics.mean(ratios) if ratios else None
                entry[f"{key}_interval"] = list(interval) if interval else None
        out["variants"][label] = entry
    return out


def write(plans: dict[str, dict[str, dict]], rounds: int) -> None:
    """landscape.{md,json} of every scenario with a study (`plans`: each scenario's variants); the hand-written
    notes between the markers of the current landscape.md are kept."""
    plans = {**plans, **{s: _stored_variants(s) for s in KEPT if (FOLDER / f"{s}.db").exists()}}
    results = {s: summarize(s, ["default", *plans[s]], rounds) for s in (*SCENARIOS, *KEPT)
               if (FOLDER / f"{s}.db").exists()}
    labels = list(dict.fromkeys(label for s in results for label in ["default", *plans[s]]))
    (RESULTS / "landscape.json").write_text(json.dumps(results, indent=1))
    md = ["# Where tuning 5.0 can pay: one knob at a time, per scenario", "",
          "Generated by `bench/landscape.py`: every knob of `v5-screen` (`cloud` in the cloud scenarios) at the "
          "ends of its range (each other "
          "choice of an enum), and `latest` (cassandra_latest.yaml), against the default, in interleaved cold "
          "rounds on this machine (2 cores shared by node and client). Effect = mean over the rounds of the "
          "variant's ratio to the default's run of the same round, > 1 is better (for latencies: default / "
          "variant); the interval is Student's t at 95% over the rounds. An interval that holds 1 shows no "
          "effect within this many rounds. node/client CPU: the node's CPU per operation relative to the YCSB "
          "client's, as an effect (> 1: the node spends less per operation than with the default): the client's "
          "work per operation does not depend on the node's configuration, so the ratio cancels the machine's own "
          "speed, which moves throughput and both CPU figures alike. I/Os per op (cloud scenarios): the I/Os the "
          "node's own volume served per operation, as an effect (> 1: fewer); limited by: the variant's most "
          "common bottleneck verdict (nosqltune/bottleneck).", ""]
    md += kept_notes(RESULTS / "landscape.md", Path(__file__).name)

    def f(v, digits=3):
        return "-" if v is None else f"{v:.{digits}f}"

    def span(interval):
        return f" [{f(interval[0])}, {f(interval[1])}]" if interval else ""

    for scenario, result in results.items():
        obj = result["objective"]
        default = result["variants"]["default"]
        pairs = ("the mean of its two runs per round (first and last)" if result["default_runs_per_round"] == 2
                 else "one run per round")
        md += [f"## {KEPT.get(scenario, scenario)}", "",
               f"Objective {obj}; default ({pairs}): {f(default[f'{obj}_mean'], 2)} over {default['rounds']} rounds "
               f"(throughput {f(default['throughput_ops_s_mean'], 0)} ops/s, read p99 "
               f"{f(default['read_p99_ms_mean'], 2)} ms, node CPU {f(default['node_cpu_us_per_op_mean'], 1)} us/op).",
               *[f"Round {r['round']} left out: its default ran at {r['first_ops_s']:,.0f} ops/s first and "
                 f"{r['last_ops_s']:,.0f} last, more than {DRIFT_LIMIT:.0%} apart (the machine's speed changed "
                 "within the round; its trials stay in the study)." for r in result["rounds_left_out"]],
               "", "| variant | rounds | effect on objective [95%] | throughput | read p99 | node CPU/op | "
               "node/client CPU [95%] | I/Os per op | limited by |", "|---|---|---|---|---|---|---|---|---|"]
        ranked = sorted((l for l in labels if l != "default" and l in result["variants"]),
                        key=lambda l: -(result["variants"][l][f"{obj}_effect"] or 0))
        for label in ranked:
            v = result["variants"][label]
            failed = f" ({v['failed']} failed)" if v["failed"] else ""
            md.append(f"| {label} | {v['rounds']}{failed} | x{f(v[f'{obj}_effect'])}{span(v[f'{obj}_interval'])} | "
                      f"x{f(v['throughput_ops_s_effect'])} | x{f(v['read_p99_ms_effect'])} | "
                      f"x{f(v['node_cpu_us_per_op_effect'])} | "
                      f"x{f(v[f'{RELATIVE_COST}_effect'])}{span(v[f'{RELATIVE_COST}_interval'])} | "
                      f"{f(v['node_io_per_op_mean'], 2)} (x{f(v['node_io_per_op_effect'])}) | {v['limited_by'] or '-'} |")
        errors = {l: v["errors"] for l, v in result["variants"].items() if v["errors"]}
        if errors:
            md += ["", "Failed runs (first reasons):", ""]
            md += [f"- {l}: {'; '.join((e or '?')[:200] for e in errs)}" for l, errs in errors.items()]
        md.append("")
    md += knob_ranking(results, plan_knobs(labels))
    (RESULTS / "landscape.md").write_text("\n".join(md))
    log(f"wrote {RESULTS / 'landscape.md'}")


def _stored_variants(store: str) -> dict[str, dict]:
    """The variants a kept store holds: its studies but the default's two."""
    import sqlite3

    with sqlite3.connect(f"file:{FOLDER / f'{store}.db'}?mode=ro", uri=True) as db:
        names = [name for (name,) in db.execute("SELECT name FROM studies ORDER BY id")]
    return {name: {} for name in names if name not in ("default", DEFAULT_END)}


def plan_knobs(labels: list[str]) -> dict[str, list[str]]:
    """knob -> the labels of its variants (a label starts with the knob's own setting; `latest` is its own)."""
    out: dict[str, list[str]] = {}
    for label in labels:
        if label != "default":
            out.setdefault(label.split("=")[0], []).append(label)
    return out


def knob_ranking(results: dict, knobs: dict[str, list[str]]) -> list[str]:
    """Which knobs move the objective, over every scenario screened: per knob, its variant farthest from the
    default in each scenario (as |ln effect|), and whether that variant's interval excludes 1. Knobs are ranked
    by their largest such move over the scenarios; a knob that moves nothing anywhere is not worth searching."""
    scenarios = [s for s, r in results.items() if r["variants"].get("default", {}).get("rounds")]
    if not scenarios:
        return []
    rows = []
    for knob, labels in knobs.items():
        cells, score = [], 0.0
        for s in scenarios:
            obj = results[s]["objective"]
            found = [(label, results[s]["variants"][label]) for label in labels if label in results[s]["variants"]]
            found = [(label, v) for label, v in found if v.get(f"{obj}_effect")]
            if not found:
                cells.append("-")
                continue
            label, v = max(found, key=lambda lv: abs(math.log(lv[1][f"{obj}_effect"])))
            effect, interval = v[f"{obj}_effect"], v[f"{obj}_interval"]
            clear = interval is not None and (interval[0] > 1 or interval[1] < 1)
            score = max(score, abs(math.log(effect)))
            level = label.split(",")[0].split("=", 1)[1] if "=" in label else ""
            cells.append(f"{'**' if clear else ''}x{effect:.2f}{'**' if clear else ''}"
                         f"{f' ({level})' if level else ''}")
        rows.append((score, knob, cells))
    rows.sort(key=lambda r: -r[0])
    md = ["## Which knobs move the objective", "",
          "Per knob and scenario: its variant farthest from the default (effect on the scenario's objective, > 1 "
          "better; the level in brackets), in bold where the 95% interval excludes 1. Ranked by the largest move "
          "in any scenario, in either direction: a knob that can cost x0.8 at one end is one the search can move, "
          "and a knob that moves nothing anywhere only widens the search.", "",
          f"| rank | knob | {' | '.join(scenarios)} |", "|---|---|" + "---|" * len(scenarios)]
    md += [f"| {i} | {knob} | {' | '.join(cells)} |" for i, (_, knob, cells) in enumerate(rows, 1)]
    return md + [""]


if __name__ == "__main__":
    sys.exit(main())
