"""Datasets: load once per (datastore, data shape, load-affecting knobs), keep the data directory, restore it
per trial.

Restore links the large files that a datastore never writes in place and copies every other file:
Cassandra's immutable SSTable components (Data, Index, and BTI's Partitions/Rows; its own snapshots are
hard links for that reason; small components such as Summary or Statistics may be rewritten), and Redis's
dump.rdb (Redis writes a new snapshot to a temporary file and renames it over the old one).

Datasets live in the per-user cache (`runtime.paths.datasets_dir()`), one folder per key:

    <key>/data/        the data directory a trial restores
    <key>/meta.json    what shaped it and how it was built (load, drain, write-back sync times)
    <key>/last_used    its modification time is when a trial last restored the dataset (or it was built)
    <key>/lock         flock: shared while a process uses the dataset, exclusive to evict it
    <key>.lock         flock beside the folder: exclusive while one process builds that key (others wait)
    <key>/volumes/     the volume images of trials on a capped volume (systems/volume.py), each a copy of the data
                       with an `<image>.holds` file beside it naming the build it holds whole

The folders share a disk budget (`dataset_cache.dataset_budget`): before a dataset is built, and again once its
real size is known, the least recently used datasets no process holds are evicted until the total fits. A dataset
whose volume image holds its data whole gives up its data folder first (kept in its image only): trials on a
volume still restore it from the image, and a trial without one copies the data back out first.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ..runtime.paths import datasets_dir

_LINKED_SUFFIXES = ("-Data.db", "-Index.db", "-Partitions.db", "-Rows.db", ".rdb")



def dataset_key(parts: dict[str, Any]) -> str:
    """A short stable name for everything that determines a dataset's bytes."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class _Busy(Exception):
    """A non-blocking flock found the lock taken."""


