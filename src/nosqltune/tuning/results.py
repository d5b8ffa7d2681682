"""Reading a study's results: configurations grouped over their trials, the best one, and its diff."""

from __future__ import annotations

import statistics
from typing import Any

import orjson

from ..knobs.space import TuningSpace
from ..objective import Objective
from .cost import format_split, result_hours, time_split
from .machine_reference import home_summary, is_reference


def _mean_summary(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    if len(summaries) == 1:   # one trial per configuration is the common case: its own figures
        return {k: float(v) for k, v in summaries[0].items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)}
    keys = {k for s in summaries for k, v in s.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out = {}
    for key in keys:
        values = [s[key] for s in summaries if isinstance(s.get(key), (int, float))]
        out[key] = (float(values[0]) if len(values) == 1 else statistics.mean(values)) if values else None
    return out


def counted(rows: list[dict]) -> list[dict]:
    """The trials that count: not those cut short (`interrupted`, run again) nor those whose worker went silent
    and that were given again (`stale` with a retry: the retry counts instead)."""
    retried = {r["retry_of"] for r in rows if r.get("retry_of") is not None}
    return [r for r in rows if r.get("failure_kind") != "interrupted" and r["id"] not in retried]


def _group_key(canonical: dict[str, Any]) -> bytes:
    """Equal for equal canonical configurations, as space.key is; orjson's bytes: a study of 10,000 trials makes
    10,000 of them (json.dumps took 0.2 s of the dashboard's first answer)."""
    return orjson.dumps(canonical, option=orjson.OPT_SORT_KEYS)


def configurations(rows: list[dict], objective: Objective, workloads: list[str],
                   space: TuningSpace) -> list[dict[str, Any]]:
    """One entry per distinct configuration: its trials, mean summary per workload, value and feasibility.
    A configuration with a failed trial has value None; one not measured on every workload is `partial`. A run
    on another machine than the study's first counts as on the first (its `machine_factor`: tuning.machine_reference)."""
    groups: dict[str, list[dict]] = {}
    canonical: dict[str, dict[str, Any]] = {}
    for row in counted(rows):
        if (row.get("meta") or {}).get("instance") is None or is_reference(row):
            continue
        config = space.canonical(row["config"])   # once per trial
        key = _group_key(config)
        canonical.setdefault(key, config)
        groups.setdefault(key, []).append(row)
    default_key = _group_key(space.canonical(space.default()))

    def mean_summaries(group: list[dict]) -> tuple[dict[str, dict], bool]:
        per_workload: dict[str, list[dict]] = {}
        failed = False
        for row in group:
            if row["state"] != "COMPLETE":
                failed = True
            else:
                per_workload.setdefault(row["meta"]["instance"], []).append(home_summary(row, objective.metric))
        return {w: _mean_summary(per_workload[w]) for w in workloads if w in per_workload}, failed

    reference = None
    if objective.combine == "worst-gain" and default_key in groups:   # the gains are against the default's runs
        default_means = mean_summaries(groups[default_key])[0]
        reference = [default_means.get(w) for w in workloads]
    out = []
    for key, group in groups.items():
        means, failed = mean_summaries(group)
        partial = len(means) < len(workloads)
        evaluation = (objective.evaluate([means[w] for w in workloads if w in means],
                                         None if partial else reference) if means and not failed else None)
        metas = [row.get("meta") or {} for row in group]
        out.append({"config": canonical[key], "kind": "default" if key == default_key
                    else "suggested", "trials": len(group), "trial_ids": [r["id"] for r in group],
                    "failed": failed, "partial": partial, "per_workload": means,
                    "value": _denoised(group, workloads, objective, evaluation.value) if evaluation else None,
                    "feasible": bool(evaluation and evaluation.feasible),
                    "unstable": any(m.get("unstable") is not None for m in metas),
                    "unrepeated": any(m.get("unrepeated") for m in metas)})
    return out


def _denoised(group: list[dict], workloads: list[str], objective: Objective, measured: float | None) -> float | None:
    """A configuration's value: `measured` (the objective over its mean summaries) unless its trials ran with
    --denoise (each complete one keeps `denoised`, its value corrected by the machine probe): then the corrected
    values' mean per workload, the worst run's when the repeats were found unstable."""
    complete = [r for r in group if r["state"] == "COMPLETE"]
    if measured is None or not complete or any((r.get("meta") or {}).get("denoised") is None for r in complete):
        return measured
    from .denoise import combine

    flagged = any((r.get("meta") or {}).get("unstable") is not None for r in complete)
    per_workload = [[r["meta"]["denoised"] for r in complete if r["meta"]["instance"] == w] for w in workloads]
    return combine([runs for runs in per_workload if runs], objective.maximize, flagged)


def best_configuration(rows: list[dict], objective: Objective, workloads: list[str],
                       space: TuningSpace, entries: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The feasible configuration with the best value, among those measured on every workload (or, when
    none is, among all); ties go to the one measured more often. `entries`: configurations(rows, ...) when the
    caller made them already (a study of thousands of trials)."""
    if entries is None:
        entries = configurations(rows, objective, workloads, space)
    entries = [e for e in entries if e["value"] is not None and e["feasible"] and not e.get("unstable")
               and not e.get("unrepeated")]    # --denoise: never the best on disagreeing repeats or one lucky run
    complete = [e for e in entries if not e["partial"]]
    pool = complete or entries
    if not pool:
        return None
    sign = 1 if objective.maximize else -1
    return max(pool, key=lambda e: (sign * e["value"], e["trials"]))


def confirmed_best(best: dict[str, Any] | None, settings: dict[str, Any], space: TuningSpace) -> dict[str, Any] | None:
    """The study's best as its stored confirmation (`best --confirm`, the end of `tune`) re-measured it: the
    candidate with the best mean over the confirmation's rounds (the default when nothing beat it), with that
    mean as its value and its interval; `best` (the best of single runs) when the study has no confirmation."""
    confirmation = settings.get("confirm") or {}
    label = confirmation.get("best")
    if not best or not label:
        return best
    chosen = confirmation["candidates"][label]
    return {"config": space.canonical(chosen["config"]), "kind": "default" if label == "default" else "suggested",
            "value": chosen["mean"], "interval": chosen["interval"], "trials": chosen["feasible_rounds"],
            "confirmed": True, "label": label, "single_run_best": best}


UNCONFIRMED = ("NOT CONFIRMED: the best of single cold runs, which is partly luck; `nosqltune best --confirm` "
               "re-measures the top configurations beside the default before any of it is applied")


def confirmation_status(best: dict[str, Any] | None) -> str:
    """'confirmed' for a best re-measured beside the default in interleaved rounds, else 'unconfirmed': every place
    that prints a best says which (a single run's +1% is not a reason to change a production setting)."""
    return "confirmed" if best and best.get("confirmed") else "unconfirmed"


def default_entry(rows: list[dict], objective: Objective, workloads: list[str],
                  space: TuningSpace) -> dict[str, Any] | None:
    for entry in configurations(rows, objective, workloads, space):
        if entry["kind"] == "default":
            return entry
    return None


def speedup(objective: Objective, best: float | None, default: float | None) -> float | None:
    """How much better than the default, as a ratio > 1 when better (throughput ratio, or latency ratio
    default / best)."""
    if not best or not default:
        return None
    return best / default if objective.maximize else default / best


def changed_knobs(space: TuningSpace, config: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """knob -> (default, tuned) for every knob whose tuned value differs from its default."""
    config = space.canonical(config)
    return {k.name: (k.default, config[k.name]) for k in space.knobs if config[k.name] != k.default}


def summarize(store, study_id: int, spec, space, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    from ..objective import Objective
    from .results import best_configuration, changed_knobs, configurations, default_entry, speedup

    objective = Objective.from_dict(spec.objective)
    everything = store.trials(study_id)   # confirmation and comparison trials took machine time too
    rows = counted([r for r in everything if r["tag"] == "tune"])
    best = best_configuration(rows, objective, spec.workloads, space)
    default = default_entry(rows, objective, spec.workloads, space)
    entries = configurations(rows, objective, spec.workloads, space)
    return {
        "bottlenecks": bottlenecks(rows, space, [("default", default), ("best", best)], settings),
        "time": time_split(everything), "result_hours": result_hours(everything),
        "optimizer": spec.optimizer, "workloads": spec.workloads, "objective": objective.describe(),
        "metric": objective.metric, "unit": objective.unit,
        "trials": len(rows), "failed_trials": len([r for r in rows if r["state"] == "FAIL"]),
        "configurations": len(entries), "best": best, "default": default,
        "unstable": len([e for e in entries if e["unstable"]]), "denoise": spec.denoise,
        "speedup": speedup(objective, best["value"] if best else None, default["value"] if default else None),
        "changed": {k: list(v) for k, v in changed_knobs(space, best["config"]).items()} if best else {},
    }


def bottlenecks(rows: list[dict], space, entries: list[tuple[str, dict | None]],
                settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """What limited the study's trials (bottleneck/__init__.py): the count of each verdict over its complete
    trials, and for each entry (the default, the best) its trials' most common verdict with the line of its last
    such trial. `settings`: the study's harness as stored (the caps of its volume), for trials stored without a
    verdict."""
    from collections import Counter

    from ..bottleneck import most_common, of_trial
    from ..systems.settings import TrialSettings

    settings = None if settings is None else TrialSettings.from_dict(settings).flat()

    verdicts = [(row, of_trial(row, settings)) for row in counted(rows) if row["state"] == "COMPLETE"]
    verdicts = [(row, v) for row, v in verdicts if v is not None]
    out: dict[str, Any] = {"counts": dict(Counter(v.limit for _, v in verdicts).most_common())}
    for label, entry in entries:
        if entry is None:
            continue
        key = space.key(entry["config"])
        said = most_common([v for row, v in verdicts if space.key(row["config"]) == key])
        if said:
            out[label] = said
    return out


def format_summary(result: dict[str, Any]) -> str:
    unit = result["unit"]

    def value(v):
        return "-" if v is None else (f"{v:,.0f} {unit}" if unit == "ops/s" else f"{v:.2f} {unit}")

    lines = [f"{result['optimizer']} on {', '.join(result['workloads'])}: {result['objective']}; "
             f"{result['trials']} trials ({result['failed_trials']} failed), {result['configurations']} "
             f"configurations; stopped: {result.get('stopped', '-')}"]
    best, default = result["best"], result["default"]
    lines.append(f"default: {value(default['value'] if default else None)}"
                 + (f" ({default['trials']} trials)" if default else " (not measured in this study)"))
    if best:
        if best.get("confirmed"):
            interval = best.get("interval")
            lines.append(f"best:    {value(best['value'])} (confirmed: mean of interleaved cold rounds"
                         + (f", 95% interval {value(interval[0])} .. {value(interval[1])}" if interval else "")
                         + ")" + (f", {(result['speedup'] - 1) * 100:+.1f}% vs the default's mean in the same rounds"
                                  if result["speedup"] else "")
                         + (f", after {result['result_hours']:.2f} machine hours (search and confirmation)"
                            if result.get("result_hours") else ""))
        else:
            lines.append(f"best (NOT CONFIRMED): {value(best['value'])} ({best['trials']} trials)"
                         + (f", {(result['speedup'] - 1) * 100:+.1f}% vs default (single cold runs: confirm with "
                            "repeated interleaved runs)" if result["speedup"] else ""))
        if result["changed"]:
            width = max(len(k) for k in result["changed"])
            for name, (old, new) in result["changed"].items():
                lines.append(f"  {name.ljust(width)}  {old} -> {new}")
        else:
            lines.append("  (the default configuration)")
    else:
        lines.append("best:    none (no trial completed within the constraints)")
    found = result.get("bottlenecks") or {}
    for label in ("default", "best"):
        if label in found:
            said = found[label]
            lines.append(f"{label} {said['line']} ({said['of']} of its {said['trials']} trial(s))")
    if result.get("denoise"):
        lines.append(f"--denoise: values corrected by the trials' machine probe where it was clear; "
                     f"{result.get('unstable', 0)} configuration(s) whose repeats disagreed, never the best")
    if found.get("counts"):
        lines.append("what limited the trials: " + ", ".join(f"{k} {n}" for k, n in found["counts"].items()))
    if result.get("time"):
        lines.append(format_split(result["time"]))
    return "\n".join(lines)


def yaml_fragment(space, config: dict[str, Any], fixed: dict[str, Any], header: str, settings=None) -> str:
    """The tuned knobs that differ from the default as a fragment of the datastore's own configuration (for
    Cassandra a cassandra.yaml fragment, CQL statements and JVM options in comments; for Redis redis.conf
    directives), after a commented header and diff. `settings`: the study's harness (None: Cassandra)."""
    from ..systems import target
    from ..systems.base import TrialSettings
    from .results import changed_knobs

    settings = settings or TrialSettings()
    changed = changed_knobs(space, config)
    overrides = {**fixed, **{k: new for k, (_, new) in changed.items()}}
    lines = [f"# {line}" for line in header.splitlines()]
    lines.append("# diff against the default:" if changed or fixed else "# the default configuration: no changes")
    for name, (old, new) in changed.items():
        lines.append(f"#   {name}: {old} -> {new}")
    for name, value in fixed.items():
        lines.append(f"#   {name}: fixed at {value} (not tuned)")
    lines += target(settings.system).config_fragment(settings, overrides)
    return "\n".join(lines) + "\n"


def stored_subset(space, full_space) -> dict[str, Any] | str:
    """A knob subset as stored with the study: a named set by its name, a user's subset written out (ranges
    and choices), so a resumed study tunes the same space even if the user's file changed."""
    if space.recipe:   # a knob set with changes (e.g. the design searched with it, a scenario's knob held)
        return space.recipe
    if space.label and space.label in full_space.knob_sets:
        return space.label
    knobs = {}
    for knob in space:
        knobs[knob.name] = {"range": list(knob.range)} if knob.range else (
            {"choices": list(knob.choices)} if knob.choices else None)
    return {"knobs": knobs}
