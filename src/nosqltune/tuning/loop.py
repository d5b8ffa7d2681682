"""The tuning loop: ask the optimizer, run cold trials, store them, tell the cost; resumable from the store.

Every trial is written to the store (RUNNING) before it runs and finished after, with its suggestion number
in `meta`. Resuming rebuilds the optimizer by replay: a fresh optimizer with the study's seed is asked again,
and each suggestion that the store already holds is answered from the store instead of being run (the
optimizers are deterministic given their seed and the costs they are told). So a resumed study neither
repeats nor loses a finished trial; a trial cut short (Ctrl-C, crash) is marked `interrupted` and run
again. Should a replayed suggestion differ from the stored one (a changed library), the stored result is
given to the optimizer as an observation and the loop goes on (irace, which cannot take observations,
stops with an error instead).

A study resumed on another machine (other hardware: CPU model, cores, memory) first runs the default there as the
machine's reference (and its best beside it, as a check), and every run is valued as on the study's first machine
(tuning.machine_reference).

A failed trial (refused configuration, crash, timeout, too many failed operations) never stops the study:
the optimizer is told a penalty (the worst value seen so far), and the loop goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import NosqltuneError
from ..optimizers import make_optimizer
from ..optimizers.base import Optimizer, Suggestion
from ..knobs.space import TuningSpace
from ..store import TrialState
from ..systems.base import TrialResult
from ..objective import Evaluation, Objective
from .cost import BuildPacer
from .denoise import Denoiser
from .machine_reference import FACTOR_KEY, REFERENCE_KEY, MachineFactors, hardware_of, home_runs, home_summary, \
    is_reference, machine_factors, needs_reference

TAG = "tune"


DEFAULT_STUDY_NAME = "tune"
DEFAULT_BUDGET = 40


@dataclass
class TuneSpec:
    """Everything that defines a tuning run; stored with the study so that --resume needs nothing else."""

    optimizer: str
    workloads: list[str]                 # workload names or properties-file paths (several: instances)
    budget: int                          # trials (cold runs) at most
    objective: dict[str, Any]
    seed: int = 1
    include_default: bool = True
    max_seconds: float | None = None     # wall-time budget over all sessions of the study
    patience: int | None = None          # stop when the best configuration is unchanged for this many suggestions
    build_share: float | None = None     # dataset builds kept to this share of the machine time (cost.BuildPacer)
    pacer_tells: str = "ran"             # what the optimizer is told of a suggestion the pacer ran on built data:
    #                                      "ran" (Optimizer.tell_ran) or "projection" (its cost as the suggestion's)
    denoise: bool = False                # values corrected by the trial's machine probe, incumbents re-measured once,
    #                                      configurations whose repeats disagree never the best (tuning.denoise)
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pacer_tells not in ("ran", "projection"):
            raise ValueError(f"pacer_tells is 'ran' or 'projection', got {self.pacer_tells!r}")

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> "TuneSpec":
        """The spec a study was stored with. A paced study stored before `pacer_tells` existed told its optimizers
        the projection, and resumes doing so (its replay then asks what it asked)."""
        stored = dict(stored)
        if stored.get("build_share") and "pacer_tells" not in stored:
            stored["pacer_tells"] = "projection"
        return cls(**stored)


Runner = Callable[[dict, str], TrialResult]   # (overrides, workload name) -> the trial's result
Outcome = TrialResult  # the name tests and other systems' runners use


class Display:
    """Progress callbacks; the default says nothing (see tuning.progress for the terminal one)."""

    def start(self, loop: "TuningLoop") -> None: ...
    def trial_started(self, loop: "TuningLoop", suggestion: Suggestion, workload: str, kind: str) -> None: ...
    def trial_phase(self, message: str) -> None: ...
    def trial_finished(self, loop: "TuningLoop", row: dict, evaluation: Evaluation | None) -> None: ...
    def replayed(self, loop: "TuningLoop", count: int) -> None: ...
    def note(self, message: str) -> None: ...
    def finish(self, loop: "TuningLoop", reason: str) -> None: ...


@dataclass
class Point:
    """One evaluated configuration (a suggestion): its trials and its value."""

    number: int
    config: dict[str, Any]
    kind: str                               # default | suggested
    rows: list[dict] = field(default_factory=list)
    evaluation: Evaluation | None = None
    cost: float | None = None
    ran: bool = False                       # trials were run now (not only read back from the store)
    unstable: float | None = None           # --denoise: p of its repeats' spread against the noise, when flagged
    unrepeated: bool = False                # --denoise: would have been the best, but no budget was left to repeat it
    replaced: dict[str, Any] = field(default_factory=dict)   # the suggestion's shaping values the pacer replaced


def spent(optimizer, point: Point, pacer: BuildPacer | None = None) -> None:
    """Tell the optimizer (and the build pacer) what the point's trials cost in machine time and whether one built
    a dataset (their stored timings: total_s, dataset_build_s), after its cost was told."""
    timings = [r.get("timings") or {} for r in point.rows]
    once = [r.get("timings") or {} for r in point.rows if not (r.get("meta") or {}).get("repeat")]
    # the optimizer learns what one measurement costs (a --denoise repeat is the loop's, not the suggestion's)
    optimizer.spent(point.config, float(sum(t.get("total_s") or 0.0 for t in once)),
                    any(t.get("dataset_build_s") for t in timings))
    if pacer is not None:
        pacer.seen(point.config, timings)


class TuningLoop:
    def __init__(self, store, study_id: int, spec: TuneSpec, space: TuningSpace, runner: Runner, *,
                 workdir: Path, environment_id: int | None = None, workload_info: Callable[[str], dict] | None = None,
                 display: Display | None = None) -> None:
        self.store = store
        self.study_id = study_id
        self.spec = spec
        self.space = space
        self.runner = runner
        self.workdir = Path(workdir)
        self.environment_id = environment_id
        self.workload_info = workload_info or (lambda name: {"name": name})
        self.display = display or Display()
        self.objective = Objective.from_dict(spec.objective)
        self.points: list[Point] = []
        self.trials_used = 0
        self.seconds_used = 0.0
        self.best: Point | None = None
        self.default_point: Point | None = None
        self.started = time.monotonic()
        self.stale = 0
        self.ask_seconds: list[float] = []
        self._phase: Callable[[str], None] = self.display.trial_phase
        self.denoiser = Denoiser(self.objective, self.points, space.key)
        self.machine = MachineFactors(self.objective.metric)
        self.references: list[dict] = []    # the default's and the incumbent's runs on other machines than the first

    def trial_phase(self, message: str) -> None:
        """A running trial's progress (the runner's `progress` callback): shown by the display and stored on the
        trial's row as its phase changes (Store.phase_recorder), for the dashboard."""
        self._phase(message)

    # ------------------------------------------------------------------ store
    def _stored(self) -> dict[int, list[dict]]:
        """Finished tuning trials by suggestion number; trials cut short are marked interrupted."""
        groups: dict[int, list[dict]] = {}
        for row in self.store.trials(self.study_id):
            if row["tag"] != TAG:
                continue
            if row["state"] in (TrialState.RUNNING.value, TrialState.WAITING.value):  # cut short, or never run
                self.store.finish_trial(row["id"], TrialState.FAIL, failure_kind="interrupted",
                                        error="the tuning process stopped during this trial")
                continue
            if row["failure_kind"] == "interrupted":
                continue
            if is_reference(row):
                self.references.append(row)
            else:
                groups.setdefault(int(row["meta"]["suggestion"]), []).append(row)
            self.trials_used += 1
            if row["finished_at"] and row["started_at"]:
                self.seconds_used += row["finished_at"] - row["started_at"]
        return groups

    def _run(self, point: Point, suggestion: Suggestion, workload: str, repeat: bool = False,
             reference: str | None = None) -> dict:
        factor = self.machine.of({"environment_id": self.environment_id, "meta": {"instance": workload}})
        meta = {"suggestion": point.number, "kind": point.kind, "optimizer": self.spec.optimizer,
                "instance": workload, **({"opt": suggestion.meta} if suggestion.meta else {}),
                **({FACTOR_KEY: factor} if factor is not None else {}),   # with the run: readers see it valued
                **({"repeat": True} if repeat else {}), **({REFERENCE_KEY: reference} if reference else {}),
                **({"replaced": point.replaced} if point.replaced else {})}
        trial_id = self.store.start_trial(self.study_id, point.config, self.workload_info(workload), tag=TAG,
                                          environment_id=self.environment_id, meta=meta)
        self._phase = self.store.phase_recorder(trial_id, self.display.trial_phase)
        self.display.trial_started(self, suggestion, workload, point.kind)
        began = time.monotonic()
        try:
            row = self.store.record(trial_id, lambda: self.runner(point.config, workload))
        finally:
            self._phase = self.display.trial_phase
        self.trials_used += 1
        self.seconds_used += time.monotonic() - began
        return row

    # ------------------------------------------------------------------ machines
    def _reference(self, point: Point, default: Suggestion, rows: list[dict], machines: dict) -> None:
        """On a machine the study has not run on, run the default there first and the study's incumbent (its best
        on the first machine) beside it as a check, once per workload, as the budget allows (the default's first):
        the machine's references (tuning.machine_reference), kept apart from the configurations' own runs. `rows`:
        the study's stored runs."""
        incumbent = self._incumbent(rows, machines)
        missing = needs_reference(rows + self.references, self.environment_id, list(self.spec.workloads), machines,
                                  incumbent=incumbent is not None)
        missing = missing[:max(0, self.spec.budget - self.trials_used)]   # the default's first, as the budget allows
        if not missing or self._budget_left(len(missing)) is not None:
            return
        what = "the default and the best so far" if any(k == "incumbent" for _, k in missing) else "the default"
        self.display.note(f"this machine (environment {self.environment_id}) is not the one the study's default "
                          f"ran on: running {what} here first, as its references ({len(missing)} "
                          f"trial{'s' if len(missing) > 1 else ''})")
        for name, kind in missing:
            which = point if kind == "default" else incumbent
            row = self._run(which, default if kind == "default" else Suggestion(which.config), name, reference=kind)
            self.references.append(row)
            if row["state"] != TrialState.COMPLETE.value:
                self.display.note(f"the {kind}'s reference run on {name} failed ({row['failure_kind']})" +
                                  (f": this machine's runs on {name} are valued as measured" if kind == "default"
                                   else ": only the check that the machines move configurations alike is lost"))

    def _incumbent(self, rows: list[dict], machines: dict) -> Point | None:
        """The study's best configuration on its first machine, measured on every workload there (None when that
        is the default, or nothing is)."""
        from .results import best_configuration

        home = home_runs(rows, machines)
        best = best_configuration(home, self.objective, list(self.spec.workloads), self.space)
        if best is None or best["kind"] == "default" or best["partial"]:
            return None
        ids = set(best["trial_ids"])
        first = next(r for r in home if r["id"] in ids)
        return Point(int(first["meta"]["suggestion"]), first["config"], "suggested")

    def _rebase(self, rows: list[dict], machines: dict) -> None:
        """Each run's factor to the study's first machine, kept on its row (what best and report read); a factor a
        row keeps already is not changed, so a resumed study tells its optimizer what it told before."""
        self.machine = machine_factors(rows, self.objective.metric, machines)
        for row in rows:
            factor = self.machine.of(row)
            if factor is not None and (row.get("meta") or {}).get(FACTOR_KEY) is None:
                self._keep(row, {FACTOR_KEY: factor})
        said = self.machine.describe()
        if said:
            self.display.note(said)

    # ------------------------------------------------------------------ values
    def _worst(self) -> float | None:
        return self.objective.worst(p.evaluation.value for p in self.points
                                    if p.evaluation is not None and p.evaluation.value is not None)

    def _value(self, point: Point, workloads: list[str], refit: bool = True) -> tuple[Evaluation, float | None]:
        """The point's evaluation from its trials (the mean of its runs per workload) and, with --denoise, its value
        corrected and the p of its repeats when they are unstable (the denoiser refits on what is stored so far and
        this point, unless `refit` is off: then the fit of the last call corrects it, to compare two points alike)."""
        reference = None
        if self.objective.combine == "worst-gain":   # gains against the default's runs on the same workloads
            default = point if point.kind == "default" else next((p for p in self.points if p.kind == "default"),
                                                                 None)
            reference = self._summaries(default, workloads) if default else None
        evaluation = self.objective.evaluate(self._summaries(point, workloads), reference)
        if self.spec.denoise and evaluation.value is not None:
            return self.denoiser.evaluate(point, workloads, evaluation, refit=refit)
        return evaluation, None

    def _summaries(self, point: Point, workloads: list[str]) -> list[dict | None]:
        """The mean summary of the point's runs on each workload (None where one failed or none ran), each run's
        objective figures as on the study's first machine."""
        from .results import _mean_summary

        out = []
        for name in workloads:
            rows = [r for r in point.rows if r["meta"]["instance"] == name]
            ok = rows and all(r["state"] == TrialState.COMPLETE.value for r in rows)
            out.append(_mean_summary([home_summary(r, self.objective.metric) for r in rows]) if ok else None)
        return out

    def _evaluate(self, point: Point, workloads: list[str]) -> None:
        point.evaluation, point.unstable = self._value(point, workloads)
        point.cost = self.objective.cost(point.evaluation, self._worst())
        self.points.append(point)
        for row in point.rows:
            self._keep(row, {"cost": point.cost, **(self.denoiser.meta(row, point) if self.spec.denoise else {}),
                             **({"unrepeated": True} if point.unrepeated else {})})
        self._update_best(point)
        if point.ran:
            self.display.trial_finished(self, point.rows[-1], point.evaluation)

    def _update_best(self, point: Point) -> None:
        ev = point.evaluation
        if point.kind == "default" and self.default_point is None and ev is not None and ev.value is not None:
            self.default_point = point
        if ev is None or ev.value is None or not ev.feasible or point.unstable is not None or point.unrepeated:
            self.stale += 1
            return
        if self.best is None or self.objective.better(ev.value, self.best.evaluation.value):
            self.best = point
            self.stale = 0
        else:
            self.stale += 1

    # ------------------------------------------------------------------ the loop
    def _budget_left(self, needed: int) -> str | None:
        if self.trials_used + needed > self.spec.budget:
            return "budget"
        if self.spec.max_seconds is not None and self.seconds_used >= self.spec.max_seconds:
            return "time"
        if self.spec.patience and self.stale >= self.spec.patience and self.best is not None:
            return "converged"
        return None

    def run(self) -> str:
        """Run (or resume) until the budget, the time or the optimizer ends; returns the reason."""
        stored = self._stored()
        replayed = 0
        optimizer = make_optimizer(self.spec.optimizer, self.space, seed=self.spec.seed, budget=self.spec.budget,
                                   workloads=self.spec.workloads, workdir=self.workdir,
                                   include_default=self.spec.include_default, options=self.spec.options)
        pacer = BuildPacer(self.space, self.spec.build_share) if self.spec.build_share else None
        self.display.start(self)
        reason = "optimizer finished"
        try:
            number = 0
            default = Suggestion(self.space.default())
            point = Point(0, default.config, "default", rows=list(stored.get(0, [])))
            with_default = self.spec.include_default and not optimizer.picks_instances
            if with_default and not self.spec.denoise:   # --denoise corrects by the probe instead
                machines = hardware_of(self.store.environments())
                self._reference(point, default, [r for rows in stored.values() for r in rows], machines)
                self._rebase([r for rows in stored.values() for r in rows] + self.references, machines)
            if with_default:
                replayed += bool(point.rows)
                if not self._complete(point, default, self.spec.workloads):
                    return self._finish("budget")
                self._remeasure(point, default, self.spec.workloads)
                self._evaluate(point, self.spec.workloads)
                optimizer.observe(point.config, point.cost)
                spent(optimizer, point, pacer)
                number = 1
            while True:
                why = self._budget_left(1)
                if why:
                    reason = why
                    break
                began = time.perf_counter()
                suggestion = optimizer.ask()
                ask_s = time.perf_counter() - began
                if suggestion is None:
                    break
                workloads = [suggestion.instance] if suggestion.instance else list(self.spec.workloads)
                config, replaced = pacer.place(suggestion.config) if pacer else (suggestion.config, {})
                rows = list(stored.get(number, []))
                if rows:
                    replayed += 1
                    if self.space.key(rows[0]["config"]) != self.space.key(config) or (
                            suggestion.instance and rows[0]["meta"]["instance"] != suggestion.instance):
                        self._diverged(optimizer, number, rows, pacer)
                        number += 1
                        continue
                else:
                    self.ask_seconds.append(ask_s)
                    suggestion.meta = {**suggestion.meta, "ask_s": round(ask_s, 4)}
                    if replaced:
                        asked = ", ".join(f"{k}={v}" for k, v in replaced.items())
                        self.display.note(f"suggestion {number} asks for data not built ({asked}) and the build "
                                          "share is spent: it runs on the nearest dataset built")
                kind = "default" if self.space.key(config) == self.space.key(self.space.default()) else "suggested"
                point = Point(number, config, kind, rows=rows, replaced=replaced)
                if not self._complete(point, suggestion, workloads):
                    reason = "budget"
                    break
                if not optimizer.picks_instances:    # irace repeats configurations itself, over its instances
                    self._remeasure(point, suggestion, workloads)
                self._evaluate(point, workloads)
                if replaced and self.spec.pacer_tells == "ran":   # run on data built before: what ran, as the
                    optimizer.tell_ran(suggestion, config, point.cost)   # optimizer can take it
                else:
                    optimizer.tell(suggestion, point.cost)
                spent(optimizer, point, pacer)
                number += 1
                if replayed and not rows:
                    self.display.replayed(self, replayed)
                    replayed = 0
        finally:
            optimizer.close()
        return self._finish(reason)

    def _complete(self, point: Point, suggestion: Suggestion, workloads: list[str]) -> bool:
        """Run the trials this point still lacks; False when the budget does not allow them."""
        have = {r["meta"]["instance"] for r in point.rows}
        missing = [w for w in workloads if w not in have]
        if missing and self._budget_left(len(missing)) is not None:
            return False
        for name in missing:
            point.rows.append(self._run(point, suggestion, name))
        point.ran = bool(missing)
        return True

    def _remeasure(self, point: Point, suggestion: Suggestion, workloads: list[str]) -> None:
        """--denoise: a configuration whose single run would make it the study's best is run once more before its
        value is told (the best of many single runs is partly the luckiest): its value is then the mean of both,
        and two runs that disagree beyond the study's noise mark it unstable. A repeat cut short is finished on
        resume; a replayed point that has its repeat runs nothing."""
        if not self.spec.denoise:
            return
        runs = {w: sum(r["meta"]["instance"] == w and r.get("failure_kind") != "interrupted" for r in point.rows)
                for w in workloads}
        missing = [w for w in workloads if runs[w] < 2]
        if not missing:
            return
        if len(missing) == len(workloads):    # not begun: only a new incumbent is re-measured
            provisional = self._value(point, workloads)[0]
            best = self._value(self.best, list(self.spec.workloads), refit=False)[0] if self.best else None
            if provisional.value is None or not provisional.feasible or (
                    best is not None and best.value is not None
                    and not self.objective.better(provisional.value, best.value)):
                return
        if self._budget_left(len(missing)) is not None:   # told its one run, but never the best on it
            point.unrepeated = True
            self.display.note(f"suggestion {point.number} would be the best by one run, and no budget is left to "
                              "measure it again: it is not made the best (--denoise)")
            return
        self.display.note(f"suggestion {point.number} would be the best by one run: measuring it once more "
                          "(--denoise)")
        for name in missing:
            point.rows.append(self._run(point, suggestion, name, repeat=True))
        point.ran = True

    def _diverged(self, optimizer: Optimizer, number: int, rows: list[dict], pacer: BuildPacer | None) -> None:
        if optimizer.picks_instances:
            raise NosqltuneError(f"cannot resume: {self.spec.optimizer} now suggests a different configuration "
                                 f"at step {number} than the stored one (was the library upgraded?); start a "
                                 "new study (--study-name)")
        point = Point(number, rows[0]["config"], rows[0]["meta"].get("kind", "suggested"), rows=rows)
        self._evaluate(point, list(self.spec.workloads))
        optimizer.observe(point.config, point.cost)
        spent(optimizer, point, pacer)
        self.display.note(f"step {number}: the optimizer's replayed suggestion differs from the stored one; "
                          "the stored result was given to it as an observation")

    def _finish(self, reason: str) -> str:
        # a configuration measured several times (irace races configurations over instances): its mean counts
        from .results import best_configuration

        if self.spec.denoise:
            self._rejudge()
        found = best_configuration([r for p in self.points for r in p.rows], self.objective, self.spec.workloads,
                                   self.space)
        if found:
            self.best = Point(-1, found["config"], found["kind"], evaluation=Evaluation(found["value"], True, 0))
        elif self.spec.denoise:   # every configuration measured was unstable or unrepeated
            self.best = None
        self.display.finish(self, reason)
        return reason

    def _rejudge(self) -> None:
        """At the end, every repeated configuration judged against the whole study's noise (a point judged early
        had fewer repeats beside it) and every trial's corrected value made with the final fit, so the study's
        best compares values corrected alike; kept in the store; the elasticity said."""
        flags: dict[Any, list[float]] = {}
        for (key, _), p in self.denoiser.final().items():
            flags.setdefault(key, []).append(p)
        for point in self.points:
            mine = flags.get(self.space.key(point.config))
            point.unstable = min(mine) if mine else None
            for row in point.rows:
                self._keep(row, self.denoiser.meta(row, point))
        self.display.note(self.denoiser.elasticity.describe())

    def _keep(self, row: dict, update: dict[str, Any]) -> None:
        """Store what changed of a trial's meta (and keep the row in memory as stored)."""
        if any((row.get("meta") or {}).get(k) != v for k, v in update.items()):
            self.store.update_meta(row["id"], update)
            row.setdefault("meta", {}).update(update)
