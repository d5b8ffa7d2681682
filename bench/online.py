#!/usr/bin/env python3
"""Online re-tuning on the shifting trace against static configurations (issue 39, item 3).

Every part runs on the same setup: a local cluster of 2 nodes with replication factor 2 (1 GiB heaps), 100,000
records, the knob set `online12` (what `online` can change: live over JMX or ALTER TABLE, or by a rolling
restart; nothing that shapes the SSTables, which it cannot rewrite). Each part is resumable (what is stored is
kept) and rewrites bench/results/online.{md,json}; stores and models live in bench/results/online/.

  collect  the model: `collect --workload ycsb-b,write90,ycsb-e` (the trace's three mixes) with --configs
           configurations and 2 noise repeats of the default per mix into online/train.db, then `model fit --kind rf
           --domain TD3` (one design: 2 nodes, RF 2; workload features with the scan ratio).
  ceiling  what switching per phase could gain at most: per phase, the model's best configuration for that phase's
           mix and its best for the trace's average mix, with the default, on the phase's workload in --rounds
           interleaved cold rounds of `bench` (online/ceiling.db, one study per phase and configuration).
  trace    --repeats interleaved repeats of the shipped trace at full speed, each on a fresh cluster, every arm
           with 20 s windows and 60 s of dwell (LOOP, below): the static default (`online --nodes 2 --dry-run`), the
           static best for the average mix (the same with --config) and `online` re-tuning; per run the operations
           per phase and over the trace, the read p99 per phase, the failed operations and every decision
           (online/trace.db: one online study per run; online/runs.json names them).
  write    the results files and the figure (online.png: throughput over the trace, mean of the repeats per
           window, one line per arm) from what is stored.

  python3 bench/online.py plan                      # the machine time of each part, nothing run
  python3 bench/online.py collect [--configs 24]
  python3 bench/online.py ceiling [--rounds 6]
  python3 bench/online.py trace [--repeats 8]
  python3 bench/online.py write

Hours of cold trials and trace runs: nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from common import RESULTS, ROOT, kept_notes, log, nosqltune, paired, counted_rows  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))

FOLDER = RESULTS / "online"
TRAIN = FOLDER / "train.db"
MODEL = FOLDER / "train.throughput.rf.model"
CEILING = FOLDER / "ceiling.db"
TRACE_DB = FOLDER / "trace.db"
RUNS = FOLDER / "runs.json"   # runs-set-aside.json beside it: runs of a loop since changed, kept for the record
AVERAGE = FOLDER / "average.properties"     # the trace's average mix, as a YCSB workload file
PHASES = {"read-heavy": "ycsb-b", "write-heavy": "write90", "scan-heavy": "ycsb-e"}   # the shipped trace's
HEAP = ["--heap", "1G"]   # left out where a configuration brings its own heap_size (`online` takes one, not both)
CLUSTER = ["--nodes", "2", "--rf", "2", *HEAP]
RECORDS = "100000"
ARMS = ("static-default", "static-average", "online")
# the loop's windows for every arm of `trace`: with online's defaults (60 s windows, 3 to confirm a shift, 180 s of
# dwell after a change) a mix must last 3 minutes before online acts, the whole of a phase of the shipped trace
# (measured: in a first repeat with them, online-20261128-011910, no shift was declared before the trace's last
# window). 20 s windows and 60 s of dwell let it act a minute into each phase.
WINDOW_S = 20
LOOP = ["--window", str(WINDOW_S), "--confirm", "3", "--min-dwell", "60"]
# seconds per part's unit, estimates for `plan` until this benchmark has measured its own: a cold 2-node
# collect/bench trial (restore, boot of 2 nodes, warm-up, 100K operations; the 2-node trials of
# bench/results/cluster/designs.db took a median 48 s besides their builds on smaller runs) and one run of the
# shipped trace (start 2 nodes, load 100K records, 540 s of trace, stop)
TRIAL_S, TRACE_RUN_S = 110, 700


def best_config(workload: str, out: Path) -> Path:
    """The model's best configuration for a workload (name or properties file), as a --config file (knob: value;
    the online12 ranges reach outside the knob file's, so `bench` takes it with --force)."""
    import yaml

    if not out.exists():
        answer = json.loads(nosqltune("recommend", "--model", str(MODEL), "--workload", workload, "--format", "json"))
        out.write_text(f"# nosqltune recommend for {workload}: predicted {answer['predicted']:.0f} ops/s against "
                       f"{answer['predicted_default']:.0f} for the default\n"
                       + yaml.safe_dump(answer["config"], sort_keys=True))
    return out


