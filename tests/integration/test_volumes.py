"""A volume per node on this machine, as root: a loop device with direct I/O under an ext4 image, the block I/O
controller holding a process to the cap, a Cassandra trial limited by its volume's IOPS cap (its bottleneck line
says so, with the device's I/Os per operation), the read_ahead_kb knob read back from the device, and nothing left
behind: no mount, loop device or cgroup, also when the tuner is killed at each phase of a trial."""

import os
import subprocess
import sys
import time

import pytest

from nosqltune.runtime import blkio, delayfs, volume
from nosqltune.runtime.blkio import IOGroup
from nosqltune.runtime.volume import LoopVolume, lock_image, prepare_image

from tests.faultlog import record

from .conftest import volume_leftovers
from .fault_injection import PHASES, run_with_fault
from .test_scenarios import bench

pytestmark = pytest.mark.skipif(bool(volume.usable() or blkio.usable()),
                                reason=f"no volumes here: {volume.usable() or blkio.usable()}")

FILE_MB = 64


def _fill(root):
    with open(root / "f.bin", "wb") as fh:
        fh.write(os.urandom(FILE_MB << 20))


def _reader(path, count: int, direct: bool) -> str:
    """A child's random 4 KiB reads of `path`: O_DIRECT, or buffered with random read-ahead off (fadvise)."""
    return (f"import os, random, mmap, time\n"
            f"fd = os.open({str(path)!r}, os.O_RDONLY{' | os.O_DIRECT' if direct else ''})\n"
            f"os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)\n"
            f"buf = mmap.mmap(-1, 4096)\n"
            f"t = time.monotonic()\n"
            f"for i in range({count}):\n"
            f"    os.preadv(fd, [buf], random.randrange(0, {FILE_MB << 20} // 4096) * 4096)\n"
            f"print(time.monotonic() - t)\n")


