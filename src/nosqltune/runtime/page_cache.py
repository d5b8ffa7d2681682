"""The page cache of files: how much of a file is cached (cachestat, Linux 6.5+), and dropping it wherever it is
charged (posix_fadvise DONTNEED after a sync), so a cold trial starts with nothing of its data in memory. Used with
the memory groups of runtime/cgroup.py."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from typing import Callable, Iterable, Iterator

_PAGE = os.sysconf("SC_PAGE_SIZE")


class _CacheRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _CacheStat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64), ("nr_writeback", ctypes.c_uint64),
                ("nr_evicted", ctypes.c_uint64), ("nr_recently_evicted", ctypes.c_uint64)]


_SYS_CACHESTAT = 451  # the same number on every architecture (Linux 6.5+)
_cachestat_missing = False


def _cachestat(fd: int) -> _CacheStat | None:
    """The kernel's count of a file's pages in the page cache (cachestat(2)); None where the kernel has none."""
    global _cachestat_missing
    if _cachestat_missing:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    whole, counts = _CacheRange(0, 0), _CacheStat()  # len 0: to the end of the file
    if libc.syscall(ctypes.c_long(_SYS_CACHESTAT), ctypes.c_uint(fd), ctypes.byref(whole), ctypes.byref(counts),
                    ctypes.c_uint(0)) != 0:
        if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter that does not know it
            _cachestat_missing = True
        return None
    return counts


def cached_bytes(path: str | os.PathLike[str]) -> int | None:
    """Bytes of a file in the page cache now; None where the kernel cannot tell (before Linux 6.5)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        counts = _cachestat(fd)
        return None if counts is None else counts.nr_cache * _PAGE
    finally:
        os.close(fd)


def data_files(paths: Iterable[str | os.PathLike[str]]) -> Iterator[str]:
    for given in paths:
        top = os.path.realpath(given)  # a path given is followed if it is a link; links under it are not
        if os.path.isdir(top):
            for folder, _dirs, names in os.walk(top):
                for name in names:
                    yield os.path.join(folder, name)
        else:
            os.stat(top)  # a missing path given is an error; files vanishing under a walk are not
            yield top


def cached_by_kind(paths: Iterable[str | os.PathLike[str]], kind: Callable[[str], str | None]) -> dict | None:
    """The files under `paths` grouped by `kind(file name)` (None: left out): per kind, their bytes and the bytes of
    them in the page cache now, {kind: {"bytes": n, "cached_bytes": c}}; hard links count once. None where the
    kernel cannot tell (before Linux 6.5)."""
    out: dict[str, dict[str, int]] = {}
    with contextlib.closing(_opened(paths)) as files:
        for name, st, fd in files:
            group = kind(os.path.basename(name))
            if group is None:
                continue
            counts = _cachestat(fd)
            if counts is None:
                return None
            entry = out.setdefault(group, {"bytes": 0, "cached_bytes": 0})
            entry["bytes"] += st.st_size
            entry["cached_bytes"] += min(st.st_size, counts.nr_cache * _PAGE)
    return out


def evict_page_cache(paths: Iterable[str | os.PathLike[str]]) -> int | None:
    """Drop the page cache of these files and of every file under these directories, whichever cgroup it is charged
    to: dirty pages are written first (fdatasync), then POSIX_FADV_DONTNEED drops the clean ones. Hard links share
    one inode and its pages, and are evicted once. Pages mapped by a running process stay. Returns the bytes
    evicted, or None where the kernel cannot count them (before Linux 6.5)."""
    evicted: int | None = 0
    with contextlib.closing(_opened(paths)) as files:
        for _name, _st, fd in files:
            before = _cachestat(fd)
            if before is None or before.nr_dirty or before.nr_writeback:
                os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            after = _cachestat(fd)
            if before is None or after is None:
                evicted = None
            elif evicted is not None:
                evicted += max(0, before.nr_cache - after.nr_cache) * _PAGE
    return evicted


def _opened(paths: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, os.stat_result, int]]:
    """(path, stat, read-only descriptor) of each regular file under `paths`, each inode once (hard links share
    their pages); the descriptor is closed when the caller moves on. Files removed meanwhile (a compaction) are
    skipped."""
    seen: set[tuple[int, int]] = set()
    for name in data_files(paths):
        try:
            st = os.lstat(name)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            continue
        try:
            yield name, st, fd
        finally:
            os.close(fd)
