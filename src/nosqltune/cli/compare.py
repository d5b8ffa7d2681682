"""`nosqltune compare`: a tuning study's best (and other candidates) against the default, interleaved."""

from __future__ import annotations

import argparse
import json
import sys
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


def _context(store, study: dict, tune: dict):
    """A tuning study's harness settings, full knob space, spec, objective, tuned space and tuning trials."""
    from ..knobs.space import TuningSpace
    from ..objective import Objective
    from ..systems import TrialSettings
    from ..tuning.loop import TuneSpec
    from .options import trial_target

    settings = TrialSettings(**tune["harness"])
    full_space = trial_target(settings).knob_space(settings)
    spec = TuneSpec(**tune["spec"])
    objective = Objective.from_dict(spec.objective)
    space = TuningSpace(full_space.subset(tune["knobs"]), tune["fixed"])
    rows = [r for r in store.trials(study["id"]) if r["tag"] == "tune"]
    return settings, full_space, spec, objective, space, rows


CONFIRM_TOP = 3       # configurations re-measured by `best --confirm` ...
CONFIRM_ROUNDS = 3    # ... in this many interleaved cold rounds with the default


def confirm_best(store, study: dict, tune: dict, *, top: int = CONFIRM_TOP, rounds: int = CONFIRM_ROUNDS,
                 say=lambda _: None) -> dict[str, Any] | None:
    """Re-measure the `top` configurations of a study by single runs, with the default, in `rounds` interleaved
    cold rounds per workload (stored, resumable: tag compare, group confirm-after-N:WORKLOAD); the confirmed best is the
    one with the best mean over those rounds (its single run, chosen as the best of many, is left out: it is
    the lucky draw). Returns the result, also kept in the study's settings under "confirm"; None when the
    study has no completed configuration but the default."""
    from ..evaluation.compare import run_interleaved
    from ..evaluation.stats import compare, mean_interval
    from ..tuning.results import configurations, default_entry
    from ..workloads.spec import Workload
    from .options import trial_target

    settings, full_space, spec, objective, space, rows = _context(store, study, tune)
    sign = 1 if objective.maximize else -1
    ranked = sorted((e for e in configurations(rows, objective, spec.workloads, space)
                     if e["value"] is not None and e["feasible"] and not e["partial"] and e["kind"] != "default"),
                    key=lambda e: -sign * e["value"])[:top]
    if not ranked:
        return None
    candidates = {"default": dict(tune["fixed"]),
                  **{f"top{i}": {**tune["fixed"], **e["config"]} for i, e in enumerate(ranked, 1)}}
    target = trial_target(settings, tune.get("system", "cassandra"), seed=spec.seed,
                          metrics=(objective.metric,) + tuple(c.metric for c in objective.constraints))
    env_id = store.environment(target.fingerprint(settings))
    # one confirmation per state of the study: after more tuning trials the top configurations may change, and
    # the stored rounds of "top1" then belong to another configuration
    completed = len([r for r in rows if r["failure_kind"] != "interrupted"])
    group = f"confirm-after-{completed}"
    summaries: dict[str, list[list]] = {label: [[] for _ in range(rounds)] for label in candidates}
    for w in tune["workloads"]:
        workload = Workload.from_dict(w)
        say(f"confirming on {workload.name}: {rounds} interleaved cold rounds of {', '.join(candidates)}")
        runs = run_interleaved(store, study["id"], candidates, rounds,
                               lambda overrides: target.run_trial(full_space, overrides, workload, settings,
                                                                  progress=say),
                               workload_info={**workload.to_dict(), "harness": settings.to_dict()},
                               environment_id=env_id, say=say, group=f"{group}:{workload.name}")
        for label, by_round in runs.items():
            for r, row in enumerate(by_round):
                summaries[label][r].append(row["metrics"]["summary"] if row else None)
    default = default_entry(rows, objective, spec.workloads, space)
    single = {"default": default["value"] if default else None,
              **{f"top{i}": e["value"] for i, e in enumerate(ranked, 1)}}
    out: dict[str, Any] = {}
    for label, per_round in summaries.items():
        evaluated = [objective.evaluate(s) for s in per_round]
        values = [e.value if e.value is not None and e.feasible else None for e in evaluated]
        got = [v for v in values if v is not None]
        interval = mean_interval(got)
        out[label] = {"config": candidates[label], "single_run": single[label], "values": values,
                      "mean": sum(got) / len(got) if got else None, "interval": list(interval) if interval else None,
                      "feasible_rounds": len(got)}
    # a confirmed best must have held the constraints in every round; the default stays the best when no
    # configuration beat its mean
    eligible = [label for label in out if out[label]["feasible_rounds"] == rounds]
    best = max(eligible, key=lambda label: sign * out[label]["mean"]) if eligible else None
    result = {"top": top, "rounds": rounds, "trials": rounds * len(candidates) * len(tune["workloads"]),
              "after_tune_trials": completed, "metric": objective.metric, "unit": objective.unit,
              "candidates": out, "best": best,
              "vs_default": compare(best, out[best]["values"], out["default"]["values"],
                                    maximize=objective.maximize).to_dict() if best and best != "default" else None}
    store.update_study_settings(study["id"], {"confirm": result})
    return result


