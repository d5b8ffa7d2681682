"""The trial store's conformance suite, run against each backend (SQLite file, throwaway PostgreSQL server):
trials recorded RUNNING before they run and finished after; settings merged key by key; numbering, study
creation and queue claims atomic across processes; one process at a time holds a study's lease; the queue's
heartbeat, stale trials given again at most once, no result counted twice; foreign keys; schema versions."""

import multiprocessing
import os
import socket
import subprocess
import sys
import time

import pytest

from nosqltune.store import SCHEMA_VERSION, StudyBusy, TrialState, open_store
from tests.pgserver import PASSWORD

SPAWN = multiprocessing.get_context("spawn")   # a child opens its own connection (psycopg's are not fork-safe)


def test_trial_lifecycle(store_url):
    store = open_store(store_url)
    study = store.study("bench", "cassandra", {"heap_mb": 2048})
    assert store.study("bench") == study
    env = store.environment({"cores": 2, "java": "17"})
    assert store.environment({"java": "17", "cores": 2}) == env
    assert store.environments() == {env: {"cores": 2, "java": "17"}} and store.environment_of(env)["cores"] == 2
    t1 = store.start_trial(study, {"concurrent_writes": 64}, {"name": "ycsb-a"}, tag="bench", environment_id=env)
    assert store.trial(t1)["state"] == "RUNNING"
    store.finish_trial(t1, TrialState.COMPLETE, metrics={"summary": {"throughput_ops_s": 1000.5}},
                       timings={"boot_s": 4.2})
    t2 = store.start_trial(study, {"num_tokens": 0}, {"name": "ycsb-a"})
    store.finish_trial(t2, TrialState.FAIL, failure_kind="refused", error="bad num_tokens", log_excerpt="ERROR x")
    store.retag(t2, "set-aside")
    store.update_meta(t1, {"cost": -1000.5})
    store.update_meta(t1, {"suggestion": 3})
    store.close()

    reopened = open_store(store_url)
    rows = reopened.trials(study)
    assert [r["number"] for r in rows] == [0, 1]
    assert rows[0]["config"] == {"concurrent_writes": 64} and rows[0]["workload"] == {"name": "ycsb-a"}
    assert rows[0]["metrics"]["summary"]["throughput_ops_s"] == 1000.5 and rows[0]["timings"] == {"boot_s": 4.2}
    assert rows[0]["meta"] == {"cost": -1000.5, "suggestion": 3} and rows[0]["environment_id"] == env
    assert rows[0]["finished_at"] >= rows[0]["started_at"] > 0
    assert rows[1]["state"] == "FAIL" and rows[1]["failure_kind"] == "refused" and rows[1]["log_excerpt"] == "ERROR x"
    assert rows[1]["tag"] == "set-aside"
    assert [r["id"] for r in reopened.trials(study, TrialState.FAIL)] == [t2]
    assert reopened.trial(t1)["id"] == t1
    with pytest.raises(KeyError):
        reopened.trial(t2 + 1000)
    (only,) = reopened.studies()
    assert (only["name"], only["system"], only["settings"]) == ("bench", "cassandra", {"heap_mb": 2048})
    assert reopened.study_by_id(study)["name"] == "bench" and reopened.find_study("other") is None


def test_numbers_json_cannot_spell_come_back_as_stored(store_url):
    """A figure of NaN or Infinity (a latency of a phase with no operation of its kind) is written as Python's
    json writes it and read back by the store's faster decoder's fallback; the dashboard sends it as null."""
    import json
    import math

    from nosqltune.dashboard.data import encode

    store = open_store(store_url)
    study = store.study("odd", "cassandra")
    trial = store.start_trial(study, {"heap_mb": 1024}, {"name": "ycsb-a"})
    store.finish_trial(trial, TrialState.COMPLETE, metrics={"summary": {"read_p99_ms": float("nan"),
                                                                        "scan_p99_ms": float("inf"), "n": 3}})
    summary = open_store(store_url).trial(trial)["metrics"]["summary"]
    assert math.isnan(summary["read_p99_ms"]) and summary["scan_p99_ms"] == math.inf and summary["n"] == 3
    assert json.loads(encode(summary)) == {"read_p99_ms": None, "scan_p99_ms": None, "n": 3}


