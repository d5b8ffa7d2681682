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
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UsageError
from .advisor import Advisor
from .controller import Controller, Say
from .observe import JmxNode, LiveOutcome, TableTarget, alter_table, apply_live, read_snapshot
from .plan import Change
from .record import StudyRecorder, refuse_taken_name
from .settings import OnlineSettings, OnlineSummary
from .window import Snapshot


# the trace's client marks its operations idempotent (every YCSB operation is), so its driver retries one whose
# connection closed under it (a node drained for a rolling restart) on another replica instead of failing it
IDEMPOTENT = {"cassandra.idempotent": "true"}


class JmxReader:
    """Each node's ClientRequest counters over JMX (observe.read_snapshot): a silent node is said, never raised."""

    def __init__(self, nodes: Sequence[JmxNode], timeout: float = 15.0, access=None) -> None:
        self.nodes, self.timeout, self.access = tuple(nodes), timeout, access

    def read(self, say: Say) -> Snapshot:
        from ..systems.cassandra.internals import client_requests

        def read(port, timeout, host):
            return client_requests(port, timeout=timeout, host=host, access=self.access)

        return read_snapshot(self.nodes, timeout=self.timeout, say=say, read=read)


class JmxApplier:
    """Live changes over JMX on every node, read back (observe.apply_live), and the table options with ALTER TABLE
    through `table`'s CQL address, read back from the schema (observe.alter_table; `space` renders their values).
    A node setting whose live path is not a JMX operation is not sent: it comes back among the changes not
    applied, with the table options when there is no `table` and the keyspace options."""

    def __init__(self, nodes: Sequence[JmxNode], timeout: float = 30.0, table: TableTarget | None = None,
                 space=None, access=None, cql_access=None) -> None:
        self.nodes, self.timeout, self.table, self.space = tuple(nodes), timeout, table, space
        self.access, self.cql_access = access, cql_access

    def apply(self, changes: Sequence[Change], say: Say, nodes: Sequence[str] | None = None) -> LiveOutcome:
        from ..systems.cassandra.internals import jmx_knob

        over_jmx, other = [], []
        for change in changes:
            if change.applies in ("table", "keyspace"):
                over_jmx.append(change)   # apply_live hands them back in not_jmx
                continue
            try:
                jmx_knob(change.knob)
                over_jmx.append(change)
            except UsageError:   # handed back: the controller says what was not applied, and why
                other.append(change)
        from ..systems.cassandra import cql
        from ..systems.cassandra.internals import set_live

        def setter(port, knob, value, timeout, host):
            return set_live(port, knob, value, timeout=timeout, host=host, access=self.access)

        targets = self.nodes if nodes is None else tuple(n for n in self.nodes if n.name in set(nodes))
        outcome = apply_live(over_jmx, targets, timeout=self.timeout, say=say, setter=setter)
        left = outcome.not_jmx
        results = outcome.results
        tables = [c for c in left if c.applies == "table"]
        if tables and self.table is not None and self.space is not None:
            target = self.table

            def connect():
                return cql.session(target.host, target.port, timeout=self.timeout, access=self.cql_access)

            results += alter_table(tables, self.space, self.table, timeout=self.timeout, say=say, connect=connect)
            left = tuple(c for c in left if c.applies != "table")
        return LiveOutcome(results, left + tuple(other))


def prepare(settings: OnlineSettings) -> Advisor:
    """The model, loaded and checked against the cluster (UsageError: one line, nothing started)."""
    advisor = Advisor.load(settings.model, system=settings.system, knobs=settings.knobs, nodes=settings.node_count,
                           replication_factor=settings.replication_factor, search=settings.search, seed=settings.seed)
    advisor.running_config(settings.running)
    return advisor


