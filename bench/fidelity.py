#!/usr/bin/env python3
"""Do the gains found with C1-compiled JVMs hold with production's tiered JIT? The committed bests of cloud-disk
(GP, bench/results/strategies_v5/cloud-disk-real.db), disk-bound and write-heavy (SMAC, bench/results/impact/) against
the default, C1 against tiered, in rounds that alternate the two JITs (round k of C1, then round k of tiered), then
bench/results/fidelity.md.

The runs of both JITs warm up to their JIT's plateau by time, not by operations: C1 for 30 s (its plateau comes
within about 10 s, warmup_curve-c1.md), tiered for 150 s (disk-bound's tiered curves after a cold boot,
warmup_curve-disk-bound.md: the default climbs until about 120 s on a slow day, then holds), both JITs' rounds run
anew side by side. Each run's measured phase is split in thirds: a run still on the JIT's slope shows its last third
faster than its first. Earlier rounds stay in the stores and on the page: C1 20 s and tiered 60 s by time (2026-11-28,
`x1-warm20s`, `x1-tiered`; 60 s was not the plateau on the core-bound scenarios), and compare's adaptive rule with
its first floor (`x1-tiered-plateau`, at least 60 s then two 20 s windows within 5%), whose first 2 rounds on
disk-bound ended a default's warm-up at 64 s, halfway up its climb. The verdicts use the earlier rounds until all of
this run's have run.

A verdict changes when the C1 gain's 95% interval excludes 1 and the tiered one does not, or when the two gains
differ by more than 15%. Needs root (the scenarios' memory cgroups and capped volumes); nothing else may run beside
it. Resumable: every compare continues its rounds. About 6 minutes per round and scenario on a fast day.

    python3 bench/fidelity.py [--rounds 10] [--scenarios cloud-disk,disk-bound,write-heavy]
    python3 bench/fidelity.py --write-only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from common import RESULTS, compare, counted_rows, kept_notes, log, machines, study_settings  # bench/common.py

STUDIES = {"cloud-disk": (RESULTS / "strategies_v5" / "cloud-disk-real.db", "gp"),
           "disk-bound": (RESULTS / "impact" / "disk-bound.db", "smac"),
           "write-heavy": (RESULTS / "impact" / "write-heavy.db", "smac")}
C1_WARMUP_S = 30
TIERED_WARMUP_S = 150
JITS = {"c1": ["--jit", "c1", "--warmup-seconds", str(C1_WARMUP_S)],
        "tiered": ["--jit", "tiered", "--warmup-seconds", str(TIERED_WARMUP_S)]}
# the comparisons' keys in the study: these rounds', then the earlier ones' (C1 20 s, tiered 60 s by time, which was
# not the plateau), then compare's adaptive rule's 2 rounds on disk-bound (stopped: it ended a warm-up at 64 s)
KEYS = {"c1": f"x1-warm{C1_WARMUP_S}s", "tiered": f"x1-tiered-warm{TIERED_WARMUP_S}s"}
EARLIER = {"c1": "x1-warm20s", "tiered": "x1-tiered"}
WARMUP_S = {"c1": C1_WARMUP_S, "tiered": TIERED_WARMUP_S}   # each JIT's warm-up, these rounds' and the earlier ones'
EARLIER_WARMUP_S = {"c1": 20, "tiered": 60}
ADAPTIVE = "x1-tiered-plateau"
GAP = 0.15   # gains further apart than this change the verdict


def run(scenarios: list[str], rounds: int) -> None:
    for scenario in scenarios:
        db, study = STUDIES[scenario]
        for n in range(2, rounds + 1):   # round n of both JITs before round n + 1 of either (compare takes 2 at least)
            for jit, flags in JITS.items():
                log(f"{scenario}: {jit}, round {n} of {rounds}")
                compare("--study", str(db), "--study-name", study, "--candidates", "best", "--repeat", str(n), *flags)


def _stats(comparison: dict | None) -> dict | None:
    if not comparison:
        return None
    (workload,) = comparison["workloads"].values()
    return {**workload["stats"]["best"], "group": workload["group"],
            "cpu": ((workload.get("also") or {}).get("cpu-per-op") or {}).get("stats", {}).get("best")}


def mean_of(values: list[float]) -> float | None:
    values = [v for v in values if v]
    return statistics.mean(values) if values else None


def verdict(c1: dict, tiered: dict) -> tuple[bool, str]:
    """(changed, why): the rule of the production-shape work."""
    def significant(s):
        return s["ci_low"] is not None and (s["ci_low"] > 1 or s["ci_high"] < 1)

    gap = abs(tiered["mean_speedup"] / c1["mean_speedup"] - 1)
    if significant(c1) and not significant(tiered):
        return True, "C1's interval excludes 1, tiered's does not"
    if gap > GAP:
        return True, f"the gains differ by {gap:.0%}"
    return False, f"the gains differ by {gap:.0%}"


def mechanism(db: Path, study: str, group: str) -> list[dict]:
    rows = [r for r in counted_rows(db, study) if r["tag"] == "compare" and r["state"] == "COMPLETE"
            and r["meta"].get("group") == group]
    out = []
    for candidate in ("default", "best"):
        runs = [r for r in rows if r["meta"]["candidate"] == candidate]
        if not runs:
            continue

        def mean(key):
            values = [r["metrics"]["summary"].get(key) for r in runs if r["metrics"]["summary"].get(key) is not None]
            return statistics.mean(values) if values else float("nan")

        slopes = []   # last third of the measured phase over its first
        for r in runs:
            series = r["metrics"].get("intervals_ops_s") or []
            third = len(series) // 3
            if third >= 2 and statistics.mean(series[:third]) > 0:
                slopes.append(statistics.mean(series[-third:]) / statistics.mean(series[:third]))
        limits = [((r["internals"] or {}).get("bottleneck") or {}).get("limit") for r in runs]
        limits = [x for x in limits if x]

        def internal(get):   # the mean of a figure of the runs' node internals, None where none has it
            values = [v for v in (get(r["internals"] or {}) for r in runs) if v is not None]
            return statistics.mean(values) if values else None

        out.append({"candidate": candidate, "runs": len(runs), "ops_s": mean("throughput_ops_s"),
                    "node_cpu_us": mean("node_cpu_us_per_op"), "io_per_op": mean("node_io_per_op"),
                    "slope": statistics.mean(slopes) if slopes else None,
                    "warmup_s": mean_of([((r["metrics"].get("warmup") or {}).get("runtime_ms") or 0) / 1e3
                                               for r in runs]),
                    "anon_mb": internal(lambda i: ((i.get("memory_cgroup") or {}).get("node1") or {}).get("anon")),
                    "in_memory": internal(lambda i: (((i.get("bottleneck") or {}).get("utilisation") or {})
                                                     .get("data_in_memory"))),
                    "limit": max(set(limits), key=limits.count) if limits else "-"})
    return out


def write(rounds: int = 10) -> None:
    path = RESULTS / "fidelity.md"
    lines = ["# Do C1-tuned gains hold with the tiered JIT? Committed bests against the default, C1 and tiered", "",
             "Generated by `python3 bench/fidelity.py`: for each study, `nosqltune compare --study DB --study-name S "
             f"--candidates best --jit c1 --warmup-seconds {C1_WARMUP_S}` and `... --jit tiered --warmup-seconds "
             f"{TIERED_WARMUP_S}` (the tiered JIT's plateau, warmup_curve-disk-bound.md), their rounds alternating "
             "(round k of each JIT before round k + 1 of either); "
             "each run cold. A verdict changes when the C1 gain's 95% interval excludes 1 and the tiered one's does "
             f"not, or when the gains differ by more than {GAP:.0%}.", ""]
    lines += kept_notes(path, Path(__file__).name)
    table, mech_lines, out = [], [], {}
    for scenario, (db, study) in STUDIES.items():
        comparisons = (study_settings(db, study) or {}).get("compare") or {}
        now = {jit: _stats(comparisons.get(key)) for jit, key in KEYS.items()}
        before = {jit: _stats(comparisons.get(key)) for jit, key in EARLIER.items()}
        # these rounds count once all of them have run (a bench stopped midway has fewer; a failed run is a round
        # run, its pair left out of the statistics): until then the earlier rounds, said as such, or where there are
        # none the rounds so far
        ran = [(comparisons.get(key) or {}).get("runs", 0) // 2 for key in KEYS.values()]   # a default and a best
        done = min(ran)
        complete = done >= rounds or not all(before.values())
        got = now if complete else before
        if not all(got.values()):
            continue
        c1, tiered = got["c1"], got["tiered"]
        changed, why = verdict(c1, tiered)
        warmups = WARMUP_S if complete else EARLIER_WARMUP_S
        out[scenario] = {"c1": c1, "tiered": tiered, "changed": changed, "why": why,
                         "warmups": f"C1 {warmups['c1']} s, tiered {warmups['tiered']} s"}

        def cell(s):
            return (f"x{s['mean_speedup']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}], p = {s['p_value']:.3g}"
                    if s["ci_low"] is not None else f"x{s['mean_speedup']:.3f}")

        so_far = (f"; the {TIERED_WARMUP_S} s rounds: {done} so far" if done else "")
        warm = (f" ({done} of {rounds} rounds so far)" if done < rounds else "") if complete else \
            f" ({EARLIER_WARMUP_S['tiered']} s warm-up, not the plateau{so_far})"
        table.append(f"| {scenario} ({study}) | {cell(c1)} | {cell(tiered)}{warm} | "
                     f"{min(c1['pairs'], tiered['pairs'])} "
                     f"| {'**changed**' if changed else 'kept'}: {why} |")
        groups = {f"{jit}, {WARMUP_S[jit]} s": s["group"] for jit, s in now.items() if s}
        groups.update({f"{jit}, {EARLIER_WARMUP_S[jit]} s (earlier)": s["group"] for jit, s in before.items() if s})
        if comparisons.get(ADAPTIVE):   # the adaptive rule's rounds with its first floor, stopped
            groups["tiered, adaptive rule (60 s floor)"] = _stats(comparisons[ADAPTIVE])["group"]
        for jit, group in groups.items():
            for m in mechanism(db, study, group):
                slope = f"{m['slope']:.2f}" if m["slope"] is not None else "-"
                anon = f"{m['anon_mb'] / 1e6:,.0f}" if m["anon_mb"] is not None else "-"
                held = f"{m['in_memory']:.0%}" if m["in_memory"] is not None else "-"
                io = f"{m['io_per_op']:.2f}" if m["io_per_op"] == m["io_per_op"] else "-"   # no volume: no count
                warmed = f"{m['warmup_s']:.0f}" if m["warmup_s"] is not None else "-"
                mech_lines.append(f"| {scenario} | {jit} | {m['candidate']} | {m['runs']} | {m['ops_s']:,.0f} | "
                                  f"{m['node_cpu_us']:.0f} | {io} | {anon} | {held} | {warmed} | {slope} | "
                                  f"{m['limit']} |")
    if not table:
        path.write_text("\n".join(lines + ["Not run yet."]) + "\n")
        return
    lines += [f"**Machines**: {machines({k: v for k, v in STUDIES.items() if k in out}).line()}.", "",
              "| study | C1: best vs default (mean, 95% interval) | tiered | rounds | verdict |", "|---|---|---|---|---|",
              *table, "",
              "The mechanism (means over each candidate's runs; last/first third: the throughput of the measured "
              "phase's last third over its first, above 1 while the JIT is still climbing; the node's anonymous memory "
              "(heap, code, compiler arenas) and the share of its data in the page cache, both in its memory cgroup):",
              "",
              "| study | JIT | candidate | runs | ops/s | node CPU us/op | I/Os per op | node's anonymous MB | data in "
              "memory | warm-up s | last/first third | limited by |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|", *mech_lines]
    path.write_text("\n".join(lines) + "\n")
    (RESULTS / "fidelity.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    log(f"wrote {path}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--scenarios", default=",".join(STUDIES))
    p.add_argument("--write-only", action="store_true")
    a = p.parse_args()
    scenarios = [s.strip() for s in a.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in STUDIES]
    if unknown:
        p.error(f"unknown scenario {unknown[0]!r}: one of {', '.join(STUDIES)}")
    if not a.write_only:
        for scenario in scenarios:
            run([scenario], a.rounds)
            write(a.rounds)   # the figures so far, after each scenario
    write(a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
