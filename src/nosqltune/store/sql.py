"""The trial store in SQL, shared by the SQLite and the PostgreSQL backends: the same tables, the same statements
(written with `?` placeholders; a backend translates them), the same rules.

Every write that reads first (trial numbers, merged settings and meta, the lease, claiming a queued trial) runs
in one transaction that holds the store's write lock from its start (SQLite: BEGIN IMMEDIATE; PostgreSQL: a
transaction-level advisory lock), so no other writer comes in between, whichever process or machine it is on.

The queue: a trial can be stored WAITING (`enqueue_trial`) and taken by a worker (`claim_trial`, atomically:
two workers never get the same trial), which keeps its heartbeat fresh while it runs (`trial_heartbeat`). A
RUNNING trial whose heartbeat is older than the ttl (its worker was killed, its machine is gone) is marked
FAIL with failure_kind `stale` by `fail_stale_trials`, and its suggestion is queued again, once: a retry that
goes stale in its turn is not queued a third time. A worker whose trial was taken away can no longer finish it
(`finish_trial(..., worker=...)` returns False), so a result is never counted twice.
"""

from __future__ import annotations

import abc
import contextlib
import json
import threading
import time
from typing import Any, Iterator

import orjson

from .base import LEASE_TTL_S, Lease, Store, StudyBusy, TrialState, busy_message, holder_alive, lease_owner

SCHEMA_VERSION = 3

# {ID}: the backend's auto-numbered key; {REAL}: its double-precision type
TABLES = """
CREATE TABLE IF NOT EXISTS studies (
    id {ID},
    name TEXT NOT NULL UNIQUE,
    system TEXT NOT NULL,
    created_at {REAL} NOT NULL,
    settings TEXT NOT NULL DEFAULT '{{}}'
);
CREATE TABLE IF NOT EXISTS environments (
    id {ID},
    fingerprint TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS trials (
    id {ID},
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
    started_at {REAL} NOT NULL,
    finished_at {REAL},
    meta TEXT,
    worker TEXT,
    heartbeat_at {REAL},
    retry_of INTEGER,
    UNIQUE (study_id, number)
);
CREATE TABLE IF NOT EXISTS leases (
    study_id INTEGER PRIMARY KEY REFERENCES studies(id),
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    acquired_at {REAL} NOT NULL,
    heartbeat_at {REAL} NOT NULL
);
"""

QUEUE_COLUMNS = (("worker", "TEXT"), ("heartbeat_at", "{REAL}"), ("retry_of", "INTEGER"))
JSON_COLUMNS = ("config", "workload", "metrics", "internals", "timings", "meta")


