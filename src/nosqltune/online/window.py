"""A window of observed traffic: what each node served between two readings of its ClientRequest metrics.

Cassandra counts the requests each node coordinates in cumulative counters, read over JMX at
`org.apache.cassandra.metrics:type=ClientRequest,scope=Read|Write|RangeSlice,name=Latency` (attribute `Count`),
with `name=Failures`, `name=Unavailables` and `name=Timeouts` beside them. Those counters only grow while the node
runs and start again from zero when it restarts. The same Latency timers give percentiles (`50thPercentile`,
`99thPercentile`, in microseconds) from a forward-decaying histogram: recent minutes weigh more, and the landmark
is reset every 30 minutes. Such a percentile describes the last few minutes as a whole, not one window: a node
just restarted keeps the slow requests of its first seconds in it for minutes. The timers also give their plain
cumulative count per latency bucket (the `values` operation; EstimatedHistogram's buckets, each bound about 1.2
times the one below, in microseconds). Where both readings of a window have them, a node's window percentiles
are read from their difference: exactly the window's requests, to the bucket, as Cassandra reads its own
percentiles from the buckets. Where they are missing (an older node, a reading without them), the node's reported
percentiles stand in.

A window is the difference of two successive `Snapshot`s (`window_between`). Each `NodeWindow` keeps its node's
deltas. A node whose counters went backwards, or whose uptime is shorter than the window, was restarted during the
window. Its deltas are then the counts since the restart (its counters' current values), which is a part of the
window, never a negative count, and the window is marked partial. A node that did not answer at the end of the
window, or that has no reading at its start to subtract, is named in the window and left out of its sums; that
window is partial too. The callers treat partial windows accordingly: the shift detector can still read their mix,
but the guard does not judge throughput on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import UsageError

KINDS = ("read", "write", "scan")   # ClientRequest scopes Read, Write, RangeSlice
UPTIME_SLACK_S = 10.0                 # how much less than a window a node up all of it may seem to age (slow reads)


@dataclass(frozen=True)
class PerKind:
    """One figure per operation kind: reads, writes and range scans. None where the node reports nothing."""

    read: float | None = 0.0
    write: float | None = 0.0
    scan: float | None = 0.0

    def get(self, kind: str) -> float | None:
        if kind not in KINDS:
            raise UsageError(f"unknown operation kind {kind!r}: expected one of {', '.join(KINDS)}")
        return getattr(self, kind)

    @property
    def total(self) -> float:
        """Sum over the kinds (None counts as 0)."""
        return sum(v or 0.0 for v in (self.read, self.write, self.scan))

    def shares(self) -> "PerKind":
        """Each kind's share of the total (the mix); all None when the total is 0."""
        total = self.total
        if total <= 0:
            return PerKind(None, None, None)
        return PerKind(*((getattr(self, k) or 0.0) / total for k in KINDS))

    def as_dict(self) -> dict[str, float | None]:
        return {k: getattr(self, k) for k in KINDS}


def _check_counts(counts: PerKind, what: str, node: str) -> None:
    for kind in KINDS:
        value = counts.get(kind)
        if value is None or not math.isfinite(value) or value < 0:
            raise UsageError(f"node {node}: {what} of {kind}s must be a count >= 0, got {value!r}")


@dataclass(frozen=True)
class NodeCounters:
    """One node's ClientRequest metrics at one reading. Counts are cumulative since the node started. Failures
    include the Unavailables, since the client sees both as failed requests. Percentiles are in microseconds as
    the node reports them, None for a kind without requests. `uptime_seconds` (JMX Runtime Uptime), when given,
    exposes a restart even if the counters have already grown past their old values."""

    requests: PerKind
    failures: PerKind = PerKind()
    timeouts: PerKind = PerKind()
    p50: PerKind = PerKind(None, None, None)
    p99: PerKind = PerKind(None, None, None)
    uptime_seconds: float | None = None
    buckets: Mapping[str, tuple[int, ...]] = field(default_factory=dict, hash=False)   # kind -> counts per bucket

    def check(self, node: str) -> None:
        _check_counts(self.requests, "requests", node)
        _check_counts(self.failures, "failures", node)
        _check_counts(self.timeouts, "timeouts", node)
        for name in ("p50", "p99"):
            for kind in KINDS:
                value = getattr(self, name).get(kind)
                if value is not None and (not math.isfinite(value) or value < 0):
                    raise UsageError(f"node {node}: {name} of {kind}s must be >= 0 microseconds, got {value!r}")
        for kind, counts in self.buckets.items():
            if kind not in KINDS or any(not isinstance(c, int) or c < 0 for c in counts):
                raise UsageError(f"node {node}: latency buckets of {kind!r} must be counts >= 0")


