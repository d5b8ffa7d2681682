"""A table's data from a `nodetool snapshot` (`--data snapshot:DIR`): what a replay of captured traffic reads.

`nodetool snapshot -t TAG KEYSPACE.TABLE` hard-links the table's SSTables into
<data>/<keyspace>/<table>-<id>/snapshots/<tag>/ beside a `schema.cql` that recreates the table. A trial's dataset is
built from it once (systems/cassandra/trial.py): the keyspace and the table created on the rig's node from that
schema, the SSTables copied in and imported (`nodetool import`), then kept in the dataset cache like any other.

A node holds its token ranges' share of the table: a capture of a cluster's traffic replays on the snapshots of
every node, gathered as the folders of one folder (node1/, node2/, ...; each node's SSTables are imported into the
rig's one node, so at RF > 1 a row comes in once per replica and reads merge the copies). The snapshots must be of
one table at one schema. Which token ranges a node owned is not in its snapshot (the SSTables, schema.cql and
manifest.json), and with vnodes each node's SSTables span most of the ring, so the ranges cannot be checked
beforehand: a replay counts the reads that find no row instead (replay.missed_reads).

What is stored with a trial names the snapshot (its folder, digest, keyspace, table, size and node folders), never
its rows.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from ..errors import UsageError

PREFIX = "snapshot:"
_CREATE_TABLE = re.compile(r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                           r"(\"(?:[^\"]|\"\")+\"|\w+)\s*\.\s*(\"(?:[^\"]|\"\")+\"|\w+)\s*\(", re.IGNORECASE)
# the table id a snapshot's schema.cql carries (WITH ID = ...): the rig's table gets its own
_TABLE_ID = re.compile(r"\bID\s*=\s*[0-9a-fA-F-]{36}\s*(AND\s+)?", re.IGNORECASE)


class SnapshotError(UsageError):
    """A snapshot that cannot be used as given: one line, exit 2."""


def cql_name(name: str) -> str:
    """A keyspace or table name as CQL takes it: quoted unless it is a plain lower-case identifier."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'


def _name(raw: str) -> str:
    return raw[1:-1].replace('""', '"') if raw.startswith('"') else raw.lower()


def table_statement(schema: str) -> tuple[str, str, str]:
    """(keyspace, table, CREATE TABLE IF NOT EXISTS ...) of a snapshot's schema.cql, without the table id.
    SnapshotError for a schema with user types (not handled yet) or without one table."""
    statements = [s.strip() for s in re.sub(r"--[^\n]*|//[^\n]*", "", schema).split(";") if s.strip()]
    if any(re.match(r"CREATE\s+TYPE", s, re.IGNORECASE) for s in statements):
        raise SnapshotError("the snapshot's schema.cql creates user types, which a replay's data does not handle "
                            "yet: snapshot a table without them")
    tables = [s for s in statements if _CREATE_TABLE.match(s)]
    if len(tables) != 1:
        raise SnapshotError(f"the snapshot's schema.cql holds {len(tables)} CREATE TABLE statements, not one")
    match = _CREATE_TABLE.match(tables[0])
    keyspace, table = _name(match.group(1)), _name(match.group(2))
    body = _TABLE_ID.sub("", tables[0][match.end():])
    body = re.sub(r"\bWITH\s*$", "", body.rstrip(), flags=re.IGNORECASE)
    return keyspace, table, f"CREATE TABLE IF NOT EXISTS {match.group(1)}.{match.group(2)} ({body}"


