"""The guard after a live change: keep it only if the next window is not worse than the windows before it.

The rule of `judge_change`:

1. The baseline is the mean over the last full windows before the change: throughput (operations per second) and
   p99 of each operation kind, as `Window` gives them. A partial window (a node restarted, missing or without a
   reading at its start) undercounts operations, so it is left out of the baseline. If the window after the change
   is partial, the verdict is "wait", and the caller judges the next full window instead.
2. Each figure gets a tolerance: the larger of a fixed fraction (throughput 5%, p99 10%, since a tail is noisier
   than a mean) and `noise_multiple` (default 2.5) times the window-to-window noise before the change, relative
   to the baseline. A p99 is never held to less than one bucket of the histogram it is read from: Cassandra's
   latency histograms (EstimatedHistogram) report a bucket's bound, each bucket 1.2 times the one below, so a p99
   moves by steps of about 20% (179, 215, 258 us) and a one-step rise is within the tolerance, two are not. The
   noise is measured from successive differences, sqrt(sum (x_i - x_{i-1})^2 / (2 (n - 1))). Unlike the plain
   standard deviation, this is not inflated by a slow drift of the load, and it is what one window differs from
   the next by when nothing changes. With fewer than `min_windows_for_noise` (default 3) windows
   before the change the noise is unknown, and the fixed fractions alone apply; the verdict says so.
3. Rollback when the throughput fell by more than its tolerance, or any kind's p99 rose by more than its
   tolerance, or the share of failed and timed-out requests rose by more than `max_failure_increase` (0.1% of
   operations). Otherwise keep. A p99 is compared only for kinds with at least `min_operations_for_p99` requests
   in every window compared. A p99 over fewer requests rests on its few slowest ones.
4. At a fixed offered rate the clients set the throughput, whatever the configuration, so throughput says nothing
   about the change and only p99 (and failures) decide. The rate is taken as fixed when the caller gives the
   offered rate and the baseline meets it within tolerance. Without a rate, it is taken as fixed when the
   throughput after the change is unchanged within its tolerance, and the verdict says p99 decided. At a fixed
   rate a throughput below the offered rate by more than the tolerance means the cluster no longer keeps up,
   and the change is rolled back.
5. A change made on some nodes only (a canary of a rollout or of `online`, then the nodes after it) is judged on
   those nodes' own windows, and the nodes left unchanged tell how the demand moved meanwhile (`demand_change`: their throughput after over before): the
   throughput's baseline moves with the demand, so that clients sending less is not read as the change's doing,
   nor clients sending more as its merit.
6. A replica judged on its own reads and writes (a canary in a cluster with RF > 1) does not choose how many it
   serves: the coordinators send reads to the replicas their dynamic snitch scores best, and a node just restarted
   scores worse for a while, so its share of the reads falls whatever the change did. Its latencies and failures
   decide (`latency_only`); its throughput is reported beside them.
7. A node just restarted into the change (a rollout's canary) is cold for minutes: its JIT has not compiled its
   code, its key cache and page cache are empty, the dynamic snitch has not yet sent it its share. One window after
   a settle cannot tell that from the change. `after_restart` judges the windows after the settle one at a time:
   the first window not worse, with every kind judged before judged again, keeps the change (a replica the
   coordinators' dynamic snitch routes reads around serves none: its reads cannot be judged until the snitch
   resets its scores, every 10 minutes by default); a change is rolled back when two windows in a row are worse and
   the second is not recovering; it is recovering when each figure worse in it was worse in the window before too
   and is coming back: a p99 one histogram bucket lower or more (a node's reported p99 comes from a decaying
   reservoir of recent minutes, which forgets the restart's slow seconds gradually: a node restarted into its own
   configuration read 2759, 1916, 1597 us in successive 20 s windows after a 60 s settle, against 770 before;
   windows read from the latency buckets' difference, window.py, leave those seconds out, and the same restart
   was kept in its first window three times out of three), another figure half its excess over the tolerance
   shed. A worse plan's p99 stops falling above the tolerance; at the last window allowed, a worse window rolls
   back whatever its trend.
8. The windows before a change must be steady: when a node's p99 of some kind is in its first window two histogram
   buckets or more above its last, and lowest in the last (`settling`), the cluster is still warming, and a mean
   over those windows is no baseline: a rollout reads one more window and drops the oldest, up to `--windows` more, then judges on what it
   has and says so.
9. A change made on some nodes of a replicated table is judged against the nodes left unchanged over the same
   span, as canary analysis does: each p99's baseline moves by the factor the other replicas' p99 moved (their
   p99 after over their mean before). So a slowdown every node feels meanwhile (a cluster whose latency drifts,
   measured at +62% and +134% on 3 local nodes) is not read as the change's, and a change every node gets at
   once (a table option) is judged only by what the changed nodes feel more. Each of the two ratios so met (the
   changed node's after over before, the others' after over before) is read from bucket bounds and may be one
   bucket off (a p99 that rose 19% can read as the same bucket, one that rose 1% as the next), even when the
   other nodes read the same bucket before and after, so a p99 judged this way is never held to less than two
   buckets (+47%): with one, a canary whose
   p99 fell a bucket less than the others' while every node recovered from a restart was stopped at +21.4%
   against 21.2% (bench/results/rollout.md, restart-only 11).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Collection, Mapping, Sequence

from ..errors import UsageError
from .window import KINDS, Window

BUCKET_SLACK = 0.01   # the buckets' bounds are rounded to whole microseconds: 179 -> 215 is a ratio of 1.201


@dataclass(frozen=True)
class GuardSettings:
    """The tolerances of the rule above."""

    throughput_tolerance: float = 0.05
    p99_tolerance: float = 0.10
    noise_multiple: float = 2.5
    min_windows_for_noise: int = 3
    min_operations_for_p99: float = 500.0
    max_failure_increase: float = 0.001
    p99_bucket_ratio: float = 1.2   # Cassandra's latency histograms: each bucket's bound 1.2 times the one below

    def __post_init__(self) -> None:
        if not (isinstance(self.p99_bucket_ratio, (int, float)) and math.isfinite(self.p99_bucket_ratio)
                and self.p99_bucket_ratio >= 1.0):
            raise UsageError(f"guard setting p99_bucket_ratio must be a number >= 1, got {self.p99_bucket_ratio!r}")
        for name in ("throughput_tolerance", "p99_tolerance", "noise_multiple", "max_failure_increase"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise UsageError(f"guard setting {name} must be a number >= 0, got {value!r}")
        if not (isinstance(self.min_windows_for_noise, int) and self.min_windows_for_noise >= 2):
            raise UsageError(f"min_windows_for_noise must be a whole number >= 2, got {self.min_windows_for_noise!r}")
        if not (math.isfinite(self.min_operations_for_p99) and self.min_operations_for_p99 >= 1):
            raise UsageError(f"min_operations_for_p99 must be >= 1, got {self.min_operations_for_p99!r}")


def successive_noise(values: Sequence[float]) -> float:
    """Window-to-window standard deviation from successive differences (von Neumann):
    sqrt(sum (x_i - x_{i-1})^2 / (2 (n - 1))); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    squares = sum((b - a) ** 2 for a, b in zip(values, values[1:]))
    return math.sqrt(squares / (2 * (len(values) - 1)))


