"""`nosqltune compare`: a tuning study's best (and other candidates) against the default, interleaved."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import UsageError
from .options import DEFAULT_STUDY


SPECIAL = ("best", "default", "best-practice", "design-default")


def _tuning_study(args):
    from ..surrogate.features import existing_store
    from ..tuning.loop import DEFAULT_STUDY_NAME

    store = existing_store(args.study)
    name = args.study_name or DEFAULT_STUDY_NAME
    study = store.find_study(name)
    tune = (study or {}).get("settings", {}).get("tune")
    if not tune:
        store.close()
        raise UsageError(f"no tuning study '{name}' in {args.study} (compare needs a study made by `nosqltune tune`)")
    return store, study, tune


def parse_candidates(text: str, space, best: dict[str, Any] | None,
                     best_practice: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """'best,default,best-practice,design-default,my.yaml' -> label -> knob overrides; the default always comes
    first. design-default: Cassandra's default knobs on the best configuration's physical design (its nodes
    and replication factor), which splits a searched design's gain into the design's and the knobs'."""
    from pathlib import Path

    from ..knobs import load_overrides_file

    out: dict[str, dict[str, Any]] = {"default": {}}
    for item in (t.strip() for t in text.split(",")):
        if not item or item == "default":
            continue
        if item == "best":
            if best is None:
                raise UsageError("the study has no best configuration yet (no completed trial)")
            out["best"] = best
        elif item == "design-default":
            design = {k: v for k, v in (best or {}).items() if k in space and space[k].applies == "design"}
            if not design:
                raise UsageError("design-default needs a best configuration with a searched design (tune --design)")
            out["design-default"] = design
        elif item == "best-practice" and best_practice is not None:
            if not best_practice:
                raise UsageError(f"the {space.system} knob space has no best-practice rules (Cassandra's has)")
            out["best-practice"] = best_practice
        elif Path(item).exists():
            out[Path(item).stem] = space.validate(load_overrides_file(item))
        else:
            raise UsageError(f"unknown candidate {item!r}: use best, default, best-practice, design-default or "
                             "a YAML file of knob values")
    if len(out) < 2:
        raise UsageError("--candidates names nothing to compare with the default")
    return out


def cmd_compare(args: argparse.Namespace) -> int:
    from .options import trial_target
    from ..knobs.space import TuningSpace
    from ..systems import TrialSettings
    from ..tuning.loop import TuneSpec
    from ..objective import Objective, check_metric, metric_unit, metric_value
    from ..tuning.results import best_configuration
    from ..workloads.spec import Workload
    from ..runtime.paths import cache_dir
    from ..knobs.best_practice import best_practice, machine_facts
    from ..evaluation.compare import run_interleaved
    from ..evaluation.stats import compare

    if args.repeat < 2:
        raise UsageError("--repeat must be at least 2 (a comparison needs repeated pairs)")
    if args.scale <= 0:
        raise UsageError("--scale must be positive")
    side_metrics = [check_metric(m, "--metrics entry") for m in args.metrics.split(",") if m.strip()]
    store, study, tune = _tuning_study(args)
    lease = None
    try:
        lease = store.acquire_lease(study["id"])   # compare runs trials in the study: not beside a tune
        settings = TrialSettings(**tune["harness"])
        full_space = trial_target(settings).knob_space(settings)
        spec = TuneSpec(**tune["spec"])
        objective = Objective.from_dict(spec.objective)
        space = TuningSpace(full_space.subset(tune["knobs"]), tune["fixed"])
        rows = [r for r in store.trials(study["id"]) if r["tag"] == "tune"]
        best = best_configuration(rows, objective, spec.workloads, space)
        system = tune.get("system", "cassandra")
        facts = machine_facts(heap_mb=settings.heap_mb, data_path=cache_dir(), server_cpus=settings.server_cpus)
        practice, rules = best_practice(full_space, facts)
        target = trial_target(settings, system, seed=spec.seed, metrics=(objective.metric,))
        own = target.knob_space(settings)     # a recorded dataset answers for its own knobs only
        practice = {k: v for k, v in practice.items() if k in own}
        rules = {k: v for k, v in rules.items() if k in practice}
        candidates = parse_candidates(args.candidates, full_space, best["config"] if best else None, practice)
        candidates = {k: {**tune["fixed"], **v} for k, v in candidates.items()}
        env_id = store.environment(target.fingerprint(settings))

        def run(overrides, workload):
            return target.run_trial(full_space, overrides, workload, settings, progress=say)
        say = _say(args)
        # each set of candidates has its own rounds (the default is re-run beside them, so every pair ran
        # side by side) and its own stored result; plain best-vs-default keeps the bare scale as its key
        others = [k for k in candidates if k != "default"]
        suffix = "" if others == ["best"] else ":" + "+".join(others)
        result: dict[str, Any] = {"study": args.study, "study_name": study["name"], "system": system,
                                  "metric": objective.metric,
                                  "scale": args.scale, "candidates": candidates, "workloads": {}}
        if "best-practice" in candidates:
            result["best_practice"] = {"machine": facts, "rules": rules}
        workloads = [Workload.from_dict(w if args.scale == 1 else
                                        {**w, "records": int(w["records"] * args.scale),
                                         "operations": int(w["operations"] * args.scale)})
                     for w in tune["workloads"]]
        for workload in workloads:   # e.g. the memory guard of Redis at --scale 10
            target.preflight(workload, settings)
        for workload in workloads:
            group = f"{workload.name}-x{args.scale:g}{suffix}"
            say(f"{workload.name} at x{args.scale:g}: {args.repeat} interleaved rounds of {', '.join(candidates)}")
            runs = run_interleaved(store, study["id"], candidates, args.repeat,
                                   lambda overrides: run(overrides, workload),
                                   workload_info={**workload.to_dict(), "harness": settings.to_dict()},
                                   environment_id=env_id, say=say, group=group)
            per_metric = {}
            for metric in [objective.metric, *(m for m in side_metrics if m != objective.metric)]:
                values = {k: [metric_value(metric, r["metrics"]["summary"]) if r else None for r in v]
                          for k, v in runs.items()}
                if metric != objective.metric and not any(x is not None for v in values.values() for x in v):
                    continue   # a figure this target does not give (e.g. a recorded surrogate's CPU)
                maximize = metric == "throughput"
                per_metric[metric] = {"values": values, "stats": {
                    k: compare(k, values[k], values["default"], maximize=maximize).to_dict()
                    for k in candidates if k != "default"}}
            main = per_metric.pop(objective.metric)
            result["workloads"][workload.name] = {"group": group, **main,
                                                  "also": {m: {**v, "unit": metric_unit(m)}
                                                           for m, v in per_metric.items()}}
        earlier = (store.find_study(study["name"]) or study)["settings"].get("compare", {})
        store.update_study_settings(study["id"], {"compare": {**earlier, f"x{args.scale:g}{suffix}": result}})
    finally:
        if lease is not None:
            lease.release()
        store.close()
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(format_comparison(result, objective.unit))
    return 0


