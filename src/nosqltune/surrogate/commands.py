"""`nosqltune collect`, `importance`, `model fit|report` and `recommend`: the surrogate-model pipeline."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import NosqltuneError, UsageError


def _say(args) -> Any:
    from ..cli import _progress

    return _progress(args)


def cmd_collect(args: argparse.Namespace) -> int:
    from ..cli import _searched_space, _settings, trial_target
    from ..store import open_store
    from ..trial import run_trial
    from ..tuning.commands import _subset_mapping
    from ..workloads.spec import Workload
    from .collect import STUDY_NAME, design, parse_ratios, plan_entries, run_plan

    if args.workload or args.read_ratio is not None:
        raise UsageError("collect describes workloads by --read-ratios (and --distribution), not --workload")
    if args.configs <= 0 or args.noise_repeats < 0 or (args.limit is not None and args.limit < 0):
        raise UsageError("--configs must be positive, --noise-repeats and --limit not negative")
    if args.repeat != 1:
        raise UsageError("collect runs each (workload, configuration) once; use --noise-repeats for repeats")
    settings = _settings(args)
    target = trial_target(settings)
    full_space = target.knob_space(settings)
    ratios = parse_ratios(args.read_ratios)
    fixed, subset, space = _searched_space(args, full_space, "collected over")
    workloads = [_ratio_workload(args, r) for r in ratios]
    for workload in workloads:
        target.preflight(workload, settings)
    knobs = _subset_mapping(subset, full_space)
    study_name = args.study_name or STUDY_NAME
    say = _say(args)

    store = open_store(args.study)
    try:
        existing = store.find_study(study_name)
        stored = (existing or {}).get("settings", {}).get("collect")
        if existing and store.trials(existing["id"]) and not stored:
            raise UsageError(f"study '{study_name}' in {args.study} is not a collection; pick another --study-name")
        if stored:
            for what, old, new in (("--knobs", stored["knobs"], knobs), ("--set/--config", stored["fixed"], fixed),
                                   ("harness flags", stored["harness"], settings.to_dict())):
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
        store.update_study_settings(study_id, {"collect": {
            "knobs": knobs, "knob_label": subset.label, "fixed": fixed, "harness": settings.to_dict(),
            "seed": seed, "noise_repeats": noise, "workloads": [w.to_dict() for w in merged.values()],
            "configs": configs, "plan": plan}})
        env_id = store.environment(target.fingerprint(settings))
        say(f"collection '{study_name}': {len(configs)} configurations x {len(merged)} workloads "
            f"+ {noise} noise repeats of the default per workload = {len(plan)} trials")
        counts = run_plan(store, study_id, plan, configs, fixed, merged,
                          lambda config, workload: run_trial(full_space, config, workload, settings, progress=say),
                          environment_id=env_id, say=say, limit=args.limit,
                          workload_info=lambda w: {**w.to_dict(), "harness": settings.to_dict()})
    finally:
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


def _ratio_workload(args: argparse.Namespace, ratio: float):
    from ..cli import _build_workload

    return _build_workload(argparse.Namespace(**{**vars(args), "workload": None, "read_ratio": ratio}))


# ---------------------------------------------------------------------------------------------- importance
def cmd_importance(args: argparse.Namespace) -> int:
    if args.from_study:
        return _importance_from_study(args)
    return _importance_measured(args)


def _chart_path(args, stem_suffix: str):
    from pathlib import Path

    from ..tuning.commands import _store_path

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
    from ..cli import _build_workload, _searched_space, _settings, trial_target
    from ..store import open_store
    from ..trial import run_trial
    from ..tuning.commands import _subset_mapping
    from ..tuning.objective import Objective, metric_value
    from .importance import bar_chart, key_count, level_config, levels, score

    if args.levels < 2:
        raise UsageError("--levels must be at least 2 (the minimum and the maximum)")
    if args.workload and "," in args.workload:
        raise UsageError("importance measures one workload; give one --workload")
    objective = Objective.parse(args.objective, [])
    settings = _settings(args)
    target = trial_target(settings)
    full_space = target.knob_space(settings)
    fixed, subset, space = _searched_space(args, full_space, "measured")
    workload = _build_workload(args)
    target.preflight(workload, settings)
    study_name = args.study_name or f"importance-{workload.name}"
    plan = [{"knob": None, "value": None, "repeat": r} for r in range(args.repeat)]
    plan += [{"knob": k, "value": v, "repeat": r} for k, v in levels(space, args.levels) for r in range(args.repeat)]
    stored_settings = {"knobs": _subset_mapping(subset, full_space), "fixed": fixed, "workload": workload.to_dict(),
                       "harness": settings.to_dict(), "levels": args.levels, "repeat": args.repeat}
    say = _say(args)
    store = open_store(args.study)
    try:
        existing = store.find_study(study_name)
        old = (existing or {}).get("settings", {}).get("importance")
        if existing and store.trials(existing["id"]) and json.dumps(old, sort_keys=True, default=str) != \
                json.dumps(stored_settings, sort_keys=True, default=str):
            raise UsageError(f"study '{study_name}' in {args.study} holds an importance run with other settings: "
                             "pick another --study-name")
        study_id = existing["id"] if existing else store.study(study_name, settings.system)
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
    from .features import load_table
    from .importance import bar_chart, key_count, permutation_importance

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


# ---------------------------------------------------------------------------------------------- models
def _default_model_dir(study: str, metric: str, kind: str):
    from ..tuning.commands import _store_path

    path = _store_path(study)
    return path.parent / f"{path.stem}.{metric}.{kind}.model"


def cmd_model_fit(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..tuning.objective import check_metric
    from .features import load_table
    from .models import save
    from .pipeline import fit

    from ..cli import domain_of

    metric = check_metric(args.target, "target")
    table = load_table(args.study, args.study_name, **domain_of(args))
    model, meta = fit(table, args.kind, metric, seed=args.seed)
    meta["study"] = args.study
    out = Path(args.out) if args.out else _default_model_dir(args.study, metric, args.kind)
    save(out, model, meta)
    if args.json:
        print(json.dumps({"model": str(out), **meta}, default=str))
    else:
        t = meta["training"]
        print(f"{args.kind} model of {metric} ({describe_domain(table.spec)}) fitted on {meta['trials']} trials "
              f"in {meta['fit_seconds']:.1f} s "
              f"(training error: MAPE {t['mape']:.2f}%, R2 {t['r2']:.3f}); saved to {out}")
        if meta["noise"]["cv"] is not None:
            print(f"measurement noise of the data: CV {meta['noise']['cv'] * 100:.1f}% "
                  f"({meta['noise']['groups']} repeated configurations)")
        print(f"accuracy on unseen configurations and workloads: nosqltune model report --study {args.study}")
    return 0


def _parse_sizes(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--sizes expects a list of training-set sizes like 25,50,100,200, got {text!r}") from None
    if any(s < 5 for s in sizes):
        raise UsageError("--sizes: every training-set size must be at least 5")
    return sizes


def cmd_model_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..tuning.objective import check_metric
    from .accuracy import evaluate, learning_curve
    from .features import load_table
    from .models import KINDS
    from .pipeline import noise

    metric = check_metric(args.target, "target")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise UsageError(f"--kinds: unknown model kind {', '.join(unknown) or '(none)'}; use {', '.join(KINDS)}")
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    sizes = _parse_sizes(args.sizes)
    from ..cli import domain_of

    table = load_table(args.study, args.study_name, **domain_of(args))
    say = _say(args)
    rows = []
    for kind in kinds:
        for split in ("configs", "workloads"):
            if split == "workloads" and len(set(table.workloads)) < 2:
                continue
            say(f"{kind}: unseen {split}")
            rows.append(evaluate(table, kind, metric, split, repeats=args.repeats, seed=args.seed))
    curve = []
    for kind in kinds:
        usable = [s for s in sizes if s < 0.8 * len(table.X)]
        if usable:
            say(f"{kind}: error versus training-set size {usable}")
            curve += learning_curve(table, kind, metric, usable, repeats=args.repeats, seed=args.seed)
    result = {"study": args.study, "metric": metric, "domain": table.spec.domain, "scope": table.spec.scope,
              "features": len(table.spec.names()), "trials": len(table.X), "noise": noise(table, metric),
              "accuracy": rows, "learning_curve": curve}
    text = format_accuracy(result)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "accuracy.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "accuracy.md").write_text(text + "\n")
        if curve:
            learning_chart(curve, out / "learning_curve.png", metric)
    print(json.dumps(result) if args.json else text)
    return 0


def format_accuracy(result: dict[str, Any]) -> str:
    lines = [f"Surrogate accuracy for {result['metric']} ({result['trials']} trials, tuning domain "
             f"{result.get('domain', 'TD1')}{_scope_text(result.get('scope'))}; measurement noise CV "
             + (f"{result['noise']['cv'] * 100:.1f}%" if result["noise"]["cv"] is not None else "unknown") + ")", "",
             "| model | unseen | MAPE % | R2 | RMSE | train / test | splits |", "|---|---|---|---|---|---|---|"]
    for r in result["accuracy"]:
        lines.append(f"| {r['kind']} | {r['split']} | {r['mape']:.2f} ± {r['mape_sd']:.2f} | {r['r2']:.3f} | "
                     f"{r['rmse']:.4g} | {r['train']:.0f} / {r['test']:.0f} | {r['splits']} |")
    if result["learning_curve"]:
        lines += ["", "Error on unseen configurations versus training-set size:", "",
                  "| model | training trials | MAPE % | R2 |", "|---|---|---|---|"]
        for r in result["learning_curve"]:
            lines.append(f"| {r['kind']} | {r['train']:.0f} | {r['mape']:.2f} ± {r['mape_sd']:.2f} | {r['r2']:.3f} |")
    return "\n".join(lines)


def _scope_text(scope: dict[str, Any] | None) -> str:
    parts = []
    if scope and "workload" in scope:
        parts.append(f"workload {scope['workload']}")
    if scope and "design" in scope:
        parts.append(f"{scope['design']['nodes']} node(s), RF {scope['design']['replication_factor']}")
    return f" ({', '.join(parts)})" if parts else ""


def describe_domain(spec) -> str:
    return f"tuning domain {spec.domain}{_scope_text(spec.scope)}, {len(spec.names())} features"


def learning_chart(curve: list[dict], path, metric: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for kind in dict.fromkeys(r["kind"] for r in curve):
        pts = [r for r in curve if r["kind"] == kind]
        ax.errorbar([r["train"] for r in pts], [r["mape"] for r in pts], yerr=[r["mape_sd"] for r in pts],
                    marker="o", capsize=3, label=kind)
    ax.set_xlabel("training trials")
    ax.set_ylabel(f"MAPE of {metric} on unseen configurations (%)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------- recommend
def cmd_recommend(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from ..tuning.commands import yaml_fragment
    from ..workloads.spec import make_workload
    from .features import workload_features
    from .models import load
    from .pipeline import Surrogate
    from .search import METHODS

    started = time.perf_counter()
    if args.search not in METHODS:
        raise UsageError(f"--search must be one of {', '.join(METHODS)}")
    model, meta = load(Path(args.model))
    surrogate = Surrogate(model, meta)
    scope = surrogate.spec.scope
    if not surrogate.spec.has_workload:   # TD2/TD4: the model knows one workload, which it does not see as input
        if args.workload is not None:
            asked = workload_features(make_workload(args.workload, distribution=args.distribution).to_dict())
            if abs(asked["read_ratio"] - scope["read_ratio"]) > 1e-9:
                raise UsageError(f"the model ({surrogate.spec.domain}) was fitted on workload {scope['workload']} "
                                 f"(read ratio {scope['read_ratio']:g}) only; leave out --workload")
        workload = make_workload(read_ratio=scope["read_ratio"], distribution=scope.get("distribution"))
        workload.name = scope["workload"]
    else:
        workload = make_workload(args.workload or "ycsb-a", distribution=args.distribution)
    features = workload_features(workload.to_dict())
    if features["distribution"] not in surrogate.spec.distributions:
        raise UsageError(f"the model knows the distributions {', '.join(surrogate.spec.distributions)}, "
                         f"not {features['distribution']}")
    rec = surrogate.recommend(features, args.search, seed=args.seed)
    seconds = time.perf_counter() - started
    changed = {k: v for k, v in rec.config.items() if v != surrogate.space.default()[k]}
    result = {"model": args.model, "kind": meta["kind"], "metric": meta["metric"], "workload": workload.name,
              "read_ratio": features["read_ratio"], "search": rec.search, "config": rec.config, "changed": changed,
              "predicted": rec.predicted, "predicted_default": rec.predicted_default,
              "predicted_gain": rec.predicted_gain, "evaluations": rec.evaluations,
              "search_seconds": rec.search_seconds, "seconds": seconds}
    if args.format == "json":
        print(json.dumps(result, default=str))
    elif args.format == "yaml":
        print(yaml_fragment(surrogate.space, rec.config, surrogate.spec.fixed,
                            f"nosqltune recommend: {meta['kind']} model of {meta['metric']}, {workload.name}, "
                            f"predicted {rec.predicted:.4g} vs default {rec.predicted_default:.4g}"), end="")
    else:
        unit = "ops/s" if meta["maximize"] else "ms"
        print(f"{workload.name} (read ratio {features['read_ratio']:g}): {meta['kind']} model of {meta['metric']}, "
              f"{rec.search} search ({rec.evaluations} evaluations, {rec.search_seconds:.3f} s; {seconds:.2f} s in all)")
        print(f"predicted {rec.predicted:.4g} {unit} vs default {rec.predicted_default:.4g} {unit} "
              f"(x{rec.predicted_gain:.3f})")
        for name, value in changed.items():
            print(f"  {name} = {value}   (default {surrogate.space.default()[name]})")
        if not changed:
            print("  the default is the best the model knows")
    return 0