@dataclass(frozen=True)
class Check:
    """One figure compared: its baseline (mean before), its value after, the relative change (after / baseline -
    1), the tolerance applied, the relative noise measured before (None: too few windows) and whether it is worse
    beyond the tolerance."""

    name: str
    baseline: float
    after: float
    change: float
    tolerance: float
    noise: float | None
    worse: bool

    def as_dict(self) -> dict:
        return {"name": self.name, "baseline": self.baseline, "after": self.after, "change": self.change,
                "tolerance": self.tolerance, "noise": self.noise, "worse": self.worse}


@dataclass(frozen=True)
class GuardVerdict:
    """keep, rollback or wait (the window after the change is partial), with every figure compared."""

    verdict: str
    fixed_rate: bool
    judged_on: str
    checks: tuple[Check, ...] = field(default=())
    windows_before: int = 0
    reason: str = ""
    worse: tuple[str, ...] = ()   # the checks that decided a rollback (a check reported but not considered: absent)
    unjudged: tuple[str, ...] = ()   # kinds whose p99 was judged before the change and is not after: too few requests

    @property
    def keep(self) -> bool:
        return self.verdict == "keep"

    @property
    def rollback(self) -> bool:
        return self.verdict == "rollback"

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "fixed_rate": self.fixed_rate, "judged_on": self.judged_on,
                "checks": [c.as_dict() for c in self.checks], "windows_before": self.windows_before,
                "reason": self.reason, "worse": list(self.worse), "unjudged": list(self.unjudged)}