def run_online(settings: OnlineSettings, *, say: Say = lambda _: None, progress: Say = lambda _: None,
               reader=None, applier=None, advisor: Advisor | None = None, run_phase=None, restarter=None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> OnlineSummary:
    """Check everything, open the run's study and run the loop until `duration_seconds` (the trace's length when a
    trace is driven) or Ctrl-C. `reader` and `applier` default to JMX on `settings.nodes`; `advisor` to the model in
    `settings.model`; `run_phase` (a trace's phases) to the YCSB client against `settings.cql`; `restarter`
    (controller.Restarter: nodes the run may restart) to none, so restart decisions are recorded, not performed.
    With `settings.local`, the run first starts and loads that cluster (local.py), watches its nodes, restarts
    them when a restart pays, and stops them at the end."""
    advisor = advisor or prepare(settings)
    if settings.local is not None and "heap_size" in advisor.space.names and "heap_size" not in settings.running:
        # the heap the nodes start with (--heap), not the knob file's default
        settings = replace(settings, running={**settings.running, "heap_size": settings.local.heap_mb})
    elif settings.local is not None:   # a model without the heap: its advice still keeps the rules over the real one
        advisor.hold({"heap_size": settings.local.heap_mb})
    if settings.local is None:
        return _watch(settings, advisor, settings.record(), say=say, progress=progress, reader=reader,
                      applier=applier, run_phase=run_phase, restarter=restarter, clock=clock, sleep=sleep)
    from ..store import open_store
    from .local import SETTLE_S, local_cluster

    store = open_store(settings.study)   # a store that cannot be opened, or a study name taken: said before the boot
    try:
        if settings.study_name is not None:
            refuse_taken_name(store, settings.study_name, settings.study)
    finally:
        store.close()
    with local_cluster(settings.local, settings.trace, settings.trace_records, settings.replication_factor,
                       advisor.space.knob_space, say=say) as started:
        # before any restart is measured, the cluster's own start prices one: its seconds per node and the settle
        # (not the stated 120 s default, which is for a cluster the run knows nothing about)
        measured = settings.restart_seconds or (started.boot_seconds / settings.local.nodes + SETTLE_S,)
        watched = replace(settings, nodes=started.nodes, cql=started.cql, local=None, restart_seconds=measured)
        record = {**watched.record(), "local": {**settings.local.record(), "boot_seconds": started.boot_seconds,
                                                "load_seconds": started.load_seconds}}
        return _watch(watched, advisor, record, say=say, progress=progress, reader=reader, applier=applier,
                      run_phase=run_phase, restarter=restarter or started.restarter, clock=clock, sleep=sleep,
                      contact=started.contact)


def _watch(settings: OnlineSettings, advisor: Advisor, record: dict[str, Any], *, say: Say, progress: Say, reader,
           applier, run_phase, restarter, clock: Callable[[], float], sleep: Callable[[float], None],
           contact: str | None = None) -> OnlineSummary:
    """The loop on `settings.nodes`; `contact`: the trace's client contact points (default the CQL host)."""
    from ..runtime.environment import fingerprint
    from ..systems.cassandra.provision import DEFAULT_VERSION

    # the machine watched from: the nodes' own for a cluster the run started, whose version is then known
    version = DEFAULT_VERSION if "local" in record else "remote nodes (version not read)"
    recorder = StudyRecorder.open(settings.study, {**record, "model_meta": advisor.describe(),
                                                   "started_at": time.time()},
                                  name=settings.study_name, system=settings.system,
                                  environment=fingerprint(settings.system, version))
    say(f"online study '{recorder.name}' in {settings.study}: {len(settings.nodes)} node(s), "
        f"{settings.window_seconds:g} s windows, horizon {settings.horizon_seconds:g} s"
        + (", dry run" if settings.dry_run else "") + (", restarts performed" if restarter is not None else ""))
    driver = TraceDriver(settings, progress, run_phase, contact) if settings.trace is not None else None
    try:
        applier = applier or JmxApplier(settings.nodes, table=settings.table_target(),
                                        space=advisor.space.knob_space, access=settings.jmx_access,
                                        cql_access=settings.cql_access)
        controller = Controller(settings, advisor, reader or JmxReader(settings.nodes, access=settings.jmx_access),
                                applier, recorder,
                                clock=clock, sleep=sleep, say=say, progress=progress, restarter=restarter)
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

    def __init__(self, settings: OnlineSettings, progress: Say, run_phase=None, contact: str | None = None) -> None:
        from ..workloads.trace import ycsb_phase_runner

        self.settings = settings
        self.progress = progress
        host, port = settings.cql
        self.run_phase = run_phase or ycsb_phase_runner(contact or host, port, extra=IDEMPOTENT)
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
