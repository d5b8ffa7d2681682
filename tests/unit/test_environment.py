"""What the runtime reads of the machine: the data disk's read-ahead."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nosqltune.runtime.environment import read_ahead_kb


def test_read_ahead_is_the_mounted_disks_own(tmp_path):
    """Found by the path's device number; checked against the disk named by the mount table."""
    if not shutil.which("findmnt"):
        pytest.skip("no findmnt here")
    source = subprocess.run(["findmnt", "-no", "SOURCE", "-T", str(tmp_path)], capture_output=True,
                            text=True).stdout.strip()
    disk = Path("/sys/class/block") / Path(source).name
    if not source.startswith("/dev/") or not disk.exists():
        pytest.skip(f"{tmp_path} is not on a block device ({source or 'unknown'})")
    queue = disk / "queue" if (disk / "queue").exists() else disk.resolve().parent / "queue"
    assert read_ahead_kb(tmp_path) == int((queue / "read_ahead_kb").read_text())


def test_no_read_ahead_off_a_block_device():
    if not Path("/proc").is_mount():
        pytest.skip("no /proc mount")
    assert read_ahead_kb(Path("/proc/self")) is None   # procfs: no disk behind it
    assert read_ahead_kb(Path("/no/such/folder")) is None