def _compare(name: str, values: list[float], after: float, fixed: float, settings: GuardSettings,
             higher_is_worse: bool) -> Check:
    baseline = sum(values) / len(values)
    noise = successive_noise(values) / baseline if len(values) >= settings.min_windows_for_noise and baseline > 0 \
        else None
    tolerance = max(fixed, settings.noise_multiple * noise) if noise is not None else fixed
    change = after / baseline - 1.0 if baseline > 0 else (math.inf if after > 0 else 0.0)
    worse = change > tolerance if higher_is_worse else change < -tolerance
    return Check(name, baseline, after, change, tolerance, noise, worse)


def _failure_share(window: Window) -> float:
    return window.failures / window.operations if window.operations > 0 else 0.0


def judge_change(before: Sequence[Window], after: Window, settings: GuardSettings = GuardSettings(), *,
                 offered_rate: float | None = None, demand_change: float | None = None,
                 latency_only: bool = False, p99_moved: Mapping[str, float] | None = None) -> GuardVerdict:
    """Keep or roll back a live change, given the windows before it (oldest first; the last few are used as
    they come) and the first full window after it. `offered_rate`: the clients' fixed rate in operations per
    second, when known. None means closed loop or unknown. `demand_change`: how much the load offered to the
    judged nodes moved between the baseline and the window after, as a relative change measured elsewhere (a
    canary's: the nodes left unchanged, rule 5); the throughput's baseline moves with it, so that a drop in
    demand is not read as the change's doing. `latency_only`: the throughput is reported but does not decide
    (rule 6). `p99_moved`: per kind, how the p99 of the nodes left unchanged moved over the same span (after over
    before); each p99's baseline moves with it (rule 9)."""
    if offered_rate is not None and not (math.isfinite(offered_rate) and offered_rate > 0):
        raise UsageError(f"offered_rate must be > 0 operations per second, got {offered_rate!r}")
    if demand_change is not None and not (math.isfinite(demand_change) and demand_change > -1):
        raise UsageError(f"demand_change must be a relative change > -1, got {demand_change!r}")
    full = [w for w in before if not w.partial and w.operations > 0]
    if not full:
        raise UsageError("the guard needs at least one full window with traffic before the change")
    if after.partial:
        return GuardVerdict("wait", False, "nothing", windows_before=len(full),
                            reason="the window after the change is partial (restarted, missing or unmatched nodes: "
                                   f"{', '.join(after.restarted + after.missing + after.unmatched)}): judge the next")
    demand = 1.0 + (demand_change or 0.0)
    throughput = _compare("throughput", [w.ops_per_second * demand for w in full], after.ops_per_second,
                          settings.throughput_tolerance, settings, higher_is_worse=False)
    if offered_rate is not None:
        fixed_rate = abs(throughput.baseline / offered_rate - 1.0) <= throughput.tolerance
        rate_note = (f"the baseline {throughput.baseline:.0f} ops/s meets the offered rate {offered_rate:.0f}: "
                     "fixed rate" if fixed_rate else
                     f"the baseline {throughput.baseline:.0f} ops/s is below the offered rate {offered_rate:.0f}: "
                     "the cluster was the limit")
    else:
        fixed_rate = abs(throughput.change) <= throughput.tolerance
        rate_note = (f"throughput unchanged within noise ({throughput.change:+.1%}, tolerance "
                     f"{throughput.tolerance:.1%}): taken as a fixed offered rate, p99 decides"
                     if fixed_rate else "")
    checks, unjudged = [throughput], []
    for kind in KINDS:
        windows = full + [after]
        if any((w.requests.get(kind) or 0.0) < settings.min_operations_for_p99 or w.p99(kind) is None
               for w in windows):
            if all((w.requests.get(kind) or 0.0) >= settings.min_operations_for_p99 and w.p99(kind) is not None
                   for w in full):
                unjudged.append((kind, after.requests.get(kind) or 0.0))
            continue
        # a p99 read from the node is a bucket's bound: it moves by whole buckets, so one bucket up is within
        # the tolerance (rule 2) and two are not; against the other nodes' movement (rule 9) two ratios of bucket
        # bounds meet, each a bucket off at worst, so two buckets up are within it and three are not
        moved = (p99_moved or {}).get(kind)
        buckets = 1 if moved is None else 2
        floor = max(settings.p99_tolerance, (settings.p99_bucket_ratio * (1.0 + BUCKET_SLACK)) ** buckets - 1.0)
        moved = 1.0 if moved is None else moved
        checks.append(_compare(f"p99_{kind}", [w.p99(kind) * moved for w in full], after.p99(kind), floor, settings,
                               higher_is_worse=True))
    shares = [_failure_share(w) for w in full]
    base_failures = sum(shares) / len(shares)
    rise = _failure_share(after) - base_failures
    checks.append(Check("failure_share", base_failures, _failure_share(after), rise, settings.max_failure_increase,
                        None, rise > settings.max_failure_increase))
    considered = [c for c in checks if not (c.name == "throughput" and (latency_only or (fixed_rate and
                                                                                       offered_rate is None)))]
    worse = [c for c in considered if c.worse]
    judged_on = ("p99 and failures (a replica's share of the requests is not its own)" if latency_only else
                 "p99 and failures (fixed offered rate)" if fixed_rate else "throughput, p99 and failures")
    noise_note = "" if len(full) >= settings.min_windows_for_noise else \
        f"; noise unknown ({len(full)} window(s) before): fixed tolerances"
    details = ", ".join(f"{c.name} {c.change:+.1%} (tolerance {c.tolerance:.1%})" if c.name != "failure_share"
                        else f"failures {c.change:+.2%} of operations" for c in considered)
    if demand_change is not None:
        rate_note = "; ".join(x for x in (f"the demand moved {demand_change:+.1%} elsewhere: the throughput's "
                                          "baseline with it", rate_note) if x)
    if p99_moved:
        rate_note = "; ".join(x for x in (rate_note, "the p99 elsewhere moved " + ", ".join(
            f"{kind} {moved - 1.0:+.0%}" for kind, moved in sorted(p99_moved.items())) + ": each baseline with it")
            if x)
    head = (f"{rate_note}; " if rate_note else "")
    if unjudged:
        named = ", ".join(f"{kind} ({count:.0f} after)" for kind, count in unjudged)
        noise_note += (f"; p99 not judged for {named}: fewer than "
                       f"{settings.min_operations_for_p99:.0f} requests after the change, enough before")
    kinds = tuple(kind for kind, _ in unjudged)
    if worse:
        return GuardVerdict("rollback", fixed_rate, judged_on, tuple(checks), len(full),
                            f"{head}worse beyond tolerance: {', '.join(c.name for c in worse)} ({details}){noise_note}",
                            tuple(c.name for c in worse), kinds)
    return GuardVerdict("keep", fixed_rate, judged_on, tuple(checks), len(full),
                        f"{head}not worse beyond tolerance ({details}){noise_note}", unjudged=kinds)


