"""The loop of `nosqltune online`: watch a running cluster window by window and re-tune it as its mix shifts.

The loop is written against two small protocols, so scripted observations drive it in tests and JMX in real use
(jmx.py): a `NodeReader` gives a `Snapshot` of the nodes' cumulative request counters, and a `LiveApplier`
applies live changes and reads them back. Its rules, every window:

1. Read a snapshot and make the window since the previous one (window.py). A node that does not answer is said
   in one line by the reader and left out of the window, and the loop goes on.
2. If a live change is waiting for its guard, judge it on this window (guard.py) against the full windows of
   the same mix before it: keep it, roll it back (the previous values re-applied, read back, and said), or wait
   for the next full window when this one is partial. A change still unjudged after `guard_max_waits` windows
   is rolled back: a change is kept only when a window shows it is not worse.
3. Feed the window to the shift detector (shift.py). The model is asked only when the detector sets its first
   reference (the start: the first window with traffic) or declares a shift: once per mix, never once per
   window.
4. On asking: map the mix to the model's features (advisor.py), take its recommendation for them, and plan the
   changes against the running configuration (plan.py). Then
   - live changes: applied at once (not with dry_run), read back, and left to the guard of the next window(s);
     with `canary`, on one node first, judged on its requests (the others telling the demand), then on the
     others, judged on theirs against the window that kept the canary (the canary telling the demand);
     the running configuration takes the values read back. Table options change with ALTER TABLE once for the
     cluster and are read back from its schema (the JMX applier with the run's CQL address); without one they
     are recorded as not applied;
   - restart and rewrite changes: `decide_restart` (decide.py) weighs the gain the model predicts (the running
     configuration with the live changes against that plus the restart changes) with the throughput measured in
     this window. The decision is recorded with all its numbers. When it acts and the run has a `Restarter` (nodes
     it may restart), the restart changes are rolled out one node at a time; the running configuration takes them
     when every node came back, and each node's measured time replaces the default in the next decisions' cost.
     Without one (a cluster it did not start), it is recorded as not performed. A rewrite is weighed only when the
     data size per node is known (not yet measured by the loop): otherwise recorded as not weighed; the loop
     performs no rewrite.
5. Store the window with everything decided in it (record.py) and print one progress line.

It stops after `duration_seconds` or on KeyboardInterrupt. A live change still waiting for its guard then is
rolled back, so the cluster is left on the last kept configuration, and the run's summary is stored and
returned.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..errors import UsageError
from .advisor import Advisor, MixFeatures
from .decide import CostSettings, decide_restart
from .guard import GuardVerdict, judge_change, judge_on_nodes
from .observe import LiveOutcome
from .plan import Change, Plan, plan_changes
from .record import StudyRecorder
from .settings import OnlineSettings, OnlineSummary
from .shift import ShiftDetector, ShiftVerdict
from .window import KINDS, Snapshot, Window, window_between

MIB = 1024 * 1024
DEFAULT_REWRITE_MIB_S = 64.0   # Cassandra's compaction_throughput default, the rate `upgradesstables` is held to
_CLUSTER = ("table", "keyspace")   # options of the cluster's schema, not of a node: changed once for all
NOT_PERFORMED = "restart not performed: the run restarts only the nodes of a cluster it started (--nodes)"

Say = Callable[[str], None]


class NodeReader(Protocol):
    def read(self, say: Say) -> Snapshot:
        """The nodes' counters now; a node that does not answer is said through `say` and left out."""


class LiveApplier(Protocol):
    def apply(self, changes: Sequence[Change], say: Say, nodes: Sequence[str] | None = None) -> LiveOutcome:
        """Apply live changes on the named `nodes` (None: every node) and read them back (observe.apply_live's
        outcome). Table and keyspace options are the cluster's: they go with a call for every node."""


@dataclass(frozen=True)
class NodeRestart:
    """One node's turn in a rolling restart: drained, stopped, started with the changes, serving again."""

    node: str
    ok: bool
    seconds: float                  # from the drain to serving again (or to the failure)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "ok": self.ok, "seconds": self.seconds, "error": self.error}


