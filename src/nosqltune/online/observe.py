"""The node side of online re-tuning: reading the request counters a window needs, and applying live changes.

This is the one module of the package that talks to nodes: over JMX through loadgen's NodeInternals
(`systems.cassandra.internals.client_requests` and `set_live`), and over CQL for the table options that change
live (`alter_table`). The rest of the package stays free of I/O.

- `node_counters` turns one node's `requests` answer into the `NodeCounters` of window.py: the scopes Read,
  Write and RangeSlice become reads, writes and scans; failures are the Failures plus the Unavailables (the client
  sees both as failed requests); percentiles are converted to microseconds from the timer's own unit and are None
  for a kind the node has not served; the JVM's uptime exposes a restart.
- `snapshot_of` builds a `Snapshot` from the answers of several nodes. A node that did not answer, or whose
  answer cannot be read, is left out of the snapshot and said in one line through `say`. It never raises for one
  node, so the loop that reads a window goes on (window_between then names the node as missing).
- `read_snapshot` asks every node at once and stamps the snapshot with the middle of the reading.
- `apply_live` applies each live change of a plan on every node and returns what each node read back. A value
  read back that differs from the one asked, or a node that refused or did not answer, is in the outcome and
  said, never hidden.
- `alter_table` applies the live table options (the caching of rows, the memtable) with ALTER TABLE, once for the
  cluster, and reads the table's schema back: a map option such as caching keeps the keys no knob sets.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import UsageError
from ..systems.cassandra import internals
from .plan import Change
from .window import KINDS, NodeCounters, PerKind, Snapshot

SCOPES = {"read": "Read", "write": "Write", "scan": "RangeSlice"}   # kind -> ClientRequest scope
_TO_MICROSECONDS = {"nanoseconds": 1e-3, "microseconds": 1.0, "milliseconds": 1e3, "seconds": 1e6}
_NOT_JMX = ("table", "keyspace")   # live through ALTER TABLE / ALTER KEYSPACE (CQL, once per cluster), not JMX


@dataclass(frozen=True)
class JmxNode:
    """A node as the online loop reaches it: its name in windows and decisions, its JMX port and host."""

    name: str
    jmx_port: int
    host: str | None = None   # None: loopback, as the nodes nosqltune starts


def _one_line(text: object, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _count(scope: Mapping[str, Any], key: str) -> float:
    value = scope.get(key, 0)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a count >= 0, got {value!r}")
    return float(value)


def _percentile(scope: Mapping[str, Any], key: str, requests: float) -> float | None:
    """The percentile in microseconds; None for a kind without requests or a percentile the node did not give."""
    value = scope.get(key)
    if requests <= 0 or value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a latency >= 0, got {value!r}")
    unit = scope.get("unit") or "microseconds"   # Cassandra's request timers report microseconds
    factor = _TO_MICROSECONDS.get(str(unit).lower())
    if factor is None:
        raise ValueError(f"unknown latency unit {unit!r}")
    return float(value) * factor


def _buckets(scope: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The scope's cumulative counts per latency bucket, when given in microseconds (the unit Cassandra's request
    timers keep them in); None otherwise, and the reported percentiles stand in."""
    counts = scope.get("buckets")
    if counts is None or str(scope.get("unit") or "microseconds").lower() != "microseconds":
        return None
    if not isinstance(counts, list) or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts):
        raise ValueError("buckets must be a list of counts >= 0")
    return tuple(counts)


