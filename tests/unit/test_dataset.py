"""Restoring a dataset: large immutable SSTable files are linked, everything else copied; the dataset
never changes whatever the trial's node does to its copy. The dataset cache: its disk budget, least recently
used eviction, the locks that keep a dataset in use from being evicted and a dataset from being built twice."""

import errno
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from nosqltune.errors import UsageError
from nosqltune.systems import dataset as ds
from nosqltune.systems import dataset_cache
from nosqltune.systems.base import TrialSettings
from nosqltune.systems.cassandra.trial import cassandra_dataset_key as dataset_key
from nosqltune.systems.dataset import Dataset
from nosqltune.systems.dataset_cache import (Budget, create_dataset, dataset_budget, evict, format_size, in_use,
                                             list_datasets, make_room, parse_size, prune, sweep)


def _make(root):
    table = root / "data" / "ycsb" / "usertable-1234"
    table.mkdir(parents=True)
    for component, body in (("Data.db", b"rows" * 1000), ("Index.db", b"idx"), ("Summary.db", b"sum"),
                            ("Statistics.db", b"stats"), ("TOC.txt", b"toc")):
        (table / f"nb-1-big-{component}").write_bytes(body)
    (root / "meta.json").write_text(json.dumps({"records": 10}))
    return Dataset(key="k", root=root), table


def test_link_mode_links_immutable_components_and_copies_the_rest(tmp_path):
    dataset, table = _make(tmp_path / "ds")
    target = tmp_path / "node" / "data"
    dataset.restore_into(target, "link")
    restored = target / "ycsb" / "usertable-1234"
    for name in ("nb-1-big-Data.db", "nb-1-big-Index.db"):
        assert os.stat(restored / name).st_ino == os.stat(table / name).st_ino
    for name in ("nb-1-big-Summary.db", "nb-1-big-Statistics.db", "nb-1-big-TOC.txt"):
        assert os.stat(restored / name).st_ino != os.stat(table / name).st_ino
        assert (restored / name).read_bytes() == (table / name).read_bytes()


def test_what_a_node_does_to_its_copy_leaves_the_dataset_intact(tmp_path):
    dataset, table = _make(tmp_path / "ds")
    target = tmp_path / "node" / "data"
    dataset.restore_into(target, "link")
    restored = target / "ycsb" / "usertable-1234"
    (restored / "nb-1-big-Statistics.db").write_bytes(b"rewritten in place")  # small components may change
    (restored / "nb-1-big-Data.db").unlink()                                    # compaction deletes files
    (restored / "nb-2-big-Data.db").write_bytes(b"new")                          # and writes new ones
    assert (table / "nb-1-big-Statistics.db").read_bytes() == b"stats"
    assert (table / "nb-1-big-Data.db").read_bytes() == b"rows" * 1000
    assert not (table / "nb-2-big-Data.db").exists()
    # a second restore starts from the dataset again, not from the first node's state
    dataset.restore_into(target, "copy")
    assert sorted(p.name for p in restored.iterdir()) == sorted(p.name for p in table.iterdir())


def test_dataset_key_depends_on_what_shapes_the_data():
    base = dataset_key("5.0.6", {"records": 100}, {}, 2048)
    assert base == dataset_key("5.0.6", {"records": 100}, {}, 2048)
    assert base != dataset_key("5.0.6", {"records": 101}, {}, 2048)
    assert base != dataset_key("5.0.6", {"records": 100}, {"num_tokens": 4}, 2048)
    assert base != dataset_key("5.0.5", {"records": 100}, {}, 2048)


def test_failed_build_leaves_nothing_half_made(tmp_path):
    dataset = Dataset(key="k", root=tmp_path / "datasets" / "k")

    def build(home):
        (home / "data").mkdir(parents=True)
        raise RuntimeError("load failed")

    with pytest.raises(RuntimeError):
        create_dataset(dataset, build)
    assert not dataset.exists() and list((tmp_path / "datasets").iterdir()) == []


def test_jit_modes():
    assert TrialSettings(jit="c1").jvm_flags() == ["-XX:TieredStopAtLevel=1"]
    assert TrialSettings(jit="tiered").jvm_flags() == []
    with pytest.raises(ValueError):
        TrialSettings(jit="graal").jvm_flags()


# --- the dataset cache: budget, least-recently-used eviction, locks --------------------------------------------

KIB = 1024