def table_options(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's table options as its schema.cql sets them (compaction, compression, caching, gc grace ...),
    read as a profile's are: what a study's table knobs start from. Clauses that are not table options
    (CLUSTERING ORDER BY, extensions) are left out."""
    from .profile import TABLE_OPTIONS, ProfileError, cql_literal, split_and, split_definition

    parts = split_definition(snapshot["schema"])
    out: dict[str, Any] = {}
    for clause in split_and(parts[2] if parts else ""):
        key, eq, value = clause.partition("=")
        key = key.strip().lower()
        if eq and key in TABLE_OPTIONS:
            try:
                out[key] = cql_literal(value.strip(), "schema.cql")
            except ProfileError:   # a value the reader cannot take stays the table's, unsearched
                continue
    return out


def _read_node(folder: Path, spec: Path) -> tuple[dict[str, Any], list[Path]]:
    """One node's snapshot folder: (its keyspace, table, schema statement, bytes, SSTables), its files."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    if not any(p.name.endswith("-Data.db") for p in files):
        raise SnapshotError(f"--data snapshot:{spec}: no SSTable (no *-Data.db file) in {folder}: the table was "
                            "empty when it was snapshotted, or this is not its snapshot folder")
    schema = (folder / "schema.cql").read_text(errors="replace")
    try:
        keyspace, table, statement = table_statement(schema)
    except SnapshotError as exc:
        raise SnapshotError(f"--data snapshot:{spec}: {folder.name}: {exc}") from None
    return ({"keyspace": keyspace, "table": table, "schema": statement, "text": schema,
             "bytes": sum(p.stat().st_size for p in files),
             "sstables": sum(1 for p in files if p.name.endswith("-Data.db"))}, files)


def _digest(schema: str, files: list[Path]) -> str:
    digest = hashlib.sha256(schema.encode())
    for p in files:
        digest.update(f"{p.name}\0{p.stat().st_size}\0".encode())
    return digest.hexdigest()


def node_folders(folder: Path) -> list[Path]:
    """The snapshot folders at `folder`: itself when it holds a schema.cql (one node's snapshot), else its
    subfolders that do (one per node: every node's snapshot of the table, gathered into one folder)."""
    if (folder / "schema.cql").is_file():
        return [folder]
    return sorted(p for p in folder.iterdir() if p.is_dir() and (p / "schema.cql").is_file())


def read_snapshot(folder: Path, free_bytes: int | None = None) -> dict[str, Any]:
    """What a trial stores of the snapshot in `folder`: {"dir", "keyspace", "table", "schema", "bytes",
    "sstables", "digest"}, and "nodes" (the node folders' names) when `folder` gathers several nodes' snapshots
    of the table. SnapshotError (one line) when it is not a snapshot of one table, the nodes' snapshots are of
    different tables or schemas, or it is larger than `free_bytes` (the disk free for datasets: the build copies it
    once, a trial's node holds a copy)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SnapshotError(f"--data snapshot:{folder}: not a directory (give the folder `nodetool snapshot` made: "
                            "<data>/<keyspace>/<table>-<id>/snapshots/<tag>)")
    nodes = node_folders(folder)
    if not nodes:
        raise SnapshotError(f"--data snapshot:{folder}: no schema.cql (a snapshot's folder holds one beside its "
                            "SSTables; a folder of several nodes' snapshots holds one in each of its folders)")
    read = [_read_node(node, folder) for node in nodes]
    first, _ = read[0]
    for node, (other, _) in zip(nodes[1:], read[1:]):
        if (other["keyspace"], other["table"]) != (first["keyspace"], first["table"]):
            raise SnapshotError(f"--data snapshot:{folder}: {node.name} holds {other['keyspace']}.{other['table']} "
                                f"and {nodes[0].name} {first['keyspace']}.{first['table']}: give one table's "
                                "snapshot from each node")
        if other["schema"] != first["schema"]:
            raise SnapshotError(f"--data snapshot:{folder}: the schema.cql of {node.name} differs from "
                                f"{nodes[0].name}'s: snapshot the nodes at one schema")
    size = sum(r["bytes"] for r, _ in read)
    if free_bytes is not None and 2 * size > free_bytes:
        raise SnapshotError(f"--data snapshot:{folder}: {size / 1e9:.1f} GB of SSTables need about "
                            f"{2 * size / 1e9:.1f} GB free for datasets (a copy kept, a copy a trial's node holds); "
                            f"{free_bytes / 1e9:.1f} GB are")
    if len(nodes) == 1:
        digest = _digest(first["text"], read[0][1])
    else:   # each node's digest under its folder's name
        digest = hashlib.sha256("".join(f"{n.name}\0{_digest(r['text'], files)}\0"
                                        for n, (r, files) in zip(nodes, read)).encode()).hexdigest()
    return {"dir": str(folder.resolve()), "keyspace": first["keyspace"], "table": first["table"],
            "schema": first["schema"], "bytes": size, "sstables": sum(r["sstables"] for r, _ in read),
            "digest": digest, **({"nodes": [n.name for n in nodes]} if len(nodes) > 1 else {})}


def sstable_files(snapshot: dict[str, Any]) -> list[list[Path]]:
    """The snapshot's SSTable components (what an import takes), one list per node's snapshot; SnapshotError when
    they changed since it was read."""
    folder = Path(snapshot["dir"])
    found = read_snapshot(folder)
    if found["digest"] != snapshot["digest"]:
        raise SnapshotError(f"the snapshot at {folder} changed since the study recorded it")
    return [[p for p in sorted(node.iterdir()) if p.is_file() and p.name not in ("manifest.json", "schema.cql")]
            for node in node_folders(folder)]
