"""A study with several trials at once (`tune --parallel N`): the store is the queue, workers run the trials.

The coordinator keeps up to N suggestions outstanding: it asks the optimizer (which handles pending
suggestions, see optimizers.base), queues each suggestion's trials in the store (WAITING), and lets its executor
start workers (tuning.executors) that claim and run them. Results are told to the optimizer in the order of the
suggestions, whatever order the trials finish in: the k-th ask always follows the same tells, so a resumed study
replays exactly as a serial one does (N, the window, is stored with the study and kept on resume).

Faults: a worker that dies (killed, machine gone) stops its trial's heartbeat; after `ttl_s` the coordinator
marks the trial FAIL `stale` and the store queues it again, once. A retry that goes stale too is a failed trial
(the optimizer is told the penalty, as for any failure). Trials RUNNING when a session starts belonged to the
workers of an earlier session, which died with it: they are marked interrupted and queued again. Workers that
keep failing before they reach a trial stop the study (MAX_WORKER_FAILURES in a row). Nothing is lost and no
result counts twice: a point is evaluated on exactly one final row per workload.
"""

from __future__ import annotations

import time
from collections import deque

from ..errors import NosqltuneError, UsageError
from ..optimizers import make_optimizer
from ..optimizers.base import LATER, Suggestion
from ..store import LEASE_TTL_S, TrialState
from .loop import TAG, Point, TuningLoop, spent
from .machine_reference import is_reference
from .results import counted
from .executors import Executor

FINAL = (TrialState.COMPLETE.value, TrialState.FAIL.value)
MAX_WORKER_FAILURES = 5   # workers in a row that end with an error (not a trial's failure): the study stops
LIVE = (TrialState.WAITING.value, TrialState.RUNNING.value)