def _fake(folder, key, kib=64, used=None, meta=None):
    """A complete dataset folder with `kib` KiB of data, last used at `used` (seconds since the epoch)."""
    root = folder / key
    (root / "data").mkdir(parents=True)
    (root / "data" / "dump.rdb").write_bytes(b"x" * (kib * KIB))
    (root / "meta.json").write_text(json.dumps(meta or {"system": "redis", "records": kib, "data": {"records": kib}}))
    (root / "last_used").touch()
    if used is not None:
        os.utime(root / "last_used", (used, used))
    return Dataset(key=key, root=root)


def _keys(folder):
    return sorted(i.key for i in list_datasets(folder))


class _Holder:
    """Another process holding a dataset (a shared flock on its lock file) until stopped."""

    def __init__(self, dataset):
        code = ("import fcntl, sys; fh = open(sys.argv[1], 'ab'); fcntl.flock(fh, fcntl.LOCK_SH); "
                "print('held', flush=True); sys.stdin.read()")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(dataset.lock_path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def test_sizes_parse_and_print():
    assert parse_size("20G") == 20 << 30 and parse_size("20GiB") == 20 << 30 and parse_size("1.5t") == 3 << 39
    assert parse_size("500M") == 500 << 20 and parse_size("4096") == 4096 and parse_size("0") == 0
    for bad in ("lots", "-1G", "", "20X", "G"):
        with pytest.raises(ValueError):
            parse_size(bad)
    assert format_size(512) == "512 B" and format_size(3 << 20) == "3.0 MiB" and format_size(5 << 40) == "5.0 TiB"


def test_budget_from_the_environment_or_a_sensible_default(tmp_path, monkeypatch):
    monkeypatch.delenv("NOSQLTUNE_DATASET_BUDGET", raising=False)
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    budget = dataset_budget(tmp_path / "datasets", used=0)       # the folder need not exist yet
    assert budget.bytes == min(50 << 30, free // 2) and budget.source.startswith("default")
    # what datasets already take counts as theirs: they do not shrink their own budget
    assert dataset_budget(tmp_path, used=10 << 30).bytes == min(50 << 30, (free + (10 << 30)) // 2)
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", "20G")
    assert dataset_budget(tmp_path) == Budget(20 << 30, "NOSQLTUNE_DATASET_BUDGET=20G")
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", "plenty")
    with pytest.raises(UsageError, match="NOSQLTUNE_DATASET_BUDGET expects a size like 20G"):
        dataset_budget(tmp_path)


def test_datasets_live_in_the_user_cache_not_the_work_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("NOSQLTUNE_DATASETS", raising=False)
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "work"))
    assert ds.dataset_for("abc").root == tmp_path / "cache" / "datasets" / "abc"
    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "elsewhere"))
    assert ds.dataset_for("abc").root == tmp_path / "elsewhere" / "abc"


def test_restore_and_hold_mark_the_dataset_used(tmp_path):
    dataset = _fake(tmp_path, "a", used=1000.0)
    assert dataset.last_used() == 1000.0
    dataset.restore_into(tmp_path / "node" / "data")
    assert time.time() - dataset.last_used() < 60
    assert dataset.held and in_use(dataset)
    dataset.release()
    assert not in_use(dataset)
    assert not Dataset(key="nope", root=tmp_path / "nope").hold()
    assert not (tmp_path / "nope").exists()


def test_least_recently_used_go_first_until_the_total_fits(tmp_path):
    now = time.time()
    for age, key in enumerate(("newest", "middle", "oldest")):
        _fake(tmp_path, key, used=now - 3600 * (age + 1))
    assert [i.key for i in list_datasets(tmp_path)] == ["oldest", "middle", "newest"]
    one = list_datasets(tmp_path)[0].bytes
    # room for one more of the same size within a budget of three: the oldest goes, nothing else
    evicted = make_room(tmp_path, one, budget=3 * one)
    assert [i.key for i in evicted] == ["oldest"] and _keys(tmp_path) == ["middle", "newest"]
    assert not list(tmp_path.glob("*.evict*"))
    # a dataset to keep (the one being built) is skipped, the next one goes
    assert [i.key for i in make_room(tmp_path, 0, keep={"middle"}, budget=one)] == ["newest"]
    assert _keys(tmp_path) == ["middle"]
    # a budget that cannot be met evicts what it can and goes on
    assert make_room(tmp_path, 10 * one, keep={"middle"}, budget=0) == []


