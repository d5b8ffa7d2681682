#!/usr/bin/env python3
"""Online re-tuning on the shifting trace against static configurations.

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
           per phase and over the trace, the client's read p99 and the nodes' p99 of each phase's main operation
           per phase, the failed operations and every decision (online/trace.db: one online study per run;
           online/runs.json names them).
  restart  what the client sees at consistency ONE while the 2 nodes restart one at a time: `online` on the
           write-heavy phase alone (RESTART_TRACE, 360 s), its horizon so long that any gain the model predicts pays
           for a rolling restart, once (online/restart.db; its summary in online/restart.json): the client's returns
           that were not OK, by operation and status, beside the restart's measured time per node.
  write    the results files and the figure (online.png: throughput and p99 over the trace, mean of the repeats
           per 20 s of wall clock, one line per arm) from what is stored.

  python3 bench/online.py plan                      # the machine time of each part, nothing run
  python3 bench/online.py collect [--configs 24]
  python3 bench/online.py ceiling [--rounds 6]
  python3 bench/online.py trace [--repeats 8]
  python3 bench/online.py restart
  python3 bench/online.py write

Hours of cold trials and trace runs: nothing else may run on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import functools
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
RESTART_DB, RESTART_RUN = FOLDER / "restart.db", FOLDER / "restart.json"
RESTART_TRACE = FOLDER / "restart-trace.yaml"   # written by `restart`: the shipped trace's write-heavy phase, 360 s
AVERAGE = FOLDER / "average.properties"     # the trace's average mix, as a YCSB workload file
PHASES = {"read-heavy": "ycsb-b", "write-heavy": "write90", "scan-heavy": "ycsb-e"}   # the shipped trace's
MAIN_OP = {"read-heavy": "read", "write-heavy": "write", "scan-heavy": "scan"}   # whose p99 each phase is judged on
HEAP = ["--heap", "1G"]   # left out where a configuration brings its own heap_size (`online` takes one, not both)
CLUSTER = ["--nodes", "2", "--rf", "2", *HEAP]
RECORDS = "100000"
ARMS = ("static-default", "static-average", "online")
# the loop's windows for every arm of `trace`: with online's defaults (60 s windows, 3 to confirm a shift, 180 s of
# dwell after a change) a mix must last 3 minutes before online acts, the whole of a phase of the shipped trace
# (measured: in a first repeat with them, online-20261128-011910, no shift was declared before the trace's last
# window). 20 s windows and 60 s of dwell let it act a minute into each phase.
WINDOW_S = 20
# repeats (0-based) left out of the figure's means, not of the tables: repeat 8 ran on a machine about 4 times
# slower per CPU second, the trace at a tenth of the others' pace, and its online arm has no reading for 8 windows
# of its restart; averaged in, each second's mean would mix two paces and, for online, fewer runs where it restarted
FIGURE_LEFT_OUT = {7: "repeat 8, which ran at about a tenth of the others' pace (the notes above say why)"}
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


def run_restart() -> None:
    """One `online` run on the write-heavy phase whose horizon (10^6 s) makes any predicted gain pay for a rolling
    restart: the client's not-OK returns while each node is out and after it is back (not a performance figure:
    once is what it takes)."""
    if RESTART_RUN.exists():
        log(f"restart: done ({RESTART_RUN.name}); delete it to run again")
        return
    if not MODEL.exists():
        raise SystemExit("online: no model yet: run `python3 bench/online.py collect` first")
    RESTART_TRACE.write_text("name: restart-under-writes\nphases:\n"
                             "  - {name: write-heavy, workload: write90, seconds: 360, threads: 16}\n")
    log("restart: online on the write-heavy phase, a rolling restart forced by a 10^6 s horizon")
    out = nosqltune("online", *CLUSTER, "--trace", str(RESTART_TRACE), "--records", "20000", "--model", str(MODEL),
                    "--study", str(RESTART_DB), *LOOP, "--horizon", "1000000", "--json", ok=(0, 1))
    RESTART_RUN.write_text(json.dumps(json.loads(out), indent=1))
    write()


def _restart_section() -> tuple[list[str], dict]:
    """What `restart` measured: the roll, node by node, its price before it, and the client's not-OK returns."""
    from nosqltune.workloads.ycsb import describe_not_ok

    if not RESTART_RUN.exists():
        return [], {}
    summary = json.loads(RESTART_RUN.read_text())
    rolls = [w["online"]["restart"] for w in _windows(summary["study"], RESTART_DB)
             if (w["online"].get("restart") or {}).get("roll")]
    (row,) = summary["trace"]
    reads = round(row["throughput_ops_s"] * row["seconds"] * row["node_mix"]["read"])
    turns = [t for roll in rolls for t in roll["roll"]]
    priced = "; ".join(f"{roll['decision']['restart_seconds_per_node']:.0f} s/node "
                       f"({roll['decision']['restart_seconds_source']})" for roll in rolls) or "-"
    statuses = describe_not_ok(row.get("not_ok") or {}) or "none"
    lines = ["## Consistency ONE while the nodes restart one at a time (`restart`)", "",
             f"`online` on the write-heavy phase alone ({row['seconds']:.0f} s, 16 threads, 20,000 records, RF 2, "
             "reads and writes at ONE) with a horizon of 10^6 s, so that any gain the model predicts pays for a "
             f"rolling restart: study `{summary['study']}` in online/restart.db.", "",
             "| rolling restarts | each node drained, restarted and serving again | priced before the roll "
             "| client ops/s | returns not OK | reads (about) |",
             "|---|---|---|---|---|---|",
             f"| {summary['restarts']} | "
             + ("; ".join(f"{t['node']} {t['seconds']:.0f} s" + ("" if t["ok"] else " (failed)") for t in turns)
                or "-")
             + f" | {priced} | {row['throughput_ops_s']:,.0f} | {statuses} | {reads:,} |"]
    return lines, {"study": summary["study"], "restarts": summary["restarts"], "turns": turns,
                   "errors": row.get("errors"), "not_ok": row.get("not_ok"), "reads_about": reads}


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


