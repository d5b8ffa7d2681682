"""The trial store's interface: what every backend (SQLite, PostgreSQL) offers the layers above.

Rows come back as plain dicts with JSON columns decoded. Writes that read first (trial numbers, merged
settings, meta) are atomic; one process at a time runs trials in a study, holding its lease, unless the
trials go through the store's queue (store.sql: enqueue, claim, heartbeat, stale trials given again once)."""

from __future__ import annotations

import abc
import enum
import os
import socket
import threading
import time
from typing import Any, Callable, Iterator

from ..errors import UsageError

LEASE_TTL_S = 20.0
PHASE_CHARS = 200   # a stored phase is one line of the trial's progress, cut to this length
PHASE_WAIT_S = 0.5  # how long a phase's write waits for a busy store before the phase is dropped


class TrialState(str, enum.Enum):
    WAITING = "WAITING"      # queued for a worker (store.sql's queue)
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"


class StudyBusy(UsageError):
    """Another live process holds the study's lease: it is running trials in it."""


class Lease:
    """The right to run trials in one study (or one claimed trial), kept alive by a heartbeat thread until
    released. Use it as a context manager; `lost` turns true if another process took it over (our heartbeat
    had stopped)."""

    def __init__(self, beat: Callable[[], bool], release: Callable[[], None], ttl_s: float) -> None:
        self._beat, self._release, self.ttl_s = beat, release, ttl_s
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="study-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.ttl_s / 3):
            try:
                if not self._beat():
                    self.lost = True
                    return
            except Exception:   # a store busy for a moment: the next beat tries again, well within the ttl
                continue

    def release(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=self.ttl_s)
            if not self.lost:
                self._release()

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def lease_owner() -> dict[str, Any]:
    """Who asks for a lease: this process on this host."""
    return {"owner": f"{socket.gethostname()}:{os.getpid()}:{time.time_ns()}", "pid": os.getpid(),
            "host": socket.gethostname()}


