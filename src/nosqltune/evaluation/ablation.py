"""Which of a best's settings carry its gain: the best re-measured with each changed setting reverted to the default,
one at a time, in interleaved cold rounds beside the best and the default (`best --ablation`, `compare --ablation`).

The design, stated:
- **Leave one out, from the best.** Each variant is the best with exactly one changed setting put back at its
  default; a setting whose condition then fails (file_cache_size once file_cache_enabled is back off) becomes inert
  with it, and the variant says so. Reverting one at a time from the best asks what an operator asks: "can I leave
  this one out?". Adding settings one at a time to the default would ask another question and depend on an order.
- **A setting's share of the gain**, per round: log(best / variant) / log(best / default), the part of the gain
  (on a log scale, so that shares of a x3 gain compare with shares of a x1.1 one) that is lost without it. Its mean
  over the rounds and a 95% bootstrap interval. The default, the best and every variant run in every round, in
  alternating order (compare.py's schedule), so each round's ratios share that round's machine.
- **Optional**: a setting whose variant is not significantly worse than the best (Wilcoxon on the paired rounds,
  p >= 0.05) and whose share's interval holds 0: reverting it costs nothing measurable.
- **Interactions.** Shares need not add up to 1. Over 1: settings that pay only together (each one's absence costs
  more than its part); under 1: settings that stand in for each other (either alone keeps most of the gain), or a gain
  that no single setting carries. The sum is reported with that reading. Pairs are not measured: n settings cost n
  variants a round, pairs n(n-1)/2.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import UsageError

TAG_GROUP = "ablation"


@dataclass(frozen=True)
class AblationSettings:
    rounds: int = 6            # 6 is the fewest pairs at which Wilcoxon can reach p < 0.05

    def __post_init__(self) -> None:
        if self.rounds < 2:
            raise UsageError("an ablation needs at least 2 rounds (6 for a test that can reach p < 0.05)")


def variants(space, best: dict[str, Any]) -> dict[str, tuple[dict[str, Any], list[str]]]:
    """knob -> (the best with that knob at its default, the other knobs that become inert without it)."""
    out = {}
    full_best = space.with_defaults(best, allow_outside_range=True)
    for name in best:
        knob = space[name]
        if knob.coerce(best[name], allow_outside_range=True) == knob.default:
            continue
        reverted = {k: v for k, v in best.items() if k != name}
        full = space.with_defaults(reverted, allow_outside_range=True)
        inert = [k for k in reverted if space[k].is_active(full_best) and not space[k].is_active(full)]
        out[name] = (reverted, inert)
    return out


def shares(best: list[float | None], default: list[float | None], variant: list[float | None],
           maximize: bool) -> list[float]:
    """Per round: the share of the best's gain lost without the setting (rounds where any of the three failed, or
    the best did not beat the default, left out)."""
    out = []
    for b, d, v in zip(best, default, variant):
        if not (b and d and v) or min(b, d, v) <= 0:
            continue
        gain = math.log(b / d) if maximize else math.log(d / b)
        if gain <= 0:
            continue
        lost = math.log(b / v) if maximize else math.log(v / b)
        out.append(lost / gain)
    return out


def ablate(study, settings: AblationSettings, say: Callable[[str], None] = lambda _: None,
           best: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run the ablation of the study's best (its confirmed best when it has one), stored in the study (tag compare,
    group ablation: resumable), and its result under the study's settings "ablation"."""
    from ..objective import metric_value
    from ..tuning.results import best_configuration, confirmed_best
    from .compare import run_interleaved
    from .stats import bootstrap_interval, compare

    store, objective, space = study.store, study.objective, study.full_space
    if best is None:
        found = confirmed_best(best_configuration(study.trials(), objective, study.spec.workloads, study.space),
                               study.record["settings"], study.space)
        if not found:
            raise UsageError(f"study '{study.name}' has no completed trial within its constraints yet")
        best = found["config"]
    fixed = study.tune.get("fixed") or {}
    searched = {k: v for k, v in best.items() if k not in fixed}
    reverted = variants(space, searched)
    if not reverted:
        raise UsageError(f"the best of study '{study.name}' is the default configuration: nothing to ablate")
    candidates = {"default": dict(fixed), "best": {**fixed, **searched}}
    for name, (config, _) in reverted.items():
        candidates[f"without {name}"] = {**fixed, **config}
    maximize = objective.metric == "throughput"
    harness = study.settings
    target = study.target((objective.metric,))
    result: dict[str, Any] = {"metric": objective.metric, "rounds": settings.rounds, "best": searched,
                              "settings": {}, "workloads": []}
    lease = store.acquire_lease(study.id)
    try:
        env_id = store.environment(target.fingerprint(harness))
        from ..workloads.spec import Workload

        for stored in study.tune["workloads"]:
            workload = Workload.from_dict(stored)
            say(f"ablation on {workload.name}: {settings.rounds} interleaved rounds of the default, the best and "
                f"{len(reverted)} variant(s), each with one setting back at its default")
            runs = run_interleaved(store, study.id, candidates, settings.rounds,
                                   lambda overrides: target.run_trial(space, overrides, workload, harness, progress=say),
                                   workload_info={**workload.to_dict(), "harness": harness.to_dict()},
                                   environment_id=env_id, say=say, group=f"{TAG_GROUP}:{workload.name}")
            values = {k: [metric_value(objective.metric, r["metrics"]["summary"]) if r else None for r in v]
                      for k, v in runs.items()}
            result["workloads"].append(workload.name)
            gain = compare("best", values["best"], values["default"], maximize=maximize).to_dict()
            result.setdefault("gain", {})[workload.name] = gain
            gained = gain["verdict"] == "better"   # no share of a gain the rounds do not show
            for name, (_, inert) in reverted.items():
                variant = values[f"without {name}"]
                per_round = shares(values["best"], values["default"], variant, maximize) if gained else []
                low, high = bootstrap_interval(per_round) if per_round else (None, None)
                versus = compare(f"without {name}", variant, values["best"], maximize=maximize).to_dict()
                # optional: reverting it is not measurably worse than the best, and its share is not above 0
                optional = versus["verdict"] != "worse" and (low is None or low <= 0)
                result["settings"].setdefault(name, {})[workload.name] = {
                    "value": searched[name], "default": space[name].default, "inert_with_it": inert,
                    "share": statistics.mean(per_round) if per_round else None,
                    "interval": [low, high] if per_round else None, "rounds": len(per_round),
                    "versus_best": versus, "helps_without": versus["verdict"] == "better", "optional": optional}
        for name, per in result["settings"].items():
            per["optional"] = all(w["optional"] for w in per.values() if isinstance(w, dict) and "optional" in w)
        result["sum_of_shares"] = {w: sum(per[w]["share"] or 0 for per in result["settings"].values()
                                          if isinstance(per.get(w), dict)) for w in result["workloads"]}
        store.update_study_settings(study.id, {"ablation": result})
    finally:
        lease.release()
    return result


