"""The confirmation at the end of a study (`tune`, `best --confirm`): its top configurations by single runs
re-measured beside the default in interleaved cold rounds, the one with the best mean made the study's best."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .study import TuningStudy

CONFIRM_TOP = 3       # configurations re-measured by `best --confirm` ...
CONFIRM_ROUNDS = 3    # ... in this many interleaved cold rounds with the default


@dataclass(frozen=True)
class ConfirmSettings:
    top: int = CONFIRM_TOP       # configurations re-measured
    rounds: int = CONFIRM_ROUNDS  # interleaved cold rounds, the default in each
    jit: str | None = None       # both JVMs' JIT for the rounds (c1, tiered); None: the study's own
    warmup_seconds: int | None = None   # a warm-up by time instead of the study's (tiered: TIERED_PLATEAU)

    def __post_init__(self) -> None:
        from .compare import check_warmup_seconds

        if self.top < 1 or self.rounds < 2:
            raise UsageError("--top must be at least 1 and --rounds at least 2")
        if self.jit not in (None, "c1", "tiered"):
            raise UsageError(f"--jit takes c1 or tiered, got {self.jit!r}")
        check_warmup_seconds(self.warmup_seconds)


def production_jit(study: TuningStudy) -> str | None:
    """The JIT a confirmation runs at unless told: tiered (production's) for a study of real Cassandra trials,
    which run C1-only to be short and repeatable; the study's own for anything else (a recorded surrogate has no
    JIT). bench/results/fidelity.md: on cloud-disk the tiered JIT's larger footprint beside the heap left the page
    cache less of the data, and the committed best's gain over the default fell by more than 15%."""
    return "tiered" if study.system == "cassandra" and study.settings.jit == "c1" else None


