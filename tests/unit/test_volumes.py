"""Cloud volumes: the presets as data (each with its source and the day it was read), the flags over a preset, bad
values refused in one line; the block I/O cgroup that caps a node on cgroup v1 and v2 (a fake tree standing in
for /sys/fs/cgroup), and the one-line error where no controller is; the objectives io-per-op and bytes-per-op."""

import os
import shutil
from pathlib import Path

import pytest

from nosqltune import volumes
from nosqltune.errors import SetupError, UsageError
from nosqltune.objective import Objective, metric_unit, metric_value
from nosqltune.runtime import blkio, cgroup, delayfs
from nosqltune.runtime.blkio import IOGroup
from nosqltune.runtime.volume import usable as volume_usable
from nosqltune.volumes import Volume, presets, resolve

MiB = 1 << 20


def test_presets_are_data_with_their_source_and_date():
    found = presets()
    assert {"aws-gp3", "gcp-pd-standard-500g"} <= set(found)
    gp3 = found["aws-gp3"].volume
    assert (gp3.read_iops, gp3.write_iops, gp3.read_mbps, gp3.write_mbps, gp3.read_ahead_kb) == (3000, 3000, 125,
                                                                                               125, 128)
    pd = found["gcp-pd-standard-500g"].volume   # a direction's own cap wins over the shared one
    assert (pd.read_iops, pd.write_iops, pd.read_mbps) == (375, 750, 60)
    for preset in found.values():
        assert preset.source and len(preset.read_on) == 10 and preset.volume.capped


def test_a_preset_without_its_source_or_with_a_bad_cap_is_refused():
    with pytest.raises(ValueError, match="source"):
        volumes._parse("x", {"summary": "s", "iops": 10, "read_on": "2026-01-01"})
    with pytest.raises(ValueError, match="positive"):
        volumes._parse("x", {"summary": "s", "iops": -1, "source": "a", "read_on": "2026-01-01"})
    with pytest.raises(ValueError, match="at least one cap"):
        volumes._parse("x", {"summary": "s", "source": "a", "read_on": "2026-01-01"})
    with pytest.raises(ValueError, match="read_ahead_kb"):
        volumes._parse("x", {"summary": "s", "iops": 5, "read_ahead_kb": 8192, "source": "a", "read_on": "d"})


def test_flags_win_over_the_preset_and_none_means_no_volume():
    assert resolve() is None
    v = resolve("AWS-GP3", iops=500)
    assert (v.name, v.read_iops, v.write_iops, v.read_mbps) == ("aws-gp3", 500, 500, 125)
    v = resolve(mbps=20)
    assert v.caps() == {"read_mbps": 20, "write_mbps": 20} and v.read_ahead_kb == 128
    assert Volume.from_dict(v.to_dict()) == v
    assert "aws-gp3: 3000 IOPS, 125 MiB/s, read-ahead 128 KiB" == resolve("aws-gp3").describe()


@pytest.mark.parametrize("kwargs, words", [
    ({"preset": "ebs-io9"}, "unknown volume 'ebs-io9'"),
    ({"iops": 0}, "--disk-iops 0: give a positive"),
    ({"iops": -5}, "--disk-iops -5"),
    ({"mbps": True}, "--disk-mbps True"),
    ({"iops": 10**9}, "at most 1,000,000"),
])
def test_bad_volumes_are_one_line_usage_errors(kwargs, words):
    with pytest.raises(UsageError) as err:
        resolve(**kwargs)
    assert words in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- the block I/O group on a fake tree

V1_IO = {"cgroup.procs": "", "blkio.throttle.read_iops_device": "", "blkio.throttle.write_iops_device": "",
         "blkio.throttle.read_bps_device": "", "blkio.throttle.write_bps_device": "",
         "blkio.throttle.io_serviced": "Total 0\n", "blkio.throttle.io_service_bytes": "Total 0\n"}