@functools.cache
def _windows(study: str, store: Path = TRACE_DB) -> list[dict]:
    """One online study's windows in order: wall-clock start and end, the window's figures and online's record
    (read once per study: the tables and the figure all use them)."""
    import sqlite3

    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT t.started_at, t.finished_at, t.metrics, t.meta FROM trials t JOIN studies s "
                          "ON s.id = t.study_id WHERE s.name = ? ORDER BY t.id", (study,)).fetchall()
    return [{"start": a, "end": b, "window": (json.loads(m or "{}").get("window") or {}),
             "online": (json.loads(meta or "{}").get("online") or {})} for a, b, m, meta in rows]


def _main_p99_ms(window: dict, op: str | None = None) -> float | None:
    """A window's node-side p99 (ms) of `op`, or of its most frequent operation when op is None."""
    mix = {kind: share for kind, share in (window.get("mix") or {}).items() if share}   # None: no traffic
    p99 = window.get("p99_us") or {}
    op = op or (max(mix, key=mix.get) if mix else None)
    return p99[op] / 1000 if op and p99.get(op) is not None else None


def _phase_p99(run: dict) -> dict[str, float | None]:
    """Per phase of one run: the node-side p99 (ms) of the phase's main operation (MAIN_OP), the median over the
    windows wholly inside the phase (a window straddling two phases counts for neither)."""
    windows = _windows(run["study"])
    out = {}
    for row in run["summary"].get("trace") or []:
        inside = [_main_p99_ms(w["window"], MAIN_OP[row["phase"]]) for w in windows
                  if w["start"] >= row["started_at"] and w["end"] <= row["ended_at"]]
        inside = [v for v in inside if v is not None]
        out[row["phase"]] = statistics.median(inside) if inside else None
    return out


def _p99_table(runs: list[dict]) -> tuple[list[str], dict]:
    """The p99 of each phase's main operation per arm, and online's against each static arm, paired by repeat."""
    p99 = {(r["arm"], r["repeat"]): _phase_p99(r) for r in runs}
    lines = ["### p99 per phase (node-side, the phase's main operation: read, write, scan)", "",
             "The median over the windows wholly inside the phase of the p99 the nodes report (ClientRequest "
             "latencies over JMX), then the mean over the repeats. The ratios are online's p99 against the static "
             "arm's, paired by repeat (< 1: online's is lower); p is the Wilcoxon signed-rank test.", "",
             "| arm | " + " | ".join(f"{phase} {MAIN_OP[phase]} p99" for phase in PHASES) + " |",
             "|---|" + "---|" * len(PHASES)]
    out: dict = {"runs": {f"{arm}/{repeat + 1}": v for (arm, repeat), v in p99.items()}, "online_against": {}}
    for arm in ARMS:
        cells = []
        for phase in PHASES:
            got = [v[phase] for (a, _), v in p99.items() if a == arm and v.get(phase) is not None]
            cells.append(f"{statistics.mean(got):.1f} ms" if got else "-")
        if any(a == arm for a, _ in p99):
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    for static in ("static-default", "static-average"):
        cells = []
        for phase in PHASES:
            repeats = sorted(r for a, r in p99 if a == "online" and (static, r) in p99)
            mine = [p99[("online", r)].get(phase) for r in repeats]
            theirs = [p99[(static, r)].get(phase) for r in repeats]
            s = paired(theirs, mine, maximize=False)   # the mean of online's p99 / the static arm's
            out["online_against"].setdefault(static, {})[phase] = s
            cells.append(f"x{s['mean_ratio']:.3f}, p = {s['p']:.3f}" if s["mean_ratio"] else "-")
        lines.append(f"| online against {static} | " + " | ".join(cells) + " |")
    return lines, out


