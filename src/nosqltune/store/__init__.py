"""Trial store: studies, trials and environment fingerprints behind one interface (`base.Store`), addressed by
URL: SQLite (a path or sqlite:///path, the default) or PostgreSQL (postgresql://user@host:port/db), the same
behaviour on both (store.sql holds what they share)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError
from ..runtime.paths import make_folders, nearest_existing, remove_folders
from .base import LEASE_TTL_S, Lease, Store, StudyBusy, TrialState
from .sql import SCHEMA_VERSION
from .sqlite import SqliteStore

__all__ = ["LEASE_TTL_S", "SCHEMA_VERSION", "Lease", "SqliteStore", "Store", "StudyBusy", "TrialState",
           "is_server_url", "open_existing_store", "open_for_reading", "open_reader", "open_store", "public_url",
           "side_folder", "store_exists", "store_path"]

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server_url(url_or_path: str) -> bool:
    """Whether a study URL names a database server (PostgreSQL) rather than a SQLite file."""
    return str(url_or_path).startswith(SERVER_SCHEMES)


def store_path(url_or_path: str) -> Path | None:
    """The file behind a SQLite study URL or path (None for an in-memory store or a PostgreSQL URL); UsageError
    for another scheme."""
    text = str(url_or_path)
    if is_server_url(text):
        return None
    if "://" in text and not text.startswith("sqlite://"):
        raise UsageError(f"unsupported study URL {text.split('://')[0]}://...: a study store is a SQLite file (a "
                         "path or sqlite:///path) or a PostgreSQL database (postgresql://user@host:port/db)")
    path = text[len("sqlite:///"):] if text.startswith("sqlite:///") else text
    return None if path == ":memory:" else Path(path)


def store_exists(url_or_path: str) -> bool:
    """Whether there is a store to read or resume: a SQLite file that exists, or any PostgreSQL URL (the server
    says, when it is opened)."""
    path = store_path(url_or_path)
    return is_server_url(url_or_path) or (path is not None and path.exists())


def public_url(url_or_path: str) -> str:
    """A study URL fit to be printed or stored: a PostgreSQL URL without its password."""
    if is_server_url(url_or_path):
        from .postgresql import redact

        return redact(str(url_or_path))
    return str(url_or_path)


def side_folder(url_or_path: str) -> Path:
    """Where a study's side files go (irace's folder, models): beside a SQLite file; for a PostgreSQL study a
    folder of this machine named after the server and database (no credentials), under .nosqltune/."""
    path = store_path(url_or_path)
    if path is not None:
        return path
    if is_server_url(url_or_path):
        from urllib.parse import urlsplit

        parts = urlsplit(str(url_or_path))
        name = "-".join(p for p in (parts.hostname or "local", str(parts.port or ""), parts.path.strip("/")) if p)
        return Path(".nosqltune") / f"pg-{''.join(c if c.isalnum() or c in '-_.' else '_' for c in name)}"
    return Path(".nosqltune") / "memory"


def open_store(url_or_path: str) -> Store:
    """`sqlite:///path/to.db`, `sqlite:///:memory:`, a plain file path (the file and its folder are created when
    missing) or `postgresql://user@host:port/db` (the database must exist; the tables are created). Bad input
    (another scheme, a directory, a place that cannot be written, a file that is not a store, a server that
    refuses) is a one-line UsageError and leaves nothing behind."""
    if is_server_url(url_or_path):
        from .postgresql import PostgresStore

        return PostgresStore(str(url_or_path))
    path = store_path(url_or_path)
    if path is None:
        return SqliteStore(":memory:")
    if path.is_dir():
        raise UsageError(f"study store {path} is a directory: give a file in it, e.g. {path / 'study.db'}")
    created = _make_parents(path)
    existed = path.exists()
    try:
        if existed and not os.access(path, os.R_OK | os.W_OK):
            raise UsageError(f"study store {path} cannot be read and written by this user")
        try:
            return SqliteStore(path)
        except UsageError:
            raise
        except Exception as exc:   # sqlite3.OperationalError and the like: say where, in one line
            raise UsageError(f"cannot open the study store {path}: {str(exc).splitlines()[0]}") from None
    except BaseException:
        if not existed:
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
                leftover.unlink(missing_ok=True)
        remove_folders(created)
        raise


def open_existing_store(url_or_path: str) -> Store:
    """A store that must exist already (reading commands never create one)."""
    if not is_server_url(url_or_path) and not store_exists(url_or_path):
        raise UsageError(f"no study store at {url_or_path}: give the path or URL of an existing store")
    return open_store(url_or_path)


def open_reader(url_or_path: str) -> Store:
    """An existing store opened for reading only (the dashboard): a SQLite file in SQLite's read-only mode, a
    PostgreSQL session whose transactions are read-only; nothing is created, migrated or written."""
    if is_server_url(url_or_path):
        from .postgresql import PostgresStore

        return PostgresStore(str(url_or_path), read_only=True)
    path = store_path(url_or_path)
    if path is None or not path.is_file():
        raise UsageError(f"no study store at {url_or_path}: give the path or URL of an existing store")
    try:
        return SqliteStore(path, read_only=True)
    except UsageError:
        raise
    except Exception as exc:   # sqlite3.OperationalError (a file this user cannot read) and the like
        raise UsageError(f"cannot open the study store {path}: {str(exc).splitlines()[0]}") from None


def open_for_reading(url_or_path: str) -> Store:
    """An existing store for a command that only reads it (export). A SQLite file without a write-ahead log (a store
    checkpointed for git) is read in SQLite's read-only mode, so it stays byte for byte as it was: opening it for
    writing would switch it to the log. Opened as usual: a file in the log's mode already (read-only, SQLite would
    leave the log's side files behind), a store of an older schema (it is migrated, since it cannot be read as it
    is), a server."""
    path = store_path(url_or_path)   # None for a server
    if path is None or not path.is_file() or _write_ahead_logged(path):
        return open_existing_store(url_or_path)
    store = open_reader(url_or_path)
    if store.schema_version >= SCHEMA_VERSION:
        return store
    store.close()
    return open_existing_store(url_or_path)


def _write_ahead_logged(path: Path) -> bool:
    """Whether a SQLite file's header says write-ahead logging (its read and write versions, bytes 18-19, are 2)."""
    try:
        with open(path, "rb") as f:
            return f.read(20)[18:20] == b"\x02\x02"
    except OSError:
        return False


def _make_parents(path: Path) -> list[Path]:
    """Create the missing folders above `path`; returns those created (outermost first), so a failure can
    take them away again."""
    existing, missing = nearest_existing(path.absolute().parent)
    if not existing.is_dir():
        raise UsageError(f"cannot create the study store {path}: {existing} is not a directory: give --study a path "
                         "in a folder")
    try:
        return make_folders(missing)
    except OSError as exc:
        raise UsageError(f"cannot create the study store {path}: {exc.strerror} ({exc.filename}): give --study a path "
                         "in a folder you can write") from None
