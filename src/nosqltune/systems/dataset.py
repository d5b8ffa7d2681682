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

The folders share a disk budget (`dataset_budget`): before a dataset is built, and again once its real size
is known, the least recently used datasets no process holds are evicted until the total fits.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from ..errors import UsageError
from ..runtime.paths import datasets_dir

_LINKED_SUFFIXES = ("-Data.db", "-Index.db", "-Partitions.db", "-Rows.db", ".rdb")

GIB = 1 << 30
DEFAULT_BUDGET_CAP = 50 * GIB   # the default budget: the smaller of this and half the space free for datasets
BUDGET_VARIABLE = "NOSQLTUNE_DATASET_BUDGET"


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

    def exists(self) -> bool:
        return self.meta_path.exists() and self.data_dir.is_dir()

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

    The kernel here reclaims cold page cache on its own (DAMON pageout), so whether a trial's SSTables
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


# --- the disk budget ------------------------------------------------------------------------------------------

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """'20G', '1.5T', '500M', '64K' (powers of 1024; 'GiB', 'GB' read the same) or a number of bytes -> bytes.
    Raises ValueError."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([KMGT]?)(?:I?B)?\s*", str(text).upper())
    if not match:
        raise ValueError(f"not a size: {text!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def format_size(n: int | float) -> str:
    """Bytes in words: '512 B', '3.4 MiB', '1.2 GiB'."""
    if n < 1024:
        return f"{n:.0f} B"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024:
            return f"{n:.1f} {unit}"
    return f"{n / 1024:.1f} TiB"


@dataclass(frozen=True)
class Budget:
    bytes: int
    source: str     # how it was set, in words


def budget_setting() -> int | None:
    """NOSQLTUNE_DATASET_BUDGET as bytes, None when unset; a bad value is bad input (UsageError)."""
    text = os.environ.get(BUDGET_VARIABLE)
    if text is None or not text.strip():
        return None
    try:
        return parse_size(text)
    except ValueError:
        raise UsageError(f"{BUDGET_VARIABLE} expects a size like 20G or 500M, got {text!r}") from None


def free_bytes(folder: Path) -> int:
    """Space free for an unprivileged user on the filesystem of `folder` (or of its nearest existing parent)."""
    path = folder
    while not path.exists() and path != path.parent:
        path = path.parent
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def dataset_budget(folder: Path | None = None, used: int | None = None) -> Budget:
    """The disk space datasets may take: NOSQLTUNE_DATASET_BUDGET, else the smaller of 50 GiB and half the
    space they could have (free space plus what datasets already take), so they never fill the disk."""
    folder = folder or datasets_dir()
    setting = budget_setting()
    if setting is not None:
        return Budget(setting, f"{BUDGET_VARIABLE}={os.environ[BUDGET_VARIABLE].strip()}")
    if used is None:
        used = sum(info.bytes for info in list_datasets(folder))
    room = free_bytes(folder) + used
    if room // 2 < DEFAULT_BUDGET_CAP:
        return Budget(room // 2, f"default: half of the {format_size(room)} free for datasets, under the 50 GiB cap")
    return Budget(DEFAULT_BUDGET_CAP, "default: 50 GiB (at most half of the space free for datasets)")


@dataclass
class DatasetInfo:
    """One dataset as `nosqltune datasets list` shows it."""

    key: str
    root: Path
    bytes: int
    last_used: float
    meta: dict[str, Any]
    in_use: bool | None = None   # None: not probed

    @property
    def system(self) -> str:
        if self.meta.get("system"):
            return str(self.meta["system"])
        return "cassandra" if "cassandra_version" in self.meta else "?"

    @property
    def records(self) -> int | None:
        records = self.meta.get("records", (self.meta.get("data") or {}).get("records"))
        return int(records) if records is not None else None

    @property
    def shape(self) -> dict[str, Any]:
        """The meta that shaped the data (versions, data shape, load-affecting knobs, design), without the
        figures of the build (times, throughputs, sizes)."""
        return {k: v for k, v in self.meta.items() if k not in _BUILD_FIGURES and not k.endswith("_s")}

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "path": str(self.root), "system": self.system, "records": self.records,
                "bytes": self.bytes, "last_used": self.last_used, "in_use": self.in_use, "shape": self.shape,
                "meta": self.meta}


_BUILD_FIGURES = {"key", "system", "records", "keys", "created_at", "bytes", "used_memory", "estimated_bytes", "bulk",
                  "pending_compactions_stored",
                  "load_throughput_ops_s"}


def _is_dataset_name(name: str) -> bool:
    return "." not in name   # <key>.tmpPID (a build), <key>.evict... (an eviction), <key>.lock are not datasets


def list_datasets(folder: Path | None = None, probe_use: bool = False) -> list[DatasetInfo]:
    """The complete datasets in `folder` (default: datasets_dir()), least recently used first. `probe_use`:
    find out whether a process holds each one (takes and drops its lock at once)."""
    folder = folder or datasets_dir()
    if not folder.is_dir():
        return []
    found = []
    for root in folder.iterdir():
        if not (_is_dataset_name(root.name) and root.is_dir()):
            continue
        dataset = Dataset(key=root.name, root=root)
        try:
            meta = dataset.meta()
        except (FileNotFoundError, NotADirectoryError, ValueError):
            continue
        if not dataset.data_dir.is_dir():
            continue
        info = DatasetInfo(key=root.name, root=root, bytes=dataset.disk_bytes(), last_used=dataset.last_used(),
                           meta=meta)
        if probe_use:
            info.in_use = in_use(dataset)
        found.append(info)
    return sorted(found, key=lambda i: (i.last_used, i.key))


def in_use(dataset: Dataset) -> bool:
    """Whether a process (this one included) holds the dataset."""
    try:
        fh = _lock(dataset.lock_path, exclusive=True, wait=False)
    except _Busy:
        return True
    if fh is not None:
        fh.close()
    return False


def evict(dataset: Dataset) -> bool:
    """Remove the dataset unless a process holds it; False when it is in use (or already gone). The folder is
    renamed away under the exclusive lock, so no process can take it up once the lock is released."""
    try:
        fh = _lock(dataset.lock_path, exclusive=True, wait=False)
    except _Busy:
        return False
    if fh is None:
        return False
    try:
        if not dataset.root.is_dir():
            return False
        gone = dataset.root.with_name(f"{dataset.key}.evict{os.getpid()}-{uuid.uuid4().hex[:6]}")
        os.rename(dataset.root, gone)
    finally:
        fh.close()
    shutil.rmtree(gone, ignore_errors=True)
    return True


def sweep(folder: Path | None = None) -> None:
    """Remove what crashed processes left: half-evicted folders, and builds whose builder is gone (nobody holds
    the key's build lock)."""
    folder = folder or datasets_dir()
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        key, dot, rest = path.name.partition(".")
        if not dot:
            continue
        if rest.startswith("evict"):
            shutil.rmtree(path, ignore_errors=True)
        elif rest == "lock":          # a build lock nobody holds: the builder died
            with _building(Dataset(key=key, root=folder / key), wait=False):
                pass
        elif rest.startswith("tmp") and path.is_dir():
            with _building(Dataset(key=key, root=folder / key), wait=False) as free:
                if free:
                    shutil.rmtree(path, ignore_errors=True)


def make_room(folder: Path, incoming: int, keep: set[str] = frozenset(), budget: int | None = None,
              ) -> list[DatasetInfo]:
    """Evict datasets least recently used first (never one a process holds, nor those in `keep`) until their
    total plus `incoming` bytes fits the budget (default: `dataset_budget`); returns the evicted ones. A budget
    that cannot be met is left exceeded: a trial needs its dataset."""
    sweep(folder)
    infos = list_datasets(folder)
    total = sum(info.bytes for info in infos)
    limit = budget if budget is not None else dataset_budget(folder, used=total).bytes
    evicted = []
    for info in infos:
        if total + incoming <= limit:
            break
        if info.key in keep:
            continue
        if evict(Dataset(key=info.key, root=info.root)):
            total -= info.bytes
            evicted.append(info)
    return evicted


@dataclass
class Pruned:
    removed: list[DatasetInfo]
    in_use: list[DatasetInfo]     # would have been removed, but a process holds them
    kept: list[DatasetInfo]
    target_bytes: int


def prune(folder: Path | None = None, keep_bytes: int | None = None, older_than_s: float | None = None,
          now: float | None = None) -> Pruned:
    """Remove datasets least recently used first until the total is at most `keep_bytes`; only datasets last used
    more than `older_than_s` ago are candidates (with no `keep_bytes`, all of them go). With neither: down to
    the budget. Datasets a process holds are never removed."""
    folder = folder or datasets_dir()
    sweep(folder)
    now = time.time() if now is None else now
    infos = list_datasets(folder)
    total = sum(info.bytes for info in infos)
    if keep_bytes is None:
        keep_bytes = 0 if older_than_s is not None else dataset_budget(folder, used=total).bytes
    removed, busy, kept = [], [], []
    for info in infos:
        old_enough = older_than_s is None or info.last_used < now - older_than_s
        if total <= keep_bytes or not old_enough:
            kept.append(info)
        elif evict(Dataset(key=info.key, root=info.root)):
            total -= info.bytes
            removed.append(info)
        else:
            info.in_use = True
            busy.append(info)
    return Pruned(removed=removed, in_use=busy, kept=kept, target_bytes=keep_bytes)


# --- building --------------------------------------------------------------------------------------------------

class _building:
    """The build lock of a dataset's key (exclusive): one process builds a key, the others wait for it. As a
    context manager it gives True when held (always, when waiting), and unlinks the lock file on the way out."""

    def __init__(self, dataset: Dataset, wait: bool = True) -> None:
        self.path = dataset.build_lock_path
        self.wait = wait
        self.fh: IO[bytes] | None = None

    def __enter__(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.fh = _lock(self.path, exclusive=True, wait=self.wait)
        except _Busy:
            return False
        return self.fh is not None

    def __exit__(self, *exc) -> None:
        if self.fh is not None:
            try:
                self.path.unlink()   # while still held: a waiter notices and locks the next file
            except FileNotFoundError:
                pass
            self.fh.close()


def create_dataset(dataset: Dataset, build: Callable[[Path], dict[str, Any]],
                   expected_bytes: int | None = None) -> Dataset:
    """Build into a temporary directory with `build(node_home) -> meta`, write it back to the disk, then publish
    atomically; the dataset is held (see `Dataset.hold`) on return. One process builds a key at a time: one that
    waited for another's build of the same key reuses it. Before the build, least recently used datasets are
    evicted to fit the budget with `expected_bytes` more (when the caller can tell), and after it, with the new
    dataset's real size."""
    folder = dataset.root.parent
    with _building(dataset):
        if dataset.hold():          # another process built it while this one waited
            return dataset
        make_room(folder, expected_bytes or 0, keep={dataset.key})
        tmp = dataset.root.with_name(dataset.root.name + f".tmp{os.getpid()}")
        if tmp.exists():
            shutil.rmtree(tmp)
        try:
            meta = build(tmp / "node")
            (tmp / "node" / "data").rename(tmp / "data")
            shutil.rmtree(tmp / "node")
            meta["sync_s"] = round(sync_tree(tmp / "data"), 3)
            meta["bytes"] = disk_bytes(tmp / "data")
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
            (tmp / "last_used").touch()
            for name in ("meta.json", "last_used"):
                fd = os.open(tmp / name, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            _fsync_dir(tmp)
            held = _lock(tmp / "lock", exclusive=False)   # held from before it is published: never evicted unused
            if dataset.root.exists():   # an incomplete folder (never published as such): nobody can hold it
                shutil.rmtree(dataset.root)
            tmp.rename(dataset.root)
            _fsync_dir(folder)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        dataset.release()
        dataset._held = held
        dataset.mark_used()
    make_room(folder, 0, keep={dataset.key})
    return dataset