def _loads(text: str | bytes) -> Any:
    """A stored JSON column: orjson, about 3x Python's json (the dashboard reads a study of 10,000 trials, six
    columns each, at once); Python's json for what orjson refuses (NaN and Infinity, which json.dumps writes)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def statements(script: str, id_type: str, real_type: str) -> list[str]:
    text = script.format(ID=id_type, REAL=real_type)
    return [s.strip() for s in text.split(";") if s.strip()]


class SqlStore(Store):
    """What both backends share; a backend supplies the connection, its write transaction and its schema
    version bookkeeping."""

    def __init__(self) -> None:
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ what a backend supplies
    @abc.abstractmethod
    def _write(self, wait_s: float | None = None) -> contextlib.AbstractContextManager[Any]:
        """One write transaction holding the store's write lock from its start; yields an object whose
        `execute(sql, args)` returns a cursor (fetchone, fetchall, rowcount). `wait_s`: how long to wait for
        another program's lock before giving up (the backend's usual wait when None)."""

    @abc.abstractmethod
    def _read(self, query: str, args: tuple | list = ()) -> list[dict[str, Any]]:
        """Rows of one query as dicts."""

    @staticmethod
    def _dict(row: Any) -> dict[str, Any] | None:
        return None if row is None else dict(row)

    # ------------------------------------------------------------------ studies
    def study(self, name: str, system: str = "cassandra", settings: dict | None = None) -> int:
        with self._write() as db:
            db.execute("INSERT INTO studies (name, system, created_at, settings) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT (name) DO NOTHING", (name, system, time.time(), dump(settings or {})))
            return self._dict(db.execute("SELECT id FROM studies WHERE name = ?", (name,)).fetchone())["id"]

    @staticmethod
    def _study_row(row: dict | None) -> dict[str, Any] | None:
        return None if row is None else {**row, "settings": json.loads(row["settings"])}

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
            row = self._dict(db.execute("SELECT settings FROM studies WHERE id = ?", (study_id,)).fetchone())
            if row is None:
                raise KeyError(f"no study with id {study_id}")
            merged = {**json.loads(row["settings"]), **changes}
            db.execute("UPDATE studies SET settings = ? WHERE id = ?", (dump(merged), study_id))
        return merged

    # ------------------------------------------------------------------ environments
    def environment(self, fingerprint: dict) -> int:
        text = dump(fingerprint)
        with self._write() as db:
            db.execute("INSERT INTO environments (fingerprint) VALUES (?) ON CONFLICT (fingerprint) DO NOTHING",
                       (text,))
            return self._dict(db.execute("SELECT id FROM environments WHERE fingerprint = ?",
                                         (text,)).fetchone())["id"]

    def environments(self) -> dict[int, dict[str, Any]]:
        return {r["id"]: json.loads(r["fingerprint"]) for r in self._read("SELECT * FROM environments ORDER BY id")}

    def environment_of(self, environment_id: int) -> dict[str, Any] | None:
        rows = self._read("SELECT fingerprint FROM environments WHERE id = ?", (environment_id,))
        return json.loads(rows[0]["fingerprint"]) if rows else None

    # ------------------------------------------------------------------ trials
    def _insert_trial(self, db: Any, study_id: int, state: TrialState, config: dict | str, workload: dict | str, *,
                      tag: str | None, environment_id: int | None, meta: dict | str | None,
                      worker: str | None = None, retry_of: int | None = None) -> int:
        """A trial numbered next in its study (inside a write transaction); JSON given as text is kept as is."""
        number = self._dict(db.execute("SELECT COALESCE(MAX(number), -1) + 1 AS n FROM trials WHERE study_id = ?",
                                       (study_id,)).fetchone())["n"]
        now = time.time()
        text = [v if isinstance(v, str) or v is None else dump(v) for v in (config, workload, meta)]
        row = db.execute(
            "INSERT INTO trials (study_id, number, state, tag, config, workload, environment_id, started_at, meta,"
            " worker, heartbeat_at, retry_of) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (study_id, number, state.value, tag, text[0], text[1], environment_id, now, text[2], worker,
             now if worker else None, retry_of)).fetchone()
        return self._dict(row)["id"]

    def start_trial(self, study_id: int, config: dict, workload: dict, *, tag: str | None = None,
                    environment_id: int | None = None, meta: dict | None = None) -> int:
        with self._write() as db:
            return self._insert_trial(db, study_id, TrialState.RUNNING, config, workload, tag=tag,
                                      environment_id=environment_id, meta=meta)

    def finish_trial(self, trial_id: int, state: TrialState, *, metrics: dict | None = None,
                     internals: dict | None = None, timings: dict | None = None, failure_kind: str | None = None,
                     error: str | None = None, log_excerpt: str | None = None, worker: str | None = None) -> bool:
        """Store a trial's end. With `worker`: only while that worker still holds the trial (RUNNING, claimed
        by it); False when it was taken away (declared stale), and nothing is written."""
        query = ("UPDATE trials SET state = ?, metrics = ?, internals = ?, timings = ?, failure_kind = ?, error = ?,"
                 " log_excerpt = ?, finished_at = ? WHERE id = ?")
        args = [TrialState(state).value, dump(metrics), dump(internals), dump(timings), failure_kind, error,
                log_excerpt, time.time(), trial_id]
        if worker is not None:
            query += " AND worker = ? AND state = ?"
            args += [worker, TrialState.RUNNING.value]
        with self._write() as db:
            return db.execute(query, args).rowcount == 1

    def update_meta(self, trial_id: int, meta: dict, wait_s: float | None = None) -> None:
        with self._write(wait_s) as db:
            old = self._dict(db.execute("SELECT meta FROM trials WHERE id = ?", (trial_id,)).fetchone())
            merged = {**(json.loads(old["meta"]) if old and old["meta"] else {}), **meta}
            db.execute("UPDATE trials SET meta = ? WHERE id = ?", (dump(merged), trial_id))

    def retag(self, trial_id: int, tag: str) -> None:
        with self._write() as db:
            db.execute("UPDATE trials SET tag = ? WHERE id = ?", (tag, trial_id))

    def trials(self, study_id: int | None = None, state: TrialState | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM trials WHERE 1 = 1", []
        if study_id is not None:
            query += " AND study_id = ?"
            args.append(study_id)
        if state is not None:
            query += " AND state = ?"
            args.append(TrialState(state).value)
        return [self._row(r) for r in self._read(query + " ORDER BY id", args)]

    def trials_changed(self, study_id: int, after_id: int, after_end: float) -> list[dict[str, Any]]:
        """The study's trials a reader that last saw up to trial `after_id` and an end at `after_end` has not seen
        as they are: newer ones, those that ended since, and the open ones (a tag changed by `retag` is not
        among them)."""
        return [self._row(r) for r in self._read(
            "SELECT * FROM trials WHERE study_id = ? AND (id > ? OR finished_at >= ? OR state IN (?, ?)) ORDER BY id",
            (study_id, after_id, after_end, TrialState.RUNNING.value, TrialState.WAITING.value))]

    def trials_signature(self, study_id: int) -> tuple:
        """What changes whenever a trial of the study is written (a reader polling the store reads the trials again
        only then): their count, last id, last start and last end, and the state and meta of the open trials
        (where a running trial stores its phase)."""
        found = self._read("SELECT COUNT(*) AS n, MAX(id) AS last_id, MAX(started_at) AS last_start, "
                           "MAX(finished_at) AS last_end FROM trials WHERE study_id = ?", (study_id,))[0]
        open_rows = self._read("SELECT id, state, meta FROM trials WHERE study_id = ? AND state IN (?, ?) ORDER BY id",
                               (study_id, TrialState.RUNNING.value, TrialState.WAITING.value))
        return (found["n"], found["last_id"], found["last_start"], found["last_end"],
                tuple((r["id"], r["state"], r["meta"]) for r in open_rows))

    def trial(self, trial_id: int) -> dict[str, Any]:
        rows = self._read("SELECT * FROM trials WHERE id = ?", (trial_id,))
        if not rows:
            raise KeyError(trial_id)
        return self._row(rows[0])

    @staticmethod
    def _row(row: dict) -> dict[str, Any]:
        """A trial row of _read (a dict of its own) with its JSON columns decoded, in place; a column an older store
        does not have (read-only readers do not migrate it) reads as None."""
        for key in JSON_COLUMNS:
            value = row.get(key)
            row[key] = _loads(value) if value is not None else None
        return row

    # ------------------------------------------------------------------ the queue
    def enqueue_trial(self, study_id: int, config: dict, workload: dict, *, tag: str | None = None,
                      environment_id: int | None = None, meta: dict | None = None) -> int:
        """Store a trial WAITING for a worker, numbered next in its study; returns its id."""
        with self._write() as db:
            return self._insert_trial(db, study_id, TrialState.WAITING, config, workload, tag=tag,
                                      environment_id=environment_id, meta=meta)

    def claim_trial(self, study_id: int, worker: str, tag: str | None = None,
                    environment_id: int | None = None) -> dict[str, Any] | None:
        """The study's waiting trial of the lowest number (of `tag`, if given), now RUNNING for `worker` with a
        fresh heartbeat (and the worker's environment, if given); None when nothing waits. Two workers never
        claim the same trial."""
        query, args = "SELECT id FROM trials WHERE study_id = ? AND state = ?", [study_id, TrialState.WAITING.value]
        if tag is not None:
            query += " AND tag = ?"
            args.append(tag)
        with self._write() as db:
            found = self._dict(db.execute(query + " ORDER BY number LIMIT 1", args).fetchone())
            if found is None:
                return None
            now = time.time()
            db.execute("UPDATE trials SET state = ?, worker = ?, heartbeat_at = ?, started_at = ?, "
                       "environment_id = COALESCE(?, environment_id) WHERE id = ?",
                       (TrialState.RUNNING.value, worker, now, now, environment_id, found["id"]))
        return self.trial(found["id"])

    def trial_heartbeat(self, trial_id: int, worker: str, ttl_s: float = LEASE_TTL_S) -> Lease:
        """Keep a claimed trial's heartbeat fresh (every ttl/3) until released; `lost` turns true when the trial
        was taken away from this worker (declared stale)."""
        def beat() -> bool:
            with self._write() as db:
                return db.execute("UPDATE trials SET heartbeat_at = ? WHERE id = ? AND worker = ? AND state = ?",
                                  (time.time(), trial_id, worker, TrialState.RUNNING.value)).rowcount == 1
        return Lease(beat, lambda: None, ttl_s)

    def fail_stale_trials(self, study_id: int, ttl_s: float = LEASE_TTL_S) -> list[int]:
        """Mark the study's claimed trials whose heartbeat is older than `ttl_s` FAIL (`stale`) and queue each
        one's suggestion again unless it was a retry already; returns the ids of the trials marked stale."""
        with self._write() as db:
            now = time.time()
            stale = [self._dict(r) for r in db.execute(
                "SELECT * FROM trials WHERE study_id = ? AND state = ? AND heartbeat_at IS NOT NULL "
                "AND heartbeat_at < ? ORDER BY number", (study_id, TrialState.RUNNING.value, now - ttl_s)).fetchall()]
            for row in stale:
                db.execute("UPDATE trials SET state = ?, failure_kind = 'stale', error = ?, finished_at = ? "
                           "WHERE id = ?", (TrialState.FAIL.value, f"no heartbeat from worker {row['worker']} for "
                                            f"{now - row['heartbeat_at']:.0f} s (ttl {ttl_s:.0f} s)", now, row["id"]))
                if row["retry_of"] is None:
                    self._insert_trial(db, study_id, TrialState.WAITING, row["config"], row["workload"],
                                       tag=row["tag"], environment_id=row["environment_id"], meta=row["meta"],
                                       retry_of=row["id"])
        return [r["id"] for r in stale]

    # ------------------------------------------------------------------ the lease
    def acquire_lease(self, study_id: int, ttl_s: float = LEASE_TTL_S) -> Lease:
        me = lease_owner()
        with self._write() as db:
            row = self._dict(db.execute("SELECT * FROM leases WHERE study_id = ?", (study_id,)).fetchone())
            now = time.time()
            if row is not None and row["owner"] != me["owner"] and holder_alive(row, now, ttl_s):
                name = self._dict(db.execute("SELECT name FROM studies WHERE id = ?", (study_id,)).fetchone())["name"]
                raise StudyBusy(busy_message(name, row, now, ttl_s))
            db.execute("INSERT INTO leases (study_id, owner, pid, host, acquired_at, heartbeat_at) "
                       "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (study_id) DO UPDATE SET owner = excluded.owner, "
                       "pid = excluded.pid, host = excluded.host, acquired_at = excluded.acquired_at, "
                       "heartbeat_at = excluded.heartbeat_at",
                       (study_id, me["owner"], me["pid"], me["host"], now, now))

        def beat() -> bool:
            with self._write() as db:
                return db.execute("UPDATE leases SET heartbeat_at = ? WHERE study_id = ? AND owner = ?",
                                  (time.time(), study_id, me["owner"])).rowcount == 1

        def release() -> None:
            with contextlib.suppress(Exception):   # the store gone at exit: the lease expires by itself
                with self._write() as db:
                    db.execute("DELETE FROM leases WHERE study_id = ? AND owner = ?", (study_id, me["owner"]))

        return Lease(beat, release, ttl_s)
