"""`nosqltune importance`: which knobs matter, from measured trials or a study."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import NosqltuneError, UsageError
from .collect import _say
from .options import _common


# ---------------------------------------------------------------------------------------------- importance
def cmd_importance(args: argparse.Namespace) -> int:
    if args.from_study:
        return _importance_from_study(args)
    return _importance_measured(args)


def _chart_path(args, stem_suffix: str):
    from pathlib import Path

    from .options import study_path as _store_path

    if args.chart:
        return Path(args.chart)
    path = _store_path(args.from_study or args.study)
    return path.parent / f"{path.stem}.{stem_suffix}.importance.png"


def _print_ranking(args, ranked: list[dict], key: int, header: str, extra: dict[str, Any], unit: str) -> None:
    if args.json:
        print(json.dumps({**extra, "key_knobs": [r["knob"] for r in ranked[:key]], "ranking": ranked}, default=str))
        return
    print(header)
    width = max(len(r["knob"]) for r in ranked)
    for i, r in enumerate(ranked, 1):
        mark = "*" if i <= key else " "
        print(f"{i:3d} {mark} {r['knob'].ljust(width)}  {r['score']:10.4g} {unit}"
              + (f"  ({r['relative'] * 100:5.1f}% of the default)" if "levels" in r else "")
              + (f"  best level {r['best_level']}" if "best_level" in r else ""))
    print(f"key knobs (largest drop after #{key}): {', '.join(r['knob'] for r in ranked[:key])}")
    if extra.get("chart"):
        print(f"chart: {extra['chart']}")


def _importance_measured(args: argparse.Namespace) -> int:
    from .options import _build_workload, _searched_space, trial_target
    from .harness import trial_settings
    from ..store import open_store
    from ..systems import run_trial
    from ..tuning.results import stored_subset as _subset_mapping
    from ..objective import Objective, metric_value
    from ..surrogate.importance import bar_chart, key_count, level_config, levels, score

    if args.levels < 2:
        raise UsageError("--levels must be at least 2 (the minimum and the maximum)")
    if args.workload and "," in args.workload:
        raise UsageError("importance measures one workload; give one --workload")
    objective = Objective.parse(args.objective, [])
    settings = trial_settings(args)
    target = trial_target(settings)
    full_space = target.knob_space(settings)
    fixed, subset, space = _searched_space(args, full_space, "measured", settings=settings)
    workload = _build_workload(args)
    target.preflight(workload, settings)
    study_name = args.study_name or f"importance-{workload.name}"
    plan = [{"knob": None, "value": None, "repeat": r} for r in range(args.repeat)]
    plan += [{"knob": k, "value": v, "repeat": r} for k, v in levels(space, args.levels) for r in range(args.repeat)]
    stored_settings = {"knobs": _subset_mapping(subset, full_space), "fixed": fixed, "workload": workload.to_dict(),
                       "harness": settings.to_dict(), "levels": args.levels, "repeat": args.repeat}
    say = _say(args)
    store = open_store(args.study)
    lease = None
    try:
        existing = store.find_study(study_name)
        old = (existing or {}).get("settings", {}).get("importance")
        if existing and store.trials(existing["id"]) and json.dumps(old, sort_keys=True, default=str) != \
                json.dumps(stored_settings, sort_keys=True, default=str):
            raise UsageError(f"study '{study_name}' in {args.study} holds an importance run with other settings: "
                             "pick another --study-name")
        study_id = existing["id"] if existing else store.study(study_name, settings.system)
        lease = store.acquire_lease(study_id)   # one process at a time runs trials in a study
        store.update_study_settings(study_id, {"importance": stored_settings})
        env_id = store.environment(target.fingerprint(settings))

        def entry_key(e):
            return (e["knob"], json.dumps(e["value"]), e["repeat"])

        done = {entry_key(r["meta"]["importance"]) for r in store.trials(study_id)
                if (r.get("meta") or {}).get("importance") and r["failure_kind"] != "interrupted"
                and r["state"] in ("COMPLETE", "FAIL")}
        todo = [e for e in plan if entry_key(e) not in done]
        say(f"importance of {len(space.knobs)} knobs on {workload.name}: {len(plan)} trials, {len(todo)} to run")
        notes: dict[str, list[str]] = {}
        for n, entry in enumerate(todo, 1):
            if entry["knob"] is None:
                config = space.default()
            else:
                config, enabled = level_config(space, entry["knob"], entry["value"])
                if enabled:
                    notes[entry["knob"]] = enabled
            trial_id = store.start_trial(study_id, {**fixed, **config},
                                         {**workload.to_dict(), "harness": settings.to_dict()}, tag="importance",
                                         environment_id=env_id, meta={"importance": entry})
            what = "default" if entry["knob"] is None else f"{entry['knob']}={entry['value']}"
            say(f"[{len(plan) - len(todo) + n}/{len(plan)}] {what}")
            row = store.record(trial_id, lambda: run_trial(full_space, {**fixed, **config}, workload, settings,
                                                             progress=say))
            if row["state"] != "COMPLETE":
                say(f"  -> FAILED ({row['failure_kind']}): {row['error']}")
        rows = [r for r in store.trials(study_id) if (r.get("meta") or {}).get("importance")
                and r["state"] == "COMPLETE"]
    finally:
        if lease is not None:
            lease.release()
        store.close()
    baseline = [metric_value(objective.metric, r["metrics"]["summary"]) for r in rows
                if r["meta"]["importance"]["knob"] is None]
    if not baseline:
        raise NosqltuneError("the default configuration failed: no baseline to score the knobs against")
    measured: dict[str, dict[Any, list[float]]] = {k.name: {} for k in space.knobs}
    for r in rows:
        entry = r["meta"]["importance"]
        if entry["knob"] is not None:
            measured[entry["knob"]].setdefault(entry["value"], []).append(
                metric_value(objective.metric, r["metrics"]["summary"]))
    ranked = score(baseline, measured)
    if not objective.maximize:
        for r in ranked:
            r["best_level"] = min(r["levels"].items(), key=lambda kv: kv[1])[0] if r["levels"] else None
    for r in ranked:
        if r["knob"] in notes:
            r["measured_with"] = notes[r["knob"]]
    key = key_count([r["score"] for r in ranked])
    chart = _chart_path(args, study_name)
    chart.parent.mkdir(parents=True, exist_ok=True)
    bar_chart(ranked, key, chart, f"One knob at a time on {workload.name}: sd of {objective.metric} over levels",
              f"standard deviation of {objective.metric} ({objective.unit})")
    _print_ranking(args, ranked, key, f"knob importance on {workload.name} ({objective.metric}; default "
                   f"{sum(baseline) / len(baseline):.0f} {objective.unit}, {len(rows)} trials; * = key knob)",
                   {"study": args.study, "study_name": study_name, "workload": workload.name,
                    "metric": objective.metric, "chart": str(chart)}, objective.unit)
    return 0


def _importance_from_study(args: argparse.Namespace) -> int:
    from ..surrogate.features import load_table
    from ..surrogate.importance import bar_chart, key_count, permutation_importance

    table = load_table(args.from_study, args.study_name)
    metric = args.objective
    everything = permutation_importance(table, metric, kind=args.model, seed=args.seed)
    ranked = [r for r in everything if r["feature"] == "knob"]     # the workload's own effect is not a knob's
    key = key_count([r["score"] for r in ranked])
    chart = _chart_path(args, args.study_name or "study")
    chart.parent.mkdir(parents=True, exist_ok=True)
    bar_chart(ranked, key, chart, f"Permutation importance ({args.model} model of {metric}, {len(table.X)} trials)",
              "increase of mean |log error| when the knob is shuffled")
    workload = [r for r in everything if r["feature"] == "workload"]
    _print_ranking(args, ranked, key, f"permutation importance from {args.from_study} ({len(table.X)} trials, "
                   f"{args.model} model of {metric}; * = key)"
                   + "".join(f"\n  workload feature {r['knob']}: {r['score']:.4g}" for r in workload),
                   {"study": args.from_study, "metric": metric, "chart": str(chart), "workload_features": workload}, "")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "importance", help="which knobs matter: one knob at a time (measured), or from an existing study",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="RAFIKI's key-knob selection: measure every knob at each of --levels values (every choice "
                    "of a categorical knob) with the others at their defaults, score each knob by the standard "
                    "deviation of the objective over its levels, rank, and mark the top k at the largest drop "
                    "between consecutive scores. Resumable. With --from-study, no trial is run: the ranking is "
                    "the permutation importance of a model fitted to that study's trials.\n\nExamples:\n"
                    "  nosqltune importance --workload read90 --knobs irace23\n"
                    "  nosqltune importance --from-study runs/train.db --objective throughput")
    _common(p)
    g = p.add_argument_group("importance")
    g.add_argument("--knobs", default="irace23", metavar="SET|FILE", help="knob set or YAML file (default irace23)")
    g.add_argument("--levels", type=int, default=4, metavar="N", help="values per numeric knob (default 4)")
    g.add_argument("--objective", default="throughput", metavar="METRIC",
                   help="throughput or a latency such as p99-read (default throughput)")
    g.add_argument("--chart", metavar="PNG", help="bar chart path (default next to the study)")
    g.add_argument("--from-study", metavar="PATH", help="rank by permutation importance on this study's trials")
    g.add_argument("--model", choices=["rf", "gbdt", "nn-ensemble"], default="rf",
                   help="--from-study: the model whose error is measured (default rf)")
    g.add_argument("--seed", type=int, default=0, help="--from-study: seed of the model and permutations")
    p.set_defaults(func=cmd_importance)
