#!/usr/bin/env python3
"""What tuning finds on a capped cloud volume: a SMAC or an irace study on `cloud-disk` or
`cloud-slo` (--optimizer, --scenario), its confirmation, then the default, the confirmed best and `latest` in
--rounds interleaved cold rounds (Wilcoxon signed-rank test); and the bests found at full speed compared at
`cloud-slo`'s fixed rate (92% of the default's maximum there, the volume near its cap), where the read p99 is the
objective. Beside every ratio the mechanism, from the same runs: the volume's I/Os and bytes per operation, the
node's CPU per operation, and what limited the runs (their bottleneck line).

Study files: bench/results/impact/cloud-disk.db (studies `smac` and `irace`, each with its comparison stored in it)
and bench/results/impact/cloud-slo.db (study `reference`: the default measured at the scenario's rate, and the
comparison of the bests found on cloud-disk; studies `smac` and `irace` searched there, with their comparisons);
bench/results/impact/cloud-slo-70.db holds the same for cloud-slo as it was until 2026-11-27 (70% of the maximum:
the default limited by the rate), kept and reported, never resumed. cloud-slo's volume waits 1 ms per I/O since
2026-11-27 (the scenario's latency_ms; delayfs): its runs are in bench/results/impact/cloud-slo-1ms.db, and
cloud-slo.db holds the runs without a wait, until then. `--latency-ms L` runs cloud-slo with another wait, in its
own store cloud-slo-Lms.db (0: none, cloud-slo.db), the default's rate measured there. Every step is resumable
(tune --resume, best --confirm and compare continue their rounds); the search may be stopped early (Ctrl-C, or
--search-only then stop), and `--after-search` confirms and compares what it found; `--slo-only` runs just the
cloud-slo comparison of the bests found so far. Writes bench/results/cloud_tuning.{md,json}; `--write-only` rewrites
them from the stores. Hours of cold trials: nothing else may run.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from pathlib import Path
from statistics import mean

import yaml

from common import (ROOT, RESULTS, kept_notes, log, most_common, nosqltune, paired, ratio_text,  # bench/common.py
                    study_rows)

sys.path.insert(0, str(ROOT / "src"))   # the nosqltune of this checkout, as the commands it runs use

FOLDER = RESULTS / "impact"
DISK = FOLDER / "cloud-disk.db"
SLO = FOLDER / "cloud-slo.db"
SLO_70 = FOLDER / "cloud-slo-70.db"   # cloud-slo as it was until 2026-11-27: 70% of the default's maximum
OPTIMIZERS = ("smac", "irace")
GOAL = {"cloud-disk": {"vs_default": 1.5, "vs_latest": 1.15}, "cloud-slo": {"vs_default": 1 / 0.6}}
MECHANISM = (("node_io_per_op", "I/Os/op", "{:.3f}"), ("node_bytes_per_op", "KB/op", "{:.1f}"),
             ("node_cpu_us_per_op", "node CPU us/op", "{:.0f}"))


SCENARIOS = {"cloud-disk": (DISK, "throughput,p99-read,cpu-per-op,io-per-op"),
             "cloud-slo": (SLO, "p99-read,throughput,cpu-per-op,io-per-op")}


def slo_wait(latency_ms: float | None) -> float:
    """The wait per I/O of a cloud-slo run: `latency_ms` when given (0: none), else the scenario's (1 ms since
    2026-11-27; none before, the runs of cloud-slo.db)."""
    from nosqltune.scenarios import scenario

    return float(scenario("cloud-slo").volume_caps.get("latency_ms", 0) if latency_ms is None else latency_ms)


def slo_store(latency_ms: float | None) -> Path:
    wait = slo_wait(latency_ms)
    return SLO if not wait else FOLDER / f"cloud-slo-{wait:g}ms.db"


def _waits(scenario: str, latency_ms: float | None) -> list[str]:
    return ["--disk-latency-ms", f"{slo_wait(latency_ms):g}"] if scenario == "cloud-slo" else []


def best_file(optimizer: str, scenario: str = "cloud-disk") -> Path:
    return FOLDER / f"{scenario}-{optimizer}-best.yaml"


def _store(scenario: str, latency_ms: float | None) -> Path:
    return slo_store(latency_ms) if scenario == "cloud-slo" else SCENARIOS[scenario][0]


def search(optimizer: str, budget: int, scenario: str = "cloud-disk", latency_ms: float | None = None) -> None:
    db = _store(scenario, latency_ms)
    if study_rows(db, optimizer):
        nosqltune("tune", "--resume", "--study", str(db), "--study-name", optimizer, "--json")
    else:
        nosqltune("tune", "--scenario", scenario, *_waits(scenario, latency_ms), "--knobs", "cloud", "--optimizer",
                  optimizer, "--budget", str(budget), "--study", str(db), "--study-name", optimizer, "--json")


def after_search(optimizer: str, rounds: int, also: list[str], scenario: str = "cloud-disk",
                 latency_ms: float | None = None) -> None:
    db, metrics = _store(scenario, latency_ms), SCENARIOS[scenario][1]
    nosqltune("best", "--study", str(db), "--study-name", optimizer, "--confirm", "--json")
    best = json.loads(nosqltune("best", "--study", str(db), "--study-name", optimizer, "--format", "json"))
    wait = slo_wait(latency_ms) if scenario == "cloud-slo" else 0
    named = f"{scenario}-{wait:g}ms" if wait else scenario
    best_file(optimizer, named).write_text(yaml.safe_dump(best["best"]["config"], sort_keys=True))
    if not best["best"]["config"] and not also:   # the default against itself and `latest`: nothing of the study's
        log(f"{optimizer}: the confirmed best is the default; no comparison (the landscape compares `latest`)")
        return
    nosqltune("compare", "--study", str(db), "--study-name", optimizer, "--candidates",
              ",".join(["best", "latest", *also]), "--repeat", str(rounds), "--metrics", metrics, "--json", ok=(0, 1))


def slo(rounds: int, latency_ms: float | None = None) -> None:
    """The bests found at full speed, at cloud-slo's fixed rate: does a node that reads less from the volume answer
    sooner when the load is held below its maximum? With `latency_ms`, on a volume whose I/Os wait that long."""
    bests = [str(best_file(o)) for o in OPTIMIZERS if best_file(o).exists()]
    if not bests:
        raise SystemExit("cloud_tuning.py: no best found on cloud-disk yet (run the search and --after-search first)")
    db = slo_store(latency_ms)
    if not study_rows(db, "reference"):   # the default at the scenario's fixed rate: the study compare runs in
        nosqltune("tune", "--scenario", "cloud-slo", *_waits("cloud-slo", latency_ms), "--knobs", "cloud",
                  "--optimizer", "random", "--budget", "1", "--confirm-top", "0", "--study", str(db),
                  "--study-name", "reference", "--json")
    nosqltune("compare", "--study", str(db), "--study-name", "reference", "--candidates",
              ",".join([*bests, "latest"]), "--repeat", str(rounds), "--metrics", "p99-read,throughput,io-per-op",
              "--json", ok=(0, 1))


def _study(db: Path, name: str) -> dict | None:
    if not db.exists():
        return None
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT id, settings FROM studies WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        trials = conn.execute("SELECT tag, state, config, metrics, internals, meta, timings, started_at, finished_at, "
                              "number FROM trials WHERE study_id = ? ORDER BY id", (row[0],)).fetchall()
    keys = ("tag", "state", "config", "metrics", "internals", "meta", "timings", "started_at", "finished_at", "number")
    rows = [dict(zip(keys, t)) for t in trials]
    for r in rows:
        for k in ("config", "metrics", "internals", "meta", "timings"):
            r[k] = json.loads(r[k] or "null")
    return {"settings": json.loads(row[1] or "{}"), "rows": rows}


def _mechanism(rows: list[dict], group: str) -> dict:
    """Per candidate of one comparison: the mean of its runs' mechanism figures and its most common verdict."""
    from nosqltune.bottleneck import of_trial

    out: dict = {}
    for r in rows:
        meta = r["meta"] or {}
        if r["tag"] != "compare" or meta.get("group") != group or r["state"] != "COMPLETE":
            continue
        summary = r["metrics"]["summary"]
        entry = out.setdefault(meta["candidate"], {"runs": 0, "verdicts": [], **{k: [] for k, _, _ in MECHANISM}})
        entry["runs"] += 1
        for key, _, _ in MECHANISM:
            if summary.get(key) is not None:
                entry[key].append(summary[key] / (1000 if key == "node_bytes_per_op" else 1))
        verdict = (r["internals"] or {}).get("bottleneck") or {}
        if not verdict:
            said = of_trial(r)
            verdict = {"limit": said.limit, "line": said.line()} if said else {}
        entry["verdicts"].append((verdict.get("limit"), verdict.get("line")))
    for entry in out.values():
        for key, _, _ in MECHANISM:
            entry[key] = mean(entry[key]) if entry[key] else None
        limit = most_common([v[0] for v in entry["verdicts"]])
        entry["limit"] = limit
        entry["line"] = next((line for lim, line in reversed(entry["verdicts"]) if lim == limit), None)
        entry["limits"] = {lim: sum(1 for v in entry["verdicts"] if v[0] == lim) for lim in {v[0] for v in entry["verdicts"]}}
        del entry["verdicts"]
    return out


