"""`nosqltune tune` and `nosqltune best`: the tuning loop from the flags, and its result."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import NosqltuneError, UsageError
from ..tuning.loop import DEFAULT_BUDGET, DEFAULT_STUDY_NAME
from ..tuning.results import UNCONFIRMED, confirmation_status, format_summary, stored_subset, summarize, yaml_fragment
from ..evaluation.confirmation import (CONFIRM_ROUNDS, CONFIRM_TOP, ConfirmSettings, apply_confirmation,
                                      asked_confirmation, confirm_best, confirm_plan)
from .compare import format_confirmation
from ..store import store_exists
from .knobs import knob_sets_help
from .options import DEFAULT_STUDY, _common, _progress, study_path


def parse_duration(text: str | None) -> float | None:
    """'90m', '2h', '45s' or plain seconds -> seconds."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhd]?)\s*", str(text).lower())
    if not match:
        raise UsageError(f"--max-time expects a duration like 3600, 90m or 2h, got {text!r}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _workdir(args, study_name: str, optimizer: str) -> Path:
    path = study_path(args.study)
    return path.parent / f"{path.stem}.{study_name}.{optimizer}"


def cmd_tune(args: argparse.Namespace) -> int:
    from .options import _progress, _scenario, trial_target
    from .harness import trial_settings
    from ..tuning.workers import search_space
    from ..knobs.space import TuningSpace
    from ..store import open_store
    from ..systems import TrialSettings
    from ..workloads.spec import Workload
    from ..tuning.loop import TuneSpec, TuningLoop
    from ..objective import Objective
    from ..tuning.progress import TerminalDisplay

    study_name = args.study_name or DEFAULT_STUDY_NAME
    if (args.confirm_top is not None and args.confirm_top < 0) or (args.confirm_rounds is not None
                                                                   and args.confirm_rounds < 2):
        raise UsageError("--confirm-top must be at least 0 and --confirm-rounds at least 2")
    _check_parallel(args)
    rig = _node_shape(args) if not args.resume else None
    if not args.resume:   # bad input is refused before the store is touched
        settings = trial_settings(args, surrogate=True)
        _check_parallel_fits(args, settings)
        full_space = search_space(settings, args.system)
        fresh = _new_run(args, full_space, settings, rig)
        say = _progress(args)
        for line in rig.lines() if rig else ():   # the derived rig, once every check of it has passed
            say(line)
    if args.resume and not store_exists(args.study):
        raise UsageError(f"nothing to resume: no study store at {args.study} (give the --study of the run, or start "
                         "one without --resume)")
    store = open_store(args.study)
    leases = contextlib.ExitStack()   # one process at a time runs trials in a study
    try:
        existing = store.find_study(study_name)
        if existing:
            leases.enter_context(store.acquire_lease(existing["id"]))
            existing = store.find_study(study_name)   # as the previous holder left it
        stored = (existing or {}).get("settings", {}).get("tune")
        if args.resume:
            if not stored:
                raise UsageError(f"nothing to resume: study '{study_name}' in {args.study} has no tuning run "
                                 "(start one without --resume)")
            spec = TuneSpec.from_stored(stored["spec"])
            if args.budget is not None:
                spec.budget = args.budget
            if args.max_time is not None:
                spec.max_seconds = parse_duration(args.max_time)
            workloads = [Workload.from_dict(w) for w in stored["workloads"]]
            fixed = stored["fixed"]
            settings = TrialSettings.from_dict(stored["harness"])
            system = stored.get("system", "cassandra")
            full_space = search_space(settings, system, workloads)
            subset = full_space.subset(stored["knobs"])
            study_id = existing["id"]
        else:
            if existing and store.trials(existing["id"]):
                raise UsageError(f"study '{study_name}' in {args.study} already has trials: add --resume to "
                                 "continue it, or pick another --study-name")
            spec, workloads, fixed, subset, settings, system, full_space = fresh
            study_id = store.study(study_name, system)
            if not existing:
                leases.enter_context(store.acquire_lease(study_id))
                if store.trials(study_id):   # another process started the same new study a moment before us
                    raise UsageError(f"study '{study_name}' in {args.study} already has trials: add --resume to "
                                     "continue it, or pick another --study-name")
        space = TuningSpace(subset, fixed)
        asked = asked_confirmation(stored if args.resume else None, args.confirm_top, args.confirm_rounds)
        plan = confirm_plan(spec.budget, len(workloads), asked["top"], asked["rounds"])
        store.update_study_settings(study_id, {"tune": {
            "spec": spec.to_dict(), "workloads": [w.to_dict() for w in workloads], "fixed": fixed,
            "knobs": stored_subset(subset, full_space), "knob_label": subset.label if not args.resume else
            (stored or {}).get("knob_label"), "harness": settings.to_dict(), "system": system, "confirm": asked,
            **({"node_shape": rig.to_dict()} if rig else {"node_shape": (stored or {}).get("node_shape")}
               if (stored or {}).get("node_shape") else {})}})
        by_name = {w.name: w for w in workloads}
        display = TerminalDisplay(json_lines=args.json)
        # what this scenario's default is limited by, and what moves it (a node shape's rig is not the scenario's)
        if not args.resume and system == "cassandra" and rig is None:
            say = _progress(args)
            for line in _scenario(args).outlook(set(subset.knobs), subset.label):
                say(line)
        objective = Objective.from_dict(spec.objective)
        if not args.resume and objective.combine == "worst-gain":   # --data-sizes: what the sizes cost
            sizes = ", ".join(f"{w.name} ({w.records:,} records)" for w in workloads)
            _progress(args)(f"data sizes {sizes}: every configuration runs at each size, so the search's "
                            f"{plan['search_budget']} trials are {plan['search_budget'] // len(workloads)} "
                            "configurations, ranked by their worst gain over the default; each data layout is built "
                            "once per size")
        target = trial_target(settings, system, seed=spec.seed,
                              metrics=(objective.metric,) + tuple(c.metric for c in objective.constraints))
        env_id = store.environment(target.fingerprint(settings))

        def runner(config: dict, workload: str):
            # the loop shows each phase and stores it on the running trial's row (`loop` is made below)
            return target.run_trial(full_space, {**fixed, **config}, by_name[workload], settings,
                                    progress=loop.trial_phase)

        # the search gets the budget less the confirmation's trials (confirm_plan)
        loop_args = (store, study_id, dataclasses.replace(spec, budget=plan["search_budget"]), space, runner)
        loop_kwargs = dict(workdir=_workdir(args, study_name, spec.optimizer), environment_id=env_id,
                           display=display,
                           workload_info=lambda name: {**by_name[name].to_dict(), "harness": settings.to_dict()})
        executor = _executor(args, spec, study_name)
        try:
            if executor is None:
                loop = TuningLoop(*loop_args, **loop_kwargs)
            else:
                from ..tuning.parallel import ParallelLoop

                loop = ParallelLoop(*loop_args, **loop_kwargs, executor=executor,
                                    window=spec.options.get("parallel", 1), ttl_s=_stale_after(args))
            reason = loop.run()
        except RuntimeError as exc:  # irace stopped with an error of its own
            raise NosqltuneError(str(exc)) from None
        finally:
            if executor is not None:
                executor.close()
        confirmation = None
        if plan["top"] and reason != "time":   # the top configurations re-measured beside the default
            from ..evaluation.confirmation import production_jit
            from ..evaluation.study import study_of

            finished = study_of(store, store.find_study(study_name))
            confirmation = confirm_best(finished, ConfirmSettings(top=plan["top"], rounds=plan["rounds"],
                                                                  jit=production_jit(finished)),
                                        say=_progress(args))
        result = summarize(store, study_id, spec, space, settings.to_dict())
        apply_confirmation(result, confirmation, space, spec)
        result["confirm_plan"] = plan
    finally:
        leases.close()
        store.close()
    result.update({"study": args.study, "study_name": study_name, "stopped": reason,
                   "ask_seconds_mean": (sum(loop.ask_seconds) / len(loop.ask_seconds)) if loop.ask_seconds else None})
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(format_summary(result))
        if confirmation:
            print(format_confirmation(confirmation))
        elif plan["skipped"]:
            print(f"not confirmed: {plan['skipped']} (`nosqltune best --confirm` re-measures the top configurations)")
        print(f"study {args.study} (name {study_name}); best configuration as YAML: nosqltune best --study "
              f"{args.study}" + (f" --study-name {study_name}" if study_name != DEFAULT_STUDY_NAME else "")
              + " --format yaml")
    return 0


def _check_parallel(args: argparse.Namespace) -> None:
    """Bad --parallel / --executor input, refused before the store is touched."""
    from ..store import store_path, is_server_url

    if args.parallel is not None and args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1, got {args.parallel}")
    if args.stale_after is not None and args.stale_after <= 0:
        raise UsageError(f"--stale-after must be a positive number of seconds, got {args.stale_after}")
    if args.address and args.executor != "ray" and not args.resume:
        raise UsageError("--address names a Ray cluster: add --executor ray")
    if (args.executor == "ray" or (args.parallel or 1) > 1) and not is_server_url(args.study) \
            and store_path(args.study) is None:
        raise UsageError("several trials at once need a store the workers can open: a SQLite file or a "
                         "postgresql:// URL, not :memory:")


def _check_parallel_fits(args: argparse.Namespace, settings) -> None:
    """--parallel N local Cassandra trials must fit in this machine's memory together (a Ray cluster's machines
    decide for themselves; a recorded surrogate or an external target starts no node here)."""
    if (args.parallel or 1) > 1 and args.executor != "ray" and settings.system == "cassandra":
        from ..systems.cassandra.cluster import check_trials_fit

        check_trials_fit(args.parallel, settings.cassandra.nodes, settings.cassandra.heap_mb)


def _stale_after(args: argparse.Namespace) -> float:
    from ..store import LEASE_TTL_S

    return args.stale_after or LEASE_TTL_S


def _executor(args: argparse.Namespace, spec, study_name: str):
    """The executor of a parallel study (None: the serial loop, trials run in this process one at a time). A
    resumed study keeps its executor unless --executor says otherwise."""
    from ..store import store_path

    window = spec.options.get("parallel", 1)
    slots = args.parallel or window
    kind = args.executor or spec.options.get("executor", "local")
    if kind == "local" and "executor" not in spec.options and window == 1 and slots == 1:
        return None
    path = store_path(args.study)   # workers may run in another folder: a SQLite store by its absolute path
    url = str(path.resolve()) if path is not None else args.study
    ttl = _stale_after(args)
    if kind == "ray":
        from ..tuning.executors import RayExecutor

        return RayExecutor(url, study_name, slots, args.address, ttl)
    from ..tuning.executors import LocalExecutor
    from ..tuning.workers import run_one

    return LocalExecutor(lambda: run_one(url, study_name, ttl_s=ttl), slots)


def design_knobs(args: argparse.Namespace, full_space, subset):
    """The searched knobs with the physical design: the --design ranges added as the knobs `nodes`
    and `replication_factor`; with any design flag (--nodes, --rf, --design) the design knobs of a knob set
    (irace23 has replication_factor) are left out of the search, so the design is what the flags say.
    Stored as a recipe (the knob set, the added ranges, what is left out), so a resume rebuilds it."""
    from .options import leave_out
    from .harness import parse_design

    searched = parse_design(getattr(args, "design", None))
    if not searched and args.nodes == 1 and args.rf is None:
        return subset
    leave = [k.name for k in subset if k.applies == "design" and k.name not in searched]
    if not searched and not leave:
        return subset
    result = leave_out(subset, full_space, leave, {name: {"range": list(span)} for name, span in searched.items()})
    result.label = f"{subset.label} + design" if searched else f"{subset.label} (design fixed)"
    return result


def _shape_names() -> list[str]:
    from ..shapes import presets

    return presets()


def _node_shape(args: argparse.Namespace):
    """--node-shape: the rig derived from the shape (printed once the run's checks pass), its values made the flags'
    defaults (flags given win, and the rig printed and stored is the one they make, its ratios kept or lost by
    them); None without it."""
    if not args.node_shape:
        return None
    from ..shapes import derive, load_shape

    from .harness import _size_mb, heap_mb, parse_design

    searched = parse_design(getattr(args, "design", None)).get("nodes", (1, 1))[1]
    if (args.system or "cassandra") != "cassandra" or (args.nodes or 1) > 1 or searched > 1:
        raise UsageError("--node-shape derives a single Cassandra node's rig: leave out --system, --nodes and a "
                         "--design of several nodes")
    given = {"heap_mb": heap_mb(args.heap) if args.heap else None,
             "page_cache_mb": _size_mb(args.page_cache, "--page-cache") if args.page_cache else None,
             "records": args.records, "iops": args.disk_iops, "mbps": args.disk_mbps,
             "latency_ms": args.disk_latency_ms}
    from ..runtime.environment import read_ahead_kb
    from ..runtime.paths import nearest_existing, work_dir

    rig = derive(load_shape(args.node_shape), given=given,
                 disk_read_ahead_kb=read_ahead_kb(nearest_existing(work_dir())[0]))
    defaults = {"heap": f"{rig.heap_mb}M", "page_cache": f"{rig.page_cache_mb}M", "records": rig.records,
                "server_cpus": rig.server_cpus(), "target": rig.target}
    if rig.volume:
        defaults.update({"disk_iops": rig.volume["iops"], "disk_mbps": rig.volume["mbps"],
                         "disk_latency_ms": rig.volume["latency_ms"] or None})
    for key, value in defaults.items():
        if getattr(args, key, None) is None and value is not None:
            setattr(args, key, value)
    return rig


def _shape_knobs(args: argparse.Namespace, rig) -> str | None:
    """The knob set of a node shape's search when no --scenario names one: cloud where the shape's volume has caps
    (the settings that trade memory against I/Os), else None (the scenario's)."""
    if rig is None or args.scenario is not None or not rig.volume:
        return None
    return "cloud" if rig.volume.get("iops") or rig.volume.get("mbps") else None


def _new_run(args: argparse.Namespace, full_space, settings, rig=None):
    """The settings of a new tuning run from the flags, all checked."""
    from .options import (_build_workload, _scenario, _searched_space, multiples, scenario_rate, trial_target,
                          workload_names)
    from ..knobs.space import TuningSpace
    from ..tuning.loop import TuneSpec
    from ..objective import STATS, Objective

    if args.repeat != 1:
        raise UsageError("tune runs one cold trial per configuration and workload; use bench (or compare) for "
                         "repeats")
    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    if budget <= 0:
        raise UsageError(f"--budget must be a positive number of trials, got {budget}")
    if args.patience is not None and args.patience <= 0:
        raise UsageError(f"--patience must be a positive number of suggestions, got {args.patience}")
    Objective.parse(args.objective or "throughput", args.constraints)    # bad input: refused before any trial
    if args.workload is None and args.read_ratio is None:
        workloads = [_build_workload(args)]        # the scenario's (ycsb-a in-memory)
    else:
        names = ["custom"] if args.read_ratio is not None else workload_names(args.workload)
        workloads = [_build_workload(args, name=None if name == "custom" else name) for name in names]
    if len({w.name for w in workloads}) != len(workloads):
        raise UsageError("--workload lists the same workload twice")
    constraints = list(args.constraints)
    rated = [scenario_rate(args, settings, w) for w in workloads]   # latency-slo: each workload's fixed rate
    workloads = [w for w, _ in rated]
    constraints += [c for _, c in rated if c and len(rated) == 1]     # several rates: no single throughput floor
    combine = "geometric-mean"
    if args.data_sizes is not None:   # a best without a cliff: ranked by its worst gain over the sizes
        from ..workloads.spec import at_data_sizes

        if args.optimizer == "irace":
            raise UsageError("--data-sizes ranks each configuration by its worst size, so every size runs for it; "
                             "irace races its instances one at a time: pick another --optimizer")
        if not args.include_default:
            raise UsageError("--data-sizes ranks configurations by their gain over the default at each size: it "
                             "needs the default (leave out --no-default)")
        if args.denoise:
            raise UsageError("--denoise corrects each workload's runs apart; with --data-sizes the value is a gain "
                             "over the default: give one of them")
        workloads = at_data_sizes(workloads, multiples(args.data_sizes, "--data-sizes"))
        combine = "worst-gain"
    objective = Objective.parse(args.objective or _scenario(args).objective, constraints, combine)
    for metric in [objective.metric, *(c.metric for c in objective.constraints)]:
        stat, _, op = metric.partition("-")
        profiled = next((w for w in workloads if w.profile or w.replay), None)
        if profiled and stat in STATS and op != "all":   # a profile's operations are insert and its queries
            kinds = ", ".join(k["name"] for k in profiled.replay["kinds"]) if profiled.replay else \
                ", ".join(profiled.profile["ops"])
            raise UsageError(f"{metric} names YCSB's {op}; {profiled.name} runs {kinds}: use throughput, "
                             f"{metric.partition('-')[0]}-all (its slowest operation kind) or the node's cost per "
                             "operation (--objective)")
    for replayed in (w for w in workloads if w.replay):   # which statements of the capture each trial replays
        from ..workloads.replay import replay_lines

        print("\n".join(replay_lines(replayed)), file=sys.stderr)
    system = args.system or "cassandra"
    target = trial_target(settings, system, seed=args.seed)
    for workload in workloads:   # the data the disk can hold, the datastore's own checks: before any note
        target.preflight(workload, settings)
    profiled = any(w.profile for w in workloads)
    if profiled or any(w.snapshot for w in workloads):   # the table's own options are its table knobs' defaults
        from ..tuning.workers import search_space

        full_space = search_space(settings, args.system, workloads)
    knobs = args.knobs if args.knobs is not None else ("profile" if profiled and system == "cassandra" else
                                                       _shape_knobs(args, rig) or target.default_knobs(settings)
                                                       or list(full_space.knobs))
    fixed, subset, searched_space = _searched_space(args, full_space, "tuned", knobs, settings)
    if rig is not None and isinstance(knobs, str) and knobs in full_space.knob_sets:   # ranges at the shape's scale
        scaled = {k: {"range": r} for k, r in rig.ranges.items() if k in subset.knobs}
        subset = full_space.subset({"set": knobs, "knobs": scaled, "description": f"{knobs} at node shape "
                                    f"{rig.shape.name}"})
        subset.label = knobs
        searched_space = TuningSpace(subset, fixed)
    designed = design_knobs(args, full_space, subset)
    if designed is not subset:
        subset = designed
        clash = sorted(set(fixed) & set(subset.knobs))
        if clash:
            raise UsageError(f"{', '.join(clash)} is searched (--design); it cannot also be fixed with --set/--config")
        searched_space = TuningSpace(subset, fixed)
    if hasattr(target, "check_searched"):   # a recorded dataset answers for its own knobs, as it measured them
        target.check_searched(subset, fixed)
    searched = len(searched_space.knobs)
    options: dict[str, Any] = {k: v for k, v in (("initial", args.initial),) if v is not None}
    if (args.parallel or 1) > 1 or args.executor:
        # a parallel study keeps its window and its executor on resume (the serial loop cannot resume it)
        options.update({"parallel": args.parallel or 1, "executor": args.executor or "local"})
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
        asked = asked_confirmation(None, args.confirm_top, args.confirm_rounds)
        plan = confirm_plan(budget, len(workloads), asked["top"], asked["rounds"])
        try:  # stored with the study, so a resume races with the same settings; sized for the search's share
            options.update(race_settings(searched, plan["search_budget"]))
        except ValueError as exc:
            raise UsageError(str(exc) + (f": the search's share of --budget {budget} after the confirmation's "
                                         f"{plan['trials']} trials" if plan["trials"] else "")) from None
    if args.cost_aware:
        if args.optimizer != "gp" or args.space_adapter == "llamatune":
            raise UsageError("--cost-aware is gp's (expected improvement per second of machine time), on the "
                             f"knobs themselves: not {args.optimizer}"
                             + (" with --space-adapter llamatune" if args.space_adapter == "llamatune" else ""))
        options["cost_aware"] = True
    if args.build_share is not None and (not 0 < args.build_share < 1 or "parallel" in options):
        raise UsageError(f"--build-share is a share of the machine time between 0 and 1, got {args.build_share}, "
                         "for a study that runs one trial at a time (its pacing follows the trials in order)")
    if args.denoise and "parallel" in options:
        raise UsageError("--denoise re-measures each new incumbent before the optimizer hears of it: a study that "
                         "runs one trial at a time (no --parallel)")
    spec = TuneSpec(optimizer=args.optimizer, workloads=[w.name for w in workloads], budget=budget,
                    objective=objective.to_dict(), seed=args.seed, include_default=args.include_default,
                    max_seconds=parse_duration(args.max_time), patience=args.patience, options=options,
                    build_share=args.build_share, denoise=args.denoise)
    return spec, workloads, fixed, subset, settings, system, full_space


def cmd_best(args: argparse.Namespace) -> int:
    from ..evaluation.study import open_study
    from ..store import open_for_reading, open_store

    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json prints the best as JSON on stdout: give --json or --format {args.format}, not both")
    args.format = "json" if args.json else (args.format or "table")
    if not store_exists(args.study):
        raise UsageError(f"no study store at {args.study}: give the --study of a tuning run")
    if (args.jit or args.warmup_seconds) and not args.confirm:
        raise UsageError("--jit and --warmup-seconds set --confirm's rounds: give --confirm too")
    # only reading (no rounds to run): a store committed to git stays as it was
    store = open_store(args.study) if args.confirm or args.ablation else open_for_reading(args.study)
    try:
        study = open_study(store, args.study, args.study_name, "best")
        from ..evaluation.confirmation import production_jit

        confirm = (ConfirmSettings(top=args.top, rounds=args.rounds, jit=args.jit or production_jit(study),
                                   warmup_seconds=args.warmup_seconds) if args.confirm else None)
        study_name, tune, space, spec, settings = study.name, study.tune, study.space, study.spec, study.settings
        result = summarize(store, study.id, spec, space, tune["harness"])
        if result["best"] is None:
            raise NosqltuneError(f"study '{study_name}' has no completed trial within its constraints yet")
        confirmation = study.record["settings"].get("confirm")
        if confirm is not None:
            lease = store.acquire_lease(study.id)   # trials in the study: not beside a running tune
            try:
                confirmation = confirm_best(study, confirm, say=_progress(args))
            finally:
                lease.release()
            result = summarize(store, study.id, spec, space, tune["harness"])   # its rounds took machine time too
        ablation = study.record["settings"].get("ablation")
        if args.ablation:   # each changed setting of the (confirmed) best reverted, one at a time
            from ..evaluation.ablation import AblationSettings, ablate

            ablation = ablate(study.reread(), AblationSettings(rounds=args.ablation_rounds), say=_progress(args))
    finally:
        store.close()
    apply_confirmation(result, confirmation, space, spec)   # the best is the confirmed one, if confirmed
    result["ablation"] = ablation
    from ..evaluation.compare import growth_table

    result["growth"] = growth = growth_table(study.record["settings"].get("compare") or {})
    status = confirmation_status(result["best"])
    if args.format == "json":
        print(json.dumps({**result, "best_status": status, "fixed": tune["fixed"],
                          **({"node_shape": tune["node_shape"]} if tune.get("node_shape") else {})}, default=str))
    elif args.format == "yaml":
        best, default, confirmed = result["best"], result["default"], result["best"].get("confirmed")
        measured = ("the mean of its confirmation's interleaved cold rounds" if confirmed
                    else f"over {best['trials']} trial(s)")
        basis = "against the default's mean in the same rounds" if confirmed else "single cold runs"
        header = (f"nosqltune best: study {study_name} in {args.study}; {result['optimizer']} on "
                  f"{', '.join(result['workloads'])}; {result['objective']}\n"
                  f"best {best['value']:.6g} {result['unit']}{', ' if confirmed else ' '}{measured}"
                  + (f"; default {default['value']:.6g}{' (its runs in the study)' if confirmed else ''}"
                     if default and default["value"] else "")
                  + (f"; {(result['speedup'] - 1) * 100:+.1f}% ({basis})" if result["speedup"] else "")
                  + ("" if confirmed else f"\n{UNCONFIRMED}")
                  + (f"\ntuned for node shape {tune['node_shape']['shape']['name']} on a smaller rig: size-like "
                     "values are the rig's (best's table carries them to the shape, with their rules)"
                     if tune.get("node_shape") else ""))
        sys.stdout.write(yaml_fragment(space, result["best"]["config"], tune["fixed"], header, settings))
    else:
        print(format_summary(result))
        if confirmation:
            print(format_confirmation(confirmation))
            stale = result["trials"] - confirmation["after_tune_trials"]
            if stale > 0:
                print(f"  (confirmed before the study's last {stale} trial(s): `best --confirm` again to include them)")
        else:
            print(UNCONFIRMED)
        if ablation:
            from ..evaluation.ablation import format_ablation

            print(format_ablation(ablation))
        if growth:
            from .compare import format_growth

            print(format_growth(growth))
        if tune.get("node_shape"):
            print(format_shape(tune["node_shape"], result["best"]["config"]))
    return 0


def format_shape(rig: dict, config: dict) -> str:
    """The shape a study was tuned for, and its best's size-like values carried to it, each with its rule."""
    from ..shapes import scale_back

    shape = rig["shape"]
    lines = [f"tuned for node shape {shape['name']} ({shape['cores']} cores, {shape['memory_gib']:g} GiB, "
             f"{shape['data_gib']:g} GiB of data) on a rig of {rig['node_cores']} core(s), {rig['memory_mb']} MiB and "
             f"{rig['records']:,} records; the ratios it could not keep: "
             + (", ".join(r["name"] for r in rig["ratios"] if not r["kept"]) or "none")]
    scaled = [(k, v, scale_back(k, v, rig)) for k, v in sorted(config.items()) if isinstance(v, (int, float))
              and not isinstance(v, bool)]
    scaled = [(k, v, s) for k, v, s in scaled if s]
    if scaled:
        lines.append("  size-like values carried to the shape (an assumption, not measured there):")
        lines += [f"    {k}: {v:g} on the rig -> about {s[0]:g} on the shape ({s[1]})" for k, v, s in scaled]
    return "\n".join(lines)


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "tune", help="search for a faster configuration: random, irace, gp, smac, rafiki or surrogate-sa",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run cold trials of the configurations an optimizer suggests, store every trial, and report "
                    "the best configuration found.\n\nExamples:\n"
                    "  nosqltune tune --workload ycsb-a --knobs irace23 --optimizer irace --budget 200 --study runs/a.db\n"
                    "  nosqltune tune --workload read95 --knobs vorstella5 --optimizer gp --objective p99-read --budget 25\n"
                    "  nosqltune tune --workload ycsb-a,ycsb-b --optimizer smac --constraint 'p99-read<=5'\n"
                    "  nosqltune tune --objective cpu-per-op --target 4000 --budget 30\n"
                    "  nosqltune tune --nodes 3 --rf 3 --knobs eppinger   # knobs for a fixed design (a local cluster)\n"
                    "  nosqltune tune --design nodes=2..4,rf=1..3 --knobs eppinger   # the design searched too\n"
                    "  nosqltune tune --study runs/a.db --resume        # continue after Ctrl-C or a crash\n\n"
                    "--workload takes a comma-separated list: the objective is then the geometric mean over the "
                    "workloads (irace races them as instances).")
    _common(p, surrogate=True)
    t = p.add_argument_group("tuning")
    t.add_argument("--optimizer", default="smac", choices=["random", "irace", "gp", "smac", "rafiki", "surrogate-sa"],
                   help="random: uniform sampling; irace: iterated racing (R package); gp: Gaussian-process "
                        "Bayesian optimization; smac: SMAC3; rafiki: neural-net ensemble + genetic algorithm; "
                        "surrogate-sa: random forest + simulated annealing (default smac)")
    t.add_argument("--knobs", default=None, metavar="SET|FILE",
                   help="knob set of the datastore's knob space, or a YAML file of knob names with ranges narrowed "
                        "or widened within each knob's bounds (default: for Cassandra the 5.0 set of the scenario, "
                        "v5 or cloud where a volume's cap binds (`nosqltune scenarios` names it), profile on a "
                        "cassandra-stress profile; mlos6 for Redis; every knob of an external target). "
                        + knob_sets_help())
    t.add_argument("--budget", type=int, default=None, metavar="N",
                   help="cold trials at most, the default included (default 40)")
    t.add_argument("--max-time", metavar="DURATION", help="stop after this much trial time, e.g. 90m or 2h")
    t.add_argument("--objective", default=None, metavar="METRIC",
                   help="throughput (maximized), or minimized: <avg|p95|p99>-<read|update|insert|scan|all> in ms, "
                        "e.g. p99-read, or the node's own cost per operation in microseconds: cpu-per-op (its CPU "
                        "time, user + system, summed over a cluster's nodes) or gc-per-op (its GC pauses), or its "
                        "disk per operation: io-per-op (I/Os its volume served; needs --volume) or bytes-per-op "
                        "(default: the scenario's, throughput; latency-slo and cloud-slo: p99-read)")
    t.add_argument("--node-shape", default=None, metavar="NAME|FILE",
                   help="the production node to tune for: a preset (" + ", ".join(_shape_names()) + ") or a YAML "
                        "file of cores, memory_gib, volume, data_gib and optionally rate. The rig is derived and "
                        "printed (records so that the data keeps the shape's ratio to the page cache, the volume's "
                        "caps per core, the node's cores, knob ranges at the shape's scale) with the ratios it "
                        "cannot keep; flags given win over it (a smaller --page-cache: fewer records at the same ratio), the ratios "
                        "printed being the rig's that runs; the study stores it and best shows it")
    t.add_argument("--data-sizes", default=None, metavar="LIST",
                   help="multiples of the records, e.g. 1,2: every configuration runs at each size (the operations "
                        "held) and is ranked by its worst gain over the default at the same size, so that the best "
                        "does not live on a cliff where the data just fits in memory. Costs: one trial per size and "
                        "configuration (a budget of 60 is 30 configurations at two sizes), and each data layout is "
                        "built once per size")
    t.add_argument("--constraint", action="append", default=[], dest="constraints", metavar="METRIC<=X",
                   help="keep only configurations with METRIC<=X or METRIC>=X, e.g. p99-read<=5 or "
                        "throughput>=5000 (repeatable)")
    d = t.add_mutually_exclusive_group()
    d.add_argument("--include-default", dest="include_default", action="store_true", default=True,
                   help="measure the default configuration first, so gains are against a default of the same "
                        "study (default; for irace it is its initial configuration)")
    d.add_argument("--no-default", dest="include_default", action="store_false",
                   help="do not measure the default")
    t.add_argument("--design", metavar="nodes=LO..HI,rf=LO..HI",
                   help="Cassandra: search the physical design with the knobs (as the RF/GBDT tuning paper did): the number of nodes of the "
                        "local cluster and/or the replication factor, e.g. nodes=2..4,rf=1..3; the default "
                        "configuration runs on the smallest design (instead of --nodes/--rf for what is searched)")
    t.add_argument("--seed", type=int, default=1, help="seed of the optimizer (default 1)")
    t.add_argument("--patience", type=int, metavar="N",
                   help="stop early when the best configuration has not changed for N suggestions")
    t.add_argument("--initial", type=int, metavar="N",
                   help="gp/smac/rafiki/surrogate-sa: random (gp), Sobol (smac) or extremes-covering (rafiki, "
                        "surrogate-sa) configurations before the model is used")
    t.add_argument("--cost-aware", action="store_true",
                   help="gp: weigh expected improvement by the machine time a suggestion is expected to take (a "
                        "trial, plus a dataset build when its dataset-shaping knobs ask for data the study has not "
                        "built; Snoek et al. 2012's EI per second): fewer builds for small expected gains")
    t.add_argument("--build-share", type=float, metavar="S",
                   help="keep dataset builds to this share of the study's machine time (e.g. 0.2): past it, a "
                        "suggestion that asks for data not built yet runs on the nearest dataset built (fewest "
                        "dataset-shaping knobs changed), and the next build waits until enough trials earned it")
    t.add_argument("--denoise", action="store_true",
                   help="correct each trial's value by the machine's speed timed in the same trial (its CPU probe "
                        "for throughput, its disk probe for latencies), with the elasticity fitted on the study's "
                        "own repeats and used only where it is clear; re-measure once each configuration that one "
                        "run would make the best; a configuration whose repeats disagree beyond the noise is "
                        "flagged unstable and never the best (docs/trials.md)")
    t.add_argument("--space-adapter", choices=["none", "llamatune"], default="none",
                   help="llamatune: the optimizer searches a small synthetic space (random projection, special-value "
                        "biasing, bucketization) mapped onto all the knobs (default none)")
    t.add_argument("--llamatune-dims", type=int, default=16, metavar="D",
                   help="llamatune: synthetic dimensions (default 16, at most the number of knobs)")
    t.add_argument("--special-bias", type=float, default=0.2, metavar="P",
                   help="llamatune: probability of a knob's special value (0 = disabled, ...) (default 0.2)")
    t.add_argument("--max-unique", type=int, default=10000, metavar="K",
                   help="llamatune: distinct values a numeric knob may take (default 10000)")
    t.add_argument("--confirm-top", type=int, default=None, metavar="K",
                   help=f"at the end, re-measure the K best configurations by single runs beside the default in "
                        f"--confirm-rounds interleaved cold rounds and report the best mean (default {CONFIRM_TOP}; "
                        "0: no confirmation). Its (K + 1) x R trials per workload come out of --budget, and it "
                        "runs only when the budget is at least twice that")
    t.add_argument("--confirm-rounds", type=int, default=None, metavar="R",
                   help=f"rounds of the confirmation (default {CONFIRM_ROUNDS})")
    t.add_argument("--resume", action="store_true",
                   help="continue the study (--study, --study-name) with its stored settings; --budget and "
                        "--max-time may be raised")
    w = p.add_argument_group("several trials at once (the store is the queue; see docs/distributed.md)")
    w.add_argument("--parallel", type=int, default=None, metavar="N",
                   help="keep up to N suggestions outstanding and run up to N trials at once (default 1). N is "
                        "stored with the study: a resume asks in the same batches")
    w.add_argument("--executor", choices=["local", "ray"], default=None,
                   help="where the trials run: local (threads of this process: for the surrogate, or targets that "
                        "can share a machine; the default) or ray (one trial per Ray node with a nosqltune_slot "
                        "resource). Stored with the study: a resume uses it unless told otherwise")
    w.add_argument("--address", default=None, metavar="ADDR",
                   help="--executor ray: the cluster to join (default: RAY_ADDRESS or the local cluster)")
    w.add_argument("--stale-after", type=float, default=None, metavar="SECONDS",
                   help="a running trial whose worker sent no heartbeat for this long is given again, once "
                        "(default 20)")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("best", help="the best configuration of a tuning study, as a table, YAML or JSON",
                       description="Print the best configuration found by `nosqltune tune`: as a cassandra.yaml "
                                   "fragment with the diff against the default (--format yaml), as JSON, or as a "
                                   "table.")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store: SQLite path or postgresql:// URL (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="study within the store (default tune)")
    p.add_argument("--format", choices=["table", "yaml", "json"], default=None,
                   help="output format on stdout (default table; json with --json)")
    p.add_argument("--confirm", action="store_true",
                   help="re-measure the --top configurations by single runs with the default in --rounds "
                        "interleaved cold rounds (stored in the study, resumable) and make the one with the best "
                        "mean the best; without it, a confirmation made before is shown")
    p.add_argument("--top", type=int, default=CONFIRM_TOP, metavar="K",
                   help=f"configurations to confirm (default {CONFIRM_TOP})")
    p.add_argument("--rounds", type=int, default=CONFIRM_ROUNDS, metavar="R",
                   help=f"interleaved cold rounds of the confirmation (default {CONFIRM_ROUNDS})")
    p.add_argument("--jit", choices=["c1", "tiered"], default=None,
                   help="with --confirm: both JVMs' JIT for its rounds (default tiered, production's, for a study of "
                        "Cassandra trials, whose rounds then warm up until its plateau, at most 300 s; c1: the JIT the "
                        "trials ran with), stored as a confirmation of its own")
    p.add_argument("--warmup-seconds", type=int, default=None, metavar="S",
                   help="with --confirm: warm up each run for S seconds (by time, not operations) instead of the "
                        "study's warm-up; stored as a confirmation of its own")
    p.add_argument("--ablation", action="store_true",
                   help="re-measure the best with each changed setting reverted to its default, one at a time, "
                        "beside the best and the default in --ablation-rounds interleaved cold rounds (stored, "
                        "resumable): each setting's share of the gain with its interval, and which are optional "
                        "(reverting them cost nothing measurable); without it, an ablation made before is shown")
    p.add_argument("--ablation-rounds", type=int, default=6, metavar="R",
                   help="interleaved cold rounds of the ablation (default 6, the fewest where p < 0.05 can be reached)")
    p.add_argument("--json", action="store_true",
                   help="print machine-readable JSON on stdout (as --format json), and --confirm's progress lines "
                        "on stderr as JSON")
    p.set_defaults(func=cmd_best)