V2_IO = {"cgroup.procs": "", "cgroup.type": "domain\n", "cgroup.subtree_control": "", "io.max": "", "io.stat": ""}



@pytest.fixture
def tree(tmp_path, monkeypatch):
    root, proc = tmp_path / "sys-fs-cgroup", tmp_path / "proc-self-cgroup"
    root.mkdir()
    made = {}

    def make(path):
        os.mkdir(path)
        for name, text in made.get("files", {}).items():
            (Path(path) / name).write_text(text)

    monkeypatch.setattr(cgroup, "_make_dir", make)
    monkeypatch.setattr(cgroup, "_remove_dir", shutil.rmtree)
    return root, proc, made


def _create(tree, caps, **kw):
    root, proc, _ = tree
    return IOGroup.create("t1", (7, 3), caps, cgroup_root=root, proc_self_cgroup=proc, **kw)


def _v1_tree(tree):
    root, proc, made = tree
    (root / "blkio").mkdir()
    for name, text in V1_IO.items():
        (root / "blkio" / name).write_text(text)
    proc.write_text("9:name=systemd:/\n7:blkio:/\n4:memory:/x\n0::/\n")
    made["files"] = V1_IO
    return root


def test_v1_caps_each_direction_in_its_own_file_and_reads_back(tree):
    root = _v1_tree(tree)
    group = _create(tree, {"read_iops": 3000, "write_iops": 3000, "read_mbps": 125, "write_mbps": 125})
    assert group.path == root / "blkio" / "nosqltune-t1" and group.version == 1 and group.owned
    assert (group.path / "blkio.throttle.read_iops_device").read_text() == "7:3 3000"
    assert (group.path / "blkio.throttle.read_bps_device").read_text() == f"7:3 {125 * MiB}"
    assert group.caps() == {"read_iops": 3000, "write_iops": 3000, "read_mbps": 125, "write_mbps": 125}
    (group.path / "blkio.throttle.io_serviced").write_text(
        "7:3 Read 120\n7:3 Write 7\n7:3 Sync 127\n7:3 Total 127\n254:0 Read 999\nTotal 1126\n")
    (group.path / "blkio.throttle.io_service_bytes").write_text("7:3 Read 491520\n7:3 Write 28672\nTotal 520192\n")
    assert group.counters() == {"read_ios": 120, "write_ios": 7, "read_bytes": 491520, "write_bytes": 28672}
    assert group.stat_spec() == f"{group.path}@7:3"
    group.close()
    group.close()
    assert not group.path.exists()


def _v2_tree(tree, delegate=True):
    root, proc, made = tree
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    own = root / "user.slice" / "session-1.scope"
    own.mkdir(parents=True)
    for name, text in V2_IO.items():
        (own / name).write_text(text)
    (root / "user.slice" / "cgroup.type").write_text("domain\n")
    (root / "user.slice" / "cgroup.subtree_control").write_text("memory io\n" if delegate else "memory\n")
    proc.write_text("0::/user.slice/session-1.scope\n")
    made["files"] = V2_IO
    return root / "user.slice"


def test_v2_caps_with_one_io_max_line_and_counts_from_io_stat(tree):
    parent = _v2_tree(tree)
    group = _create(tree, {"read_iops": 500, "write_mbps": 60})
    assert group.path == parent / "nosqltune-t1" and group.version == 2
    assert (group.path / "io.max").read_text() == f"7:3 riops=500 wbps={60 * MiB}"
    (group.path / "io.max").write_text(f"7:3 rbps=max wbps={60 * MiB} riops=500 wiops=max\n")
    assert group.caps() == {"read_iops": 500, "write_mbps": 60}
    (group.path / "io.stat").write_text("7:3 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n")
    assert group.counters() == {"read_ios": 1, "write_ios": 2, "read_bytes": 4096, "write_bytes": 8192}
    group.close()
    assert not group.path.exists()


