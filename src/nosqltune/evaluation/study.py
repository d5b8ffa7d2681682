"""A tuning study as the commands that read it see it (best, compare, report, the end of tune): its harness
settings, knob spaces, spec and objective, rebuilt once from what `tune` stored, and its trials."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..knobs.space import TuningSpace
from ..objective import Objective
from ..systems.base import TrialSettings
from ..tuning.loop import DEFAULT_STUDY_NAME, TuneSpec


@dataclass
class TuningStudy:
    store: Any                   # the open trial store (the caller closes it)
    record: dict[str, Any]       # the store's study: id, name, settings (its "tune" entry made by `tune`)
    settings: TrialSettings      # the harness every trial of the study ran with
    full_space: Any              # the datastore's whole knob space under those settings (knobs.KnobSpace)
    spec: TuneSpec
    objective: Objective
    space: TuningSpace           # the searched knobs with the fixed ones

    @property
    def id(self) -> int:
        return self.record["id"]

    @property
    def name(self) -> str:
        return self.record["name"]

    @property
    def tune(self) -> dict[str, Any]:
        return self.record["settings"]["tune"]

    @property
    def system(self) -> str:
        return self.tune.get("system", "cassandra")

    def trials(self, tag: str | None = "tune") -> list[dict[str, Any]]:
        """The study's trials in the order run: those of `tune` by default, every one with tag None."""
        rows = self.store.trials(self.id)
        return rows if tag is None else [r for r in rows if r["tag"] == tag]

    def target(self, metrics: tuple[str, ...] | None = None):
        """What runs its trials (the datastore, or a recorded surrogate answering for `metrics`)."""
        from ..tuning.workers import trial_target

        metrics = metrics or (self.objective.metric,) + tuple(c.metric for c in self.objective.constraints)
        return trial_target(self.settings, self.system, seed=self.spec.seed, metrics=metrics)

    def reread(self) -> "TuningStudy":
        """The same study as the store holds it now (after a confirmation or comparison stored its result)."""
        return study_of(self.store, self.store.find_study(self.name))


def study_of(store, record: dict[str, Any]) -> TuningStudy:
    """The study `record` of `store` (one made by `tune`: its settings hold a "tune" entry)."""
    from ..tuning.workers import search_space

    tune = record["settings"]["tune"]
    settings = TrialSettings.from_dict(tune["harness"])
    full_space = search_space(settings, tune.get("system"), tune["workloads"])   # the datastore's (a surrogate
    # answers for a subset; a profile's table options are its table knobs' defaults)
    spec = TuneSpec.from_stored(tune["spec"])
    return TuningStudy(store=store, record=record, settings=settings, full_space=full_space, spec=spec,
                       objective=Objective.from_dict(spec.objective),
                       space=TuningSpace(full_space.subset(tune["knobs"]), tune["fixed"]))


def open_study(store, where: str, name: str | None, needed_by: str) -> TuningStudy:
    """The tuning study `name` (default tune) of the open `store` at `where`; one line naming the studies there
    when it has no such study (`needed_by`: the command, for the message)."""
    name = name or DEFAULT_STUDY_NAME
    record = store.find_study(name)
    if not (record or {}).get("settings", {}).get("tune"):
        names = [s["name"] for s in store.studies() if s["settings"].get("tune")]
        raise UsageError(f"no tuning study '{name}' in {where}: "
                         + (f"give --study-name, one of {', '.join(names)}" if names else
                            f"it holds no study made by `nosqltune tune` ({needed_by} needs one)"))
    return study_of(store, record)
