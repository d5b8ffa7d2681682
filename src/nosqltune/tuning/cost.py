"""What a study's machine time went to (bench/results/study_cost.md): each trial's stored timings summed into
phases, and the best found against the machine time spent to find it.

A trial's `timings` (seconds, written by the datastore's trial) fall into these phases; what no phase names
(starting the client's JVM, stopping the node, removing the trial's folders) is `other`, so the phases add up
to the trials' `total_s`. Interrupted and failed trials count: they took the machine's time too."""

from __future__ import annotations

from typing import Any, Callable

PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("build", ("dataset_build_s", "load_s")),            # a dataset built for the trial (or reloaded per trial)
    ("restore", ("restore_s", "volume_s", "evict_s", "restage_s")),   # the stored data put in place (and brought to
    # a restaged knob's value), a volume mounted
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
            "wall_s": wall, "builds": sum(1 for r in rows if (r.get("timings") or {}).get("dataset_build_s")),
            "replaced": sum(1 for r in rows if (r.get("meta") or {}).get("replaced"))}   # tune --build-share


def _confirmation(row: dict[str, Any]) -> bool:
    return row.get("tag") == "compare" and str((row.get("meta") or {}).get("group") or "").startswith("confirm-")


def _confirmation_end(rows: list[dict[str, Any]]) -> float | None:
    """When the study's last confirmation round ended (None without one)."""
    return max((r.get("finished_at") or r["started_at"] for r in rows
                if _confirmation(r) and r.get("started_at") is not None), default=None)


def _hours(rows) -> float:
    """The trials' machine hours (those without a total count nothing)."""
    return sum(sum((trial_phases(r.get("timings")) or {}).values()) for r in rows) / 3600.0


def result_hours(rows: list[dict[str, Any]]) -> float:
    """Machine hours a study's result took: its search's trials (tag tune) and its confirmations' rounds (tag
    compare, group confirm-after-N:...) up to the end of its last confirmation; not comparisons run after it, nor
    search trials of a resume that has not been confirmed yet. Without a confirmation: the search's hours."""
    end = _confirmation_end(rows)
    return _hours(r for r in rows if (r.get("tag") == "tune" or _confirmation(r))
                  and (end is None or (r.get("started_at") or 0.0) <= end))


def hours_at_result(rows: list[dict[str, Any]]) -> float | None:
    """Where the last confirmation ended on the axis of best_by_machine_time (the machine hours of every trial
    started before it ended, any tag), or None without a confirmation."""
    end = _confirmation_end(rows)
    if end is None:
        return None
    return _hours(r for r in rows if r.get("started_at") is not None and r["started_at"] <= end)


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
    paced = f"; {split['replaced']} suggestions run on data built before" if split.get("replaced") else ""
    return (f"machine time {split['machine_s'] / 3600:.2f} h over {split['trials']} trials "
            f"({split['builds']} dataset builds): {shares}{wall}{paced}")


class BuildPacer:
    """Keeps a study's dataset builds to a share of its machine time (tune --build-share).

    A suggestion whose dataset-shaping knobs (TuningSpace.dataset_shape) ask for data the study has not built
    is run as suggested while the study's build seconds, with one more build at the mean build time so far,
    stay within `share / (1 - share)` of the seconds its trials spent on everything else, counted over at least
    `start` trials of the mean trial time (so a study may build a first few datasets before it has run many
    trials). Otherwise the suggestion's shaping knobs are replaced by those of the nearest dataset the study has
    (fewest shaping knobs that differ; the first built wins a tie): the trial runs what was built, and the
    optimizer is told what ran as it can take it (Optimizer.tell_ran: SMAC, GP, RAFIKI and the annealing search
    learn the configuration that ran; random search, irace and LlamaTune are told its cost as the suggestion's, a
    projection of their point onto the built data). The builds are thus paced through the study:
    a later, model-guided suggestion still gets a build once the trials since the last one earned it.

    Deterministic: it decides from the trials' stored timings, so a resumed study replays the same choices."""

    def __init__(self, space, share: float, start: int = 10) -> None:
        if not 0.0 < share < 1.0:
            raise ValueError(f"a build share is between 0 and 1, got {share}")
        self.space = space
        self.share = share
        self.start = start
        self.shapes: dict[tuple, None] = {}   # the dataset shapes restored so far, in the order first seen
        self.build_s: list[float] = []    # seconds of each build
        self.other_s = 0.0                # the trials' seconds besides their builds
        self.trials = 0

    def seen(self, config: dict[str, Any], timings: list[dict[str, Any]]) -> None:
        """A configuration ran (its trials' stored timings). Its dataset counts as built once a trial restored it
        (a trial refused before, or whose build failed, left none to run on)."""
        if any("restore_s" in t for t in timings):
            self.shapes.setdefault(self.space.dataset_shape(config))
        for t in timings:
            if t.get("total_s") is None:
                continue
            built = float(t.get("dataset_build_s") or 0.0)
            if built:
                self.build_s.append(built)
            self.other_s += float(t["total_s"]) - built
            self.trials += 1

    def allows_build(self) -> bool:
        if not self.build_s or not self.trials:   # nothing known of a build's or a trial's time yet
            return True
        build = sum(self.build_s) / len(self.build_s)
        other = self.other_s / self.trials * max(self.trials, self.start)
        return sum(self.build_s) + build <= self.share / (1.0 - self.share) * other

    def place(self, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The configuration to run for a suggestion, and the shaping values it replaced ({} when none)."""
        if not self.shapes or self.space.dataset_shape(config) in self.shapes or self.allows_build():
            return config, {}
        wanted = dict(self.space.dataset_shape(config))

        def differing(shape: tuple) -> int:
            return sum(1 for name, value in shape if wanted.get(name) != value)

        nearest = min(self.shapes, key=differing)   # min keeps the first of equals: the order they were built
        placed = self.space.canonical({**config, **dict(nearest)})
        if not self.space.allowed(placed):   # the built data does not go with the rest (a knob rule): build
            return config, {}
        # every asked value that changed: the shaping knobs, and the knobs their conditions switched off
        return placed, {k: v for k, v in config.items() if placed.get(k) != v}
