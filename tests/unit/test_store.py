"""What only the SQLite trial store has: stores written by older versions migrated, files of other programs
refused and left as they were, bad paths refused leaving nothing. What every backend does is the conformance
suite (tests/integration/test_store_conformance.py, run on SQLite and PostgreSQL)."""

import sqlite3
from pathlib import Path

import pytest

from nosqltune.errors import UsageError
from nosqltune.store import SCHEMA_VERSION, open_existing_store, open_store


OLD_SCHEMA = """
CREATE TABLE studies (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, system TEXT NOT NULL,
    created_at REAL NOT NULL, settings TEXT NOT NULL DEFAULT '{}');
CREATE TABLE environments (id INTEGER PRIMARY KEY, fingerprint TEXT NOT NULL UNIQUE);
CREATE TABLE trials (id INTEGER PRIMARY KEY, study_id INTEGER NOT NULL REFERENCES studies(id),
    number INTEGER NOT NULL, state TEXT NOT NULL, failure_kind TEXT, error TEXT, log_excerpt TEXT, tag TEXT,
    config TEXT NOT NULL, workload TEXT NOT NULL, metrics TEXT, internals TEXT, timings TEXT,
    environment_id INTEGER REFERENCES environments(id), started_at REAL NOT NULL, finished_at REAL,
    @META@UNIQUE (study_id, number));
INSERT INTO studies VALUES (1, 'tune', 'cassandra', 0, '{"tune": {"spec": {}}}');
INSERT INTO trials (id, study_id, number, state, config, workload, started_at)
    VALUES (1, 1, 0, 'COMPLETE', '{"concurrent_writes": 8}', '{"name": "ycsb-a"}', 0);
"""


@pytest.mark.parametrize("meta", ["meta TEXT, ", ""])
def test_stores_written_before_schema_versions_are_migrated(tmp_path, meta):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA.replace("@META@", meta))
    store = open_store(path)
    (row,) = store.trials()
    assert row["config"] == {"concurrent_writes": 8} and row["meta"] is None
    assert store.find_study("tune")["settings"] == {"tune": {"spec": {}}}
    store.update_meta(row["id"], {"cost": -1.0})
    assert store.trial(row["id"])["meta"] == {"cost": -1.0}
    store.acquire_lease(1).release()
    queued = store.enqueue_trial(1, {}, {"name": "w"})
    assert store.claim_trial(1, "w")["id"] == queued
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_a_store_from_a_newer_nosqltune_or_another_program_is_refused(tmp_path):
    newer = tmp_path / "newer.db"
    open_store(newer).close()
    with sqlite3.connect(newer) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(UsageError, match="written by a newer nosqltune"):
        open_store(newer)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE photos (id INTEGER)")
    with pytest.raises(UsageError, match="not a nosqltune study store"):
        open_store(other)
    text = tmp_path / "notes.db"
    text.write_text("not a database at all\n" * 100)
    with pytest.raises(UsageError, match="not a nosqltune study store"):
        open_store(text)
    assert text.read_text().startswith("not a database")      # left as it was


@pytest.mark.parametrize("url, message", [
    ("mysql://x/y", "unsupported study URL mysql://...: a study store is a SQLite file"),
    ("{tmp}", "is a directory"),
    ("{tmp}/file.txt/s.db", "is not a directory"),
    ("/proc/nope/s.db", "cannot create the study store /proc/nope/s.db"),
])
def test_bad_store_urls_are_one_line_errors_leaving_nothing(tmp_path, url, message):
    (tmp_path / "file.txt").write_text("x")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(UsageError, match=message) as info:
        open_store(url.replace("{tmp}", str(tmp_path)))
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_reading_commands_never_create_a_store(tmp_path):
    with pytest.raises(UsageError, match="no study store at"):
        open_existing_store(str(tmp_path / "missing.db"))
    assert list(tmp_path.iterdir()) == []


def test_a_reader_of_an_older_store_without_a_column_reads_it_as_none(tmp_path):
    """bench/results/calibrate.db predates the trials' meta column; a read-only reader does not migrate a store, so
    the column it lacks reads as None instead of failing."""
    import shutil

    from nosqltune.store import open_reader

    path = tmp_path / "old.db"
    shutil.copy(Path(__file__).resolve().parents[2] / "bench" / "results" / "calibrate.db", path)
    with sqlite3.connect(path) as db:
        assert "meta" not in [c[1] for c in db.execute("PRAGMA table_info(trials)")]
    with open_reader(str(path)) as reader:
        study = next(iter(reader.studies()))
        trials = reader.trials(study["id"])
    assert trials and all(t["meta"] is None for t in trials) and trials[0]["config"] is not None


