"""What a study's machine time went to (issue 42): each trial's stored timings summed into phases, and the best
found against the machine time spent to find it.

A trial's `timings` (seconds, written by the datastore's trial) fall into these phases; what no phase names
(starting the client's JVM, stopping the node, removing the trial's folders) is `other`, so the phases add up
to the trials' `total_s`. Interrupted and failed trials count: they took the machine's time too."""

from __future__ import annotations

from typing import Any, Callable

PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("build", ("dataset_build_s", "load_s")),            # a dataset built for the trial (or reloaded per trial)
    ("restore", ("restore_s", "volume_s", "evict_s")),   # the stored data put in place, a volume mounted
    ("boot", ("boot_s", "apply_s")),                     # the node started and its table settings applied
    ("warm-up", ("warm_cache_s", "warmup_s")),           # the page cache filled, the client's warm-up phase
    ("measure", ("measure_s",)),                         # the measured phase: what the trial is for
)


def trial_phases(timings: dict[str, Any] | None) -> dict[str, float] | None:
    """One trial's seconds per phase, `other` included (they add up to its total_s); None without a total."""
    timings = timings or {}
    total = timings.get("total_s")
    if total is None:
        return None
    out, named = {}, 0.0
    for name, keys in PHASES:   # loops written out: a study of 10,000 trials is read at once
        value = 0.0
        for key in keys:
            value += timings.get(key) or 0.0
        out[name] = value
        named += value
    out["other"] = max(0.0, float(total) - named)
    return out


def time_split(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A study's trials' machine time per phase: seconds, shares of the whole, the trials counted, and the wall
    time from the first trial's start to the last one's end (with one worker, what the wall time holds beyond the
    trials is the optimizer's and the harness's own time between trials)."""
    seconds = {name: 0.0 for name, _ in PHASES} | {"other": 0.0}
    counted = 0
    for row in rows:
        phases = trial_phases(row.get("timings"))
        if phases is None:
            continue
        counted += 1
        for name, value in phases.items():
            seconds[name] += value
    machine = sum(seconds.values())
    starts = [r["started_at"] for r in rows if r.get("started_at") is not None]
    ends = [r["finished_at"] for r in rows if r.get("finished_at") is not None]
    wall = (max(ends) - min(starts)) if starts and ends else None
    return {"trials": counted, "machine_s": machine, "seconds": seconds,
            "shares": {k: (v / machine if machine else None) for k, v in seconds.items()},
            "wall_s": wall, "builds": sum(1 for r in rows if (r.get("timings") or {}).get("dataset_build_s"))}


def best_by_machine_time(rows: list[dict[str, Any]], value: Callable[[dict[str, Any]], float | None],
                         maximize: bool) -> list[tuple[float, float]]:
    """(machine hours spent so far, best value so far) after each trial, in the order run: the gain against the
    machine's time, not only against trials. `value(row)`: the trial's objective, None if it has none."""
    spent, best, out = 0.0, None, []
    for row in sorted(rows, key=lambda r: (r.get("started_at") or 0, r.get("number") or 0)):
        phases = trial_phases(row.get("timings"))
        spent += sum(phases.values()) if phases else 0.0
        v = value(row)
        if v is not None and (best is None or (v > best if maximize else v < best)):
            best = v
        if best is not None:
            out.append((spent / 3600.0, best))
    return out


def format_split(split: dict[str, Any]) -> str:
    """One line: the machine time and its phases' shares."""
    if not split["trials"]:
        return "machine time: no trial with timings"
    shares = ", ".join(f"{name} {share * 100:.0f}%" for name, share in split["shares"].items() if share is not None)
    wall = f"; wall {split['wall_s'] / 3600:.2f} h" if split.get("wall_s") else ""
    return (f"machine time {split['machine_s'] / 3600:.2f} h over {split['trials']} trials "
            f"({split['builds']} dataset builds): {shares}{wall}")
