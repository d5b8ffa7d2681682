"""A study with several trials at once (`tune --parallel N`): the store is the queue, workers run the trials.

The coordinator keeps up to N suggestions outstanding: it asks the optimizer (which handles pending
suggestions, see optimizers.base), queues each suggestion's trials in the store (WAITING), and lets its executor
start workers (tuning.executors) that claim and run them. Results are told to the optimizer in the order of the
suggestions, whatever order the trials finish in: the k-th ask always follows the same tells, so a resumed study
replays exactly as a serial one does (N, the window, is stored with the study and kept on resume).

Faults: a worker that dies (killed, machine gone) stops its trial's heartbeat; after `ttl_s` the coordinator
marks the trial FAIL `stale` and the store queues it again, once. A retry that goes stale too is a failed trial
(the optimizer is told the penalty, as for any failure). A trial found with no live row (interrupted by a Ctrl-C
of an earlier session, for instance) is queued again. Nothing is lost and no result counts twice: a point is
evaluated on exactly one final row per workload.
"""

from __future__ import annotations

import time
from collections import deque

from ..errors import NosqltuneError
from ..optimizers import make_optimizer
from ..optimizers.base import Suggestion
from ..store import LEASE_TTL_S, TrialState
from .loop import TAG, Point, TuningLoop
from .results import counted
from .executors import Executor

FINAL = (TrialState.COMPLETE.value, TrialState.FAIL.value)
LIVE = (TrialState.WAITING.value, TrialState.RUNNING.value)


