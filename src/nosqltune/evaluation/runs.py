"""Repeated cold trials of one configuration, each stored (`bench`, `calibrate`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store import TrialState, open_store
from ..systems import Progress, TrialSettings, quiet, run_trial, target

if TYPE_CHECKING:
    from ..knobs import KnobSpace
    from ..workloads.spec import Workload


def run_trials(study: str, space: "KnobSpace", overrides: dict[str, Any], workload: "Workload",
               settings: TrialSettings, *, repeat: int, tag: str, study_name: str,
               progress: Progress = quiet) -> list[dict]:
    """Run `repeat` cold trials of one configuration in study `study_name` of the store at `study`, storing
    each as it starts and ends; returns the stored rows."""
    store = open_store(study)
    try:
        study_id = store.study(study_name, settings.system, {"harness": settings.to_dict()})
        env_id = store.environment(target(settings.system).fingerprint(settings))
        rows = []
        for i in range(repeat):
            trial_id = store.start_trial(study_id, overrides, {**workload.to_dict(), "harness": settings.to_dict()},
                                         tag=tag, environment_id=env_id)
            progress(f"[{tag}] trial {i + 1}/{repeat} (id {trial_id})")
            row = store.record(trial_id, lambda: run_trial(space, overrides, workload, settings, progress=progress))
            rows.append(row)
            if row["state"] == TrialState.COMPLETE.value:
                progress(f"  -> {row['metrics']['summary']['throughput_ops_s']:.0f} ops/s, "
                         f"{row['timings']['total_s']:.1f} s")
            else:
                progress(f"  -> FAILED ({row['failure_kind']}): {row['error']}")
    finally:
        store.close()
    return rows