def bucket_bounds(count: int) -> tuple[int, ...]:
    """The upper bounds of Cassandra's EstimatedHistogram buckets (its newOffsets without a zero bucket): 1, then
    each the one before times 1.2, rounded half up, at least one more."""
    bounds = [1]
    while len(bounds) < count:
        nxt = math.floor(bounds[-1] * 1.2 + 0.5)
        bounds.append(nxt if nxt > bounds[-1] else bounds[-1] + 1)
    return tuple(bounds[:count])


def bucket_percentile(counts: Sequence[int], quantile: float) -> float | None:
    """The `quantile` of the latencies counted per bucket, as Cassandra reads it: the upper bound of the first
    bucket at which the running count reaches ceil(total * quantile). None without any count."""
    total = sum(counts)
    if total <= 0:
        return None
    wanted, running = max(1, math.ceil(total * quantile)), 0
    bounds = bucket_bounds(len(counts))
    for i, c in enumerate(counts):
        running += c
        if running >= wanted:
            return float(bounds[i])
    return float(bounds[-1])


def _bucket_delta(now: Sequence[int], before: Sequence[int] | None) -> list[int] | None:
    """The counts per bucket between two readings (trailing empty buckets may be left out of either); None when
    one went backwards (not the same timer)."""
    if before is None:
        return list(now)
    size = max(len(now), len(before))
    delta = [(now[i] if i < len(now) else 0) - (before[i] if i < len(before) else 0) for i in range(size)]
    return None if any(d < 0 for d in delta) else delta


def _window_percentiles(now: NodeCounters, old: NodeCounters | None) -> tuple[PerKind, PerKind]:
    """A node's p50 and p99 over a window: from its buckets' difference where both readings have them (`old` None:
    every count since its start), else what the node reported at the window's end."""
    p50, p99 = now.p50.as_dict(), now.p99.as_dict()
    for kind in KINDS:
        counts = now.buckets.get(kind)
        before = None if old is None else old.buckets.get(kind)
        if counts is None or (old is not None and before is None):
            continue
        delta = _bucket_delta(counts, before)
        if delta is not None:
            p50[kind], p99[kind] = bucket_percentile(delta, 0.50), bucket_percentile(delta, 0.99)
    return PerKind(**p50), PerKind(**p99)


@dataclass(frozen=True)
class Snapshot:
    """The counters of every node that answered, read at one time `at` (seconds, any fixed origin). `asked`: every
    node the reading asked, those that did not answer included (empty when not known)."""

    at: float
    nodes: Mapping[str, NodeCounters] = field(hash=False)
    asked: tuple[str, ...] = ()


@dataclass(frozen=True)
class WindowSettings:
    """How a window's p99 is taken over the nodes: the worst p99 among the nodes that served at least
    `min_node_share` of the window's operations of that kind (see `Window.p99`)."""

    min_node_share: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_node_share < 1.0:
            raise UsageError(f"min_node_share must be in [0, 1), got {self.min_node_share!r}")


@dataclass(frozen=True)
class NodeWindow:
    """What one node served in the window: request, failure and timeout deltas, and its percentiles over the
    window (from its latency buckets; where it has none, the ones it reported at the window's end). `restarted`: its counters went backwards (or its uptime is shorter than the window), so the
    deltas cover only the time since it restarted."""

    node: str
    requests: PerKind
    failures: PerKind
    timeouts: PerKind
    p50: PerKind
    p99: PerKind
    restarted: bool = False