def average_mix() -> Path:
    """The trace's three mixes averaged, operation shares weighted equally (each phase lasts as long)."""
    from nosqltune.workloads.spec import make_workload

    keys = ("readproportion", "updateproportion", "insertproportion", "scanproportion", "readmodifywriteproportion")
    mixes = [make_workload(name).mix for name in PHASES.values()]
    mean = {k: sum(float(m.get(k, 0) or 0) for m in mixes) / len(mixes) for k in keys}
    lines = ["# the shifting trace's average mix (bench/online.py)", "workload=site.ycsb.workloads.CoreWorkload",
             "requestdistribution=zipfian", "maxscanlength=100"]
    lines += [f"{k}={v:.6f}" for k, v in mean.items()]
    AVERAGE.write_text("\n".join(lines) + "\n")
    return AVERAGE


# ------------------------------------------------------------------------------------------------ parts
def run_collect(configs: int) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    nosqltune("collect", *CLUSTER, "--workload", ",".join(PHASES.values()), "--records", RECORDS, "--knobs",
              "online12", "--configs", str(configs), "--noise-repeats", "2", "--study", str(TRAIN), "--json",
              ok=(0, 1))
    nosqltune("model", "fit", "--study", str(TRAIN), "--kind", "rf", "--domain", "TD3", "--nodes", "2", "--rf", "2",
              "--out", str(MODEL), "--json")


def ceiling_configs() -> dict[str, Path | None]:
    configs = {"default": None, "average": best_config(str(average_mix()), FOLDER / "best-average.yaml")}
    for phase, workload in PHASES.items():
        configs[phase] = best_config(workload, FOLDER / f"best-{phase}.yaml")
    return configs


def run_ceiling(rounds: int) -> None:
    if not MODEL.exists():
        raise SystemExit("online: no model yet: run `python3 bench/online.py collect` first")
    configs = ceiling_configs()
    for round_ in range(rounds):
        for phase, workload in PHASES.items():
            arms = ["default", "average", phase]
            for arm in arms if round_ % 2 == 0 else list(reversed(arms)):
                name = f"{phase}:{arm}"
                if len(counted_rows(CEILING, name)) > round_:
                    continue
                log(f"ceiling round {round_ + 1}/{rounds}: {phase} with {arm}")
                config = ["--config", str(configs[arm]), "--force"] if configs[arm] else []
                nosqltune("bench", *CLUSTER, "--workload", workload, "--records", RECORDS, "--repeat", "1", *config,
                          "--study", str(CEILING), "--study-name", name, "--json", ok=(0, 1))
        write()


def _runs() -> list[dict]:
    return json.loads(RUNS.read_text()) if RUNS.exists() else []


def run_trace(repeats: int) -> None:
    if not MODEL.exists():
        raise SystemExit("online: no model yet: run `python3 bench/online.py collect` first")
    average = ceiling_configs()["average"]
    flags = {"static-default": ["--dry-run"], "static-average": ["--dry-run", "--config", str(average)],
             "online": []}
    for repeat in range(repeats):
        order = list(ARMS) if repeat % 2 == 0 else list(reversed(ARMS))
        for arm in order:
            if any(r["arm"] == arm and r["repeat"] == repeat for r in _runs()):
                continue
            log(f"trace repeat {repeat + 1}/{repeats}: {arm}")
            cluster = CLUSTER[:-len(HEAP)] if arm == "static-average" else CLUSTER
            out = nosqltune("online", *cluster, "--trace", "shifting", "--records", RECORDS, "--model", str(MODEL),
                            "--study", str(TRACE_DB), *LOOP, *flags[arm], "--json", ok=(0, 1))
            summary = json.loads(out)
            RUNS.write_text(json.dumps(_runs() + [{"arm": arm, "repeat": repeat, "study": summary["study"],
                                                   "summary": summary}], indent=1))
        write()


