#!/usr/bin/env python3
"""Can a measure taken in the same trial take the machine's drift out of its throughput (`--denoise`)?

Reads the committed stores (no trial is run). For every configuration run at least --min-runs times in one store
(screening repeats, confirmation and comparison rounds alike), each run's log throughput and each candidate
measure of the machine's speed, centred on the configuration's own means:

  client CPU us/op   the YCSB client's CPU per operation: no Cassandra setting changes the client's work per
                     operation, so what moves it is the machine (its speed, its neighbours), if one caveat
                     holds: it must not move with the configuration or the load;
  client CPU cores   the client's CPU time per second of the run (its share of the 2 cores);
  node+client cores  both processes' CPU per second: how much of the machine the trial got;
  CPU probe MB/s     the fixed SHA-256 work timed before the boot (internals.machine_probe, only in stores made
                     since it exists);
  disk probe ms      the median of 200 random 4 KiB O_DIRECT reads timed before the boot (the same, later still).

The same fit is what `tune --denoise` does on a study's own repeats (tuning/denoise.py), with its rule of use.

Per store and measure: the pooled within-configuration elasticity of throughput on the measure (the slope of the
centred logs), the share of the within-configuration variance of log throughput it explains, and the spread of
repeats before and after dividing each run by (measure / the store's median)^elasticity. Then the two checks a
de-noising measure must pass: whether the measure moves with the configuration (the share of its variance that lies between the
configurations' means, and the correlation of the configurations' mean measure with their mean throughput: an
adjustment by a measure that follows the configuration would favour or penalise configurations, not the machine),
and the rank of each configuration's adjusted mean against its raw mean. Then, from the confirmations stored with
the studies, how much the single-run bests lost when re-measured. Writes bench/results/drift.{md,json}.

  python3 bench/drift.py [--min-runs 3]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys

import numpy as np

from common import RESULTS, ROOT, kept_notes, log  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))

STORES = {"in-memory (landscape)": RESULTS / "landscape" / "in-memory.db",
          "disk-bound (landscape)": RESULTS / "landscape" / "disk-bound.db",
          "write-heavy (landscape)": RESULTS / "landscape" / "write-heavy.db",
          "disk-bound (impact)": RESULTS / "impact" / "disk-bound.db",
          "write-heavy (impact)": RESULTS / "impact" / "write-heavy.db",
          "cloud-disk (impact)": RESULTS / "impact" / "cloud-disk.db",
          "disk-bound (study_cost)": RESULTS / "study_cost" / "paced.db"}
MEASURES = {"client CPU us/op": lambda s, i: s.get("client_cpu_us_per_op"),
            "client CPU cores": lambda s, i: s.get("client_cpu_cores"),
            "node+client cores": lambda s, i: (s["node_cpu_cores"] + s["client_cpu_cores"]
                                               if s.get("node_cpu_cores") and s.get("client_cpu_cores") else None),
            "CPU probe MB/s": lambda s, i: ((i.get("machine_probe") or {}).get("cpu_mb_s")),
            "disk probe ms": lambda s, i: ((i.get("machine_probe") or {}).get("disk_read_ms"))}


def runs(path) -> dict[str, list[dict]]:
    """Complete saturated (no target rate) runs per configuration: throughput and the measures."""
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        found = db.execute("SELECT config, workload, metrics, internals FROM trials WHERE state = 'COMPLETE'").fetchall()
    finally:
        db.close()
    out: dict[str, list[dict]] = {}
    for config, workload, metrics, internals in found:
        w = json.loads(workload or "{}")
        if w.get("target") or (w.get("properties") or {}).get("target"):
            continue   # a fixed-rate run: its throughput is the rate
        s, i = (json.loads(metrics or "{}").get("summary") or {}), json.loads(internals or "{}")
        if not s.get("throughput_ops_s"):
            continue
        key = json.dumps({"c": json.loads(config), "w": w.get("name")}, sort_keys=True)
        out.setdefault(key, []).append({"throughput": s["throughput_ops_s"],
                                        **{m: get(s, i) for m, get in MEASURES.items()}})
    return out


def analyse(groups: dict[str, list[dict]], measure: str, min_runs: int) -> dict | None:
    sets = [[r for r in g if r[measure] and r[measure] > 0] for g in groups.values()]
    sets = [g for g in sets if len(g) >= min_runs]
    if len(sets) < 3:
        return None
    from nosqltune.tuning.denoise import fit_elasticity

    fit = fit_elasticity([[(r["throughput"], r[measure]) for r in g] for g in sets], measure)
    y = [np.log([r["throughput"] for r in g]) for g in sets]
    x = [np.log([r[measure] for r in g]) for g in sets]
    yc = np.concatenate([v - v.mean() for v in y])
    xc = np.concatenate([v - v.mean() for v in x])
    beta = fit.slope
    resid = yc - beta * xc
    dof = len(yc) - len(sets)
    raw_sd, adj_sd = float(np.sqrt((yc ** 2).sum() / dof)), float(np.sqrt((resid ** 2).sum() / max(1, dof - 1)))
    # does the measure move with the configuration?
    means_x = np.array([v.mean() for v in x])
    means_y = np.array([v.mean() for v in y])
    between = float(means_x.var(ddof=1))
    within = float((xc ** 2).sum() / dof)
    share_between = between / (between + within) if between + within else None
    corr = float(np.corrcoef(means_x, means_y)[0, 1]) if means_x.std() and means_y.std() else None
    centre = float(np.median(np.concatenate(x)))
    adjusted = np.array([(v - beta * (u - centre)).mean() for v, u in zip(y, x)])
    shift = adjusted - means_y   # log of each configuration's adjustment factor
    corr_shift = float(np.corrcoef(shift, means_y)[0, 1]) if shift.std() and means_y.std() else None
    from scipy.stats import spearmanr

    return {"configs": len(sets), "runs": int(sum(len(g) for g in sets)), "elasticity": beta, "t": fit.t,
            "denoise_uses_it": fit.used, "r2_within": fit.r2,
            "sd_log_raw": raw_sd, "sd_log_adjusted": adj_sd, "share_between": share_between,
            "corr_config_measure_throughput": corr, "corr_adjustment_throughput": corr_shift,
            "rank_agreement": float(spearmanr(means_y, adjusted).statistic),
            "adjustment_range": [float(np.exp(shift.min())), float(np.exp(shift.max()))]}


CONFIRMED = sorted((RESULTS / "impact").glob("*.db")) + sorted((RESULTS / "tuning").glob("*.db"))


def remeasured() -> list[dict]:
    """Each stored confirmation's candidates: the single run that put them in the top, and the mean of their
    re-measurement beside the default (loss: how much worse the re-measured mean is, in the objective's sense)."""
    out = []
    for path in CONFIRMED:
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            studies = db.execute("SELECT name, settings FROM studies").fetchall()
        finally:
            db.close()
        for name, settings in studies:
            confirm = (json.loads(settings or "{}") or {}).get("confirm")
            if not confirm:
                continue
            maximize = confirm.get("metric") == "throughput"

            def loss(c: dict) -> float | None:
                if not c.get("single_run") or not c.get("mean"):
                    return None
                ratio = c["mean"] / c["single_run"]
                return 1 - ratio if maximize else ratio - 1

            default = loss(confirm["candidates"].get("default") or {})
            for label, c in confirm["candidates"].items():
                if label == "default" or loss(c) is None:
                    continue
                out.append({"study": f"{path.stem}/{name}", "label": label, "metric": confirm.get("metric"),
                            "rounds": confirm.get("rounds"), "single": c["single_run"], "mean": c["mean"],
                            "loss": loss(c), "default_loss": default, "chosen": confirm.get("best") == label})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--min-runs", type=int, default=3)
    a = p.parse_args()
    if a.min_runs < 2:
        print("drift: --min-runs is 2 or more", file=sys.stderr)
        return 2
    results = {}
    for name, path in STORES.items():
        groups = runs(path)
        results[name] = {m: analyse(groups, m, a.min_runs) for m in MEASURES}
        log(f"{name}: {len(groups)} configurations")
    lucky = remeasured()
    (RESULTS / "drift.json").write_text(json.dumps({"measures": results, "remeasured": lucky}, indent=1) + "\n")

    def f(x, spec=".2f"):
        return "-" if x is None else format(x, spec)

    path = RESULTS / "drift.md"
    lines = ["# Machine drift: what a measure taken in the same trial removes from its throughput", "",
             f"Written by `python3 bench/drift.py --min-runs {a.min_runs}` from the committed stores (no trial run); "
             "saturated runs only, configurations with repeats. *sd raw/adjusted*: the spread of log throughput among "
             "a configuration's repeats (about the CV), before and after dividing each run by (measure / median) ^ "
             "elasticity. *between*: the share of the measure's variance that lies between the configurations' "
             "means (0: it moves only with the machine). *corr config*: configurations' mean measure against their "
             "mean throughput. *corr adj*: each configuration's adjustment factor against its mean throughput "
             "(positive: the adjustment favours fast configurations, negative: slow ones). *rank*: Spearman between "
             "the configurations' raw and adjusted means.", ""]
    lines += kept_notes(path, "drift.py")
    lines += ["| store | measure | configs | runs | elasticity (t) | `--denoise` would use it | R² within | sd raw | "
              "sd adjusted | between | corr config | corr adj | rank | adjustment range |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, by in results.items():
        for measure, r in by.items():
            if r is None:
                lines.append(f"| {name} | {measure} | " + "- | " * 11 + "too few repeats with it |")
                continue
            lines.append(f"| {name} | {measure} | {r['configs']} | {r['runs']} | {f(r['elasticity'])} "
                         f"({f(r['t'], '+.1f')}) | {'yes' if r['denoise_uses_it'] else 'no'} | {f(r['r2_within'])} | "
                         f"{f(r['sd_log_raw'], '.3f')} | {f(r['sd_log_adjusted'], '.3f')} | "
                         f"{f(r['share_between'])} | {f(r['corr_config_measure_throughput'])} | "
                         f"{f(r['corr_adjustment_throughput'])} | {f(r['rank_agreement'], '.3f')} | "
                         f"x{r['adjustment_range'][0]:.3f}-x{r['adjustment_range'][1]:.3f} |")
    top1 = [r for r in lucky if r["label"] == "top1"]
    lines += ["", "## Single-run bests re-measured (the confirmations stored in bench/results/impact and tuning)", "",
              "A study's top configurations by single runs, each re-measured in its confirmation's interleaved rounds "
              "beside the default; *loss*: how much worse the re-measured mean is than the single run that put it "
              "there (negative: better); *the default's*: the same for the default, whose single run is the study's "
              "first: what the machine moved between the search and the confirmation. Without any de-noising: the "
              "figure `--denoise` is to be judged against.", "",
              f"- top-1 single runs that lost 10% or more: {sum(r['loss'] >= 0.10 for r in top1)} of {len(top1)}; "
              f"all top-3 candidates: {sum(r['loss'] >= 0.10 for r in lucky)} of {len(lucky)}", "",
              "| study | candidate | objective | rounds | single run | re-measured mean | loss | the default's | "
              "confirmed best |", "|---|---|---|---|---|---|---|---|---|"]
    for r in lucky:
        base = "-" if r["default_loss"] is None else f"{r['default_loss'] * 100:+.1f}%"
        lines.append(f"| {r['study']} | {r['label']} | {r['metric']} | {r['rounds']} | {r['single']:,.4g} | "
                     f"{r['mean']:,.4g} | {r['loss'] * 100:+.1f}% | {base} | {'yes' if r['chosen'] else ''} |")
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
