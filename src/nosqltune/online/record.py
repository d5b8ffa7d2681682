"""Where an `online` run keeps what it saw and decided: one study of the trial store per run.

The study's settings hold the run under the key "online" (model, nodes, window, horizon, the cluster's
replication factor, dry run, and at the end the run's summary). No "tune" or "collect" key: the dashboard, the
report and the model fitting select their studies by those keys and their trials by the tags "tune",
"collect" and "compare", so an online study is never taken for a tuning study, nor its windows for trials.

Each window is one stored row, tagged `WINDOW_TAG` ("online-window"), COMPLETE when the window was read:
- config: the configuration the cluster ran during the window (the model's knobs);
- workload: {"name": "observed", "window": its number, "observed_mix": the read/write/scan shares};
- metrics: {"summary": throughput_ops_s and the p99 of reads, writes and scans in ms, as trials name them,
  "window": the window's own summary (window.Window.summary)};
- timings: the window's start and end on the run's clock;
- environment_id: the machine the run watched from (runtime/environment.py's fingerprint), and
  internals["machine_probe"]: the machine's speed (runtime/probe.py), taken beside the running cluster
  (`under_load`: true) at the first window and again every PROBE_EVERY_S of wall time, each window carrying the
  latest with its age, so that a run's figures can be set beside another's only when the machines match;
- meta["online"]: everything decided in the window, in the order it happened: the lines said (a silent node),
  the shift detector's verdict, the guard's verdict on a pending live change and its rollback, the model's
  features and recommendation, the plan, what was applied and read back, and the restart decision with its
  numbers.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from ..errors import UsageError
from ..store import Store, TrialState, open_store
from .window import KINDS, Window

WINDOW_TAG = "online-window"
SETTINGS_KEY = "online"
PROBE_EVERY_S = 300.0   # wall seconds between two speed probes of the machine (each about 0.15 s of one core)


def default_probe() -> dict[str, Any]:
    """The machine's speed now, beside the running cluster."""
    from ..runtime.paths import work_dir
    from ..runtime.probe import machine_record

    return machine_record(work_dir(), under_load=True)


def window_metrics(window: Window) -> dict[str, Any]:
    """A window's figures under the names trials use: throughput_ops_s, read/write/scan p99 in ms."""
    summary: dict[str, Any] = {"throughput_ops_s": window.ops_per_second, "operations": window.operations,
                               "failures": window.failures}
    for kind in KINDS:
        p99 = window.p99(kind)
        summary[f"{kind}_p99_ms"] = None if p99 is None else p99 / 1000.0
    return {"summary": summary, "window": window.summary()}


def refuse_taken_name(store: Store, name: str, url: str) -> None:
    """UsageError (one line) for an online study name that is empty or taken in the store."""
    if not name.strip():
        raise UsageError("the online study's name must not be empty")
    if store.find_study(name) is not None:
        raise UsageError(f"study '{name}' exists already in {url}: each online run has a study of its own; give "
                         "another name or leave it out")


class StudyRecorder:
    """One online run's study: created at the start, one row per window, its summary at the end."""

    def __init__(self, store: Store, study_id: int, name: str, *, environment_id: int | None = None,
                 probe: Callable[[], dict[str, Any]] = default_probe) -> None:
        self.store, self.study_id, self.name = store, study_id, name
        self.environment_id, self.probe = environment_id, probe
        self.rows = 0
        self._probe: dict[str, Any] | None = None
        self._probed_at = 0.0

    def machine_probe(self) -> dict[str, Any]:
        """The latest probe of the machine, taken anew when none is younger than PROBE_EVERY_S; with its age."""
        now = time.monotonic()
        if self._probe is None or now - self._probed_at >= PROBE_EVERY_S:
            self._probe, self._probed_at = self.probe(), now
        return {**self._probe, "age_s": round(now - self._probed_at, 1)}

    @classmethod
    def open(cls, url: str, settings: Mapping[str, Any], name: str | None = None, system: str = "cassandra",
             now: float | None = None, environment: Mapping[str, Any] | None = None,
             probe: Callable[[], dict[str, Any]] = default_probe) -> "StudyRecorder":
        """A new study in the store at `url` for this run: `name` when given (it must be new), else
        online-YYYYmmdd-HHMMSS (with -2, -3... when taken). `environment`: the machine's fingerprint, stored
        with every window; `probe`: what measures the machine's speed."""
        store = open_store(url)
        try:
            if name is not None:
                refuse_taken_name(store, name, url)
                chosen = name
            else:
                stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
                chosen, n = f"online-{stamp}", 1
                while store.find_study(chosen) is not None:
                    n += 1
                    chosen = f"online-{stamp}-{n}"
            study_id = store.study(chosen, system=system, settings={SETTINGS_KEY: dict(settings)})
            environment_id = store.environment(dict(environment)) if environment is not None else None
        except BaseException:
            store.close()
            raise
        return cls(store, study_id, chosen, environment_id=environment_id, probe=probe)

    def window(self, number: int, window: Window, config: Mapping[str, Any], record: Mapping[str, Any]) -> int:
        """Store one window as a row (module docstring); returns its id."""
        workload = {"name": "observed", "window": number, "observed_mix": window.mix.as_dict()}
        trial = self.store.start_trial(self.study_id, dict(config), workload, tag=WINDOW_TAG,
                                       environment_id=self.environment_id, meta={SETTINGS_KEY: dict(record)})
        self.store.finish_trial(trial, TrialState.COMPLETE, metrics=window_metrics(window),
                                internals={"machine_probe": self.machine_probe()},
                                timings={"window_start": window.start, "window_end": window.end,
                                         "seconds": window.seconds})
        self.rows += 1
        return trial

    def finish(self, summary: Mapping[str, Any]) -> None:
        """The run's summary into the study's settings."""
        self.store.update_study_settings(self.study_id, {SETTINGS_KEY: {**self.settings(), "summary": dict(summary),
                                                                        "ended_at": time.time()}})

    def settings(self) -> dict[str, Any]:
        study = self.store.study_by_id(self.study_id) or {}
        return dict((study.get("settings") or {}).get(SETTINGS_KEY) or {})

    def close(self) -> None:
        self.store.close()