def test_settings_are_merged_key_by_key(store_url):
    """`compare` stores its result under "compare", a later `tune --resume` writes "tune": both stay."""
    store = open_store(store_url)
    study = store.study("tune", "cassandra", {"harness": {"heap_mb": 1024}})
    store.update_study_settings(study, {"compare": {"x1": {"verdict": "better"}}})
    store.update_study_settings(study, {"tune": {"spec": {"budget": 10}}})
    store.update_study_settings(study, {"tune": {"spec": {"budget": 20}}})      # a key is replaced whole
    assert store.find_study("tune")["settings"] == {"harness": {"heap_mb": 1024},
                                                    "compare": {"x1": {"verdict": "better"}},
                                                    "tune": {"spec": {"budget": 20}}}
    with pytest.raises(KeyError):
        store.update_study_settings(study + 100, {"x": 1})


def _start_trials(url: str, count: int) -> None:
    store = open_store(url)
    study = store.study("race")
    for i in range(count):
        store.start_trial(study, {"i": i}, {"name": "w"})
    store.close()


def _run_all(target, args_list, timeout=120) -> None:
    workers = [SPAWN.Process(target=target, args=args) for args in args_list]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout)
    assert [w.exitcode for w in workers] == [0] * len(workers)


def test_trial_numbers_are_atomic_across_processes(store_url):
    open_store(store_url).study("race")
    _run_all(_start_trials, [(store_url, 40)] * 3)
    numbers = [r["number"] for r in open_store(store_url).trials()]
    assert sorted(numbers) == list(range(120))


def _create_study(url: str, queue) -> None:
    queue.put(open_store(url).study("same", "cassandra", {"by": os.getpid()}))


def test_study_creation_is_idempotent_under_racing_creators(store_url):
    open_store(store_url).close()
    queue = SPAWN.Queue()
    creators = [SPAWN.Process(target=_create_study, args=(store_url, queue)) for _ in range(5)]
    for c in creators:
        c.start()
    ids = [queue.get(timeout=120) for _ in creators]
    for c in creators:
        c.join(60)
    assert [c.exitcode for c in creators] == [0] * 5
    assert len(set(ids)) == 1 and len(list(open_store(store_url).studies())) == 1


def test_a_second_process_is_refused_while_the_lease_is_held(store_url):
    holder = open_store(store_url)
    study = holder.study("tune")
    trial = holder.start_trial(study, {}, {"name": "w"})
    with holder.acquire_lease(study, ttl_s=3):
        other = subprocess.run([sys.executable, "-c", (
            "import sys; from nosqltune.store import open_store\n"
            "s = open_store(sys.argv[1])\n"
            "try:\n    s.acquire_lease(s.find_study('tune')['id'], ttl_s=3)\nexcept Exception as e:\n"
            "    print(type(e).__name__, e); sys.exit(2)\n"), store_url], capture_output=True, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=60)
        assert other.returncode == 2 and other.stdout.startswith("StudyBusy study 'tune' is being tuned by another")
        assert f"pid {os.getpid()}" in other.stdout
        time.sleep(1.5)   # past ttl/3: the heartbeat keeps the lease
        reader = open_store(store_url)                 # reading commands need no lease
        assert reader.trial(trial)["state"] == "RUNNING" and reader.find_study("tune")
    # released: the next process gets it at once
    again = open_store(store_url).acquire_lease(study, ttl_s=3)
    again.release()


def test_a_running_trials_phase_never_waits_for_a_busy_store(store_url):
    """Another writer holds the store's write lock: the phase of a running trial is dropped after PHASE_WAIT_S,
    not waited for (the store's full wait is for the trial's result); once the lock is let go, phases and the
    usual writes go through."""
    import threading

    from nosqltune.store.base import PHASE_WAIT_S

    store = open_store(store_url)
    trial = store.start_trial(store.study("tune"), {}, {"name": "w"})
    holder, held, release = open_store(store_url), threading.Event(), threading.Event()

    def hold() -> None:
        with holder._write() as db:   # another writer, as a transaction of another program would
            db.execute("SELECT 1")
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30)
        started = time.monotonic()
        store.phase_recorder(trial)("measuring 60 s")
        waited = time.monotonic() - started
    finally:
        release.set()
        thread.join()
    assert PHASE_WAIT_S * 0.8 <= waited < PHASE_WAIT_S + 2, waited
    assert "phase" not in (store.trial(trial)["meta"] or {})
    store.phase_recorder(trial)("stopping")
    store.update_meta(trial, {"after": 1})
    assert store.trial(trial)["meta"]["phase"] == "stopping" and store.trial(trial)["meta"]["after"] == 1