def _v2_memory_group(tree):
    """A v2 tree whose parent does not delegate io, with the node's memory group in it."""
    parent = _v2_tree(tree, delegate=False)
    memory_group = parent / "nosqltune-node"
    memory_group.mkdir()
    for name, text in V2_IO.items():
        (memory_group / name).write_text(text)
    return parent, memory_group


def test_v2_puts_the_caps_on_the_nodes_memory_group_when_it_has_one(tree):
    parent, memory_group = _v2_memory_group(tree)
    (parent / "cgroup.subtree_control").write_text("memory\n")
    group = IOGroup.create("t1", (7, 3), {"read_iops": 100}, shared=memory_group,
                           cgroup_root=tree[0], proc_self_cgroup=tree[1])
    # a v2 process is in one group: the caps go on the group it is already in, io enabled for it
    assert group.path == memory_group and not group.owned
    assert "+io" in (parent / "cgroup.subtree_control").read_text()
    assert (memory_group / "io.max").read_text() == "7:3 riops=100"
    group.close()
    assert memory_group.exists()   # its owner (the memory group) removes it


def test_caps_are_lifted_for_a_warm_start_only_where_the_reader_would_be_held_by_them(tree):
    parent, memory_group = _v2_memory_group(tree)
    group = IOGroup.create("t1", (7, 3), {"read_iops": 100, "read_mbps": 42}, shared=memory_group,
                           cgroup_root=tree[0], proc_self_cgroup=tree[1])
    # v2: the node's memory group is its I/O group, so a reader charged to its memory is capped with it
    with group.lifted():
        assert (memory_group / "io.max").read_text() == "7:3 rbps=max wbps=max riops=max wiops=max"
        assert group.caps() == {}
    assert group.caps() == {"read_iops": 100, "read_mbps": 42}
    with pytest.raises(RuntimeError), group.lifted():   # put back also when the reading fails
        raise RuntimeError("reader failed")
    assert group.caps() == {"read_iops": 100, "read_mbps": 42}


def test_v1_caps_stay_while_a_reader_outside_the_blkio_group_warms_the_page_cache(tree):
    _v1_tree(tree)
    group = _create(tree, {"read_iops": 100})
    with group.lifted():
        assert group.caps() == {"read_iops": 100}
    group.close()


def test_no_controller_is_one_line_and_leftover_groups_are_swept(tree):
    root, proc, made = tree
    proc.write_text("0::/\n")
    why = blkio.usable(cgroup_root=root, proc_self_cgroup=proc)
    assert why.startswith("no blkio cgroup on this machine") and "\n" not in why
    with pytest.raises(SetupError):
        _create(tree, {"read_iops": 1})
    (root / "cgroup.controllers").write_text("cpu memory\n")
    assert "no io controller" in blkio.usable(cgroup_root=root, proc_self_cgroup=proc)
    # a killed run's empty groups, named after its trial folder, are removed; one holding a process stays
    (root / "blkio").mkdir()
    for name, text in V1_IO.items():
        (root / "blkio" / name).write_text(text)
    proc.write_text("7:blkio:/\n0::/\n")
    for name, pids in (("nosqltune-nodes-abc123-4000-io", ""), ("nosqltune-nodes-abc123-4001-io", "77\n"),
                       ("nosqltune-nodes-other-1-io", "")):
        (root / "blkio" / name).mkdir()
        (root / "blkio" / name / "cgroup.procs").write_text(pids)
    removed = blkio.remove_empty_groups("abc123", cgroup_root=root, proc_self_cgroup=proc)
    assert [p.name for p in removed] == ["nosqltune-nodes-abc123-4000-io"]
    assert (root / "blkio" / "nosqltune-nodes-abc123-4001-io").exists()
    assert (root / "blkio" / "nosqltune-nodes-other-1-io").exists()


def test_bad_caps_are_refused_before_a_group_is_made(tree):
    with pytest.raises(ValueError):
        _create(tree, {"read_iops": 0})
    with pytest.raises(ValueError):
        _create(tree, {"iops": 10})


