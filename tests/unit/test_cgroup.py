"""Memory cgroups for disk-bound trials: where a group goes on cgroup v1 and v2 (on a fake tree standing in for
/sys/fs/cgroup and /proc/self/cgroup), what is written into it, the one-line errors when no group can be made, and
on this machine a real group whose reader's page cache stays under its cap and whose reads go to disk."""

import errno
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nosqltune.errors import SetupError
from nosqltune.runtime import cgroup, page_cache, process
from nosqltune.runtime.cgroup import MemoryGroup

MiB = 1 << 20

V1_FILES = {"cgroup.procs": "", "memory.limit_in_bytes": "9223372036854771712\n", "memory.usage_in_bytes": "0\n",
            "memory.max_usage_in_bytes": "0\n", "memory.force_empty": "", "memory.swappiness": "60\n",
            "memory.stat": "cache 0\nrss 0\ntotal_cache 0\ntotal_rss 0\n",
            "memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"}
MEMSW = {"memory.memsw.limit_in_bytes": "9223372036854771712\n"}
V2_FILES = {"cgroup.procs": "", "cgroup.type": "domain\n", "cgroup.subtree_control": "", "memory.max": "max\n",
            "memory.current": "0\n", "memory.peak": "0\n", "memory.high": "max\n", "memory.reclaim": "",
            "memory.stat": "anon 0\nfile 0\n", "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"}
SWAP_MAX = {"memory.swap.max": "max\n"}