def holder_alive(holder: dict[str, Any], now: float, ttl_s: float) -> bool:
    """Whether a stored lease still counts: its heartbeat is younger than the ttl and, on this host, its
    process still runs (a holder that crashed here frees the study at once; elsewhere, after the ttl)."""
    if now - holder["heartbeat_at"] >= ttl_s:
        return False
    if holder["host"] == socket.gethostname():
        try:
            os.kill(int(holder["pid"]), 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    return True


def busy_message(study: str, holder: dict[str, Any], now: float, ttl_s: float) -> str:
    return (f"study '{study}' is being tuned by another process (pid {holder['pid']} on {holder['host']}, heartbeat "
            f"{now - holder['heartbeat_at']:.0f} s ago; a lease not renewed for {ttl_s:.0f} s expires): wait for it "
            "to end, or use another --study-name")


class Store(abc.ABC):
    """Studies, their trials and the environments they ran in."""

    url: str

    @abc.abstractmethod
    def close(self) -> None: ...

    # studies
    @abc.abstractmethod
    def study(self, name: str, system: str = "cassandra", settings: dict | None = None) -> int:
        """The id of study `name`, created (with `settings`) if it does not exist; safe against racing creators."""

    @abc.abstractmethod
    def find_study(self, name: str) -> dict[str, Any] | None:
        """The study as a dict (id, name, system, created_at, settings), or None."""

    @abc.abstractmethod
    def study_by_id(self, study_id: int) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    def studies(self) -> Iterator[dict[str, Any]]: ...

    @abc.abstractmethod
    def update_study_settings(self, study_id: int, changes: dict[str, Any]) -> dict[str, Any]:
        """Merge `changes` key by key into the study's settings (other keys are kept); returns the result."""

    # environments
    @abc.abstractmethod
    def environment(self, fingerprint: dict) -> int:
        """The id of this environment fingerprint, stored once."""

    @abc.abstractmethod
    def environments(self) -> dict[int, dict[str, Any]]:
        """Every stored fingerprint by id."""

    @abc.abstractmethod
    def environment_of(self, environment_id: int) -> dict[str, Any] | None: ...

    # trials
    @abc.abstractmethod
    def start_trial(self, study_id: int, config: dict, workload: dict, *, tag: str | None = None,
                    environment_id: int | None = None, meta: dict | None = None) -> int:
        """Record a trial as RUNNING before it runs, numbered next in its study (atomically); returns its id."""

    @abc.abstractmethod
    def finish_trial(self, trial_id: int, state: TrialState, *, metrics: dict | None = None,
                     internals: dict | None = None, timings: dict | None = None, failure_kind: str | None = None,
                     error: str | None = None, log_excerpt: str | None = None, worker: str | None = None) -> bool:
        """Store a trial's end; with `worker`, only while that worker still holds it (False: nothing written)."""

    @abc.abstractmethod
    def update_meta(self, trial_id: int, meta: dict, wait_s: float | None = None) -> None:
        """Merge entries into a trial's meta; `wait_s` bounds the wait for another program's lock on the store
        (the store's usual wait when None)."""

    @abc.abstractmethod
    def retag(self, trial_id: int, tag: str) -> None:
        """Change a trial's tag (e.g. set a disturbed measurement aside)."""

    @abc.abstractmethod
    def trials(self, study_id: int | None = None, state: TrialState | None = None) -> list[dict[str, Any]]: ...

    @abc.abstractmethod
    def trial(self, trial_id: int) -> dict[str, Any]: ...

    @abc.abstractmethod
    def trials_changed(self, study_id: int, after_id: int, after_end: float) -> list[dict[str, Any]]:
        """The study's trials newer than `after_id`, ended at or after `after_end`, or still open."""

    @abc.abstractmethod
    def trials_signature(self, study_id: int) -> tuple:
        """A cheap value that changes whenever a trial of the study is written (the dashboard polls it)."""

    # who runs trials in a study
    @abc.abstractmethod
    def acquire_lease(self, study_id: int, ttl_s: float = LEASE_TTL_S) -> Lease:
        """The study's lease for this process, or StudyBusy when another live process holds it."""

    def phase_recorder(self, trial_id: int,
                       passes_to: Callable[[str], None] | None = None) -> Callable[[str], None]:
        """A progress callback for a running trial: each message goes on to `passes_to` (the terminal), and each
        change of phase is stored in the trial's meta ("phase", "phase_at"), one write per change, so that a
        reader of the store (the dashboard) sees where the trial is. A busy store loses a phase, never the trial,
        and never holds it up: a phase waits at most PHASE_WAIT_S for another program's lock (the trial's own
        result waits the store's full wait, and stops the study when that runs out)."""
        last: list[str | None] = [None]

        def record(message: str) -> None:
            if passes_to is not None:
                passes_to(message)
            phase = " ".join(str(message).split())[:PHASE_CHARS]
            if phase and phase != last[0]:
                last[0] = phase
                try:
                    self.update_meta(trial_id, {"phase": phase, "phase_at": time.time()}, wait_s=PHASE_WAIT_S)
                except Exception:
                    pass
        return record

    def record(self, trial_id: int, run) -> dict[str, Any]:
        """Call `run()` for a started trial and store the result it returns (a systems.TrialResult); a Ctrl-C,
        an exit or an error outside the trial marks the trial interrupted and goes on up. Returns the row."""
        try:
            result = run()
        except BaseException as exc:
            self.finish_trial(trial_id, TrialState.FAIL, failure_kind="interrupted",
                              error=str(exc) or type(exc).__name__)
            raise
        state = TrialState.COMPLETE if result.state == "COMPLETE" else TrialState.FAIL
        self.finish_trial(trial_id, state, metrics={"summary": result.summary, **(result.metrics or {})},
                          internals=result.internals, timings=result.timings, failure_kind=result.failure_kind,
                          error=result.error, log_excerpt=result.log_excerpt)
        return self.trial(trial_id)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
