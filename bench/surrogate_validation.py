#!/usr/bin/env python3
"""The surrogate's recommendation on real Cassandra (RAFIKI Fig. 4 / Table 3; the RF/GBDT tuning
paper's gap to the best training example).

For read ratios 0.1, 0.5 and 0.9: the configuration `nosqltune recommend` gives (the most accurate model kind
of accuracy.json fitted to the whole wide24 dataset, GA search), the best configuration measured in the dataset for that read ratio (one cold
run each, so partly luck), and the default, in --rounds interleaved cold rounds (ABC CBA ...) on the
collection's setup (100K records, 30K measured operations after 20K warm-up, 16 threads, C1 JIT). Paired
speedups over the default of the same round, 95% bootstrap interval, Wilcoxon signed-rank p.

Resumable (rounds already in bench/results/surrogate/validation.db are not run again).
Writes bench/results/surrogate/validation.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
RESULTS = ROOT / "bench" / "results" / "surrogate"
DATASET = ROOT / "src" / "nosqltune" / "surrogate" / "datasets" / "wide24.json.gz"


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def candidates_for(ratio: float, kind: str, state: dict) -> dict[str, dict]:
    """Chosen once and stored, so a resumed run compares the same configurations."""
    from nosqltune.surrogate.features import load_table
    from nosqltune.surrogate.pipeline import Surrogate, best_measured, fit

    key = f"{ratio:g}"
    if key in state:
        return state[key]["candidates"]
    table = load_table(str(DATASET))
    model, meta = fit(table, kind, "throughput", seed=0)
    surrogate = Surrogate(model, meta)
    features = {"read_ratio": ratio, "distribution": "zipfian", "design": {}}
    rec = surrogate.recommend(features, "ga", seed=0)
    name = f"read{round(ratio * 100)}-zipfian"
    best = best_measured(table, "throughput")[name]
    state[key] = {"candidates": {"default": {}, "recommended": rec.config, "best-measured": best["config"]},
                  "predicted": {"recommended": rec.predicted, "default": rec.predicted_default,
                                "best-measured": float(surrogate.predict([best["config"]], features)[0])},
                  "measured_in_dataset": {"best-measured": best["value"]}, "model": kind}
    return state[key]["candidates"]


def main() -> int:
    from nosqltune.runtime.environment import fingerprint
    from nosqltune.evaluation.compare import run_interleaved
    from nosqltune.evaluation.stats import compare
    from nosqltune.knobs import load_space
    from nosqltune.store import open_store
    from nosqltune.systems import TrialSettings, run_trial
    from nosqltune.workloads.spec import make_workload

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ratios", default="0.9,0.5,0.1")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--kind", default="auto",
                   help="model kind; auto: the lowest MAPE on unseen configurations in accuracy.json (nn-ensemble "
                        "without it)")
    a = p.parse_args()
    if a.kind == "auto":
        acc = RESULTS / "accuracy.json"
        rows = [r for r in json.loads(acc.read_text())["accuracy"] if r["split"] == "configs"] if acc.exists() else []
        a.kind = min(rows, key=lambda r: r["mape"])["kind"] if rows else "nn-ensemble"
        log(f"model: {a.kind}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    state_path = RESULTS / "validation.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    space = load_space("cassandra")
    settings = TrialSettings(jit="c1")
    db = RESULTS / "validation.db"
    for ratio in (float(r) for r in a.ratios.split(",")):
        candidates = candidates_for(ratio, a.kind, state)
        state_path.write_text(json.dumps(state, indent=1) + "\n")
        workload = make_workload(read_ratio=ratio, operations=30000)
        store = open_store(str(db))
        try:
            study_id = store.study(f"validate-{ratio:g}", "cassandra", {"candidates": candidates})
            env_id = store.environment(fingerprint("cassandra", settings.cassandra.cassandra_version))
            log(f"read {ratio}: {a.rounds} interleaved rounds of {', '.join(candidates)}")
            rows = run_interleaved(store, study_id, candidates, a.rounds,
                                   lambda overrides: run_trial(space, overrides, workload, settings),
                                   workload_info={**workload.to_dict(), "harness": settings.to_dict()},
                                   environment_id=env_id, say=log)
            store.checkpoint()
        finally:
            store.close()
        values = {k: [r["metrics"]["summary"]["throughput_ops_s"] if r else None for r in v] for k, v in rows.items()}
        entry = state[f"{ratio:g}"]
        entry["values"] = values
        entry["stats"] = {k: compare(k, values[k], values["default"], maximize=True).to_dict()
                          for k in candidates if k != "default"}
        entry["recommended_vs_best_measured"] = compare("recommended", values["recommended"],
                                                        values["best-measured"], maximize=True).to_dict()
        state_path.write_text(json.dumps(state, indent=1) + "\n")
        write(state)
    return 0


def write(state: dict) -> None:
    lines = ["# Surrogate recommendation versus default on real Cassandra", "",
             f"Model: {next(iter(state.values()))['model']} fitted to the whole wide24 dataset, GA search; candidates run in interleaved cold rounds. "
             "Speedup = candidate / default of the same round (mean, 95% bootstrap interval); p: Wilcoxon "
             "signed-rank.", "",
             "| read ratio | candidate | predicted ops/s | mean measured ops/s | speedup vs default | 95% interval "
             "| p | verdict |", "|---|---|---|---|---|---|---|---|"]
    for ratio, e in sorted(state.items()):
        if "values" not in e:
            continue
        vals = e["values"]
        for name in vals:
            got = [v for v in vals[name] if v is not None]
            mean = sum(got) / len(got) if got else float("nan")
            pred = e["predicted"].get(name, e["predicted"].get("default"))
            s = e["stats"].get(name)
            if s and s["mean_speedup"] is not None and s["ci_low"] is not None:
                cells = f"{s['mean_speedup']:.3f} | [{s['ci_low']:.3f}, {s['ci_high']:.3f}] | {s['p_value']:.4f} | {s['verdict']}"
            else:
                cells = "1 | - | - | -"
            lines.append(f"| {ratio} | {name} | {pred:.0f} | {mean:.0f} | {cells} |")
        g = e["recommended_vs_best_measured"]
        if g["mean_speedup"] is not None:
            lines.append(f"| {ratio} | recommended / best-measured | | | {g['mean_speedup']:.3f} | "
                         + (f"[{g['ci_low']:.3f}, {g['ci_high']:.3f}]" if g["ci_low"] is not None else "-")
                         + f" | {g['p_value'] if g['p_value'] is None else round(g['p_value'], 4)} | {g['verdict']} |")
    lines += ["", "Changed knobs of the recommendation:", ""]
    for ratio, e in sorted(state.items()):
        rec = e["candidates"]["recommended"]
        space_default = _defaults(rec)
        lines.append(f"- read {ratio}: " + (", ".join(f"{k}={v}" for k, v in rec.items() if v != space_default[k])
                                            or "(default)"))
    (RESULTS / "validation.md").write_text("\n".join(lines) + "\n")


def _defaults(config: dict) -> dict:
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace

    return TuningSpace(load_space("cassandra").subset("wide24")).default()


if __name__ == "__main__":
    sys.exit(main())