# ---------------------------------------------------------------- the objectives of the disk per operation

def test_io_and_bytes_per_op_are_minimised_cost_metrics():
    summary = {"throughput_ops_s": 3000.0, "node_io_per_op": 0.95, "node_bytes_per_op": 12000.0}
    io = Objective.parse("io-per-op", ["throughput>=2000"])
    assert not io.maximize and metric_value("io-per-op", summary) == 0.95
    assert metric_unit("io-per-op") == "I/Os per op" and metric_unit("bytes-per-op") == "B/op"
    assert io.evaluate([summary]).value == 0.95 and io.evaluate([summary]).feasible
    # no device counters (no volume): the objective has no value for the trial
    assert io.evaluate([{"throughput_ops_s": 1.0, "node_io_per_op": None}]).value is None
    assert Objective.parse("bytes-per-op").evaluate([summary]).value == 12000.0
    with pytest.raises(UsageError, match="io-per-op"):
        Objective.parse("iops-per-op")


def test_parallel_trials_on_one_dataset_each_get_an_image_of_their_own(tmp_path):
    from nosqltune.runtime.volume import claim_image, image_size

    first, held = claim_image(tmp_path, "node1")
    second, held_too = claim_image(tmp_path, "node1")
    assert (first.name, second.name) == ("node1-0.img", "node1-1.img")
    held.close()
    again, held_again = claim_image(tmp_path, "node1")   # a slot let go is taken again first
    assert again.name == "node1-0.img"
    held_too.close()
    held_again.close()
    # room for compactions to rewrite the data twice over and a commit log, in whole GiB; sparse
    assert image_size(0) == 2 << 30 and image_size(1 << 30) == 5 << 30 and image_size((1 << 30) + 1) == 6 << 30


@pytest.mark.skipif(bool(volume_usable() or blkio.usable()), reason="no loop devices or blkio controller here")
@pytest.mark.parametrize("latency_ms", [0.0, 1.0])
def test_what_a_killed_run_left_mounted_is_swept_by_the_next(tmp_path, latency_ms):
    """A tuner killed while its trial's volume was mounted leaves the mount (and so its loop device), delayfs under
    it when the volume has a latency, and an empty I/O group; the next trial on the machine unmounts, detaches and
    removes them before removing the folder (delayfs ends with its mount), and the dataset's image keeps its
    files."""
    if latency_ms and delayfs.usable():
        pytest.skip(delayfs.usable())
    import json
    import socket

    from nosqltune.runtime import paths
    from nosqltune.runtime.volume import LoopVolume, attached, lock_image, mounts, prepare_image

    image = tmp_path / "cache" / "node-0.img"
    lock = lock_image(image)
    prepare_image(image, {"t": 1}, 1 << 30, lambda root: (root / "dataset").mkdir(), tmp_path / "prep", 128)
    nodes = tmp_path / "nodes"
    trial = nodes / "deadbeef0001"
    trial.mkdir(parents=True)
    (trial / paths.OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": 1 << 22,
                                                      "started": "0"}))   # a pid no process has
    vol = LoopVolume.mount(image, trial / "volume", 128, latency_ms)
    assert (vol.delayed is not None) == bool(latency_ms) and attached(image) == [vol.number]
    (vol.point / "node").mkdir()
    group = IOGroup.create("nodes-deadbeef0001-4000-io", vol.device, {"read_iops": 100})
    lock.close()   # the killed tuner's lock went with it
    try:
        removed = paths.remove_orphaned_trial_dirs(nodes)
        assert removed == [trial] and not trial.exists()
        assert not [p for _, p in mounts() if p.startswith(str(trial))]
        assert not attached(image)   # its loop device detached (autoclear)
        assert not group.path.exists()
        if vol.delayed is not None:   # delayfs ended when its mount went
            vol.delayed._process.wait(timeout=10)
    finally:
        if any(p.startswith(str(trial)) for _, p in mounts()):
            vol.close()
        group.close()
    lock = lock_image(image)
    with LoopVolume.mount(image, tmp_path / "again", 128) as again:   # the image's own files are intact
        assert (again.point / "dataset").is_dir()
    lock.close()