def node_counters(answer: Mapping[str, Any]) -> NodeCounters:
    """One node's `requests` answer (internals.client_requests) as NodeCounters. A scope that is absent counts
    0 requests (Cassandra registers RangeSlice's metrics at the first range scan). ValueError when the answer is
    not of that shape."""
    if not isinstance(answer, Mapping):
        raise ValueError(f"expected a JSON object, got {type(answer).__name__}")
    scopes = answer.get("scopes")
    if scopes is None:
        scopes = {}
    if not isinstance(scopes, Mapping):
        raise ValueError("scopes must be an object")
    requests, failures, timeouts, p50, p99, buckets = {}, {}, {}, {}, {}, {}
    for kind in KINDS:
        scope = scopes.get(SCOPES[kind]) or {}
        if not isinstance(scope, Mapping):
            raise ValueError(f"scope {SCOPES[kind]} must be an object")
        requests[kind] = _count(scope, "count")
        failures[kind] = _count(scope, "failures") + _count(scope, "unavailables")
        timeouts[kind] = _count(scope, "timeouts")
        p50[kind] = _percentile(scope, "p50", requests[kind])
        p99[kind] = _percentile(scope, "p99", requests[kind])
        counts = _buckets(scope)
        if counts is not None:
            buckets[kind] = counts
    uptime_ms = answer.get("uptime_ms")
    if uptime_ms is not None and (isinstance(uptime_ms, bool) or not isinstance(uptime_ms, (int, float))
                                  or not math.isfinite(uptime_ms) or uptime_ms < 0):
        raise ValueError(f"uptime_ms must be >= 0, got {uptime_ms!r}")
    return NodeCounters(requests=PerKind(**requests), failures=PerKind(**failures), timeouts=PerKind(**timeouts),
                        p50=PerKind(**p50), p99=PerKind(**p99),
                        uptime_seconds=None if uptime_ms is None else uptime_ms / 1000.0, buckets=buckets)


def snapshot_of(at: float, answers: Mapping[str, Any], say: Callable[[str], None] = lambda _: None) -> Snapshot:
    """The Snapshot at time `at` of the nodes whose answer (node name -> `requests` answer) could be read. An
    answer that is an exception (the node did not answer), None, or not of the expected shape leaves its node out,
    said in one line through `say`."""
    nodes = {}
    for name, answer in answers.items():
        if isinstance(answer, BaseException) or answer is None:
            why = _one_line(answer) if answer is not None else "no answer"
            say(f"node {name}: request counters not read ({why}); left out of this window")
            continue
        try:
            counters = node_counters(answer)
            counters.check(name)
        except (ValueError, TypeError, KeyError, UsageError) as exc:
            say(f"node {name}: request counters not understood ({_one_line(exc)}); left out of this window")
            continue
        nodes[name] = counters
    return Snapshot(at=at, nodes=nodes, asked=tuple(answers))


def read_snapshot(nodes: Sequence[JmxNode], timeout: float = 15.0, say: Callable[[str], None] = lambda _: None,
                  clock: Callable[[], float] = time.monotonic,
                  read: Callable[..., dict] | None = None) -> Snapshot:
    """Ask every node for its request counters at once (each answer takes a short-lived JVM, about a second) and
    build the Snapshot, stamped with the middle of the reading on `clock`. `read` (jmx_port, timeout=, host=) ->
    answer defaults to internals.client_requests. A node that does not answer within `timeout` is left out and
    said; nothing here raises for one node."""
    read = read or internals.client_requests

    def ask(node: JmxNode):
        try:
            return read(node.jmx_port, timeout=timeout, host=node.host)
        except Exception as exc:   # one node's failure is data for this window, not the end of the loop
            return exc

    started = clock()
    if nodes:
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            answers = dict(zip((n.name for n in nodes), pool.map(ask, nodes)))
    else:
        answers = {}
    ended = clock()
    return snapshot_of((started + ended) / 2.0, answers, say)


# ------------------------------------------------------------------------------------------ live changes

@dataclass(frozen=True)
class ReadBack:
    """One live change on one node (or on the table's schema, node `schema`): the value asked, the value reported
    after it (None if none was; a number for a node setting, the knob's own choice for a table option), why it
    was not applied (`error`, None when it was), and the value the node reported just before it was set (`before`:
    what a rollback puts back; None where it was not read)."""

    knob: str
    node: str
    asked: Any
    read_back: Any = None
    unit: str | None = None
    error: str | None = None
    before: Any = None

    @property
    def applied(self) -> bool:
        return self.error is None

    @property
    def differs(self) -> bool:
        """Applied, but another value than the one asked is reported (or none)."""
        if self.error is not None:
            return False
        if self.read_back is None:
            return True
        if isinstance(self.read_back, str) or isinstance(self.asked, str):
            return str(self.asked) != str(self.read_back)
        try:
            return not math.isclose(float(self.asked), float(self.read_back), rel_tol=1e-9, abs_tol=1e-9)
        except (TypeError, ValueError):
            return True

    def as_dict(self) -> dict:
        return {"knob": self.knob, "node": self.node, "asked": self.asked, "read_back": self.read_back,
                "unit": self.unit, "error": self.error, "differs": self.differs, "before": self.before}