def _fill(path: Path, files: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name).write_text(text)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A cgroupfs stand-in: `kernel(files)` makes new groups come with these files, as the kernel does."""
    root, proc = tmp_path / "sys-fs-cgroup", tmp_path / "proc-self-cgroup"
    root.mkdir()

    class Fake:
        def __init__(self):
            self.root, self.proc, self.files = root, proc, {}

        def kernel(self, files):
            self.files = files

        def create(self, name="node1", limit=64 * MiB, **kw):
            return MemoryGroup.create(name, limit, cgroup_root=root, proc_self_cgroup=proc, **kw)

        def usable(self):
            return cgroup.usable(cgroup_root=root, proc_self_cgroup=proc)

    f = Fake()
    monkeypatch.setattr(cgroup, "_make_dir", lambda path: (os.mkdir(path), _fill(Path(path), f.files)))
    monkeypatch.setattr(cgroup, "_remove_dir", shutil.rmtree)
    return f


def _v1(fake, own="/session/abc", memsw=False, own_exists=True):
    files = {**V1_FILES, **(MEMSW if memsw else {})}
    _fill(fake.root / "memory", files)
    if own_exists:
        _fill(fake.root / "memory" / own.strip("/"), files)
    fake.proc.write_text(f"9:name=systemd:/\n4:memory:{own}\n1:cpu:/\n0::/\n")
    fake.kernel(files)


def _v2(fake, own="/user.slice/session-1.scope", parent_delegates=True, own_delegates=False, swap=True):
    files = {**V2_FILES, **(SWAP_MAX if swap else {})}
    (fake.root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (fake.root / "cgroup.subtree_control").write_text("")
    (fake.root / "cgroup.procs").write_text("1\n")
    parts = [p for p in own.split("/") if p]
    for depth in range(1, len(parts) + 1):
        group = fake.root.joinpath(*parts[:depth])
        _fill(group, files)
        delegates = own_delegates if depth == len(parts) else parent_delegates
        (group / "cgroup.subtree_control").write_text("memory pids\n" if delegates else "pids\n")
    fake.proc.write_text(f"0::{own}\n")
    fake.kernel(files)


# cgroup v1


def test_v1_group_under_our_own_memory_group(fake):
    _v1(fake)
    with fake.create("node1", 64 * MiB) as group:
        assert group.version == 1
        assert group.path == fake.root / "memory" / "session" / "abc" / "nosqltune-node1"
        assert (group.path / "memory.limit_in_bytes").read_text() == str(64 * MiB)
        assert (group.path / "memory.swappiness").read_text() == "0"
        assert not (group.path / "memory.memsw.limit_in_bytes").exists()  # no swap accounting: nothing to cap
        assert group.usage().limit == 64 * MiB
    assert not group.path.exists()


def test_v1_caps_memory_and_swap_together_unless_swap_is_allowed(fake):
    _v1(fake, memsw=True)
    with fake.create("a") as group:
        assert (group.path / "memory.memsw.limit_in_bytes").read_text() == str(64 * MiB)
    with fake.create("b", swap=True) as group:
        assert (group.path / "memory.memsw.limit_in_bytes").read_text() == MEMSW["memory.memsw.limit_in_bytes"]
        assert (group.path / "memory.swappiness").read_text() == "60\n"


def test_v1_in_a_container_whose_mount_is_our_own_group(fake):
    _v1(fake, own="/docker/0123", own_exists=False)
    with fake.create() as group:
        assert group.path == fake.root / "memory" / "nosqltune-node1"


def test_v1_usage_reads_the_kernel_figures(fake):
    _v1(fake)
    with fake.create(limit=64 * MiB) as group:
        (group.path / "memory.usage_in_bytes").write_text(f"{50 * MiB}\n")
        (group.path / "memory.max_usage_in_bytes").write_text(f"{63 * MiB}\n")
        (group.path / "memory.stat").write_text(f"cache {1}\nrss {2}\ntotal_cache {40 * MiB}\ntotal_rss {9 * MiB}\n")
        (group.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
        assert group.usage() == cgroup.MemoryUsage(used=50 * MiB, page_cache=40 * MiB, anon=9 * MiB, peak=63 * MiB,
                                                   limit=64 * MiB, oom_kills=2)


def test_v1_drop_page_cache_forces_empty_and_falls_back_to_lowering_the_cap(fake, monkeypatch):
    _v1(fake)
    with fake.create(limit=64 * MiB) as group:
        (group.path / "memory.usage_in_bytes").write_text(f"{50 * MiB}\n")
        (group.path / "memory.stat").write_text(f"total_cache {40 * MiB}\ntotal_rss {9 * MiB}\n")
        group.drop_page_cache()
        assert (group.path / "memory.force_empty").read_text() == "0"

        writes, real_write = [], cgroup._write

        def refusing_force_empty(path, value):
            writes.append((path.name, value))
            if path.name == "memory.force_empty":
                raise OSError(errno.EBUSY, "Device or resource busy")
            real_write(path, value)

        monkeypatch.setattr(cgroup, "_write", refusing_force_empty)
        group.drop_page_cache()
        assert writes == [("memory.force_empty", "0"), ("memory.limit_in_bytes", str(10 * MiB)),
                          ("memory.limit_in_bytes", str(64 * MiB))]
        monkeypatch.setattr(cgroup, "_write", real_write)


# cgroup v2


def test_v2_group_beside_our_own_since_only_leaves_hold_processes(fake):
    _v2(fake)
    with fake.create("node2", 32 * MiB) as group:
        assert group.version == 2
        assert group.path == fake.root / "user.slice" / "nosqltune-node2"
        assert group.home == fake.root / "user.slice" / "session-1.scope"
        assert (group.path / "memory.max").read_text() == str(32 * MiB)
        assert (group.path / "memory.swap.max").read_text() == "0"


def test_v2_group_under_our_own_when_it_delegates_memory(fake):
    _v2(fake, own="/a/b", parent_delegates=False, own_delegates=True)
    with fake.create() as group:
        assert group.path == fake.root / "a" / "b" / "nosqltune-node1"


def test_v2_at_the_root_enables_the_memory_controller(fake):
    _v2(fake, own="/")
    with fake.create() as group:
        assert group.path == fake.root / "nosqltune-node1"
        assert (fake.root / "cgroup.subtree_control").read_text() == "+memory"


def test_v2_memory_not_delegated_is_one_clear_line(fake):
    _v2(fake, own="/a/b", parent_delegates=False)
    reason = fake.usable()
    assert reason and "\n" not in reason
    assert "not delegated" in reason and "Delegate=yes" in reason and str(fake.root / "a" / "cgroup.subtree_control") \
        in reason
    with pytest.raises(SetupError, match="not delegated"):
        fake.create()
    assert not (fake.root / "a" / "nosqltune-node1").exists()


def test_v2_without_a_memory_controller(fake):
    _v2(fake)
    (fake.root / "cgroup.controllers").write_text("cpu io pids\n")
    assert "no memory controller" in fake.usable()


def test_v2_usage_and_drop_through_memory_reclaim(fake, monkeypatch):
    _v2(fake)
    with fake.create(limit=64 * MiB) as group:
        (group.path / "memory.current").write_text(f"{30 * MiB}\n")
        (group.path / "memory.stat").write_text(f"anon {5 * MiB}\nfile {24 * MiB}\nfile_mapped 0\n")
        usage = group.usage()
        assert (usage.used, usage.page_cache, usage.anon, usage.limit) == (30 * MiB, 24 * MiB, 5 * MiB, 64 * MiB)
        group.drop_page_cache()
        assert (group.path / "memory.reclaim").read_text() == str(24 * MiB)

        def partly(path, value):  # EAGAIN: the kernel reclaimed less than asked, which is not an error
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

        real_write = cgroup._write
        monkeypatch.setattr(cgroup, "_write", partly)
        assert group.drop_page_cache() == 0
        monkeypatch.setattr(cgroup, "_write", real_write)


def test_v2_drop_without_memory_reclaim_lowers_memory_high_for_a_moment(fake, monkeypatch):
    _v2(fake)
    with fake.create() as group:
        (group.path / "memory.reclaim").unlink()  # kernels before 5.19
        (group.path / "memory.current").write_text(f"{30 * MiB}\n")
        (group.path / "memory.stat").write_text(f"anon {5 * MiB}\nfile {24 * MiB}\n")
        writes, real_write = [], cgroup._write
        monkeypatch.setattr(cgroup, "_write", lambda path, value: (writes.append((path.name, value)),
                                                                  real_write(path, value)))
        group.drop_page_cache()
        monkeypatch.setattr(cgroup, "_write", real_write)
        assert writes == [("memory.high", str(6 * MiB)), ("memory.high", "max")]


def test_v2_close_moves_processes_back_home(fake):
    _v2(fake)
    group = fake.create()
    (group.path / "cgroup.procs").write_text("4242\n")
    group.close()
    assert (group.home / "cgroup.procs").read_text() == "4242"
    assert not group.path.exists()
    group.close()  # twice is fine


# neither, and the failures


def test_no_memory_cgroup_at_all(fake):
    fake.proc.write_text("0::/\n")
    reason = fake.usable()
    assert reason.startswith("no memory cgroup on this machine") and "\n" not in reason
    with pytest.raises(SetupError, match="no memory cgroup"):
        fake.create()


def test_not_root_or_read_only(fake, monkeypatch):
    _v1(fake)
    monkeypatch.setattr(cgroup, "_writable", lambda path: False)
    assert "not writable; run as root" in fake.usable()
    with pytest.raises(SetupError, match="not writable"):
        fake.create()


def test_a_group_left_by_a_killed_run(fake):
    _v1(fake)
    stale = fake.root / "memory" / "session" / "abc" / "nosqltune-node1"
    _fill(stale, {**V1_FILES, "memory.limit_in_bytes": "1\n"})
    with fake.create() as group:  # empty: replaced
        assert (group.path / "memory.limit_in_bytes").read_text() == str(64 * MiB)
        (group.path / "cgroup.procs").write_text("77\n78\n")
        with pytest.raises(SetupError, match="in use by pids 77 78"):
            fake.create()
        (group.path / "cgroup.procs").write_text("")


def test_bad_arguments(fake):
    _v1(fake)
    with pytest.raises(ValueError):
        fake.create("../escape")
    with fake.create(".nosqltune-nodes-9042") as group:  # a work directory's name is fine after the prefix
        assert group.path.name == "nosqltune-.nosqltune-nodes-9042"
    with pytest.raises(ValueError):
        fake.create(limit=4096)


def test_preexec_writes_the_callers_pid(fake):
    _v1(fake)
    with fake.create() as group:
        group.preexec()()
        assert group.pids() == [os.getpid()]
        (group.path / "cgroup.procs").write_text("")


def test_spawn_runs_the_hook_in_the_child(tmp_path):
    marker = tmp_path / "pid"

    def hook():
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT)
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)

    proc = process.spawn(["true"], preexec=hook)
    assert proc.wait(timeout=10) == 0
    process.terminate(proc)
    assert marker.read_text() == str(proc.pid)


# files and processes


def test_process_io_of_a_fake_and_a_real_process(tmp_path):
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "io").write_text("rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n"
                                        "write_bytes: 8192\ncancelled_write_bytes: 0\n")
    assert cgroup.process_io(12, proc_root=tmp_path) == {
        "rchar": 10, "wchar": 20, "syscr": 1, "syscw": 2, "read_bytes": 4096, "write_bytes": 8192,
        "cancelled_write_bytes": 0}
    with pytest.raises(ProcessLookupError):
        cgroup.process_io(13, proc_root=tmp_path)
    ours = cgroup.process_io(os.getpid())
    assert {"read_bytes", "write_bytes", "rchar", "wchar"} <= ours.keys() and ours["rchar"] > 0


def test_evict_page_cache_of_files_dirs_and_hard_links(tmp_path):
    data = tmp_path / "dataset"
    data.mkdir()
    (data / "a.db").write_bytes(os.urandom(MiB))
    (data / "sub").mkdir()
    (data / "sub" / "b.db").write_bytes(os.urandom(MiB // 2))
    os.link(data / "a.db", tmp_path / "restored.db")  # a snapshot restored as a hard link shares the pages
    (data / "link").symlink_to("/etc/hostname")  # not followed
    if page_cache.cached_bytes(data / "a.db") is None:
        assert page_cache.evict_page_cache([data, tmp_path / "restored.db"]) is None
        return
    evicted = page_cache.evict_page_cache([data, tmp_path / "restored.db"])
    assert MiB + MiB // 2 <= evicted <= MiB + MiB // 2 + 3 * 4096  # written dirty, synced, dropped; a.db once
    assert page_cache.cached_bytes(data / "a.db") == 0 and page_cache.cached_bytes(tmp_path / "restored.db") == 0
    assert page_cache.evict_page_cache([data]) == 0
    with pytest.raises(FileNotFoundError):
        page_cache.evict_page_cache([tmp_path / "missing"])


def test_cached_by_kind_sums_each_components_bytes_and_what_of_them_is_in_memory(tmp_path):
    table = tmp_path / "ycsb" / "usertable-1"
    table.mkdir(parents=True)
    for name, size in (("nb-1-big-Data.db", MiB), ("nb-2-big-Data.db", MiB), ("nb-1-big-Index.db", MiB // 4),
                       ("manifest.json", 4096)):
        (table / name).write_bytes(os.urandom(size))
    os.link(table / "nb-1-big-Data.db", tmp_path / "restored-Data.db")   # the same inode: counted once
    kind = lambda name: name.rsplit("-", 1)[1] if name.endswith(".db") else None   # noqa: E731  (any grouping)
    if page_cache.cached_bytes(table / "nb-1-big-Data.db") is None:
        assert page_cache.cached_by_kind([tmp_path], kind) is None
        return
    page_cache.evict_page_cache([tmp_path])
    (table / "nb-2-big-Data.db").read_bytes()   # one of the two data files and the whole index read back
    (table / "nb-1-big-Index.db").read_bytes()
    found = page_cache.cached_by_kind([tmp_path], kind)
    assert set(found) == {"Data.db", "Index.db"}   # the manifest is no component: left out
    assert found["Data.db"]["bytes"] == 2 * MiB and found["Index.db"]["bytes"] == MiB // 4
    assert found["Data.db"]["cached_bytes"] == MiB and found["Index.db"]["cached_bytes"] == MiB // 4
    page_cache.evict_page_cache([tmp_path])
    assert all(v["cached_bytes"] == 0 for v in page_cache.cached_by_kind([tmp_path], kind).values())


# a real group on this machine


READER = """
import sys, time
for _ in range(int(sys.argv[2])):
    with open(sys.argv[1], "rb", buffering=0) as fh:
        while fh.read(1 << 20):
            pass
