"""Workload-aware training data (RAFIKI 3.5, 4.2): every (workload, configuration) pair is one cold trial.

Workloads are described by their read ratio (the rest updates) and request distribution. The configuration
set is the default plus configurations drawn at random, in which every knob's minimum and maximum (and every
choice of a categorical knob) appears at least once, so that a model fitted to the data never extrapolates
along a knob. The plan (configurations, workloads, order) is stored with the study: a collection is
resumable, and can be extended later with more configurations or read ratios.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Iterable

from ..errors import UsageError
from ..knobs.space import TuningSpace, categorical, choices_of

STUDY_NAME = "collect"
TAG = "collect"
MAX_BUSY = 0.25   # CPU share busy before a trial above which collection waits (another program is running)


def parse_ratios(text: str) -> list[float]:
    """'0:1:0.1' (start:stop:step, both ends included) or '0.1,0.5,0.9' -> sorted distinct read ratios."""
    text = text.strip()
    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if len(parts) != 3 or parts[2] <= 0:
                raise ValueError
            start, stop, step = parts
            count = int(round((stop - start) / step)) + 1
            values = [start + i * step for i in range(max(count, 0))]
        else:
            values = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise UsageError(f"--read-ratios expects start:stop:step (e.g. 0:1:0.1) or a list (0.1,0.5,0.9), "
                         f"got {text!r}") from None
    values = sorted({round(v, 6) for v in values})
    if not values or any(not 0 <= v <= 1 for v in values):
        raise UsageError(f"--read-ratios must lie within 0..1, got {text!r}")
    return values


def extremes(space: TuningSpace) -> list[tuple[str, Any]]:
    """(knob, value) pairs the configuration set must contain: min and max of numbers, every choice."""
    out: list[tuple[str, Any]] = []
    for knob in space.knobs:
        values = list(choices_of(knob)) if categorical(knob) else list(dict.fromkeys(knob.range))
        out.extend((knob.name, v) for v in values)
    return out


def _enable(space: TuningSpace, config: dict[str, Any], name: str) -> None:
    """Set the knobs that switch `name` on, where a clause says which value does (==, in)."""
    for ref, op, literal in space.clauses.get(name, ()):
        if ref in space.by_name:
            if op == "==":
                config[ref] = literal
            elif op == "in":
                config[ref] = literal[0]
            _enable(space, config, ref)


def design(space: TuningSpace, count: int, seed: int, existing: list[dict[str, Any]] | None = None) -> list[dict]:
    """`count` canonical configurations: the default first, then random ones carrying the extremes not yet
    present. `existing` (an earlier plan's configurations) is kept as it is and extended."""
    configs = [dict(c) for c in (existing or [space.default()])]
    present = {(n, repr(v)) for c in configs for n, v in c.items() if space.is_active(n, c)}
    todo = [(n, v) for n, v in extremes(space) if (n, repr(v)) not in present]
    index = len(configs)
    while len(configs) < count:
        rng = random.Random(f"collect-{seed}-{index}")
        config = space.sample(rng)
        # each new configuration carries up to ceil(todo / remaining) extremes, not the same knob twice
        share = -(-len(todo) // (count - len(configs)))
        taken: set[str] = set()
        for item in list(todo):
            if len(taken) >= share:
                break
            name, value = item
            if name in taken:
                continue
            trial = dict(config)
            trial[name] = value
            _enable(space, trial, name)
            trial = space.canonical(trial)
            if space.is_active(name, trial) and repr(trial[name]) == repr(value):
                config = trial
                taken.add(name)
                todo.remove(item)
        configs.append(space.canonical(config))
        index += 1
    return configs


def plan_entries(config_count: int, workloads: list[str], noise_repeats: int, seed: int,
                 existing: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The order of trials: every configuration on every workload, and `noise_repeats` extra runs of the
    default per workload (the measurement noise), shuffled so drift is spread over the design. New entries
    (an extended collection) come after the existing ones."""
    plan = [dict(e) for e in (existing or [])]
    have = {(e["config"], e["workload"], e["repeat"]) for e in plan}
    new = [{"config": c, "workload": w, "repeat": 0} for c in range(config_count) for w in workloads]
    new += [{"config": 0, "workload": w, "repeat": r} for w in workloads for r in range(1, noise_repeats + 1)]
    new = [e for e in new if (e["config"], e["workload"], e["repeat"]) not in have]
    random.Random(f"collect-order-{seed}-{len(plan)}").shuffle(new)
    return plan + new


def done_entries(rows: Iterable[dict[str, Any]]) -> set[tuple[int, str, int]]:
    """Plan entries that have a finished trial (complete or failed; interrupted ones run again)."""
    out = set()
    for row in rows:
        entry = (row.get("meta") or {}).get("collect")
        if entry and row.get("tag", TAG) == TAG and row["state"] in ("COMPLETE", "FAIL") \
                and row["failure_kind"] != "interrupted":
            out.add((entry["config"], entry["workload"], entry["repeat"]))
    return out


def cpu_busy(seconds: float = 1.0) -> float | None:
    """Share of the machine's CPU time spent busy over `seconds` (from /proc/stat), None where unknown."""
    import time

    def sample() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as fh:
                fields = [int(x) for x in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(fields), fields[3] + (fields[4] if len(fields) > 4 else 0)

    first = sample()
    time.sleep(seconds)
    second = sample()
    if not first or not second or second[0] <= first[0]:
        return None
    return 1 - (second[1] - first[1]) / (second[0] - first[0])


def wait_until_quiet(say: Callable[[str], None], limit: float = MAX_BUSY, patience: float = 600.0) -> float | None:
    """Between trials nothing of ours runs: if the CPU is busy anyway, another program would slow the next
    trial down, so wait (up to `patience` seconds) for it to calm down. Returns the last busy share."""
    import time

    started = time.monotonic()
    busy = cpu_busy()
    warned = False
    while busy is not None and busy > limit and time.monotonic() - started < patience:
        if not warned:
            say(f"  the machine is {busy:.0%} busy before a trial: waiting for it to calm down")
            warned = True
        time.sleep(4)
        busy = cpu_busy()
    return busy


def by_data_shape(entries: list[dict[str, Any]], configs: list[dict[str, Any]],
                  shape: Callable[[dict[str, Any]], Any]) -> list[dict[str, Any]]:
    """The entries with each data shape's trials run together, shapes in the order they first appear (the plan's
    shuffle), so each dataset is built or restored once instead of being evicted from the cache between its trials
    (cloud-disk: about 30 shapes of 2-3 GB against a cache of about 11; in the shuffled order 33 of the first 78
    trials built their data). The default's noise repeats are spread evenly over the rest, so the noise is still
    measured over the collection's whole span."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        if not entry["repeat"]:
            groups.setdefault(repr(shape(configs[entry["config"]])), []).append(entry)
    ordered = [entry for group in groups.values() for entry in group]
    noise = [entry for entry in entries if entry["repeat"]]
    at = {round((i + 1) * len(ordered) / (len(noise) + 1)) + i: entry for i, entry in enumerate(noise)}
    out, rest = [], iter(ordered)
    for position in range(len(entries)):
        out.append(at[position] if position in at else next(rest))
    return out


def run_plan(store, study_id: int, plan: list[dict], configs: list[dict], fixed: dict[str, Any],
             workloads: dict[str, Any], run: Callable[[dict, Any], Any], *, environment_id: int | None,
             workload_info: Callable[[Any], dict], say: Callable[[str], None], limit: int | None = None,
             quiet: bool = True, shape: Callable[[dict[str, Any]], Any] | None = None) -> dict:
    """Run the plan's missing entries in order (with `shape`, a configuration's dataset key: each data shape's
    entries together, by_data_shape); returns counts."""
    done = done_entries(store.trials(study_id))
    missing = [e for e in plan if (e["config"], e["workload"], e["repeat"]) not in done]
    if shape is not None:
        missing = by_data_shape(missing, configs, lambda config: shape({**fixed, **config}))
    if limit is not None:
        missing = missing[:limit]
    failed = 0
    for n, entry in enumerate(missing, 1):
        config = {**fixed, **configs[entry["config"]]}
        workload = workloads[entry["workload"]]
        busy = wait_until_quiet(say) if quiet else None
        trial_id = store.start_trial(study_id, config, workload_info(workload), tag=TAG,
                                     environment_id=environment_id, meta={"collect": entry, "busy_before": busy})
        say(f"[{len(done) + n}/{len(plan)}] configuration {entry['config']}"
            + (f" (noise repeat {entry['repeat']})" if entry["repeat"] else "") + f" on {entry['workload']}")
        row = store.record(trial_id, lambda: run(config, workload))
        if row["state"] == "COMPLETE":
            say(f"  -> {row['metrics']['summary']['throughput_ops_s']:.0f} ops/s")
        else:
            failed += 1
            say(f"  -> FAILED ({row['failure_kind']}): {row['error']}")
    return {"planned": len(plan), "done_before": len(done), "ran": len(missing), "failed": failed,
            "remaining": len(plan) - len(done) - len(missing)}