# ------------------------------------------------------------------------------------------------ write
def _phase_totals(summary: dict) -> dict[str, dict]:
    """Per phase of one run: operations (throughput x seconds), read p99 and failed operations."""
    out = {}
    for row in summary.get("trace") or []:
        out[row["phase"]] = {"operations": (row["throughput_ops_s"] or 0) * row["seconds"],
                             "read_p99_ms": row.get("read_p99_ms"), "errors": row.get("errors") or 0}
    return out


def _trace_table(runs: list[dict]) -> tuple[list[str], dict]:
    per_arm: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    for run in sorted(runs, key=lambda r: r["repeat"]):
        per_arm[run["arm"]].append(run)
    totals = {arm: [sum(p["operations"] for p in _phase_totals(r["summary"]).values()) for r in rows]
              for arm, rows in per_arm.items()}
    lines = ["## The shifting trace at full speed (`trace`)", "",
             "| arm | runs | operations over the trace (mean) | " + " | ".join(f"{p} ops/s, read p99" for p in PHASES)
             + " | failed operations | restarts | live changes kept |",
             "|---|---|---|" + "---|" * len(PHASES) + "---|---|---|"]
    for arm, rows in per_arm.items():
        if not rows:
            continue
        cells = []
        for phase in PHASES:
            got = [row for r in rows for row in r["summary"].get("trace") or [] if row["phase"] == phase]
            ops = [row["throughput_ops_s"] for row in got if row.get("throughput_ops_s") is not None]
            p99 = [row["read_p99_ms"] for row in got if row.get("read_p99_ms") is not None]
            cells.append((f"{statistics.mean(ops):,.0f}" if ops else "-")
                         + (f", {statistics.mean(p99):.1f} ms" if p99 else ""))
        failed = sum(sum(p["errors"] for p in _phase_totals(r["summary"]).values()) for r in rows)
        lines.append(f"| {arm} | {len(rows)} | {statistics.mean(totals[arm]):,.0f} | " + " | ".join(cells)
                     + f" | {failed} | {sum(r['summary']['restarts'] for r in rows)} | "
                     f"{sum(r['summary']['live_kept'] for r in rows)} |")
    stats = {}
    for static in ("static-default", "static-average"):
        pairs = {r["repeat"]: r for r in per_arm[static]}
        mine = [r for r in per_arm["online"] if r["repeat"] in pairs]
        a = [sum(p["operations"] for p in _phase_totals(r["summary"]).values()) for r in mine]
        b = [sum(p["operations"] for p in _phase_totals(pairs[r["repeat"]]["summary"]).values()) for r in mine]
        stats[static] = paired(a, b, maximize=True)
        s = stats[static]
        if s["mean_ratio"] is not None:
            lines.append("")
            lines.append(f"online against {static}: x{s['mean_ratio']:.3f} operations over the trace, Wilcoxon "
                         f"p = {s['p']:.3f} over {s['rounds']} paired repeats")
    return lines, {"totals": totals, "stats": stats}


def _ceiling_table() -> tuple[list[str], dict]:
    lines = ["## The ceiling: the best static configuration per phase against the best for the average mix "
             "(`ceiling`)", "", "| phase | default ops/s | best for the average mix | best for the phase | "
             "phase's best against the average's |", "|---|---|---|---|---|"]
    out = {}
    for phase in PHASES:
        got = {arm: [r["metrics"].get("throughput_ops_s") if r["state"] == "COMPLETE" else None
                     for r in counted_rows(CEILING, f"{phase}:{arm}")] for arm in ("default", "average", phase)}
        if not any(got.values()):
            continue
        means = {arm: statistics.mean([v for v in vs if v]) if any(vs) else None for arm, vs in got.items()}
        s = paired(got[phase], got["average"], maximize=True)
        out[phase] = {"runs": got, "means": means, "phase_vs_average": s}
        cell = f"x{s['mean_ratio']:.3f}, p = {s['p']:.3f} ({s['rounds']} rounds)" if s["mean_ratio"] else "-"
        lines.append(f"| {phase} | " + " | ".join(f"{means[a]:,.0f}" if means[a] else "-"
                                                  for a in ("default", "average", phase)) + f" | {cell} |")
    return lines, out