def confirm_plan(budget: int, workloads: int, top: int, rounds: int) -> dict[str, Any]:
    """How a study's budget is split between the search and the confirmation at its end: the confirmation takes
    (top + 1) x rounds trials per workload (the default runs beside the top configurations in every round) and
    runs only when the budget is at least twice that; else the whole budget is the search's."""
    cost = (top + 1) * rounds * workloads if top > 0 else 0
    if cost and budget >= 2 * cost:
        return {"top": top, "rounds": rounds, "trials": cost, "search_budget": budget - cost, "skipped": None}
    skipped = None if not top else (f"the budget of {budget} trials is under twice the {cost} trials a "
                                    "confirmation takes")
    return {"top": 0, "rounds": rounds, "trials": 0, "search_budget": budget, "skipped": skipped}


def apply_confirmation(result: dict[str, Any], confirmation: dict[str, Any] | None, space, spec) -> None:
    """Make a study summary's best the confirmed one (its mean and interval over the confirmation's rounds)."""
    from ..objective import Objective
    from ..tuning.results import changed_knobs, confirmed_best, speedup

    result["confirm"] = confirmation
    best = confirmed_best(result.get("best"), {"confirm": confirmation}, space)
    if not (best and best.get("confirmed")):
        return
    result["best"] = best
    result["speedup"] = speedup(Objective.from_dict(spec.objective), best["value"],
                                confirmation["candidates"]["default"]["mean"])
    result["changed"] = {k: list(v) for k, v in changed_knobs(space, best["config"]).items()}


def format_confirmation(result: dict[str, Any]) -> str:
    unit = result["unit"]

    def value(v):
        return "-" if v is None else (f"{v:,.0f}" if unit == "ops/s" else f"{v:.3g}")

    lines = [f"confirmation: the top {result['top']} configurations by single runs and the default, "
             f"{result['rounds']} interleaved cold rounds ({result['trials']} trials)"]
    for label, c in result["candidates"].items():
        interval = (f" [{value(c['interval'][0])}, {value(c['interval'][1])}]" if c["interval"] else "")
        lines.append(f"  {label:<8} mean {value(c['mean'])} {unit}{interval} over {c['feasible_rounds']} rounds; "
                     f"single run {value(c['single_run'])}" + ("  <- confirmed best" if label == result["best"] else ""))
    s = result["vs_default"]
    if s and s["mean_speedup"] is not None:
        interval = f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s["ci_low"] is not None else "-"
        p = f"{s['p_value']:.3g}" if s["p_value"] is not None else "-"
        lines.append(f"  {result['best']} vs default: x{s['mean_speedup']:.3f}, 95% interval {interval}, Wilcoxon "
                     f"p = {p} over {s['pairs']} pairs: {s['verdict']}"
                     + (f" ({s['pairs']} pairs cannot reach p < 0.05: `compare --repeat 10` tests it)"
                        if s["pairs"] < 6 else ""))
    elif result["best"] is None:
        lines.append("  no configuration held the study's constraints in every round")
    return "\n".join(lines)