def _lock(path: Path, exclusive: bool, wait: bool = True) -> IO[bytes] | None:
    """Open `path` (created if its folder exists) and flock it; the lock lasts until the file is closed (also
    when the object is garbage collected or the process dies). None when the folder is gone. A lock file may be
    unlinked or its folder renamed away by whoever holds it exclusively: a lock taken on a file no longer at
    `path` is dropped and taken again on the current one. Raises _Busy when `wait` is False and it is taken."""
    while True:
        try:
            fh = open(path, "ab", buffering=0)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            fcntl.flock(fh, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            fh.close()
            raise _Busy(str(path)) from None
        except BaseException:
            fh.close()
            raise
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        held = os.fstat(fh.fileno())
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fh
        fh.close()
        if now is None and not path.parent.is_dir():
            return None


IMAGES = "volumes"     # in a dataset's folder: its volume images
HOLDS = ".holds"       # beside an image: the stamp of the build it holds whole (Dataset.image_stamp)


@dataclass
class Dataset:
    key: str
    root: Path
    _held: IO[bytes] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def meta_path(self) -> Path:
        return self.root / "meta.json"

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    @property
    def used_path(self) -> Path:
        return self.root / "last_used"

    @property
    def build_lock_path(self) -> Path:
        return self.root.with_name(self.root.name + ".lock")

    @property
    def images_dir(self) -> Path:
        return self.root / IMAGES

    def image_stamp(self, part: str | None) -> dict[str, Any]:
        """What an image filled with this build's data (or its part `part`) says it holds."""
        try:
            built = self.meta().get("created_at")
        except (OSError, ValueError):
            built = None
        return {"dataset": self.key, "part": part, "built": built}

    def ready_images(self) -> list[Path]:
        """This build's volume images that hold its whole data (a single node's: part None), as the file beside
        each says; the image's own stamp inside it is what a trial checks before it uses one."""
        stamp = self.image_stamp(None)
        found = []
        for holds in sorted(self.images_dir.glob(f"*{HOLDS}")):
            try:
                said = json.loads(holds.read_text())
            except (OSError, ValueError):
                continue
            image = holds.with_name(holds.name[:-len(HOLDS)])
            if said == stamp and image.exists():
                found.append(image)
        return found

    @property
    def in_image_only(self) -> bool:
        """The data folder given up for room, the data kept in a volume image."""
        return not self.data_dir.is_dir() and self.meta_path.exists() and bool(self.ready_images())

    def exists(self) -> bool:
        return self.meta_path.exists() and (self.data_dir.is_dir() or bool(self.ready_images()))

    def meta(self) -> dict[str, Any]:
        return json.loads(self.meta_path.read_text())

    def hold(self) -> bool:
        """If the dataset is complete, hold it for this process (a shared lock: no other process evicts it
        until `release()`, or until this object is gone) and mark it used; False when it does not exist."""
        if self._held is not None:
            try:
                here = os.stat(self.lock_path)
                held = os.fstat(self._held.fileno())
                still = (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino) and self.exists()
            except FileNotFoundError:
                still = False
            if still:
                self.mark_used()
                return True
            self.release()
        fh = _lock(self.lock_path, exclusive=False)
        if fh is None:
            return False
        if not self.exists():
            fh.close()
            return False
        self._held = fh
        self.mark_used()
        return True

    def release(self) -> None:
        """Let other processes evict the dataset again."""
        if self._held is not None:
            self._held.close()
            self._held = None

    @property
    def held(self) -> bool:
        return self._held is not None

    def mark_used(self) -> None:
        """The least-recently-used order of eviction: the stamp's modification time is the last use."""
        self.used_path.touch()
        os.utime(self.used_path)

    def last_used(self) -> float:
        for path in (self.used_path, self.meta_path, self.root):
            try:
                return os.stat(path).st_mtime
            except FileNotFoundError:
                continue
        return 0.0

    def disk_bytes(self) -> int:
        return disk_bytes(self.root)

    def restore_into(self, data_dir: Path, mode: str = "link", part: str | None = None, warm: bool = True) -> float:
        """Make `data_dir` a private copy of the dataset's data (or of its sub-folder `part`, e.g. one node's
        of a cluster); returns seconds taken. `warm`: read it through into the page cache (see read_through);
        a disk-bound trial restores cold and evicts it instead. Holds the dataset (see `hold`) and marks it
        used. A file that cannot be linked (the dataset on another filesystem than `data_dir`) is copied."""
        started = time.monotonic()
        if not self.hold():
            raise FileNotFoundError(f"dataset {self.key} is not in {self.root.parent} (evicted or never built)")
        if not self.data_dir.is_dir():
            raise FileNotFoundError(f"dataset {self.key} is kept only in its volume image: its data folder must be "
                                    "copied back out first (systems.volume.data_from_image)")
        copy_tree(self.data_dir / part if part else self.data_dir, data_dir, mode)
        if warm:
            read_through(data_dir)
        return time.monotonic() - started


def copy_tree(source: Path, data_dir: Path, mode: str = "link") -> None:
    """Make `data_dir` a private copy of `source`: "link" hard-links the files a datastore never writes in place
    (`_LINKED_SUFFIXES`) and copies the others (and any file that cannot be linked: another filesystem); "copy"
    copies everything. What was at `data_dir` goes first."""
    if data_dir.exists():
        shutil.rmtree(data_dir)
    if mode == "copy":
        shutil.copytree(source, data_dir)
    elif mode == "link":
        for src_root, _dirs, files in os.walk(source):
            dst_root = data_dir / Path(src_root).relative_to(source)
            dst_root.mkdir(parents=True, exist_ok=True)
            for name in files:
                src, dst = Path(src_root) / name, dst_root / name
                if name.endswith(_LINKED_SUFFIXES):
                    try:
                        os.link(src, dst)
                        continue
                    except OSError as exc:
                        if exc.errno not in (errno.EXDEV, errno.EMLINK):
                            raise
                shutil.copy2(src, dst)
    else:
        raise ValueError(f"unknown restore mode {mode!r}")


def read_through(root: Path, chunk: int = 1 << 20) -> int:
    """Read every file under `root` once so its pages sit in the OS page cache; returns bytes read.

    The kernel here reclaims cold page cache on its own (DAMON pageout: the kernel's data-access
    monitor paging out memory it sees unused), so whether a trial's SSTables
    are cached would otherwise depend on how long ago the last trial ran: noise, not configuration.
    """
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with open(os.path.join(dirpath, name), "rb", buffering=0) as fh:
                while data := fh.read(chunk):
                    total += len(data)
    return total


def sync_tree(root: Path) -> float:
    """fsync every file and folder under `root`; returns seconds taken. A freshly built dataset's pages are
    still being written back when the build ends; without this the first trial that restores it runs
    beside that write-back (`make demo`: the first trial after a build 17% slower than the next ones)."""
    started = time.monotonic()
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))
    return time.monotonic() - started


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def disk_bytes(root: Path) -> int:
    """Space the files under `root` take on the disk (allocated blocks; a file linked twice counts once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def dataset_for(key: str) -> Dataset:
    return Dataset(key=key, root=datasets_dir() / key)
