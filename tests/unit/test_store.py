"""The SQLite trial store: trials recorded RUNNING before they run and finished after; settings merged key by
key; numbering and study creation atomic across processes; one process at a time runs trials in a study
(a lease with a heartbeat); foreign keys; schema versions and migrations; bad URLs refused leaving nothing."""

import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from nosqltune.errors import UsageError
from nosqltune.store import SCHEMA_VERSION, StudyBusy, TrialState, open_existing_store, open_store


def test_trial_lifecycle(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    study = store.study("bench", "cassandra", {"heap_mb": 2048})
    assert store.study("bench") == study
    env = store.environment({"cores": 2, "java": "17"})
    assert store.environment({"java": "17", "cores": 2}) == env
    assert store.environments() == {env: {"cores": 2, "java": "17"}} and store.environment_of(env)["cores"] == 2
    t1 = store.start_trial(study, {"concurrent_writes": 64}, {"name": "ycsb-a"}, tag="bench", environment_id=env)
    assert store.trial(t1)["state"] == "RUNNING"
    store.finish_trial(t1, TrialState.COMPLETE, metrics={"summary": {"throughput_ops_s": 1000.0}},
                       timings={"boot_s": 4.2})
    t2 = store.start_trial(study, {"num_tokens": 0}, {"name": "ycsb-a"})
    store.finish_trial(t2, TrialState.FAIL, failure_kind="refused", error="bad num_tokens", log_excerpt="ERROR x")
    store.retag(t2, "set-aside")
    store.close()

    reopened = open_store(str(tmp_path / "s.db"))  # plain path works too
    rows = reopened.trials(study)
    assert [r["number"] for r in rows] == [0, 1]
    assert rows[0]["config"] == {"concurrent_writes": 64}
    assert rows[0]["metrics"]["summary"]["throughput_ops_s"] == 1000.0
    assert rows[1]["state"] == "FAIL" and rows[1]["failure_kind"] == "refused" and rows[1]["log_excerpt"] == "ERROR x"
    assert rows[1]["tag"] == "set-aside"
    assert [r["id"] for r in reopened.trials(study, TrialState.FAIL)] == [t2]
    (only,) = reopened.studies()
    assert (only["name"], only["system"], only["settings"]) == ("bench", "cassandra", {"heap_mb": 2048})
    assert reopened.study_by_id(study)["name"] == "bench"


def test_settings_are_merged_key_by_key(tmp_path):
    """`compare` stores its result under "compare", a later `tune --resume` writes "tune": both stay."""
    store = open_store(tmp_path / "s.db")
    study = store.study("tune", "cassandra", {"harness": {"heap_mb": 1024}})
    store.update_study_settings(study, {"compare": {"x1": {"verdict": "better"}}})
    store.update_study_settings(study, {"tune": {"spec": {"budget": 10}}})
    store.update_study_settings(study, {"tune": {"spec": {"budget": 20}}})      # a key is replaced whole
    assert store.find_study("tune")["settings"] == {"harness": {"heap_mb": 1024},
                                                    "compare": {"x1": {"verdict": "better"}},
                                                    "tune": {"spec": {"budget": 20}}}


def _start_trials(path: str, count: int) -> None:
    store = open_store(path)
    study = store.study("race")
    for i in range(count):
        store.start_trial(study, {"i": i}, {"name": "w"})
    store.close()


def test_trial_numbers_are_atomic_across_processes(tmp_path):
    path = str(tmp_path / "s.db")
    open_store(path).study("race")
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_start_trials, args=(path, 60)) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    numbers = [r["number"] for r in open_store(path).trials()]
    assert sorted(numbers) == list(range(180))


def _create_study(path: str, queue) -> None:
    queue.put(open_store(path).study("same", "cassandra", {"by": os.getpid()}))


def test_study_creation_is_idempotent_under_racing_creators(tmp_path):
    path = str(tmp_path / "s.db")
    open_store(path).close()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    creators = [ctx.Process(target=_create_study, args=(path, queue)) for _ in range(6)]
    for c in creators:
        c.start()
    ids = [queue.get(timeout=60) for _ in creators]
    for c in creators:
        c.join(60)
    assert [c.exitcode for c in creators] == [0] * 6
    assert len(set(ids)) == 1 and len(list(open_store(path).studies())) == 1


def test_a_second_process_is_refused_while_the_lease_is_held(tmp_path):
    path = str(tmp_path / "s.db")
    holder = open_store(path)
    study = holder.study("tune")
    trial = holder.start_trial(study, {}, {"name": "w"})
    with holder.acquire_lease(study, ttl_s=3):
        other = subprocess.run([sys.executable, "-c", (
            "import sys; from nosqltune.store import open_store\n"
            "s = open_store(sys.argv[1])\n"
            "try:\n    s.acquire_lease(s.find_study('tune')['id'], ttl_s=3)\nexcept Exception as e:\n"
            "    print(type(e).__name__, e); sys.exit(2)\n"), path], capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=60)
        assert other.returncode == 2 and other.stdout.startswith("StudyBusy study 'tune' is being tuned by another")
        assert f"pid {os.getpid()}" in other.stdout
        time.sleep(2)   # past ttl/3: the heartbeat keeps the lease
        reader = open_store(path)                 # reading commands need no lease
        assert reader.trial(trial)["state"] == "RUNNING" and reader.find_study("tune")
    # released: the next process gets it at once
    again = open_store(path).acquire_lease(study, ttl_s=3)
    again.release()


def test_a_lease_whose_heartbeat_stopped_expires(tmp_path):
    path = str(tmp_path / "s.db")
    store = open_store(path)
    study = store.study("tune")
    # a holder on another machine that stopped beating (crashed, machine gone): refused until the ttl passes
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO leases VALUES (?, 'elsewhere:1:1', 1, 'elsewhere', ?, ?)",
                   (study, time.time(), time.time()))
    with pytest.raises(StudyBusy, match="pid 1 on elsewhere"):
        store.acquire_lease(study, ttl_s=1.0)
    time.sleep(1.2)
    lease = store.acquire_lease(study, ttl_s=1.0)
    lease.release()


def test_a_lease_of_a_dead_process_on_this_host_frees_the_study_at_once(tmp_path):
    import socket

    path = str(tmp_path / "s.db")
    store = open_store(path)
    study = store.study("tune")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO leases VALUES (?, 'x', ?, ?, ?, ?)",
                   (study, gone.pid, socket.gethostname(), time.time(), time.time()))
    store.acquire_lease(study, ttl_s=60).release()


def test_foreign_keys_are_enforced(tmp_path):
    store = open_store(tmp_path / "s.db")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"):
        store.start_trial(999, {}, {"name": "w"})
    assert store.trials() == []


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
    ("mysql://x/y", "sqlite:///path"),
    ("postgresql://db/x", "PostgreSQL studies are not supported yet"),
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