def collect() -> dict:
    from nosqltune.tuning.cost import time_split

    results: dict = {"scenarios": {}}
    waiting = sorted(FOLDER.glob("cloud-slo-*ms.db"))   # --latency-ms stores
    slo = [(db, name) for db in (SLO, *waiting, SLO_70) for name in ("reference", *OPTIMIZERS)]
    for scenario, db, name in (*(("cloud-disk", DISK, o) for o in OPTIMIZERS), *(("cloud-slo", *s) for s in slo)):
        study = _study(db, name)
        if study is None:
            continue
        tune = study["settings"].get("tune", {})
        entry: dict = {"study": str(db.relative_to(RESULTS.parent.parent)), "study_name": name,
                       "time": time_split(study["rows"]),
                       "search_trials": sum(1 for r in study["rows"] if r["tag"] == "tune"),
                       "budget": tune.get("spec", {}).get("budget"), "comparisons": {}}
        confirm = study["settings"].get("confirm")
        if confirm:
            kept = ("best", "rounds", "metric", "unit")
            entry["confirmation"] = {**{k: confirm.get(k) for k in kept if k in confirm},
                                     "means": {label: c.get("mean") for label, c in
                                               (confirm.get("candidates") or {}).items()}}
        for key, comparison in (study["settings"].get("compare") or {}).items():
            metric = comparison["metric"]
            maximize = metric == "throughput"
            for workload, w in comparison["workloads"].items():
                values, stats = w["values"], w["stats"]
                labels = [k for k in values if k != "default"]
                tuned = [k for k in labels if k != "latest"]
                block = {"metric": metric, "rounds": len(values["default"]), "workload": workload,
                         "candidates": {}, "mechanism": _mechanism(study["rows"], w["group"]),
                         "default_values": values["default"]}
                for label in labels:
                    s = stats[label]
                    also = {m: a["stats"].get(label, {}).get("mean_speedup") for m, a in (w.get("also") or {}).items()}
                    block["candidates"][label] = {
                        "vs_default": s, "also": also, "config": comparison["candidates"].get(label),
                        "vs_latest": paired(values[label], values["latest"], maximize) if label in tuned else None}
                entry["comparisons"][key] = block
        entry["scenario"] = scenario
        entry["heading"] = (f"{scenario} at 70% of the default's maximum (until 2026-11-27)" if db == SLO_70
                            else f"{scenario}, every I/O waiting {db.stem.split('-')[-1][:-2]} ms (delayfs)"
                            if db in waiting else f"{scenario} without a wait per I/O (until e54913c)"
                            if db == SLO else scenario)
        results["scenarios"][f"{entry['heading']}/{name}"] = entry
    return results


