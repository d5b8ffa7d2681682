"""`nosqltune rollout`: a plan of `export-config` (its plan.json) applied to a running cluster, a canary node first.

The steps (`steps_of`), each recorded before and after it runs (`RolloutRecorder`), so that an interrupted rollout
resumes at the step it was in:

1. **check**: every node answers over JMX, runs the plan's Cassandra release line (5.0.x for a plan tuned on
   5.0.6), is NORMAL and seen up by every other node, the cluster agrees on one schema; the tables the plan names
   exist; a plan with a restart needs every table's keyspace at a replication factor of 2 or more (a node down
   makes the data of an RF 1 keyspace unavailable). On a resume, a node the interrupted run left drained or stopped
   in its restart or rewrite is not held against the cluster: that step runs again.
2. **canary, before**: `windows` windows of `window_s` seconds of every node's request counters (window.py): the
   plan's first table's own reads and writes on each node, as a replica serves them (at QUORUM a slow replica
   hides behind the others in the coordinators' latencies, not in its own).
3. **the canary node**: the whole plan on one node. Live settings over JMX, each read back; the table options
   (ALTER TABLE: once, for the whole cluster, as Cassandra has it: it reaches the SSTables each node writes from
   then on, and the existing data only where a rewrite runs, so the rewrite is what is canaried); a restart into
   the plan's cassandra.yaml keys and JVM options; the rewrite (`nodetool upgradesstables -a`, one SSTable at a
   time, throttled), each followed by the wait for the node to be ready (below).
4. **canary, after**: `settle_s` seconds first (a restarted node is slow until its JIT has compiled its code and
   its caches are warm: that is the restart's, not the plan's), then windows again, the canary judged on its own
   windows with guard.py's noise rule, the other nodes telling how the demand moved meanwhile (guard.py rule 5).
   A window with the canary restarted in it is partial: the next one is judged. The windows are judged one at a
   time, each from the settle's end (guard.py rule 7), up to twice `windows` of them or enough to outlast the
   dynamic snitch's reset (600 s), whichever is more: the first not worse, with every kind judged before judged
   again, keeps the plan; two worse in a row stop it unless the second is recovering (a node still cold after the
   settle: its p99 a histogram bucket lower or more than in the window before). A restarted replica may serve no reads at all until the coordinators' dynamic snitch resets its scores
   (at RF 3 on 3 nodes a QUORUM read asks the 2 replicas it scores best); if its reads are still not judged at the
   end, the step fails (resumable) and says so. **Worse**: the rollout stops and the canary is put back where a step can be
   undone (live settings to the values read before them, a restart into the configuration it ran, the table
   options back), and what cannot is said (a rewrite: the SSTables stay as rewritten).
5. **every other node**, one at a time: live settings, restart, rewrite, each waited for.

Ready, after a restart or a rewrite: the node answers in NORMAL mode, every other node sees it up, no node holds
hints for it, and its pending compactions are down to what they were before the step (or to a few), within the
per-node timeout; past it the rollout stops there (resumable). Never two nodes down at once: a node's turn starts
only when the one before is ready.

This module decides and records; what touches nodes is behind `ClusterActions` (online/remote.py for a cluster
reached over JMX and CQL).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

from ..errors import UsageError
from .guard import GuardSettings, GuardVerdict, after_restart, judge_on_nodes, settling
from .observe import _one_line as _line
from .window import Snapshot, Window, window_between

PLAN_FORMAT = 1
STEP_TAG = "rollout-step"
SETTINGS_KEY = "rollout"
SNITCH_RESET_S = 600.0   # Cassandra's dynamic_snitch_reset_interval default: scores start again this often
SETTLED_COMPACTIONS = 2   # pending compactions a node may keep after a step and count as settled

Say = Callable[[str], None]


# ------------------------------------------------------------------------------------------------ the plan
@dataclass(frozen=True)
class RolloutPlan:
    """plan.json of an export-config folder, as the rollout applies it."""

    folder: str
    digest: str                                   # of plan.json: a resumed rollout must apply the same plan
    system: str
    version: str                                  # the Cassandra release it was tuned on
    live: Mapping[str, Any]                       # knob -> value, changed live over JMX
    yaml: Mapping[str, Any]                       # cassandra.yaml keys (dotted) of a restart
    jvm_add: tuple[str, ...]
    jvm_remove: tuple[str, ...]
    schema: tuple[str, ...]                       # ALTER TABLE statements, once for the cluster
    tables: tuple[str, ...]                       # KS.T
    rewrite_tables: tuple[str, ...]
    table_options: tuple[str, ...]                # the options the ALTERs set (what a revert reads before)
    throttle_mib_s: int
    volume: Mapping[str, Any]
    restart: bool                                 # a setting needs a restart
    evidence: str = ""
    confirmed: bool = False
    settings: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def load(cls, folder: str | Path) -> "RolloutPlan":
        """The plan in `folder` (plan.json); UsageError (one line) for a folder without one, a plan of another
        format or datastore."""
        path = Path(folder) / "plan.json"
        try:
            text = path.read_text()
            data = json.loads(text)
        except FileNotFoundError:
            raise UsageError(f"--plan {folder}: no plan.json in it (write one with `nosqltune export-config --out "
                             f"{folder}`)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsageError(f"--plan {folder}: plan.json does not read ({exc})") from None
        if not isinstance(data, dict) or data.get("plan") != "nosqltune":
            raise UsageError(f"--plan {folder}: plan.json is not a plan of nosqltune export-config")
        if data.get("format") != PLAN_FORMAT:
            raise UsageError(f"--plan {folder}: plan format {data.get('format')!r}, this rollout reads format "
                             f"{PLAN_FORMAT}: export it again")
        if data.get("system") != "cassandra":
            raise UsageError(f"--plan {folder}: a plan for {data.get('system')!r}; rollout applies Cassandra plans")
        settings = tuple(data.get("settings") or ())
        chosen = set(data.get("config") or {})
        restart = any("restart" in (s.get("tags") or ()) and s.get("knob") in chosen for s in settings)
        rewrite = data.get("rewrite") or {}
        return cls(folder=str(folder), digest=hashlib.sha256(text.encode()).hexdigest()[:16],
                   system="cassandra", version=str(data.get("version") or ""),
                   live=dict(data.get("live") or {}), yaml=dict(data.get("yaml") or {}),
                   jvm_add=tuple((data.get("jvm") or {}).get("add") or ()),
                   jvm_remove=tuple((data.get("jvm") or {}).get("remove") or ()),
                   schema=tuple(data.get("schema") or ()), tables=tuple(data.get("tables") or ()),
                   rewrite_tables=tuple(rewrite.get("tables") or ()),
                   table_options=tuple(data.get("table_options") or ()),
                   throttle_mib_s=int(rewrite.get("throttle_mib_s") or 64), volume=dict(data.get("volume") or {}),
                   restart=restart and bool(data.get("yaml") or (data.get("jvm") or {}).get("add")),
                   evidence=str((data.get("evidence") or {}).get("line") or ""),
                   confirmed=bool((data.get("evidence") or {}).get("confirmed")), settings=settings)

    def line(self) -> str:
        parts = []
        if self.live:
            parts.append("live " + ", ".join(f"{k}={v}" for k, v in self.live.items()))
        if self.schema:
            parts.append(f"{len(self.schema)} ALTER TABLE")
        if self.restart:
            parts.append("restart (" + ", ".join([*self.yaml, *self.jvm_add]) + ")")
        if self.rewrite_tables:
            parts.append("rewrite " + ", ".join(self.rewrite_tables))
        if self.volume:
            parts.append("read-ahead " + ", ".join(f"{k}={v}" for k, v in self.volume.items()))
        return "; ".join(parts) or "nothing to apply"


# ------------------------------------------------------------------------------------------------ the steps
@dataclass(frozen=True)
class Step:
    """One step of a rollout: its number (from 1), what it does, on which node (None: the cluster)."""

    number: int
    kind: str          # check | observe-before | live | schema | restart | rewrite | volume | observe-after | judge
    node: str | None
    what: str
    table: str | None = None   # a rewrite's table (KS.T)

    def line(self) -> str:
        where = f"node {self.node}" if self.node else "cluster"
        return f"{self.number:>3}. [{where}] {self.kind}: {self.what}"


def node_steps(plan: RolloutPlan, node: str) -> list[tuple]:
    """(kind, node, what[, table]) of the plan's steps on one node, in order."""
    out: list[tuple] = []
    if plan.live:
        out.append(("live", node, "over JMX, each read back: " + ", ".join(f"{k} -> {v}" for k, v in
                                                                           plan.live.items())))
    if plan.restart:
        out.append(("restart", node, "drain, restart into " + ", ".join([*plan.yaml, *plan.jvm_add])
                    + "; wait until it is NORMAL, seen up by every node, holds no hints, compactions settled"))
    for table in plan.rewrite_tables:
        out.append(("rewrite", node, f"nodetool upgradesstables -a -j 1 {table.replace('.', ' ')} at "
                                     f"{plan.throttle_mib_s} MiB/s; wait until compactions settle", table))
    if plan.volume:
        out.append(("volume", node, "read-ahead " + ", ".join(f"{k}={v}" for k, v in plan.volume.items())
                    + ": volume.txt, as root on the node (not done by rollout)"))
    return out


