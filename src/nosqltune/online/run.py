"""An online run against real nodes: the controller's reader and applier over JMX, and `run_online`, which
loads and checks the model, opens the run's study and runs the loop (controller.py).

Everything that can be refused is refused before the study is created or a node is asked: the settings (their
own checks), the model (missing, unreadable, of another datastore or knob set, not a throughput model, without
workload features) and the running configuration against the model's knobs.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UsageError
from .advisor import Advisor
from .controller import Controller, Say
from .observe import JmxNode, LiveOutcome, apply_live, read_snapshot
from .plan import Change
from .record import StudyRecorder
from .settings import OnlineSettings, OnlineSummary
from .window import Snapshot


class JmxReader:
    """Each node's ClientRequest counters over JMX (observe.read_snapshot): a silent node is said, never raised."""

    def __init__(self, nodes: Sequence[JmxNode], timeout: float = 15.0) -> None:
        self.nodes, self.timeout = tuple(nodes), timeout

    def read(self, say: Say) -> Snapshot:
        return read_snapshot(self.nodes, timeout=self.timeout, say=say)


class JmxApplier:
    """Live changes over JMX on every node, read back (observe.apply_live). A node setting whose live path is not
    a JMX operation is not sent: it comes back among the changes not applied, with the table options."""

    def __init__(self, nodes: Sequence[JmxNode], timeout: float = 30.0) -> None:
        self.nodes, self.timeout = tuple(nodes), timeout

    def apply(self, changes: Sequence[Change], say: Say) -> LiveOutcome:
        from ..systems.cassandra.internals import jmx_knob

        over_jmx, other = [], []
        for change in changes:
            if change.applies in ("table", "keyspace"):
                over_jmx.append(change)   # apply_live hands them back in not_jmx
                continue
            try:
                jmx_knob(change.knob)
                over_jmx.append(change)
            except UsageError as exc:
                say(f"{change.knob} not applied: {exc}")
                other.append(change)
        outcome = apply_live(over_jmx, self.nodes, timeout=self.timeout, say=say)
        return LiveOutcome(outcome.results, outcome.not_jmx + tuple(other))


def prepare(settings: OnlineSettings) -> Advisor:
    """The model, loaded and checked against the cluster (UsageError: one line, nothing started)."""
    advisor = Advisor.load(settings.model, system=settings.system, knobs=settings.knobs, nodes=len(settings.nodes),
                           replication_factor=settings.replication_factor, search=settings.search, seed=settings.seed)
    advisor.running_config(settings.running)
    return advisor


def run_online(settings: OnlineSettings, *, say: Say = lambda _: None, progress: Say = lambda _: None,
               reader=None, applier=None, advisor: Advisor | None = None, run_phase=None, restarter=None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> OnlineSummary:
    """Check everything, open the run's study and run the loop until `duration_seconds` (the trace's length when a
    trace is driven) or Ctrl-C. `reader` and `applier` default to JMX on `settings.nodes`; `advisor` to the model in
    `settings.model`; `run_phase` (a trace's phases) to the YCSB client against `settings.trace_target`; `restarter`
    (controller.Restarter: nodes the run may restart) to none, so restart decisions are recorded, not performed."""
    advisor = advisor or prepare(settings)
    recorder = StudyRecorder.open(settings.study, {**settings.record(), "model_meta": advisor.describe(),
                                                   "started_at": time.time()},
                                  name=settings.study_name, system=settings.system)
    say(f"online study '{recorder.name}' in {settings.study}: {len(settings.nodes)} node(s), "
        f"{settings.window_seconds:g} s windows, horizon {settings.horizon_seconds:g} s"
        + (", dry run" if settings.dry_run else ""))
    driver = TraceDriver(settings, progress, run_phase) if settings.trace is not None else None
    try:
        controller = Controller(settings, advisor, reader or JmxReader(settings.nodes),
                                applier or JmxApplier(settings.nodes), recorder, clock=clock, sleep=sleep, say=say,
                                progress=progress, restarter=restarter)
        if driver is not None:
            driver.start()
        interrupted = True
        try:
            summary = controller.run()
            interrupted = summary.stopped == "interrupted"
        finally:
            if driver is not None:
                driver.stop(interrupted)
        if driver is not None:   # what the trace's client did, beside the windows
            summary.trace, summary.trace_error = driver.rows, driver.error
            if driver.error:
                say(f"the trace's client stopped early: {driver.error}")
            recorder.finish(summary.as_dict())
        return summary
    finally:
        recorder.close()


class TraceDriver:
    """The trace of `settings.trace` driven by the YCSB client in a thread of its own while the loop watches
    (workloads/trace.py); its client folders live in a temporary folder, removed at the end. `stop` waits for
    the trace's end (the watch lasts at least the trace), or, when the run was interrupted, lets no further phase
    start and waits for the running one (each ends by its own length)."""

    def __init__(self, settings: OnlineSettings, progress: Say, run_phase=None) -> None:
        from ..workloads.trace import ycsb_phase_runner

        self.settings = settings
        self.progress = progress
        host, port = settings.trace_target
        self.run_phase = run_phase or ycsb_phase_runner(host, port)
        self.rows: list[dict[str, Any]] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._folder = tempfile.TemporaryDirectory(prefix="nosqltune-trace-")
        self._thread = threading.Thread(target=self._drive, name="trace", daemon=True)

    def _drive(self) -> None:
        from ..workloads.trace import drive

        try:
            drive(self.settings.trace, self.run_phase, records=self.settings.trace_records,
                  folder=Path(self._folder.name), stop=self._stop, progress=self.progress, rows=self.rows)
        except Exception as exc:   # the client failed (TrialError) or could not start: said, the loop goes on
            self.error = " ".join(str(exc).split())[:300] or type(exc).__name__

    def start(self) -> None:
        self._thread.start()

    def stop(self, interrupted: bool) -> None:
        trace = self.settings.trace
        if interrupted:
            self._stop.set()
        self._thread.join(timeout=(max(p.seconds for p in trace.phases) if interrupted else trace.seconds) + 120)
        self._folder.cleanup()
