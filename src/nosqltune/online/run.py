"""An online run against real nodes: the controller's reader and applier over JMX, and `run_online`, which
loads and checks the model, opens the run's study and runs the loop (controller.py).

Everything that can be refused is refused before the study is created or a node is asked: the settings (their
own checks), the model (missing, unreadable, of another datastore or knob set, not a throughput model, without
workload features) and the running configuration against the model's knobs.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

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
               reader=None, applier=None, advisor: Advisor | None = None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> OnlineSummary:
    """Check everything, open the run's study and run the loop until `duration_seconds` or Ctrl-C. `reader` and
    `applier` default to JMX on `settings.nodes`; `advisor` to the model in `settings.model`."""
    advisor = advisor or prepare(settings)
    recorder = StudyRecorder.open(settings.study, {**settings.record(), "model_meta": advisor.describe(),
                                                   "started_at": time.time()},
                                  name=settings.study_name, system=settings.system)
    say(f"online study '{recorder.name}' in {settings.study}: {len(settings.nodes)} node(s), "
        f"{settings.window_seconds:g} s windows, horizon {settings.horizon_seconds:g} s"
        + (", dry run" if settings.dry_run else ""))
    try:
        controller = Controller(settings, advisor, reader or JmxReader(settings.nodes),
                                applier or JmxApplier(settings.nodes), recorder, clock=clock, sleep=sleep, say=say,
                                progress=progress)
        return controller.run()
    finally:
        recorder.close()