def steps_of(plan: RolloutPlan, nodes: Sequence[str], settings: "RolloutSettings") -> list[Step]:
    """Every step of applying `plan` to `nodes` (the module docstring's order), numbered."""
    raw: list[tuple] = [("check", None, "every node answers, runs Cassandra "
                                                f"{_line_of(plan.version)}.x, NORMAL, seen up by all; one schema; "
                                                "the tables exist" + ("; RF >= 2" if plan.restart else ""))]
    canary = nodes[0] if settings.canary else None
    watch = f"{settings.windows} windows of {settings.window_s:g} s of every node's requests"
    if canary:
        raw.append(("observe-before", canary, watch))
    after = f"{settings.settle_s:g} s for the canary to settle, then a window of {settings.window_s:g} s"
    if plan.schema:   # once, for the cluster: ahead of the canary's rewrite, which is what makes it reach the data
        raw.append(("schema", None, "; ".join(plan.schema)))
    for node in nodes:
        raw += node_steps(plan, node)
        if node == canary:
            raw.append(("observe-after", canary, after))
            raw.append(("judge", canary, "the canary's windows against those before, the other nodes' demand "
                                         "beside (the guard's noise rule), one window at a time, up to "
                                         f"{settings.windows_after}: the first not worse keeps the plan, two worse "
                                         "in a row stop it unless the canary is recovering; worse: stop, put the "
                                         "canary back"))
    return [Step(i, *entry) for i, entry in enumerate(raw, 1)]