@pytest.mark.skipif(bool(volume_usable() or delayfs.usable()), reason="no loop devices or no FUSE build here")
def test_a_volume_with_a_latency_makes_each_io_wait(tmp_path):
    """Every 4 KiB O_DIRECT read of a file on a volume with 2 ms of latency takes at least 2 ms (delayfs waits
    before it reads the image), where the fastest of the same reads without it takes a fraction of that; the volume
    is attached through the served file, the mount's source names the image, and nothing is left after it is closed.
    Each read is timed alone and the bounds hold for the fastest one: the unit tests share the disk (two workers), so
    a mean can carry another test's I/O (a mean of 1.95 ms without the latency was seen)."""
    import mmap
    import random
    import time

    from nosqltune.runtime.volume import LoopVolume, attached, lock_image, loop_backing_file, mounts, prepare_image

    image = tmp_path / "v.img"
    lock = lock_image(image)
    try:
        prepare_image(image, {"t": 1}, 1 << 30, lambda root: (root / "f.bin").write_bytes(os.urandom(8 * MiB)),
                      tmp_path / "prep", 128)
        per_read = {}
        for latency in (0.0, 2.0):
            with LoopVolume.mount(image, tmp_path / "trial" / "mnt", 128, latency) as vol:
                assert vol.direct_io()
                if latency:
                    served = str(vol.delayed.point)
                    assert loop_backing_file(vol.number) == served and attached(image) == [vol.number]
                    assert (f"delayfs:{os.path.realpath(image)}", served) in mounts()
                fd = os.open(vol.point / "f.bin", os.O_RDONLY | os.O_DIRECT)
                buf = mmap.mmap(-1, 4096)
                times = []
                for _ in range(100):
                    started = time.monotonic()
                    os.preadv(fd, [buf], random.randrange(0, 2048) * 4096)
                    times.append((time.monotonic() - started) * 1000)
                per_read[latency] = min(times)
                os.close(fd)
        assert per_read[2.0] >= 2.0 and per_read[0.0] < 1.0, per_read
    finally:
        lock.close()
    assert not [p for _, p in mounts() if p.startswith(str(tmp_path))] and not attached(image)


def test_a_latency_is_a_volumes_and_bounded():
    gp3 = resolve("aws-gp3", latency_ms=1.5)
    assert gp3.latency_ms == 1.5 and gp3.read_iops == 3000 and "1.5 ms per I/O" in gp3.describe()
    assert resolve("aws-gp3").latency_ms == 0.0 and "per I/O" not in resolve("aws-gp3").describe()
    assert Volume.from_dict({"read_iops": 10}).latency_ms == 0.0   # a volume stored before latencies: none
    assert Volume.from_dict(gp3.to_dict()) == gp3
    assert "latency_ms" not in resolve("aws-gp3").to_dict()   # stored as volumes were before latencies
    for bad, match in ((-1, "from 0 to 100"), (101, "from 0 to 100"), (float("nan"), "from 0 to 100"),
                       (0.0001, "below a microsecond")):
        with pytest.raises(UsageError, match=match):
            resolve("aws-gp3", latency_ms=bad)
    with pytest.raises(UsageError, match="give --volume NAME, --disk-iops or --disk-mbps with it"):
        resolve(latency_ms=1.0)
    with pytest.raises(ValueError, match="latency_ms"):
        volumes._parse("x", {"summary": "s", "source": "s", "read_on": "d", "iops": 10, "latency_ms": -2})
    assert volumes._parse("x", {"summary": "s", "source": "s", "read_on": "d", "iops": 10,
                                "latency_ms": 0.5}).volume.latency_ms == 0.5
