"""Make a datastore read from disk: a memory cgroup caps its memory and page cache, its page cache is emptied
before each trial, and its disk reads are measured.

- `MemoryGroup`: one memory cgroup per datastore process (per node of a local cluster), on cgroup v1 (the memory
  controller mounted at /sys/fs/cgroup/memory) or cgroup v2 (the unified hierarchy at /sys/fs/cgroup).
- `page_cache.evict_page_cache` (runtime/page_cache.py): drop the page cache of given files, wherever it is charged
  (a dataset restored as hard links shares its pages with the copy it was built from, and those pages may be
  charged to another group).
- `process_io`: a process's I/O counters from /proc/PID/io.

A group only limits the pages charged to it: a page already cached when a process of the group reads it stays
charged where it was, and serves the read from memory. So before a cold trial: `page_cache.evict_page_cache(data_dir)`, then
`group.drop_page_cache()`.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..errors import SetupError
from .page_cache import data_files

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
PROC = Path("/proc")

_NAME = re.compile(r"[A-Za-z0-9_.-]+")  # after "nosqltune-": never "." nor ".." nor a path
_PAGE = os.sysconf("SC_PAGE_SIZE")
# the unit tests stand a plain directory tree in for cgroupfs, whose kernel fills a new group with its files and
# empties it on rmdir
_make_dir = os.mkdir
_remove_dir = os.rmdir


@dataclass(frozen=True)
class MemoryUsage:
    """What a memory cgroup holds, in bytes."""

    used: int  # charged to the group now: anonymous memory, page cache, kernel memory
    page_cache: int  # the page cache part of `used` (file-backed pages)
    anon: int  # anonymous memory (heaps, stacks, anonymous mmaps)
    peak: int | None  # the most ever charged since the group was created; None where the kernel does not keep it
    limit: int | None  # the cap; None when unlimited
    oom_kills: int  # processes the kernel killed because the group hit its cap


@dataclass(frozen=True)
class _Place:
    version: int  # 1 or 2
    parent: Path  # where the group is created
    home: Path  # our own group: where processes go back when the group closes
    enable: bool = False  # v2: "+memory" must be written to parent's cgroup.subtree_control first


def _read(path: Path) -> str:
    return path.read_text()


def _write(path: Path, value: str) -> None:
    with open(path, "wb", buffering=0) as fh:  # one write(2): cgroupfs takes a value per write
        fh.write(value.encode())


def _words(path: Path) -> set[str]:
    try:
        return set(_read(path).split())
    except OSError:
        return set()


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


@dataclass(frozen=True)
class Controller:
    """A cgroup controller as each version names it: v1's hierarchy and a file its groups have, v2's name."""

    v1: str       # the v1 hierarchy: /sys/fs/cgroup/<v1>, and its name in /proc/self/cgroup
    probe: str    # a file every v1 group of it has
    v2: str       # its name in v2's cgroup.controllers and cgroup.subtree_control
    why: str      # what a group of it is for, in the words of an error


MEMORY = Controller("memory", "memory.limit_in_bytes", "memory",
                    "(the kernel command line must not hold cgroup_disable=memory)")
BLKIO = Controller("blkio", "blkio.throttle.read_iops_device", "io", "(an I/O cap per node needs it)")


def _own_paths(proc_self_cgroup: Path, v1_name: str = "memory") -> tuple[str | None, str | None]:
    """Our group's path in the v1 hierarchy `v1_name` and our path in the v2 hierarchy, from /proc/self/cgroup
    (lines `id:controllers:path`; v2's is `0::path`)."""
    v1 = v2 = None
    try:
        lines = _read(proc_self_cgroup).splitlines()
    except OSError:
        return None, None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            v2 = path
        elif v1_name in controllers.split(","):
            v1 = path
    return v1, v2


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/") if path.strip("/") else root


def _locate(cgroup_root: Path, proc_self_cgroup: Path, controller: Controller = MEMORY) -> _Place:
    """Where this machine lets us create a group of `controller`; SetupError saying what is missing otherwise."""
    c = controller
    own_v1, own_v2 = _own_paths(proc_self_cgroup, c.v1)
    mount_v1 = cgroup_root / c.v1
    if (mount_v1 / c.probe).exists() and own_v1 is not None:
        home = _under(mount_v1, own_v1)
        if not home.is_dir():  # a container's view: the mount shows our own group as its root
            home = mount_v1
        if not _writable(home):
            raise SetupError(f"cannot create a {c.v1} cgroup in {home} (cgroup v1): it is not writable; run as root, "
                             "or remount it read-write (a container needs --privileged or a writable /sys/fs/cgroup)")
        return _Place(1, home, home)
    if (cgroup_root / "cgroup.controllers").exists() and own_v2 is not None:
        if c.v2 not in _words(cgroup_root / "cgroup.controllers"):
            raise SetupError(f"cgroup v2 at {cgroup_root} has no {c.v2} controller: boot with it enabled {c.why}")
        home = _under(cgroup_root, own_v2)
        is_root = not (home / "cgroup.type").exists()  # the real root has no cgroup.type (a namespace's root has)
        if c.v2 in _words(home / "cgroup.subtree_control"):
            parent, enable = home, False
        elif not is_root and c.v2 in _words(home.parent / "cgroup.subtree_control"):
            # v2 lets only leaf groups hold processes: ours holds us, so the group goes beside it
            parent, enable = home.parent, False
        elif is_root:
            parent, enable = home, True
        else:
            raise SetupError(
                f"cgroup v2: the {c.v2} controller is not delegated to {home} nor to its parent (no '{c.v2}' in "
                f"{home.parent / 'cgroup.subtree_control'}): run nosqltune under "
                f"systemd-run --scope -p Delegate=yes, or write +{c.v2} into that file as root")
        if not _writable(parent):
            raise SetupError(f"cannot create a {c.v2} cgroup in {parent} (cgroup v2): it is not writable; run as root "
                             "or under systemd-run --user --scope -p Delegate=yes")
        return _Place(2, parent, home, enable)
    raise SetupError(f"no {c.v1} cgroup on this machine: neither cgroup v1's {mount_v1} nor cgroup v2's {c.v2} "
                     f"controller at {cgroup_root} (with this process in it, per {proc_self_cgroup}); mount one, "
                     f"e.g. mount -t cgroup -o {c.v1} cgroup {mount_v1}")


def usable(*, cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> str | None:
    """None when `MemoryGroup.create` can work here, else one line saying what is missing and how to fix it.
    Creates nothing."""
    try:
        _locate(cgroup_root, proc_self_cgroup)
    except SetupError as e:
        return str(e)
    return None


class MemoryGroup:
    """A memory cgroup of our own for one datastore process, removed by `close()` (also a context manager).

    Start the process inside it with `process.spawn(cmd, preexec=group.preexec())`: then every page it faults in or
    reads into the page cache is charged to the group from its first instruction. `add(pid)` moves a running
    process, but what it allocated before stays charged where it was (the kernel moves charges on neither v2 nor,
    by default, v1)."""

    def __init__(self, path: Path, version: int, home: Path, limit_bytes: int) -> None:
        self.path = path
        self.version = version
        self.home = home
        self.limit_bytes = limit_bytes
        self._closed = False

    @classmethod
    def create(cls, name: str, limit_bytes: int, *, swap: bool = False,
               cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> MemoryGroup:
        """Create the group `nosqltune-<name>` capped at `limit_bytes` (rounded down to pages by the kernel),
        page cache included. With `swap` False (the default) the group's memory is never swapped out: on a
        machine with swap, a datastore over its cap is killed rather than slowed down unseen.
        An empty group of that name left by a killed run is replaced; one holding processes is an error."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"cgroup name {name!r}: use letters, digits, '_', '.', '-'")
        if limit_bytes < 1 << 20:
            raise ValueError(f"memory limit {limit_bytes} bytes: give at least 1 MiB")
        place = _locate(cgroup_root, proc_self_cgroup)
        path = place.parent / f"nosqltune-{name}"
        try:
            if place.enable:
                _write(place.parent / "cgroup.subtree_control", "+memory")
            if path.exists():
                left = _pids(path)
                if left:
                    raise SetupError(f"memory cgroup {path} is in use by pids {' '.join(map(str, left))}: stop them "
                                     "(another nosqltune run?) or choose another name")
                _remove_dir(path)
            _make_dir(path)
        except OSError as e:
            raise SetupError(f"cannot create memory cgroup {path}: {e.strerror or e}; run as root with the "
                             "memory controller mounted read-write") from None
        group = cls(path, place.version, place.home, limit_bytes)
        try:
            group._configure(swap)
        except BaseException:
            group.close()
            raise
        return group

    def _configure(self, swap: bool) -> None:
        try:
            if self.version == 1:
                _write(self.path / "memory.limit_in_bytes", str(self.limit_bytes))
                memsw = self.path / "memory.memsw.limit_in_bytes"  # absent when the kernel accounts no swap
                if not swap and memsw.exists():
                    _write(memsw, str(self.limit_bytes))  # memory + swap <= limit: no swap at all (set after limit)
                if not swap:
                    try:  # v1: a group's swappiness 0 keeps its own reclaim (force_empty too) from swapping
                        _write(self.path / "memory.swappiness", "0")
                    except OSError:
                        pass
            else:
                _write(self.path / "memory.max", str(self.limit_bytes))
                swap_max = self.path / "memory.swap.max"
                if not swap and swap_max.exists():
                    _write(swap_max, "0")
        except OSError as e:
            raise SetupError(f"cannot set the memory limit of cgroup {self.path}: {e.strerror or e}") from None

    # processes

    def add(self, pid: int) -> None:
        """Move a running process (all its threads) into the group; ProcessLookupError if it is gone."""
        _write(self.path / "cgroup.procs", str(pid))

    def preexec(self) -> Callable[[], None]:
        """A function for `process.spawn(..., preexec=)` (or Popen's preexec_fn) that puts the calling process, the
        child between fork and exec, into this group. It uses only os.open/os.write (safe after fork); if the
        kernel refuses, the child raises and no process starts."""
        return joiner(self.path)

    def pids(self) -> list[int]:
        """Processes in the group now."""
        return _pids(self.path)

    # memory

    def usage(self) -> MemoryUsage:
        """What the group holds now (v1: memory.usage_in_bytes, rounded by the kernel to per-CPU batches;
        v2: memory.current), with its page cache and anonymous parts from memory.stat."""
        if self.version == 1:
            fields = _stat(self.path / "memory.stat")
            oom = _stat(self.path / "memory.oom_control")
            return MemoryUsage(
                used=int(_read(self.path / "memory.usage_in_bytes")),
                page_cache=fields.get("total_cache", fields.get("cache", 0)),
                anon=fields.get("total_rss", fields.get("rss", 0)),
                peak=_int_or_none(self.path / "memory.max_usage_in_bytes"),
                limit=_limit(self.path / "memory.limit_in_bytes"),
                oom_kills=oom.get("oom_kill", 0))
        fields = _stat(self.path / "memory.stat")
        return MemoryUsage(
            used=int(_read(self.path / "memory.current")),
            page_cache=fields.get("file", 0),
            anon=fields.get("anon", 0),
            peak=_int_or_none(self.path / "memory.peak"),
            limit=_limit(self.path / "memory.max"),
            oom_kills=_stat(self.path / "memory.events").get("oom_kill", 0))

    def drop_page_cache(self) -> int:
        """Reclaim the page cache charged to the group, also while its processes run; the bytes it freed.

        v1 writes memory.force_empty: the kernel reclaims until the group is empty or it stops making progress (the
        anonymous memory of running processes stays, as swap is off for the group), and returns success either way;
        older kernels refused with EBUSY while the group held processes. v2 writes the page cache size to
        memory.reclaim, which fails with EAGAIN when it could not reclaim that much (pages locked, dirty or under
        writeback at that moment): what was freed is still freed. On EBUSY or EINTR (v1), or on a v2 kernel without
        memory.reclaim (before 5.19), the group's cap is lowered for a moment to its anonymous memory, which makes
        the kernel reclaim the page cache, then restored. With `swap=True` at creation, dropping may also push
        anonymous memory to swap. Pages charged to other groups are not touched: see `evict_page_cache`."""
        before = self.usage()
        if before.page_cache == 0:
            return 0
        try:
            if self.version == 2 and (self.path / "memory.reclaim").exists():
                try:
                    _write(self.path / "memory.reclaim", str(before.page_cache))
                except OSError as e:
                    if e.errno != errno.EAGAIN:  # EAGAIN: less than asked was reclaimable; the rest is freed
                        raise
            elif self.version == 2:
                self._squeeze(before)
            else:
                try:
                    _write(self.path / "memory.force_empty", "0")
                except OSError as e:
                    if e.errno not in (errno.EBUSY, errno.EINTR):
                        raise
                    self._squeeze(before)
        except OSError as e:
            raise SetupError(f"cannot drop the page cache of cgroup {self.path}: {e.strerror or e}") from None
        return max(0, before.page_cache - self.usage().page_cache)

    def _squeeze(self, before: MemoryUsage) -> None:
        """Lower the cap to the group's memory without its page cache for a moment, then restore it."""
        target = max(before.used - before.page_cache, 1 << 20)
        target = -(-target // _PAGE) * _PAGE
        knob, restore = ((self.path / "memory.limit_in_bytes", str(self.limit_bytes)) if self.version == 1
                         else (self.path / "memory.high", "max"))
        try:
            _write(knob, str(target))  # the write reclaims before it returns (v1: EBUSY if it cannot get there)
        except OSError as e:
            if e.errno not in (errno.EBUSY, errno.EINTR, errno.EAGAIN):
                raise
        finally:
            _write(knob, restore)

    def fill_page_cache(self, paths: Iterable[str | os.PathLike[str]], *,
                        last: Callable[[str], bool] = lambda name: False) -> int:
        """Read every file under `paths` once from a process inside this group, so that their pages are charged here
        and the group's page cache holds as much of them as its cap leaves room for: the state of a node long in
        service, whose memory holds what it read last. The files for which `last(name)` is true are read after the
        others, so that they are the last evicted (a node's index files, which every read touches). Returns the
        group's page cache in bytes afterwards.

        The reader is `cat` with its output thrown away; the kernel reclaims the group's older pages as it reads
        past the cap, as it would for the node. I/O caps of a group the reader is not in (cgroup v1: the blkio
        hierarchy is apart) do not slow it; on v2 the caller lifts them first (`blkio.IOGroup.lifted`)."""
        import subprocess

        names = sorted(data_files(paths), key=lambda name: (last(name), name))
        for start in range(0, len(names), 500):   # a command line of bounded length
            done = subprocess.run(["cat", "--", *names[start:start + 500]], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, preexec_fn=self.preexec(), check=False)
            if done.returncode != 0 and b"No such file" not in done.stderr:   # a file compacted away meanwhile
                raise SetupError(f"cannot read the node's files into cgroup {self.path}: "
                                 f"{done.stderr.decode(errors='replace').strip()[:200]}")
        return self.usage().page_cache

    # the end

    def close(self) -> None:
        """Move any processes left back to our own group and remove the group; safe to call twice."""
        if self._closed:
            return
        remove_group(self.path, self.home)
        self._closed = True

    def __enter__(self) -> MemoryGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemoryGroup({str(self.path)!r}, v{self.version}, limit={self.limit_bytes})"


def joiner(path: Path) -> Callable[[], None]:
    """A function for `process.spawn(..., preexec=)` that puts the calling process (the child between fork and
    exec) into the group at `path`, using only os.open/os.write (safe after fork)."""
    procs = os.fsencode(path / "cgroup.procs")

    def join() -> None:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    return join


def remove_group(path: Path, home: Path) -> None:
    """Move the processes left in the group at `path` back to `home` (our own group) and remove it; a group already
    gone is fine."""
    for pid in _pids(path):
        try:
            _write(home / "cgroup.procs", str(pid))
        except OSError as e:
            if e.errno != errno.ESRCH:  # ESRCH: it exited meanwhile
                raise SetupError(f"cannot move pid {pid} out of cgroup {path}: {e.strerror or e}") from None
    for attempt in range(40):
        try:
            _remove_dir(path)
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if e.errno != errno.EBUSY or attempt == 39:  # EBUSY: an exiting process not yet gone
                raise SetupError(f"cannot remove cgroup {path}: {e.strerror or e} "
                                 f"(pids left: {' '.join(map(str, _pids(path))) or 'none'})") from None
            time.sleep(0.05)


def _pids(path: Path) -> list[int]:
    try:
        return [int(w) for w in _read(path / "cgroup.procs").split()]
    except FileNotFoundError:
        return []


def _stat(path: Path) -> dict[str, int]:
    """`key value` lines (memory.stat, memory.events, memory.oom_control)."""
    out: dict[str, int] = {}
    try:
        text = _read(path)
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def _int_or_none(path: Path) -> int | None:
    try:
        return int(_read(path))
    except (FileNotFoundError, ValueError):
        return None


def _limit(path: Path) -> int | None:
    text = _read(path).strip()
    if text == "max":
        return None
    value = int(text)
    return None if value >= 1 << 62 else value  # v1's "unlimited" is a huge page-aligned number


def process_io(pid: int, *, proc_root: Path = PROC) -> dict[str, int]:
    """A process's I/O counters from /proc/PID/io, summed over its threads, its children excluded:

    - read_bytes: bytes this process caused to be read from the storage layer (block I/O it submitted, read-ahead
      included, and page faults on mmap'd files); reads served by the page cache count nothing. Zero on tmpfs, and
      not meaningful on network or FUSE filesystems.
    - write_bytes: bytes this process caused to be sent to the storage layer, counted when it dirtied page cache
      (the write itself comes later, by the kernel's flusher); cancelled_write_bytes: dirtied then truncated.
    - rchar, wchar: bytes passed through read(2)/write(2)-family calls, on files, pipes and sockets alike, whether
      the page cache served them or not; reads through mmap do not count.
    - syscr, syscw: the number of those calls.

    Reading another process's counters needs the right to trace it (root, or the same user). ProcessLookupError
    once the process is gone (reaped)."""
    try:
        text = (proc_root / str(pid) / "io").read_text()
    except FileNotFoundError:
        raise ProcessLookupError(f"no process {pid}") from None
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            out[key.strip()] = int(value)
    return out