def _line_of(version: str) -> str:
    return ".".join(version.split(".")[:2]) if version else "?"


# ------------------------------------------------------------------------------------------------ settings
@dataclass(frozen=True)
class RolloutSettings:
    window_s: float = 60.0
    windows: int = 3
    settle_s: float = 120.0      # after the canary's change, before its windows: a restarted JVM compiles its code
    node_timeout_s: float = 900.0
    canary: bool = True
    apply: bool = False
    guard: GuardSettings = GuardSettings()

    def __post_init__(self) -> None:
        if not (isinstance(self.window_s, (int, float)) and math.isfinite(self.window_s) and self.window_s >= 1):
            raise UsageError(f"--window must be at least 1 second, got {self.window_s!r}")
        if not (isinstance(self.windows, int) and 2 <= self.windows <= 100):
            raise UsageError(f"--windows must be within 2..100 (the guard's noise needs 3), got {self.windows!r}")
        if not (isinstance(self.settle_s, (int, float)) and math.isfinite(self.settle_s) and self.settle_s >= 0):
            raise UsageError(f"--settle must be 0 or more seconds, got {self.settle_s!r}")
        if not (isinstance(self.node_timeout_s, (int, float)) and math.isfinite(self.node_timeout_s)
                and self.node_timeout_s >= 10):
            raise UsageError(f"--node-timeout must be at least 10 seconds, got {self.node_timeout_s!r}")

    @property
    def windows_after(self) -> int:
        """The most windows of the canary read after its settle (guard.py rule 7): twice those before, and enough
        to outlast the dynamic snitch's reset of its scores (a restarted replica may be routed around until then)."""
        return max(2 * self.windows, math.ceil((SNITCH_RESET_S + self.window_s) / self.window_s))

    def record(self) -> dict[str, Any]:
        return {"window_s": self.window_s, "windows": self.windows, "settle_s": self.settle_s,
                "node_timeout_s": self.node_timeout_s,
                "canary": self.canary, "apply": self.apply}