def _change_text(changes: list[dict]) -> str:
    return ", ".join(f"{c['knob']} {c['before']} -> {c['after']}" for c in changes)


def _guard_text(guard: dict) -> str:
    """The guard's verdict on a live change with the measured change of each figure it judged."""
    v = guard.get("verdict") or {}
    checks = {c["name"]: c for c in v.get("checks") or []}
    measured = ", ".join(f"{name.replace('_', ' ')} {checks[name]['change']:+.0%}"
                         for name in ("throughput", "p99_read", "p99_write", "p99_scan")
                         if name in checks and checks[name].get("change") is not None)
    return f"{v.get('verdict')} ({measured}; {v.get('windows_before')} window(s) before)"


def _restart_text(d: dict) -> str:
    """The restart weighed as the run decided it, and as decide_restart decides the same numbers now: since
    2026-11-28 the gain is the model's relative gain at the measured pace, not the difference of its two
    predictions (in the model's ops/s), which on a slow day rolled out a restart that paid nothing."""
    from nosqltune.online import CostSettings, decide_restart

    measured = [d["restart_seconds_per_node"]] if d["restart_seconds_source"].startswith("measured") else []
    now = decide_restart(predicted_now=d["predicted_now"], predicted_new=d["predicted_new"],
                         current_ops_per_second=d["current_ops_per_second"], nodes=d["nodes"],
                         replication_factor=d["replication_factor"], dwell_seconds=d["dwell_seconds"],
                         replicas_needed=d["replicas_needed"], measured_restart_seconds=measured,
                         settings=CostSettings(horizon_seconds=d["horizon_seconds"], margin=d["margin"]))
    return (f"{d['action']} {'act' if d.get('act') else 'hold'}: gain {d['expected_gain_operations']:,.0f} "
            f"against cost {d['cost_operations']:,.0f}; relative rule: {now.verdict}, gain "
            f"{now.expected_gain_operations:,.0f}")


def _decisions(runs: list[dict]) -> list[str]:
    """Every decision of the online runs: the mix seen, the model's predicted gain, the live change and what the
    guard measured after it, and the restart weighed (expected gain against cost, in operations)."""
    lines = ["### online's decisions", "",
             "Per online run, each window where it acted: the mix that triggered it, the model's predicted gain of "
             "its best for that mix over the running configuration, the live knobs applied (read back from both "
             "nodes), the guard's verdict with the measured change of the next window against the windows before, "
             "and the rolling restart it weighed: as the run decided it, and as the same numbers are decided since "
             "the gain became the model's relative gain at the measured pace (the relative rule, 2026-11-28).", "",
             "| repeat | window | mix r/w/s | predicted | live change | guard | rolling restart |",
             "|---|---|---|---|---|---|---|"]
    for run in sorted((r for r in runs if r["arm"] == "online"), key=lambda r: r["repeat"]):
        windows = _windows(run["study"])
        for i, w in enumerate(windows):
            rec = w["online"].get("recommendation")
            if not rec:
                continue
            mix = w["window"].get("mix") or {}
            live = w["online"].get("live") or {}
            read_back = all(not r.get("differs") and r.get("error") is None
                            for r in (live.get("outcome") or {}).get("results") or [])
            after = [later["online"] for later in windows[i + 1:i + 3]]   # the guard and the restart follow
            guard = next((_guard_text(o["guard"]) for o in after if o.get("guard")), "-")
            restart = next((_restart_text(o["restart"]["decision"]) for o in after
                            if (o.get("restart") or {}).get("decision")), "-")
            changes = live.get("changes") or []
            lines.append(f"| {run['repeat'] + 1} | {i + 1} | {mix.get('read', 0):.2f}/{mix.get('write', 0):.2f}/"
                         f"{mix.get('scan', 0):.2f} | x{rec['predicted_gain']:.3f} | "
                         + (_change_text(changes) + ("" if read_back else " (read back differs)") if changes else "-")
                         + f" | {guard} | {restart} |")
    return lines


