"""What the runtime reads of the machine: the data disk's queue and read-ahead; the load generator's version in
the fingerprint."""

from __future__ import annotations

import os
from pathlib import Path

from nosqltune.runtime.environment import disk_queue, fingerprint, loadgen_digest, read_ahead_kb


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


def test_the_fingerprint_names_the_load_generators_sources(tmp_path, monkeypatch):
    """Runs measured by two versions of the client are two environments: its digest follows loadgen's main sources
    and pom.xml, not its tests or its build output."""
    from nosqltune.runtime.environment import _sources_digest
    from nosqltune.runtime.paths import repo_root

    assert fingerprint("cassandra", "5.0.6")["loadgen"] == loadgen_digest() != "unknown"
    digest = _sources_digest.__wrapped__     # uncached: the same folder is hashed again after each change
    copy = tmp_path / "loadgen"
    (copy / "src" / "main" / "java").mkdir(parents=True)
    (copy / "pom.xml").write_text((repo_root() / "loadgen" / "pom.xml").read_text())
    client = copy / "src" / "main" / "java" / "Client.java"
    client.write_text("class Client {}\n")
    first = digest(copy)
    (copy / "src" / "test").mkdir()
    (copy / "src" / "test" / "ClientTest.java").write_text("class ClientTest {}\n")
    (copy / "target").mkdir()
    (copy / "target" / "x.jar").write_bytes(b"jar")
    assert digest(copy) == first
    client.write_text("class Client { int x; }\n")
    assert digest(copy) != first
    monkeypatch.setenv("NOSQLTUNE_LOADGEN", str(copy))
    assert loadgen_digest() == digest(copy)
    monkeypatch.setenv("NOSQLTUNE_LOADGEN", str(tmp_path / "none"))
    assert loadgen_digest() == "unknown"