# ------------------------------------------------------------------------------------------------ the cluster
class ClusterActions(Protocol):
    """What a rollout does to nodes (online/remote.py). Every call may raise; a failure stops the rollout there."""

    def status(self, node: str) -> dict[str, Any]:
        """internals.node_status of the node."""

    def address(self, node: str) -> str:
        """The node's address as the others list it."""

    def counters(self) -> Snapshot:
        """Every node's request counters now (observe.read_snapshot)."""

    def check_tables(self, tables: Sequence[str], need_rf: int) -> None:
        """UsageError when a table does not exist or its keyspace's replication factor is below `need_rf`."""

    def set_live(self, node: str, knob: str, value: Any) -> dict[str, Any]:
        """{"before", "read_back", "error"} of one live setting on one node."""

    def table_options(self, tables: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The tables' options now (what a revert puts back)."""

    def alter(self, statements: Sequence[str]) -> None:
        """Run the statements once (CQL)."""

    def restore_tables(self, options: Mapping[str, Mapping[str, Any]]) -> None:
        """Put the tables' options back."""

    def restart(self, node: str, plan: RolloutPlan | None) -> None:
        """Drain and restart the node into the plan's configuration (None: the configuration it ran before)."""

    def rewrite(self, node: str, table: str, throttle_mib_s: int) -> dict[str, Any]:
        """nodetool upgradesstables -a of one table on one node."""

    def pending_compactions(self, node: str) -> int | None:
        """The node's pending compactions (None: not known)."""

    def table_bytes(self, node: str, table: str) -> int | None:
        """The table's live data on the node."""

    def free_disk(self, node: str) -> int | None:
        """Free bytes where the node keeps its data (None: not known)."""


# ------------------------------------------------------------------------------------------------ the record
class RolloutRecorder:
    """One rollout's study in the trial store (name rollout-<plan digest>-<cluster digest>): its settings under
    "rollout", one row per step tagged `STEP_TAG`, RUNNING while it runs, COMPLETE or FAIL after, with what it
    read back in meta["rollout"]. A study that exists already is the same rollout interrupted: its COMPLETE steps
    are not run again."""

    def __init__(self, store, study_id: int, name: str) -> None:
        self.store, self.study_id, self.name = store, study_id, name

    @classmethod
    def open(cls, url: str, plan: RolloutPlan, nodes: Sequence[str], settings: RolloutSettings,
             extra: Mapping[str, Any]) -> "RolloutRecorder":
        from ..store import open_store

        key = hashlib.sha256(json.dumps(sorted(nodes)).encode()).hexdigest()[:8]
        name = f"rollout-{plan.digest[:8]}-{key}"
        store = open_store(url)
        try:
            found = store.find_study(name)
            if found is None:
                study_id = store.study(name, system="cassandra", settings={SETTINGS_KEY: {
                    "plan": plan.folder, "plan_digest": plan.digest, "nodes": list(nodes), **settings.record(),
                    **dict(extra), "started_at": time.time()}})
            else:
                study_id = found["id"] if isinstance(found, Mapping) else found
        except BaseException:
            store.close()
            raise
        return cls(store, study_id, name)

    def done(self) -> dict[int, dict[str, Any]]:
        """The steps completed before (number -> what they recorded)."""
        out = {}
        for row in self.store.trials(self.study_id):
            if row.get("tag") == STEP_TAG and str(row.get("state")).endswith("COMPLETE"):
                meta = (row.get("meta") or {}).get(SETTINGS_KEY) or {}
                out[int(meta.get("step", 0))] = meta
        return out

    def unfinished(self) -> list[dict[str, Any]]:
        """The steps started and not completed (a process killed in them, or a step that failed), as their rows
        recorded them."""
        out = []
        for row in self.store.trials(self.study_id):
            if row.get("tag") == STEP_TAG and not str(row.get("state")).endswith("COMPLETE"):
                out.append((row.get("meta") or {}).get(SETTINGS_KEY) or {})
        return out

    def start(self, step: Step) -> int:
        return self.store.start_trial(self.study_id, {}, {"name": "rollout", "step": step.number}, tag=STEP_TAG,
                                      meta={SETTINGS_KEY: {"step": step.number, "kind": step.kind, "node": step.node,
                                                           "what": step.what}})

    def finish(self, row: int, step: Step, ok: bool, result: Mapping[str, Any], seconds: float) -> None:
        from ..store import TrialState

        self.store.update_meta(row, {SETTINGS_KEY: {"step": step.number, "kind": step.kind, "node": step.node,
                                                    "what": step.what, "result": dict(result), "ok": ok}})
        self.store.finish_trial(row, TrialState.COMPLETE if ok else TrialState.FAIL,
                                error=None if ok else str(result.get("error") or "failed"),
                                timings={"seconds": seconds})

    def ended(self) -> str | None:
        """How the rollout ended when it last ran (done, stopped, canary-worse), None when it never ended."""
        study = self.store.study_by_id(self.study_id) or {}
        return (((study.get("settings") or {}).get(SETTINGS_KEY) or {}).get("summary") or {}).get("state")

    def summary(self, summary: Mapping[str, Any]) -> None:
        study = self.store.study_by_id(self.study_id) or {}
        now = dict((study.get("settings") or {}).get(SETTINGS_KEY) or {})
        self.store.update_study_settings(self.study_id, {SETTINGS_KEY: {**now, "summary": dict(summary),
                                                                        "ended_at": time.time()}})

    def close(self) -> None:
        self.store.close()


# ------------------------------------------------------------------------------------------------ the run
class StepFailed(Exception):
    """A step that did not do what it should: the rollout stops there."""


@dataclass
class RolloutResult:
    state: str                                   # done | stopped | canary-worse | dry-run
    steps_run: int = 0
    steps_skipped: int = 0
    verdict: GuardVerdict | None = None
    restored: list[str] = field(default_factory=list)
    not_restored: list[str] = field(default_factory=list)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "steps_run": self.steps_run, "steps_skipped": self.steps_skipped,
                "verdict": self.verdict.as_dict() if self.verdict else None, "restored": self.restored,
                "not_restored": self.not_restored, "error": self.error}