def _figure(runs: list[dict]) -> str | None:
    """Throughput and the p99 of each window's main operation over the trace (wall clock from the trace's start,
    in WINDOW_S bins), the mean of each arm's repeats; None when there is nothing."""
    if not runs or not TRACE_DB.exists():
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for arm in ARMS:
        ops: dict[int, list[float]] = {}
        p99: dict[int, list[float]] = {}
        for run in (r for r in runs if r["arm"] == arm and r["repeat"] not in FIGURE_LEFT_OUT):
            trace = run["summary"].get("trace") or []
            if not trace:
                continue
            for w in _windows(run["study"]):
                # a node restarted or did not answer (a lower bound), or none answered: the trace never idles, so a
                # window without operations is one no node's counters were read for (not marked partial before
                # 2026-11-28), not a reading of zero
                if w["window"].get("partial") or not w["window"].get("operations"):
                    continue
                at = int(((w["start"] + w["end"]) / 2 - trace[0]["started_at"]) // WINDOW_S)
                for series, value in ((ops, w["window"].get("ops_per_second")), (p99, _main_p99_ms(w["window"]))):
                    if value is not None:
                        series.setdefault(at, []).append(value)
        for ax, series in ((top, ops), (bottom, p99)):
            if series:
                xs = sorted(series)
                ax.plot([(x + 0.5) * WINDOW_S for x in xs], [statistics.mean(series[x]) for x in xs], label=arm)
    first = (runs[0]["summary"].get("trace") or [{}])[0].get("started_at")
    for row in (runs[0]["summary"].get("trace") or [])[:-1]:   # the phase boundaries of one run
        for ax in (top, bottom):
            ax.axvline(row["ended_at"] - first, color="grey", linewidth=0.6, linestyle=":")
    top.set_ylabel("ops/s (mean of the repeats)")
    top.set_title("shifting trace: read-heavy, write-heavy, scan-heavy (3 min each)")
    top.legend()
    bottom.set_yscale("log")
    bottom.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1, 2, 5)))
    bottom.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    bottom.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    bottom.set_ylabel("p99 of the window's main\noperation, ms (node-side)")
    bottom.set_xlabel(f"seconds from the trace's start (middle of each {WINDOW_S} s window)")
    path = RESULTS / "online.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path.name


def write() -> None:
    md, out = RESULTS / "online.md", {}
    lines = ["# Online re-tuning on the shifting trace", "",
             "Written by `python3 bench/online.py` (its docstring has the parts and their commands): a local cluster "
             "of 2 nodes, RF 2, 1 GiB heaps, 100,000 records, knob set `online12`, the model an rf forest fitted on "
             "a collection over the trace's three mixes on the same setup.", ""]
    lines += kept_notes(md, "online.py")
    ceiling, out["ceiling"] = _ceiling_table()
    runs = _runs()
    trace, out["trace"] = _trace_table(runs)
    lines += ceiling + [""] + trace + [""]
    if runs:
        p99, out["p99"] = _p99_table(runs)
        lines += p99 + [""]
    figure = _figure(runs)
    if figure:
        lines += [f"![throughput and p99 over the trace]({figure})", ""]
        lines += [f"Left out of the figure, not of the tables: {why}." for why in FIGURE_LEFT_OUT.values()] + [""]
    restart, out["restart"] = _restart_section()
    if restart:
        lines += restart + [""]
    if any(r["arm"] == "online" for r in runs):
        lines += _decisions(runs)
    md.write_text("\n".join(lines).rstrip() + "\n")
    (RESULTS / "online.json").write_text(json.dumps(out, indent=1, default=str))
    log(f"wrote {md}")


def plan(configs: int, rounds: int, repeats: int) -> None:
    collect = (configs + 2) * len(PHASES)
    ceiling = rounds * len(PHASES) * 3
    for what, count, seconds in (("collect", collect, TRIAL_S), ("ceiling", ceiling, TRIAL_S),
                                 ("trace", repeats * len(ARMS), TRACE_RUN_S), ("restart", 1, TRACE_RUN_S)):
        print(f"{what}: {count} runs, about {count * seconds / 3600:.1f} h")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["plan", "collect", "ceiling", "trace", "restart", "write"])
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
    elif args.part == "restart":
        run_restart()
    else:
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