def test_a_dataset_held_by_another_process_is_never_evicted(tmp_path):
    old = _fake(tmp_path, "old", used=time.time() - 86400)
    _fake(tmp_path, "new")
    holder = _Holder(old)
    try:
        assert in_use(old) and not evict(old)
        evicted = make_room(tmp_path, 0, budget=0)
        assert [i.key for i in evicted] == ["new"] and _keys(tmp_path) == ["old"]
        done = prune(tmp_path, keep_bytes=0)
        assert done.removed == [] and [i.key for i in done.in_use] == ["old"]
    finally:
        holder.stop()
    assert not in_use(old) and evict(old) and _keys(tmp_path) == []


def test_an_evicted_dataset_cannot_be_taken_up_and_restore_says_so(tmp_path):
    dataset = _fake(tmp_path, "a")
    other = Dataset(key="a", root=tmp_path / "a")
    assert evict(other)
    assert not dataset.hold()
    with pytest.raises(FileNotFoundError, match="dataset a is not in"):
        dataset.restore_into(tmp_path / "node" / "data")


def test_build_evicts_before_and_after_records_sync_and_holds_the_new_dataset(tmp_path, monkeypatch):
    now = time.time()
    _fake(tmp_path, "old", used=now - 7200)
    _fake(tmp_path, "recent", used=now - 60)
    one = list_datasets(tmp_path)[0].bytes
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", str(2 * one))
    seen_before_build = []

    def build(home):
        seen_before_build.extend(_keys(tmp_path))
        (home / "data").mkdir(parents=True)
        (home / "data" / "dump.rdb").write_bytes(b"y" * (64 * KIB))
        (home / "logs").mkdir()
        return {"system": "redis", "records": 64}

    dataset = create_dataset(Dataset(key="fresh", root=tmp_path / "fresh"), build, expected_bytes=one)
    assert seen_before_build == ["recent"]                    # room made for the announced size first
    assert _keys(tmp_path) == ["fresh", "recent"] and dataset.held and in_use(dataset)
    meta = dataset.meta()
    assert meta["sync_s"] >= 0 and meta["bytes"] >= 64 * KIB and meta["records"] == 64
    assert sorted(p.name for p in dataset.root.iterdir()) == ["data", "last_used", "lock", "meta.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "recent"]   # no build lock, no tmp folder left
    # without an announced size, the real one is made room for once known
    _fake(tmp_path, "third", used=now - 30)
    create_dataset(Dataset(key="fourth", root=tmp_path / "fourth"), build)
    assert _keys(tmp_path) == ["fourth", "fresh"]             # 'fresh' is held, the two others went


def test_building_the_same_dataset_twice_at_once_builds_it_once(tmp_path):
    calls, results, errors = [], [], []
    started = threading.Event()

    def build(home):
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.5)
        (home / "data").mkdir(parents=True)
        (home / "data" / "dump.rdb").write_bytes(b"z" * 4096)
        return {"records": 1}

    def worker():
        try:
            dataset = Dataset(key="k", root=tmp_path / "k")
            if not dataset.hold():
                create_dataset(dataset, build)
            results.append(dataset)
        except Exception as exc:   # pragma: no cover - reported below
            errors.append(exc)

    first = threading.Thread(target=worker, name="first")
    first.start()
    started.wait(5)
    second = threading.Thread(target=worker, name="second")   # arrives while the first one builds
    second.start()
    first.join(10)
    second.join(10)
    assert errors == [] and calls == ["first"] and len(results) == 2
    assert all(d.held and (d.data_dir / "dump.rdb").read_bytes() == b"z" * 4096 for d in results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]