class Rollout:
    """One rollout of `plan` onto `nodes` (names the actions know) through `actions`, recorded by `recorder`."""

    def __init__(self, plan: RolloutPlan, nodes: Sequence[str], actions: ClusterActions, settings: RolloutSettings,
                 recorder: RolloutRecorder | None = None, say: Say = print,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if not nodes:
            raise UsageError("a rollout needs at least one node")
        self.plan, self.nodes, self.actions, self.settings = plan, list(nodes), actions, settings
        self.recorder, self.say, self.clock, self.sleep = recorder, say, clock, sleep
        self.steps = steps_of(plan, self.nodes, settings)
        self._before: list[Snapshot] = []
        self._live_before: dict[str, dict[str, Any]] = {}
        self._tables_before: dict[str, dict[str, Any]] = {}
        self._resuming: set[str] = set()   # nodes an interrupted run left in a restart or a rewrite

    def run(self) -> RolloutResult:
        if not self.settings.apply:
            self.say(f"dry run (give --apply to act): {len(self.steps)} steps")
            for step in self.steps:
                self.say(step.line())
            return RolloutResult("dry-run")
        done = self.recorder.done() if self.recorder else {}
        ended = self.recorder.ended() if self.recorder else None
        if ended == "canary-worse":
            raise UsageError("this rollout stopped because its canary was worse, and the canary was put back: the "
                             "plan is not for this cluster as it is; measure again or export another plan")
        # a node the interrupted run was restarting or rewriting may be down: its step runs again, and the check
        # does not refuse the cluster for it
        self._resuming = {m.get("node") for m in (self.recorder.unfinished() if self.recorder else ())
                          if m.get("kind") in ("restart", "rewrite") and int(m.get("step", 0)) not in done}
        result = RolloutResult("done")
        for step in self.steps:
            if step.number in done and step.kind != "check":   # done before the interruption: recalled, not redone
                self._recall(step, done[step.number])
                result.steps_skipped += 1
                self.say(f"{step.line()}  (done before)")
                continue
            self.say(step.line())
            row = self.recorder.start(step) if self.recorder else None
            started = self.clock()
            try:
                outcome = self._run(step)
            except Exception as exc:   # the step failed: stop here, resumable
                why = _one_line(exc)
                if row is not None:
                    self.recorder.finish(row, step, False, {"error": why}, self.clock() - started)
                if step.kind == "check" and isinstance(exc, UsageError):
                    raise   # a cluster the plan cannot go to: refused (one line, exit 2), nothing changed
                self.say(f"  step {step.number} failed: {why}; the rollout stops here (run it again to resume)")
                result.state, result.error = "stopped", why
                if self.recorder:
                    self.recorder.summary(result.as_dict())
                return result
            result.steps_run += 1
            verdict = outcome.pop("verdict", None) if isinstance(outcome, dict) else None
            if row is not None:
                self.recorder.finish(row, step, not (verdict and verdict.rollback), outcome, self.clock() - started)
            if verdict is not None and verdict.rollback:
                result.state, result.verdict = "canary-worse", verdict
                self.say(f"  the canary is worse: {verdict.reason}")
                self._restore_canary(step.node, result)
                if self.recorder:
                    self.recorder.summary(result.as_dict())
                return result
            if verdict is not None:
                result.verdict = verdict
                self.say(f"  the canary holds: {verdict.reason}")
        if self.recorder:
            self.recorder.summary(result.as_dict())
        return result

    def rollback(self) -> RolloutResult:
        """Undo the steps an interrupted (or finished) rollout completed, newest first, where a step can be undone:
        live settings to the values read before them, restarts into the configuration the node ran, the table
        options back; a rewrite cannot be (said)."""
        done = self.recorder.done() if self.recorder else {}
        result = RolloutResult("rolled-back")
        for step in self.steps:
            if step.number in done:
                self._recall(step, done[step.number])
        if not self.settings.apply:
            self.say("dry run (give --apply to act): would undo, newest first:")
        for step in sorted((s for s in self.steps if s.number in done), key=lambda s: -s.number):
            what = {"live": "live settings back to the values read before", "restart": "restart into the "
                    "configuration it ran", "schema": "the table options back", "rewrite": "cannot be undone: "
                    "the rewritten SSTables stay"}.get(step.kind)
            if what is None:
                continue
            self.say(f"  undo {step.line().strip()}: {what}")
            if not self.settings.apply:
                continue
            try:
                if step.kind == "live":
                    for knob, before in (self._live_before.get(step.node) or {}).items():
                        if before is not None:
                            self.actions.set_live(step.node, knob, before)
                            result.restored.append(f"{step.node}: {knob} = {before}")
                elif step.kind == "restart":
                    self.actions.restart(step.node, None)
                    self._wait_ready(step.node, None)
                    result.restored.append(f"{step.node}: restarted into the configuration it ran")
                elif step.kind == "schema" and self._tables_before:
                    self.actions.restore_tables(self._tables_before)
                    result.restored.append("the table options")
                elif step.kind == "rewrite":
                    result.not_restored.append(f"{step.node}: the rewritten SSTables")
            except Exception as exc:
                result.not_restored.append(f"step {step.number}: {_one_line(exc)}")
                result.state, result.error = "stopped", _one_line(exc)
                break
        if self.recorder and self.settings.apply:
            self.recorder.summary(result.as_dict())
        return result

    # -- one step
    def _run(self, step: Step) -> dict[str, Any]:
        handler = getattr(self, "_" + step.kind.replace("-", "_"))
        return handler(step) or {}

    def _check(self, step: Step) -> dict[str, Any]:
        statuses, resuming = {}, self._resuming
        for node in self.nodes:
            try:
                status = self.actions.status(node)
            except Exception as exc:
                if node in resuming:
                    self.say(f"  node {node} does not answer: the interrupted rollout was restarting it, and its "
                             "step runs again")
                    continue
                raise UsageError(f"node {node} does not answer over JMX: {_one_line(exc)}") from None
            if node in resuming and str(status.get("mode")) != "NORMAL":
                self.say(f"  node {node} is {status.get('mode')}: the interrupted rollout was restarting it")
                continue
            statuses[node] = status
        wanted = _line_of(self.plan.version)
        versions = {n: str(s.get("version")) for n, s in statuses.items()}
        if len(set(versions.values())) > 1:
            raise UsageError("the nodes run different Cassandra versions ("
                             + ", ".join(f"{n} {v}" for n, v in versions.items()) + "): finish the upgrade first")
        running = next(iter(versions.values()))
        if self.plan.version and _line_of(running) != wanted:
            raise UsageError(f"the plan was tuned on Cassandra {self.plan.version}; the cluster runs {running}")
        addresses = {n: self.actions.address(n) for n in self.nodes}
        for node, status in statuses.items():
            if str(status.get("mode")) != "NORMAL":
                raise UsageError(f"node {node} is {status.get('mode')}, not NORMAL: a rollout starts on a healthy "
                                 "cluster")
            away = [addresses[n] for n in resuming]   # down for the interrupted step: it runs again
            unreachable = [a for a in status.get("unreachable") or () if a and not any(_listed(x, [a]) for x in away)]
            if unreachable:
                raise UsageError(f"node {node} sees {', '.join(unreachable)} down: a rollout starts with every "
                                 "node up")
            missing = [a for n, a in addresses.items() if n != node and n not in resuming
                       and not _listed(a, status.get("live") or ())]
            if missing:
                raise UsageError(f"node {node} does not see {', '.join(missing)} up")
            schemas = status.get("schema_versions") or {}
            agreeing = [v for v in schemas if v != "UNREACHABLE"]
            if len(agreeing) > 1:
                raise UsageError(f"the cluster has {len(agreeing)} schema versions (a schema disagreement): settle "
                                 "it first")
        if self.plan.tables:
            self.actions.check_tables(self.plan.tables, 2 if self.plan.restart else 1)
        unknown = []
        for node in self.nodes if self.plan.rewrite_tables else ():
            need = sum(self.actions.table_bytes(node, t) or 0 for t in self.plan.rewrite_tables)
            free = self.actions.free_disk(node)
            if free is None:
                unknown.append(node)
            elif free < need:
                raise UsageError(f"node {node} has {free / 2**30:.1f} GiB free; rewriting "
                                 f"{', '.join(self.plan.rewrite_tables)} needs room for another copy of "
                                 f"{need / 2**30:.1f} GiB: free disk first")
        if unknown:
            self.say(f"  free disk not known on {', '.join(unknown)} (JMX does not say): a rewrite needs room for "
                     "another copy of the table; check it before")
        return {"versions": versions}

    def _observe_before(self, step: Step) -> dict[str, Any]:
        self._before = self._observe(self.settings.windows + 1)
        more, why = 0, settling(_windows(self._before), step.node, self.settings.guard)
        while why and more < self.settings.windows:   # rule 8: a baseline that is still falling is no baseline
            self.say(f"  {step.node}: {why} in the windows before: still warming, one more window")
            self._before = [*self._before[1:], self._observe_one()]
            more += 1
            why = settling(_windows(self._before), step.node, self.settings.guard)
        if why:
            self.say(f"  {step.node}: {why}: still falling after {more} more windows; judged against them as they are")
        return {"windows": [w.summary() for w in _windows(self._before)], "more_windows": more, "settling": why,
                "snapshots": [snapshot_dict(x) for x in self._before]}

    def _observe_after(self, step: Step) -> dict[str, Any]:
        # a restarted node runs slower until its JIT has compiled its code and its caches hold what they held:
        # that is the restart's, not the plan's, so the windows start once it has settled
        self.sleep(self.settings.settle_s)
        self._after = self._observe(2)
        return {"windows": [w.summary() for w in _windows(self._after)],
                "snapshots": [snapshot_dict(x) for x in self._after]}

    def _observe(self, readings: int) -> list[Snapshot]:
        out = [self.actions.counters()]
        for _ in range(readings - 1):
            self.sleep(self.settings.window_s)
            out.append(self.actions.counters())
        return out

    def _judge(self, step: Step) -> dict[str, Any]:
        canary = step.node
        if not self._before:
            raise StepFailed("no windows before the change to judge the canary against (observe again: run the "
                             "rollout with the canary's steps undone, or give --no-canary)")
        decided, verdicts, demands = judge_canary(_windows(self._before), self._after, canary, self.settings.guard,
                                                  self.settings.windows_after, self._observe_one)
        if decided is None:
            raise StepFailed(f"no verdict on the canary: {len(verdicts)} full window(s) of it after the change")
        if decided.verdict == "wait":
            raise StepFailed(f"the canary could not be judged in {len(verdicts)} windows after its settle: p99 not "
                             f"judged for {', '.join(decided.unjudged)}, too few requests (a replica the coordinators' "
                             "dynamic snitch routes reads around serves none until the snitch resets its scores); "
                             "not worse elsewhere. Run the same command again to judge it on new windows, or give "
                             "--rollback")
        return {"verdict": decided, "judged": decided.as_dict(), "demand_change": demands[-1],
                "windows": [{"verdict": v.verdict, "worse": list(v.worse), "unjudged": list(v.unjudged),
                             "demand_change": d, "checks": {c.name: round(c.change, 4) for c in v.checks}}
                            for v, d in zip(verdicts, demands)],
                "snapshots": [snapshot_dict(x) for x in self._after]}

    def _observe_one(self) -> Snapshot:
        self.sleep(self.settings.window_s)
        return self.actions.counters()

    def _live(self, step: Step) -> dict[str, Any]:
        results = {}
        for knob, value in self.plan.live.items():
            answer = self.actions.set_live(step.node, knob, value)
            if answer.get("error"):
                raise StepFailed(f"{knob} = {value} not applied on {step.node}: {answer['error']}")
            results[knob] = answer
            self._live_before.setdefault(step.node, {})[knob] = answer.get("before")
        return {"set": results}

    def _schema(self, step: Step) -> dict[str, Any]:
        self._tables_before = self.actions.table_options(self.plan.tables)
        self.actions.alter(self.plan.schema)
        return {"before": self._tables_before}

    def _restart(self, step: Step) -> dict[str, Any]:
        pending = self._pending(step.node)
        self.actions.restart(step.node, self.plan)
        return self._wait_ready(step.node, pending)

    def _rewrite(self, step: Step) -> dict[str, Any]:
        pending = self._pending(step.node)
        done = self.actions.rewrite(step.node, step.table, self.plan.throttle_mib_s)
        return {"rewrite": done, **self._wait_ready(step.node, pending)}

    def _volume(self, step: Step) -> dict[str, Any]:
        self.say(f"  not done by rollout: {step.what}")
        return {"manual": step.what}

    # -- waiting for a node
    def _pending(self, node: str) -> int | None:
        try:
            return self.actions.pending_compactions(node)
        except Exception:   # not known: the wait takes the settled threshold alone
            return None

    def _wait_ready(self, node: str, pending_before: int | None) -> dict[str, Any]:
        """Until the node is NORMAL, seen up by every other node, no node holds hints for it, and its pending
        compactions are back to what they were (or SETTLED_COMPACTIONS); StepFailed past the node timeout."""
        deadline = self.clock() + self.settings.node_timeout_s
        started = self.clock()
        address = self.actions.address(node)
        settled = max(SETTLED_COMPACTIONS, pending_before or 0)
        last = "not asked yet"
        while True:
            try:
                last = self._not_ready(node, address, settled)
            except Exception as exc:   # a node restarting does not answer for a while
                last = f"does not answer yet ({_one_line(exc, 120)})"
            if last is None:
                return {"ready_after_s": round(self.clock() - started, 1)}
            if self.clock() > deadline:
                raise StepFailed(f"node {node} not ready within {self.settings.node_timeout_s:.0f} s: {last}")
            self.sleep(2.0)

    def _not_ready(self, node: str, address: str, settled: int) -> str | None:
        status = self.actions.status(node)
        if str(status.get("mode")) != "NORMAL":
            return f"mode {status.get('mode')}"
        for other in self.nodes:
            if other == node:
                continue
            seen = self.actions.status(other)
            if not _listed(address, seen.get("live") or ()):
                return f"{other} does not see it up yet"
            held = [h for h in (seen.get("pending_hints") or ()) if _listed(address, [str(h.get("address", ""))])]
            if held:
                return f"{other} still holds hints for it"
        pending = self.actions.pending_compactions(node)
        if pending is not None and pending > settled:
            return f"{pending} compactions pending"
        return None

    # -- resuming and restoring
    def _recall(self, step: Step, recorded: Mapping[str, Any]) -> None:
        result = recorded.get("result") or {}
        if step.kind == "live":
            for knob, answer in (result.get("set") or {}).items():
                self._live_before.setdefault(step.node, {})[knob] = (answer or {}).get("before")
        if step.kind == "schema":
            self._tables_before = dict(result.get("before") or {})
        if step.kind == "observe-before":
            self._before = [snapshot_from(x) for x in result.get("snapshots") or ()]
        if step.kind == "observe-after":
            self._after = [snapshot_from(x) for x in result.get("snapshots") or ()]

    def _restore_canary(self, canary: str, result: RolloutResult) -> None:
        """Put the canary back where its steps can be undone; say what cannot be."""
        for knob, before in (self._live_before.get(canary) or {}).items():
            if before is None:
                result.not_restored.append(f"{knob} (its value before was not read)")
                continue
            try:
                answer = self.actions.set_live(canary, knob, before)
                (result.not_restored if answer.get("error") else result.restored).append(f"{knob} = {before}")
            except Exception as exc:
                result.not_restored.append(f"{knob}: {_one_line(exc)}")
        if self.plan.restart:
            try:
                self.actions.restart(canary, None)
                self._wait_ready(canary, None)
                result.restored.append("restarted into the configuration it ran")
            except Exception as exc:
                result.not_restored.append(f"the restart back: {_one_line(exc)}")
        if self.plan.schema and self._tables_before:
            try:
                self.actions.restore_tables(self._tables_before)
                result.restored.append("the table options")
            except Exception as exc:
                result.not_restored.append(f"the table options: {_one_line(exc)}")
        if self.plan.rewrite_tables:
            result.not_restored.append("the rewritten SSTables stay as written (another rewrite would take them "
                                       "back)")
        self.say("  put back: " + ("; ".join(result.restored) or "nothing"))
        if result.not_restored:
            self.say("  NOT put back: " + "; ".join(result.not_restored))


def judge_canary(before: Sequence[Window], after: list[Snapshot], canary: str, guard: GuardSettings, limit: int,
                 read_more: Callable[[], Snapshot] | None = None
                 ) -> tuple[GuardVerdict | None, list[GuardVerdict], list[float | None]]:
    """The canary's verdict (guard.py rule 7) from its windows `before` the change and the readings `after` it
    (the first at the settle's end), reading more with `read_more` while the rule asks for them (appended to
    `after`; None: judge what is there). The windows judged each run from the same first reading to one reading
    later than the one before, so the canary's requests pile up and a kind it serves little of is judged once it
    has served enough; a restart of the canary within them starts the span again (3 at most). The nodes left
    unchanged tell how the demand moved (rule 5); with other replicas its latencies and failures decide (rule 6).
    Returns the verdict (None: undecided), and each window's verdict and demand change."""
    verdicts: list[GuardVerdict] = []
    demands: list[float | None] = []
    restarts, start, end = 0, 0, 1
    while len(verdicts) < limit and restarts <= 3:
        if end >= len(after):
            if read_more is None:
                break
            after.append(read_more())
            continue
        window = window_between(after[start], after[end])
        if window.only({canary}).partial:
            restarts, start, end = restarts + 1, end, end + 1
            continue
        verdict, demand = judge_on_nodes(before, window, {canary}, guard)
        verdicts.append(verdict)
        demands.append(demand)
        decided = after_restart(verdicts, limit, guard)
        if decided is not None:
            return decided, verdicts, demands
        end += 1
    return None, verdicts, demands


def snapshot_dict(snapshot: Snapshot) -> dict[str, Any]:
    """A Snapshot as plain data (stored with its step, so that a resumed rollout judges against it)."""
    from dataclasses import asdict

    return {"at": snapshot.at, "asked": list(snapshot.asked),
            "nodes": {name: asdict(counters) for name, counters in snapshot.nodes.items()}}


def snapshot_from(data: Mapping[str, Any]) -> Snapshot:
    from .window import NodeCounters, PerKind

    nodes = {}
    for name, c in (data.get("nodes") or {}).items():
        fields = {k: (PerKind(**v) if isinstance(v, Mapping) and k != "buckets" else v) for k, v in c.items()}
        fields["buckets"] = {kind: tuple(counts) for kind, counts in (c.get("buckets") or {}).items()}
        nodes[name] = NodeCounters(**fields)
    return Snapshot(at=float(data["at"]), nodes=nodes, asked=tuple(data.get("asked") or ()))


def _listed(address: str, listed: Sequence[str]) -> bool:
    """`address` among `listed` (addresses, maybe with a leading / or a :port)."""
    return any(str(item).lstrip("/").split(":")[0] == address for item in listed)


def _windows(snapshots: Sequence[Snapshot]) -> list[Window]:
    return [window_between(a, b) for a, b in zip(snapshots, snapshots[1:])]


def _one_line(exc: BaseException, limit: int = 300) -> str:
    return _line(exc, limit) or type(exc).__name__
