"""SQLite persistence: one row per trial, written as RUNNING before it runs and finished after."""

from __future__ import annotations

import enum
import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

_SCHEMA = """
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


class TrialState(str, enum.Enum):
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    FAIL = "FAIL"


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


class SqliteStore:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL" if self.path != ":memory:" else "PRAGMA foreign_keys=ON")
        self._db.executescript(_SCHEMA)
        columns = {r["name"] for r in self._db.execute("PRAGMA table_info(trials)")}
        if "meta" not in columns:  # a store written before trials carried tuning bookkeeping
            self._db.execute("ALTER TABLE trials ADD COLUMN meta TEXT")
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    # studies
    def study(self, name: str, system: str = "cassandra", settings: dict | None = None) -> int:
        """The id of study `name`, created on first use."""
        row = self._db.execute("SELECT id FROM studies WHERE name = ?", (name,)).fetchone()
        if row:
            return row["id"]
        cur = self._db.execute("INSERT INTO studies (name, system, created_at, settings) VALUES (?, ?, ?, ?)",
                               (name, system, time.time(), _dump(settings or {})))
        self._db.commit()
        return cur.lastrowid

    def find_study(self, name: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT * FROM studies WHERE name = ?", (name,)).fetchone()
        return None if row is None else {**dict(row), "settings": json.loads(row["settings"])}

    def update_study_settings(self, study_id: int, settings: dict) -> None:
        with self._db:
            self._db.execute("UPDATE studies SET settings = ? WHERE id = ?", (_dump(settings), study_id))

    def environment(self, fingerprint: dict) -> int:
        text = _dump(fingerprint)
        self._db.execute("INSERT OR IGNORE INTO environments (fingerprint) VALUES (?)", (text,))
        self._db.commit()
        return self._db.execute("SELECT id FROM environments WHERE fingerprint = ?", (text,)).fetchone()["id"]

    # trials
    def start_trial(self, study_id: int, config: dict, workload: dict, *, tag: str | None = None,
                    environment_id: int | None = None, meta: dict | None = None) -> int:
        """Record a trial as RUNNING before it runs (so a crash leaves a trace); returns its id."""
        with self._db:
            number = self._db.execute("SELECT COALESCE(MAX(number), -1) + 1 FROM trials WHERE study_id = ?",
                                      (study_id,)).fetchone()[0]
            cur = self._db.execute(
                "INSERT INTO trials (study_id, number, state, tag, config, workload, environment_id, started_at,"
                " meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (study_id, number, TrialState.RUNNING.value, tag, _dump(config), _dump(workload),
                 environment_id, time.time(), _dump(meta)))
        return cur.lastrowid

    def finish_trial(self, trial_id: int, state: TrialState, *, metrics: dict | None = None,
                     internals: dict | None = None, timings: dict | None = None, failure_kind: str | None = None,
                     error: str | None = None, log_excerpt: str | None = None) -> None:
        with self._db:
            self._db.execute(
                "UPDATE trials SET state = ?, metrics = ?, internals = ?, timings = ?, failure_kind = ?,"
                " error = ?, log_excerpt = ?, finished_at = ? WHERE id = ?",
                (TrialState(state).value, _dump(metrics), _dump(internals), _dump(timings), failure_kind, error,
                 log_excerpt, time.time(), trial_id))

    def update_meta(self, trial_id: int, meta: dict) -> None:
        """Merge entries into a trial's meta."""
        with self._db:
            old = self._db.execute("SELECT meta FROM trials WHERE id = ?", (trial_id,)).fetchone()
            merged = {**(json.loads(old["meta"]) if old and old["meta"] else {}), **meta}
            self._db.execute("UPDATE trials SET meta = ? WHERE id = ?", (_dump(merged), trial_id))

    def record(self, trial_id: int, run) -> dict[str, Any]:
        """Call `run()` for a started trial and store the result it returns (a trial.TrialResult); a Ctrl-C,
        an exit or an error outside the trial marks the trial interrupted and goes on up. Returns the row."""
        try:
            result = run()
        except BaseException as exc:
            self.finish_trial(trial_id, TrialState.FAIL, failure_kind="interrupted",
                              error=str(exc) or type(exc).__name__)
            raise
        state = TrialState.COMPLETE if result.state == "COMPLETE" else TrialState.FAIL
        self.finish_trial(trial_id, state, metrics={"summary": result.summary, **(result.metrics or {})},
                          internals=result.internals, timings=result.timings, failure_kind=result.failure_kind,
                          error=result.error, log_excerpt=result.log_excerpt)
        return self.trial(trial_id)

    def trials(self, study_id: int | None = None, state: TrialState | None = None) -> list[dict[str, Any]]:
        query, args = "SELECT * FROM trials WHERE 1 = 1", []
        if study_id is not None:
            query += " AND study_id = ?"
            args.append(study_id)
        if state is not None:
            query += " AND state = ?"
            args.append(TrialState(state).value)
        return [self._row(r) for r in self._db.execute(query + " ORDER BY id", args)]

    def trial(self, trial_id: int) -> dict[str, Any]:
        row = self._db.execute("SELECT * FROM trials WHERE id = ?", (trial_id,)).fetchone()
        if row is None:
            raise KeyError(trial_id)
        return self._row(row)

    def studies(self) -> Iterator[dict[str, Any]]:
        for row in self._db.execute("SELECT * FROM studies ORDER BY id"):
            yield {**dict(row), "settings": json.loads(row["settings"])}

    @staticmethod
    def _row(row: sqlite3.Row) -> dict[str, Any]:
        out = dict(row)
        for key in ("config", "workload", "metrics", "internals", "timings", "meta"):
            if out[key] is not None:
                out[key] = json.loads(out[key])
        return out
