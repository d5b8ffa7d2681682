"""The fault campaign (issue 22): faults injected during real studies, at each phase of a trial, with what the
user sees, the trial's stored state and reason, and the invariants: no trial lost, none counted twice, no process
or file left behind, the study finishes (resumed when the tuner itself was stopped). Each case records its row
for bench/results/faults.md (`make faults`). Each study has a work directory of its own (a killed tuner cannot
remove its trial's folder there; other tests count what the session's work directory holds). Most cases run Redis
trials (seconds each); the two that `make test` runs are the datastore killed while measured and the tuner killed
while the node boots."""

from __future__ import annotations

import shutil

import pytest

from tests.faultlog import record

from .fault_injection import REDIS_TRIAL, run_with_fault

pytestmark = [pytest.mark.faults,
              pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")]

# fault -> what the faulted trial's first row must be stored as (a stopped tuner's trial is run again on resume)
EXPECTED = {
    "datastore-kill": ("FAIL", {"crashed", "workload"}),   # crashed also when killed while it started
    "datastore-hang": ("FAIL", {"workload", "timeout", "refused"}),
    "client-kill": ("FAIL", {"workload"}),
    "client-hang": ("FAIL", {"timeout"}),
    "tuner-kill": ("FAIL", {"interrupted"}),   # found RUNNING by the resume (COMPLETE when killed after storing)
    "tuner-interrupt": ("FAIL", {"interrupted"}),
}
CASES = [("datastore-kill", p) for p in ("boot", "warm-up", "measure")] \
    + [("datastore-hang", p) for p in ("warm-up", "measure")] \
    + [("client-kill", p) for p in ("warm-up", "measure")] \
    + [("client-hang", p) for p in ("warm-up", "measure")] \
    + [("tuner-kill", p) for p in ("restore", "boot", "warm-up", "measure", "stop")] \
    + [("tuner-interrupt", p) for p in ("boot", "measure")]


def _param(fault: str, phase: str):
    """Every case takes about 22 s: make test-all and make faults (make test keeps a resume after SIGKILL on the
    recorded surrogate: tests/unit/test_tuning_loop.py)."""
    return pytest.param(fault, phase, id=f"{fault}@{phase}", marks=[pytest.mark.slow])


def check(outcome) -> None:
    """The invariants every fault must keep (lost and counted twice against the study's own budget)."""
    assert outcome.injected, f"{outcome.fault} at {outcome.phase} was never injected"
    assert outcome.lost == 0, f"trials lost: {outcome.rows}"
    assert outcome.counted_twice == 0
    assert not outcome.orphans, f"left running: {outcome.orphans}"
    assert not outcome.files_outside, f"written outside our folders: {outcome.files_outside}"
    # a killed tuner's trial folder is removed by the next trial on this machine (its owner is gone)
    assert not outcome.left_in_work_dir, f"trial folders left: {outcome.left_in_work_dir}"
    assert outcome.resumed, outcome.user_sees
    assert not [r for r in outcome.rows if r["state"] in ("RUNNING", "WAITING")]


@pytest.mark.parametrize("fault, phase", [_param(f, p) for f, p in CASES])
def test_fault_during_a_redis_study(fault, phase, nosqltune_home, dataset_cache, tmp_path):
    outcome = run_with_fault(fault=fault, phase=phase, home=tmp_path / "home", study=tmp_path / "study.db",
                             trial_args=REDIS_TRIAL)
    check(outcome)
    state, kinds = EXPECTED[fault]
    if fault.startswith("tuner"):
        assert outcome.exit_code == (-9 if fault == "tuner-kill" else 130), outcome.user_sees
        assert outcome.resume_code == 0
        if fault == "tuner-interrupt":
            assert "interrupted" in outcome.user_sees
    else:
        assert outcome.exit_code == 0, outcome.user_sees   # one failed trial does not stop a study
    if fault == "tuner-kill" and phase in ("restore", "stop") and outcome.state == "COMPLETE":
        pass   # killed before the trial's row was written, or after its result was stored: nothing to run again
    else:
        assert outcome.state == state and outcome.failure_kind in kinds, (outcome.state, outcome.failure_kind,
                                                                          outcome.error)
        assert outcome.error and "\n" not in outcome.error
    if fault.endswith("hang") and outcome.detect_s is not None:
        # bounded by the documented timeouts: the client's (90 s + warm-up limit + measured time) at most
        assert outcome.detect_s < 90 + 10 + 8 + 15
    record("fault", **outcome.row())


@pytest.fixture
def tmpfs(tmp_path):
    """Small filesystems of the test's own (tmpfs), unmounted at the end: the disk that fills up."""
    import os
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    mounted = []

    def mount(name: str, size_mb: int):
        path = tmp_path / name
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)], check=True)
        mounted.append(path)
        return path

    yield mount
    for path in mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("fault, phase, lock_s", [
    pytest.param("store-locked", "measure", 45, id="store-locked-45s@measure", marks=pytest.mark.slow),
    pytest.param("store-locked", "measure", 8, id="store-locked-8s@measure", marks=pytest.mark.slow),
    pytest.param("store-full", "measure", 0, id="store-full@measure", marks=pytest.mark.slow),
])
def test_the_study_store_unavailable(fault, phase, lock_s, nosqltune_home, dataset_cache, tmp_path, tmpfs):
    """Another program holding the store's write lock past the wait (45 s; 8 s is waited out), the store's disk
    full: the study stops with one line saying why and what to do, and `--resume` goes on with nothing lost."""
    folder = tmpfs("store", 8) if fault == "store-full" else tmp_path
    outcome = run_with_fault(fault=fault, phase=phase, home=tmp_path / "home", study=folder / "study.db",
                             trial_args=REDIS_TRIAL, full=folder, lock_s=lock_s)
    check(outcome)
    if fault == "store-locked":
        outcome.fault = f"store-locked for {lock_s} s"
    if fault == "store-locked" and lock_s < 30:
        assert outcome.exit_code == 0 and outcome.resume_code is None   # waited out, nothing to do
    else:
        assert outcome.exit_code == 1 and outcome.resume_code == 0
        assert ("locked by another program" if fault == "store-locked" else "cannot write the study store") \
            in outcome.user_sees
        assert "--resume" in outcome.user_sees
    record("fault", **outcome.row())