def _plant_lease(store, study: int, pid: int, host: str) -> None:
    with store._write() as db:
        db.execute("INSERT INTO leases (study_id, owner, pid, host, acquired_at, heartbeat_at) "
                   "VALUES (?, ?, ?, ?, ?, ?)", (study, f"{host}:{pid}:1", pid, host, time.time(), time.time()))


def test_a_lease_whose_heartbeat_stopped_expires(store_url):
    store = open_store(store_url)
    study = store.study("tune")
    # a holder on another machine that stopped beating (crashed, machine gone): refused until the ttl passes
    _plant_lease(store, study, 1, "elsewhere")
    with pytest.raises(StudyBusy, match="pid 1 on elsewhere"):
        store.acquire_lease(study, ttl_s=1.0)
    time.sleep(1.2)
    store.acquire_lease(study, ttl_s=1.0).release()


def test_a_lease_of_a_dead_process_on_this_host_frees_the_study_at_once(store_url):
    store = open_store(store_url)
    study = store.study("tune")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _plant_lease(store, study, gone.pid, socket.gethostname())
    store.acquire_lease(study, ttl_s=60).release()


def test_foreign_keys_are_enforced(store_url):
    store = open_store(store_url)
    with pytest.raises(Exception, match="(?i)foreign key"):
        store.start_trial(999, {}, {"name": "w"})
    assert store.trials() == []


# ---------------------------------------------------------------------------------------------- the queue
def test_a_queued_trial_is_claimed_heartbeats_and_finishes_once(store_url):
    store = open_store(store_url)
    study = store.study("q")
    ids = [store.enqueue_trial(study, {"x": i}, {"name": "w"}, tag="tune", meta={"suggestion": i}) for i in range(2)]
    assert [store.trial(i)["state"] for i in ids] == ["WAITING", "WAITING"]
    assert store.claim_trial(study, "a", tag="other") is None
    first = store.claim_trial(study, "a")
    assert (first["id"], first["state"], first["worker"], first["meta"]) == (ids[0], "RUNNING", "a", {"suggestion": 0})
    beat_before = first["heartbeat_at"]
    with store.trial_heartbeat(first["id"], "a", ttl_s=0.6) as beat:
        time.sleep(0.5)
        assert not beat.lost
    assert store.trial(first["id"])["heartbeat_at"] > beat_before
    assert store.finish_trial(first["id"], TrialState.COMPLETE, metrics={"summary": {}}, worker="b") is False
    assert store.finish_trial(first["id"], TrialState.COMPLETE, metrics={"summary": {}}, worker="a") is True
    assert store.finish_trial(first["id"], TrialState.FAIL, worker="a") is False    # finished already
    assert store.trial(first["id"])["state"] == "COMPLETE"
    assert store.claim_trial(study, "b")["id"] == ids[1]
    assert store.claim_trial(study, "c") is None


