#!/usr/bin/env python3
"""RAFIKI on the recorded cloud-disk landscape: its model's error on configurations and on a read
ratio it never saw, scored against the mean of repeated real runs, and its recommendation for that read ratio
against the default on real cold trials.

1. `test`: configurations no training trial ran, measured twice on cloud-disk (`nosqltune collect --seed 11`: the
   default and 15 random configurations carrying the knobs' extremes, at read ratios 0.95, one of the training
   set's, and 0.85, absent from it), as studies `repeat-1` and `repeat-2` of bench/results/surrogate/cloud13-test.db
   (64 cold trials, about 45 minutes plus the builds of the data shapes the dataset has not built). The repeats'
   own disagreement is the noise a model is scored through (the two run in the same order, so drift between them
   counts as noise: an upper bound).
2. `accuracy` (no datastore): RAFIKI's model (nn-ensemble), a random forest and GBDT fitted to 200 trials of the
   cloud13 dataset (random subsets grouped by configuration, 5 seeds) and to all of it; MAPE on the 15 unseen
   configurations against the mean of their two runs, per read ratio, and apart for those the volume's IOPS cap
   limited (each run's bottleneck line). Goal <= 5% (RAFIKI's paper reported 7.5%).
3. `recommend`: the nn-ensemble fitted to all of cloud13 recommends a configuration for read ratio 0.85 (GA, as
   RAFIKI); it and the default run in --rounds interleaved cold rounds on cloud-disk at that ratio (`compare`, the
   Wilcoxon test; about 20 trials). Goal p < 0.05.

Resumable (collect and compare continue where they stopped). Writes bench/results/surrogate/rafiki-cloud.{md,json}.
Cold trials: nothing else may run beside steps 1 and 3.

    python3 bench/rafiki_cloud.py                     # every step
    python3 bench/rafiki_cloud.py --steps accuracy    # only the model's error (after the test set exists)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import yaml

from common import (RESULTS as BENCH_RESULTS, ROOT, kept_notes, log, most_common, nosqltune,  # bench/common.py
                    study_settings)

sys.path.insert(0, str(ROOT / "src"))
RESULTS = BENCH_RESULTS / "surrogate"
TEST_DB = RESULTS / "cloud13-test.db"
REPEATS = ("repeat-1", "repeat-2")
SEEN, UNSEEN = 0.95, 0.85
KINDS = ("nn-ensemble", "rf", "gbdt")


def dataset_path(name: str) -> Path:
    from nosqltune.surrogate.datafile import resolve

    return resolve(name)


def test_set(a: argparse.Namespace) -> None:
    for name in REPEATS:
        nosqltune("collect", "--scenario", "cloud-disk", "--knobs", "cloud", "--read-ratios", f"{SEEN:g},{UNSEEN:g}",
                  "--configs", str(a.test_configs), "--noise-repeats", "0", "--seed", "11", "--study", str(TEST_DB),
                  "--study-name", name, "--json", ok=(0, 1))


def measured_twice() -> dict[tuple[str, float], dict]:
    """(configuration key, read ratio) -> the configuration, its workload and its runs over the repeat studies."""
    from nosqltune.bottleneck import of_trial
    from nosqltune.store import open_existing_store

    if not TEST_DB.exists():
        raise SystemExit(f"rafiki_cloud.py: no test set yet ({TEST_DB}): run the step `test` first")
    store = open_existing_store(str(TEST_DB))
    out: dict = {}
    try:
        for name in REPEATS:
            study = store.find_study(name)
            for row in store.trials(study["id"]) if study else []:
                if row["state"] != "COMPLETE" or row["tag"] != "collect":
                    continue
                ratio = round(float(row["workload"]["mix"]["readproportion"]), 4)
                key = (json.dumps(row["config"], sort_keys=True, default=str), ratio)
                entry = out.setdefault(key, {"config": row["config"], "workload": row["workload"], "runs": [],
                                             "limits": []})
                entry["runs"].append(row["metrics"]["summary"]["throughput_ops_s"])
                verdict = of_trial(row)   # what limited the run (the volume's IOPS or bandwidth cap, cores, ...)
                entry["limits"].append(verdict.limit if verdict else None)
    finally:
        store.close()
    return out


class ByTheCaps:
    """A model of the mechanism rather than of throughput: `kind` models of the I/Os and of the bytes per operation,
    and throughput as the lower of the volume's two caps over them, min(IOPS / I/Os, bandwidth / bytes), each cap
    taken from the training trials as the 90th percentile of throughput x cost (the trials that cap limited reach
    it; the others fall short). Every cloud13 trial was limited by one of the two caps (its bottleneck line)."""

    def __init__(self, kind: str, seed: int, table) -> None:
        self.kind, self.seed, self.table = kind, seed, table

    def fit(self, pick) -> "ByTheCaps":
        import numpy as np

        from nosqltune.surrogate.models import make_model

        throughput, _ = self.table.target("throughput")
        self.models, self.caps = [], []
        for metric in ("io-per-op", "bytes-per-op"):
            cost, mask = self.table.target(metric)
            rows = [i for i in pick if mask[i]]
            model = make_model(self.kind, seed=self.seed)
            model.fit(self.table.X[rows], cost[rows], groups=[self.table.configs[i] for i in rows])
            self.models.append(model)
            self.caps.append(float(np.percentile(throughput[rows] * cost[rows], 90)))
        return self

    def predict(self, X):
        import numpy as np

        return np.minimum(*(cap / model.predict(X) for cap, model in zip(self.caps, self.models)))


def accuracy(a: argparse.Namespace) -> dict:
    import numpy as np
    from scipy.stats import spearmanr

    from nosqltune.surrogate.features import load_table, workload_features
    from nosqltune.surrogate.models import make_model

    table = load_table(str(dataset_path(a.dataset)))
    y, mask = table.target("throughput")
    rows = np.flatnonzero(mask)
    tests = {k: v for k, v in measured_twice().items() if len(v["runs"]) == 2}
    trained = set(table.configs)   # the default among them
    space = table.spec.space()
    out: dict = {"noise": {}, "models": {}, "configs": {}}
    for ratio in (SEEN, UNSEEN):
        group = [v for k, v in tests.items() if k[1] == ratio and space.key(v["config"]) not in trained]
        if not group:
            continue
        truth = np.array([statistics.fmean(v["runs"]) for v in group])
        # a single run's distance from the mean of two: what scoring against single runs would add to a model's error
        out["noise"][f"{ratio:g}"] = {"configs": len(group), "single_run_mape": float(np.mean(
            [abs(v["runs"][0] - v["runs"][1]) / 2 / statistics.fmean(v["runs"]) for v in group]) * 100)}
        X = np.array([table.spec.row(space, v["config"], workload_features(v["workload"])) for v in group])
        limits = [most_common(v["limits"]) for v in group]
        iops = np.array([limit == "volume-iops" for limit in limits])
        rows_out = out["configs"].setdefault(f"{ratio:g}", [{"config": v["config"], "runs": v["runs"], "limit": limit,
                                                              "predicted": {}} for v, limit in zip(group, limits)])
        for kind, mechanism in [(k, False) for k in KINDS] + [(k, True) for k in KINDS]:
            name = f"{kind} by the caps" if mechanism else kind
            for size in (a.train_size, None):
                scores: dict[str, list[float]] = {"mape": [], "median_ape": [], "mape_iops": [], "spearman": []}
                for seed in range(a.seeds if size else 1):
                    pick = rows
                    if size and size < len(rows):
                        pick = np.sort(np.random.default_rng(seed).choice(rows, size, replace=False))
                    if mechanism:
                        model = ByTheCaps(kind, seed, table).fit(pick)
                    else:
                        model = make_model(kind, seed=seed)
                        model.fit(table.X[pick], y[pick], groups=[table.configs[i] for i in pick])
                    predicted = model.predict(X)
                    ape = np.abs(predicted - truth) / truth * 100
                    scores["mape"].append(float(np.mean(ape)))
                    scores["median_ape"].append(float(np.median(ape)))
                    scores["mape_iops"].append(float(np.mean(ape[iops])) if iops.any() else float("nan"))
                    scores["spearman"].append(float(spearmanr(predicted, truth).statistic))
                    if size is None:
                        for entry, value in zip(rows_out, predicted):
                            entry["predicted"][name] = float(value)
                label = f"{name}@{size or len(rows)}"
                mapes = scores["mape"]
                out["models"].setdefault(label, {})[f"{ratio:g}"] = {
                    "mape": statistics.fmean(mapes), "mape_range": [min(mapes), max(mapes)], "fits": len(mapes),
                    **{k: statistics.fmean(v) for k, v in scores.items() if k != "mape"}}
                log(f"{label} read {ratio:g}: MAPE {statistics.fmean(mapes):.2f}% over {len(group)} configurations")
        out["noise"][f"{ratio:g}"]["limits"] = {k: limits.count(k) for k in sorted(set(map(str, limits)))}
    return out


def recommend(a: argparse.Namespace, state: dict, save) -> dict:
    models = RESULTS / "models"
    model_dir = models / f"{a.dataset}.throughput.nn-ensemble.model"
    if not model_dir.exists():
        nosqltune("model", "fit", "--study", str(dataset_path(a.dataset)), "--kind", "nn-ensemble", "--out",
                  str(model_dir))
    if "recommended" not in state:   # chosen once and kept, so a resumed run compares the same configuration
        state["recommended"] = json.loads(nosqltune("recommend", "--model", str(model_dir), "--workload",
                                                    f"read={UNSEEN:g}", "--distribution", "uniform", "--format",
                                                    "json"))
        save()
    candidate = RESULTS / f"rafiki-{a.dataset}-read{round(UNSEEN * 100)}.yaml"
    if not candidate.exists():   # the file compare labels its runs by: written once
        candidate.write_text(yaml.safe_dump(state["recommended"]["config"], sort_keys=True))
    db = RESULTS / "rafiki-cloud.db"
    if study_settings(db, "reference") is None:   # the study compare runs in: cloud-disk at the absent read ratio
        nosqltune("tune", "--scenario", "cloud-disk", "--read-ratio", f"{UNSEEN:g}", "--knobs", "cloud", "--optimizer",
                  "random", "--budget", "1", "--confirm-top", "0", "--study", str(db), "--study-name", "reference",
                  "--json")
    return json.loads(nosqltune("compare", "--study", str(db), "--study-name", "reference", "--candidates",
                                str(candidate), "--repeat", str(a.rounds), "--metrics", "throughput,io-per-op",
                                "--json", ok=(0, 1)))


def _mape(entry: dict) -> str:
    low, high = entry["mape_range"]
    return f"{entry['mape']:.2f}% ({low:.2f}-{high:.2f}, {entry['fits']} fits)"


def write(state: dict, a: argparse.Namespace) -> None:
    path = RESULTS / "rafiki-cloud.md"
    lines = ["# RAFIKI on the recorded cloud-disk landscape", "",
             f"Generated by `python3 bench/rafiki_cloud.py` from the `{a.dataset}` dataset and "
             "bench/results/surrogate/cloud13-test.db (configurations no training trial ran, each measured twice).",
             ""]
    lines += kept_notes(path, Path(__file__).name)
    acc = state.get("accuracy")
    if acc:
        lines += ["## The model's error on unseen configurations, against the mean of two real runs", "",
                  "MAPE (the goal's measure) with its range over the fits; median APE; MAPE over the configurations "
                  "whose runs the volume's IOPS cap limited (the bottleneck line of each run); Spearman's rank "
                  "correlation of predicted and measured (what a search needs). Fitted on random 200-trial subsets "
                  "(5 seeds) and on all of the dataset.", "",
                  "| model @ training trials | read | MAPE | median APE | MAPE, IOPS-limited | Spearman |",
                  "|---|---|---|---|---|---|"]
        for label, by_ratio in acc["models"].items():
            for r, m in by_ratio.items():
                lines.append(f"| {label} | {r} | {_mape(m)} | {m.get('median_ape', float('nan')):.2f}% | "
                             f"{m.get('mape_iops', float('nan')):.2f}% | {m.get('spearman', float('nan')):.2f} |")
        lines += ["", "The noise the scores pass through (a single run's distance from the mean of its two): "
                  + "; ".join(f"read {r}: {n['single_run_mape']:.2f}% over {n['configs']} configurations "
                              f"(limits: {', '.join(f'{k} {c}' for k, c in n.get('limits', {}).items())})"
                              for r, n in acc["noise"].items())
                  + f". Read {SEEN:g} is one of the training set's ratios; {UNSEEN:g} is not.", ""]
        for r, entries in acc.get("configs", {}).items():
            names = list(entries[0]["predicted"])
            lines += [f"### Read {r}: each unseen configuration, measured and predicted (models fitted on all)", "",
                      "| measured (mean of 2) | limit | " + " | ".join(names) + " | disk_access_mode | heap_size | "
                      "compression, chunk KiB | read_ahead_kb |",
                      "|---|---|" + "---|" * len(names) + "---|---|---|---|"]
            for e in sorted(entries, key=lambda e: statistics.fmean(e["runs"])):
                c = e["config"]
                lines.append(f"| {statistics.fmean(e['runs']):,.0f} | {e['limit']} | "
                             + " | ".join(f"{e['predicted'].get(k, float('nan')):,.0f}" for k in names)
                             + f" | {c.get('disk_access_mode')} | {c.get('heap_size')} | {c.get('compression')}, "
                             f"{c.get('compression_chunk_length')} | {c.get('read_ahead_kb')} |")
            lines.append("")
    comparison = state.get("comparison")
    if comparison:
        for workload, w in comparison.get("workloads", {}).items():
            lines += [f"## The recommendation for read {UNSEEN:g} against the default ({workload}, "
                      f"{len(w['values']['default'])} rounds)", ""]
            for label, s in w["stats"].items():
                p = "-" if s.get("p_value") is None else f"{s['p_value']:.3g}"
                lines.append(f"- {label}: x{s['mean_speedup']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}], "
                             f"p = {p} ({s['verdict']})" if s.get("mean_speedup") else f"- {label}: -")
        rec = state.get("recommended", {})
        lines += ["", f"Predicted by the model: x{rec.get('predicted_gain', float('nan')):.3f}; the configuration: "
                  + ", ".join(f"{k}={v}" for k, v in sorted((rec.get("config") or {}).items())), ""]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cloud13")
    p.add_argument("--steps", default="test,accuracy,recommend")
    p.add_argument("--test-configs", type=int, default=16, help="configurations of the test set, the default included")
    p.add_argument("--train-size", type=int, default=200)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--rounds", type=int, default=10)
    a = p.parse_args()
    steps = [s for s in a.steps.split(",") if s]
    unknown = set(steps) - {"test", "accuracy", "recommend"}
    if unknown:
        p.error(f"unknown steps {', '.join(sorted(unknown))}: use test, accuracy, recommend")
    from nosqltune.errors import UsageError

    try:   # one line, before anything runs, when the dataset is not exported yet
        dataset_path(a.dataset)
    except UsageError as exc:
        p.error(str(exc))
    state_path = RESULTS / "rafiki-cloud.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}

    def save() -> None:
        state_path.write_text(json.dumps(state, indent=1) + "\n")

    if "test" in steps:
        test_set(a)
    if "accuracy" in steps:
        state["accuracy"] = accuracy(a)
        save()
    if "recommend" in steps:
        state["comparison"] = recommend(a, state, save)
        save()
    write(state, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
