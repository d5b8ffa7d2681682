#!/usr/bin/env python3
"""Surrogate accuracy and recommendation on the wide24 dataset (no datastore needed).

1. Accuracy (RAFIKI Table 2 / the RF/GBDT tuning paper's Table 5): `nosqltune model report` for nn-ensemble, rf and gbdt:
   unseen configurations (5 grouped random splits, 20% of the configurations held out) and unseen workloads
   (each read ratio held out in turn); MAPE of throughput versus training-set size (25..200).
   Target: MAPE <= 5% on unseen configurations with at most 200 training trials.
2. Recommendation time: `nosqltune recommend` end to end (a new process: imports, model load, search) and
   the search alone, median of 5, per model kind and search. Target: < 0.5 s.
3. Recommendation quality: the recommended configuration's predicted throughput against the best found by
   a much larger search of the same model (100K random configurations, then GA with 10x the population and
   5x the generations, and annealing with 8x the chains and 10x the steps, 3 seeds each), at read ratios
   0.1, 0.5, 0.9. Target: within 5% (RAFIKI: within 15% of grid search).

Writes bench/results/surrogate/{accuracy.md,accuracy.json,learning_curve.png,recommend.md,recommend.json}.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
RESULTS = ROOT / "bench" / "results" / "surrogate"
DATASET = ROOT / "src" / "nosqltune" / "surrogate" / "datasets" / "wide24.json.gz"
MODELS = ROOT / "bench" / "results" / "surrogate" / "models"   # not committed (.gitignore)
KINDS = ("nn-ensemble", "rf", "gbdt")
RATIOS = (0.1, 0.5, 0.9)


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def run(*args: str) -> tuple[str, float]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "nosqltune", *args], stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if proc.returncode:
        raise SystemExit(f"nosqltune {' '.join(args)} failed ({proc.returncode})")
    return proc.stdout, time.perf_counter() - started


def accuracy() -> dict:
    log("accuracy report (this fits a few hundred models)")
    out, seconds = run("model", "report", "--study", str(DATASET), "--repeats", "5", "--sizes", "25,50,100,150,200",
                       "--out", str(RESULTS), "--json")
    result = json.loads(out)
    log(f"accuracy done in {seconds:.0f} s")
    return result


def larger_search(surrogate, features, seeds=3) -> float:
    import numpy as np

    from nosqltune.surrogate.search import anneal, genetic

    codec = surrogate.codec(features)
    score = lambda rows: np.log(surrogate.model.predict(rows))  # noqa: E731
    rng = np.random.default_rng(12345)
    best = -np.inf
    for _ in range(10):   # 100K random configurations, in batches
        best = max(best, float(np.max(score(codec.rows(codec.random(rng, 10000))))))
    for seed in range(seeds):
        best = max(best, genetic(codec, score, seed=100 + seed, population=600, generations=300).value)
        best = max(best, anneal(codec, score, seed=200 + seed, chains=256, steps=2000).value)
    return float(np.exp(best))


def recommend() -> dict:
    from nosqltune.surrogate.models import load
    from nosqltune.surrogate.pipeline import Surrogate

    out: dict = {"kinds": {}}
    for kind in KINDS:
        model_dir = MODELS / f"wide24.throughput.{kind}.model"
        log(f"{kind}: fit on the whole dataset")
        run("model", "fit", "--study", str(DATASET), "--kind", kind, "--out", str(model_dir))
        surrogate = Surrogate(*load(model_dir))
        entry: dict = {"timing": {}, "quality": {}}
        for method in ("ga", "anneal"):
            walls, searches = [], []
            for _ in range(5):
                text, wall = run("recommend", "--model", str(model_dir), "--workload", "read=0.9", "--search", method,
                                 "--format", "json")
                walls.append(wall)
                searches.append(json.loads(text)["search_seconds"])
            entry["timing"][method] = {"command_s": statistics.median(walls), "search_s": statistics.median(searches)}
            log(f"{kind}/{method}: {statistics.median(walls):.2f} s per command, search "
                f"{statistics.median(searches):.3f} s")
        for ratio in RATIOS:
            features = {"read_ratio": ratio, "distribution": "zipfian", "design": {}}
            reference = larger_search(surrogate, features)
            q = {"reference": reference}
            for method in ("ga", "anneal"):
                rec = surrogate.recommend(features, method, seed=0)
                q[method] = {"predicted": rec.predicted, "share_of_reference": rec.predicted / reference,
                             "predicted_default": rec.predicted_default, "config": rec.config}
            entry["quality"][str(ratio)] = q
            log(f"{kind} read {ratio}: ga {q['ga']['share_of_reference']:.3f}, anneal "
                f"{q['anneal']['share_of_reference']:.3f} of the larger search")
        out["kinds"][kind] = entry
    return out


def write(acc: dict, rec: dict) -> None:
    (RESULTS / "recommend.json").write_text(json.dumps(rec, indent=1, default=str) + "\n")
    lines = ["# Recommendation from the surrogate (wide24 dataset)", "",
             "Time: `nosqltune recommend --workload read=0.9` as a new process (imports, model load, search; median "
             "of 5) and the search alone. Quality: predicted throughput of the recommendation over the best a much "
             "larger search of the same model found (100K random + GA x10 population x5 generations + annealing "
             "x8 chains x10 steps, 3 seeds each). Target: command < 0.5 s, quality >= 0.95.", "",
             "| model | search | command s | search s | read 0.1 | read 0.5 | read 0.9 | predicted gain at 0.9 |",
             "|---|---|---|---|---|---|---|---|"]
    for kind, e in rec["kinds"].items():
        for method in ("ga", "anneal"):
            t = e["timing"][method]
            shares = [e["quality"][str(r)][method]["share_of_reference"] for r in RATIOS]
            q9 = e["quality"]["0.9"][method]
            lines.append(f"| {kind} | {method} | {t['command_s']:.2f} | {t['search_s']:.3f} | "
                         + " | ".join(f"{s:.3f}" for s in shares)
                         + f" | x{q9['predicted'] / q9['predicted_default']:.3f} |")
    (RESULTS / "recommend.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    acc = accuracy()
    rec = recommend()
    write(acc, rec)


if __name__ == "__main__":
    main()
