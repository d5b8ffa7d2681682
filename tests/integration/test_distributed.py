"""A study on a local Ray cluster (a head and a second node, each with one `nosqltune_slot`) with a throwaway
PostgreSQL store: a 12-trial study on the surrogate ends with 12 completed trials and `best`, `report`, `export`
work on it; on real Redis, a worker killed (SIGKILL) in the middle of a trial: its trial goes stale, is given
again once, and every suggestion ends as exactly one completed trial. The password of the store's URL never shows
in output, the store or the report."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store
from tests.pgserver import PASSWORD

import ray  # noqa: E402,F401  (make setup installs it with the test extras: a missing Ray fails here, not skips)

SLOT = '{"nosqltune_slot": 1}'


def _ray(*args: str, env: dict) -> None:
    """`ray start/stop`; its output to a file (the daemons it leaves keep a pipe open, and a read would hang)."""
    with open(os.path.join(env["NOSQLTUNE_HOME"], "ray-cli.log"), "ab") as log:   # the workers' home
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], check=True, stdout=log, stderr=log,
                       stdin=subprocess.DEVNULL, env=env, timeout=120)


@pytest.fixture(scope="module")
def ray_cluster(nosqltune_home, tmp_path_factory):
    """Two Ray nodes on this machine, on loopback; the workers inherit the test session's dataset cache and have
    a work directory of their own (a killed worker leaves its trial's folder there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": os.pathsep.join(sys.path),
           "NOSQLTUNE_HOME": str(tmp_path_factory.mktemp("ray-workers-home"))}
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--resources", SLOT, "--disable-usage-stats"]
    address = f"127.0.0.1:{port}"
    try:
        _ray("start", "--head", "--port", str(port), "--include-dashboard", "false", *common, env=env)
        _ray("start", "--address", address, *common, env=env)
        yield address, env["NOSQLTUNE_HOME"]
    finally:
        _ray("stop", "--force", env=env)


def _run(capsys, *args: str) -> tuple[int, dict]:
    code = main([*args, "--json"])
    captured = capsys.readouterr()
    assert PASSWORD not in captured.out + captured.err
    return code, (json.loads(captured.out) if captured.out.strip() else {})


def _dump(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as db:
        rows = db.execute("SELECT studies::text FROM studies UNION ALL SELECT trials::text FROM trials").fetchall()
    return "\n".join(r[0] for r in rows)


@pytest.mark.slow   # 50 s with Ray's start: make test-all (make test keeps the PostgreSQL store's conformance, tests/integration/test_store_conformance.py, and the parallel loop with the local executor, tests/unit/test_parallel.py)
def test_a_study_on_ray_with_a_postgresql_store(ray_cluster, postgres_server, tmp_path, capsys):
    url = postgres_server.new_database()
    code, result = _run(capsys, "tune", "--system", "surrogate:wide24", "--knobs", "wide24", "--workload", "read90",
                        "--optimizer", "smac", "--budget", "12", "--confirm-top", "0", "--parallel", "2",
                        "--executor", "ray", "--address", ray_cluster[0], "--study", url)
    assert code == 0 and result["trials"] == 12 and PASSWORD not in result["study"]
    store = open_store(url)
    rows = store.trials(store.find_study("tune")["id"])
    assert len(rows) == 12 and {r["state"] for r in rows} == {"COMPLETE"}
    assert sorted(r["meta"]["suggestion"] for r in rows) == list(range(12))
    assert len({r["worker"] for r in rows}) >= 1 and all(r["environment_id"] for r in rows)
    code, best = _run(capsys, "best", "--study", url, "--format", "json")
    assert code == 0 and best["best"]["value"] == result["best"]["value"]
    assert main(["report", "--study", url, "--out", str(tmp_path / "report")]) == 0
    assert PASSWORD not in "".join(p.read_text(errors="replace") for p in (tmp_path / "report").rglob("*")
                                   if p.is_file() and p.suffix in (".html", ".json", ".csv"))
    assert main(["export", "--study", url, "--out", str(tmp_path / "trials.csv")]) == 0
    assert len((tmp_path / "trials.csv").read_text().strip().splitlines()) == 13
    capsys.readouterr()
    assert PASSWORD not in _dump(url)


@pytest.mark.slow   # 41 s: make test-all (make test keeps a worker killed mid-trial with the local executor,
# tests/unit/test_parallel.py, and the Ray study on PostgreSQL above)
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")
def test_a_worker_killed_mid_trial_on_ray_loses_nothing(ray_cluster, postgres_server, nosqltune_home, tmp_path,
                                                      capsys):
    url = postgres_server.new_database()
    killed: list[int] = []

    def kill_one_worker() -> None:
        """SIGKILL the Ray worker running the study's 4th trial, in the middle of it."""
        store = open_store(url)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            study = store.find_study("tune")
            rows = store.trials(study["id"]) if study else []
            running = [r for r in rows if r["state"] == "RUNNING" and (r["meta"] or {}).get("worker_pid")
                       and r["meta"]["suggestion"] >= 3 and time.time() - r["started_at"] > 0.3]
            if running:   # 0.3 s into the trial: the datastore is up, the client runs
                os.kill(running[0]["meta"]["worker_pid"], signal.SIGKILL)
                killed.append(running[0]["id"])
            time.sleep(0.2)
        store.close()

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    code, result = _run(capsys, "tune", "--system", "redis", "--workload", "ycsb-c", "--records", "3000",
                        "--operations", "50000", "--threads", "4", "--warmup-ops", "3000", "--optimizer", "random",
                        "--budget", "12", "--confirm-top", "0", "--parallel", "2", "--executor", "ray", "--address",
                        ray_cluster[0], "--stale-after", "6", "--study", url)
    killer.join()
    assert code == 0 and killed, "no trial was killed"
    store = open_store(url)
    rows = store.trials(store.find_study("tune")["id"])
    stale = [r for r in rows if r["failure_kind"] == "stale"]
    assert [r["id"] for r in stale] == killed
    completed = [r for r in rows if r["state"] == "COMPLETE"]
    assert sorted(r["meta"]["suggestion"] for r in completed) == list(range(12))   # each exactly once
    assert [r["retry_of"] for r in completed if r["retry_of"]] == killed
    assert not [r for r in rows if r["state"] in ("WAITING", "RUNNING")]
    assert result["trials"] == 12 and result["failed_trials"] == 0     # the stale trial's retry counts, not it
    code, best = _run(capsys, "best", "--study", url, "--format", "json")
    assert code == 0 and best["best"]["value"] == result["best"]["value"]
    assert main(["export", "--study", url, "--out", str(tmp_path / "trials.csv")]) == 0
    assert len((tmp_path / "trials.csv").read_text().strip().splitlines()) == 14    # 13 trials, the stale one too
    workers_home = ray_cluster[1]
    servers = subprocess.run(["pgrep", "redis-server"], capture_output=True, text=True).stdout.split()
    ours = [pid for pid in servers if os.readlink(f"/proc/{pid}/cwd").startswith(workers_home)]   # run in a trial folder
    assert not ours, "a Redis server of the killed worker was left running"
    # only the killed trial's folder is left (a killed process cannot clean up); the others' trials cleaned theirs
    nodes = os.path.join(workers_home, "nodes")
    assert len([d for d in os.listdir(nodes) if d.startswith("redis-")]) <= 1
