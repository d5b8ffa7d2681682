"""One node's volume for one trial (`--volume`, `--disk-iops`, `--disk-mbps`, `--disk-latency-ms`): the node's
folders (data, commit log, caches, hints) on a loop-mounted filesystem of its own, its I/O on that device capped by a
blkio cgroup (and made to wait through delayfs, with a latency), and its data restored by hard links from a copy of
the dataset kept inside the same filesystem.

The copy lives in an image file beside the dataset (`<dataset>/volumes/<part>-<slot>.img`, sparse), made the first
time a trial needs it and kept while the dataset is (evicting the dataset removes it); `<image>.holds` beside it says
which build it holds, so that the dataset cache may give up the dataset's data folder for room and keep the data in
the image alone (`data_from_image` copies it back out for a trial that needs the folder). Every trial mounts it afresh,
so nothing of it is in memory when the node starts; what the node reads is charged to its memory group, and the
machine's page cache never holds the image (direct I/O underneath)."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import IO, Any

from ..errors import SetupError
from ..runtime.paths import claim_trial_dir, work_dir
from ..runtime.volume import LoopVolume, claim_image, image_size, lock_image, prepare_image, read_ready
from ..volumes import DEFAULT_READ_AHEAD_KB, Volume
from .dataset import HOLDS, IMAGES, Dataset, copy_tree, disk_bytes, sync_tree
from .dataset_cache import building, make_room

DATASET_DIR = "dataset"   # in the image: the dataset's data (or one node's part of it)
NODE_DIR = "node"         # in the image: the trial's node folders, removed after it


class NodeVolume:
    """The mounted volume of one node of one trial; `close()` unmounts it and lets the image go."""

    def __init__(self, spec: Volume, loop: LoopVolume, lock: IO[bytes], prepare_s: float) -> None:
        self.spec = spec
        self.loop = loop
        self._lock = lock
        self.prepare_s = prepare_s
        self._closed = False

    @classmethod
    def open(cls, spec: Volume, dataset: Dataset, part: str | None, point: Path,
             read_ahead_kb: int | None = None) -> NodeVolume:
        """Mount the dataset's image for this node at `point` (made first when missing or stale, with the
        dataset's data copied in); `read_ahead_kb` (the knob) wins over the volume's own."""
        image, lock = claim_image(dataset.root / IMAGES, part or "node")
        try:
            stamp = dataset.image_stamp(part)
            holds = _holds(image)
            if _said(holds) != stamp:   # this image may be refilled below: it no longer vouches for the data
                holds.unlink(missing_ok=True)
            ahead = read_ahead_kb or spec.read_ahead_kb

            def fill(root: Path) -> None:   # from the data folder, copied back out of another image if given up
                holds.unlink(missing_ok=True)
                if not dataset.data_dir.is_dir():
                    data_from_image(dataset, besides=image)
                shutil.copytree(dataset.data_dir / part if part else dataset.data_dir, root / DATASET_DIR)

            here = dataset.data_dir / part if part else dataset.data_dir
            size = disk_bytes(here) if here.is_dir() else int(dataset.meta().get("bytes") or 0)
            if not image.exists():   # a new image, filled below: room in the dataset cache for a copy of the data
                make_room(dataset.root.parent, size, keep={dataset.key})
            prepared = prepare_image(image, stamp, image_size(size), fill, point, ahead)
            _write_said(holds, stamp)
            started = time.monotonic()
            loop = LoopVolume.mount(image, point, ahead, spec.latency_ms)
            try:
                node_dir = loop.point / NODE_DIR
                if node_dir.exists():   # what a killed trial left in the image
                    shutil.rmtree(node_dir)
                node_dir.mkdir()
            except BaseException:
                loop.close()
                raise
        except BaseException:
            lock.close()
            raise
        return cls(spec, loop, lock, prepared + time.monotonic() - started)

    @property
    def storage(self) -> Path:
        """Where the node's folders (data, commitlog, ...) go."""
        return self.loop.point / NODE_DIR

    def restore(self, mode: str = "link") -> float:
        """The node's data folder made from the image's copy of the dataset (hard links inside the image), then
        written back and dropped from the page cache: the files copied (those a datastore may rewrite, or all of
        them with mode "copy") would otherwise sit in memory charged to this process, not to the node's memory
        group, and their write-back would land in the measured phase. Seconds taken."""
        from ..runtime.page_cache import evict_page_cache

        started = time.monotonic()
        copy_tree(self.loop.point / DATASET_DIR, self.storage / "data", mode)
        evict_page_cache([self.storage / "data"])
        return time.monotonic() - started

    def caps(self) -> dict[str, int]:
        return self.spec.caps()

    def disk_spec(self, group: Any | None) -> str:
        """The device (and its I/O group) as loadgen's cost.disks reads them: STATFILE[|GROUPDIR@MAJ:MIN]."""
        return str(self.loop.stat_file) + (f"|{group.stat_spec()}" if group is not None else "")

    def describe(self) -> dict[str, Any]:
        """What the trial ran on, read back from the kernel: device, direct I/O, read-ahead, caps asked."""
        return {"device": f"/dev/{self.loop.name}", "direct_io": self.loop.direct_io(),
                "read_ahead_kb": self.loop.read_ahead_kb(), "caps": self.caps(), "preset": self.spec.name,
                "image": str(self.loop.image), "latency_ms": self.spec.latency_ms,
                "served_by": "delayfs" if self.loop.delayed is not None else None}

    def close(self, keep: bool = False) -> None:
        """Remove the trial's node folders from the image (`keep`: leave them there for inspection, until the
        image's next trial), unmount it, let it go; safe to call twice. The image stays locked when it cannot be
        unmounted (SetupError): nobody may mount it while its filesystem lives."""
        if self._closed:
            return
        if not keep:
            shutil.rmtree(self.storage, ignore_errors=True)
        self.loop.close()
        self._closed = True
        self._lock.close()