def _figure(runs: list[dict]) -> str | None:
    """Throughput per window over the trace, the mean of each arm's repeats; None when there is nothing."""
    import sqlite3

    if not runs or not TRACE_DB.exists():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    with sqlite3.connect(f"file:{TRACE_DB}?mode=ro", uri=True) as db:
        for arm in ARMS:
            series: dict[int, list[float]] = {}
            for run in (r for r in runs if r["arm"] == arm):
                rows = db.execute("SELECT t.metrics FROM trials t JOIN studies s ON s.id = t.study_id WHERE s.name = ? "
                                  "ORDER BY t.id", (run["study"],)).fetchall()
                for i, (metrics,) in enumerate(rows):
                    value = (json.loads(metrics or "{}").get("summary") or {}).get("throughput_ops_s")
                    if value is not None:
                        series.setdefault(i, []).append(value)
            if series:
                xs = sorted(series)
                ax.plot([(x + 1) * WINDOW_S for x in xs], [statistics.mean(series[x]) for x in xs], label=arm)
    ax.set_xlabel(f"seconds into the trace (end of each {WINDOW_S} s window)")
    ax.set_ylabel("ops/s, mean of the repeats")
    ax.set_title("shifting trace: read-heavy, write-heavy, scan-heavy (3 min each)")
    ax.legend()
    path = RESULTS / "online.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path.name


def write() -> None:
    md, out = RESULTS / "online.md", {}
    lines = ["# Online re-tuning on the shifting trace (issue 39)", "",
             "Written by `python3 bench/online.py` (its docstring has the parts and their commands): a local cluster "
             "of 2 nodes, RF 2, 1 GiB heaps, 100,000 records, knob set `online12`, the model an rf forest fitted on "
             "a collection over the trace's three mixes on the same setup.", ""]
    lines += kept_notes(md, "online.py")
    ceiling, out["ceiling"] = _ceiling_table()
    runs = _runs()
    trace, out["trace"] = _trace_table(runs)
    lines += ceiling + [""] + trace + [""]
    figure = _figure(runs)
    if figure:
        lines += [f"![throughput over the trace]({figure})", ""]
    for run in (r for r in runs if r["arm"] == "online"):
        for d in run["summary"].get("restart_decisions") or []:
            lines.append(f"- repeat {run['repeat'] + 1}, window {d['window']}: {d['action']} {d['verdict']}, expected "
                         f"gain {d['expected_gain_operations']:,.0f} operations against a cost of "
                         f"{d['cost_operations']:,.0f}" + (", performed" if d.get("performed") else ""))
    md.write_text("\n".join(lines).rstrip() + "\n")
    (RESULTS / "online.json").write_text(json.dumps(out, indent=1, default=str))
    log(f"wrote {md}")


def plan(configs: int, rounds: int, repeats: int) -> None:
    collect = (configs + 2) * len(PHASES)
    ceiling = rounds * len(PHASES) * 3
    for what, count, seconds in (("collect", collect, TRIAL_S), ("ceiling", ceiling, TRIAL_S),
                                 ("trace", repeats * len(ARMS), TRACE_RUN_S)):
        print(f"{what}: {count} runs, about {count * seconds / 3600:.1f} h")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["plan", "collect", "ceiling", "trace", "write"])
    p.add_argument("--configs", type=int, default=24)
    p.add_argument("--rounds", type=int, default=6)   # 6 pairs: the fewest where p < 0.05 can be reached
    p.add_argument("--repeats", type=int, default=8)
    args = p.parse_args()
    if args.part == "plan":
        plan(args.configs, args.rounds, args.repeats)
    elif args.part == "collect":
        run_collect(args.configs)
    elif args.part == "ceiling":
        run_ceiling(args.rounds)
    elif args.part == "trace":
        run_trace(args.repeats)
    else:
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