def test_sweep_removes_what_dead_builders_left_and_spares_running_builds(tmp_path):
    _fake(tmp_path, "kept")
    (tmp_path / "dead.tmp99999" / "node").mkdir(parents=True)      # a builder killed mid-build
    (tmp_path / "gone.evict1-abc" / "data").mkdir(parents=True)    # an eviction killed mid-removal
    (tmp_path / "stale.lock").touch()
    (tmp_path / "live.tmp1" / "node").mkdir(parents=True)          # a build in progress: its lock is held
    with dataset_cache.building(Dataset(key="live", root=tmp_path / "live")):
        sweep(tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["kept", "live.lock", "live.tmp1"]


def test_prune_keep_all_and_older_than(tmp_path):
    now = time.time()
    for key, days in (("d1", 1), ("d5", 5), ("d10", 10), ("d20", 20)):
        _fake(tmp_path, key, used=now - days * 86400)
    one = list_datasets(tmp_path)[0].bytes
    done = prune(tmp_path, keep_bytes=3 * one, now=now)
    assert [i.key for i in done.removed] == ["d20"] and _keys(tmp_path) == ["d1", "d10", "d5"]
    done = prune(tmp_path, older_than_s=7 * 86400, now=now)               # every dataset not used for a week
    assert [i.key for i in done.removed] == ["d10"] and _keys(tmp_path) == ["d1", "d5"]
    done = prune(tmp_path, keep_bytes=0, older_than_s=2 * 86400, now=now)  # --all --older-than 2d
    assert [i.key for i in done.removed] == ["d5"] and _keys(tmp_path) == ["d1"]
    assert [i.key for i in prune(tmp_path, keep_bytes=0).removed] == ["d1"] and _keys(tmp_path) == []


def test_list_shows_what_shaped_each_dataset(tmp_path):
    meta = {"key": "c", "records": 5000, "data": {"records": 5000, "fieldcount": 10}, "reload_knobs": {"num_tokens": 4},
            "cassandra_version": "5.0.6", "design": {"nodes": 1}, "boot_s": 3.1, "load_s": 9.0,
            "load_throughput_ops_s": 550.0, "created_at": 1.0, "sync_s": 0.2, "bytes": 10}
    _fake(tmp_path, "c", meta=meta)
    (info,) = list_datasets(tmp_path, probe_use=True)
    assert (info.system, info.records, info.in_use) == ("cassandra", 5000, False)
    assert info.shape == {"data": {"records": 5000, "fieldcount": 10}, "reload_knobs": {"num_tokens": 4},
                          "cassandra_version": "5.0.6", "design": {"nodes": 1}}
    (tmp_path / "half.tmp1").mkdir()                           # builds in progress and lock files are not datasets
    (tmp_path / "x.lock").touch()
    assert _keys(tmp_path) == ["c"]


def test_link_across_filesystems_falls_back_to_a_copy(tmp_path, monkeypatch):
    dataset, table = _make(tmp_path / "ds")

    def cross_device(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    target = tmp_path / "node" / "data"
    dataset.restore_into(target, "link")
    restored = target / "ycsb" / "usertable-1234" / "nb-1-big-Data.db"
    assert restored.read_bytes() == b"rows" * 1000
    assert os.stat(restored).st_ino != os.stat(table / "nb-1-big-Data.db").st_ino


_BUILDER = """
import sys, time
from pathlib import Path
from nosqltune.systems.dataset import Dataset
from nosqltune.systems.dataset_cache import create_dataset

folder, log = Path(sys.argv[1]), Path(sys.argv[2])

def build(home):
    with open(log, "a") as fh:
        fh.write("built\\n")
    time.sleep(0.5)
    (home / "data").mkdir(parents=True)
    (home / "data" / "dump.rdb").write_bytes(b"p" * 8192)
    return {"records": 2}

dataset = Dataset(key="k", root=folder / "k")
if not dataset.hold():
    create_dataset(dataset, build)
print(dataset.held, (dataset.data_dir / "dump.rdb").read_bytes() == b"p" * 8192, flush=True)
"""


def test_two_processes_needing_the_same_dataset_build_it_once(tmp_path):
    folder, log = tmp_path / "datasets", tmp_path / "builds.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", _BUILDER, str(folder), str(log)], stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(2)]
    outs = [p.communicate(timeout=30)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0] and outs == [["True", "True"]] * 2
    assert log.read_text() == "built\n"
    assert sorted(p.name for p in folder.iterdir()) == ["k"]


def _imaged(dataset, kib=64, built=None):
    """A volume image beside `dataset` (a plain file standing in for it: the cache reads only the file beside it)
    that says it holds the dataset's whole data, of the build `built` (default: the dataset's own)."""
    images = dataset.images_dir
    images.mkdir(parents=True, exist_ok=True)
    (images / "node-0.img").write_bytes(b"i" * (kib * KIB))
    stamp = dataset.image_stamp(None) if built is None else {**dataset.image_stamp(None), "built": built}
    (images / "node-0.img.holds").write_text(json.dumps(stamp))