CASSANDRA_TRIAL = ["--workload", "ycsb-a", "--records", "5000", "--operations", "20000", "--threads", "8",
                   "--warmup-ops", "2000", "--heap", "1G", "--knobs", "rafiki5"]


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["restore", "measure"])
def test_data_disk_full_during_a_cassandra_study(phase, dataset_cache, tmp_path, tmpfs):
    """The trials' data folder (NOSQLTUNE_HOME) on a small filesystem filled at a phase of trial 2. Where our
    own code meets the full disk (restoring the data), the study stops with exit 3 and the fix: a full disk would
    fail every later trial in milliseconds and burn the budget; the space is freed and `--resume` runs the trial
    again. Where the datastore meets it (its commit log while measured), the trial fails (crashed) and the space is
    freed once it ended; the study goes on."""
    home = tmpfs("home", 1024)
    outcome = run_with_fault(fault="data-full", phase=phase, home=home, study=tmp_path / "study.db",
                             trial_args=CASSANDRA_TRIAL, system="cassandra", full=home, budget=4,
                             extra_env={"NOSQLTUNE_HOME": str(home)})
    check(outcome)
    assert outcome.state == "FAIL" and outcome.error and "\n" not in outcome.error, outcome.error
    if outcome.exit_code == 3:
        assert "no space left" in outcome.user_sees and "tune --resume" in outcome.user_sees, outcome.user_sees
        assert outcome.resume_code == 0 and outcome.failure_kind == "interrupted"
    else:
        assert phase == "measure" and outcome.exit_code == 0, outcome.user_sees
        assert outcome.failure_kind == "crashed", outcome.error
    trials = [r for r in outcome.rows if r["failure_kind"] != "interrupted"]
    assert trials[-1]["state"] == "COMPLETE", trials[-1]["error"]   # space freed: trials run again
    record("fault", **outcome.row())


