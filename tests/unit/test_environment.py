"""What the runtime reads of the machine: the data disk's queue and read-ahead."""

from __future__ import annotations

import os
from pathlib import Path

from nosqltune.runtime.environment import disk_queue, read_ahead_kb


def fake_sysfs(tmp_path: Path, read_ahead: str | None) -> Path:
    """A sysfs whose entry for tmp_path's device is partition vda1 of disk vda (the queue is the disk's)."""
    dev = os.stat(tmp_path).st_dev
    sysfs = tmp_path / "sys"
    disk = sysfs / "devices" / "vda"
    (disk / "vda1").mkdir(parents=True)
    if read_ahead is not None:
        (disk / "queue").mkdir()
        (disk / "queue" / "read_ahead_kb").write_text(read_ahead + "\n")
    (sysfs / "dev" / "block").mkdir(parents=True)
    (sysfs / "dev" / "block" / f"{os.major(dev)}:{os.minor(dev)}").symlink_to(disk / "vda1")
    return sysfs


def test_a_partitions_read_ahead_is_its_disks(tmp_path):
    sysfs = fake_sysfs(tmp_path, "8192")
    assert disk_queue(tmp_path, sysfs) == (sysfs / "devices" / "vda" / "queue").resolve()
    assert read_ahead_kb(tmp_path, sysfs) == 8192


def test_no_read_ahead_where_the_disk_has_no_queue_or_no_number(tmp_path):
    assert read_ahead_kb(tmp_path, fake_sysfs(tmp_path, None)) is None
    other = tmp_path / "other"
    other.mkdir()
    assert read_ahead_kb(other, fake_sysfs(other, "lots")) is None


def test_no_read_ahead_off_a_block_device():
    assert disk_queue(Path("/proc/self")) is None   # procfs: no disk behind it
    assert read_ahead_kb(Path("/no/such/folder")) is None