def test_a_dataset_its_image_holds_whole_gives_up_its_folder_before_any_dataset_is_evicted(tmp_path):
    now = time.time()
    _fake(tmp_path, "oldest", used=now - 3 * 3600)
    imaged = _fake(tmp_path, "imaged", used=now - 2 * 3600, meta={"system": "cassandra", "created_at": 5.0})
    _fake(tmp_path, "newest", used=now - 3600)
    _imaged(imaged)
    one = list_datasets(tmp_path)[0].bytes                 # the oldest: its data alone
    both = {i.key: i.bytes for i in list_datasets(tmp_path)}["imaged"]
    assert both >= 2 * 64 * KIB and imaged.ready_images() == [imaged.images_dir / "node-0.img"]
    # room for a little more: the imaged dataset's data folder goes, though another was used before it
    assert make_room(tmp_path, 0, budget=one + both + one - 32 * KIB) == []
    assert _keys(tmp_path) == ["imaged", "newest", "oldest"]
    info = {i.key: i for i in list_datasets(tmp_path)}["imaged"]
    assert info.image_only and info.to_dict()["kept_in"] == "image" and info.bytes < both
    assert not imaged.data_dir.exists() and not list(imaged.root.glob("data.*"))
    # still a dataset: held and used by trials on a volume; a trial without one is told to copy it back out
    assert imaged.exists() and imaged.in_image_only and imaged.hold()
    with pytest.raises(FileNotFoundError, match="kept only in its volume image"):
        imaged.restore_into(tmp_path / "node" / "data")
    imaged.release()
    # more room needed than folders can give: whole datasets go, least recently used first (the hold used it)
    assert [i.key for i in make_room(tmp_path, 0, budget=0)] == ["oldest", "newest", "imaged"]


def test_an_image_of_another_build_or_a_held_dataset_keeps_its_folder(tmp_path):
    stale = _fake(tmp_path, "stale", used=time.time() - 7200, meta={"system": "cassandra", "created_at": 5.0})
    _imaged(stale, built=4.0)   # the image was filled from an earlier build of the key
    held = _fake(tmp_path, "held", used=time.time() - 3600, meta={"system": "cassandra", "created_at": 7.0})
    _imaged(held)
    assert stale.ready_images() == [] and not stale.in_image_only
    holder = _Holder(held)
    try:
        # neither folder may go: the stale dataset is evicted whole, the held one kept whole
        assert [i.key for i in make_room(tmp_path, 0, budget=0)] == ["stale"]
        assert held.data_dir.is_dir()
    finally:
        holder.stop()
    # an image without its holds file says nothing: giving up the folder would make room enough, but the dataset
    # is evicted whole
    (held.images_dir / "node-0.img.holds").unlink()
    total = list_datasets(tmp_path)[0].bytes
    assert [i.key for i in make_room(tmp_path, 0, budget=total - 32 * KIB)] == ["held"]


def test_sweep_removes_a_folder_half_given_up_or_half_copied_back(tmp_path):
    dataset = _fake(tmp_path, "a")
    for stray in ("data.gone123-abcdef", "data.tmp456"):
        (dataset.root / stray / "ks").mkdir(parents=True)
    sweep(tmp_path)
    assert sorted(p.name for p in dataset.root.iterdir()) == ["data", "last_used", "meta.json"]


def test_a_cassandra_build_asks_room_for_its_peak_before_it_starts(tmp_path, monkeypatch):
    """The loaded SSTables and their compactions' output sit side by side while a build settles: the cache makes
    room for both before the build, not only once the dataset is published (a budget near the disk's room was
    exceeded by a whole dataset otherwise)."""
    from nosqltune.knobs import load_space
    from nosqltune.systems.cassandra import trial
    from nosqltune.systems.cassandra.config import place
    from nosqltune.systems.settings import TrialSettings
    from nosqltune.workloads.spec import make_workload

    asked = {}
    monkeypatch.setattr(trial, "create_dataset", lambda dataset, build, expected_bytes=None:
                        asked.setdefault("bytes", expected_bytes))
    workload = make_workload("ycsb-b", records=1_000_000)
    trial.build_dataset(Dataset(key="k", root=tmp_path / "k"), workload, place(load_space("cassandra"), {}),
                        TrialSettings())
    once = trial.dataset_bytes(workload)
    assert once > 10**9 and asked["bytes"] >= 2 * once