def confirm_best(study: TuningStudy, confirm: ConfirmSettings = ConfirmSettings(),
                 say=lambda _: None) -> dict[str, Any] | None:
    """Re-measure the `top` configurations of a study by single runs, with the default, in `rounds` interleaved
    cold rounds per workload (stored, resumable: tag compare, group confirm-after-N:WORKLOAD); the confirmed best is the
    one with the best mean over those rounds (its single run, chosen as the best of many, is left out: it is
    the lucky draw). Returns the result, also kept in the study's settings under "confirm"; None when the
    study has no completed configuration but the default."""
    from ..tuning.results import configurations, default_entry
    from ..workloads.spec import Workload
    from .compare import run_interleaved, unsettled, warmed_up
    from .stats import compare, mean_interval

    store, tune, top, rounds = study.store, study.tune, confirm.top, confirm.rounds
    settings, full_space, spec, objective, space = (study.settings, study.full_space, study.spec, study.objective,
                                                    study.space)
    jit = confirm.jit if confirm.jit and confirm.jit != settings.jit else None   # fidelity: another JIT than tuned
    if jit:
        from dataclasses import replace as with_field

        settings = with_field(settings, jit=jit)
    rows = study.trials()
    sign = 1 if objective.maximize else -1
    ranked = sorted((e for e in configurations(rows, objective, spec.workloads, space)
                     if e["value"] is not None and e["feasible"] and not e["partial"] and e["kind"] != "default"
                     and not e["unstable"]),
                    key=lambda e: -sign * e["value"])[:top]
    if not ranked:
        return None
    candidates = {"default": dict(tune["fixed"]),
                  **{f"top{i}": {**tune["fixed"], **e["config"]} for i, e in enumerate(ranked, 1)}}
    target = study.target()
    env_id = store.environment(target.fingerprint(settings))
    # one confirmation per state of the study: after more tuning trials the top configurations may change, and
    # the stored rounds of "top1" then belong to another configuration
    completed = len([r for r in rows if r["failure_kind"] != "interrupted"])
    group = f"confirm-after-{completed}" + warmed_up({}, jit, confirm.warmup_seconds)[1]
    before = study.record["settings"].get("confirm") or {}
    if before.get("after_tune_trials") == completed and before.get("group", group) != group:
        say(f"the stored confirmation ran as {before['group']} (another JIT or warm-up than now): its rounds are "
            f"not reused, confirming anew as {group}")
    summaries: dict[str, list[list]] = {label: [[] for _ in range(rounds)] for label in candidates}
    trials: dict[str, list[list]] = {label: [[] for _ in range(rounds)] for label in candidates}
    settling: dict[str, int] = {}    # per candidate: its warm-ups that ended at their cap without a plateau
    for w in tune["workloads"]:
        workload = Workload.from_dict(warmed_up(w, jit, confirm.warmup_seconds)[0])
        say(f"confirming on {workload.name}: {rounds} interleaved cold rounds of {', '.join(candidates)}")
        runs = run_interleaved(store, study.id, candidates, rounds,
                               lambda overrides: target.run_trial(full_space, overrides, workload, settings,
                                                                  progress=say),
                               workload_info={**workload.to_dict(), "harness": settings.to_dict()},
                               environment_id=env_id, say=say, group=f"{group}:{workload.name}")
        for label, by_round in runs.items():
            count = unsettled(by_round, workload.warmup_steady_window)
            if count is not None:
                settling[label] = settling.get(label, 0) + count
            for r, row in enumerate(by_round):
                summaries[label][r].append(row["metrics"]["summary"] if row else None)
                trials[label][r].append(row)
    default = default_entry(rows, objective, spec.workloads, space)
    single = {"default": default["value"] if default else None,
              **{f"top{i}": e["value"] for i, e in enumerate(ranked, 1)}}
    values = {}
    for label, per_round in summaries.items():
        evaluated = [objective.evaluate(s, summaries["default"][r]) for r, s in enumerate(per_round)]
        values[label] = [e.value if e.value is not None and e.feasible else None for e in evaluated]
    denoised = None
    if spec.denoise:   # the rounds are repeats: corrected by the probe, and candidates that disagree with themselves
        from ..tuning.denoise import denoise_rounds

        denoised = denoise_rounds(objective.metric, values,
                                  {label: [[t for t in ts if t] for ts in per_round] for label, per_round in
                                   trials.items()})
        values = denoised["values"]
    out: dict[str, Any] = {}
    for label, got_values in values.items():
        got = [v for v in got_values if v is not None]
        interval = mean_interval(got)
        out[label] = {"config": candidates[label], "single_run": single[label], "values": got_values,
                      "mean": sum(got) / len(got) if got else None, "interval": list(interval) if interval else None,
                      "feasible_rounds": len(got)}
        if denoised and label in denoised["unstable"]:
            out[label]["unstable"] = denoised["unstable"][label]
    # a confirmed best must have held the constraints in every round and agreed with itself (--denoise); the
    # default stays the best when no configuration beat its mean
    eligible = [label for label in out if out[label]["feasible_rounds"] == rounds
                and (label == "default" or "unstable" not in out[label])]
    best = max(eligible, key=lambda label: sign * out[label]["mean"]) if eligible else None
    result = {"top": top, "rounds": rounds, "trials": rounds * len(candidates) * len(tune["workloads"]),
              "after_tune_trials": completed, "jit": settings.jit, "group": group,   # the group names the warm-up
              "metric": objective.metric, "unit": objective.unit,
              "candidates": out, "best": best,
              **({"denoise": {k: denoised[k] for k in ("elasticity", "described")}} if denoised else {}),
              **({"unsettled": settling} if any(settling.values()) else {}),
              "vs_default": compare(best, out[best]["values"], out["default"]["values"],
                                    maximize=objective.maximize).to_dict() if best and best != "default" else None}
    store.update_study_settings(study.id, {"confirm": result})
    return result


def asked_confirmation(stored: dict[str, Any] | None, top: int | None = None,
                       rounds: int | None = None) -> dict[str, int]:
    """The confirmation a study asks for: a resumed study's stored tuning settings keep what it asked (one begun
    before confirmations existed asked none: its whole budget stays the search's), a new study (None) the
    defaults; `top` and `rounds`, when given, override either."""
    asked = (stored.get("confirm") or {"top": 0, "rounds": CONFIRM_ROUNDS}) if stored \
        else {"top": CONFIRM_TOP, "rounds": CONFIRM_ROUNDS}
    return {"top": asked["top"] if top is None else top, "rounds": asked["rounds"] if rounds is None else rounds}


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
