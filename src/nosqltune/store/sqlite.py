"""The SQLite backend: one file per store, WAL so that readers work while a study runs; every write that
reads first (trial numbers, merged settings, meta, the lease) is one `BEGIN IMMEDIATE` transaction."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from ..errors import UsageError
from .base import (LEASE_TTL_S, SCHEMA_VERSION, Lease, Store, StudyBusy, TrialState, busy_message, holder_alive,
                   lease_owner)

_TABLES = """
CREATE TABLE IF NOT EXISTS studies (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    system TEXT NOT NULL,
    created_at REAL NOT NULL,
    settings TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS environments (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS trials (
    id INTEGER PRIMARY KEY,
    study_id INTEGER NOT NULL REFERENCES studies(id),
    number INTEGER NOT NULL,
    state TEXT NOT NULL,
    failure_kind TEXT,
    error TEXT,
    log_excerpt TEXT,
    tag TEXT,
    config TEXT NOT NULL,
    workload TEXT NOT NULL,
    metrics TEXT,
    internals TEXT,
    timings TEXT,
    environment_id INTEGER REFERENCES environments(id),
    started_at REAL NOT NULL,
    finished_at REAL,
    meta TEXT,
    UNIQUE (study_id, number)
);
"""

_LEASES = """
CREATE TABLE IF NOT EXISTS leases (
    study_id INTEGER PRIMARY KEY REFERENCES studies(id),
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
"""


def _add_meta_column(db: sqlite3.Connection) -> None:
    """Version 1: trials carry tuning bookkeeping (`meta`); stores from before it lack the column."""
    if "meta" not in {r[1] for r in db.execute("PRAGMA table_info(trials)")}:
        db.execute("ALTER TABLE trials ADD COLUMN meta TEXT")


def _add_leases(db: sqlite3.Connection) -> None:
    """Version 2: who runs trials in a study (one process at a time)."""
    db.execute(_LEASES)


MIGRATIONS = {1: _add_meta_column, 2: _add_leases}   # version -> the step that reaches it from the one before
assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


class SqliteStore(Store):
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.url = self.path if self.path == ":memory:" else f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA foreign_keys=ON")
            if self.path != ":memory:":
                self._db.execute("PRAGMA journal_mode=WAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise UsageError(f"{self.path} is not a nosqltune study store ({exc})") from None

    def _migrate(self) -> None:
        with self._write():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UsageError(f"{self.path} was written by a newer nosqltune (store schema {version}, this one "
                                 f"knows up to {SCHEMA_VERSION}): upgrade nosqltune")
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if version == 0 and tables and "studies" not in tables:
                raise UsageError(f"{self.path} is a SQLite database but not a nosqltune study store")
            if version == 0 and not tables:          # a new store: the current schema at once
                for statement in (_TABLES + _LEASES).split(";"):
                    if statement.strip():
                        self._db.execute(statement)
            else:
                for step in range(max(version, 0) + 1, SCHEMA_VERSION + 1):
                    MIGRATIONS[step](self._db)
            if version != SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextlib.contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken before its first read (BEGIN IMMEDIATE): no other writer in between."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _read(self, query: str, args: tuple | list = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(query, args).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # studies
    def study(self, name: str, system: str = "cassandra", settings: dict | None = None) -> int:
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO studies (name, system, created_at, settings) VALUES (?, ?, ?, ?)",
                       (name, system, time.time(), _dump(settings or {})))
            return db.execute("SELECT id FROM studies WHERE name = ?", (name,)).fetchone()["id"]

    @staticmethod
    def _study_row(row: sqlite3.Row | None) -> dict[str, Any] | None:
        return None if row is None else {**dict(row), "settings": json.loads(row["settings"])}

    def find_study(self, name: str) -> dict[str, Any] | None:
        rows = self._read("SELECT * FROM studies WHERE name = ?", (name,))
        return self._study_row(rows[0] if rows else None)

    def study_by_id(self, study_id: int) -> dict[str, Any] | None:
        rows = self._read("SELECT * FROM studies WHERE id = ?", (study_id,))
        return self._study_row(rows[0] if rows else None)

    def studies(self) -> Iterator[dict[str, Any]]:
        for row in self._read("SELECT * FROM studies ORDER BY id"):
            yield self._study_row(row)

    def update_study_settings(self, study_id: int, changes: dict[str, Any]) -> dict[str, Any]:
        with self._write() as db:
            row = db.execute("SELECT settings FROM studies WHERE id = ?", (study_id,)).fetchone()
            if row is None:
                raise KeyError(f"no study with id {study_id}")
            merged = {**json.loads(row["settings"]), **changes}
            db.execute("UPDATE studies SET settings = ? WHERE id = ?", (_dump(merged), study_id))
        return merged

    # environments
    def environment(self, fingerprint: dict) -> int:
        text = _dump(fingerprint)
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO environments (fingerprint) VALUES (?)", (text,))
            return db.execute("SELECT id FROM environments WHERE fingerprint = ?", (text,)).fetchone()["id"]

    def environments(self) -> dict[int, dict[str, Any]]:
        return {r["id"]: json.loads(r["fingerprint"]) for r in self._read("SELECT * FROM environments ORDER BY id")}

    def environment_of(self, environment_id: int) -> dict[str, Any] | None:
        rows = self._read("SELECT fingerprint FROM environments WHERE id = ?", (environment_id,))
        return json.loads(rows[0]["fingerprint"]) if rows else None

    # trials
    def start_trial(self, study_id: int, config: dict, workload: dict, *, tag: str | None = None,
                    environment_id: int | None = None, meta: dict | None = None) -> int:
        with self._write() as db:
            number = db.execute("SELECT COALESCE(MAX(number), -1) + 1 FROM trials WHERE study_id = ?",
                                (study_id,)).fetchone()[0]
            cur = db.execute(
                "INSERT INTO trials (study_id, number, state, tag, config, workload, environment_id, started_at,"
                " meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (study_id, number, TrialState.RUNNING.value, tag, _dump(config), _dump(workload),
                 environment_id, time.time(), _dump(meta)))
            return cur.lastrowid

    def finish_trial(self, trial_id: int, state: TrialState, *, metrics: dict | None = None,
                     internals: dict | None = None, timings: dict | None = None, failure_kind: str | None = None,
                     error: str | None = None, log_excerpt: str | None = None) -> None:
        with self._write() as db:
            db.execute(
                "UPDATE trials SET state = ?, metrics = ?, internals = ?, timings = ?, failure_kind = ?,"
                " error = ?, log_excerpt = ?, finished_at = ? WHERE id = ?",
                (TrialState(state).value, _dump(metrics), _dump(internals), _dump(timings), failure_kind, error,
                 log_excerpt, time.time(), trial_id))

    def update_meta(self, trial_id: int, meta: dict) -> None:
        with self._write() as db:
            old = db.execute("SELECT meta FROM trials WHERE id = ?", (trial_id,)).fetchone()
            merged = {**(json.loads(old["meta"]) if old and old["meta"] else {}), **meta}
            db.execute("UPDATE trials SET meta = ? WHERE id = ?", (_dump(merged), trial_id))

    def retag(self, trial_id: int, tag: str) -> None:
        with self._write() as db:
            db.execute("UPDATE trials SET tag = ? WHERE id = ?", (tag, trial_id))

    def checkpoint(self) -> None:
        """Fold the write-ahead log into the database file (before committing a study file to git)."""
        with self._lock:
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def trials(self, study_id: int | None = None, state: TrialState | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM trials WHERE 1 = 1", []
        if study_id is not None:
            query += " AND study_id = ?"
            args.append(study_id)
        if state is not None:
            query += " AND state = ?"
            args.append(TrialState(state).value)
        return [self._row(r) for r in self._read(query + " ORDER BY id", args)]

    def trial(self, trial_id: int) -> dict[str, Any]:
        rows = self._read("SELECT * FROM trials WHERE id = ?", (trial_id,))
        if not rows:
            raise KeyError(trial_id)
        return self._row(rows[0])

    @staticmethod
    def _row(row: sqlite3.Row) -> dict[str, Any]:
        out = dict(row)
        for key in ("config", "workload", "metrics", "internals", "timings", "meta"):
            if out[key] is not None:
                out[key] = json.loads(out[key])
        return out

    # the lease
    def acquire_lease(self, study_id: int, ttl_s: float = LEASE_TTL_S) -> Lease:
        me = lease_owner()
        with self._write() as db:
            row = db.execute("SELECT * FROM leases WHERE study_id = ?", (study_id,)).fetchone()
            now = time.time()
            if row is not None and row["owner"] != me["owner"] and holder_alive(dict(row), now, ttl_s):
                name = db.execute("SELECT name FROM studies WHERE id = ?", (study_id,)).fetchone()["name"]
                raise StudyBusy(busy_message(name, dict(row), now, ttl_s))
            db.execute("INSERT OR REPLACE INTO leases (study_id, owner, pid, host, acquired_at, heartbeat_at) "
                       "VALUES (?, ?, ?, ?, ?, ?)", (study_id, me["owner"], me["pid"], me["host"], now, now))

        def beat() -> bool:
            with self._write() as db:
                return db.execute("UPDATE leases SET heartbeat_at = ? WHERE study_id = ? AND owner = ?",
                                  (time.time(), study_id, me["owner"])).rowcount == 1

        def release() -> None:
            with contextlib.suppress(sqlite3.Error):
                with self._write() as db:
                    db.execute("DELETE FROM leases WHERE study_id = ? AND owner = ?", (study_id, me["owner"]))

        return Lease(beat, release, ttl_s)