def parse_candidates(text: str, space, best: dict[str, Any] | None,
                     best_practice: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """'best,default,best-practice,design-default,my.yaml' -> label -> knob overrides; the default always comes
    first. design-default: Cassandra's default knobs on the best configuration's physical design (its nodes
    and replication factor), which splits a searched design's gain into the design's and the knobs'."""
    from pathlib import Path

    from ..knobs import load_config, named_configs

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
        elif (is_file := Path(item).exists()) or item in named_configs(space.system):
            # a configuration to measure, not to search (a YAML file, e.g. another study's best found in a wider
            # range such as v5's concurrent_writes [2, 128], or a named one such as latest: cassandra_latest.yaml):
            # only values the datastore refuses are refused
            label = Path(item).stem if is_file else item
            out[label] = space.validate(load_config(item, space.system), allow_outside_range=True)
        else:
            named = "".join(f", {n}" for n in named_configs(space.system))
            raise UsageError(f"unknown candidate {item!r}: use best, default, best-practice, design-default{named} "
                             "or a YAML file of knob values")
    if len(out) < 2:
        raise UsageError("--candidates names nothing to compare with the default: add best, best-practice or a YAML "
                         "file of knob values")
    return out


def cmd_compare(args: argparse.Namespace) -> int:
    from .options import trial_target
    from ..objective import check_metric, metric_unit, metric_value
    from ..tuning.results import best_configuration, confirmed_best
    from ..workloads.spec import Workload
    from ..runtime.paths import cache_dir
    from ..knobs.best_practice import best_practice, machine_facts
    from ..bottleneck import most_common, of_trial
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
        settings, full_space, spec, objective, space, rows = _context(store, study, tune)
        # the confirmed best when the study has one (`best --confirm`, or the end of `tune`)
        best = confirmed_best(best_configuration(rows, objective, spec.workloads, space), study["settings"], space)
        best_source = None if not best else ("the best single run" if not best.get("confirmed") else
                                             f"the confirmed best ({best['label']} of the confirmation)")
        system = tune.get("system", "cassandra")
        facts = machine_facts(heap_mb=settings.heap_mb, data_path=cache_dir(), server_cpus=settings.server_cpus)
        practice, rules = best_practice(full_space, facts)
        target = trial_target(settings, system, seed=spec.seed, metrics=(objective.metric,))
        own = target.knob_space(settings)     # a recorded dataset answers for its own knobs only
        practice = {k: v for k, v in practice.items() if k in own}
        rules = {k: v for k, v in rules.items() if k in practice}
        candidates = parse_candidates(args.candidates, full_space, best["config"] if best else None, practice)
        candidates = {k: {**tune["fixed"], **v} for k, v in candidates.items()}

        def run(overrides, workload):
            return target.run_trial(full_space, overrides, workload, settings, progress=say)
        say = _say(args)
        # each set of candidates has its own rounds (the default is re-run beside them, so every pair ran
        # side by side) and its own stored result; plain best-vs-default keeps the bare scale as its key
        others = [k for k in candidates if k != "default"]
        suffix = "" if others == ["best"] else ":" + "+".join(others)
        result: dict[str, Any] = {"study": args.study, "study_name": study["name"], "system": system,
                                  "metric": objective.metric, "best_is": best_source,
                                  "scale": args.scale, "candidates": candidates, "workloads": {}}
        if "best-practice" in candidates:
            result["best_practice"] = {"machine": facts, "rules": rules}
        workloads = [Workload.from_dict(w if args.scale == 1 else
                                        {**w, "records": int(w["records"] * args.scale),
                                         "operations": int(w["operations"] * args.scale)})
                     for w in tune["workloads"]]
        for workload in workloads:   # e.g. the memory guard of Redis at --scale 10
            target.preflight(workload, settings)
        # compare runs trials in the study: not beside a tune (the lease is taken once the input is known to be
        # good, so bad input leaves the store as it was)
        lease = store.acquire_lease(study["id"])
        env_id = store.environment(target.fingerprint(settings))
        failed, ran = 0, 0
        for workload in workloads:
            group = f"{workload.name}-x{args.scale:g}{suffix}"
            say(f"{workload.name} at x{args.scale:g}: {args.repeat} interleaved rounds of {', '.join(candidates)}")
            runs = run_interleaved(store, study["id"], candidates, args.repeat,
                                   lambda overrides: run(overrides, workload),
                                   workload_info={**workload.to_dict(), "harness": settings.to_dict()},
                                   environment_id=env_id, say=say, group=group)
            ran += sum(len(v) for v in runs.values())
            failed += sum(r is None for v in runs.values() for r in v)
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
            main["bottlenecks"] = {k: most_common([v for v in (of_trial(r, settings.to_dict()) for r in rows if r)
                                                   if v is not None]) for k, rows in runs.items()}
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
    if failed:   # as bench and tune: a failed trial is exit 1, the comparison of the runs that did complete printed
        print(f"nosqltune: {failed} of {ran} comparison runs failed (stored with their reasons: `nosqltune export`)",
              file=sys.stderr)
        return 1
    return 0


def _say(args):
    from .options import _progress

    return _progress(args)


def format_comparison(result: dict[str, Any], unit: str) -> str:
    lines = [f"{result['metric']} ({unit}), study {result['study_name']}, scale x{result['scale']:g}: "
             "speedup = candidate / default of the same round (> 1 is better)"
             + (f"; best = {result['best_is']}" if result.get("best_is") and "best" in result["candidates"] else "")]
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
    for label, said in (w.get("bottlenecks") or {}).items():
        if said:
            lines.append(f"  {label} {said['line']} ({said['of']} of {said['trials']} runs)")
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
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store: SQLite path or postgresql:// URL (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="tuning study within the store (default tune)")
    p.add_argument("--candidates", default="best", metavar="LIST",
                   help="comma-separated: best (the study's best), default, best-practice (Cassandra's documented "
                        "rules of thumb for this machine: concurrent_writes = 8 x cores, concurrent_reads = 16 x "
                        "drives, ...; see `nosqltune knobs`), design-default (the default knobs on the best "
                        "configuration's design, for a study of tune --design), latest (Cassandra 5.0's "
                        "cassandra_latest.yaml settings), or YAML files of knob values (default "
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