@dataclass(frozen=True)
class Window:
    """The traffic of one interval [start, end] over the nodes that answered at both ends."""

    start: float
    end: float
    nodes: tuple[NodeWindow, ...]
    restarted: tuple[str, ...] = ()     # counted from their restart only
    missing: tuple[str, ...] = ()       # asked, or read at the start, but did not answer at the end: left out
    unmatched: tuple[str, ...] = ()     # no reading at the start to subtract: left out
    settings: WindowSettings = WindowSettings()

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def partial(self) -> bool:
        """Some node's traffic in the window is not fully counted: the operations per second are a lower
        bound. The mix stays usable."""
        return bool(self.restarted or self.missing or self.unmatched)

    @property
    def requests(self) -> PerKind:
        """Requests per kind summed over the nodes (each request counted once, by its coordinator)."""
        return PerKind(*(sum(n.requests.get(k) or 0.0 for n in self.nodes) for k in KINDS))

    @property
    def operations(self) -> float:
        return self.requests.total

    @property
    def failures(self) -> float:
        """Failed and timed-out requests over the nodes and kinds."""
        return sum(n.failures.total + n.timeouts.total for n in self.nodes)

    @property
    def ops_per_second(self) -> float:
        """Operations the cluster served per second over the window."""
        return self.operations / self.seconds

    @property
    def mix(self) -> PerKind:
        """The read, write and scan shares of the window's operations; all None in a window without any."""
        return self.requests.shares()

    def p99(self, kind: str) -> float | None:
        """The window's p99 latency of `kind` in microseconds: the worst node's, among the nodes that served at
        least `min_node_share` of the kind's operations.

        Why the worst node's rather than a mean weighted by operations. A percentile of the whole cluster is
        not any mean of the nodes' percentiles. It does lie between their smallest and their largest, so the
        worst node's p99 is an upper bound on it. A weighted mean can also hide one slow node, for instance the
        one that just restarted with cold caches, behind several fast ones, and the clients routed to that node
        do see its tail. A node serving only a sliver of the kind has a p99 that rests on a handful of requests
        and would make the maximum noise, so it is skipped. None when no node qualifies."""
        total = self.requests.get(kind) or 0.0
        if total <= 0:
            return None
        values = [n.p99.get(kind) for n in self.nodes
                  if (n.requests.get(kind) or 0.0) >= self.settings.min_node_share * total and n.p99.get(kind)
                  is not None]
        return max(values) if values else None

    @property
    def p99_read(self) -> float | None:
        return self.p99("read")

    @property
    def p99_write(self) -> float | None:
        return self.p99("write")

    def only(self, nodes: "set[str] | frozenset[str]") -> "Window":
        """The part of the window served by `nodes` (as coordinators), partial when one of them is."""
        return Window(self.start, self.end, tuple(n for n in self.nodes if n.node in nodes),
                      restarted=tuple(n for n in self.restarted if n in nodes),
                      missing=tuple(n for n in self.missing if n in nodes),
                      unmatched=tuple(n for n in self.unmatched if n in nodes), settings=self.settings)

    def summary(self) -> dict:
        """The window's figures as plain data, for storing and printing."""
        return {"start": self.start, "end": self.end, "ops_per_second": self.ops_per_second,
                "operations": self.operations, "mix": self.mix.as_dict(), "failures": self.failures,
                "p99_us": {k: self.p99(k) for k in KINDS}, "partial": self.partial,
                "restarted": list(self.restarted), "missing": list(self.missing), "unmatched": list(self.unmatched)}


def _delta(now: PerKind, before: PerKind) -> tuple[PerKind, bool]:
    """now - before per kind, and whether any counter went backwards."""
    backwards = any((now.get(k) or 0.0) < (before.get(k) or 0.0) for k in KINDS)
    return PerKind(*((now.get(k) or 0.0) - (before.get(k) or 0.0) for k in KINDS)), backwards


def window_between(before: Snapshot, after: Snapshot, settings: WindowSettings = WindowSettings()) -> Window:
    """The window from `before` to `after`: each node's deltas of requests, failures and timeouts, and its
    percentiles over the window (`_window_percentiles`).

    A node restarted within the window shows counters smaller than before, or an uptime that grew by clearly less
    than the window (UPTIME_SLACK_S less; when only `after` has one: shorter than the window).
    Its counters then hold what it served since the restart, and those become its deltas: the operations served
    before the restart inside this window are lost to the reading, so the window is partial (a lower bound),
    never negative. A node in `before`, or asked at `after`, that is absent from `after` did not answer and is
    named in `missing` (so a window no node answered for is partial, not one without traffic). A
    node only in `after` has no starting point: when its uptime shows it started within the window its counters
    are all within the window and it counts as restarted; otherwise it is named in `unmatched` and left out."""
    seconds = after.at - before.at
    if not math.isfinite(seconds) or seconds <= 0:
        raise UsageError(f"a window needs its end after its start, got {before.at!r} -> {after.at!r}")
    nodes, restarted, unmatched = [], [], []
    for name in sorted(after.nodes):
        now = after.nodes[name]
        now.check(name)
        old = before.nodes.get(name)
        if old is not None and old.uptime_seconds is not None and now.uptime_seconds is not None:
            # a node up all the window aged by about its length (the readings' own delays aside): one that aged
            # clearly less restarted within it, even when it was itself young at the start
            fresh = now.uptime_seconds < old.uptime_seconds + seconds - min(UPTIME_SLACK_S, seconds / 2)
        else:
            fresh = now.uptime_seconds is not None and now.uptime_seconds < seconds
        if old is None and not fresh:
            unmatched.append(name)
            continue
        if old is None or fresh:
            deltas, back = (now.requests, now.failures, now.timeouts), True
            p50, p99 = _window_percentiles(now, None)
        else:
            old.check(name)
            pairs = [_delta(now.requests, old.requests), _delta(now.failures, old.failures),
                     _delta(now.timeouts, old.timeouts)]
            back = any(b for _, b in pairs)
            deltas = (now.requests, now.failures, now.timeouts) if back else tuple(d for d, _ in pairs)
            p50, p99 = _window_percentiles(now, None if back else old)
        if back:
            restarted.append(name)
        nodes.append(NodeWindow(name, *deltas, p50=p50, p99=p99, restarted=back))
    missing = tuple(sorted((set(before.nodes) | set(after.asked)) - set(after.nodes)))
    return Window(before.at, after.at, tuple(nodes), tuple(restarted), missing, tuple(unmatched), settings)