def judge_on_nodes(before: Sequence[Window], after: Window, changed: Collection[str],
                   settings: GuardSettings = GuardSettings(), *,
                   replicated: bool = True) -> tuple[GuardVerdict, float | None]:
    """A change made on the nodes `changed` only (a canary, or the nodes after it), judged on their own windows
    (rule 5): their full windows in `before` against their part of `after`. The other nodes, unchanged over
    `before` and `after`, tell how the demand moved, from the requests they coordinated.
    When the data is `replicated` (RF > 1) and other nodes serve, the changed nodes' latencies and failures decide
    (rule 6); at RF 1 each node coordinates its own ranges' requests, and the throughput decides too, against a
    baseline moved with the demand. The verdict and the demand's relative change (None without other nodes, or
    when they served nothing before)."""
    changed = frozenset(changed)
    others = frozenset(n.node for n in after.nodes) - changed
    demand, moved = None, {}
    base = [w.only(others) for w in before if not w.only(others).partial]
    if others and base:
        mean = sum(w.ops_per_second for w in base) / len(base)
        demand = after.only(others).ops_per_second / mean - 1.0 if mean > 0 else None
        if replicated:   # rule 9: the unchanged replicas serve the same reads and writes over the same span
            now = after.only(others)
            for kind in KINDS:
                windows = [*base, now]
                if all((w.requests.get(kind) or 0.0) >= settings.min_operations_for_p99 and w.p99(kind)
                       for w in windows):
                    moved[kind] = now.p99(kind) / (sum(w.p99(kind) for w in base) / len(base))
    verdict = judge_change([w.only(changed) for w in before], after.only(changed), settings,
                           demand_change=demand, latency_only=replicated and bool(others), p99_moved=moved or None)
    return verdict, demand