def test_a_stale_trial_is_given_again_once_and_its_old_worker_cannot_finish_it(store_url):
    store = open_store(store_url)
    study = store.study("q")
    store.enqueue_trial(study, {"x": 1}, {"name": "w"}, tag="tune", meta={"suggestion": 5})
    lost = store.claim_trial(study, "killed-worker")
    assert store.fail_stale_trials(study, ttl_s=5) == []            # fresh heartbeat: not stale
    time.sleep(0.3)
    assert store.fail_stale_trials(study, ttl_s=0.2) == [lost["id"]]
    row = store.trial(lost["id"])
    assert row["state"] == "FAIL" and row["failure_kind"] == "stale" and "killed-worker" in row["error"]
    retry = store.claim_trial(study, "second-worker")
    assert (retry["config"], retry["meta"], retry["tag"], retry["retry_of"]) == ({"x": 1}, {"suggestion": 5}, "tune",
                                                                                 lost["id"])
    # the first worker comes back (it was only slow): its result is refused, the retry's counts
    assert store.finish_trial(lost["id"], TrialState.COMPLETE, metrics={"summary": {}}, worker="killed-worker") is False
    with store.trial_heartbeat(lost["id"], "killed-worker", ttl_s=0.3) as beat:
        time.sleep(0.4)
        assert beat.lost
    # the retry goes stale too: failed, not queued a third time
    time.sleep(0.3)
    assert store.fail_stale_trials(study, ttl_s=0.2) == [retry["id"]]
    assert store.claim_trial(study, "third-worker") is None
    states = [(r["state"], r["failure_kind"]) for r in store.trials(study)]
    assert states == [("FAIL", "stale"), ("FAIL", "stale")]


def _claim_all(url: str, worker: str, queue) -> None:
    store = open_store(url)
    study = store.find_study("q")["id"]
    got = []
    while (row := store.claim_trial(study, worker)) is not None:
        assert store.finish_trial(row["id"], TrialState.COMPLETE, metrics={"summary": {}}, worker=worker)
        got.append(row["id"])
    queue.put(got)


def test_claims_are_atomic_across_processes(store_url):
    store = open_store(store_url)
    study = store.study("q")
    ids = [store.enqueue_trial(study, {"i": i}, {"name": "w"}) for i in range(60)]
    queue = SPAWN.Queue()
    workers = [SPAWN.Process(target=_claim_all, args=(store_url, f"w{k}", queue)) for k in range(3)]
    for w in workers:
        w.start()
    claimed = [queue.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(60)
    assert sorted(i for got in claimed for i in got) == ids           # every trial exactly once
    assert {r["state"] for r in store.trials(study)} == {"COMPLETE"}


# ---------------------------------------------------------------------------------------------- versions
def test_the_schema_version_is_recorded_and_a_newer_one_refused(store_url):
    from nosqltune.errors import UsageError

    store = open_store(store_url)
    with store._write() as db:
        if store_url.startswith("sqlite"):
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        else:
            assert db.execute("SELECT version FROM nosqltune_store").fetchone()["version"] == SCHEMA_VERSION
            db.execute("UPDATE nosqltune_store SET version = ?", (SCHEMA_VERSION + 1,))
    store.close()
    with pytest.raises(UsageError, match="written by a newer nosqltune") as info:
        open_store(store_url)
    assert PASSWORD not in str(info.value)


# ---------------------------------------------------------------------------------------------- PostgreSQL only
def test_postgresql_urls_that_fail_are_one_line_errors_without_the_password(postgres_server):
    import psycopg

    from nosqltune.errors import UsageError

    good = postgres_server.url()
    cases = [(good.replace(PASSWORD, "wrong-" + PASSWORD), "password authentication failed"),
             (good.rsplit("/", 1)[0] + "/no_such_db", "no_such_db"),
             (good.replace(f":{postgres_server.port}/", f":{postgres_server.port + 1}/"), "cannot open the study store")]
    for url, message in cases:
        with pytest.raises(UsageError, match=message) as info:
            open_store(url)
        text = str(info.value)
        assert "\n" not in text and PASSWORD not in text and "wrong-" not in text, text
    # a database whose tables another program made is not taken over
    other = postgres_server.new_database()
    with psycopg.connect(other, autocommit=True) as db:
        db.execute("CREATE TABLE studies (photo TEXT)")
    with pytest.raises(UsageError, match="did not make"):
        open_store(other)
    with psycopg.connect(other) as db:
        assert [r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")] == ["studies"]


def test_the_stored_url_has_no_password_and_the_environment_can_supply_it(postgres_server, monkeypatch):
    url = postgres_server.new_database()
    store = open_store(url)
    assert PASSWORD not in store.url and store.url == url.replace(f":{PASSWORD}", "")
    store.close()
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert open_store(url.replace(f":{PASSWORD}", "")).find_study("x") is None