def _say(args):
    from .options import _progress

    return _progress(args)


def format_comparison(result: dict[str, Any], unit: str) -> str:
    lines = [f"{result['metric']} ({unit}), study {result['study_name']}, scale x{result['scale']:g}: "
             "speedup = candidate / default of the same round (> 1 is better)"]
    for name, w in result["workloads"].items():
        lines.append(f"\n{name}:")
        lines += _metric_lines(w)
        for metric, side in (w.get("also") or {}).items():
            lines.append(f"  -- {metric} ({side['unit']}):")
            lines += _metric_lines(side)
    return "\n".join(lines)


def _metric_lines(w: dict[str, Any]) -> list[str]:
    """Means per candidate, then each candidate's speedup and test against the default."""
    lines = []
    for label, values in w["values"].items():
        got = [v for v in values if v is not None]
        mean = sum(got) / len(got) if got else float("nan")
        lines.append(f"  {label:<14} mean {mean:10.4g} over {len(got)} runs"
                     + (f" ({len(values) - len(got)} failed)" if len(got) < len(values) else ""))
    for label, s in w["stats"].items():
        if s["mean_speedup"] is None:
            lines.append(f"  {label}: {s['verdict']}")
            continue
        interval = f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["ci_low"] is not None else "-"
        p = f"{s['p_value']:.4f}" if s["p_value"] is not None else "-"
        lines.append(f"  {label} vs default: mean x{s['mean_speedup']:.3f}, median x{s['median_speedup']:.3f}, "
                     f"95% interval {interval}, Wilcoxon p = {p} over {s['pairs']} pairs: {s['verdict'].upper()}")
    return lines


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "compare", help="a tuning study's best configuration (and others) against the default, with statistics",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the candidates and the default in interleaved cold rounds (ABC CBA ...) on the study's "
                    "workloads and harness, then per candidate: speedup over the default of the same round (mean, "
                    "median, 95%% bootstrap interval), Wilcoxon signed-rank p-value, and a verdict (better / no "
                    "significant difference / worse). Runs are stored in the study; an interrupted comparison "
                    "continues where it stopped.\n\nExamples:\n"
                    "  nosqltune compare --study runs/a.db --repeat 10\n"
                    "  nosqltune compare --study runs/a.db --candidates best,mine.yaml --repeat 10 --scale 10")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="tuning study within the store (default tune)")
    p.add_argument("--candidates", default="best", metavar="LIST",
                   help="comma-separated: best (the study's best), default, best-practice (Cassandra's documented "
                        "rules of thumb for this machine: concurrent_writes = 8 x cores, concurrent_reads = 16 x "
                        "drives, ...; see `nosqltune knobs`), design-default (the default knobs on the best "
                        "configuration's design, for a study of tune --design), or YAML files of knob values (default "
                        "best; the default configuration is always run as the reference)")
    p.add_argument("--repeat", type=int, default=10, metavar="N", help="interleaved rounds (default 10)")
    p.add_argument("--scale", type=float, default=1.0, metavar="X",
                   help="multiply records and operations by X, e.g. 10 to validate at 10x the tuning load (seed 001's "
                        "TS2; a new dataset is loaded once) (default 1)")
    p.add_argument("--metrics", default="throughput,cpu-per-op", metavar="LIST",
                   help="figures tested beside the study's objective, from the same runs (default throughput,"
                        "cpu-per-op: the node's CPU per operation separates configurations that the throughput of a "
                        "client sharing the cores cannot; '' for none)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_compare)