@dataclass(frozen=True)
class LiveOutcome:
    """What `apply_live` did: one ReadBack per change and node, and the live changes it left to the caller
    (`not_jmx`: table and keyspace options, which change with ALTER TABLE through CQL, once for the cluster)."""

    results: tuple[ReadBack, ...]
    not_jmx: tuple[Change, ...] = ()

    @property
    def failed(self) -> tuple[ReadBack, ...]:
        return tuple(r for r in self.results if not r.applied)

    @property
    def differing(self) -> tuple[ReadBack, ...]:
        return tuple(r for r in self.results if r.differs)

    @property
    def ok(self) -> bool:
        """Every change reached every node and reads back as asked."""
        return not self.failed and not self.differing

    def as_dict(self) -> dict:
        return {"results": [r.as_dict() for r in self.results], "not_jmx": [c.as_dict() for c in self.not_jmx],
                "ok": self.ok}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def apply_live(changes: Iterable[Change], nodes: Sequence[JmxNode], timeout: float = 30.0,
               say: Callable[[str], None] = lambda _: None, setter: Callable[..., dict] | None = None) -> LiveOutcome:
    """Apply each live change (Plan.live) on every node over JMX, knob by knob, and read each back. `setter`
    (jmx_port, knob, value, timeout=, host=) -> answer defaults to internals.set_live. A node that refuses or
    does not answer gets an error in its ReadBack and a line through `say`, and the others go on; a value read
    back that differs from the one asked is said too. Table and keyspace options are not node settings: they are
    returned in `not_jmx` for the caller's ALTER TABLE. A change that is not live, or a node setting without a JMX
    path, is a UsageError raised before any node is touched (a restart or a rewrite is decided elsewhere)."""
    setter = setter or internals.set_live
    changes = tuple(changes)
    for change in changes:   # the whole plan is checked before any node is touched
        if change.route != "live":
            raise UsageError(f"{change.knob} is not a live change (route {change.route}): apply_live takes Plan.live")
        if change.applies not in _NOT_JMX:
            internals.jmx_knob(change.knob)
    results, not_jmx = [], []
    for change in changes:
        if change.applies in _NOT_JMX:
            not_jmx.append(change)
            continue
        for node in nodes:
            try:
                answer = setter(node.jmx_port, change.knob, change.after, timeout=timeout, host=node.host)
            except Exception as exc:   # a node that refuses or does not answer: said, and the others go on
                result = ReadBack(change.knob, node.name, change.after, error=_one_line(exc))
                say(f"node {node.name}: {change.knob} = {change.after} not applied ({result.error})")
                results.append(result)
                continue
            answer = answer if isinstance(answer, Mapping) else {}
            result = ReadBack(change.knob, node.name, change.after, _number(answer.get("value_read_back")),
                              answer.get("unit"), before=_number(answer.get("value_before")))
            if result.differs:
                unit = f" {result.unit}" if result.unit else ""
                got = "nothing" if result.read_back is None else f"{result.read_back:g}{unit}"
                say(f"node {node.name}: {change.knob} asked {change.after}{unit}, read back {got}")
            results.append(result)
    return LiveOutcome(tuple(results), tuple(not_jmx))


@dataclass(frozen=True)
class TableTarget:
    """The table whose options change live (ALTER TABLE, once for the cluster) and a node's CQL address to send
    the statement to."""

    host: str
    port: int = 9042
    keyspace: str = "ycsb"
    table: str = "usertable"

    def __post_init__(self) -> None:
        check_cql_name("keyspace", self.keyspace)
        check_cql_name("table", self.table)