@pytest.mark.slow
@pytest.mark.parametrize("consistency", ["ONE", "ALL"])
def test_cluster_node_killed_while_measured(consistency, nosqltune_home, dataset_cache, tmp_path):
    """One node of a 2-node local cluster (RF 2) killed in the measured phase of trial 2: the trial fails as
    crashed (a node died: the configuration may be why), the study goes on."""
    outcome = run_with_fault(fault="datastore-kill", phase="measure", home=tmp_path / "home",
                             study=tmp_path / "study.db", system=f"cassandra 2 nodes, {consistency}",
                             trial_args=[*CASSANDRA_TRIAL, "--nodes", "2", "--rf", "2", "--consistency", consistency])
    check(outcome)
    assert outcome.exit_code == 0 and outcome.state == "FAIL" and outcome.failure_kind == "crashed", outcome.error
    record("fault", **outcome.row())


@pytest.mark.slow
@pytest.mark.parametrize("fault, phase, kinds", [("datastore-kill", "measure", {"crashed"}),
                                                 ("datastore-hang", "boot", {"refused", "timeout"})],
                         ids=["datastore-kill@measure", "datastore-hang@boot"])
def test_fault_during_a_cassandra_study(fault, phase, kinds, nosqltune_home, dataset_cache, tmp_path):
    """Cassandra killed while measured (at once: "killed by SIGKILL"), hung while it boots (the 120 s boot limit)."""
    outcome = run_with_fault(fault=fault, phase=phase, home=tmp_path / "home",
                             study=tmp_path / "study.db", system="cassandra", trial_args=CASSANDRA_TRIAL)
    check(outcome)
    assert outcome.exit_code == 0 and outcome.state == "FAIL" and outcome.failure_kind in kinds, outcome.error
    if fault == "datastore-kill":
        assert "killed by SIGKILL" in outcome.error
    else:
        assert outcome.detect_s < 120 + 15
    record("fault", **outcome.row())


@pytest.mark.slow
def test_the_datastore_killed_during_a_replay(nosqltune_home, dataset_cache, tmp_path):
    """Cassandra killed while trial 2 replays the shipped capture as fast as answered: the trial fails as crashed,
    the study goes on."""
    outcome = run_with_fault(fault="datastore-kill", phase="measure", home=tmp_path / "home",
                             study=tmp_path / "study.db", system="cassandra, replay",
                             trial_args=["--workload", "replay:keyvalue:max", "--data", "profile:keyvalue",
                                         "--threads", "4", "--heap", "1G", "--knobs", "rafiki5"])
    check(outcome)
    assert outcome.exit_code == 0 and outcome.state == "FAIL" and outcome.failure_kind == "crashed", outcome.error
    record("fault", **outcome.row())


