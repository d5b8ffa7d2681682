"""A table's data from a `nodetool snapshot` (`--data snapshot:DIR`): what a replay of captured traffic reads.

`nodetool snapshot -t TAG KEYSPACE.TABLE` hard-links the table's SSTables into
<data>/<keyspace>/<table>-<id>/snapshots/<tag>/ beside a `schema.cql` that recreates the table. A trial's dataset is
built from it once (systems/cassandra/trial.py): the keyspace and the table created on the rig's node from that
schema, the SSTables copied in and imported (`nodetool import`), then kept in the dataset cache like any other.

What is stored with a trial names the snapshot (its folder, digest, keyspace, table and size), never its rows.
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


def read_snapshot(folder: Path, free_bytes: int | None = None) -> dict[str, Any]:
    """What a trial stores of the snapshot in `folder`: {"dir", "keyspace", "table", "schema", "bytes",
    "sstables", "digest"}. SnapshotError (one line) when it is not a snapshot of one table, or larger than
    `free_bytes` (the disk free for datasets: the build copies it once, a trial's node holds a copy)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SnapshotError(f"--data snapshot:{folder}: not a directory (give the folder `nodetool snapshot` made: "
                            "<data>/<keyspace>/<table>-<id>/snapshots/<tag>)")
    schema_path = folder / "schema.cql"
    if not schema_path.is_file():
        raise SnapshotError(f"--data snapshot:{folder}: no schema.cql (a snapshot's folder holds one beside its "
                            "SSTables)")
    files = sorted(p for p in folder.iterdir() if p.is_file())
    data = [p for p in files if p.name.endswith("-Data.db")]
    if not data:
        raise SnapshotError(f"--data snapshot:{folder}: no SSTable (no *-Data.db file): the table was empty when "
                            "it was snapshotted, or this is not its snapshot folder")
    schema = schema_path.read_text(errors="replace")
    keyspace, table, statement = table_statement(schema)
    size = sum(p.stat().st_size for p in files)
    if free_bytes is not None and 2 * size > free_bytes:
        raise SnapshotError(f"--data snapshot:{folder}: {size / 1e9:.1f} GB of SSTables need about "
                            f"{2 * size / 1e9:.1f} GB free for datasets (a copy kept, a copy a trial's node holds); "
                            f"{free_bytes / 1e9:.1f} GB are")
    digest = hashlib.sha256(schema.encode())
    for p in files:
        digest.update(f"{p.name}\0{p.stat().st_size}\0".encode())
    return {"dir": str(folder.resolve()), "keyspace": keyspace, "table": table, "schema": statement,
            "bytes": size, "sstables": len(data), "digest": digest.hexdigest()}


def sstable_files(snapshot: dict[str, Any]) -> list[Path]:
    """The snapshot's SSTable components (what an import takes), SnapshotError when they changed since it was
    read."""
    folder = Path(snapshot["dir"])
    found = read_snapshot(folder)
    if found["digest"] != snapshot["digest"]:
        raise SnapshotError(f"the snapshot at {folder} changed since the study recorded it")
    return [p for p in sorted(folder.iterdir()) if p.is_file() and p.name not in ("manifest.json", "schema.cql")]