def check_cql_name(what: str, name: Any) -> None:
    """A keyspace or table name that needs no quoting in CQL (lower case: CQL folds an unquoted name to it, and the
    schema tables hold it so); UsageError (one line) otherwise."""
    if not (isinstance(name, str) and name.isidentifier() and name.isascii() and name == name.lower()):
        raise UsageError(f"the {what} must be a plain CQL name (lower-case letters, digits, _), got {name!r}")


def _table_row(sess, target: TableTarget) -> dict[str, Any]:
    row = sess.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
                       (target.keyspace, target.table)).one()
    if row is None:
        raise UsageError(f"no table {target.keyspace}.{target.table} on the cluster")
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in row._asdict().items()}


def _as_choice(knob, reported: Any) -> Any:
    """A table option as the schema reports it, in the knob's own terms (its choice rendered so), else as is."""
    for choice in getattr(knob, "choices", None) or ():
        if str(knob.rendered(choice)) == str(reported):
            return choice
    return reported


def alter_table(changes: Iterable[Change], space, target: TableTarget, timeout: float = 30.0,
                say: Callable[[str], None] = lambda _: None, connect: Callable[[], Any] | None = None
                ) -> tuple[ReadBack, ...]:
    """Apply table options live: per option, read the table's schema, set the knobs' keys in it (a map option
    keeps the keys no knob sets), ALTER TABLE, and read the schema back; one ReadBack per change, node `schema`.
    `connect()` returns a context manager yielding a CQL session (default: the python driver to `target`). A
    refused statement or a cluster that does not answer is an error in the ReadBacks and one line through `say`."""
    from ..systems.cassandra import cql
    from ..systems.cassandra.config import alter_table as statement

    connect = connect or (lambda: cql.session(target.host, target.port, timeout=timeout))
    by_option: dict[str, list[Change]] = {}
    for change in changes:
        by_option.setdefault(space[change.knob].key.partition(".")[0], []).append(change)
    results: list[ReadBack] = []

    def failed(group: list[Change], exc: BaseException) -> None:
        error = _one_line(exc)
        results.extend(ReadBack(c.knob, "schema", c.after, error=error) for c in group)
        say(f"table {target.keyspace}.{target.table}: {', '.join(f'{c.knob} = {c.after}' for c in group)} not "
            f"applied ({error})")

    try:
        with connect() as sess:
            for option, group in by_option.items():
                try:
                    value = _table_row(sess, target).get(option)
                    for change in group:
                        knob = space[change.knob]
                        sub = knob.key.partition(".")[2]
                        if sub:
                            value = {**(value or {}), sub: str(knob.rendered(change.after))}
                        else:
                            value = knob.rendered(change.after)
                    sess.execute(statement(target.keyspace, target.table, {option: value}))
                except Exception as exc:   # refused by Cassandra: said, the other options go on
                    failed(group, exc)
                    continue
                try:
                    after = _table_row(sess, target).get(option)
                except Exception as exc:   # applied, but not read back: reported as nothing read back
                    say(f"table {target.keyspace}.{target.table}: {option} changed, but its schema was not read "
                        f"back ({_one_line(exc)})")
                    results.extend(ReadBack(c.knob, "schema", c.after) for c in group)
                    continue
                for change in group:
                    knob = space[change.knob]
                    sub = knob.key.partition(".")[2]
                    reported = (after or {}).get(sub) if sub else after
                    result = ReadBack(change.knob, "schema", change.after, _as_choice(knob, reported))
                    if result.differs:
                        say(f"table {target.keyspace}.{target.table}: {change.knob} asked {change.after}, read back "
                            f"{'nothing' if reported is None else reported}")
                    results.append(result)
    except Exception as exc:   # no session: every change not yet answered fails
        answered = {r.knob for r in results}
        left = [c for group in by_option.values() for c in group if c.knob not in answered]
        if left:
            failed(left, exc)
    return tuple(results)
