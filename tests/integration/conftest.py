"""Integration tests run real Cassandra nodes (Maven-resolved) and the real YCSB client."""

import os
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from nosqltune.runtime import process
from nosqltune.runtime.java import java_version
from nosqltune.systems.cassandra.node import CassandraNode

# One data size and one heap for the Cassandra tests (the heap is part of the dataset's key: one load serves
# them all): small enough for CI, large enough that flushes, the key cache and both JVMs do real work
OPERATIONS = 2000
SMALL = ["--records", "5000", "--operations", str(OPERATIONS), "--threads", "8", "--warmup-ops", "300",
         "--heap", "1G"]


@contextmanager
def _environ(name: str, value: str):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@pytest.fixture(scope="session")
def dataset_cache(tmp_path_factory):
    """The session's dataset cache (NOSQLTUNE_DATASETS), apart from the work directory as the user's cache is:
    datasets are loaded once and reused by every test, and the user's own cache is neither read nor filled."""
    folder = tmp_path_factory.mktemp("nosqltune-datasets")
    with _environ("NOSQLTUNE_DATASETS", str(folder)):
        yield folder


@pytest.fixture(scope="session")
def nosqltune_home(tmp_path_factory, dataset_cache):
    """One work directory for the session (trial nodes, logs), with the session's dataset cache."""
    home = tmp_path_factory.mktemp("nosqltune-home")
    with _environ("NOSQLTUNE_HOME", str(home)):
        yield home


def dataset_dirs(folder) -> list:
    """The datasets in a dataset cache (folders; build locks and builds in progress aside)."""
    return [d for d in folder.iterdir() if d.is_dir() and "." not in d.name] if folder.exists() else []


def sigint_default() -> None:
    """For child processes that tests interrupt: Ctrl-C's default action, even when the test run itself was
    started in the background (a non-interactive shell starts background jobs with SIGINT ignored, and the
    children would inherit that)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def our_jvms(marker: str) -> list[str]:
    """Command lines of live processes (not zombies) whose arguments mention `marker`."""
    out = subprocess.run(["pgrep", "-a", "-f", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


@pytest.fixture(autouse=True)
def no_orphans(nosqltune_home, dataset_cache):
    """Every integration test must leave no Cassandra or YCSB JVM of ours behind, pass or fail (trial nodes run
    in the work directory, the nodes that build datasets in the dataset cache)."""
    if java_version() < 17:
        pytest.skip("Java 17 is required")
    yield
    # a killed JVM can take a moment to exit on a loaded machine: give it up to 15 s before calling it an orphan
    deadline = time.monotonic() + 15
    left = our_jvms(str(nosqltune_home)) + our_jvms(str(dataset_cache))
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = our_jvms(str(nosqltune_home)) + our_jvms(str(dataset_cache))
    assert not left, f"processes left behind: {left}"
    leftovers = volume_leftovers(nosqltune_home, dataset_cache)
    assert not leftovers, f"volumes or groups left behind: {leftovers}"


def volume_leftovers(*folders) -> list[str]:
    """Mounts under `folders`, loop devices whose image is under them, and trial cgroups of ours (memory, blkio)."""
    from nosqltune.runtime import blkio, cgroup
    from nosqltune.runtime.volume import loop_backing_file, mounts

    tops = [os.path.realpath(f) for f in folders]
    under = [point for _source, point in mounts() if any(point.startswith(t + os.sep) for t in tops)]
    loops = []
    for entry in Path("/sys/block").glob("loop*"):
        backing = loop_backing_file(int(entry.name[4:])) if entry.name[4:].isdigit() else None
        if backing and any(backing.startswith(t + os.sep) for t in tops):
            loops.append(f"/dev/{entry.name} -> {backing}")
    groups = []
    for locate in (cgroup._locate, blkio._locate):
        try:
            parent = locate(cgroup.CGROUP_ROOT, cgroup.PROC_SELF_CGROUP).parent
        except Exception:
            continue
        groups += [str(g) for g in parent.glob("nosqltune-*") if g.is_dir() and "irace" not in g.name]
    return under + loops + groups


def assert_cost_measured(summary: dict, nodes: int = 1, gc: bool = True) -> None:
    """The node's and the client's own cost of the measured phase are stored and add up: CPU is user + system
    (the same ticks read from /proc or INFO, to their rounding), the node used between a sliver and every
    core of the machine, and per operation it is what the phase's total says."""
    cores = os.cpu_count() or 1
    for prefix in ("node", "client"):
        cpu = summary[f"{prefix}_cpu_ms"]
        assert cpu > 0 and summary[f"{prefix}_cpu_us_per_op"] > 0, (prefix, summary)
        assert 0 < summary[f"{prefix}_cpu_cores"] <= cores * 1.1, (prefix, summary)
        parts = summary[f"{prefix}_cpu_user_ms"] + summary[f"{prefix}_cpu_sys_ms"]
        assert abs(parts - cpu) <= max(0.1 * cpu, 30 * nodes), (prefix, parts, cpu)
    assert (summary["node_gc_ms"] is not None) == gc and (summary["node_gc_us_per_op"] is not None) == gc


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    """One small Cassandra node, started by the library as a trial's node is, for a module's socket and JMX
    checks (test_security, test_online_node); its home is its own (the per-test leak check looks for JVMs of the session's work directory), and it
    must be gone when the module ends. `main()` stops every child it tracks as it returns; this node belongs to the
    module, not to a command, so it is untracked once started (it still dies with this process: PR_SET_PDEATHSIG)."""
    home = tmp_path_factory.mktemp("security-node") / "node"
    cassandra = CassandraNode(home=home, heap_mb=1024)
    try:
        cassandra.start(timeout=180)
        with process._lock:
            process._live.discard(cassandra.proc)
        yield cassandra
    finally:
        cassandra.stop(drain=False)
    deadline = time.monotonic() + 15
    while our_jvms(str(home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not our_jvms(str(home)), "the node was left running"
