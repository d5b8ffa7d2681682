"""Children never outlive nosqltune: not when it exits, not when it is killed outright."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from nosqltune.runtime import process


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead for our purpose
        return fh.read().split()[2] != "Z"


def test_terminate_escalates_to_kill():
    proc = process.spawn([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                          "signal.SIG_IGN); time.sleep(60)"])
    time.sleep(0.3)
    started = time.monotonic()
    process.terminate(proc, timeout=1)
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_child_dies_with_a_killed_parent(tmp_path):
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.join(os.path.dirname(__file__), '..', '..', 'src')!r})
        from nosqltune.runtime import process
        child = process.spawn(["sleep", "60"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
    """)])
    for _ in range(100):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    child = int(pid_file.read_text())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)  # no atexit, no finally: only PR_SET_PDEATHSIG can save us
    parent.wait()
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def test_reap_all_at_exit():
    proc = process.spawn(["sleep", "60"])
    process.reap_all()
    assert proc.poll() is not None


def test_free_ports_are_distinct_and_free():
    ports = process.free_ports(3)
    assert len(set(ports)) == 3
    assert not any(process.port_in_use(p) for p in ports)


def test_orphaned_trial_folders_are_removed_and_live_or_kept_ones_stay(tmp_path, monkeypatch):
    """A trial folder whose owner process is gone (killed: it could not clean up) is removed when the next trial
    claims its own; one of a live process, one kept on purpose (no owner mark) and one of another machine stay."""
    import json
    import subprocess
    import sys

    from nosqltune.runtime import paths

    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path))
    nodes = tmp_path / "nodes"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    me = paths._process_identity(os.getpid())
    for name, owner in [("dead", {**me, "pid": dead_pid, "started": "1"}), ("live", me),
                        ("reused-pid", {**me, "started": "1"}), ("elsewhere", {**me, "host": "another-machine",
                                                                                 "pid": dead_pid})]:
        (nodes / name).mkdir(parents=True)
        (nodes / name / paths.OWNER_FILE).write_text(json.dumps(owner))
    (nodes / "kept").mkdir()
    paths.claim_trial_dir(nodes / "new")
    assert sorted(p.name for p in nodes.iterdir()) == ["elsewhere", "kept", "live", "new"]
    assert json.loads((nodes / "new" / paths.OWNER_FILE).read_text()) == me
    paths.keep_trial_dir(nodes / "new")
    assert not (nodes / "new" / paths.OWNER_FILE).exists()


def test_children_do_not_inherit_the_store_password(monkeypatch):
    """A PostgreSQL study's password, moved into PGPASSWORD when a command starts, is ours: a datastore, the
    client, irace or an external target's command does not see it; other variables pass, an explicit env wins,
    and a PGPASSWORD the user exported (not moved by us) is theirs to pass on."""
    from nosqltune.cli import _password_to_environment

    script = ["sh", "-c", 'echo "${PGPASSWORD-unset} ${NOSQLTUNE_PLAIN-unset}"']

    def seen(**kw):
        proc = process.spawn(script, stdout=subprocess.PIPE, **kw)
        out, _ = proc.communicate(timeout=10)
        process.terminate(proc)
        return out.decode().split()

    monkeypatch.setattr(process, "_own_secrets", set())
    monkeypatch.setenv("PGPASSWORD", "users-own")
    monkeypatch.setenv("NOSQLTUNE_PLAIN", "kept")
    assert seen() == ["users-own", "kept"]
    assert _password_to_environment("postgresql://u:s3cret-planted@127.0.0.1:5432/db") == \
        "postgresql://u@127.0.0.1:5432/db"
    assert os.environ["PGPASSWORD"] == "s3cret-planted"      # libpq of this process reads it
    assert seen() == ["unset", "kept"]
    assert "PGPASSWORD" not in process.child_env(X="1") and process.child_env(X="1")["X"] == "1"
    assert seen(env={"PGPASSWORD": "given"}) == ["given", "unset"]


def test_how_a_datastore_that_ended_while_it_started_is_told():
    exited = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    exited.wait(10)
    assert process.death_cause(exited) is None
    assert process.startup_failure_kind(exited) == "refused"        # it rejected its configuration itself
    for sig in (signal.SIGTERM, signal.SIGKILL):
        killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        killed.send_signal(sig)
        killed.wait(10)
        assert process.startup_failure_kind(killed) == "crashed"     # no memory group said it ran out
        assert process.startup_failure_kind(killed, oom_kills=1) == "refused"
        assert process.death_cause(killed).startswith(f"killed by {sig.name}")
    assert "or the kernel's out-of-memory killer" in process.death_cause(killed)      # no group: cannot tell
    assert "counted no out-of-memory kill" in process.death_cause(killed, oom_kills=0)