class ParallelLoop(TuningLoop):
    def __init__(self, *args, executor: Executor, window: int, ttl_s: float = LEASE_TTL_S, poll_s: float = 0.2,
                 **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.executor = executor
        self.window = max(1, int(window))
        self.ttl_s = ttl_s
        self.poll_s = poll_s
        self._handles: set = set()   # the running workers
        self._last_stale_check = 0.0
        self._failed_in_a_row = 0
        self.worker_errors: list[str] = []

    # ------------------------------------------------------------------ the store as seen by the coordinator
    def _tune_rows(self) -> list[dict]:
        """The study's tuning trials, less the reference runs (default, best) of serial sessions on other machines
        (tuning.machine_reference: a parallel session runs none, and they are no suggestion's)."""
        return [r for r in self.store.trials(self.study_id) if r["tag"] == TAG and not is_reference(r)]

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
        for handle, error in self.executor.finished(list(self._handles), 0 if not self._handles else self.poll_s):
            self._handles.discard(handle)
            if error:
                self.worker_errors.append(error)
                self._failed_in_a_row += 1
                self.display.note(f"a worker ended with an error (its trial, if it had one, goes stale and is "
                                  f"given again): {error}")
                if self._failed_in_a_row >= MAX_WORKER_FAILURES:
                    raise NosqltuneError(f"{self._failed_in_a_row} workers in a row ended with an error; the last: "
                                         f"{error}")
            else:
                self._failed_in_a_row = 0
        states = [r["state"] for r in self._tune_rows()]
        waiting, running = states.count(TrialState.WAITING.value), states.count(TrialState.RUNNING.value)
        # workers that have not claimed their trial yet will take waiting ones: start only for the rest
        unclaimed = max(0, len(self._handles) - running)
        for _ in range(min(self.executor.slots - len(self._handles), waiting - unclaimed)):
            self._handles.add(self.executor.start())
        if not self._handles:
            time.sleep(self.poll_s)

    def _await(self, point: Point, suggestion: Suggestion, workloads: list[str]) -> None:
        """Wait until every workload of `point` has its final row; queue again what was lost on the way. While
        waiting, an optimizer that said LATER is asked again (irace's next requests of the batch)."""
        while True:
            rows = [r for r in self._tune_rows() if r["meta"].get("suggestion") == point.number]
            final = self._final(rows)
            if all(w in final for w in workloads):
                point.rows = [final[w] for w in workloads]
                return
            self._queue(point, suggestion, workloads, rows)
            if self._later:
                self._fill()
            self._tend()

    # ------------------------------------------------------------------ the loop
    def run(self) -> str:
        if self.spec.build_share:   # a study paced by tune --build-share, resumed with several trials at once
            raise UsageError("this study paces its dataset builds (--build-share), which follows the trials in "
                             "order: resume it without --parallel and --executor")
        if self.spec.denoise:   # its repeats come before the optimizer hears of a point
            raise UsageError("this study re-measures its incumbents (--denoise), one trial at a time: resume it "
                             "without --parallel and --executor")
        optimizer = make_optimizer(self.spec.optimizer, self.space, seed=self.spec.seed, budget=self.spec.budget,
                                   workloads=self.spec.workloads, workdir=self.workdir,
                                   include_default=self.spec.include_default, options=self.spec.options)
        self._optimizer = optimizer
        self._window = min(self.window, optimizer.max_pending or self.window)
        if self._window < self.window:
            self.display.note(f"{self.spec.optimizer} takes {self._window} suggestion(s) at a time: the study runs "
                              f"{self._window} trial(s) at once")
        stored: dict[int, list[dict]] = {}
        for row in self._tune_rows():
            if row["state"] == TrialState.RUNNING.value:
                # its worker belonged to an earlier session of the coordinator (threads of that process, or Ray
                # tasks of that job) and died with it: the trial is run again, not counted as a stale retry
                self.store.finish_trial(row["id"], TrialState.FAIL, failure_kind="interrupted",
                                        error="the tuning session stopped during this trial")
                row = self.store.trial(row["id"])
            stored.setdefault(int(row["meta"]["suggestion"]), []).append(row)
        self._stored_rows = stored
        self._after_stored = max(stored, default=-1) + 1
        finals = [r for rows in stored.values() for r in self._final(rows).values()]
        self.trials_used = len(finals)
        self.seconds_used = sum((r["finished_at"] or 0) - (r["started_at"] or 0) for r in finals)
        self.display.start(self)
        self._outstanding: deque[tuple[Point, Suggestion, list[str], int]] = deque()   # (..., trials it needs)
        self._committed = 0   # trials the outstanding points still need
        self._reason = "optimizer finished"
        self._asking, self._later = True, False
        self._fresh = 0   # the number of the next suggestion
        # an optimizer that names its suggestions (irace's configuration, instance and seed) finds its stored
        # trials by those names: the order of its requests within a batch varies from run to run
        self._replay = {self._replay_key(optimizer, rows[0]["meta"].get("opt") or {}): n
                        for n, rows in stored.items()} if optimizer.replay_keys else {}
        try:
            if self.spec.include_default and not optimizer.picks_instances:
                default = Suggestion(self.space.default())
                point = Point(0, default.config, "default")
                if self.trials_used + len(self.spec.workloads) > self.spec.budget and not stored.get(0):
                    return self._finish("budget")
                # the default is measured and observed before the first ask, as in a serial study (SMAC would
                # otherwise suggest its own default, the same configuration, while ours runs)
                self._queue(point, default, self.spec.workloads, stored.get(0, []))
                self._settle(point, default, list(self.spec.workloads), is_default=True)
                self._fresh = 1
            while True:
                self._fill()
                if not self._outstanding:
                    break
                point, suggestion, workloads, missing = self._outstanding.popleft()
                self._settle(point, suggestion, workloads)
                self._committed -= missing
        finally:
            optimizer.close()
        return self._finish(self._reason)

    def _fill(self) -> None:
        """Ask until the window of outstanding suggestions is full, the optimizer says LATER or is done, or the
        budget is spent; queue the trials of each suggestion."""
        optimizer, stored = self._optimizer, self._stored_rows
        self._later = False
        while self._asking and len(self._outstanding) < self._window:
            why = self._budget_left_parallel(self._committed)
            if why:
                self._reason, self._asking = why, False
                return
            began = time.perf_counter()
            suggestion = optimizer.ask()
            ask_s = time.perf_counter() - began
            if suggestion is None:
                self._asking = False
                return
            if suggestion is LATER:   # the optimizer waits for results before it suggests more
                self._later = True
                return
            workloads = [suggestion.instance] if suggestion.instance else list(self.spec.workloads)
            number, self._fresh = self._number(optimizer, suggestion, self._replay, self._fresh)
            rows = stored.get(number, [])
            missing = len([w for w in workloads if w not in self._final(rows)])
            if self.trials_used + self._committed + missing > self.spec.budget:
                self._reason, self._asking = "budget", False
                return
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
            self._outstanding.append((point, suggestion, workloads, missing))
            self._committed += missing

    @staticmethod
    def _replay_key(optimizer, meta: dict) -> tuple:
        return tuple(meta.get(k) for k in optimizer.replay_keys)

    def _number(self, optimizer, suggestion: Suggestion, replay: dict, fresh: int) -> tuple[int, int]:
        """The suggestion's number and the next fresh one: in order of asking; for an optimizer that names its
        suggestions, the stored number of a replayed one, and numbers after every stored one for new ones."""
        if optimizer.replay_keys:
            stored_number = replay.pop(self._replay_key(optimizer, suggestion.meta), None)
            if stored_number is not None:
                return stored_number, fresh
            fresh = max(fresh, self._after_stored)
        return fresh, fresh + 1

    def _settle(self, point: Point, suggestion: Suggestion, workloads: list[str], *, is_default: bool = False) -> None:
        """Wait for a point's trials, evaluate it and tell the optimizer (observe, for the default)."""
        optimizer = self._optimizer
        self._await(point, suggestion, workloads)
        before = {r["id"] for r in self._final(self._stored_rows.get(point.number, [])).values()}
        point.ran = any(r["id"] not in before for r in point.rows)
        self.trials_used += sum(r["id"] not in before for r in point.rows)
        self.seconds_used += sum((r["finished_at"] or 0) - (r["started_at"] or 0) for r in point.rows
                                 if r["id"] not in before)
        self._evaluate(point, workloads)
        if is_default:
            optimizer.observe(point.config, point.cost)
        else:
            optimizer.tell(suggestion, point.cost)
        spent(optimizer, point)

    def _budget_left_parallel(self, committed: int) -> str | None:
        """Why no further suggestion may be asked for: the trials of the outstanding ones count as spent."""
        return "budget" if self.trials_used + committed + 1 > self.spec.budget else self._budget_left(0)
