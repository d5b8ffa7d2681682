"""`nosqltune tune` and `nosqltune best`: the tuning loop on real Cassandra trials, and its result."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import NosqltuneError, UsageError

DEFAULT_STUDY_NAME = "tune"
DEFAULT_BUDGET = 40


def parse_duration(text: str | None) -> float | None:
    """'90m', '2h', '45s' or plain seconds -> seconds."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*", str(text).lower())
    if not match:
        raise UsageError(f"--max-time expects a duration like 3600, 90m or 2h, got {text!r}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _subset_mapping(space, full_space) -> dict[str, Any] | str:
    """A knob subset as stored with the study: a named set by its name, a user's subset written out (ranges
    and choices), so a resumed study tunes the same space even if the user's file changed."""
    if space.label and space.label in full_space.knob_sets:
        return space.label
    if space.recipe:   # a knob set with changes (e.g. the design searched with it)
        return space.recipe
    knobs = {}
    for knob in space:
        knobs[knob.name] = {"range": list(knob.range)} if knob.range else (
            {"choices": list(knob.choices)} if knob.choices else None)
    return {"knobs": knobs}


def _store_path(study: str) -> Path:
    return Path(study[len("sqlite:///"):] if study.startswith("sqlite:///") else study)


def _workdir(args, study_name: str, optimizer: str) -> Path:
    path = _store_path(args.study)
    return path.parent / f"{path.stem}.{study_name}.{optimizer}"


def cmd_tune(args: argparse.Namespace) -> int:
    from ..cli import _settings, trial_target
    from ..optimizers.space import TuningSpace
    from ..store import open_store
    from ..trial import TrialSettings, run_trial
    from ..workloads.spec import Workload
    from .loop import TuneSpec, TuningLoop
    from .objective import Objective
    from .progress import TerminalDisplay

    study_name = args.study_name or DEFAULT_STUDY_NAME
    if not args.resume:   # bad input is refused before the store is touched
        settings = _settings(args)
        full_space = trial_target(settings).knob_space(settings)
        fresh = _new_run(args, full_space, settings)
    if args.resume and not args.study.startswith("sqlite:") and not _store_path(args.study).exists():
        raise UsageError(f"nothing to resume: no study store at {args.study}")
    store = open_store(args.study)
    try:
        existing = store.find_study(study_name)
        stored = (existing or {}).get("settings", {}).get("tune")
        if args.resume:
            if not stored:
                raise UsageError(f"nothing to resume: study '{study_name}' in {args.study} has no tuning run "
                                 "(start one without --resume)")
            spec = TuneSpec(**stored["spec"])
            if args.budget is not None:
                spec.budget = args.budget
            if args.max_time is not None:
                spec.max_seconds = parse_duration(args.max_time)
            workloads = [Workload.from_dict(w) for w in stored["workloads"]]
            fixed = stored["fixed"]
            settings = TrialSettings(**stored["harness"])
            full_space = trial_target(settings).knob_space(settings)
            subset = full_space.subset(stored["knobs"])
            system = stored.get("system", "cassandra")
            study_id = existing["id"]
        else:
            if existing and store.trials(existing["id"]):
                raise UsageError(f"study '{study_name}' in {args.study} already has trials: add --resume to "
                                 "continue it, or pick another --study-name")
            spec, workloads, fixed, subset, settings, system = fresh
            study_id = store.study(study_name, system if system.startswith("surrogate:") else settings.system)
        space = TuningSpace(subset, fixed)
        store.update_study_settings(study_id, {"tune": {
            "spec": spec.to_dict(), "workloads": [w.to_dict() for w in workloads], "fixed": fixed,
            "knobs": _subset_mapping(subset, full_space), "knob_label": subset.label if not args.resume else
            (stored or {}).get("knob_label"), "harness": settings.to_dict(), "system": system}})
        by_name = {w.name: w for w in workloads}
        display = TerminalDisplay(json_lines=args.json)
        if system.startswith("surrogate:"):
            target = surrogate_target(system, spec.seed)
            env_id = store.environment(target.fingerprint())
            objective = Objective.from_dict(spec.objective)
            needed = (objective.metric,) + tuple(c.metric for c in objective.constraints)

            def runner(config: dict, workload: str):
                return target.run({**fixed, **config}, by_name[workload], metrics=needed)
        else:
            env_id = store.environment(trial_target(settings).fingerprint(settings))

            def runner(config: dict, workload: str):
                return run_trial(full_space, {**fixed, **config}, by_name[workload], settings,
                                 progress=display.trial_phase)

        loop = TuningLoop(store, study_id, spec, space, runner, workdir=_workdir(args, study_name, spec.optimizer),
                          environment_id=env_id, display=display,
                          workload_info=lambda name: {**by_name[name].to_dict(), "harness": settings.to_dict()})
        try:
            reason = loop.run()
        except RuntimeError as exc:  # irace stopped with an error of its own
            raise NosqltuneError(str(exc)) from None
        result = summarize(store, study_id, spec, space)
    finally:
        store.close()
    result.update({"study": args.study, "study_name": study_name, "stopped": reason,
                   "ask_seconds_mean": (sum(loop.ask_seconds) / len(loop.ask_seconds)) if loop.ask_seconds else None})
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(format_summary(result))
        print(f"study {args.study} (name {study_name}); best configuration as YAML: nosqltune best --study "
              f"{args.study}" + (f" --study-name {study_name}" if study_name != DEFAULT_STUDY_NAME else "")
              + " --format yaml")
    return 0


def design_knobs(args: argparse.Namespace, full_space, subset):
    """The searched knobs with the physical design (issue 8): the --design ranges added as the knobs `nodes`
    and `replication_factor`; with any design flag (--nodes, --rf, --design) the design knobs of a knob set
    (irace23 has replication_factor) are left out of the search, so the design is what the flags say.
    Stored as a recipe (the knob set, the added ranges, what is left out), so a resume rebuilds it."""
    from ..cli import parse_design

    searched = parse_design(getattr(args, "design", None))
    if not searched and args.nodes == 1 and args.rf is None:
        return subset
    leave = [k.name for k in subset if k.applies == "design" and k.name not in searched]
    if not searched and not leave:
        return subset
    added = {name: {"range": list(span)} for name, span in searched.items()}
    base = _subset_mapping(subset, full_space)
    if isinstance(base, str):
        recipe = {"set": base, "knobs": added, "leave_out": leave}
    elif "set" in base:
        recipe = {**base, "knobs": {**base.get("knobs", {}), **added},
                  "leave_out": [*base.get("leave_out", []), *leave]}
    else:
        recipe = {"knobs": {**{k: v for k, v in base["knobs"].items() if k not in leave}, **added}}
    if not recipe.get("leave_out"):
        recipe.pop("leave_out", None)
    try:
        result = full_space.subset(recipe)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    result.recipe = recipe
    result.label = f"{subset.label} + design" if searched else f"{subset.label} (design fixed)"
    return result


def _new_run(args: argparse.Namespace, full_space, settings):
    """The settings of a new tuning run from the flags, all checked."""
    from ..cli import _build_workload, _searched_space, trial_target
    from ..optimizers.space import TuningSpace
    from .loop import TuneSpec
    from .objective import Objective

    if args.repeat != 1:
        raise UsageError("tune runs one cold trial per configuration and workload; use bench (or compare) for "
                         "repeats")
    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    if budget <= 0:
        raise UsageError(f"--budget must be a positive number of trials, got {budget}")
    if args.patience is not None and args.patience <= 0:
        raise UsageError(f"--patience must be a positive number of suggestions, got {args.patience}")
    objective = Objective.parse(args.objective, args.constraints)
    names = [n.strip() for n in (args.workload or "ycsb-a").split(",") if n.strip()]
    if args.read_ratio is not None:
        names = ["custom"]
    workloads = []
    for name in names:
        args_one = argparse.Namespace(**{**vars(args), "workload": None if name == "custom" else name})
        workloads.append(_build_workload(args_one))
    if len({w.name for w in workloads}) != len(workloads):
        raise UsageError("--workload lists the same workload twice")
    system = args.system or "cassandra"
    target = trial_target(settings)
    if args.knobs is None:
        args.knobs = target.default_knobs(settings) or list(full_space.knobs)
    fixed, subset, searched_space = _searched_space(args, full_space, "tuned")
    designed = design_knobs(args, full_space, subset)
    if designed is not subset:
        subset = designed
        clash = sorted(set(fixed) & set(subset.knobs))
        if clash:
            raise UsageError(f"{', '.join(clash)} is searched (--design); it cannot also be fixed with --set/--config")
        searched_space = TuningSpace(subset, fixed)
    if system.startswith("surrogate:"):
        target = surrogate_target(system, args.seed)
        outside = sorted(set(subset.knobs) - set(target.knobs)) + sorted(set(fixed) - set(target.knobs))
        if outside:
            raise UsageError(f"the surrogate dataset has no data for {', '.join(outside)}: tune or fix only its knobs "
                             f"({', '.join(target.knobs)})")
    else:
        for workload in workloads:
            target.preflight(workload, settings)
    searched = len(searched_space.knobs)
    options: dict[str, Any] = {k: v for k, v in (("initial", args.initial),) if v is not None}
    if args.space_adapter == "llamatune":
        from ..optimizers.llamatune import Projection

        try:
            searched = Projection(searched_space, dims=args.llamatune_dims, special_bias=args.special_bias,
                                  max_unique=args.max_unique).dims
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        options.update({"space_adapter": "llamatune", "llamatune_dims": args.llamatune_dims,
                        "special_bias": args.special_bias, "max_unique": args.max_unique})
    if args.optimizer == "irace":
        from ..optimizers.irace import irace_executable, race_settings

        irace_executable()
        try:  # stored with the study, so a resume races with the same settings
            race = race_settings(searched, budget)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if args.optimizer == "irace":
        options.update(race)
    spec = TuneSpec(optimizer=args.optimizer, workloads=[w.name for w in workloads], budget=budget,
                    objective=objective.to_dict(), seed=args.seed, include_default=args.include_default,
                    max_seconds=parse_duration(args.max_time), patience=args.patience, options=options)
    return spec, workloads, fixed, subset, settings, system


def surrogate_target(system: str, seed: int):
    """`surrogate:NAME[:KIND]` -> the target answering trials from the model of a recorded dataset."""
    from ..surrogate.dataset import DEFAULT_KIND, SurrogateTarget
    from ..surrogate.models import KINDS

    _, _, rest = system.partition(":")
    name, _, kind = rest.partition(":")
    kind = kind or DEFAULT_KIND
    if kind not in KINDS:
        raise UsageError(f"unknown surrogate model {kind!r} in --system {system}: use one of {', '.join(KINDS)}")
    return SurrogateTarget(name, kind=kind, seed=seed)


def summarize(store, study_id: int, spec, space) -> dict[str, Any]:
    from .objective import Objective
    from .results import best_configuration, changed_knobs, configurations, default_entry, speedup

    objective = Objective.from_dict(spec.objective)
    rows = [r for r in store.trials(study_id) if r["tag"] == "tune"]
    best = best_configuration(rows, objective, spec.workloads, space)
    default = default_entry(rows, objective, spec.workloads, space)
    entries = configurations(rows, objective, spec.workloads, space)
    return {
        "optimizer": spec.optimizer, "workloads": spec.workloads, "objective": objective.describe(),
        "metric": objective.metric, "unit": objective.unit,
        "trials": len([r for r in rows if r["failure_kind"] != "interrupted"]),
        "failed_trials": len([r for r in rows if r["state"] == "FAIL" and r["failure_kind"] != "interrupted"]),
        "configurations": len(entries), "best": best, "default": default,
        "speedup": speedup(objective, best["value"] if best else None, default["value"] if default else None),
        "changed": {k: list(v) for k, v in changed_knobs(space, best["config"]).items()} if best else {},
    }


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
        lines.append(f"best:    {value(best['value'])} ({best['trials']} trials)"
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
    return "\n".join(lines)


def yaml_fragment(space, config: dict[str, Any], fixed: dict[str, Any], header: str, settings=None) -> str:
    """The tuned knobs that differ from the default as a fragment of the datastore's own configuration (for
    Cassandra a cassandra.yaml fragment, CQL statements and JVM options in comments; for Redis redis.conf
    directives), after a commented header and diff. `settings`: the study's harness (None: Cassandra)."""
    from ..systems import target
    from ..trial import TrialSettings
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


def cmd_best(args: argparse.Namespace) -> int:
    from ..cli import trial_target
    from ..optimizers.space import TuningSpace
    from ..trial import TrialSettings
    from ..store import open_store
    from .loop import TuneSpec

    if not args.study.startswith("sqlite:") and not _store_path(args.study).exists():
        raise UsageError(f"no study store at {args.study}")
    study_name = args.study_name or DEFAULT_STUDY_NAME
    store = open_store(args.study)
    try:
        study = store.find_study(study_name)
        tune = (study or {}).get("settings", {}).get("tune")
        if not tune:
            names = [s["name"] for s in store.studies() if s["settings"].get("tune")]
            raise NosqltuneError(f"no tuning study '{study_name}' in {args.study}"
                                 + (f"; tuning studies there: {', '.join(names)}" if names else ""))
        spec = TuneSpec(**tune["spec"])
        settings = TrialSettings(**tune["harness"])
        space = TuningSpace(trial_target(settings).knob_space(settings).subset(tune["knobs"]), tune["fixed"])
        result = summarize(store, study["id"], spec, space)
    finally:
        store.close()
    if result["best"] is None:
        raise NosqltuneError(f"study '{study_name}' has no completed trial within its constraints yet")
    if args.format == "json":
        print(json.dumps({**result, "fixed": tune["fixed"]}, default=str))
    elif args.format == "yaml":
        header = (f"nosqltune best: study {study_name} in {args.study}; {result['optimizer']} on "
                  f"{', '.join(result['workloads'])}; {result['objective']}\n"
                  f"best {result['best']['value']:.6g} {result['unit']} over {result['best']['trials']} trial(s)"
                  + (f"; default {result['default']['value']:.6g}" if result["default"] and result["default"]["value"]
                     else "")
                  + (f"; {(result['speedup'] - 1) * 100:+.1f}% (single cold runs)" if result["speedup"] else ""))
        sys.stdout.write(yaml_fragment(space, result["best"]["config"], tune["fixed"], header, settings))
    else:
        print(format_summary(result))
    return 0
