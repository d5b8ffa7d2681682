"""A captured workload: what a node's full query log holds, turned into query kinds, their values and their pace.

Cassandra 4.0 and later record every query a node coordinates, with its bound values and start time, when the
full query log is on (`nodetool enablefullquerylog`). loadgen's QueryLogReader prints a log's entries as JSON lines
(systems/cassandra/querylog.py runs it); `CaptureBuilder` takes those entries and makes the capture file:

- **kinds**: each distinct statement, as the prepared statement it is (its `?` markers), with its count and share of
  the replayable statements, its table, its operation (read: SELECT; write: INSERT, UPDATE, DELETE) and its
  consistency level. A statement sent with its values written into the text (no bound values) is made a kind by
  putting `?` where its literals were; its literals become its values;
- **a sample of values** per kind: a reservoir of the values it was run with (the same value as often as in the log,
  at most `sample` per kind);
- **the pace**: the statements started in each second of the log, and the sequence of (start time, kind) that a
  replay plays back at the recorded pace (up to MAX_EVENTS of them).

Left out, counted with their share: batches, statements that are not SELECT, INSERT, UPDATE or DELETE (schema
changes, USE, grants), and statements on the system keyspaces (drivers' own queries of system.local and peers).

Bound values are production data: they stay in the capture file, which lives in the dataset folder (or where the
user puts it), never in a study's store. `redact` replaces every sampled value by one of the same size, the same
value always by the same replacement (so the keys' repeat pattern, their distribution, is kept), made from a key
that is not kept.
"""

from __future__ import annotations

import gzip
import hashlib
import hmac
import json
import os
import random
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..errors import UsageError

CAPTURE_FORMAT = 1
SHIPPED_CAPTURES = Path(__file__).parent / "captures"   # `replay:NAME` finds these by name
SAMPLE_PER_KIND = 10_000      # values kept per kind
MAX_EVENTS = 2_000_000        # (start, kind) pairs kept for a replay at the recorded pace
SYSTEM_KEYSPACES = frozenset({"system", "system_schema", "system_auth", "system_distributed", "system_traces",
                              "system_views", "system_virtual_schema", "system_cluster_metadata"})
OPERATIONS = {"SELECT": "read", "INSERT": "write", "UPDATE": "write", "DELETE": "write"}
SCHEMA_VERBS = {"CREATE", "ALTER", "DROP", "TRUNCATE"}
# why an entry is not replayed, as the capture file and its summary say it
LEFT_OUT = {"batch": "batches", "schema": "schema changes (CREATE, ALTER, DROP, TRUNCATE)",
            "other": "other statements (USE, GRANT, LIST, ...)", "system": "queries of the system keyspaces"}

# literals of a statement sent with its values in the text, in the order CQL's lexer sees them; a quoted name and a
# word (identifiers, keywords, true/false/null) are kept as they are
_TOKEN = re.compile(r"""
   (?P<string>'(?:[^']|'')*')
  |(?P<dollar>\$\$.*?\$\$)
  |(?P<name>"(?:[^"]|"")*")
  |(?P<uuid>(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-]))
  |(?P<blob>(?<!\w)0[xX][0-9a-fA-F]*(?!\w))
  |(?P<number>(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.]))
  |(?P<word>[A-Za-z_]\w*)
""", re.VERBOSE | re.DOTALL)
_TABLE = r'((?:"(?:[^"]|"")+"|\w+)(?:\s*\.\s*(?:"(?:[^"]|"")+"|\w+))?)'
_TABLE_OF = {"SELECT": re.compile(r"\bFROM\s+" + _TABLE, re.IGNORECASE),
             "DELETE": re.compile(r"\bFROM\s+" + _TABLE, re.IGNORECASE),
             "INSERT": re.compile(r"^\s*INSERT\s+INTO\s+" + _TABLE, re.IGNORECASE),
             "UPDATE": re.compile(r"^\s*UPDATE\s+" + _TABLE, re.IGNORECASE)}


class CaptureError(UsageError):
    """A capture that cannot be made or read as given: one line, exit 2."""


def literal_template(cql: str) -> tuple[str, list[str]]:
    """`cql` with `?` in place of each literal (strings, numbers, UUIDs, blobs), and the literals in order."""
    parts, literals, at = [], [], 0
    for match in _TOKEN.finditer(cql):
        if match.lastgroup in ("name", "word"):
            continue
        parts.append(cql[at:match.start()])
        parts.append("?")
        literals.append(match.group())
        at = match.end()
    parts.append(cql[at:])
    return "".join(parts), literals


