"""A latency per I/O under a node's volume: its image served through delayfs (delayfs.c beside this file, a FUSE
filesystem of one file that makes every read and write wait a fixed time), and the loop device attached to the
served file instead of the image. The kernel here has no device-mapper delay target, NBD or ublk; FUSE is the one
way left to put a wait into a block device's I/O path.

- `binary()`: delayfs compiled once per source (gcc, libfuse 3's headers; `make setup` installs them) into the
  cache, by the hash of its source.
- `DelayedImage.serve`: mount an image's served file (an empty regular file as the mount point) and start its
  daemon; `close()` unmounts it, which ends the daemon.
- which image a delayfs mount serves: its mount's source says (`delayfs:<image>`, runtime/mounts.image_of).

The daemon runs beside the trial in the machine's root groups: the node's blkio caps apply to the loop device
above it, and its CPU (tens of microseconds an I/O) is not charged to the node."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path

from ..errors import SetupError

SOURCE = "delayfs.c"


def _source() -> bytes:
    return (resources.files(__package__) / SOURCE).read_bytes()


def usable() -> str | None:
    """None when delayfs can run here, else one line saying what is missing. Builds nothing."""
    from .paths import datasets_dir

    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"no FUSE here (/dev/fuse: {exc.strerror}): a latency per I/O needs the kernel's FUSE"
    images = os.path.realpath(datasets_dir())
    if "," in images or "\\" in images:
        return f"the datasets' folder {images} holds ',' or '\\', which a FUSE mount's source cannot name " \
               "(NOSQLTUNE_DATASETS elsewhere)"
    if shutil.which("gcc") is None or shutil.which("pkg-config") is None:
        return "gcc and pkg-config are needed to build delayfs: apt-get install gcc pkg-config libfuse3-dev"
    if subprocess.run(["pkg-config", "--exists", "fuse3"], capture_output=True).returncode != 0:
        return "libfuse 3's headers are missing: apt-get install libfuse3-dev"
    return None


def binary() -> Path:
    """The compiled delayfs for this source, built into the cache on first use. SetupError when it cannot be."""
    from .paths import cache_dir

    source = _source()
    out = cache_dir() / "bin" / f"delayfs-{hashlib.sha256(source).hexdigest()[:12]}"
    if out.exists():
        return out
    why = usable()
    if why:
        raise SetupError(f"a latency per I/O cannot be added here: {why}")
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True,
                           check=True).stdout.split()
    tmp = out.with_name(out.name + f".{os.getpid()}.new")
    src = out.with_name(out.name + f".{os.getpid()}.c")
    src.write_bytes(source)
    try:
        done = subprocess.run(["gcc", "-O2", "-Wall", "-o", str(tmp), str(src), *flags], capture_output=True,
                              text=True)
        if done.returncode != 0:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["gcc failed"]
            raise SetupError(f"cannot build delayfs: {last[0]}")
        os.replace(tmp, out)
    finally:
        src.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)
    return out


def _log(point: Path) -> Path:
    """Where delayfs serving at `point` writes what it says (beside it, in the trial's folder)."""
    return point.with_name(point.name + ".log")


def _release(point: Path) -> None:
    from .mounts import _umount

    try:
        _umount(point)
    except OSError:
        pass


class DelayedImage:
    """An image served at `point` with a wait per read and per write; the file to attach a loop device to."""

    def __init__(self, image: Path, point: Path, process: subprocess.Popen) -> None:
        self.image = image
        self.point = point
        self._process = process
        self._closed = False

    @classmethod
    def serve(cls, image: Path, point: Path, read_ms: float, write_ms: float, wait_s: float = 10.0) -> DelayedImage:
        """Serve `image` at `point` (an empty file, made here) with these waits; returns once the mount is there."""
        from .mounts import image_of, mounts

        program = binary()
        point.parent.mkdir(parents=True, exist_ok=True)
        point.touch()
        log = _log(point)
        target = os.path.realpath(image)
        # a session of its own: a terminal's Ctrl-C or a signal to the tuner's group never reaches it (it ignores
        # them too): it ends only when its mount is unmounted, after the filesystem above it
        with open(log, "wb") as err:
            process = subprocess.Popen([str(program), target, str(point), str(round(read_ms * 1000)),
                                        str(round(write_ms * 1000))], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        deadline = time.monotonic() + wait_s
        where = os.path.realpath(point)
        while not any(p == where and image_of(s) == target for s, p in mounts()):
            if process.poll() is not None or time.monotonic() > deadline:
                if process.poll() is None:
                    process.kill()
                process.wait()
                _release(point)   # a mount that came as it was killed
                said = log.read_text(errors="replace").strip().splitlines()
                point.unlink(missing_ok=True)
                raise SetupError(f"delayfs could not serve {image} at {point}: "
                                 + (said[-1] if said else f"no mount after {wait_s:.0f} s"))
            time.sleep(0.02)
        return cls(image, point, process)

    def close(self, wait_s: float = 15.0) -> None:
        """Unmount the served file (the daemon then ends); safe to call twice. The loop device on it must be gone
        first (its filesystem unmounted): SetupError when the mount stays busy."""
        from .mounts import _unmount

        if self._closed:
            return
        _unmount(self.point, wait_s)
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self.point.unlink(missing_ok=True)
        _log(self.point).unlink(missing_ok=True)
        self._closed = True