print("done", flush=True)
time.sleep(120)
"""


def _filesystem(path: Path) -> str:
    best, kind = "", ""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        mount, fstype = fields[4], fields[fields.index("-") + 1]
        if (str(path) + "/").startswith(mount.rstrip("/") + "/") and len(mount) >= len(best):
            best, kind = mount, fstype
    return kind


def _done(proc: subprocess.Popen, timeout: float = 30.0) -> bool:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return bool(ready) and proc.stdout.readline() == b"done\n"


def _skip_reason(tmp_path: Path) -> str | None:
    if os.geteuid() != 0:
        return "memory cgroups need root"
    reason = cgroup.usable()
    if reason:
        return reason
    if _filesystem(tmp_path) in ("tmpfs", "ramfs", "overlay", "nfs", "fuse"):
        return f"{tmp_path} is on {_filesystem(tmp_path)}: no disk reads to count"
    return None


def test_real_group_caps_page_cache_and_its_reads_go_to_disk(tmp_path):
    reason = _skip_reason(tmp_path)
    if reason:
        pytest.skip(reason)
    size, limit = 200 * MiB, 64 * MiB
    data = tmp_path / "data.bin"
    block = os.urandom(MiB)
    with open(data, "wb") as fh:
        for _ in range(size // MiB):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    page_cache.evict_page_cache([data])  # written by us, so cached and charged to our own group
    procs = []
    name = f"test-{os.getpid()}"
    group = MemoryGroup.create(name, limit)
    try:
        reader = [sys.executable, "-c", READER, str(data)]
        first = process.spawn(reader + ["2"], stdout=subprocess.PIPE, preexec=group.preexec())
        procs.append(first)
        assert _done(first), "the first reader did not finish in 30 s"
        assert first.pid in group.pids()
        usage = group.usage()
        assert usage.peak is None or usage.peak <= limit
        assert usage.used <= limit and usage.page_cache > 0
        io = cgroup.process_io(first.pid)
        assert io["rchar"] >= 2 * size
        assert io["read_bytes"] >= 2 * size - limit  # what the cap kept out of the cache was read again from disk

        freed = group.drop_page_cache()  # while the reader still runs
        assert freed > 0 and group.usage().page_cache < 4 * MiB
        process.terminate(first)
        page_cache.evict_page_cache([data])

        second = process.spawn(reader + ["1"], stdout=subprocess.PIPE, preexec=group.preexec())
        procs.append(second)
        assert _done(second), "the second reader did not finish in 30 s"
        read = cgroup.process_io(second.pid)["read_bytes"]
        assert 0.95 * size <= read <= size + 16 * MiB, f"{read / MiB:.1f} MiB from disk, file {size // MiB} MiB"
        process.terminate(second)
        assert group.pids() == []
    finally:
        for proc in procs:
            process.terminate(proc, timeout=5)
            proc.stdout.close()
        group.close()
    assert not group.path.exists()
    assert not any(p.name.startswith("nosqltune-test-") for p in group.path.parent.iterdir())


def test_real_group_tells_the_out_of_memory_killer_from_another_process(tmp_path):
    """A datastore that dies while it starts: its memory group's out-of-memory count says whether the
    configuration did not fit (refused) or another process killed it (crashed)."""
    if os.geteuid() != 0 or cgroup.usable():
        pytest.skip(cgroup.usable() or "memory cgroups need root")
    group = MemoryGroup.create(f"test-oom-{os.getpid()}", 32 * MiB)
    procs = []
    try:
        sleeper = process.spawn([sys.executable, "-c", "import time; time.sleep(60)"], preexec=group.preexec())
        procs.append(sleeper)
        os.kill(sleeper.pid, signal.SIGKILL)
        sleeper.wait(10)
        kills = group.usage().oom_kills
        assert kills == 0
        assert process.startup_failure_kind(sleeper, kills) == "crashed"
        assert "by another process" in process.death_cause(sleeper, kills)

        hog = process.spawn([sys.executable, "-c", "x = b'1' * (256 << 20); import time; time.sleep(60)"],
                            preexec=group.preexec())
        procs.append(hog)
        hog.wait(30)
        kills = group.usage().oom_kills
        assert hog.returncode == -signal.SIGKILL and kills >= 1
        assert process.startup_failure_kind(hog, kills) == "refused"
        assert "out-of-memory killer" in process.death_cause(hog, kills)
    finally:
        for proc in procs:
            process.terminate(proc, timeout=5)
        group.close()