def _holds(image: Path) -> Path:
    return image.with_name(image.name + HOLDS)


def _said(holds: Path) -> Any:
    try:
        return json.loads(holds.read_text())
    except (OSError, ValueError):
        return None


def _write_said(holds: Path, stamp: dict[str, Any]) -> None:
    tmp = holds.with_name(holds.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(stamp, sort_keys=True))
    os.replace(tmp, holds)


def data_from_image(dataset: Dataset, besides: Path | None = None) -> float:
    """Copy a dataset kept only in its volume image back into its data folder, for a trial without a volume or
    an image slot of its own to fill; one process at a time (the key's build lock), with room made for it in the
    cache, from a ready image other than `besides` (the caller's own) under that image's lock: a free one if any,
    else the first, once the trial on it ends. An image whose own stamp is not the build's no longer vouches for
    it. Seconds taken; FileNotFoundError when no image holds the data (the dataset is then built again)."""
    started = time.monotonic()
    with building(dataset):
        if dataset.data_dir.is_dir():   # another process copied it back while this one waited
            return 0.0
        make_room(dataset.root.parent, int(dataset.meta().get("bytes") or 0), keep={dataset.key})
        for image, lock in _ready_images_locked(dataset, besides):
            try:
                copied = _copy_out(dataset, image)
            except SetupError:   # it may still be mounted: its lock stays held, as NodeVolume.close keeps it
                raise
            except BaseException:
                lock.close()
                raise
            lock.close()
            if copied:
                return time.monotonic() - started
        raise FileNotFoundError(f"dataset {dataset.key} has neither its data folder nor a volume image that holds it "
                                "(evicted meanwhile): build it again")


def _ready_images_locked(dataset: Dataset, besides: Path | None):
    """The dataset's ready images with each one's lock held in turn: those free now first, then the others (waiting
    for the trial on each to end)."""
    ready = [image for image in dataset.ready_images() if image != besides]
    busy = []
    for image in ready:
        try:
            lock = lock_image(image, wait=False)
        except BlockingIOError:
            busy.append(image)
            continue
        yield image, lock
    for image in busy:
        yield image, lock_image(image, wait=True)


def _copy_out(dataset: Dataset, image: Path) -> bool:
    """The image's copy of the data into the dataset's folder (the caller holds the image's lock); False, with its
    holds file removed, when the image's own stamp says it holds something else. A mount that cannot be undone
    keeps its folder (removing it would delete the image's files through the mount) and raises."""
    tmp = dataset.root / f"data.tmp{os.getpid()}"
    home = work_dir() / "nodes" / uuid.uuid4().hex[:12]   # the mount's folder: swept if this process is killed
    claim_trial_dir(home)
    volume = None
    try:
        volume = LoopVolume.mount(image, home / "image", DEFAULT_READ_AHEAD_KB)
        if read_ready(volume.point) != dataset.image_stamp(None):
            _holds(image).unlink(missing_ok=True)
            return False
        shutil.copytree(volume.point / DATASET_DIR, tmp)
        volume.close()
        sync_tree(tmp)
        os.replace(tmp, dataset.data_dir)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if volume is not None:
            volume.close()   # raises, leaving `home` and its mount, when it cannot be unmounted
        shutil.rmtree(home, ignore_errors=True)