def fill_template(template: str, literals: list[str]) -> str:
    """The statement `literal_template` took apart: each `?` outside quotes given its literal back, in order."""
    out, at, given = [], 0, iter(literals)
    for match in re.finditer(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\$\$.*?\$\$|\?", template, re.DOTALL):
        if match.group() == "?":
            out.append(template[at:match.start()])
            out.append(next(given))
            at = match.end()
    out.append(template[at:])
    return "".join(out)


def _name(raw: str) -> str:
    """A CQL name as Cassandra keeps it: a quoted one as written, an unquoted one in lower case."""
    raw = raw.strip()
    return raw[1:-1].replace('""', '"') if raw.startswith('"') else raw.lower()


def statement_table(cql: str, keyspace: str | None) -> tuple[str, str] | None:
    """(keyspace, table) a SELECT, INSERT, UPDATE or DELETE names, the session's keyspace when it names none."""
    verb = cql.lstrip().split(None, 1)[0].upper() if cql.strip() else ""
    pattern = _TABLE_OF.get(verb)
    match = pattern.search(cql) if pattern else None
    if not match:
        return None
    names = re.findall(r'"(?:[^"]|"")+"|\w+', match.group(1))
    if len(names) == 2:
        return _name(names[0]), _name(names[1])
    return (keyspace, _name(names[0])) if keyspace else None


@dataclass
class Kind:
    """One query kind: a statement as prepared, and how the log ran it."""

    name: str
    cql: str
    operation: str            # read or write
    keyspace: str
    table: str
    consistency: str
    literals: bool            # sent with its values in the text: a replay writes them back into it
    count: int = 0
    values: list[list[Any]] = field(default_factory=list)
    seen: int = 0             # values offered to the reservoir

    def offer(self, values: list[Any], limit: int, rng: random.Random) -> None:
        """Reservoir sampling (Vitter's algorithm R): each of the kind's runs kept with the same chance."""
        self.seen += 1
        if len(self.values) < limit:
            self.values.append(values)
            return
        slot = rng.randrange(self.seen)
        if slot < limit:
            self.values[slot] = values


class CaptureBuilder:
    """Takes a log's entries (QueryLogReader's lines as dicts), one log after another, and makes the capture."""

    def __init__(self, sample: int = SAMPLE_PER_KIND, max_events: int = MAX_EVENTS, seed: int = 0) -> None:
        if sample < 1:
            raise CaptureError(f"--sample must be at least 1 value per kind, not {sample}")
        self.sample = sample
        self.max_events = max_events
        self.rng = random.Random(seed)
        self.kinds: dict[str, Kind] = {}
        self.left_out: dict[str, int] = {reason: 0 for reason in LEFT_OUT}
        self.starts = array("q")
        self.kind_of = array("i")
        self.order: list[str] = []             # the kinds' keys, first seen first
        self.index: dict[str, int] = {}        # a kind's key -> its place in `order`
        self.events_dropped = 0
        self.sources: list[dict[str, Any]] = []
        self.skipped_types: dict[str, int] = {}

    def add_log(self, path: str, entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """Read one log's entries (its end line included); returns what it held."""
        source: dict[str, Any] = {"path": path, "entries": 0, "first_ms": None, "last_ms": None}
        ended = False
        for entry in entries:
            if entry.get("end"):
                ended = True
                for kind, n in (entry.get("skipped") or {}).items():
                    self.skipped_types[kind] = self.skipped_types.get(kind, 0) + n
                continue
            source["entries"] += 1
            t = int(entry["t"])
            source["first_ms"] = t if source["first_ms"] is None else min(source["first_ms"], t)
            source["last_ms"] = t if source["last_ms"] is None else max(source["last_ms"], t)
            self.add(entry)
        if not ended:
            raise CaptureError(f"the log at {path} was not read to its end")
        self.sources.append(source)
        return source

    def add(self, entry: dict[str, Any]) -> None:
        """One entry: a kind's run, or counted as left out."""
        if entry.get("type") == "batch":
            self.left_out["batch"] += 1
            return
        cql = " ".join(str(entry.get("query", "")).split())
        verb = cql.split(" ", 1)[0].upper() if cql else ""
        if verb not in OPERATIONS:
            self.left_out["schema" if verb in SCHEMA_VERBS else "other"] += 1
            return
        values = list(entry.get("values") or [])
        literals = not values
        key_text = cql
        if literals:
            key_text, values = literal_template(cql)
        where = statement_table(key_text, entry.get("ks"))
        if where is None:
            self.left_out["other"] += 1
            return
        if where[0] in SYSTEM_KEYSPACES:
            self.left_out["system"] += 1
            return
        key = f"{where[0]}\0{entry.get('cl')}\0{literals}\0{key_text}"
        kind = self.kinds.get(key)
        if kind is None:
            kind = Kind(name="", cql=key_text, operation=OPERATIONS[verb], keyspace=where[0], table=where[1],
                        consistency=str(entry.get("cl")), literals=literals)
            self.kinds[key] = kind
            self.index[key] = len(self.order)
            self.order.append(key)
        kind.count += 1
        kind.offer(values, self.sample, self.rng)
        if len(self.starts) < self.max_events:
            self.starts.append(int(entry["t"]))
            self.kind_of.append(self.index[key])
        else:
            self.events_dropped += 1

    def capture(self) -> dict[str, Any]:
        """The capture file's content. CaptureError when nothing in the logs can be replayed."""
        replayable = sum(kind.count for kind in self.kinds.values())
        left = sum(self.left_out.values())
        total = replayable + left
        if not self.sources or not any(source["entries"] for source in self.sources):
            raise CaptureError("the log holds no queries" + (
                f" (only entries of type {', '.join(sorted(self.skipped_types))}: an audit log, not a full query "
                "log?)" if self.skipped_types else ""))
        if not replayable:
            said = ", ".join(f"{n} {LEFT_OUT[r]}" for r, n in self.left_out.items() if n)
            raise CaptureError(f"nothing in the log can be replayed: {said}")
        order = sorted(range(len(self.order)), key=lambda i: (-self.kinds[self.order[i]].count, i))
        renumber = {old: new for new, old in enumerate(order)}
        kinds = [self.kinds[self.order[i]] for i in order]
        _name_kinds(kinds)
        pairs = sorted(zip(self.starts, (renumber[k] for k in self.kind_of)))
        start = pairs[0][0]
        end = max(source["last_ms"] for source in self.sources if source["last_ms"] is not None)
        seconds = max(1, (end - start) // 1000 + 1)
        pace = [0] * seconds
        for t, _ in pairs:
            pace[(t - start) // 1000] += 1
        logs = len(self.sources)
        return {
            "format": CAPTURE_FORMAT,
            "sources": self.sources,
            "view": ("one node's log: the traffic this node coordinated, not the cluster's" if logs == 1 else
                     f"{logs} logs merged by start time"),
            "start_ms": start,
            "seconds": (end - start) / 1000,
            "statements": replayable,
            "left_out": {reason: {"count": n, "share": n / total} for reason, n in self.left_out.items() if n},
            "skipped_types": self.skipped_types,
            "tables": sorted({f"{k.keyspace}.{k.table}" for k in kinds}),
            "kinds": [{"name": k.name, "cql": k.cql, "operation": k.operation, "keyspace": k.keyspace,
                       "table": k.table, "consistency": k.consistency, "literals": k.literals, "count": k.count,
                       "share": k.count / replayable, "values": k.values} for k in kinds],
            "pace": {"step_s": 1, "statements": pace},
            "events": {"t_ms": [t - start for t, _ in pairs], "kind": [k for _, k in pairs],
                       "dropped": self.events_dropped},
            "redacted": False,
        }


def _name_kinds(kinds: list[Kind]) -> None:
    """`select-usertable`, `update-usertable`, then `select-usertable-2` for a second SELECT of the table."""
    taken: dict[str, int] = {}
    for kind in kinds:
        base = f"{kind.cql.split(' ', 1)[0].lower()}-{kind.table}"
        taken[base] = taken.get(base, 0) + 1
        kind.name = base if taken[base] == 1 else f"{base}-{taken[base]}"


# ---- redaction ---------------------------------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789"


class Redactor:
    """Same-size replacements, the same value always to the same one, from a key made here and not kept."""

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key if key is not None else os.urandom(32)

    def _stream(self, what: str, n: int, attempt: int) -> bytes:
        out, block = b"", 0
        while len(out) < n:
            out += hmac.new(self.key, f"{what}\0{attempt}\0{block}".encode(), hashlib.sha256).digest()
            block += 1
        return out[:n]

    def bound(self, value: Any) -> Any:
        """A bound value (hex bytes; a null stays)."""
        if value is None:
            return value
        raw = bytes.fromhex(value)
        text = _printable(raw)
        for attempt in range(16):
            stream = self._stream("b" + value, len(raw), attempt)
            if text:
                new = bytes(ord(_LETTERS[b % len(_LETTERS)]) for b in stream)
            else:
                new = bytearray(stream)
                if len(raw) == 16 and raw[8] & 0xC0 == 0x80:   # a UUID: its version and variant kept, so valid
                    new[6] = (raw[6] & 0xF0) | (new[6] & 0x0F)
                    new[8] = 0x80 | (new[8] & 0x3F)
                new = bytes(new)
            if new != raw or len(raw) == 0:
                return new.hex()
        return new.hex()

    def literal(self, literal: str) -> str:
        """A CQL literal: a string, number, UUID or blob of the same length and form."""
        for attempt in range(16):
            stream = self._stream("l" + literal, len(literal), attempt)
            if literal.startswith("'") or literal.startswith("$$"):
                quote = 1 if literal.startswith("'") else 2
                body = literal[quote:-quote]
                new_body = "".join(_LETTERS[b % 26] for b in stream[:len(body)])
                new = literal[:quote] + new_body + literal[-quote:]
            elif re.fullmatch(r"0[xX][0-9a-fA-F]*", literal):
                new = literal[:2] + "".join("0123456789abcdef"[b % 16] for b in stream[2:len(literal)])
            elif "-" in literal[1:] and len(literal) == 36:   # a UUID: version digit kept
                digits = iter("0123456789abcdef"[b % 16] for b in stream)
                new = "".join(c if c == "-" or i == 14 else next(digits) for i, c in enumerate(literal))
            else:   # a number: sign, point and exponent kept, digits replaced, no leading zero added
                chars = []
                for i, c in enumerate(literal):
                    if c.isdigit():
                        first = i == 0 or not literal[i - 1].isdigit()
                        lead = first and (i + 1 < len(literal) and literal[i + 1].isdigit())
                        chars.append("123456789"[stream[i] % 9] if lead else "0123456789"[stream[i] % 10])
                    else:
                        chars.append(c)
                new = "".join(chars)
            if new != literal:
                return new
        return new


def _printable(raw: bytes) -> bool:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return bool(text) and all(c.isprintable() for c in text)


def redact(capture: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """The capture with every sampled value replaced (see Redactor); a capture already redacted stays as it is."""
    if capture.get("redacted"):
        return capture
    redactor = redactor or Redactor()
    kinds = []
    for kind in capture["kinds"]:
        change = redactor.literal if kind["literals"] else redactor.bound
        kinds.append({**kind, "values": [[change(v) for v in values] for values in kind["values"]]})
    return {**capture, "kinds": kinds, "redacted": True}


# ---- the file ----------------------------------------------------------------------------------------------------

def write_capture(capture: dict[str, Any], path: Path) -> None:
    """Written whole or not at all (a temporary file renamed), readable by the owner only: it holds data. A path
    ending in .gz is written compressed (the shipped capture is); read_capture reads either."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    text = json.dumps(capture, separators=(",", ":")).encode()
    with os.fdopen(fd, "wb") as out:
        out.write(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)
    os.replace(tmp, path)


def read_capture(path: Path) -> dict[str, Any]:
    """A capture file as `nosqltune capture` wrote it; CaptureError (one line) otherwise."""
    try:
        raw = Path(path).read_bytes()
        capture = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except FileNotFoundError:
        raise CaptureError(f"no capture file {path}: make one with `nosqltune capture LOG_DIR`") from None
    except (OSError, ValueError, EOFError) as exc:
        raise CaptureError(f"{path} is not a capture file ({exc.__class__.__name__})") from None
    if not isinstance(capture, dict) or capture.get("format") != CAPTURE_FORMAT or "kinds" not in capture:
        raise CaptureError(f"{path} is not a capture file of format {CAPTURE_FORMAT} (made by `nosqltune capture`)")
    return capture


def summary(capture: dict[str, Any]) -> list[str]:
    """What a capture holds, in lines for people."""
    lines = [f"{capture['statements']} statements over {capture['seconds']:.0f} s ({capture['view']}); "
             f"tables {', '.join(capture['tables'])}"]
    for kind in capture["kinds"]:
        lines.append(f"  {kind['name']:<28} {kind['share']:6.1%}  {kind['consistency']:<12} {kind['cql']}")
    for reason, left in capture.get("left_out", {}).items():
        lines.append(f"  left out: {left['count']} {LEFT_OUT[reason]} ({left['share']:.1%} of the log)")
    if capture["events"].get("dropped"):
        lines.append(f"  the replay sequence keeps the first {len(capture['events']['t_ms'])} statements "
                     f"({capture['events']['dropped']} more are in the pace and shares only)")
    if capture.get("redacted"):
        lines.append("  values redacted: same sizes and repeat pattern, none of the log's own")
    return lines
