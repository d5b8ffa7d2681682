"""Interleaved, repeated cold runs of several configurations, stored and resumable.

Round r runs every candidate once; the order alternates between rounds (A B C, C B A, A B C, ...) so no
candidate always runs first or last and slow drift of the machine is spread over all of them. A finished
(round, candidate) in the store is not run again, so an interrupted comparison continues where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import UsageError
from ..store import TrialState

TAG = "compare"


def schedule(labels: list[str], rounds: int) -> list[tuple[int, str]]:
    """(round, label) in run order: ABC CBA ABC ..."""
    order = []
    for r in range(rounds):
        seq = labels if r % 2 == 0 else list(reversed(labels))
        order.extend((r, label) for label in seq)
    return order


def run_summary(summary: dict[str, Any]) -> str:
    """One run in a progress line: its throughput and, where it read, its read p99 (a latency study's objective)."""
    line = f"{summary.get('throughput_ops_s', 0):,.0f} ops/s"
    return line + (f", read p99 {summary['read_p99_ms']:.2f} ms" if summary.get("read_p99_ms") is not None else "")


def unsettled(rows: list[dict | None], steady_window: int) -> int | None:
    """How many of the runs warmed up to a plateau (`steady_window` > 0) ended their warm-up at its time cap
    without one; None where the warm-up had no plateau rule. On a workload that writes, such a run did more work
    before its measured phase than its neighbours (more data, more compaction behind it), so its pair compares two
    states of the node as well as two configurations."""
    if not steady_window:
        return None
    return sum(1 for r in rows if r and ((r.get("metrics") or {}).get("warmup") or {}).get("steady") is False)


def run_interleaved(store, study_id: int, candidates: dict[str, dict[str, Any]], rounds: int,
                    runner: Callable[[dict[str, Any]], Any], *, workload_info: dict, environment_id: int | None = None,
                    say: Callable[[str], None] = lambda _: None, group: str | None = None) -> dict[str, list[dict | None]]:
    """Run what is missing; returns label -> rows by round (None where the run failed or is missing).
    `group` tells comparisons in the same study apart (e.g. one per workload and scale)."""
    done: dict[tuple[int, str], dict] = {}
    for row in store.trials(study_id):
        meta = row.get("meta") or {}
        if row["tag"] != TAG or meta.get("candidate") not in candidates or meta.get("group") != group:
            continue
        if row["state"] == TrialState.RUNNING.value:
            store.finish_trial(row["id"], TrialState.FAIL, failure_kind="interrupted",
                               error="the process stopped during this trial")
            continue
        if row["failure_kind"] != "interrupted":
            done[(meta["round"], meta["candidate"])] = row
    plan = schedule(list(candidates), rounds)
    for i, (r, label) in enumerate(plan):
        if (r, label) in done:
            continue
        trial_id = store.start_trial(study_id, candidates[label], workload_info, tag=TAG,
                                     environment_id=environment_id,
                                     meta={"round": r, "candidate": label, **({"group": group} if group else {})})
        say(f"[{i + 1}/{len(plan)}] round {r + 1}/{rounds}: {label}")
        row = store.record(trial_id, lambda: runner(candidates[label]))
        done[(r, label)] = row
        if row["state"] == TrialState.COMPLETE.value:
            say(f"    -> {run_summary(row['metrics']['summary'])}")
        else:
            say(f"    -> FAILED ({row['failure_kind']}): {row['error']}")
    out: dict[str, list[dict | None]] = {}
    for label in candidates:
        out[label] = [done.get((r, label)) if done.get((r, label)) is not None
                      and done[(r, label)]["state"] == TrialState.COMPLETE.value else None for r in range(rounds)]
    return out


# --- the warm-up of a fidelity check ----------------------------------------------------------------------------

# Tiered rounds warm up until the JIT's plateau: at least 120 s, then until two 20 s windows of throughput have means
# within 5% of each other (and the last window's samples within a CV of 15%), at most 300 s. A fixed 60 s was not
# enough: tiered throughput after a cold boot still climbs at 50 s on 2 cores (warmup_curve.md), and fidelity.md's
# first tiered runs, warmed 60 s, still rose 12-50% from the first third of their measured phase to the last. Nor was
# a floor of 60 s: C2's climb has flat stretches, and on disk-bound the windows agreed at 64 s with the default at
# half its plateau (warmup_curve-disk-bound.md: its climb ends near 120 s on a slow day; the rule with this floor
# ends at 96-106% of the plateau there). The floor is in the stored group's name ("-plateau120s"), so rounds of the
# earlier floor ("-plateau") are never taken for these. At a fixed rate (a workload's target) the throughput cannot
# show the climb, and the floor is what is left.
TIERED_PLATEAU = {"warmup_min_seconds": 120, "warmup_steady_window": 20, "warmup_steady_cv": 0.15,
                  "warmup_steady_drift": 0.05, "warmup_max_seconds": 300}
MAX_WARMUP_S = 600


def check_warmup_seconds(seconds: int | None) -> None:
    if seconds is not None and not 0 < seconds <= MAX_WARMUP_S:
        raise UsageError(f"--warmup-seconds takes 1 to {MAX_WARMUP_S} seconds, got {seconds}")


def warmed_up(workload: dict[str, Any], jit: str | None, warmup_seconds: int | None) -> tuple[dict[str, Any], str]:
    """The workload of rounds at another JIT than the study's, or with a warm-up by time: (the workload, the suffix
    of its stored group). A warm-up by time (`warmup_seconds`) ends by time alone (its operation count is not the
    limit); rounds switched to tiered otherwise warm up until the JIT's plateau (TIERED_PLATEAU), their
    operation count a floor, so that they measure the plateau rather than a point on its slope."""
    # the warm-up in the stored group's name, so that rounds warmed another way are never taken for these (the
    # tiered rounds of before the plateau rule, warmed 60 s by time, kept the bare "-tiered"; the plateau rule's
    # floor is named, "-plateau" alone being its first floor of 60 s)
    plateau = f"-plateau{TIERED_PLATEAU['warmup_min_seconds']}s"
    suffix = (f"-{jit}" if jit else "") + (f"-warm{warmup_seconds}s" if warmup_seconds else
                                           plateau if jit == "tiered" else "")
    if warmup_seconds:
        return {**workload, "warmup_operations": 10**9, "warmup_max_seconds": warmup_seconds,
                "warmup_steady_window": 0}, suffix
    if jit == "tiered":
        return {**workload, **TIERED_PLATEAU}, suffix
    return workload, suffix


# --- a study's candidates against its default (`nosqltune compare`) --------------------------------------------


@dataclass(frozen=True)
class CompareSettings:
    candidates: str = "best"          # comma-separated: best, default, best-practice, design-default, latest, files
    rounds: int = 10                  # interleaved cold rounds
    scale: float = 1.0                # records and operations multiplied by this (validation at a larger load)
    metrics: tuple[str, ...] = ("throughput", "cpu-per-op")   # tested beside the objective, from the same runs
    data: float = 1.0                 # records alone multiplied by this, operations held (one size of a growth test)
    jit: str | None = None            # both JVMs' JIT for these rounds (c1, tiered); None: the study's own
    warmup_seconds: int | None = None  # a warm-up by time instead of the study's (tiered: TIERED_PLATEAU)
    operations: int | None = None     # the measured operations of every run instead of the study's (records held)

    def __post_init__(self) -> None:
        from ..objective import check_metric

        if self.rounds < 2:
            raise UsageError("--repeat must be at least 2 (a comparison needs repeated pairs)")
        if self.scale <= 0:
            raise UsageError("--scale must be positive")
        if self.data <= 0:
            raise UsageError("a data growth multiple must be positive")
        if self.jit not in (None, "c1", "tiered"):
            raise UsageError(f"--jit takes c1 or tiered, got {self.jit!r}")
        check_warmup_seconds(self.warmup_seconds)
        if self.operations is not None and self.operations <= 0:
            raise UsageError(f"--operations must be a positive integer, got {self.operations}")
        if self.operations is not None and self.scale != 1:
            raise UsageError("--scale multiplies the operations with the records; --operations sets them: give one of "
                             "them")
        if self.data != 1 and self.scale != 1:
            raise UsageError("--data-growth multiplies the records at equal work; --scale multiplies records and "
                             "operations: give one of them")
        for metric in self.metrics:
            check_metric(metric, "--metrics entry")


def parse_candidates(text: str, space, best: dict[str, Any] | None,
                     best_practice: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """'best,default,best-practice,design-default,my.yaml' -> label -> knob overrides; the default always comes
    first. design-default: Cassandra's default knobs on the best configuration's physical design (its nodes
    and replication factor), which splits a searched design's gain into the design's and the knobs'."""
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


def _rig(study, settings: CompareSettings) -> tuple[Any, str | None, list]:
    """The harness of a comparison's rounds (the study's, at another JIT when `settings.jit` differs from it), that
    JIT when it differs (else None), and the study's workloads at the comparison's scale, data size and warm-up."""
    from dataclasses import replace

    from ..workloads.spec import Workload

    harness = study.settings
    jit = settings.jit if settings.jit and settings.jit != harness.jit else None   # fidelity: another JIT than tuned
    if jit:
        harness = replace(harness, jit=jit)

    def sized(w: dict[str, Any]) -> dict[str, Any]:
        if settings.scale != 1 or settings.data != 1:
            w = {**w, "records": int(w["records"] * settings.scale * settings.data),
                 "operations": int(w["operations"] * settings.scale)}
        return {**w, "operations": settings.operations} if settings.operations else w

    workloads = [Workload.from_dict(warmed_up(sized(w), jit, settings.warmup_seconds)[0])
                 for w in study.tune["workloads"]]
    return harness, jit, workloads


def compare_study(study, settings: CompareSettings, say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run the candidates of `settings` and the default in interleaved cold rounds on the study's workloads and
    harness (stored in the study as tag compare, resumable), test each against the default on the study's
    objective and the side metrics, and keep the result in the study's settings under "compare". The result
    counts its runs (`runs`) and the failed ones (`failed_runs`): a failed run leaves its round's pair out."""
    from ..bottleneck import most_common, of_trial
    from ..knobs.best_practice import best_practice, machine_facts
    from ..objective import metric_unit, metric_value
    from ..runtime.paths import cache_dir
    from ..tuning.results import best_configuration, confirmed_best
    from .machines import check_machines
    from .stats import compare

    store, tune, objective, full_space = study.store, study.tune, study.objective, study.full_space
    rows = study.trials()
    # the confirmed best when the study has one (`best --confirm`, or the end of `tune`)
    best = confirmed_best(best_configuration(rows, objective, study.spec.workloads, study.space),
                          study.record["settings"], study.space)
    best_source = None if not best else ("the best single run" if not best.get("confirmed") else
                                         f"the confirmed best ({best['label']} of the confirmation)")
    harness, jit, workloads = _rig(study, settings)
    heap_mb = harness.cassandra.heap_mb if harness.system == "cassandra" else None   # only Cassandra's rules use it
    facts = machine_facts(heap_mb=heap_mb, data_path=cache_dir(), server_cpus=harness.server_cpus)
    practice, rules = best_practice(full_space, facts)
    target = study.target((objective.metric,))
    own = target.knob_space(harness)     # a recorded dataset answers for its own knobs only
    practice = {k: v for k, v in practice.items() if k in own}
    rules = {k: v for k, v in rules.items() if k in practice}
    candidates = parse_candidates(settings.candidates, full_space, best["config"] if best else None, practice)
    candidates = {k: {**tune["fixed"], **v} for k, v in candidates.items()}
    # each set of candidates has its own rounds (the default is re-run beside them, so every pair ran side by
    # side) and its own stored result; plain best-vs-default keeps the bare scale as its key
    others = [k for k in candidates if k != "default"]
    suffix = "" if others == ["best"] else ":" + "+".join(others)
    _, warm = warmed_up({}, jit, settings.warmup_seconds)
    size = (f"x{settings.scale:g}" + (f"-data{settings.data:g}" if settings.data != 1 else "") + warm
            + (f"-ops{settings.operations}" if settings.operations else ""))
    result: dict[str, Any] = {"study_name": study.name, "system": study.system, "metric": objective.metric,
                              "best_is": best_source, "scale": settings.scale, "data": settings.data,
                              "jit": harness.jit, "warmup_seconds": settings.warmup_seconds,
                              "operations": settings.operations,
                              "candidates": candidates, "workloads": {}, "runs": 0, "failed_runs": 0}
    if "best-practice" in candidates:
        result["best_practice"] = {"machine": facts, "rules": rules}
    for workload in workloads:   # e.g. the memory guard of Redis at --scale 10
        target.preflight(workload, harness)
    # compare runs trials in the study: not beside a tune (the lease is taken once the input is known to be good,
    # so bad input leaves the store as it was)
    lease = store.acquire_lease(study.id)
    try:
        env_id = store.environment(target.fingerprint(harness))
        for workload in workloads:
            group = f"{workload.name}-{size}{suffix}"
            say(f"{workload.name} at {size} ({workload.records:,} records, {workload.operations:,} operations): "
                f"{settings.rounds} interleaved rounds of {', '.join(candidates)}")
            runs = run_interleaved(store, study.id, candidates, settings.rounds,
                                   lambda overrides: target.run_trial(full_space, overrides, workload, harness,
                                                                      progress=say),
                                   workload_info={**workload.to_dict(), "harness": harness.to_dict()},
                                   environment_id=env_id, say=say, group=group)
            result["runs"] += sum(len(v) for v in runs.values())
            result["failed_runs"] += sum(r is None for v in runs.values() for r in v)
            per_metric = {}
            for metric in [objective.metric, *(m for m in settings.metrics if m != objective.metric)]:
                values = {k: [metric_value(metric, r["metrics"]["summary"]) if r else None for r in v]
                          for k, v in runs.items()}
                if metric != objective.metric and not any(x is not None for v in values.values() for x in v):
                    continue   # a figure this target does not give (e.g. a recorded surrogate's CPU)
                maximize = metric == "throughput"
                per_metric[metric] = {"values": values, "stats": {
                    k: compare(k, values[k], values["default"], maximize=maximize).to_dict()
                    for k in candidates if k != "default"}}
            main = per_metric.pop(objective.metric)
            main["bottlenecks"] = {k: most_common([v for v in (of_trial(r, harness.flat()) for r in runs_of if r)
                                                   if v is not None]) for k, runs_of in runs.items()}
            settling = {k: unsettled(runs_of, workload.warmup_steady_window) for k, runs_of in runs.items()}
            if any(settling.values()):
                main["unsettled"] = settling
            # a comparison resumed on another day may pair runs of two machine speeds: said, with the figures
            machines = check_machines([r for v in runs.values() for r in v if r], environments=store.environments())
            if machines.apart:
                say(machines.line())
            result["workloads"][workload.name] = {"group": group, **main,
                                                  "also": {m: {**v, "unit": metric_unit(m)}
                                                           for m, v in per_metric.items()},
                                                  "machines": machines.to_dict()}
        earlier = (store.find_study(study.name) or study.record)["settings"].get("compare", {})
        store.update_study_settings(study.id, {"compare": {**earlier, f"{size}{suffix}": result}})
    finally:
        lease.release()
    return result


def compare_growth(study, settings: CompareSettings, growth: tuple[float, ...],
                   say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The candidates, the default and `latest` at each data multiple of `growth` (records multiplied, operations and
    everything else held), each size in its own interleaved rounds, stored as one comparison per size; returns
    {"growth": [...], "sizes": {multiple: result}}."""
    from dataclasses import replace

    if not growth or any(g <= 0 for g in growth) or len(set(growth)) != len(growth):
        raise UsageError("--data-growth takes distinct positive multiples of the data, e.g. 1,2,4")
    if settings.scale != 1:
        raise UsageError("--data-growth multiplies the records at equal work; --scale multiplies records and "
                         "operations: give one of them")
    names = [c.strip() for c in settings.candidates.split(",") if c.strip()]
    if study.system == "cassandra" and "latest" not in names:
        names.append("latest")   # Cassandra's own newer defaults, at every size beside the tuned ones
    target = study.target((study.objective.metric,))
    for multiple in growth:   # every size checked (e.g. the disk for its data) before the first size runs
        harness, _, workloads = _rig(study, replace(settings, data=multiple))
        for workload in workloads:
            target.preflight(workload, harness)
    sizes = {}
    for multiple in growth:
        sizes[multiple] = compare_study(study, replace(settings, candidates=",".join(names), data=multiple), say=say)
    return {"growth": list(growth), "sizes": sizes}


def growth_table(comparisons: dict[str, Any], min_sizes: int = 2) -> list[dict[str, Any]]:
    """From a study's stored comparisons: each data size's speedup of every candidate against the default, smallest
    size first (rows: multiple, workload, candidate, variant, mean_speedup, ci_low, ci_high, p_value, pairs). Only
    the comparisons at equal work (scale 1) are rows; one that is not a growth size counts as data x1. Rounds run
    another way than the study's own (another JIT, a warm-up by time, another count of operations: the comparison
    key's suffix, e.g. "tiered-plateau120s", "warm20s", "ops500000") are sizes of a growth of their own, `variant`
    naming it ("" for the study's own): a variant with fewer than `min_sizes` sizes has no rows (1: a growth run cut short shows its first size)."""
    rows = []
    for key, result in comparisons.items():
        if result.get("scale", 1) != 1 or not result.get("workloads"):
            continue   # another load: not a size of the study's growth
        # x1[-dataN][-JIT[-plateauNs]][-warmSs][-opsN][:candidates] -> the part after the size
        variant = "-".join(p for p in key.split(":")[0].split("-")[1:] if not p.startswith("data"))
        for workload, w in result["workloads"].items():
            for candidate, stats in (w.get("stats") or {}).items():
                rows.append({"multiple": result.get("data") or 1.0, "workload": workload, "candidate": candidate,
                             "variant": variant, "key": key,
                             **{k: stats.get(k) for k in ("mean_speedup", "ci_low", "ci_high", "p_value", "pairs",
                                                          "verdict")}})
    sized = {v: {r["multiple"] for r in rows if r["variant"] == v} for v in {r["variant"] for r in rows}}
    best: dict[tuple, dict] = {}
    for row in rows:   # per variant, size and candidate the comparison with the most pairs
        if len(sized[row["variant"]]) < min_sizes:
            continue   # no growth in these rounds: one size only
        key = (row["variant"], row["multiple"], row["workload"], row["candidate"])
        if key not in best or (row["pairs"] or 0) > (best[key]["pairs"] or 0):
            best[key] = row
    return sorted(best.values(), key=lambda r: (r["variant"], r["workload"], r["candidate"], r["multiple"]))
