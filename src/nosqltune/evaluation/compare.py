"""Interleaved, repeated cold runs of several configurations, stored and resumable.

Round r runs every candidate once; the order alternates between rounds (A B C, C B A, A B C, ...) so no
candidate always runs first or last and slow drift of the machine is spread over all of them. A finished
(round, candidate) in the store is not run again, so an interrupted comparison continues where it stopped.
"""

from __future__ import annotations

from typing import Any, Callable

from ..store import TrialState

TAG = "compare"


def schedule(labels: list[str], rounds: int) -> list[tuple[int, str]]:
    """(round, label) in run order: ABC CBA ABC ..."""
    order = []
    for r in range(rounds):
        seq = labels if r % 2 == 0 else list(reversed(labels))
        order.extend((r, label) for label in seq)
    return order


def run_summary(summary: dict[str, Any]) -> str:
    """One run in a progress line: its throughput and, where it read, its read p99 (a latency study's objective)."""
    line = f"{summary.get('throughput_ops_s', 0):,.0f} ops/s"
    return line + (f", read p99 {summary['read_p99_ms']:.2f} ms" if summary.get("read_p99_ms") is not None else "")


def run_interleaved(store, study_id: int, candidates: dict[str, dict[str, Any]], rounds: int,
                    runner: Callable[[dict[str, Any]], Any], *, workload_info: dict, environment_id: int | None = None,
                    say: Callable[[str], None] = lambda _: None, group: str | None = None) -> dict[str, list[dict | None]]:
    """Run what is missing; returns label -> rows by round (None where the run failed or is missing).
    `group` tells comparisons in the same study apart (e.g. one per workload and scale)."""
    done: dict[tuple[int, str], dict] = {}
    for row in store.trials(study_id):
        meta = row.get("meta") or {}
        if row["tag"] != TAG or meta.get("candidate") not in candidates or meta.get("group") != group:
            continue
        if row["state"] == TrialState.RUNNING.value:
            store.finish_trial(row["id"], TrialState.FAIL, failure_kind="interrupted",
                               error="the process stopped during this trial")
            continue
        if row["failure_kind"] != "interrupted":
            done[(meta["round"], meta["candidate"])] = row
    plan = schedule(list(candidates), rounds)
    for i, (r, label) in enumerate(plan):
        if (r, label) in done:
            continue
        trial_id = store.start_trial(study_id, candidates[label], workload_info, tag=TAG,
                                     environment_id=environment_id,
                                     meta={"round": r, "candidate": label, **({"group": group} if group else {})})
        say(f"[{i + 1}/{len(plan)}] round {r + 1}/{rounds}: {label}")
        row = store.record(trial_id, lambda: runner(candidates[label]))
        done[(r, label)] = row
        if row["state"] == TrialState.COMPLETE.value:
            say(f"    -> {run_summary(row['metrics']['summary'])}")
        else:
            say(f"    -> FAILED ({row['failure_kind']}): {row['error']}")
    out: dict[str, list[dict | None]] = {}
    for label in candidates:
        out[label] = [done.get((r, label)) if done.get((r, label)) is not None
                      and done[(r, label)]["state"] == TrialState.COMPLETE.value else None for r in range(rounds)]
    return out
