"""The dataset cache as a whole: its disk budget (NOSQLTUNE_DATASET_BUDGET, or the smaller of 50 GiB and half the
free space), what it holds (`nosqltune datasets`), and making room: the least recently used datasets no process
holds are evicted until a new one fits; `prune` by size or age; building a dataset into it (one process builds a
key at a time). One dataset, its restore and its locks: systems/dataset.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable

from ..errors import UsageError
from ..runtime.paths import datasets_dir
from .dataset import Dataset, _Busy, _fsync_dir, _lock, disk_bytes, sync_tree

GIB = 1 << 30
DEFAULT_BUDGET_CAP = 50 * GIB   # the default budget: the smaller of this and half the space free for datasets
BUDGET_VARIABLE = "NOSQLTUNE_DATASET_BUDGET"

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
    image_only: bool = False     # its data folder given up for room, the data kept in its volume image

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
                "bytes": self.bytes, "last_used": self.last_used, "in_use": self.in_use,
                "kept_in": "image" if self.image_only else "folder", "shape": self.shape,
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
        image_only = dataset.in_image_only
        if not (dataset.data_dir.is_dir() or image_only):
            continue
        info = DatasetInfo(key=root.name, root=root, bytes=dataset.disk_bytes(), last_used=dataset.last_used(),
                           meta=meta, image_only=image_only)
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


def _remove_unused(dataset: Dataset, what: Path, gone: Path, only_if: Callable[[], bool]) -> bool:
    """Rename `what` (the dataset's folder, or its data folder) to `gone` and remove it, unless a process holds the
    dataset or `only_if()` says no; renamed under the exclusive lock, so no process takes it up once released."""
    try:
        fh = _lock(dataset.lock_path, exclusive=True, wait=False)
    except _Busy:
        return False
    if fh is None:
        return False
    try:
        if not only_if():
            return False
        os.rename(what, gone)
    finally:
        fh.close()
    shutil.rmtree(gone, ignore_errors=True)
    return True


def _stray_name() -> str:
    return f"{os.getpid()}-{uuid.uuid4().hex[:6]}"


def evict(dataset: Dataset) -> bool:
    """Remove the dataset unless a process holds it; False when it is in use (or already gone)."""
    return _remove_unused(dataset, dataset.root, dataset.root.with_name(f"{dataset.key}.evict{_stray_name()}"),
                          dataset.root.is_dir)


def sweep(folder: Path | None = None) -> None:
    """Remove what crashed processes left: half-evicted folders, and builds whose builder is gone (nobody holds
    the key's build lock)."""
    folder = folder or datasets_dir()
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        key, dot, rest = path.name.partition(".")
        if not dot:
            strays = list(path.glob("data.*")) if path.is_dir() else []
            if strays:   # a data folder half given up, or half copied back out of an image by a process now gone
                with building(Dataset(key=key, root=path), wait=False) as free:
                    if free:
                        for stray in strays:
                            shutil.rmtree(stray, ignore_errors=True)
            continue
        if rest.startswith("evict"):
            shutil.rmtree(path, ignore_errors=True)
        elif rest == "lock":          # a build lock nobody holds: the builder died
            with building(Dataset(key=key, root=folder / key), wait=False):
                pass
        elif rest.startswith("tmp") and path.is_dir():
            with building(Dataset(key=key, root=folder / key), wait=False) as free:
                if free:
                    shutil.rmtree(path, ignore_errors=True)


def give_up_folder(dataset: Dataset) -> bool:
    """Remove the data folder of a dataset that a volume image holds whole (the data then kept in the image
    alone), unless a process holds the dataset; False when it is in use, or no image holds it."""
    return _remove_unused(dataset, dataset.data_dir, dataset.root / f"data.gone{_stray_name()}",
                          lambda: dataset.data_dir.is_dir() and bool(dataset.ready_images()))


def make_room(folder: Path, incoming: int, keep: set[str] = frozenset(), budget: int | None = None,
              ) -> list[DatasetInfo]:
    """Make `incoming` more bytes fit the budget (default: `dataset_budget`), least recently used first, never
    touching a dataset a process holds nor those in `keep`: first the data folders of datasets that a volume image
    holds whole are given up (their trials restore from the image), then whole datasets are evicted; returns the
    evicted ones. A budget that cannot be met is left exceeded: a trial needs its dataset."""
    sweep(folder)
    infos = list_datasets(folder)
    total = sum(info.bytes for info in infos)
    limit = budget if budget is not None else dataset_budget(folder, used=total).bytes
    for info in infos:
        if total + incoming <= limit:
            break
        dataset = Dataset(key=info.key, root=info.root)
        if info.key not in keep and not info.image_only and give_up_folder(dataset):
            now = dataset.disk_bytes()
            total -= info.bytes - now
            info.bytes, info.image_only = now, True
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

class building:
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
    with building(dataset):
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
