"""The mounts this process sees (/proc/self/mountinfo), unmounting one (never lazily) and what a killed run left
under a folder: what runtime/volume.py, runtime/delayfs.py and runtime/paths.py need, below all three."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import time
from pathlib import Path

from ..errors import SetupError

MOUNTINFO = Path("/proc/self/mountinfo")
DELAYFS_PREFIX = "delayfs:"   # a delayfs mount's source: delayfs:<image> (runtime/delayfs.py)


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


_OCTAL = re.compile(rb"\\([0-7]{3})")


def _unescape(field: bytes) -> str:
    """A mountinfo field: the kernel writes space, tab, newline and backslash as \\ooo; the rest are the path's own
    bytes (UTF-8 or not)."""
    return os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def mounts() -> list[tuple[str, str]]:
    """(source, mount point) of every mount this process sees, from /proc/self/mountinfo."""
    out = []
    for line in MOUNTINFO.read_bytes().splitlines():
        left, _, right = line.partition(b" - ")
        fields, rest = left.split(), right.split()
        if len(fields) >= 5 and len(rest) >= 2:
            out.append((_unescape(rest[1]), _unescape(fields[4])))
    return out


def _umount(point: str | Path) -> None:
    if _libc().umount2(os.fsencode(str(point)), 0) != 0:
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOENT):   # EINVAL: not a mount point (any more)
            raise OSError(err, f"cannot unmount {point}: {os.strerror(err)}")


def _unmount(point: str | Path, wait_s: float = 15.0) -> None:
    """Unmount, retrying a busy mount for `wait_s` seconds (a just-killed JVM's files close as it is reaped).
    Never lazily: a lazily detached filesystem lives on while anything holds it, and a second mount of its image
    would corrupt it. SetupError, with who holds it, when it stays busy."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            _umount(point)
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise SetupError(str(e)) from None
            if time.monotonic() > deadline:
                raise SetupError(f"cannot unmount {point}: still in use after {wait_s:.0f} s (`fuser -vm {point}` "
                                 "names who holds it); stop that, then run again") from None
            time.sleep(0.1)


def image_of(source: str) -> str | None:
    """The image a mount serves when its source is a delayfs one (runtime/delayfs.py), else None."""
    return source[len(DELAYFS_PREFIX):] if source.startswith(DELAYFS_PREFIX) else None


def release_mounts_under(folder: Path) -> list[str]:
    """Unmount every mount at or under `folder` (deepest first, delayfs last: a loop device may stand on what it
    serves); their autoclear loop devices detach, and delayfs ends with its mount. Returns the mount points
    released. For the folders of a killed run, before they are removed."""
    top = os.path.realpath(folder)
    found = [(image_of(source) is not None, point) for source, point in mounts()
             if point == top or point.startswith(top + os.sep)]
    for _served_last, point in sorted(found, key=lambda f: (f[0], -len(f[1]))):
        _unmount(point)
    return [point for _, point in found]