@pytest.mark.slow
def test_a_damaged_jar_in_the_maven_cache_is_fetched_again(nosqltune_home, dataset_cache, tmp_path, capsys):
    """A jar of Cassandra's cut short in the Maven cache (a download cut off): the jar is found damaged before any
    node starts, removed and fetched again, and the trial runs; offline, the command would stop with exit 3 and
    the fix (the trial interrupted, not failed)."""
    import subprocess

    from nosqltune.cli import main
    from nosqltune.runtime.paths import cache_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    subprocess.run(["cp", "-al", str(cache_dir() / "maven"), str(cache / "maven")], check=True)
    jar = cache / "maven/org/lz4/lz4-java/1.8.0/lz4-java-1.8.0.jar"
    whole = jar.read_bytes()
    jar.unlink()   # a new file: the user's cache (hard-linked) keeps its intact jar
    jar.write_bytes(whole[: len(whole) // 2])
    study = tmp_path / "s.db"
    import os
    old = os.environ.get("NOSQLTUNE_CACHE")
    os.environ["NOSQLTUNE_CACHE"] = str(cache)
    try:
        code = main(["bench", *CASSANDRA_TRIAL[:-2], "--operations", "2000", "--study", str(study)])
    finally:
        if old is None:
            os.environ.pop("NOSQLTUNE_CACHE")
        else:
            os.environ["NOSQLTUNE_CACHE"] = old
    err = capsys.readouterr().err
    if code == 3:   # no network to fetch it again: one line, the fix, and nothing counted as a failed trial
        assert "run `nosqltune setup`" in err.strip().splitlines()[-1]
        outcome = "exit 3: " + err.strip().splitlines()[-1]
    else:
        assert code == 0, err
        assert jar.stat().st_size == len(whole)   # fetched again, whole
        outcome = "the damaged jar was removed and fetched again by Maven; the trial ran"
    record("fault", fault="damaged jar in the Maven cache", phase="boot", system="cassandra", outcome=outcome,
           lost=0, counted_twice=0, orphans=0, files_outside=0, resumed=True, detect_s=None)


@pytest.mark.parametrize("missing", ["Rscript", "irace"])
def test_irace_asked_for_without_r_or_irace(missing, tmp_path, monkeypatch, capsys):
    """irace asked for where R or irace is missing: exit 3 with what to install, before anything is written."""
    import os
    import sys

    from nosqltune.cli import main

    if missing == "Rscript":
        monkeypatch.setenv("PATH", os.path.dirname(sys.executable))   # python only: no Rscript
    else:
        monkeypatch.setattr("nosqltune.optimizers.irace.IRACE_PATHS", ())
    monkeypatch.delenv("NOSQLTUNE_IRACE", raising=False)
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    code = main(["tune", "--optimizer", "irace", "--system", "redis", "--budget", "20",
                 "--study", str(tmp_path / "s.db")])
    err = capsys.readouterr().err.strip()
    assert code == 3 and len(err.splitlines()) == 1 and "apt-get install" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    record("fault", fault=f"{missing} missing, irace asked for", phase="start", system="redis",
           outcome=f"exit 3: {err}", lost=0, counted_twice=0, orphans=0, files_outside=0, resumed=True,
           detect_s=None)


@pytest.mark.slow   # about a minute: make test-all and make faults
def test_the_tuner_killed_while_a_profiles_dataset_is_written(tmp_path, dataset_cache):
    """SIGKILL to bench while loadgen's ProfileWriter writes a profile's SSTables: the writer's JVM goes with it
    (nothing left running), no half-made dataset is ever used (the next run sweeps the dead builder's folder and
    builds it again), and the run after it completes."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    from .fault_injection import processes_under

    home = tmp_path / "home"
    cache = dataset_cache / "profile-kill"
    env = {**os.environ, "NOSQLTUNE_HOME": str(home), "NOSQLTUNE_DATASETS": str(cache)}
    command = [sys.executable, "-m", "nosqltune", "bench", "--workload", "profile:messaging", "--records", "400000",
               "--operations", "500", "--threads", "4", "--warmup-ops", "100", "--heap", "1G"]
    started = time.monotonic()
    proc = subprocess.Popen([*command, "--study", str(tmp_path / "killed.db")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    writer = None
    while writer is None and proc.poll() is None and time.monotonic() - started < 240:
        writer = next((pid for pid, cmd in processes_under("ProfileWriter").items() if str(home) in cmd
                       or str(cache) in cmd), None)
        time.sleep(0.2)
    assert writer is not None, "the profile's SSTable writer never ran"
    time.sleep(2)   # well into the writing
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    detect = time.monotonic()
    while processes_under(str(home), str(cache)) and time.monotonic() - detect < 30:
        time.sleep(0.5)
    orphans = processes_under(str(home), str(cache))
    assert not orphans, f"left running: {orphans}"
    assert not [d for d in cache.iterdir() if d.is_dir() and "." not in d.name], "a half-made dataset was kept"

    done = subprocess.run([*command, "--study", str(tmp_path / "again.db"), "--json"], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])
    record("fault", fault="tuner-kill", phase="profile dataset build", system="cassandra", outcome="rebuilt",
           state="-", reason="-", lost=0, counted_twice=0, orphans=len(orphans), files_outside=0, resumed=True,
           detect_s=round(time.monotonic() - detect, 1))
