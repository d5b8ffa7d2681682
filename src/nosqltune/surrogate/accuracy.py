"""How well a surrogate predicts what it has not seen (RAFIKI Table 2, the RF/GBDT paper's Table 5 and
Fig. 2).

Two questions, two grouped splits: unseen configurations (every trial of a test configuration, on every
workload, is out of training) and unseen workloads (every trial of a test workload is out). Scores are
averaged over repeated random splits: mean absolute percentage error, R^2 and RMSE (in the target's unit).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

SPLITS = ("configs", "workloads")


def scores(measured: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    measured, predicted = np.asarray(measured, float), np.asarray(predicted, float)
    residual = measured - predicted
    total = float(np.sum((measured - measured.mean()) ** 2))
    return {"mape": float(np.mean(np.abs(residual) / np.abs(measured))) * 100,
            "r2": 1 - float(np.sum(residual ** 2)) / total if total > 0 else float("nan"),
            "rmse": float(np.sqrt(np.mean(residual ** 2)))}


def grouped_splits(groups: Sequence[Any], *, repeats: int = 5, test_share: float = 0.2,
                   seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """`repeats` random splits in which no group has rows on both sides."""
    labels = np.array([str(g) for g in groups])
    distinct = np.unique(labels)
    if len(distinct) < 2:
        raise ValueError("a grouped split needs at least two groups")
    n_test = min(max(1, int(round(len(distinct) * test_share))), len(distinct) - 1)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(repeats):
        test_groups = set(rng.choice(distinct, n_test, replace=False))
        test = np.array([label in test_groups for label in labels])
        out.append((np.flatnonzero(~test), np.flatnonzero(test)))
    return out


def leave_one_group_out(groups: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    labels = np.array([str(g) for g in groups])
    return [(np.flatnonzero(labels != g), np.flatnonzero(labels == g)) for g in np.unique(labels)]


def evaluate(table, kind: str, metric: str, split: str = "configs", *, repeats: int = 5, seed: int = 0,
             train_size: int | None = None, model_options: dict | None = None) -> dict[str, Any]:
    """Fit on the training side of each split (optionally a random subset of `train_size` rows), score
    on the test side; mean and sd over the splits."""
    from .models import make_model

    y, mask = table.target(metric)
    rows = np.flatnonzero(mask)
    X, y = table.X[rows], y[rows]
    configs = [table.configs[i] for i in rows]
    workloads = [table.workloads[i] for i in rows]
    if split == "configs":
        splits = grouped_splits(configs, repeats=repeats, seed=seed)
    elif split == "workloads":
        splits = leave_one_group_out(workloads)
    else:
        raise ValueError(f"unknown split {split!r}")
    rng = np.random.default_rng(seed + 7)
    per_split = []
    for n, (train, test) in enumerate(splits):
        if train_size is not None and train_size < len(train):
            train = np.sort(rng.choice(train, train_size, replace=False))
        model = make_model(kind, seed=seed + n, **(model_options or {}))
        model.fit(X[train], y[train], groups=[configs[i] for i in train])
        per_split.append(scores(y[test], model.predict(X[test])) | {"train": len(train), "test": len(test)})
    out: dict[str, Any] = {"kind": kind, "metric": metric, "split": split, "splits": len(per_split)}
    for key in ("mape", "r2", "rmse", "train", "test"):
        values = np.array([s[key] for s in per_split], float)
        out[key] = float(np.nanmean(values))
        out[f"{key}_sd"] = float(np.nanstd(values))
    return out


def learning_curve(table, kind: str, metric: str, sizes: Sequence[int], *, repeats: int = 5,
                   seed: int = 0) -> list[dict[str, Any]]:
    """Error on unseen configurations versus the number of training trials (the RF/GBDT paper's Fig. 2)."""
    return [evaluate(table, kind, metric, "configs", repeats=repeats, seed=seed, train_size=size) for size in sizes]
