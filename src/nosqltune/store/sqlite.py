"""The SQLite backend, the zero-setup default: one file per store, WAL so that readers work while a study runs;
every write is one `BEGIN IMMEDIATE` transaction (the store's write lock, see store.sql). The schema version is
SQLite's `user_version`."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

from ..errors import NosqltuneError, UsageError
from .sql import QUEUE_COLUMNS, SCHEMA_VERSION, TABLES, SqlStore, statements

ID, REAL = "INTEGER PRIMARY KEY", "REAL"
BUSY_WAIT_S = 30   # how long a write waits for another program's lock on the store before it gives up


class StoreUnavailable(NosqltuneError):
    """The store cannot be written now (locked by another program, disk full): the study stops, resumable."""


def _add_meta_column(db: sqlite3.Connection) -> None:
    """Version 1: trials carry tuning bookkeeping (`meta`); stores from before it lack the column."""
    if "meta" not in _columns(db, "trials"):
        db.execute("ALTER TABLE trials ADD COLUMN meta TEXT")


def _add_leases(db: sqlite3.Connection) -> None:
    """Version 2: who runs trials in a study (one process at a time)."""
    db.execute(statements(TABLES, ID, REAL)[-1])


def _add_queue_columns(db: sqlite3.Connection) -> None:
    """Version 3: the queue (a claimed trial's worker and heartbeat, the stale trial a retry stands for)."""
    have = _columns(db, "trials")
    for name, kind in QUEUE_COLUMNS:
        if name not in have:
            db.execute(f"ALTER TABLE trials ADD COLUMN {name} {kind.format(REAL=REAL)}")


def _columns(db: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}


# version -> the step that reaches it from the one before
MIGRATIONS = {1: _add_meta_column, 2: _add_leases, 3: _add_queue_columns}
assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))


class SqliteStore(SqlStore):
    def __init__(self, path: str | Path, read_only: bool = False) -> None:
        super().__init__()
        self.path = str(path)
        self.url = self.path if self.path == ":memory:" else f"sqlite:///{self.path}"
        if read_only:   # SQLite refuses every write on it; the file is neither migrated nor switched to WAL
            self._db = sqlite3.connect(f"{Path(self.path).absolute().as_uri()}?mode=ro", uri=True,
                                       timeout=BUSY_WAIT_S, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            try:
                self.schema_version, tables = self._schema(self._db)
                if "studies" not in tables:
                    raise UsageError(f"{self.path} is not a nosqltune study store (it has no studies): give --study "
                                     "another file")
            except sqlite3.DatabaseError as exc:
                self._db.close()
                raise UsageError(f"{self.path} is not a nosqltune study store ({exc}): give --study another "
                                 "file") from None
            except BaseException:
                self._db.close()
                raise
            return
        self._db = sqlite3.connect(self.path, timeout=BUSY_WAIT_S, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA foreign_keys=ON")
            self._schema(self._db)   # before WAL mode, which rewrites the file's header: a file refused stays as it was
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise UsageError(f"{self.path} is not a nosqltune study store ({exc}): give --study another file") from None
        except BaseException:
            self._db.close()
            raise

    def _schema(self, db: sqlite3.Connection) -> tuple[int, set[str]]:
        """The store's schema version and tables; UsageError for a store of a newer nosqltune or another program."""
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UsageError(f"{self.path} was written by a newer nosqltune (store schema {version}, this one "
                             f"knows up to {SCHEMA_VERSION}): upgrade nosqltune")
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if version == 0 and tables and "studies" not in tables:
            raise UsageError(f"{self.path} is a SQLite database but not a nosqltune study store: give --study "
                             "another file")
        return version, tables

    def _migrate(self) -> None:
        with self._write() as db:
            version, tables = self._schema(db)
            if version == 0 and not tables:          # a new store: the current schema at once
                for statement in statements(TABLES, ID, REAL):
                    db.execute(statement)
            else:
                for step in range(max(version, 0) + 1, SCHEMA_VERSION + 1):
                    MIGRATIONS[step](db)
            if version != SCHEMA_VERSION:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _write(self, wait_s: float | None = None) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before its first read (BEGIN IMMEDIATE): no other writer in between.
        The wait for the lock (`wait_s`, BUSY_WAIT_S when None) counts from the request, whichever lock it
        waits for: this connection's, held by another thread of ours (a lease's heartbeat waiting for the same
        busy store), then SQLite's. Two waits in a row would let a lock held for longer than the wait go
        unnoticed."""
        wait = BUSY_WAIT_S if wait_s is None else wait_s
        deadline = time.monotonic() + wait
        with self._unavailable_as_error(wait):
            if not self._lock.acquire(timeout=wait):
                raise sqlite3.OperationalError("database is locked (by another thread of this process)")
            try:
                self._db.execute(f"PRAGMA busy_timeout = {int(max(0.0, deadline - time.monotonic()) * 1000)}")
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                finally:
                    self._db.execute(f"PRAGMA busy_timeout = {BUSY_WAIT_S * 1000}")
                try:
                    yield self._db
                except BaseException:
                    if self._db.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            finally:
                self._lock.release()

    def _read(self, query: str, args: tuple | list = ()) -> list[dict[str, Any]]:
        with self._lock, self._unavailable_as_error():
            return [dict(r) for r in self._db.execute(query, args).fetchall()]

    @contextlib.contextmanager
    def _unavailable_as_error(self, wait_s: float = BUSY_WAIT_S) -> Iterator[None]:
        """A store that another program holds locked past the wait, or whose disk is full or read-only, is the
        user's to fix: one line saying so (what was stored stays; `tune --resume` goes on from there)."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise StoreUnavailable(f"the study store {self.path} stayed locked by another program for more "
                                       f"than {wait_s:g} s: stop it (e.g. an open sqlite3 shell), then run again "
                                       "(tune --resume to go on)") from None
            if "full" in text or "disk I/O" in text or "readonly" in text or "read-only" in text:
                raise StoreUnavailable(f"cannot write the study store {self.path} ({text}): free space or make it "
                                       "writable, then run again (tune --resume to go on)") from None
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (before committing a study file to git)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
