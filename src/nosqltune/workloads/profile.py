"""Workloads from cassandra-stress user profiles (`--workload profile:FILE`): the operator's own table, the
distributions of its columns and its queries, read, checked and turned into a plain description the trial's
client and the dataset writer follow.

What is read (docs/workloads.md lists it with the refused parts):
- `keyspace`, `keyspace_definition`: the keyspace; its replication is rewritten for the rig (`replication_for`);
- `table`, `table_definition`: one CREATE TABLE with its columns, primary key, clustering order and options
  (compaction, compression, caching, default_time_to_live, gc_grace_seconds, ...): the options are the profile's
  baseline, which knobs override;
- `columnspec`: per column `size` (characters or bytes of a value; elements of a collection), `population` (how
  many distinct values it takes) and `cluster` (for a clustering column: how many distinct values under each
  parent, so the rows of a partition are the product of its clustering columns' draws);
- `insert`: `partitions` (partitions an insert writes), `select` (the share of a partition's rows it writes, a
  ratio such as `uniform(1..10)/10`), `batchtype` (LOGGED or UNLOGGED: the rows of one partition go in one batch);
- `queries`: name -> `cql` (one SELECT, UPDATE or DELETE with `?` markers) and `fields` (samerow: the bound values
  of one row; multirow: each from any row of the partition);
- `ops` (ours; cassandra-stress takes it on its command line): the mix, e.g. `ops(insert=1,latest=3)`; a mix given
  with the workload (`profile:FILE:ops(...)`) wins over it.

Distributions (cassandra-stress's names): FIXED(n), UNIFORM(min..max), GAUSSIAN(min..max[,stdvrng]) or
GAUSSIAN(min..max,mean,stdev), EXP(min..max), EXTREME(min..max,shape), QEXTREME(min..max,shape,quanta),
SEQ(min..max); `~` in front inverts one; numbers take k, m and b (thousand, million, billion).

Refused by name, with the profile's line: lightweight transactions (IF, an insert `condition`), counters, materialized
views, secondary and SAI indexes, user types and tuples, BATCH in a query, COMPACT STORAGE, a LIMIT, TTL or IN bound
by `?`, `row-population` below 1. Token-range queries are refused when the mix names one (the default mix leaves them
out).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import NosqltuneError

PREFIX = "profile:"
RIG_DATACENTER = "datacenter1"   # SimpleSnitch's data centre, the rig's nodes' (systems/cassandra/base.yaml)
DEFAULT_SIZE = "uniform(4..8)"            # a value's size when columnspec says nothing
DEFAULT_POPULATION = "uniform(1..100b)"   # distinct values of a column when columnspec says nothing
DEFAULT_CLUSTER = "fixed(1)"              # values of a clustering column under each parent
KEYS = {"keyspace", "keyspace_definition", "table", "table_definition", "columnspec", "insert", "queries", "ops",
        "extra_definitions", "token_range_queries", "specname"}
COLUMN_KEYS = {"name", "size", "population", "cluster"}
INSERT_KEYS = {"partitions", "select", "batchtype", "row-population", "condition"}
QUERY_KEYS = {"cql", "fields"}
SCALARS = {"text", "varchar", "ascii", "blob", "int", "bigint", "smallint", "tinyint", "varint", "float", "double",
           "decimal", "boolean", "uuid", "timeuuid", "timestamp", "date", "time", "inet"}
SIZED = {"text", "varchar", "ascii", "blob", "varint", "decimal"}   # `size` is the length of a value
COLLECTIONS = {"set", "list", "map"}
TABLE_OPTIONS = {"bloom_filter_fp_chance", "caching", "comment", "compaction", "compression", "crc_check_chance",
                 "default_time_to_live", "gc_grace_seconds", "max_index_interval", "memtable_flush_period_in_ms",
                 "min_index_interval", "read_repair", "speculative_retry", "additional_write_policy", "memtable",
                 "cdc", "allow_auto_snapshot", "incremental_backups"}
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([kmb]?)\s*$", re.IGNORECASE)
_DISTRIBUTION = re.compile(r"^\s*(~?)\s*([a-z]+)\s*\((.*)\)\s*$", re.IGNORECASE)
_KINDS = {"fixed": "fixed", "uniform": "uniform", "gaussian": "gaussian", "gauss": "gaussian", "normal": "gaussian",
          "norm": "gaussian", "exp": "exp", "extreme": "extreme", "qextreme": "qextreme", "seq": "seq"}


class ProfileError(NosqltuneError):
    """A profile the tool cannot run: one line naming the file, the line and what is wrong (bad input: exit 2)."""

    exit_code = 2


# --- distributions ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Distribution:
    kind: str                   # fixed | uniform | gaussian | exp | extreme | qextreme | seq
    low: int
    high: int
    params: tuple[float, ...] = ()   # gaussian: (stdvrng,) or (mean, stdev); extreme: (shape,); qextreme: (shape, quanta)
    inverted: bool = False

    def mean(self) -> float:
        """About the mean of a draw (for sizes and rows per partition: the data's estimate)."""
        lo, hi = self.low, self.high
        if self.kind == "fixed":
            return float(lo)
        if self.kind == "gaussian" and len(self.params) == 2:
            return min(max(self.params[0], lo), hi)
        if self.kind in ("exp", "extreme", "qextreme"):   # mass near the low end (the high end when inverted)
            skewed = lo + (hi - lo) / (math.e if self.kind == "exp" else 4)
            return hi - (skewed - lo) if self.inverted else skewed
        return (lo + hi) / 2

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def number(text: str, where: str) -> float:
    match = _NUMBER.match(text)
    if not match:
        raise ProfileError(f"{where}: {text.strip()!r} is not a number (digits, with k, m or b for thousand, million, "
                           "billion)")
    scale = {"": 1, "k": 1e3, "m": 1e6, "b": 1e9}[match.group(2).lower()]
    return float(match.group(1)) * scale


def distribution(text: Any, where: str) -> Distribution:
    """'uniform(1..10)', '~exp(1..1k)', 'fixed(5)', 'gaussian(1..100,5)' -> Distribution, or a one-line error."""
    match = _DISTRIBUTION.match(str(text))
    if not match:
        raise ProfileError(f"{where}: {text!r} is not a distribution such as uniform(1..10) or fixed(5)")
    inverted, name, args = match.group(1) == "~", match.group(2).lower(), match.group(3)
    kind = _KINDS.get(name)
    if kind is None:
        raise ProfileError(f"{where}: unknown distribution {name.upper()}: one of FIXED, UNIFORM, GAUSSIAN, EXP, "
                           "EXTREME, QEXTREME, SEQ")
    parts = [p.strip() for p in args.split(",")]
    if kind == "fixed":
        if len(parts) != 1:
            raise ProfileError(f"{where}: FIXED takes one value, e.g. fixed(5)")
        value = int(number(parts[0], where))
        return Distribution("fixed", value, value, inverted=inverted)
    bounds = parts[0].split("..")
    if len(bounds) != 2:
        raise ProfileError(f"{where}: {name.upper()} takes min..max first, e.g. {name}(1..100)")
    low, high = (int(number(b, where)) for b in bounds)
    if low > high:
        raise ProfileError(f"{where}: {name.upper()}({parts[0]}) has its min above its max")
    params = tuple(number(p, where) for p in parts[1:])
    wanted = {"uniform": (0,), "seq": (0,), "exp": (0,), "gaussian": (0, 1, 2), "extreme": (1,),
              "qextreme": (2,)}[kind]
    if len(params) not in wanted:
        raise ProfileError(f"{where}: {name.upper()} takes min..max and {' or '.join(map(str, wanted))} more "
                           f"values, got {len(params)}")
    if kind == "gaussian" and not params:
        params = (3.0,)   # cassandra-stress's default: the range is 3 standard deviations either side of its middle
    return Distribution(kind, low, high, params, inverted)


@dataclass(frozen=True)
class Ratio:
    """A share drawn per operation, e.g. uniform(1..10)/10: the distribution's draw over the divisor."""
    of: Distribution
    divisor: float

    def mean(self) -> float:
        return min(1.0, self.of.mean() / self.divisor)

    def to_dict(self) -> dict[str, Any]:
        return {"of": self.of.to_dict(), "divisor": self.divisor}


def ratio(text: Any, where: str) -> Ratio:
    body, _, divisor = str(text).rpartition("/")
    if not body:
        raise ProfileError(f"{where}: {text!r} is not a ratio such as fixed(1)/1 or uniform(1..10)/10")
    share = Ratio(distribution(body, where), number(divisor, where))
    if share.divisor <= 0 or share.of.low < 0 or share.of.high > share.divisor:
        raise ProfileError(f"{where}: {text!r} must stay within 0..1 (its distribution within 0..{divisor})")
    return share


# --- the table --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    type: str                       # as written, lower case (e.g. text, set<text>, frozen<list<int>>)
    role: str                       # partition | clustering | regular | static
    size: Distribution
    population: Distribution
    cluster: Distribution

    @property
    def base(self) -> str:
        return _base_type(self.type)


_FIXED_BYTES = {"int": 4, "bigint": 8, "smallint": 2, "tinyint": 1, "float": 4, "double": 8, "boolean": 1,
                "uuid": 16, "timeuuid": 16, "timestamp": 8, "date": 4, "time": 8, "inet": 4}


def value_bytes(cql_type: str, size: float) -> float:
    """About the bytes of one value of a type whose `size` draws average `size` (characters, bytes or elements)."""
    inner = _inner_types(cql_type)
    if inner:   # loadgen's elements: 8 characters or their fixed width
        return size * sum(_FIXED_BYTES.get(_base_type(t), 8) for t in inner)
    return _FIXED_BYTES.get(_base_type(cql_type), size)


def _base_type(text: str) -> str:
    text = text.strip().lower()
    if text.startswith("frozen<"):
        text = text[len("frozen<"):-1].strip()
    return text.split("<", 1)[0].strip()


def _inner_types(text: str) -> list[str]:
    text = text.strip().lower()
    if text.startswith("frozen<"):
        text = text[len("frozen<"):-1].strip()
    if "<" not in text:
        return []
    return _split_top(text[text.index("<") + 1:-1])


def identifier(text: str) -> str:
    """A CQL identifier as Cassandra keeps it: a quoted one as written, an unquoted one in lower case."""
    text = text.strip()
    return text[1:-1].replace('""', '"') if len(text) > 1 and text[0] == text[-1] == '"' else text.lower()


def _top_level(text: str):
    """The indices of `text` outside quotes and (), <>, {}, [] (a doubled quote inside a string closes it and opens
    it again)."""
    depth, quote = 0, None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        elif depth == 0:
            yield i


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), <>, {} and quotes."""
    out, start = [], 0
    for i in _top_level(text):
        if text[i] == sep:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [p for p in out if p]


@dataclass(frozen=True)
class Table:
    keyspace: str
    name: str
    columns: dict[str, str]                   # name -> type, in the definition's order
    partition_key: tuple[str, ...]
    clustering: tuple[str, ...]
    static: tuple[str, ...]
    order: dict[str, str]                     # clustering column -> ASC | DESC
    options: dict[str, Any]                   # table options as CQL literals' values


_CREATE_TABLE = re.compile(r"^\s*create\s+table\s+(?:if\s+not\s+exists\s+)?([\w.\"]+)\s*\(", re.IGNORECASE)


def split_definition(cql: str) -> tuple[str, str, str] | None:
    """A CREATE TABLE statement's (name, column list, WITH clause without its WITH) or None when it is not one:
    the column list ends at the parenthesis that closes its own (a WITH clause has parentheses too: CLUSTERING
    ORDER BY (c DESC))."""
    text = cql.strip().rstrip(";").strip()
    match = _CREATE_TABLE.match(text)
    if not match:
        return None
    depth, quote = 1, None
    for i in range(match.end(), len(text)):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                rest = text[i + 1:].strip()
                if rest and not re.match(r"with\s", rest, re.IGNORECASE):
                    return None
                return match.group(1), text[match.end():i], rest[4:].strip() if rest else ""
    return None


def parse_table(cql: str, keyspace: str, where: str) -> Table:
    parts = split_definition(cql)
    if parts is None:
        raise ProfileError(f"{where}: table_definition must be one CREATE TABLE name (columns ...) [WITH ...]")
    name, body, options = parts
    if "." in name:
        keyspace, name = name.split(".", 1)
    name = identifier(name)
    columns: dict[str, str] = {}
    static: list[str] = []
    key_text = None
    for item in _split_top(body):
        if re.match(r"^primary\s+key\s*\(", item, re.IGNORECASE):
            key_text = item[item.index("(") + 1:item.rindex(")")]
            continue
        parts = item.split(None, 1)
        if len(parts) != 2:
            raise ProfileError(f"{where}: cannot read the column {item!r}")
        column, rest = identifier(parts[0]), parts[1].strip()
        single_key = re.search(r"\s+primary\s+key\s*$", rest, re.IGNORECASE)
        if single_key:
            rest = rest[:single_key.start()].strip()
            key_text = column
        is_static = re.search(r"\s+static\s*$", rest, re.IGNORECASE)
        if is_static:
            rest = rest[:is_static.start()].strip()
            static.append(column)
        columns[column] = _check_type(rest.lower(), column, where)
    if key_text is None:
        raise ProfileError(f"{where}: the table has no PRIMARY KEY")
    key_parts = _split_top(key_text)
    first = key_parts[0]
    partition = [identifier(p) for p in (first.strip("()").split(",") if first.startswith("(") else [first])]
    clustering = [identifier(p) for p in key_parts[1:]]
    for column in partition + clustering:
        if column not in columns:
            raise ProfileError(f"{where}: the primary key names {column!r}, which the table lacks")
    order: dict[str, str] = {}
    parsed_options: dict[str, Any] = {}
    for clause in split_and(options):
        lower = clause.lower()
        if lower.startswith("compact storage"):
            raise ProfileError(f"{where}: COMPACT STORAGE is not supported (Cassandra 5.0 dropped it)")
        if lower.startswith("clustering order by"):
            for entry in _split_top(clause[clause.index("(") + 1:clause.rindex(")")]):
                col, _, direction = entry.partition(" ")
                order[identifier(col)] = (direction.strip() or "ASC").upper()
            continue
        key, eq, value = clause.partition("=")
        key = key.strip().lower()
        if not eq or key not in TABLE_OPTIONS:
            raise ProfileError(f"{where}: unknown table option {clause.split('=')[0].strip()!r}")
        parsed_options[key] = cql_literal(value.strip(), where)
    for col in order:
        if col not in clustering:
            raise ProfileError(f"{where}: CLUSTERING ORDER BY names {col!r}, not a clustering column")
    return Table(keyspace, name, columns, tuple(partition), tuple(clustering), tuple(static), order, parsed_options)


def split_and(text: str) -> list[str]:
    """A WITH clause's options, split at AND outside maps, strings and parentheses (a comment may hold any of
    them)."""
    out, start = [], 0
    for i in _top_level(text):
        match = re.match(r"\s+and\s+", text[i:], re.IGNORECASE) if i >= start else None
        if match:
            out.append(text[start:i].strip())
            start = i + match.end()
    out.append(text[start:].strip())
    return [part for part in out if part]


def cql_literal(text: str, where: str) -> Any:
    """A table option's value: a map {'k': 'v', ...}, a string '...', a number or true/false."""
    text = text.strip()
    if text.startswith("{"):
        body = text[1:text.rindex("}")]
        out = {}
        for entry in _split_top(body):
            key, _, value = entry.partition(":")
            out[key.strip().strip("'\"")] = cql_literal(value, where)
        return out
    if text.startswith("'"):
        return text[1:text.rindex("'")].replace("''", "'")
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise ProfileError(f"{where}: cannot read the option value {text!r}") from None