class ParallelLoop(TuningLoop):
    def __init__(self, *args, executor: Executor, window: int, ttl_s: float = LEASE_TTL_S, poll_s: float = 0.2,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.executor = executor
        self.window = max(1, int(window))
        self.ttl_s = ttl_s
        self.poll_s = poll_s
        self._handles: list = []
        self._last_stale_check = 0.0
        self.worker_errors: list[str] = []

    # ------------------------------------------------------------------ the store as seen by the coordinator
    def _tune_rows(self) -> list[dict]:
        return [r for r in self.store.trials(self.study_id) if r["tag"] == TAG]

    @staticmethod
    def _final(rows: list[dict]) -> dict[str, dict]:
        """The row that counts per workload among one suggestion's rows: finished, not interrupted, and not a
        stale trial that was given again (its retry counts instead)."""
        return {row["meta"]["instance"]: row for row in counted(rows) if row["state"] in FINAL}

    def _queue(self, point: Point, suggestion: Suggestion, workloads: list[str], rows: list[dict]) -> int:
        """Queue the trials of `point` that have neither a final nor a live row; returns how many."""
        have = set(self._final(rows)) | {r["meta"]["instance"] for r in rows if r["state"] in LIVE}
        queued = 0
        for name in workloads:
            if name in have:
                continue
            meta = {"suggestion": point.number, "kind": point.kind, "optimizer": self.spec.optimizer,
                    "instance": name, **({"opt": suggestion.meta} if suggestion.meta else {})}
            self.store.enqueue_trial(self.study_id, point.config, self.workload_info(name), tag=TAG,
                                     environment_id=self.environment_id, meta=meta)
            self.display.trial_started(self, suggestion, name, point.kind)
            queued += 1
        return queued

    def _tend(self) -> None:
        """One round of the coordinator's care: stale trials marked (and given again), workers started for the
        trials that wait, ended workers collected."""
        now = time.monotonic()
        if now - self._last_stale_check >= min(self.ttl_s / 4, 2.0):
            self._last_stale_check = now
            for trial_id in self.store.fail_stale_trials(self.study_id, self.ttl_s):
                self.display.note(f"trial {trial_id}: its worker stopped sending heartbeats; given again (once)")
        for handle, error in self.executor.finished(self._handles, 0 if not self._handles else self.poll_s):
            self._handles.remove(handle)
            if error:
                self.worker_errors.append(error)
                self.display.note(f"a worker ended with an error (its trial goes stale and is given again): {error}")
        states = [r["state"] for r in self.store.trials(self.study_id) if r["tag"] == TAG]
        wanted = min(self.executor.slots, states.count(TrialState.WAITING.value)
                     + states.count(TrialState.RUNNING.value))
        while len(self._handles) < wanted:
            self._handles.append(self.executor.start())
        if not self._handles:
            time.sleep(self.poll_s)

    def _await(self, point: Point, suggestion: Suggestion, workloads: list[str]) -> None:
        """Wait until every workload of `point` has its final row; queue again what was lost on the way."""
        while True:
            rows = [r for r in self._tune_rows() if r["meta"].get("suggestion") == point.number]
            final = self._final(rows)
            if all(w in final for w in workloads):
                point.rows = [final[w] for w in workloads]
                return
            self._queue(point, suggestion, workloads, rows)
            self._tend()

    # ------------------------------------------------------------------ the loop
    def run(self) -> str:
        optimizer = make_optimizer(self.spec.optimizer, self.space, seed=self.spec.seed, budget=self.spec.budget,
                                   workloads=self.spec.workloads, workdir=self.workdir,
                                   include_default=self.spec.include_default, options=self.spec.options)
        window = min(self.window, optimizer.max_pending or self.window)
        if window < self.window:
            self.display.note(f"{self.spec.optimizer} takes {window} suggestion(s) at a time: the study runs "
                              f"{window} trial(s) at once")
        stored = {}
        for row in self._tune_rows():
            stored.setdefault(int(row["meta"]["suggestion"]), []).append(row)
        finished = sum(len(self._final(rows)) for rows in stored.values())
        self.trials_used = finished
        self.display.start(self)
        outstanding: deque[tuple[Point, Suggestion, list[str], int]] = deque()   # (..., trials it still needs)
        committed = 0   # trials the outstanding points still need
        reason = "optimizer finished"
        asking = True
        number = 0
        try:
            if self.spec.include_default and not optimizer.picks_instances:
                default = Suggestion(self.space.default())
                point = Point(0, default.config, "default")
                if self.trials_used + len(self.spec.workloads) > self.spec.budget and not stored.get(0):
                    return self._finish("budget")
                # the default is measured and observed before the first ask, as in a serial study (SMAC would
                # otherwise suggest its own default, the same configuration, while ours runs)
                self._queue(point, default, self.spec.workloads, stored.get(0, []))
                self._settle(point, default, list(self.spec.workloads), stored, optimizer, is_default=True)
                number = 1
            while True:
                while asking and len(outstanding) < window:
                    why = self._budget_left_parallel(committed)
                    if why:
                        reason, asking = why, False
                        break
                    began = time.perf_counter()
                    suggestion = optimizer.ask()
                    ask_s = time.perf_counter() - began
                    if suggestion is None:
                        asking = False
                        break
                    workloads = [suggestion.instance] if suggestion.instance else list(self.spec.workloads)
                    rows = stored.get(number, [])
                    missing = len([w for w in workloads if w not in self._final(rows)])
                    if self.trials_used + committed + missing > self.spec.budget:
                        reason, asking = "budget", False
                        break
                    if rows and self.space.key(rows[0]["config"]) != self.space.key(suggestion.config):
                        raise NosqltuneError(f"cannot resume: {self.spec.optimizer} now suggests a different "
                                             f"configuration at step {number} than the stored one (was the library "
                                             "upgraded, or --parallel changed?); start a new study (--study-name)")
                    if not rows:
                        self.ask_seconds.append(ask_s)
                        suggestion.meta = {**suggestion.meta, "ask_s": round(ask_s, 4)}
                    kind = "default" if self.space.key(suggestion.config) == self.space.key(self.space.default()) \
                        else "suggested"
                    point = Point(number, suggestion.config, kind)
                    self._queue(point, suggestion, workloads, rows)
                    outstanding.append((point, suggestion, workloads, missing))
                    committed += missing
                    number += 1
                if not outstanding:
                    break
                point, suggestion, workloads, missing = outstanding.popleft()
                self._settle(point, suggestion, workloads, stored, optimizer)
                committed -= missing
        finally:
            optimizer.close()
        return self._finish(reason)

    def _settle(self, point: Point, suggestion: Suggestion, workloads: list[str], stored: dict, optimizer, *,
                is_default: bool = False) -> None:
        """Wait for a point's trials, evaluate it and tell the optimizer (observe, for the default)."""
        self._await(point, suggestion, workloads)
        before = {r["id"] for r in stored.get(point.number, [])}
        point.ran = any(r["id"] not in before for r in point.rows)
        self.trials_used += sum(r["id"] not in before for r in point.rows)
        self.seconds_used += sum((r["finished_at"] or 0) - (r["started_at"] or 0) for r in point.rows
                                 if r["id"] not in before)
        self._evaluate(point, workloads)
        if is_default:
            optimizer.observe(point.config, point.cost)
        else:
            optimizer.tell(suggestion, point.cost)

    def _budget_left_parallel(self, committed: int) -> str | None:
        """Why no further suggestion may be asked for: the trials of the outstanding ones count as spent."""
        return "budget" if self.trials_used + committed + 1 > self.spec.budget else self._budget_left(0)