def test_a_capped_volume_holds_a_process_to_its_iops_and_its_bandwidth(tmp_path):
    image = tmp_path / "v.img"
    lock = lock_image(image)
    try:
        prepare_image(image, {"test": 1}, 1 << 30, _fill, tmp_path / "prep", 128)
        with LoopVolume.mount(image, tmp_path / "mnt", 64) as vol:
            assert vol.direct_io() and vol.read_ahead_kb() == 64
            target = vol.point / "f.bin"
            for caps, direct, count in (({"read_iops": 400}, True, 800), ({"read_iops": 400}, False, 800)):
                with IOGroup.create("voltest", vol.device, caps) as group:
                    before = group.counters()["read_ios"]
                    done = subprocess.run([sys.executable, "-c", _reader(target, count, direct)],
                                          preexec_fn=group.preexec(), capture_output=True, text=True, check=True)
                    seconds = float(done.stdout)
                    ios = group.counters()["read_ios"] - before
                    # each 4 KiB read is one I/O on the device, and the group is held to 400 of them per second
                    # (v1 lets a first slice through at once: the rate is at most the cap, and near it)
                    assert ios >= count * 0.95, (ios, direct)
                    assert 0.6 * 400 <= ios / seconds <= 400 * 1.15, (ios, seconds, direct)
            # bandwidth: a sequential buffered read of the file at 8 MiB/s
            with IOGroup.create("voltest", vol.device, {"read_mbps": 8}) as group:
                fd = os.open(target, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
                started = time.monotonic()
                subprocess.run(["dd", f"if={target}", "of=/dev/null", "bs=1M", "count=24", "status=none"],
                               preexec_fn=group.preexec(), check=True)
                rate = 24 / (time.monotonic() - started)
                assert rate <= 8 * 1.25, rate
                assert group.counters()["read_bytes"] >= 20 << 20
    finally:
        lock.close()
    assert not volume_leftovers(tmp_path)


def test_a_warm_start_fills_the_nodes_memory_group_to_its_cap_index_files_last_past_the_io_cap(tmp_path):
    from nosqltune.runtime.cgroup import MemoryGroup, usable
    from nosqltune.runtime.page_cache import cached_bytes

    if usable():
        pytest.skip(usable())
    image = tmp_path / "w.img"
    lock = lock_image(image)

    def files(root):
        for name, mib in (("nb-1-big-Data.db", 96), ("nb-1-big-Index.db", 4)):
            with open(root / name, "wb") as fh:
                fh.write(os.urandom(mib << 20))

    try:
        prepare_image(image, {"test": 2}, 1 << 30, files, tmp_path / "prep", 128)
        with LoopVolume.mount(image, tmp_path / "mnt", 128) as vol, \
                MemoryGroup.create("warmtest", 48 << 20) as memory, \
                IOGroup.create("warmtest-io", vol.device, {"read_iops": 20}, shared=memory.path) as io:
            started = time.monotonic()
            with io.lifted():
                cached = memory.fill_page_cache([vol.point], last=lambda name: not name.endswith("-Data.db"))
            seconds = time.monotonic() - started
            # 100 MiB read through a 48 MiB group: it ends full, and the index, read last, is whole in it
            assert 36 << 20 <= cached <= 48 << 20, cached
            assert cached_bytes(vol.point / "nb-1-big-Index.db") == 4 << 20
            assert cached_bytes(vol.point / "nb-1-big-Data.db") < 48 << 20
            # at 20 I/Os per second, 800 read-ahead windows of 128 KiB would take 40 s: the caps did not hold it
            assert seconds < 10, seconds
            assert io.caps() == {"read_iops": 20}
    finally:
        lock.close()
    assert not volume_leftovers(tmp_path)


@pytest.mark.slow   # 48 s (its own dataset and a capped trial): make test-all; make test keeps the process caps above
@pytest.mark.parametrize("latency_ms", [None, 2.0])
def test_a_cassandra_trial_on_a_capped_volume_is_limited_by_it(nosqltune_home, dataset_cache, tmp_path, capsys,
                                                              latency_ms):
    """... and with --disk-latency-ms each read the device serves takes at least that long (delayfs under it)."""
    if latency_ms and delayfs.usable():
        pytest.skip(delayfs.usable())
    study = tmp_path / "vol.db"
    # 32 threads keep enough reads waiting that the cap, not the threads, sets the pace
    sizes = ["--records", "20000", "--operations", "4000", "--threads", "32", "--warmup-ops", "500", "--heap", "1G",
             "--workload", "ycsb-c", "--distribution", "uniform", "--page-cache", "8M"]
    waits = ["--disk-latency-ms", str(latency_ms)] if latency_ms else []
    code, rows = bench(capsys, study, *sizes, "--disk-iops", "150", "--set", "read_ahead_kb=16", *waits)
    row = rows[-1]
    summary, internals = row["metrics"]["summary"], row["internals"]
    volume_seen = internals["volume"]["node1"]
    assert volume_seen["direct_io"] and volume_seen["read_ahead_kb"] == 16 and internals["read_ahead_kb"] == 16
    assert volume_seen["caps"] == volume_seen["caps_in_kernel"] == {"read_iops": 150, "write_iops": 150}
    assert row["workload"]["harness"]["datastore"]["volume"]["read_iops"] == 150   # Cassandra's part
    # the device served the reads that missed the node's memory, and no more than the cap allows
    assert summary["node_dev_read_ios_per_op"] > 0.1, summary
    assert summary["node_group_read_iops"] <= 150 * 1.1, summary
    if latency_ms:   # the device's time per read holds the wait (and FUSE's round trip); without it, far less
        assert volume_seen["latency_ms"] == latency_ms and volume_seen["served_by"] == "delayfs"
        assert summary["node_dev_read_ms_per_io"] >= latency_ms, summary
        assert row["workload"]["harness"]["datastore"]["volume"]["latency_ms"] == latency_ms
    else:
        assert volume_seen["served_by"] is None and summary["node_dev_read_ms_per_io"] < 2.0, summary
    # the node's read threads over JMX: 5.0's 32 by default, and reads waiting on the volume keep some of them busy
    assert summary["node_read_threads"] == 32 and 0 < summary["node_reads_in_progress"] <= 32, summary
    verdict = internals["bottleneck"]
    assert verdict["limit"] == "volume-iops", verdict
    assert verdict["utilisation"]["volume_read_iops"] >= 0.9
    assert not volume_leftovers(nosqltune_home, dataset_cache)


@pytest.mark.faults   # the fault campaign's rows (make faults): a Cassandra node on a capped volume
@pytest.mark.slow   # 80 s a phase: make test keeps the trial on a volume above and the sweep of a killed run's
# volume in tests/unit/test_volumes.py; make test-all and make faults run every phase
@pytest.mark.parametrize("phase", PHASES)
def test_the_tuner_killed_at_each_phase_of_a_volume_trial_leaves_nothing_behind(phase, nosqltune_home, dataset_cache,
                                                                                tmp_path):
    # killed (SIGKILL: nothing of the tuner runs after it) while its trial's volume is mounted, its group holds the
    # node, or neither yet; the resume sweeps what the dead tuner left, runs the trial again and leaves nothing
    # the sizes of the trial above, its 16 KiB read-ahead included: at the volume's 128 KiB default each I/O
    # brought in enough that 8 MiB of page cache served most reads (0.11-0.12 I/Os per operation, 85-90% of the
    # cap: the verdict said the client's threads, not the volume)
    args = ["--records", "20000", "--operations", "5000", "--threads", "32", "--warmup-ops", "500", "--heap", "1G",
            "--workload", "ycsb-c", "--distribution", "uniform", "--page-cache", "8M", "--disk-iops", "150",
            "--set", "read_ahead_kb=16"]
    outcome = run_with_fault(fault="tuner-kill", phase=phase, home=tmp_path / "home", study=tmp_path / "s.db",
                             trial_args=args, budget=1, trial=1, system="cassandra")
    assert outcome.injected, f"never killed at {phase}: {outcome.user_sees}"
    assert outcome.exit_code == -9 or (phase == "stop" and outcome.exit_code == 0), outcome.user_sees
    assert outcome.resume_code in (0, None), outcome.user_sees
    assert not outcome.orphans and not outcome.lost, (outcome.orphans, outcome.rows)
    last = outcome.rows[-1]
    assert last["state"] == "COMPLETE"
    # the trial run again on resume ran on its volume, and the volume's cap limited it
    assert last["internals"]["volume"]["node1"]["direct_io"]
    assert last["internals"]["bottleneck"]["limit"] == "volume-iops", last["internals"]["bottleneck"]
    left = volume_leftovers(tmp_path / "home", dataset_cache)
    assert not left, left
    record("fault", **{**outcome.row(), "system": "cassandra on a capped volume"})


@pytest.mark.slow   # 80 s: make test-all
def test_the_tuner_killed_measuring_on_a_volume_with_a_latency_leaves_nothing_behind(nosqltune_home, dataset_cache,
                                                                                      tmp_path):
    """Killed while the node reads through delayfs: the resume unmounts the node's filesystem, then delayfs (which
    ends with its mount), and runs the trial again; no mount, loop device, group or delayfs process is left."""
    import subprocess

    if delayfs.usable():
        pytest.skip(delayfs.usable())
    args = ["--records", "20000", "--operations", "5000", "--threads", "32", "--warmup-ops", "500", "--heap", "1G",
            "--workload", "ycsb-c", "--distribution", "uniform", "--page-cache", "8M", "--disk-iops", "150",
            "--disk-latency-ms", "1", "--set", "read_ahead_kb=16"]
    outcome = run_with_fault(fault="tuner-kill", phase="measure", home=tmp_path / "home", study=tmp_path / "s.db",
                             trial_args=args, budget=1, trial=1, system="cassandra")
    assert outcome.injected and outcome.exit_code == -9, outcome.user_sees
    assert outcome.resume_code in (0, None) and not outcome.orphans and not outcome.lost, outcome.user_sees
    last = outcome.rows[-1]
    assert last["state"] == "COMPLETE" and last["internals"]["volume"]["node1"]["served_by"] == "delayfs"
    assert not volume_leftovers(tmp_path / "home", dataset_cache)
    home = str(tmp_path / "home")
    daemons = subprocess.run(["pgrep", "-af", "delayfs"], capture_output=True, text=True).stdout
    assert home not in daemons, daemons


def test_a_dataset_given_up_for_room_serves_trials_from_its_image_and_comes_back_out(tmp_path, nosqltune_home,
                                                                                     monkeypatch):
    """The dataset cache may give up a dataset's data folder when a volume image holds the data whole: a trial on a
    volume then restores from the image, a second trial at once fills an image of its own from the data copied
    back out of the first's (once that trial ends), and a trial without a volume gets the folder back. A new image
    counts in the cache's budget: making one gives up another dataset's folder when the budget is short."""
    import json
    import shutil
    import threading

    from nosqltune.systems.dataset import Dataset, disk_bytes
    from nosqltune.systems.dataset_cache import give_up_folder, list_datasets
    from nosqltune.systems.volume import NodeVolume, data_from_image
    from nosqltune.volumes import Volume

    root = tmp_path / "datasets" / "k"
    table = root / "data" / "ks" / "t-1"
    table.mkdir(parents=True)
    body = os.urandom(1 << 20)
    (table / "nb-1-big-Data.db").write_bytes(body)
    (table / "nb-1-big-TOC.txt").write_text("toc")
    (root / "meta.json").write_text(json.dumps({"system": "cassandra", "created_at": 1.0, "bytes": 1 << 20}))
    (root / "last_used").touch()
    dataset, spec = Dataset(key="k", root=root), Volume(read_iops=1000)

    def restored(volume):
        volume.restore()
        return (volume.storage / "data" / "ks" / "t-1" / "nb-1-big-Data.db").read_bytes() == body

    first = NodeVolume.open(spec, dataset, None, tmp_path / "n1")
    try:
        assert restored(first)
    finally:
        first.close()
    assert dataset.ready_images() == [root / "volumes" / "node-0.img"]
    assert give_up_folder(dataset) and dataset.in_image_only and not dataset.data_dir.exists()
    assert [i.image_only for i in list_datasets(root.parent)] == [True]
    again = NodeVolume.open(spec, dataset, None, tmp_path / "n2")   # its image is ready: no folder needed
    opened = {}
    try:
        assert restored(again)
        second = threading.Thread(target=lambda: opened.setdefault("v", NodeVolume.open(spec, dataset, None,
                                                                                        tmp_path / "n3")))
        second.start()
        second.join(3)
        assert second.is_alive()   # its slot is empty, and the only image holding the data is the running trial's
    finally:
        again.close()
    second.join(120)
    third = opened["v"]
    try:
        assert third.loop.image.name == "node-1.img" and restored(third)
    finally:
        third.close()
    assert (dataset.data_dir / "ks" / "t-1" / "nb-1-big-Data.db").read_bytes() == body
    assert len(dataset.ready_images()) == 2
    # given up again, then copied back out for a trial without a volume
    assert give_up_folder(dataset) and data_from_image(dataset) > 0
    assert (dataset.data_dir / "ks" / "t-1" / "nb-1-big-Data.db").read_bytes() == body
    assert not list(root.glob("data.*"))
    # another dataset's first trial on a volume, with room for one more copy of the data only: k's folder goes
    other = Dataset(key="k2", root=root.parent / "k2")
    shutil.copytree(root / "data", other.data_dir)
    (other.root / "meta.json").write_text(json.dumps({"system": "cassandra", "created_at": 2.0, "bytes": 1 << 20}))
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", f"{(disk_bytes(root) + disk_bytes(other.root) >> 10) + 512}K")
    assert other.hold()   # a trial holds its dataset before it mounts its volume
    fourth = NodeVolume.open(spec, other, None, tmp_path / "n4")
    fourth.close()
    other.release()
    assert dataset.in_image_only and not other.in_image_only and other.ready_images()
    # an image whose own stamp names another build no longer vouches for the data: copying out refuses it, and the
    # dataset, with no copy left, is one to build again
    monkeypatch.delenv("NOSQLTUNE_DATASET_BUDGET")
    assert give_up_folder(other)
    image = other.ready_images()[0]
    with lock_image(image), LoopVolume.mount(image, tmp_path / "m", 128) as mounted:
        (mounted.point / volume.READY).write_text(json.dumps({**other.image_stamp(None), "built": 1.5}))
    with pytest.raises(FileNotFoundError, match="build it again"):
        data_from_image(other)
    assert not other.ready_images() and not other.exists() and not other.data_dir.exists()
    assert not volume_leftovers(tmp_path, nosqltune_home)