def format_ablation(result: dict[str, Any]) -> str:
    """The ablation as lines: the gain, then each setting's share with its interval, optional ones marked."""
    lines = []
    for workload in result["workloads"]:
        gain = result["gain"][workload]
        speedup = "-" if gain["mean_speedup"] is None else f"x{gain['mean_speedup']:.3f}"
        p = "-" if gain["p_value"] is None else format(gain["p_value"], ".3g")
        lines.append(f"ablation on {workload} ({result['rounds']} interleaved rounds): the best {speedup} against the "
                     f"default (p = {p})" + ("" if gain["verdict"] == "better" else
                                             ": not better than the default in these rounds, so no setting has a "
                                             "share of a gain; each one's reversal against the best is still shown"))
        rows = sorted(result["settings"].items(), key=lambda kv: -(kv[1][workload]["share"] or 0))
        width = max(len(name) for name, _ in rows)
        for name, per in rows:
            w = per[workload]
            share = "-" if w["share"] is None else f"{w['share'] * 100:+.0f}%"
            interval = (f" [{w['interval'][0] * 100:+.0f}%, {w['interval'][1] * 100:+.0f}%]"
                        if w["interval"] and w["interval"][0] is not None else "")
            vs = w["versus_best"]
            lines.append(f"  {name.ljust(width)}  {w['default']} -> {w['value']}: share of the gain {share}{interval}; "
                         f"without it x{vs['mean_speedup'] or float('nan'):.3f} of the best (p = "
                         f"{'-' if vs['p_value'] is None else format(vs['p_value'], '.3g')})"
                         + ("  OPTIONAL: reverting it cost nothing measurable" if per["optional"] else "")
                         + ("; reverting it was better: leave it out" if w.get("helps_without") else "")
                         + (f"  (reverting it leaves {', '.join(w['inert_with_it'])} without effect)"
                            if w["inert_with_it"] else ""))
        total = result["sum_of_shares"][workload]
        if result["gain"][workload]["verdict"] != "better":
            continue
        lines.append(f"  sum of the shares {total * 100:.0f}%: "
                     + ("over 100%, settings that pay only together" if total > 1.1 else
                        "under 100%, settings that stand in for each other, or a gain no single setting carries"
                        if total < 0.9 else "about 100%, the settings add up"))
    return "\n".join(lines)


def optional_settings(result: dict[str, Any] | None) -> list[str]:
    """The settings an ablation marked optional (export-config lists them apart)."""
    return sorted(name for name, per in ((result or {}).get("settings") or {}).items() if per.get("optional"))