def confirmation_text(confirm: dict) -> str:
    """The confirmation of a study that has no comparison: the mean of each candidate over its repeated runs."""
    unit = f" {confirm['unit']}" if confirm.get("unit") else ""
    means = ", ".join(f"{label} {m:.4g}{unit}" for label, m in (confirm.get("means") or {}).items() if m is not None)
    head = f"Confirmation ({confirm.get('rounds')} rounds, {confirm.get('metric')}): {means}. "
    if confirm.get("best") == "default":
        return head + "The default stayed the best, so no comparison ran."
    return head + f"Confirmed best: `{confirm.get('best')}` (no comparison stored yet)."


def _p(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def write(results: dict) -> None:
    (RESULTS / "cloud_tuning.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    path = RESULTS / "cloud_tuning.md"
    lines = ["# What tuning finds on a capped cloud volume", "",
             "Generated by `bench/cloud_tuning.py` from bench/results/impact/cloud-disk.db, cloud-slo-1ms.db "
             "(cloud-slo, its volume waiting 1 ms per I/O), cloud-slo.db (without the wait, until e54913c) and "
             "cloud-slo-70.db (cloud-slo at 70% of the default's maximum, until 2026-11-27): a SMAC "
             "and an irace study on `cloud-disk` (knob set `cloud`), each with its confirmation, then the default, the "
             "confirmed best and `latest` in interleaved cold rounds at full speed (throughput); then the bests at "
             "cloud-slo's fixed rate (read p99). Ratio > 1 is better (read p99, CPU and I/Os per operation: default / candidate); p "
             "from the Wilcoxon signed-rank test over the rounds. Goals: cloud-disk >= x1.5 against the default and "
             ">= x1.15 against `latest`, p < 0.05; cloud-slo a read p99 >= 40% lower than the default's, p < 0.05.", ""]
    lines += kept_notes(path, Path(__file__).name)
    for entry in results["scenarios"].values():
        scenario, split = entry["scenario"], entry["time"]
        lines += [f"## {entry['heading']}, study `{entry['study_name']}`", "",
                  f"Study `{entry['study_name']}` in `{entry['study']}`: {entry['search_trials']} search trials "
                  f"(budget {entry['budget']}); machine time {split['machine_s'] / 3600:.2f} h over {split['trials']} "
                  f"trials, {split['builds']} dataset builds: "
                  + ", ".join(f"{k} {v * 100:.0f}%" for k, v in split["shares"].items() if v is not None) + ".", ""]
        if entry.get("confirmation") and not entry["comparisons"]:
            lines += [confirmation_text(entry["confirmation"]), ""]
        for key, block in entry["comparisons"].items():
            goal = GOAL.get(scenario, {})
            lines += [f"### {block['workload']}, {block['metric']}, {block['rounds']} rounds (comparison {key})", "",
                      "| candidate | vs default (mean, 95% CI) | p | vs latest | p | goal | same runs, vs default |",
                      "|---|---|---|---|---|---|---|"]
            for label, c in block["candidates"].items():
                s, v = c["vs_default"], c["vs_latest"]
                meets = "-"
                if label != "latest" and s.get("mean_speedup"):
                    ok = s["mean_speedup"] >= goal.get("vs_default", 0) and (s.get("p_value") or 1) < 0.05
                    if v and "vs_latest" in goal:
                        ok = ok and (v["mean_ratio"] or 0) >= goal["vs_latest"] and (v["p"] or 1) < 0.05
                    meets = "yes" if ok else "no"
                also = ", ".join(f"{m} x{x:.3f}" for m, x in c["also"].items() if x is not None) or "-"
                lines.append(f"| {label} | {ratio_text(s)} | {_p(s.get('p_value'))} | "
                             f"{'x%.3f' % v['mean_ratio'] if v and v['mean_ratio'] else '-'} | "
                             f"{_p(v['p']) if v else '-'} | {meets} | {also} |")
            lines += ["", "The mechanism, from the same runs (means over each candidate's runs):", "",
                      "| candidate | runs | " + " | ".join(unit for _, unit, _ in MECHANISM) + " | limited by |",
                      "|---|---|" + "---|" * len(MECHANISM) + "---|"]
            for label, m in block["mechanism"].items():
                cells = [fmt.format(m[k]) if m.get(k) is not None else "-" for k, _, fmt in MECHANISM]
                limits = ", ".join(f"{k} {n}" for k, n in sorted(m["limits"].items(), key=lambda kv: -kv[1]) if k)
                lines.append(f"| {label} | {m['runs']} | " + " | ".join(cells) + f" | {limits or '-'} |")
            lines += [""]
            for label, m in block["mechanism"].items():
                if m.get("line"):
                    lines.append(f"- {label}: {m['line']}")
            runs = [x for x in block["default_values"] if x is not None]
            if runs:
                lines.append(f"- the default's {block['metric']} over its {len(runs)} runs: {min(runs):,.4g} to "
                             f"{max(runs):,.4g}")
            lines += ["", "Configurations:", ""]
            for label, c in block["candidates"].items():
                config = ", ".join(f"{k}={x}" for k, x in sorted((c.get("config") or {}).items()))
                lines.append(f"- {label}: {config or '(the default)'}")
            lines += [""]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="smac", help="the strategy of the study")
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default="cloud-disk",
                   help="where the study searches: cloud-disk (throughput) or cloud-slo (the read p99 at its fixed "
                        "rate; its confirmed best is compared in its own study) (default cloud-disk)")
    p.add_argument("--budget", type=int, default=60, help="the study's trials, its confirmation included")
    p.add_argument("--rounds", type=int, default=10)
    steps = p.add_mutually_exclusive_group()
    steps.add_argument("--search-only", action="store_true", help="run (or resume) the search and stop")
    steps.add_argument("--after-search", action="store_true",
                       help="confirm and compare what the search found so far (a search stopped early included)")
    steps.add_argument("--slo-only", action="store_true",
                       help="only compare the bests found so far at cloud-slo's rate")
    steps.add_argument("--write-only", action="store_true", help="rewrite cloud_tuning.md/json from the stores")
    p.add_argument("--also", default="", metavar="FILES",
                   help="comma-separated YAML files of knob values compared beside the best and latest (e.g. a "
                        "hand-picked reference: bench/results/impact/cloud-disk-heap512.yaml)")
    p.add_argument("--no-slo", action="store_true", help="compare at full speed only (cloud-disk), not at cloud-slo's rate")
    p.add_argument("--latency-ms", type=float, default=None, metavar="L",
                   help="cloud-slo on a volume whose every I/O waits L ms, each wait in a store of its own "
                        "(cloud-slo-Lms.db; 0: none, cloud-slo.db): the comparison of --slo-only, or a search with "
                        "--scenario cloud-slo (default: the scenario's, 1 ms)")
    a = p.parse_args()
    FOLDER.mkdir(parents=True, exist_ok=True)
    if not (a.write_only or a.slo_only):
        if not a.after_search:
            search(a.optimizer, a.budget, a.scenario, a.latency_ms)
        if not a.search_only:
            after_search(a.optimizer, a.rounds, [f for f in a.also.split(",") if f], a.scenario, a.latency_ms)
    if a.scenario == "cloud-disk" and (a.slo_only or not (a.write_only or a.search_only or a.no_slo)):
        slo(a.rounds, a.latency_ms)
    write(collect())
    return 0


if __name__ == "__main__":
    sys.exit(main())
