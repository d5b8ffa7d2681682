"""`nosqltune collect`: trials over a sampled design of configurations and workloads, for models."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import UsageError
from .options import _common, _progress


def _say(args) -> Any:

    return _progress(args)


def cmd_collect(args: argparse.Namespace) -> int:
    from .options import _searched_space, trial_target
    from .harness import trial_settings
    from ..store import open_store
    from ..systems import TrialSettings, run_trial
    from ..tuning.results import stored_subset as _subset_mapping
    from ..workloads.spec import Workload
    from ..surrogate.collect import STUDY_NAME, design, plan_entries, run_plan

    if args.read_ratio is not None:
        raise UsageError("collect describes workloads by --read-ratios (and --distribution) or a --workload list, "
                         "not --read-ratio")
    if args.workload and args.read_ratios is not None:
        raise UsageError("give --workload (named mixes, e.g. ycsb-b,write90,ycsb-e) or --read-ratios, not both")
    if args.configs <= 0 or args.noise_repeats < 0 or (args.limit is not None and args.limit < 0):
        raise UsageError("--configs must be positive, --noise-repeats and --limit not negative")
    if args.repeat != 1:
        raise UsageError("collect runs each (workload, configuration) once; use --noise-repeats for repeats")
    settings = trial_settings(args)
    target = trial_target(settings)
    full_space = target.knob_space(settings)
    fixed, subset, space = _searched_space(args, full_space, "collected over", settings=settings)
    workloads = _workloads(args)
    for workload in workloads:
        target.preflight(workload, settings)
    knobs = _subset_mapping(subset, full_space)
    study_name = args.study_name or STUDY_NAME
    say = _say(args)

    store = open_store(args.study)
    lease = None
    try:
        existing = store.find_study(study_name)
        stored = (existing or {}).get("settings", {}).get("collect")
        if existing and store.trials(existing["id"]) and not stored:
            raise UsageError(f"study '{study_name}' in {args.study} is not a collection; pick another --study-name")
        if stored:
            for what, old, new in (("--knobs", stored["knobs"], knobs), ("--set/--config", stored["fixed"], fixed),
                                   ("harness flags", TrialSettings.from_dict(stored["harness"]).to_dict(),
                                    settings.to_dict())):
                if json.dumps(old, sort_keys=True) != json.dumps(new, sort_keys=True):
                    raise UsageError(f"{what} differ from the collection stored in '{study_name}': a collection "
                                     "can only be extended with more configurations or read ratios")
            old_workloads = {w["name"]: Workload.from_dict(w) for w in stored["workloads"]}
            for w in workloads:
                if w.name in old_workloads and old_workloads[w.name].to_dict() != w.to_dict():
                    raise UsageError(f"workload {w.name} differs from the stored one (sizes, threads): use the "
                                     "flags of the original collection")
            merged = {**old_workloads, **{w.name: w for w in workloads}}
            configs = design(space, max(args.configs, len(stored["configs"])), stored["seed"], stored["configs"])
            noise = max(args.noise_repeats, stored["noise_repeats"])
            plan = plan_entries(len(configs), list(merged), noise, stored["seed"], stored["plan"])
            seed = stored["seed"]
            study_id = existing["id"]
        else:
            seed = args.seed
            merged = {w.name: w for w in workloads}
            configs = design(space, args.configs, seed)
            noise = args.noise_repeats
            plan = plan_entries(len(configs), list(merged), noise, seed)
            study_id = existing["id"] if existing else store.study(study_name, settings.system)
        lease = store.acquire_lease(study_id)   # one process at a time runs trials in a study
        store.update_study_settings(study_id, {"collect": {
            "knobs": knobs, "knob_label": subset.label, "fixed": fixed, "harness": settings.to_dict(),
            "seed": seed, "noise_repeats": noise, "workloads": [w.to_dict() for w in merged.values()],
            "configs": configs, "plan": plan}})
        env_id = store.environment(target.fingerprint(settings))
        say(f"collection '{study_name}': {len(configs)} configurations x {len(merged)} workloads "
            f"+ {noise} noise repeats of the default per workload = {len(plan)} trials")
        counts = run_plan(store, study_id, plan, configs, fixed, merged,
                          lambda config, workload: run_trial(full_space, config, workload, settings, progress=say),
                          environment_id=env_id, say=say, limit=args.limit, shape=space.dataset_shape,
                          workload_info=lambda w: {**w.to_dict(), "harness": settings.to_dict()})
    finally:
        if lease is not None:
            lease.release()
        store.close()
    result = {"study": args.study, "study_name": study_name, "configurations": len(configs),
              "workloads": list(merged), **counts}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"collection {study_name} in {args.study}: {counts['planned']} trials planned, "
              f"{counts['done_before'] + counts['ran']} done ({counts['failed']} failed this time), "
              f"{counts['remaining']} remaining")
    return 0 if counts["failed"] == 0 else 1


def _workloads(args: argparse.Namespace) -> list:
    """The collection's workloads: the named mixes of --workload (a comma list), else one per --read-ratios
    (reads, the rest updates; default 0:1:0.1)."""
    from ..surrogate.collect import parse_ratios
    from .options import _build_workload, _scenario, workload_names

    if _scenario(args).rate_fraction is not None:
        raise UsageError(f"collect measures configurations over workloads at full speed; --scenario "
                         f"{_scenario(args).name} runs at a fixed rate (use bench or tune with it)")
    if args.workload:
        names = workload_names(args.workload)
        if len(set(names)) != len(names):
            raise UsageError("--workload lists the same workload twice")
        return [_build_workload(args, name=name) for name in names]
    return [_build_workload(args, name=None, read_ratio=r) for r in parse_ratios(args.read_ratios or "0:1:0.1")]


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "collect", help="training data for surrogate models: every configuration on every workload, cold",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run one cold trial for every (workload, configuration) pair and store it (RAFIKI's "
                    "workload-aware training data). The workloads are read ratios (--read-ratios) or named mixes "
                    "(--workload). The configurations are the default plus random ones in which "
                    "every knob's minimum and maximum (and every choice) appears at least once. Resumable: run "
                    "the same command again; extend it with a larger --configs or more --read-ratios.\n\n"
                    "Example:\n  nosqltune collect --knobs rafiki5 --read-ratios 0:1:0.1 --configs 20 "
                    "--study runs/train.db")
    _common(p)
    g = p.add_argument_group("collection")
    g.add_argument("--knobs", default="rafiki5", metavar="SET|FILE", help="knob set or YAML file (default rafiki5)")
    g.add_argument("--read-ratios", default=None, metavar="START:STOP:STEP|LIST",
                   help="read ratios of the workloads (rest updates), e.g. 0:1:0.1 or 0.1,0.5,0.9 (default 0:1:0.1); "
                        "or name the mixes with --workload, a comma list (e.g. ycsb-b,write90,ycsb-e: with scans, "
                        "a model fitted on them has the scan ratio among its features)")
    g.add_argument("--configs", type=int, default=20, metavar="N",
                   help="configurations, the default included (default 20)")
    g.add_argument("--noise-repeats", type=int, default=2, metavar="N",
                   help="extra runs of the default per workload, to measure the noise (default 2)")
    g.add_argument("--seed", type=int, default=1, help="seed of the random configurations and order (default 1)")
    g.add_argument("--limit", type=int, metavar="N", help="run at most N of the missing trials this time")
    p.set_defaults(func=cmd_collect)