def test_a_write_waits_the_store_wait_in_all_even_behind_another_thread_of_ours(tmp_path, monkeypatch):
    """Another program holds the store's lock; a thread of ours (a lease's heartbeat) is already waiting for it,
    holding the connection. A write of the main thread gives up when the store's wait, counted from its request,
    runs out: not after the heartbeat's wait and then a whole wait of its own, which let a lock held for 45 s
    (the fault campaign's) be waited out instead of stopping the study."""
    import contextlib
    import threading
    import time

    from nosqltune.store import sqlite as backend

    monkeypatch.setattr(backend, "BUSY_WAIT_S", 2)
    path = tmp_path / "s.db"
    with open_store(str(path)) as store:
        trial = store.start_trial(store.study("s"), {}, {"name": "a"})
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        beat = []

        def heartbeat_write() -> None:
            beat.append(time.monotonic())
            with contextlib.suppress(backend.StoreUnavailable):
                store.update_meta(trial, {"beat": 1})
            beat.append(time.monotonic())

        heartbeat = threading.Thread(target=heartbeat_write)
        try:
            heartbeat.start()
            time.sleep(0.7)
            started = time.monotonic()
            with pytest.raises(backend.StoreUnavailable, match="locked by another program for more than 2 s"):
                store.update_meta(trial, {"result": 1})
            waited = time.monotonic() - started
        finally:
            heartbeat.join()
            other.execute("ROLLBACK")
            other.close()
        assert beat[1] - beat[0] >= 1.8           # the heartbeat waited its own 2 s, holding the connection
        assert 1.8 <= waited < 2.8, waited        # before: the heartbeat's remaining 1.3 s, then 2 s of its own
        store.update_meta(trial, {"result": 1})   # the lock let go: writes go through again
        assert store.trial(trial)["meta"]["result"] == 1


def test_a_command_that_only_reads_leaves_a_committed_store_as_it_was(tmp_path, capsys):
    """`export` opens a store in SQLite's read-only mode: a store checkpointed for git (no write-ahead log) keeps
    every byte, where opening it for writing switches it to WAL; a store of an older schema is migrated, since it
    cannot be read as it is, and then exported."""
    from nosqltune.cli import main

    path = tmp_path / "committed.db"
    store = open_store(path)
    store.start_trial(store.study("tune"), {"concurrent_writes": 8}, {"name": "ycsb-a"})
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=DELETE")
    before = path.read_bytes()
    assert main(["export", "--study", str(path), "--format", "json"]) == 0
    assert '"concurrent_writes": 8' in capsys.readouterr().out
    assert path.read_bytes() == before and not Path(f"{path}-wal").exists()
    open_store(path).close()
    assert path.read_bytes()[18:20] == b"\x02\x02"           # what opening for writing does: WAL in the header

    old = tmp_path / "old.db"
    with sqlite3.connect(old) as db:
        db.executescript(OLD_SCHEMA.replace("@META@", ""))
    assert main(["export", "--study", str(old), "--format", "json"]) == 0
    assert '"concurrent_writes": 8' in capsys.readouterr().out
    with sqlite3.connect(old) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_best_leaves_a_committed_study_as_it_was(tmp_path, capsys, monkeypatch, surrogate_cache):
    """`best` without rounds to run only reads (as `report` and `export`, which open the store the same way): a study
    checkpointed for git keeps every byte."""
    from nosqltune.cli import main

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    path = tmp_path / "study.db"
    assert main(["tune", "--system", "surrogate:cloud13", "--read-ratio", "0.95", "--distribution", "uniform",
                 "--optimizer", "random", "--budget", "4", "--seed", "1", "--study", str(path), "--json"]) == 0
    store = open_store(path)
    store.checkpoint()
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=DELETE")
    before = path.read_bytes()
    assert main(["best", "--study", str(path)]) == 0
    assert "best" in capsys.readouterr().out.lower()
    assert path.read_bytes() == before and not Path(f"{path}-wal").exists()
