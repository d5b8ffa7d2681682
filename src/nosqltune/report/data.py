"""What a report shows, read from a study store: one TuningView per tuning study."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError


@dataclass
class TuningView:
    name: str
    settings: dict[str, Any]
    objective: Any                      # tuning.objective.Objective
    space: Any                          # optimizers.space.TuningSpace
    fixed: dict[str, Any]
    rows: list[dict[str, Any]]          # the tuning trials, in run order
    entries: list[dict[str, Any]]       # one per configuration, in the order first measured
    best: dict[str, Any] | None
    default: dict[str, Any] | None
    compare_rows: list[dict[str, Any]] = field(default_factory=list)
    environments: list[dict[str, Any]] = field(default_factory=list)
    all_rows: list[dict[str, Any]] = field(default_factory=list)   # every trial of the study, all tags

    @property
    def tune(self) -> dict[str, Any]:
        return self.settings["tune"]

    @property
    def label(self) -> str:
        spec = self.tune["spec"]
        adapter = spec.get("options", {}).get("space_adapter")
        return f"{self.name} ({spec['optimizer']}{' + ' + adapter if adapter and adapter != 'none' else ''})"

    @property
    def comparisons(self) -> dict[str, Any]:
        return self.settings.get("compare", {})

    def values(self) -> list[float | None]:
        """The objective value of each configuration in the order it was first measured (None: failed or
        infeasible)."""
        return [e["value"] if e["feasible"] else None for e in self.entries]


def load_views(path: str, study_name: str | None = None) -> list[TuningView]:
    """The tuning studies of the store at `path` (`study_name` only); UsageError when there is none."""
    from ..store import open_for_reading

    store = open_for_reading(path)
    try:
        views = tuning_views(store, study_name)
    finally:
        store.close()
    if not views:
        raise UsageError(f"no tuning study{' named ' + repr(study_name) if study_name else ''} in {path} "
                         "(a report needs a study made by `nosqltune tune`)")
    return views


def tuning_views(store, study_name: str | None = None) -> list[TuningView]:
    """The tuning studies of an open store (`study_name` only), none when it holds none."""
    from ..evaluation.study import study_of
    from ..tuning.results import best_configuration, configurations, confirmed_best, default_entry

    studies = [s for s in store.studies() if s["settings"].get("tune")]
    if study_name:
        studies = [s for s in studies if s["name"] == study_name]
    if not studies:
        return []
    fingerprints = store.environments()
    views = []
    for study in studies:
        opened = study_of(store, study)
        tune, objective, space = opened.tune, opened.objective, opened.space
        rows = opened.trials(tag=None)
        tuned = [r for r in rows if r["tag"] == "tune"]
        workloads = tune["spec"]["workloads"]
        entries = sorted(configurations(tuned, objective, workloads, space), key=lambda e: min(e["trial_ids"]))
        env_ids = sorted({r["environment_id"] for r in rows if r["environment_id"] is not None})
        views.append(TuningView(
            name=study["name"], settings=study["settings"], objective=objective, space=space,
            fixed=tune["fixed"], rows=tuned, entries=entries,
            best=confirmed_best(best_configuration(tuned, objective, workloads, space), study["settings"], space),
            default=default_entry(tuned, objective, workloads, space),
            compare_rows=[r for r in rows if r["tag"] == "compare"],
            environments=[fingerprints[i] for i in env_ids if i in fingerprints], all_rows=rows))
    return views


def best_so_far(values: list[float | None], maximize: bool) -> list[float | None]:
    out, best = [], None
    for v in values:
        if v is not None and (best is None or (v > best if maximize else v < best)):
            best = v
        out.append(best)
    return out


def knob_matrix(view: TuningView) -> tuple[list[str], list[list[float]], list[float]]:
    """(knob names, one numeric row per complete configuration, objective values): categorical knobs as
    their choice index, booleans as 0/1; knobs that never changed are left out."""
    names = [k.name for k in view.space.knobs]
    rows, values = [], []
    for entry in view.entries:
        if entry["value"] is None:
            continue
        rows.append([numeric(view.space.by_name[n], entry["config"][n]) for n in names])
        values.append(entry["value"])
    keep = [i for i in range(len(names)) if len({r[i] for r in rows}) > 1]
    return [names[i] for i in keep], [[r[i] for i in keep] for r in rows], values


def numeric(knob, value) -> float:
    if knob.type == "bool":
        return float(bool(value))
    if knob.type == "enum":
        return float(list(knob.choices).index(value))
    return float(value)


def internals_runs(view: TuningView) -> dict[str, dict[str, Any]]:
    """label -> metrics of one run each of the default and the best, for the over-the-run plots: from the
    comparison (its first complete round with per-second series), else from the tuning trials."""
    out: dict[str, dict[str, Any]] = {}
    for label in ("default", "best"):
        runs = [r for r in view.compare_rows if r["state"] == "COMPLETE"
                and (r.get("meta") or {}).get("candidate") == label]
        runs.sort(key=lambda r: (not (r["metrics"] or {}).get("intervals"), r["id"]))
        if runs:
            out[label] = runs[0]["metrics"]
    if len(out) < 2:
        pick = {"default": view.default, "best": view.best}
        for label, entry in pick.items():
            if label in out or not entry:
                continue
            rows = [r for r in view.rows if r["id"] in entry.get("trial_ids", ()) and r["state"] == "COMPLETE"]
            if rows:
                out[label] = rows[0]["metrics"]
    return out
