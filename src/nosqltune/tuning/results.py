"""Reading a study's results: configurations grouped over their trials, the best one, and its diff."""

from __future__ import annotations

import statistics
from typing import Any

from ..optimizers.space import TuningSpace
from .objective import Objective


def _mean_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    keys = {k for s in summaries for k, v in s.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out = {}
    for key in keys:
        values = [s[key] for s in summaries if isinstance(s.get(key), (int, float))]
        out[key] = statistics.mean(values) if values else None
    return out


def configurations(rows: list[dict], objective: Objective, workloads: list[str],
                   space: TuningSpace) -> list[dict[str, Any]]:
    """One entry per distinct configuration: its trials, mean summary per workload, value and feasibility.
    A configuration with a failed trial has value None; one not measured on every workload is `partial`."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        if (row.get("meta") or {}).get("instance") is None or row.get("failure_kind") == "interrupted":
            continue
        groups.setdefault(space.key(row["config"]), []).append(row)
    default_key = space.key(space.default())
    out = []
    for key, group in groups.items():
        per_workload: dict[str, list[dict]] = {}
        failed = False
        for row in group:
            if row["state"] != "COMPLETE":
                failed = True
            else:
                per_workload.setdefault(row["meta"]["instance"], []).append(row["metrics"]["summary"])
        means = {w: _mean_summary(per_workload[w]) for w in workloads if w in per_workload}
        partial = len(means) < len(workloads)
        evaluation = objective.evaluate([means[w] for w in workloads if w in means]) if means and not failed else None
        out.append({"config": space.canonical(group[0]["config"]), "kind": "default" if key == default_key
                    else "suggested", "trials": len(group), "trial_ids": [r["id"] for r in group],
                    "failed": failed, "partial": partial, "per_workload": means,
                    "value": evaluation.value if evaluation else None,
                    "feasible": bool(evaluation and evaluation.feasible)})
    return out


def best_configuration(rows: list[dict], objective: Objective, workloads: list[str],
                       space: TuningSpace) -> dict[str, Any] | None:
    """The feasible configuration with the best value, among those measured on every workload (or, when
    none is, among all); ties go to the one measured more often."""
    entries = [e for e in configurations(rows, objective, workloads, space)
               if e["value"] is not None and e["feasible"]]
    complete = [e for e in entries if not e["partial"]]
    pool = complete or entries
    if not pool:
        return None
    sign = 1 if objective.maximize else -1
    return max(pool, key=lambda e: (sign * e["value"], e["trials"]))


def default_entry(rows: list[dict], objective: Objective, workloads: list[str],
                  space: TuningSpace) -> dict[str, Any] | None:
    for entry in configurations(rows, objective, workloads, space):
        if entry["kind"] == "default":
            return entry
    return None


def speedup(objective: Objective, best: float | None, default: float | None) -> float | None:
    """How much better than the default, as a ratio > 1 when better (throughput ratio, or latency ratio
    default / best)."""
    if not best or not default:
        return None
    return best / default if objective.maximize else default / best


def changed_knobs(space: TuningSpace, config: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """knob -> (default, tuned) for every knob whose tuned value differs from its default."""
    config = space.canonical(config)
    return {k.name: (k.default, config[k.name]) for k in space.knobs if config[k.name] != k.default}