class Restarter(Protocol):
    def roll(self, changes: Sequence[Change], running: Mapping[str, Any], say: Say) -> tuple[NodeRestart, ...]:
        """A rolling restart into the `running` configuration with `changes`: one node at a time, each waited for
        until it serves again before the next; it stops at the first node that does not come back, and puts the
        nodes back on what they ran. The nodes' turns, in order."""


@dataclass
class _Pending:
    """A live change waiting for its guard: the values before it, the windows it is compared with."""

    changes: tuple[Change, ...]
    previous: dict[str, Any]
    before: list[Window]
    at: float
    waits: int = 0
    canary: str | None = None          # the one node the change went to first; None: on every node
    held: tuple[Change, ...] = ()      # the cluster's own options (tables), made once the canary is kept
    judged: Window | None = None       # the window that kept it on its canary: the other nodes are judged after it
    first: str | None = None           # that canary


def _mix_text(window: Window) -> str:
    mix = window.mix
    if not window.nodes and window.missing:
        return "no node answered"
    if mix.read is None:
        return "no traffic"
    return "r/w/s " + "/".join(f"{mix.get(k):.2f}" for k in KINDS)


class Controller:
    """One online run (module docstring). `clock` and `sleep` pace the windows; `say` takes one-line notes (a
    silent node, a differing read-back, a rollback) and `progress` the line of each window."""

    def __init__(self, settings: OnlineSettings, advisor: Advisor, reader: NodeReader, applier: LiveApplier,
                 recorder: StudyRecorder, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, say: Say = lambda _: None,
                 progress: Say = lambda _: None, restarter: Restarter | None = None) -> None:
        self.settings, self.advisor, self.reader, self.applier = settings, advisor, reader, applier
        self.restarter = restarter           # None: the nodes are not this run's to restart (--hosts)
        # the price of one node's restart: as given (earlier restarts, or the cluster's idle start), until this run
        # has restarted nodes under its traffic; from then on those alone (a start under load took 4-5 times an
        # idle one: bench/results/online.md)
        self.restart_seconds: list[float] = list(settings.restart_seconds)
        self.restarts_under_load: list[float] = []
        self.recorder, self.clock, self.sleep = recorder, clock, sleep
        self._say_out, self.progress = say, progress
        self.running = advisor.running_config(settings.running)
        self.detector = ShiftDetector(settings.shift)
        self.cost = CostSettings(horizon_seconds=settings.horizon_seconds)
        self.summary = OnlineSummary(recorder.name, dry_run=settings.dry_run)
        self._recent: list[Window] = []     # full windows with traffic of the current mix, newest last
        self._pending: _Pending | None = None
        self._readvise: str | None = None     # "all" or "restart": advice to take up again on the next full window
        self._advice: tuple | None = None     # the mix's features and the model's advice for it
        self._said: list[str] = []
        self._number = 0
        self._touched = False   # a setting changed live in the current window's step

    def say(self, line: str) -> None:
        self._said.append(line)
        self._say_out(line)

    # ------------------------------------------------------------------------------------------ the loop
    def run(self) -> OnlineSummary:
        s = self.settings
        started = self.clock()
        stopped = "duration"
        try:
            previous = self.reader.read(self.say)
            number = slot = 0   # windows read; `slot`: the grid of window ends (started + slot x window)
            width = s.window_seconds
            while s.watch_seconds is None or (slot + 1) * width <= s.watch_seconds + 1e-9:
                wait = started + (slot + 1) * width - self.clock()
                if wait > 0:
                    self.sleep(wait)
                current = self.reader.read(self.say)
                number += 1
                slot += 1
                if not self._step(number, previous, current):
                    previous = current
                    continue
                # a window starts after the changes made at its start (JMX calls take seconds a node, a roll
                # minutes): the nodes are read again once they are done, and the next window ends on the grid at
                # least half a window later, so the guard judges a window of traffic that ran with the change
                previous = self.reader.read(self.say)
                while started + (slot + 1) * width - self.clock() < width / 2:
                    slot += 1
        except KeyboardInterrupt:
            stopped = "interrupted"
        except BaseException as exc:   # a live change not judged yet is put back and the run's record kept
            self._stop(f"failed: {exc}")
            raise
        self._stop(stopped)
        return self.summary

    def _stop(self, stopped: str) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self.summary.final_rollback = self._rollback(pending, "stopped before the guard judged it")
            self.summary.final_rollback["said"] = list(self._said)   # kept with the run: no window records them
            self._said = []
        self.summary.stopped = stopped
        default = self.advisor.space.default()
        self.summary.running = {k: v for k, v in self.running.items() if default.get(k) != v}
        self.recorder.finish(self.summary.as_dict())

    def _step(self, number: int, before: Snapshot, after: Snapshot) -> bool:
        """One window: judged, recorded, acted on; True when a setting was changed live (applied or rolled back)."""
        self._number = number
        self._touched = False
        record: dict[str, Any] = {"window": number}
        config = dict(self.running)   # what ran during the window
        window = window_between(before, after)
        verdict = self.detector.observe(window)
        if self._pending is not None:
            record["guard"] = self._judge(window, verdict)
        record["shift"] = verdict.as_dict()
        if verdict.state != "idle" and not window.partial:
            self._recent = (self._recent + [window])[-max(self.settings.guard_windows, self.settings.shift.confirm):]
        if verdict.state == "shift":   # the windows that confirmed it are the new mix's (not a partial one's elders)
            self.summary.shifts += 1
            self._recent = [w for w in self._recent[-self.settings.shift.confirm:]
                            if w.start >= self.detector.mix_began]
        if verdict.state in ("reference", "shift"):
            self._readvise = None
            record.update(self._advise(window, verdict))
        elif self._readvise and self._pending is None and not window.partial and self._advice is not None:
            # advice left undone at the shift (no full window yet, a change still guarded, a restart held back
            # until the live change was judged): asked again on the first full window after
            what, self._readvise = self._readvise, None
            record["readvised"] = what
            record.update(self._act(window, *self._advice, live=what == "all"))
        record["said"] = list(self._said)
        self._said = []
        self.recorder.window(number, window, config, record)
        self.summary.windows += 1
        self.progress(self._line(number, window, verdict, record))
        return self._touched

    # ------------------------------------------------------------------------------------------ the guard
    def _judge(self, window: Window, shift: ShiftVerdict) -> dict[str, Any]:
        pending = self._pending
        verdict, stage = self._verdict(pending, window)
        out: dict[str, Any] = {"verdict": verdict.as_dict(), "changes": [c.as_dict() for c in pending.changes],
                               **stage}
        moved = shift.distance is not None and shift.threshold is not None and shift.distance > shift.threshold
        if moved:   # another mix than the baseline's: its throughput and p99 say nothing about the change
            out["moved"] = f"the mix moved ({shift.distance:.3f} > {shift.threshold:.3f}): not judged on this window"
        if verdict.verdict == "wait" or moved:
            pending.waits += 1
            if pending.waits < self.settings.guard_max_waits:
                return out
            why = f"not judged: {pending.waits} window(s) after it partial or of another mix"
        elif verdict.keep and pending.canary is not None:
            self.say(f"guard: live change of {', '.join(c.knob for c in pending.changes)} kept on the canary "
                     f"{pending.canary} ({verdict.reason}); now on the other nodes")
            out["spread"] = self._spread(pending, window)
            return out
        elif verdict.keep:
            self._pending = None
            self.summary.live_kept += len(pending.changes)
            self.say(f"guard: live change of {', '.join(c.knob for c in pending.changes)} kept ({verdict.reason})")
            return out
        else:
            why = f"the guard: {verdict.reason}"
        out["rollback"] = self._rollback(pending, why)
        self._pending = None    # only once put back: an interrupted rollback is retried when the run stops
        return out

    def _verdict(self, pending: _Pending, window: Window):
        """The guard's verdict on the window, and how it was judged. A canary is judged on its own requests, the
        other nodes telling how the demand moved (guard.py rules 5 and 6); the nodes changed after it, on theirs
        against the window that kept the canary (one window: fixed tolerances), the canary telling the demand; a
        change made on every node at once, on the whole cluster."""
        replicated = self.settings.replication_factor > 1
        if pending.canary is None and pending.judged is None:
            return judge_change(pending.before, window, self.settings.guard), {}
        if pending.canary is not None:
            changed, before, stage = {pending.canary}, pending.before, {"stage": "canary", "canary": pending.canary}
        else:
            # against the window that kept the canary: the canary ran the change throughout both, so it tells how
            # the demand moved between them (the windows before changed it, and would not)
            changed = {n.name for n in self.settings.nodes} - {pending.first}   # a silent one makes it partial
            before, stage = [pending.judged], {"stage": "others", "nodes": sorted(changed)}
        try:
            verdict, demand = judge_on_nodes(before, window, changed, self.settings.guard, replicated=replicated)
        except UsageError as exc:   # the judged nodes served nothing before, or are not in this window: wait
            return GuardVerdict("wait", False, "nothing", reason=f"not judged on this window: {exc}"), stage
        return verdict, {**stage, "demand_change": demand}

    def _spread(self, pending: _Pending, window: Window) -> dict[str, Any]:
        """A change kept on its canary goes to the other nodes (with the cluster's options held back), to be
        judged on the next window; a rollback from here on puts every node back."""
        canary = pending.canary
        others = [n.name for n in self.settings.nodes if n.name != canary]
        changes = tuple(c for c in pending.changes if c.applies not in _CLUSTER) + pending.held
        self._pending = _Pending(pending.changes + pending.held, pending.previous, pending.before, pending.at,
                                 judged=window, first=canary)
        outcome = self.applier.apply(changes, self.say, nodes=others)
        done = self._take(changes, outcome)
        self._touched = True
        if outcome.not_jmx:
            self.say("; ".join(self._why_not(outcome.not_jmx)))
        self.summary.live_applied += len([c for c in done if c in pending.held])
        return {"nodes": others, "changes": [c.as_dict() for c in changes], "outcome": outcome.as_dict()}

    def _rollback(self, pending: _Pending, why: str) -> dict[str, Any]:
        """Re-apply the values before a live change; said, and returned for the record."""
        back = tuple(Change(c.knob, c.applies, self.running.get(c.knob), pending.previous[c.knob], "live", c.how,
                            "rollback") for c in pending.changes)
        self.say(f"rollback of {', '.join(f'{c.knob} -> {c.after}' for c in back)}: {why}")
        self.summary.rollbacks += 1
        out: dict[str, Any] = {"reason": why, "changes": [c.as_dict() for c in back]}
        outcome = self.applier.apply(back, self.say, nodes=None if pending.canary is None else (pending.canary,))
        out["applied"] = outcome.as_dict()
        if self._take(back, outcome):
            self._touched = True
        return out

    # ------------------------------------------------------------------------------------------ asking the model
    def _advise(self, window: Window, verdict: ShiftVerdict) -> dict[str, Any]:
        """Ask the model for the mix (once per mix: the advice is kept for what is left undone) and act on it."""
        mix = verdict.new_reference if verdict.state == "shift" else verdict.mix
        features = self.advisor.features_for(mix)
        for note in features.notes:
            self.say(note)
        advice = self.advisor.recommend(features, self.running)
        self.summary.recommendations += 1
        self._advice = (features, advice)
        return {"features": features.as_dict(), "recommendation": advice.as_dict(),
                **self._act(window, features, advice)}

    def _act(self, window: Window, features: MixFeatures, advice, live: bool = True) -> dict[str, Any]:
        """Plan the advice against the running configuration, apply the live part (unless `live` is off: a restart
        decision taken up again), and weigh the restart part; a restart is not weighed while a live change waits
        for its guard (the window after a roll could not tell the two apart): it is weighed once the guard has
        judged, on the same advice."""
        plan = plan_changes(self.advisor.space.knob_space, self.running, advice.config)
        out: dict[str, Any] = {"plan": plan.as_dict()}
        base = self._with(self.running, plan.live)
        if live and plan.live and (plan.restart or plan.rewrite):
            # the optimum was searched with the restart knobs free: the live part alone must pay by itself, since
            # the restart may be held
            now, alone = self.advisor.predict([self.running, base], features)
            if not (alone > now if self.advisor.surrogate.maximize else alone < now):
                out["live"] = {"changes": [c.as_dict() for c in plan.live], "applied": False,
                               "note": f"not applied: without the restart part the model predicts {alone:.4g} "
                                       f"against {now:.4g} now"}
                self.say(out["live"]["note"])
                base, live = dict(self.running), False
        if "live" not in out:
            out["live"] = self._apply_live(window, plan) if live else {"changes": [], "applied": False,
                                                                       "note": "restart decision only"}
        if self._pending is not None and (plan.restart or plan.rewrite):
            self._readvise = self._readvise or "restart"
            out["restart"] = {"verdict": "deferred", "performed": False,
                              "note": "the live change waits for its guard; the restart is weighed after"}
            self.say("restart decision deferred until the guard has judged the live change")
        else:
            out["restart"] = self._decide(window, plan, base, features)
        return out

    def _apply_live(self, window: Window, plan: Plan) -> dict[str, Any]:
        changes = plan.live
        if not changes:
            return {"changes": [], "applied": False, "note": "no live change"}
        out: dict[str, Any] = {"changes": [c.as_dict() for c in changes]}
        if self.settings.dry_run:
            self.say(f"dry run: would apply {', '.join(f'{c.knob} = {c.after}' for c in changes)}")
            return {**out, "applied": False, "note": "dry run: nothing applied"}
        if self._pending is not None:   # a shift while the guard still waits for a full window
            self._readvise = "all"
            return {**out, "applied": False, "note": "not applied: the previous live change still waits for its "
                                                     "guard (asked again once it is judged)"}
        before = [w for w in self._recent if not w.partial][-self.settings.guard_windows:]
        if not before:
            self._readvise = "all"
            return {**out, "applied": False,
                    "note": "not applied: no full window of this mix to judge the change against (asked again on "
                            "the next full window)"}
        previous = {c.knob: self.running.get(c.knob) for c in changes}
        canary, held = self._canary(window), ()
        if canary is not None:   # one node first; the cluster's own options wait until it is kept
            held = tuple(c for c in changes if c.applies in _CLUSTER)
            changes = tuple(c for c in changes if c.applies not in _CLUSTER)
            out["canary"] = canary
            self.say(f"live change of {', '.join(f'{c.knob} = {c.after}' for c in changes)} on the canary "
                     f"{canary} first" + (f"; {', '.join(c.knob for c in held)} once it is kept" if held else ""))
        # pending before the nodes are touched: a run stopped during the apply puts every knob back
        self._pending = _Pending(tuple(changes), previous, before, window.end)
        outcome = self.applier.apply(changes, self.say, nodes=None if canary is None else (canary,))
        self._pending = None
        done = self._take(changes, outcome)
        if done:
            self._touched = True
        out.update(applied=bool(done), outcome=outcome.as_dict())
        if outcome.not_jmx:
            out["not_applied"] = [c.as_dict() for c in outcome.not_jmx]
            out["note"] = "; ".join(self._why_not(outcome.not_jmx))
            self.say(out["note"])
        if done:
            self.summary.live_applied += len(done)
            previous = {c.knob: self._before(c, outcome, previous[c.knob]) for c in done} | \
                {c.knob: previous[c.knob] for c in held}
            self._pending = _Pending(done, previous, before, window.end, canary=canary, held=held)
        return out

    def _canary(self, window: Window) -> str | None:
        """The node a live change goes to first (the first of the run's nodes that served the whole window);
        None when the run changes every node at once, or has a single node."""
        if not self.settings.canary or len(self.settings.nodes) < 2:
            return None
        served = {n.node for n in window.nodes if not n.restarted}
        return next((n.name for n in self.settings.nodes if n.name in served), None)

    def _why_not(self, left: Sequence[Change]) -> list[str]:
        """Why each kind of change left unapplied was: one phrase per kind, naming its knobs."""
        table = "a table option, and " + ("this run has no CQL address to change it through (--cql)"
                                          if self.settings.cql is None else "the run could not change it")
        reasons = {"table": table, "keyspace": "a keyspace option, which online does not change"}
        kinds: dict[str, list[str]] = {}
        for change in left:
            why = reasons.get(change.applies, "a node setting no JMX operation changes on a running node")
            kinds.setdefault(why, []).append(change.knob)
        return [f"{', '.join(knobs)} not applied: {why}" for why, knobs in kinds.items()]

    def _take(self, changes: Sequence[Change], outcome: LiveOutcome) -> tuple[Change, ...]:
        """Update the running configuration from what the nodes read back; the changes that reached a node."""
        done = []
        for change in changes:
            results = [r for r in outcome.results if r.knob == change.knob and r.applied]
            if not results:
                continue
            done.append(change)
            backs = {r.read_back for r in results if r.read_back is not None}
            value = change.after
            if len(backs) == 1 and any(r.differs for r in results):   # every node runs another value than asked
                value = self._value(change.knob, backs.pop(), change.after, "read back")
            self.running[change.knob] = value
        return tuple(done)

    def _before(self, change: Change, outcome: LiveOutcome, assumed: Any) -> Any:
        """What the nodes ran before a live change, read from them just before it was set: what a rollback puts
        back. The value this run assumed (the configuration it started them with, or set last) where the nodes
        did not report one, or reported several (said)."""
        befores = {r.before for r in outcome.results if r.knob == change.knob and r.applied and r.before is not None}
        if len(befores) > 1:
            self.say(f"{change.knob}: the nodes ran different values before the change ({sorted(befores)}); a "
                     f"rollback puts {assumed} back on all of them")
        if len(befores) != 1:
            return assumed
        value = self._value(change.knob, befores.pop(), assumed, "read before the change")
        if value != assumed:
            self.say(f"{change.knob}: the nodes ran {value} before the change, not the {assumed} this run assumed; "
                     f"a rollback puts {value} back")
        return value

    def _value(self, knob: str, reported: Any, fallback: Any, what: str) -> Any:
        """A value a node reported, in the knob's terms; `fallback` (said) when the knob file cannot hold it."""
        try:
            return self.advisor.space.knob_space[knob].coerce(reported, allow_outside_range=True)
        except Exception as exc:   # noqa: BLE001 - any refusal of the value: the run goes on with the fallback
            self.say(f"{knob}: the value {what}, {reported!r}, is not one the knob takes ({exc}); "
                     f"{fallback} is used instead")
            return fallback

    @staticmethod
    def _with(config: Mapping[str, Any], changes: Sequence[Change]) -> dict[str, Any]:
        return {**config, **{c.knob: c.after for c in changes}}

    def _decide(self, window: Window, plan: Plan, base: Mapping[str, Any],
                features: MixFeatures) -> dict[str, Any] | None:
        """SOPHIA's cost-benefit of the plan's restart and rewrite changes, recorded and never performed here."""
        s = self.settings
        if not plan.restart and not plan.rewrite:
            return None
        weigh_rewrite = s.data_bytes_per_node is not None
        restart_only = [c for c in plan.changes if c.route == "restart"]
        weighed = list(plan.restart) + [c for c in plan.rewrite if c not in plan.restart] if weigh_rewrite \
            else restart_only
        not_weighed = [c for c in plan.changes if c in plan.restart + plan.rewrite and c not in weighed]
        out: dict[str, Any] = {"changes": [c.as_dict() for c in weighed],
                               "not_weighed": [c.as_dict() for c in not_weighed], "performed": False}
        if not_weighed:
            out["not_weighed_reason"] = "a rewrite is weighed only when the data size per node is known, which " \
                                        "the loop does not measure yet"
        if not weighed:
            out.update(verdict="hold", note="nothing weighed: " + out["not_weighed_reason"])
            self.say(f"restart/rewrite decision: hold ({out['note']})")
            return out
        target = self._with(base, weighed)
        predicted_now, predicted_new = self.advisor.predict([base, target], features)
        rewrite = weigh_rewrite and any(c.route in ("rewrite", "restart+rewrite") for c in weighed)
        rate = float(self.running.get("compaction_throughput") or DEFAULT_REWRITE_MIB_S) * MIB
        decision = decide_restart(predicted_now=predicted_now, predicted_new=predicted_new,
                                  current_ops_per_second=window.ops_per_second, nodes=len(s.nodes),
                                  replication_factor=s.replication_factor,
                                  dwell_seconds=self.detector.mean_dwell_seconds(window.end),
                                  restart=bool(plan.restart), replicas_needed=s.replicas_needed,
                                  measured_restart_seconds=self.restarts_under_load or self.restart_seconds,
                                  rewrite_bytes_per_node=float(s.data_bytes_per_node) if rewrite else 0.0,
                                  rewrite_bytes_per_second=rate if rewrite else None, settings=self.cost)
        out.update(verdict=decision.verdict, decision=decision.as_dict(),
                   note=("dry run: restart not performed" if s.dry_run else NOT_PERFORMED) if decision.act
                   else "held: the cost-benefit does not pay")
        self.summary.restart_decisions.append({"window": self._number, "verdict": decision.verdict,
                                               "action": decision.action,
                                               "expected_gain_operations": decision.expected_gain_operations,
                                               "cost_operations": decision.cost_operations})
        rolled = [c for c in weighed if c.route == "restart"]   # a rewrite is not performed by the loop
        performs = decision.act and rolled and self.restarter is not None and not s.dry_run
        self.say(f"{decision.action} decision: {decision.verdict} ({decision.reason})"
                 + (f"; {out['note']}" if decision.act and not performs else ""))
        if performs:
            out.update(self._roll(rolled, window))
        return out

    def _roll(self, changes: list[Change], window: Window) -> dict[str, Any]:
        """Perform a rolling restart with the changes; the running configuration takes them when every node
        came back, and each node's time feeds the cost of the next decision."""
        turns = self.restarter.roll(changes, dict(self.running), self.say)
        ok = bool(turns) and all(t.ok for t in turns) and len(turns) == len(self.settings.nodes)
        self.restarts_under_load += [t.seconds for t in turns if t.ok]
        if ok:
            for change in changes:
                self.running[change.knob] = change.after
        begun = not any((t.error or "").startswith("not begun") for t in turns)
        self.summary.restarts += begun    # a roll refused before any node was touched is no restart
        if begun:   # the next window starts once the nodes serve again
            self._touched = True
        self.summary.restart_decisions[-1]["performed"] = ok
        note = (f"rolling restart with {', '.join(f'{c.knob} = {c.after}' for c in changes)}: "
                + (f"done, {sum(t.seconds for t in turns):.0f} s over {len(turns)} node(s)" if ok else
                   "stopped at " + ", ".join(f"{t.node} ({t.error})" for t in turns if not t.ok)
                   + "; the running configuration is unchanged"))
        self.say(note)
        return {"performed": ok, "note": note, "roll": [t.as_dict() for t in turns],
                "rolled": [c.as_dict() for c in changes]}

    # ------------------------------------------------------------------------------------------ output
    def _line(self, number: int, window: Window, verdict: ShiftVerdict, record: Mapping[str, Any]) -> str:
        p99 = ", ".join(f"{k} {window.p99(k) / 1000:.1f} ms" for k in KINDS if window.p99(k) is not None)
        parts = [f"window {number}: {window.ops_per_second:.0f} ops/s, {_mix_text(window)}"
                 + (f", p99 {p99}" if p99 else "")]
        if window.partial:
            parts.append("partial (" + ", ".join(window.restarted + window.missing + window.unmatched) + ")")
        state = verdict.state if verdict.state != "beyond" else f"beyond {verdict.streak}/{verdict.confirm}"
        parts.append(f"mix {state}")
        guard = record.get("guard")
        if guard:
            parts.append(f"guard {guard['verdict']['verdict']}" + (", rolled back" if "rollback" in guard else ""))
        if "recommendation" in record:
            rec = record["recommendation"]
            routes = {}
            for c in record["plan"]["changes"]:
                routes[c["route"]] = routes.get(c["route"], 0) + 1
            parts.append(f"model: {rec['predicted']:.0f} vs {rec['predicted_running']:.0f} ops/s running, changes "
                         + (", ".join(f"{n} {r}" for r, n in routes.items()) or "none"))
            live = record.get("live") or {}
            if live.get("applied"):
                parts.append("live applied" + ("" if live["outcome"]["ok"] else " (read back differs)"))
            restart = record.get("restart")
            if restart:
                parts.append(f"restart {restart['verdict']}")
        return "; ".join(parts)