def after_restart(verdicts: Sequence[GuardVerdict], limit: int,
                  settings: GuardSettings = GuardSettings()) -> GuardVerdict | None:
    """Rule 7: the verdict on a change made with a restart, from the verdicts of the full windows after the settle
    so far (oldest first; each from `judge_change` or `judge_on_nodes`); None: judge another window. `limit`: the
    most windows to read. A window that could not judge a kind it judged before (too few of its requests after:
    `unjudged`) keeps nothing; at the limit such a verdict comes back as "wait", with the reason."""
    if limit < 2:
        raise UsageError(f"a change made with a restart is judged over 2 windows at least, got a limit of {limit!r}")
    judged = [v for v in verdicts if v.verdict != "wait"]
    if not judged:
        return None
    last, n = judged[-1], len(judged)
    if last.keep and not last.unjudged:
        return replace(last, reason=f"window {n} after the settle: {last.reason}")
    if last.keep:   # not worse where it could judge, and blind where it could not
        if n >= limit:
            return replace(last, verdict="wait", reason=f"not judged in {n} windows after the settle: "
                                                        f"{last.reason}")
        return None
    if n >= limit:
        return replace(last, reason=f"worse in the last of {n} windows after the settle: {last.reason}")
    if n >= 2 and judged[-2].rollback and not recovering(judged[-2], last, settings):
        return replace(last, reason=f"worse in windows {n - 1} and {n} after the settle, not recovering: "
                                    f"{last.reason}")
    return None


def settling(before: Sequence[Window], node: str, settings: GuardSettings = GuardSettings()) -> str | None:
    """Rule 8: the baseline is not steady yet when, on `node`, some kind's p99 in the first window is two histogram
    buckets or more above the last, and the last is the lowest: a cluster just started or just loaded warms for
    minutes (770, 310, 179 us on 3 fresh local nodes), and a mean over those windows, with their spread as noise,
    would hide a worse change behind a wide tolerance. What fell, in one phrase (for instance "read p99 770 -> 310
    -> 179 us"), or None when steady."""
    if len(before) < 2:
        return None
    windows = [w.only(frozenset({node})) for w in before]
    fall = (settings.p99_bucket_ratio * (1.0 - BUCKET_SLACK)) ** 2
    for kind in KINDS:
        if any((w.requests.get(kind) or 0.0) < settings.min_operations_for_p99 for w in windows):
            continue
        values = [w.p99(kind) for w in windows]
        if any(v is None for v in values):
            continue
        if values[0] >= fall * values[-1] and values[-1] <= min(values) * (1.0 + BUCKET_SLACK):
            return f"{kind} p99 " + " -> ".join(f"{v:.0f}" for v in values) + " us"
    return None


def recovering(before: GuardVerdict, now: GuardVerdict, settings: GuardSettings = GuardSettings()) -> bool:
    """Each figure worse in `now` was worse in `before` and is coming back (rule 7): a p99 fell by at least one
    bucket of its histogram since (a restarted node's p99 comes down a bucket or more a window while it warms);
    another figure shed at least half its excess over its tolerance."""
    for check in (now.check(name) for name in now.worse):
        prior = before.check(check.name)
        if check.name not in before.worse or prior is None:
            return False
        if check.name.startswith("p99_"):
            if check.after * settings.p99_bucket_ratio > prior.after * (1.0 + BUCKET_SLACK):
                return False
        elif abs(check.change) - check.tolerance > 0.5 * (abs(prior.change) - prior.tolerance):
            return False
    return True
