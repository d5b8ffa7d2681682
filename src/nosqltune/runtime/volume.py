"""A node's own volume: an ext4 filesystem in an image file, attached to a loop device with direct I/O (the machine's
page cache never holds the image, so what the node does not cache in its own memory group comes from the device),
with the volume's read-ahead, mounted for one trial and unmounted after it (every mount starts cold).

- `prepare_image`: make the image once (sparse file, mkfs.ext4) and copy a dataset into it, so that each trial
  restores by hard links inside the image instead of copying gigabytes.
- `LoopVolume.mount`: attach (LOOP_CONFIGURE with direct I/O and autoclear: the device goes away when its
  filesystem is unmounted, or when the process that attached it dies before mounting), set the read-ahead, mount.
- `mounts.release_mounts_under` (runtime/mounts.py): unmount what a killed run left mounted under a folder (its
  loop device then detaches, delayfs ends).

An image is mounted by one process at a time: whoever mounts it holds `<image>.lock` (flock, `lock_image`) for as
long as it is mounted; the kernel drops the lock when its holder dies, and whoever takes it next unmounts what the
dead holder left mounted.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, Callable

from ..errors import SetupError
from .mounts import _unmount, image_of, mounts

LOOP_CONTROL = Path("/dev/loop-control")
SYS_BLOCK = Path("/sys/block")
_LOOP_CTL_GET_FREE = 0x4C82
_LOOP_CONFIGURE = 0x4C0A
_LO_FLAGS_AUTOCLEAR = 4
_LO_FLAGS_DIRECT_IO = 16
_MS_NOATIME = 1024
BLOCK_SIZE = 4096
READY = "nosqltune-volume.json"   # in an image's root: which dataset build it holds


class _LoopInfo64(ctypes.Structure):
    _fields_ = [("lo_device", ctypes.c_uint64), ("lo_inode", ctypes.c_uint64), ("lo_rdevice", ctypes.c_uint64),
                ("lo_offset", ctypes.c_uint64), ("lo_sizelimit", ctypes.c_uint64), ("lo_number", ctypes.c_uint32),
                ("lo_encrypt_type", ctypes.c_uint32), ("lo_encrypt_key_size", ctypes.c_uint32),
                ("lo_flags", ctypes.c_uint32), ("lo_file_name", ctypes.c_uint8 * 64),
                ("lo_crypt_name", ctypes.c_uint8 * 64), ("lo_encrypt_key", ctypes.c_uint8 * 32),
                ("lo_init", ctypes.c_uint64 * 2)]


class _LoopConfig(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_uint32), ("block_size", ctypes.c_uint32), ("info", _LoopInfo64),
                ("reserved", ctypes.c_uint64 * 8)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
    return libc


def usable() -> str | None:
    """None when loop volumes can be made here, else one line saying what is missing. Creates nothing."""
    if os.geteuid() != 0:
        return "a volume per node needs root (loop devices, mounts and I/O cgroups)"
    if not LOOP_CONTROL.exists():
        return f"no loop devices here ({LOOP_CONTROL} is missing): load the loop module (modprobe loop)"
    if shutil.which("mkfs.ext4") is None:
        return "mkfs.ext4 is missing: install e2fsprogs (apt-get install e2fsprogs)"
    return None


def _attach(image: Path) -> tuple[int, int]:
    """Attach `image` to a free loop device with direct I/O and autoclear; returns (the device's open fd, its
    number). The caller mounts it, then closes the fd (the mount then holds the device)."""
    libc = _libc()
    backing = os.open(image, os.O_RDWR)
    try:
        control = os.open(LOOP_CONTROL, os.O_RDWR)
        try:
            for _ in range(20):
                number = fcntl.ioctl(control, _LOOP_CTL_GET_FREE)
                fd = os.open(f"/dev/loop{number}", os.O_RDWR)
                config = _LoopConfig(fd=backing, block_size=BLOCK_SIZE)
                config.info.lo_flags = _LO_FLAGS_AUTOCLEAR | _LO_FLAGS_DIRECT_IO
                if libc.ioctl(fd, _LOOP_CONFIGURE, ctypes.byref(config)) == 0:
                    return fd, number
                err = ctypes.get_errno()
                os.close(fd)
                if err != errno.EBUSY:   # EBUSY: another process took it between GET_FREE and CONFIGURE
                    raise SetupError(f"cannot attach {image} to /dev/loop{number}: {os.strerror(err)}")
            raise SetupError(f"cannot attach {image}: every free loop device was taken first, 20 times")
        finally:
            os.close(control)
    finally:
        os.close(backing)


def loop_backing_file(number: int) -> str | None:
    try:
        return (SYS_BLOCK / f"loop{number}" / "loop" / "backing_file").read_text().strip()
    except OSError:
        return None


def _served(image: Path) -> list[str]:
    """The mount points where delayfs serves `image` (runtime/delayfs.py)."""
    target = os.path.realpath(image)
    return [point for source, point in mounts() if image_of(source) == target]


def attached(image: Path) -> list[int]:
    """The loop devices that still use `image`, directly or through delayfs: mounted, or detached lazily and still
    held by a process (such a filesystem is out of mountinfo but alive: mounting the image again would corrupt
    it)."""
    targets = {os.path.realpath(image), *_served(image)}
    found = []
    for entry in SYS_BLOCK.glob("loop*"):
        number = entry.name[4:]
        if number.isdigit() and loop_backing_file(int(number)) in targets:
            found.append(int(number))
    return sorted(found)


def release_image(image: Path) -> list[str]:
    """Unmount wherever `image` is mounted (a dead holder's mount), directly or through delayfs, and then delayfs
    itself; the caller holds its lock."""
    served = _served(image)
    targets = {os.path.realpath(image), *served}
    released = []
    for source, point in mounts():
        if source.startswith("/dev/loop") and source[9:].isdigit() and loop_backing_file(int(source[9:])) in targets:
            _unmount(point)
            released.append(point)
    for point in served:
        _unmount(point)
        released.append(point)
    return released


class LoopVolume:
    """An image mounted at a folder through its own loop device; `close()` unmounts it (the device detaches)."""

    def __init__(self, image: Path, point: Path, number: int, delayed=None) -> None:
        self.image = image
        self.point = point
        self.number = number
        self.delayed = delayed   # delayfs.DelayedImage under the loop device, when I/Os wait (latency_ms)
        self._closed = False

    @property
    def name(self) -> str:
        return f"loop{self.number}"

    @property
    def device(self) -> tuple[int, int]:
        st = os.stat(f"/dev/{self.name}")
        return os.major(st.st_rdev), os.minor(st.st_rdev)

    @property
    def stat_file(self) -> Path:
        """The device's I/O counters (Documentation/block/stat.rst), what loadgen's cost.disks reads."""
        return SYS_BLOCK / self.name / "stat"

    def direct_io(self) -> bool:
        try:
            return (SYS_BLOCK / self.name / "loop" / "dio").read_text().strip() == "1"
        except OSError:
            return False

    def read_ahead_kb(self) -> int:
        return int((SYS_BLOCK / self.name / "queue" / "read_ahead_kb").read_text())

    @classmethod
    def mount(cls, image: Path, point: Path, read_ahead_kb: int, latency_ms: float = 0.0) -> LoopVolume:
        """Attach and mount `image` at `point` (made if missing) with this read-ahead, every I/O made to wait
        `latency_ms` first (through delayfs, served at `.<point's name>.delayfs` beside it); the caller holds the
        image's lock (`lock_image`). What a dead holder left mounted is unmounted first."""
        release_image(image)
        still = attached(image)
        if still:
            raise SetupError(f"{image} is still attached to /dev/loop{still[0]} (a filesystem unmounted lazily and "
                             "still held by a process): mounting it again would corrupt it")
        point.mkdir(parents=True, exist_ok=True)
        delayed = None
        if latency_ms:
            from .delayfs import DelayedImage

            delayed = DelayedImage.serve(image, point.parent / f".{point.name}.delayfs", latency_ms, latency_ms)
        try:
            volume = cls._mount(image, point, read_ahead_kb, delayed)
        except BaseException as exc:
            if delayed is not None:
                try:
                    delayed.close()
                except SetupError as also:   # the mount's own failure is the one to tell
                    exc.add_note(f"and then: {also}")
            raise
        return volume

    @classmethod
    def _mount(cls, image: Path, point: Path, read_ahead_kb: int, delayed) -> LoopVolume:
        fd, number = _attach(delayed.point if delayed is not None else image)
        try:
            (SYS_BLOCK / f"loop{number}" / "queue" / "read_ahead_kb").write_text(str(read_ahead_kb))
            if (SYS_BLOCK / f"loop{number}" / "loop" / "dio").read_text().strip() != "1":
                raise SetupError(f"/dev/loop{number} could not use direct I/O on {image}'s filesystem: the machine's "
                                 "page cache would serve the volume's reads; keep the cache (NOSQLTUNE_CACHE) on a "
                                 "filesystem with O_DIRECT (ext4, xfs)")
            # discard: blocks the filesystem frees (a trial's compactions, its commit log) are punched out of the
            # sparse image, which stays the size of what it holds
            if _libc().mount(f"/dev/loop{number}".encode(), os.fsencode(str(point)), b"ext4", _MS_NOATIME,
                             b"discard") != 0:
                err = ctypes.get_errno()
                raise SetupError(f"cannot mount {image} at {point}: {os.strerror(err)}")
        finally:
            os.close(fd)   # autoclear: without a mount the device detaches here
        return cls(image, point, number, delayed)

    def close(self) -> None:
        """Unmount (the loop device detaches, then delayfs goes); safe to call twice."""
        if self._closed:
            return
        _unmount(self.point)
        if self.delayed is not None:
            self.delayed.close()
        self._closed = True

    def __enter__(self) -> LoopVolume:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LoopVolume({str(self.image)!r} on /dev/{self.name} at {str(self.point)!r})"


def lock_image(image: Path, wait: bool = True) -> IO[bytes]:
    """Hold `<image>.lock` (exclusive flock) until the returned file is closed or this process dies.
    BlockingIOError when `wait` is False and another process holds it."""
    image.parent.mkdir(parents=True, exist_ok=True)
    lock = open(str(image) + ".lock", "ab", buffering=0)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BaseException:
        lock.close()
        raise
    return lock


def claim_image(folder: Path, stem: str, slots: int = 8) -> tuple[Path, IO[bytes]]:
    """The first of `folder/<stem>-0.img`, `-1`, ... that no other process holds, with its lock held: parallel
    trials on one dataset each get an image of their own."""
    for slot in range(slots):
        image = folder / f"{stem}-{slot}.img"
        try:
            lock = lock_image(image, wait=False)
        except BlockingIOError:
            continue
        if attached(image) and not _mounted_only_by_the_dead(image):
            lock.close()   # held by a lazily detached filesystem: another slot
            continue
        return image, lock
    raise SetupError(f"every image slot of {folder / stem} is in use (another trial of this dataset, or a volume still "
                     f"held by a process): wait for them or stop them, then run again")


def _mounted_only_by_the_dead(image: Path) -> bool:
    """Every loop device on `image` is mounted where mountinfo shows it: a dead holder's mounts, which
    `LoopVolume.mount` unmounts (a device out of mountinfo is a lazily detached filesystem still in use)."""
    devices = {f"/dev/loop{n}" for n in attached(image)}
    return devices <= {source for source, _point in mounts()}


def image_size(data_bytes: int) -> int:
    """An image's size for a dataset of `data_bytes`: room for compactions to rewrite it twice over, and a commit
    log; sparse, so the unused part costs no disk."""
    gib = 1 << 30
    return -(-(3 * data_bytes + 2 * gib) // gib) * gib


def read_ready(point: Path) -> dict | None:
    try:
        return json.loads((point / READY).read_text())
    except (OSError, ValueError):
        return None


def prepare_image(image: Path, stamp: dict, size: int, fill: Callable[[Path], None], work: Path,
                  read_ahead_kb: int) -> float:
    """Make sure `image` holds what `stamp` names (e.g. a dataset's key and build time), filled by `fill(root)`
    (the image's mounted root) when it does not: a new image is made (sparse, mkfs.ext4) first. Mounts at `work`
    and unmounts again, so the trial's own mount starts cold. The caller holds the image's lock. Returns the
    seconds spent (0 when it was ready)."""
    image.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    fresh = not image.exists()
    if fresh:
        _mkfs(image, size)
    with LoopVolume.mount(image, work, read_ahead_kb) as volume:
        if read_ready(volume.point) == stamp:
            return 0.0 if not fresh else time.monotonic() - started
        for entry in volume.point.iterdir():
            if entry.name != "lost+found":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        fill(volume.point)
        (volume.point / READY).write_text(json.dumps(stamp, sort_keys=True))
        os.sync()
    return time.monotonic() - started


def _mkfs(image: Path, size: int) -> None:
    tmp = image.with_name(image.name + ".new")
    with open(tmp, "wb") as fh:
        fh.truncate(size)
    # inode tables and journal written now, not by ext4's lazy init thread during the first trials
    cmd = ["mkfs.ext4", "-q", "-F", "-b", str(BLOCK_SIZE), "-m", "0", "-E",
           "lazy_itable_init=0,lazy_journal_init=0,nodiscard", str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SetupError(f"mkfs.ext4 failed on {tmp}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)   # the loop device reads it with O_DIRECT from now on
    finally:
        os.close(fd)
    os.replace(tmp, image)
