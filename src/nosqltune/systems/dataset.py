"""Datasets: load once per (datastore, data shape, load-affecting knobs), keep the data directory, restore it
per trial.

Restore links the large files that a datastore never writes in place and copies every other file:
Cassandra's immutable SSTable components (Data, Index, and BTI's Partitions/Rows; its own snapshots are
hard links for that reason; small components such as Summary or Statistics may be rewritten), and Redis's
dump.rdb (Redis writes a new snapshot to a temporary file and renames it over the old one).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..runtime.paths import work_dir

_LINKED_SUFFIXES = ("-Data.db", "-Index.db", "-Partitions.db", "-Rows.db", ".rdb")


def dataset_key(parts: dict[str, Any]) -> str:
    """A short stable name for everything that determines a dataset's bytes."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class Dataset:
    key: str
    root: Path

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def meta_path(self) -> Path:
        return self.root / "meta.json"

    def exists(self) -> bool:
        return self.meta_path.exists() and self.data_dir.is_dir()

    def meta(self) -> dict[str, Any]:
        return json.loads(self.meta_path.read_text())

    def restore_into(self, data_dir: Path, mode: str = "link", part: str | None = None, warm: bool = True) -> float:
        """Make `data_dir` a private copy of the dataset's data (or of its sub-folder `part`, e.g. one node's
        of a cluster); returns seconds taken. `warm`: read it through into the page cache (see read_through);
        a disk-bound trial restores cold and evicts it instead."""
        started = time.monotonic()
        source = self.data_dir / part if part else self.data_dir
        if data_dir.exists():
            shutil.rmtree(data_dir)
        if mode == "copy":
            shutil.copytree(source, data_dir)
        elif mode == "link":
            for src_root, dirs, files in os.walk(source):
                dst_root = data_dir / Path(src_root).relative_to(source)
                dst_root.mkdir(parents=True, exist_ok=True)
                for name in files:
                    src, dst = Path(src_root) / name, dst_root / name
                    if name.endswith(_LINKED_SUFFIXES):
                        os.link(src, dst)
                    else:
                        shutil.copy2(src, dst)
        else:
            raise ValueError(f"unknown restore mode {mode!r}")
        if warm:
            read_through(data_dir)
        return time.monotonic() - started


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


def dataset_for(key: str) -> Dataset:
    return Dataset(key=key, root=work_dir() / "datasets" / key)


def create_dataset(dataset: Dataset, build: Callable[[Path], dict[str, Any]]) -> Dataset:
    """Build into a temporary directory with `build(node_home) -> meta`, then publish atomically."""
    tmp = dataset.root.with_name(dataset.root.name + f".tmp{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        meta = build(tmp / "node")
        (tmp / "node" / "data").rename(tmp / "data")
        shutil.rmtree(tmp / "node")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        if dataset.root.exists():
            shutil.rmtree(dataset.root)
        tmp.rename(dataset.root)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dataset