def _check_type(text: str, column: str, where: str) -> str:
    base = _base_type(text)
    if base == "counter":
        raise ProfileError(f"{where}: column {column!r} is a counter: counters are not supported")
    if base in COLLECTIONS:
        for inner in _inner_types(text):
            _check_type(inner, column, where)
        return text
    if base == "tuple" or base not in SCALARS:
        what = "a user type" if base not in ("tuple", "duration", "vector") else f"a {base}"
        raise ProfileError(f"{where}: column {column!r} is {what} ({text}): not supported; use a scalar or a "
                           "set, list or map of scalars")
    return text


# --- replication ------------------------------------------------------------------------------------------------


_CREATE_KEYSPACE = re.compile(r"^\s*create\s+keyspace\s+(?:if\s+not\s+exists\s+)?([\w\"]+)\s+with\s+(.*)$",
                              re.IGNORECASE | re.DOTALL)


def parse_keyspace(cql: str, where: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(name, replication map, other options such as durable_writes)."""
    match = _CREATE_KEYSPACE.match(cql.strip().rstrip(";"))
    if not match:
        raise ProfileError(f"{where}: keyspace_definition must be one CREATE KEYSPACE name WITH replication = {{...}}")
    options = {}
    for clause in split_and(match.group(2)):
        key, _, value = clause.partition("=")
        options[key.strip().lower()] = cql_literal(value, where)
    replication = options.pop("replication", None)
    if not isinstance(replication, dict) or "class" not in replication:
        raise ProfileError(f"{where}: the keyspace has no replication map with a class")
    return identifier(match.group(1)), replication, options


def replication_factor(replication: dict[str, Any]) -> int:
    """The profile's replicas per data centre: SimpleStrategy's factor, or the largest of its data centres'."""
    cls = str(replication.get("class", "")).rsplit(".", 1)[-1]
    if cls == "SimpleStrategy":
        return int(replication.get("replication_factor", 1))
    counts = [int(v) for k, v in replication.items() if k != "class" and str(v).isdigit()]
    return max(counts) if counts else 1


def replication_for(replication: dict[str, Any], nodes: int) -> tuple[dict[str, Any], str | None]:
    """The replication the rig runs: the rig's one data centre, as many replicas as the profile's largest data
    centre keeps but at most the nodes; (the map, the rewrite said in words, None when the map is kept)."""
    factor = min(replication_factor(replication), nodes)
    rewritten = {"class": "NetworkTopologyStrategy", RIG_DATACENTER: factor}
    cls = str(replication.get("class", "")).rsplit(".", 1)[-1]
    if cls == "NetworkTopologyStrategy" and {k: v for k, v in replication.items() if k != "class"} == \
            {RIG_DATACENTER: factor}:
        return rewritten, None
    shown = ", ".join(f"{k}: {v}" for k, v in replication.items())
    return rewritten, (f"replication {{{shown}}} rewritten to {{class: NetworkTopologyStrategy, {RIG_DATACENTER}: "
                       f"{factor}}} (the rig has one data centre of {nodes} node{'s' if nodes > 1 else ''})")


# --- queries ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    name: str
    cql: str
    kind: str                    # select | update | delete | insert
    bound: tuple[str, ...]       # the column each ? binds to, in order
    fields: str                  # samerow | multirow


_BOUND = re.compile(r"(\"(?:[^\"]|\"\")+\"|\w+)\s*(=|<=|>=|<|>|\bcontains\b)\s*\?", re.IGNORECASE)
_WORDS = re.compile(r"\b(if|batch|token|limit|using)\b", re.IGNORECASE)


def parse_query(name: str, spec: Any, table: Table, where: str) -> Query:
    if not isinstance(spec, dict) or "cql" not in spec:
        raise ProfileError(f"{where}: query {name!r} needs a cql: entry")
    unknown = set(spec) - QUERY_KEYS
    if unknown:
        raise ProfileError(f"{where}: query {name!r} has unknown key {sorted(unknown)[0]!r} (cql, fields)")
    cql = " ".join(str(spec["cql"]).split()).rstrip(";")
    fields = str(spec.get("fields", "multirow")).lower()   # cassandra-stress's default
    if fields not in ("samerow", "multirow"):
        raise ProfileError(f"{where}: query {name!r}: fields is samerow or multirow, got {fields!r}")
    kind = cql.split(None, 1)[0].lower() if cql else ""
    if kind == "begin":
        raise ProfileError(f"{where}: query {name!r} is a BATCH: batches are not supported in queries (insert: "
                           "batchtype batches the rows an insert writes)")
    if kind not in ("select", "update", "delete", "insert"):
        raise ProfileError(f"{where}: query {name!r} must be a SELECT, UPDATE, DELETE or INSERT, got {kind.upper()!r}")
    for word in _WORDS.findall(_outside_quotes(cql)):
        word = word.lower()
        if word == "if":
            raise ProfileError(f"{where}: query {name!r} is a lightweight transaction (IF): not supported")
        if word == "token":
            raise ProfileError(f"{where}: query {name!r} reads a token range: token-range queries are not supported")
        if word == "batch":
            raise ProfileError(f"{where}: query {name!r} is a BATCH: batches are not supported in queries")
    if re.search(r"\blimit\s+\?|\bttl\s+\?|\btimestamp\s+\?", cql, re.IGNORECASE):
        raise ProfileError(f"{where}: query {name!r} binds a LIMIT, TTL or TIMESTAMP with ?: give a number")
    if re.search(r"\bin\s*\?|\bin\s*\(\s*\?", cql, re.IGNORECASE):
        raise ProfileError(f"{where}: query {name!r} binds IN with ?: not supported (bind one value per column)")
    target = re.search(r"\b(?:from|update|into)\s+([\w.\"]+)", cql, re.IGNORECASE)
    if not target or identifier(target.group(1).split(".")[-1]) != table.name:
        raise ProfileError(f"{where}: query {name!r} must read or write the profile's table {table.name!r}")
    bound, named = query_columns(cql)
    if cql.count("?") != len(bound):
        raise ProfileError(f"{where}: query {name!r} has a ? the tool cannot tie to a column (write column = ?)")
    for column in bound + named:
        if column not in table.columns:
            raise ProfileError(f"{where}: query {name!r} names column {column!r}, which table {table.name!r} lacks")
    return Query(name, cql, kind, tuple(bound), fields)


def query_columns(cql: str) -> tuple[list[str], list[str]]:
    """(the columns a statement binds with ?, in order: `column = ?` and the like, or an INSERT's column list; the
    plain columns a SELECT lists)."""
    kind = cql.split(None, 1)[0].lower() if cql else ""
    bound = [identifier(b) for b, _ in _BOUND.findall(cql)]
    if kind == "insert" and "(" in cql and ")" in cql:
        bound = [identifier(c.strip()) for c in cql[cql.index("(") + 1:cql.index(")")].split(",")]
    return bound, _named_columns(cql, kind)


def table_columns(cql: str) -> list[str]:
    """The column names a CREATE TABLE statement defines ([] when it is not one)."""
    parts = split_definition(cql)
    if parts is None:
        return []
    names = [re.match(r'\s*("(?:[^"]|"")+"|\w+)', item) for item in _split_top(parts[1])
             if not re.match(r"\s*primary\s+key\s*\(", item, re.IGNORECASE)]
    return [identifier(m.group(1)) for m in names if m]


def _outside_quotes(text: str) -> str:
    return re.sub(r"'[^']*'", "''", text)


def _named_columns(cql: str, kind: str) -> list[str]:
    """The plain columns a SELECT lists (not *, functions or aliases)."""
    if kind != "select":
        return []
    listed = re.match(r"select\s+(?:distinct\s+)?(.*?)\s+from\s", cql, re.IGNORECASE)
    if not listed or listed.group(1).strip() == "*":
        return []
    out = []
    for item in _split_top(listed.group(1)):
        if re.fullmatch(r"\"?\w+\"?", item):
            out.append(identifier(item))
    return out


# --- the mix ----------------------------------------------------------------------------------------------------


def parse_ops(text: str, names: list[str], where: str, token_range: list[str] = ()) -> dict[str, float]:
    """'ops(insert=1,latest=3)' or 'insert=1,latest=3' -> {operation: weight}; every name is insert or a query
    (`token_range`: the profile's token-range queries, refused by name)."""
    body = text.strip()
    if body.lower().startswith("ops(") and body.endswith(")"):
        body = body[4:-1]
    mix: dict[str, float] = {}
    for entry in (e.strip() for e in body.split(",") if e.strip()):
        name, eq, weight = entry.partition("=")
        name = name.strip()
        if not eq:
            raise ProfileError(f"{where}: the mix entry {entry!r} needs a weight, e.g. {name}=1")
        if name in token_range:
            raise ProfileError(f"{where}: the mix names {name!r}, a token-range query: not supported")
        if name not in names:
            raise ProfileError(f"{where}: the mix names {name!r}, which is not insert nor a query of the profile "
                               f"({', '.join(names)})")
        mix[name] = number(weight, where)
    if not mix or not any(v > 0 for v in mix.values()):
        raise ProfileError(f"{where}: the mix names no operation with a positive weight, e.g. ops(insert=1,"
                           f"{(names[1:] or ['insert'])[0]}=3)")
    return mix


# --- the profile ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Insert:
    partitions: Distribution
    select: Ratio
    batchtype: str               # LOGGED | UNLOGGED


@dataclass(frozen=True)
class Profile:
    path: str
    digest: str                  # of the file's content: the dataset cache's key
    keyspace: str
    keyspace_options: dict[str, Any]
    replication: dict[str, Any]
    table: Table
    columns: dict[str, Column]
    insert: Insert
    queries: dict[str, Query]
    ops: dict[str, float]
    table_cql: str = field(repr=False, default="")

    @property
    def name(self) -> str:
        return Path(self.path).stem

    def ttl(self) -> int | None:
        value = self.table.options.get("default_time_to_live")
        return int(value) if value else None

    def to_dict(self) -> dict[str, Any]:
        """What the client and the dataset writer follow, and what a trial stores: plain JSON (lists, not
        tuples), as it reads back from the store."""
        return json.loads(json.dumps(self._fields()))

    def _fields(self) -> dict[str, Any]:
        return {"name": self.name, "digest": self.digest, "keyspace": self.keyspace,
                "keyspace_options": self.keyspace_options, "replication": self.replication,
                "table": asdict(self.table), "columns": {k: asdict(v) for k, v in self.columns.items()},
                "insert": {"partitions": self.insert.partitions.to_dict(), "select": self.insert.select.to_dict(),
                           "batchtype": self.insert.batchtype},
                "queries": {k: asdict(v) for k, v in self.queries.items()}, "ops": self.ops}


def _lines(text: str) -> dict[tuple, int]:
    """Line numbers (1-based) of the profile's mapping keys, by their path of keys."""
    out: dict[tuple, int] = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                here = path + (str(key.value),)
                out[here] = key.start_mark.line + 1
                walk(value, here)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                out[path + (i,)] = item.start_mark.line + 1
                walk(item, path + (i,))

    try:
        walk(yaml.compose(text), ())
    except yaml.YAMLError:
        pass
    return out


def load_profile(path: str | Path, ops: str | None = None) -> Profile:
    """Read and check a profile; `ops`: a mix that wins over the profile's own."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"cannot read profile {path} ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise ProfileError(f"{path}{line}: not YAML ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile is a YAML mapping with keyspace, table, table_definition, ...")
    lines = _lines(text)

    def at(*keys) -> str:
        for n in range(len(keys), 0, -1):
            if keys[:n] in lines:
                return f"{path} line {lines[keys[:n]]}"
        return str(path)

    for key in data:
        if key not in KEYS:
            raise ProfileError(f"{at(key)}: unknown key {key!r} (a profile has {', '.join(sorted(KEYS - {'specname'}))})")
    if data.get("extra_definitions"):
        joined = " ".join(map(str, data["extra_definitions"])).lower()
        what = ("a materialized view" if "materialized view" in joined else
                "a storage-attached (SAI) index" if "storageattachedindex" in joined or "using 'sai'" in joined else
                "a secondary index" if "index" in joined else "extra definitions")
        raise ProfileError(f"{at('extra_definitions')}: {what}: not supported")
    token_range = [str(n) for n in (data.get("token_range_queries") or {})]   # refused if the mix names one
    for key in ("table", "table_definition"):
        if not data.get(key):
            raise ProfileError(f"{path}: the profile has no {key}")
    keyspace_name = str(data.get("keyspace") or "")
    if data.get("keyspace_definition"):
        defined, replication, keyspace_options = parse_keyspace(str(data["keyspace_definition"]),
                                                                at("keyspace_definition"))
        keyspace_name = keyspace_name or defined
    else:
        replication, keyspace_options = {"class": "SimpleStrategy", "replication_factor": 1}, {}
    if not keyspace_name:
        raise ProfileError(f"{path}: the profile has no keyspace")
    keyspace_name = identifier(keyspace_name)
    table = parse_table(str(data["table_definition"]), keyspace_name, at("table_definition"))
    if table.name != identifier(str(data["table"])):
        raise ProfileError(f"{at('table')}: table is {data['table']!r} but table_definition creates {table.name!r}")
    specs: dict[str, dict] = {}
    entries: dict[str, int] = {}   # column -> its columnspec entry, for the line of an error
    for i, spec in enumerate(data.get("columnspec") or []):
        where = at("columnspec", i)
        if not isinstance(spec, dict) or "name" not in spec:
            raise ProfileError(f"{where}: a columnspec entry needs a name")
        unknown = set(spec) - COLUMN_KEYS
        if unknown:
            raise ProfileError(f"{where}: unknown columnspec key {sorted(unknown)[0]!r} (name, size, population, "
                               "cluster)")
        if spec["name"] not in table.columns:
            raise ProfileError(f"{where}: columnspec names {spec['name']!r}, which table {table.name!r} lacks")
        specs[spec["name"]] = spec
        entries[spec["name"]] = i
    columns = {}
    for name, kind in table.columns.items():
        spec = specs.get(name, {})
        where = at("columnspec", entries[name]) if name in entries else at("columnspec")
        role = ("partition" if name in table.partition_key else "clustering" if name in table.clustering else
                "static" if name in table.static else "regular")
        if "cluster" in spec and role != "clustering":
            raise ProfileError(f"{where}: column {name!r} has a cluster distribution but is not a clustering column")
        size = distribution(spec.get("size", DEFAULT_SIZE), where)
        population = distribution(spec.get("population", DEFAULT_POPULATION), where)
        cluster = distribution(spec.get("cluster", DEFAULT_CLUSTER), where)
        if size.low < 0 or population.low < 0 or cluster.low < 1:
            raise ProfileError(f"{where}: column {name!r}: sizes and populations start at 0, clusters at 1")
        columns[name] = Column(name, kind, role, size, population, cluster)
    insert_spec = data.get("insert") or {}
    unknown = set(insert_spec) - INSERT_KEYS
    if unknown:
        first = sorted(unknown)[0]
        hint = " (cassandra-stress takes it on its command line, -insert)" if first in ("visits", "revisit") else ""
        raise ProfileError(f"{at('insert', first)}: unknown insert key {first!r}{hint} (partitions, select, "
                           "batchtype)")
    if insert_spec.get("condition"):
        raise ProfileError(f"{at('insert', 'condition')}: an insert condition makes inserts lightweight "
                           "transactions (IF): not supported")
    if str(insert_spec.get("row-population", "fixed(1)/1")).replace(" ", "").lower() != "fixed(1)/1":
        raise ProfileError(f"{at('insert', 'row-population')}: a row-population below 1 (values left null) is not "
                           "supported")
    batchtype = str(insert_spec.get("batchtype", "LOGGED")).upper()   # cassandra-stress's default
    if batchtype == "COUNTER":
        raise ProfileError(f"{at('insert', 'batchtype')}: COUNTER batches: counters are not supported")
    if batchtype not in ("LOGGED", "UNLOGGED"):
        raise ProfileError(f"{at('insert', 'batchtype')}: batchtype is LOGGED or UNLOGGED, got {batchtype!r}")
    insert = Insert(distribution(insert_spec.get("partitions", "fixed(1)"), at("insert", "partitions")),
                    ratio(insert_spec.get("select", "fixed(1)/1"), at("insert", "select")), batchtype)
    queries = {}
    for name, spec in (data.get("queries") or {}).items():
        if str(name) == "insert":
            raise ProfileError(f"{at('queries', name)}: a query may not be called insert (the profile's writes are)")
        queries[str(name)] = parse_query(str(name), spec, table, at("queries", name))
    names = ["insert", *queries]
    if ops is not None:
        mix = parse_ops(ops, names, f"{path} (the mix given with the workload)", token_range)
    elif data.get("ops"):
        mix = parse_ops(str(data["ops"]), names, at("ops"), token_range)
    else:
        mix = {name: 1.0 for name in names}
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return Profile(str(path), digest, keyspace_name, keyspace_options, replication, table, columns, insert, queries,
                   mix, table_cql=str(data["table_definition"]))


def split_spec(text: str) -> tuple[str, str | None]:
    """'profile:FILE' or 'profile:FILE:ops(...)' -> (FILE, the mix or None)."""
    body = text[len(PREFIX):] if text.startswith(PREFIX) else text
    match = re.match(r"^(.*?):(ops\(.*\))$", body, re.IGNORECASE)
    return (match.group(1), match.group(2)) if match else (body, None)


def split_workloads(text: str) -> list[str]:
    """A --workload list split at its commas, but not at those inside a profile's ops(...)."""
    return [w for w in _split_top(text) if w]


def data_digest(profile: dict[str, Any]) -> str:
    """What shapes a profile's dataset (its keyspace, table and columns, not its queries nor its mix): the dataset
    cache's key, beside the records and the knobs that change the on-disk layout."""
    shaping = {k: profile[k] for k in ("keyspace", "table", "columns")}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()[:16]


# --- what the client and the dataset writer are given -------------------------------------------------------------


def _dist_text(d: dict[str, Any]) -> str:
    """A Distribution (as a dict) in loadgen's form: KIND LOW HIGH INVERTED [P1 [P2]]."""
    params = " ".join(f"{p:g}" for p in d.get("params") or ())
    return f"{d['kind']} {d['low']} {d['high']} {1 if d.get('inverted') else 0}" + (f" {params}" if params else "")


def rows_per_partition(profile: dict[str, Any]) -> float:
    columns = profile["columns"]
    out = 1.0
    for name in profile["table"]["clustering"]:
        out *= _distribution_of(columns[name]["cluster"]).mean()
    return out


def row_bytes(profile: dict[str, Any]) -> float:
    """About the bytes of one row: its values, its share of the partition key, and a row's overhead."""
    table, columns = profile["table"], profile["columns"]

    def mean_size(name):
        return _distribution_of(columns[name]["size"]).mean()

    values = sum(value_bytes(t, mean_size(n)) for n, t in table["columns"].items() if n not in table["partition_key"])
    key = sum(value_bytes(table["columns"][n], mean_size(n)) for n in table["partition_key"])
    return values + key / rows_per_partition(profile) + 8 * len(table["columns"])


def _distribution_of(d: dict[str, Any]) -> Distribution:
    return Distribution(**{**d, "params": tuple(d.get("params") or ())})


def partitions_for(profile: dict[str, Any], records: int) -> int:
    """The partitions of a dataset of `records` rows: the rows over the mean rows of a partition, at least one, at
    most what the key columns' populations allow."""
    space = 1
    for name in profile["table"]["partition_key"]:
        pop = profile["columns"][name]["population"]
        space *= pop["high"] - pop["low"] + 1
    return max(1, min(space, round(records / rows_per_partition(profile))))


def key_distribution(profile: dict[str, Any], partitions: int) -> str:
    """How operations pick partitions: the first key column's population, its shape stretched over 1..partitions."""
    pop = dict(profile["columns"][profile["table"]["partition_key"][0]]["population"])
    span = max(1, pop["high"] - pop["low"])
    params = list(pop.get("params") or ())
    if pop["kind"] == "gaussian" and len(params) == 2:   # an explicit mean and deviation move with the range
        params = [1 + (params[0] - pop["low"]) * (partitions - 1) / span, params[1] * (partitions - 1) / span]
    if pop["kind"] == "fixed":
        return "fixed 1 1 0"
    return _dist_text({**pop, "low": 1, "high": partitions, "params": params})


WINDOW_UNITS = {"MINUTES": 60, "HOURS": 3600, "DAYS": 86400}


def data_time(profile: dict[str, Any]) -> tuple[int, int]:
    """(the table's default TTL in seconds, TimeWindowCompactionStrategy's window in seconds), 0 for none: the
    dataset's rows are written as if at times within the TTL, one SSTable per window."""
    options = profile["table"]["options"]
    ttl = int(options.get("default_time_to_live") or 0)
    compaction = options.get("compaction") or {}
    window = 0
    if str(compaction.get("class", "")).rsplit(".", 1)[-1] == "TimeWindowCompactionStrategy":
        unit = WINDOW_UNITS.get(str(compaction.get("compaction_window_unit", "DAYS")).upper(), 86400)
        window = unit * int(compaction.get("compaction_window_size", 1))
    return ttl, window if ttl else 0


def loadgen_properties(profile: dict[str, Any], records: int, replication_factor: int = 1) -> dict[str, Any]:
    """The profile.* properties of loadgen's ProfileData, ProfileWorkload and ProfileWriter."""
    table, columns = profile["table"], profile["columns"]
    partitions = partitions_for(profile, records)
    props: dict[str, Any] = {"profile.keyspace": profile["keyspace"], "profile.table": table["name"],
                             "profile.partitions": partitions, "profile.columns": ",".join(table["columns"]),
                             "profile.keys": key_distribution(profile, partitions),
                             "profile.ops": ",".join(f"{k}:{v:g}" for k, v in profile["ops"].items()),
                             "profile.insert.partitions": _dist_text(profile["insert"]["partitions"]),
                             "profile.insert.select": f"{_dist_text(profile['insert']['select']['of'])} / "
                                                      f"{profile['insert']['select']['divisor']:g}",
                             "profile.insert.batchtype": profile["insert"]["batchtype"],
                             "profile.queries": ",".join(profile["queries"]),
                             "cassandra.keyspace": profile["keyspace"],
                             "internals.keyspace": profile["keyspace"], "internals.table": table["name"]}
    props["profile.ttl_seconds"], props["profile.window_seconds"] = data_time(profile)
    for name, column in columns.items():
        at = f"profile.column.{name}."
        props[at + "type"] = column["type"]
        props[at + "role"] = column["role"]
        for part in ("size", "population", "cluster"):
            props[at + part] = _dist_text(column[part])
    for name, query in profile["queries"].items():
        at = f"profile.query.{name}."
        props[at + "cql"] = query["cql"]
        props[at + "bound"] = ",".join(query["bound"])
        props[at + "fields"] = query["fields"]
    return props
