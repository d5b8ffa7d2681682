"""Workers of a parallel study: a process (a thread of `tune`, a Ray task on another machine) that takes the next
waiting trial of a study from the store, runs it where it is, and stores the result.

Everything a worker needs comes from the store: the study's tuning settings (the harness, the datastore or the
surrogate, the fixed knobs, the workloads) and the trial's configuration. A worker keeps the trial's heartbeat
fresh while it runs; killed, its trial goes stale and the coordinator gives it again (store.sql). Its result is
stored only while the trial is still its own."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any, Callable

from ..store import LEASE_TTL_S, TrialState, open_existing_store
from ..surrogate.datafile import is_surrogate

TAG = "tune"


def trial_target(settings, system: str | None = None, *, seed: int = 0, metrics: tuple[str, ...] = ("throughput",)):
    """The target that runs the trials (systems.Target): the settings' datastore, or for `system`
    surrogate:NAME[:KIND] the model of a recorded dataset (seeded; predicting `metrics`)."""
    if is_surrogate(system):
        from ..surrogate.dataset import surrogate_target

        return surrogate_target(system, seed, metrics)
    from ..systems import target

    return target(settings.system)


def search_space(settings, system: str | None = None, workloads=()):
    """The knob space a study searches and stores its knobs against: the datastore's, and for a recorded
    surrogate its knobs as its dataset recorded them (KnobSpace.with_recorded). On a cassandra-stress profile or a
    snapshot (`workloads`: Workloads or their dicts) the table knobs' defaults are that table's own options."""
    from ..errors import UsageError

    space = trial_target(settings).knob_space(settings)
    table = None   # the table options a study's table knobs start from: a profile's, or a snapshot's schema's
    for w in workloads:
        profile = w.get("profile") if isinstance(w, dict) else w.profile
        snapshot = w.get("snapshot") if isinstance(w, dict) else w.snapshot
        if profile:
            table = profile["table"]["options"]
        elif snapshot:
            from ..workloads.snapshot import table_options

            table = table_options(snapshot)
        if table is not None:
            break
    if table and (system or "cassandra") == "cassandra":
        from ..systems.cassandra.schema import table_knob_defaults

        space = space.with_knob_defaults(table_knob_defaults(space, table))
    if is_surrogate(system):
        try:
            space = space.with_recorded(trial_target(settings, system).knob_space(settings).knobs)
        except UsageError:   # a dataset file moved away: a reader still shows the study (a trial would say why)
            pass
    return space


@dataclass
class StudyRunner:
    """How a study's trials run: built from its stored tuning settings (`tune` in the study's settings)."""

    tune: dict[str, Any]

    def __post_init__(self) -> None:
        from ..objective import Objective
        from ..systems import TrialSettings
        from ..workloads.spec import Workload

        self.settings = TrialSettings.from_dict(self.tune["harness"])
        objective = Objective.from_dict(self.tune["spec"]["objective"])
        self.target = trial_target(self.settings, self.tune.get("system", "cassandra"), seed=self.tune["spec"]["seed"],
                                   metrics=(objective.metric,) + tuple(c.metric for c in objective.constraints))
        self.full_space = self.target.knob_space(self.settings)
        self.workloads = {w["name"]: Workload.from_dict(w) for w in self.tune["workloads"]}

    def __call__(self, config: dict, workload: str, progress: Callable[[str], None] | None = None):
        from ..systems.base import quiet

        return self.target.run_trial(self.full_space, {**self.tune["fixed"], **config}, self.workloads[workload],
                                     self.settings, progress=progress or quiet)

    def fingerprint(self) -> dict:
        return self.target.fingerprint(self.settings)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_one(store_url: str, study_name: str, *, worker: str | None = None, ttl_s: float = LEASE_TTL_S,
            progress: Callable[[str], None] | None = None) -> dict[str, Any] | None:
    """Claim the study's next waiting trial, run it here, store its result; returns a short account of it
    (None when no trial was waiting). Never raises for a trial's failure (the trial says FAIL and why)."""
    worker = worker or worker_name()
    store = open_existing_store(store_url)   # never a new empty store (a worker in another folder)
    try:
        study = store.find_study(study_name)
        if study is None:
            raise ValueError(f"no study '{study_name}' in {store.url}")
        runner = StudyRunner(study["settings"]["tune"])
        environment = store.environment(runner.fingerprint())
        row = store.claim_trial(study["id"], worker, tag=TAG, environment_id=environment)
        if row is None:
            return None
        store.update_meta(row["id"], {"worker": worker, "worker_pid": os.getpid()})
        with store.trial_heartbeat(row["id"], worker, ttl_s) as heartbeat:
            try:
                result = runner(row["config"], row["meta"]["instance"], store.phase_recorder(row["id"], progress))
            except Exception as exc:   # the harness itself broke (not the configuration): say so, in the trial
                result = None
                error = f"{type(exc).__name__}: {exc}"
        if result is None:
            kept = store.finish_trial(row["id"], TrialState.FAIL, failure_kind="error", error=error, worker=worker)
        else:
            state = TrialState.COMPLETE if result.state == "COMPLETE" else TrialState.FAIL
            kept = store.finish_trial(row["id"], state, metrics={"summary": result.summary, **(result.metrics or {})},
                                      internals=result.internals, timings=result.timings,
                                      failure_kind=result.failure_kind, error=result.error,
                                      log_excerpt=result.log_excerpt, worker=worker)
        return {"trial": row["id"], "suggestion": row["meta"].get("suggestion"), "stored": kept,
                "lost": heartbeat.lost, "worker": worker}
    finally:
        store.close()
