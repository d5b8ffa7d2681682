"""One cold trial of Cassandra: restore data -> boot -> apply table/keyspace knobs -> warm up + measure -> stop."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from ...errors import TrialError, UsageError
from ...knobs import KnobSpace, load_space
from ...runtime import process
from ...runtime.environment import read_ahead_kb
from ...runtime.paths import claim_trial_dir, work_dir
from ..base import (Progress, TrialResult, TrialSettings, end_trial, failures_recorded, judge_errors, no_space,
                    quiet, record_run)
from ...workloads.snapshot import cql_name
from ...workloads.spec import Workload
from ...workloads.ycsb import client_timeout, run_client
from ..dataset import Dataset, dataset_for, dataset_key
from ..dataset_cache import create_dataset
from . import cql, internals
from .config import PlacedConfig, place
from .node import CassandraNode
from .restage import built_options, import_staged, pending, restages, stage
from ..volume import NodeVolume, data_from_image

KEYSPACE = "ycsb"
TABLE = "usertable"
NO_SPACE = "No space left on device"   # the JVM's words for ENOSPC, in a node's log
LOW_SPACE_BYTES = 16 << 20   # a node that failed to boot with less free beside it failed on the full disk

def default_knobs(settings: TrialSettings) -> str | None:
    """The knob set `tune` searches unless --knobs says otherwise: the 5.0 set of the trial's scenario
    (scenarios.yaml's knob_set: v5, or cloud where a volume's cap binds), v5 for a scenario that names none."""
    from ...scenarios import scenario

    return scenario(settings.scenario).knob_set or "v5"


def knob_space(settings: TrialSettings) -> KnobSpace:
    """Cassandra's knobs; the heap knob's default is the trial settings' heap (--heap or the scenario's), the
    read-ahead's the volume's (--volume)."""
    defaults: dict[str, Any] = {"heap_size": settings.cassandra.heap_mb}
    spec = settings.cassandra.volume_spec()
    if spec is not None:
        defaults["read_ahead_kb"] = spec.read_ahead_kb
    space = load_space("cassandra").with_knob_defaults(defaults)
    return space if restages(settings) else space.without_restaging()   # these trials load data with every knob


def fingerprint(settings: TrialSettings) -> dict[str, Any]:
    from ...runtime.environment import fingerprint as machine

    return machine("cassandra", settings.cassandra.cassandra_version)


def preflight(workload: Workload, settings: TrialSettings) -> None:
    """A cluster must fit in memory (a single node that does not fails its trial with the reason), and the data
    on the disk; --server-cpus is a single node's."""
    if workload.profile and (settings.cassandra.nodes > 1 or load_method(settings) != "bulk"):
        raise UsageError(f"{workload.name}: a profile's data is written as SSTables for one node; clusters load over "
                         "CQL, which profiles do not have yet: run it on one node (--nodes 1)")
    if workload.snapshot and (settings.cassandra.nodes > 1 or load_method(settings) != "bulk"):
        raise UsageError(f"{workload.name}: a snapshot's SSTables are imported into one node: run it on one node "
                         "(--nodes 1)")
    if settings.cassandra.nodes > 1:
        from .cluster import check_fits

        if settings.server_cpus:
            raise UsageError(f"--server-cpus pins a single node; a cluster of {settings.cassandra.nodes} nodes does "
                             "not honour it yet: leave it out")
        check_fits(settings.cassandra.nodes, settings.cassandra.heap_mb)
    check_disk(workload, settings)


DISK_SLACK = 2.2   # a dataset in the cache and the node's copy of it (or its volume image), with room to compact
# a build at its peak: the loaded SSTables and, while they compact, their compactions' output beside them. The cache
# makes room for this much before a build (10.4M records, 11.4 GB, built with a budget set near the disk's room
# and no room asked for: the disk's free space fell from 13.5 to 2.1 GB during its compactions)
BUILD_PEAK = 2.0


def dataset_bytes(workload: Workload, replication_factor: int = 1) -> int:
    """About what a workload's data takes on disk over all its nodes: its records' fields and key, once per
    replica (random strings compress little: 4M records of 1 KB took 4.4 GB, bench/results/growth.md)."""
    if workload.snapshot:   # its SSTables, as they are
        return int(workload.snapshot["bytes"] * replication_factor)
    if workload.profile:
        from ...workloads.profile import row_bytes

        return int(workload.records * row_bytes(workload.profile) * replication_factor)
    return int(workload.records * (workload.fieldcount * workload.fieldlength + 100) * replication_factor)


def check_disk(workload: Workload, settings: TrialSettings, room: int | None = None) -> None:
    """Refuse (one line), before any build, data the disk cannot hold beside the node's copy of it: `room` is the
    space free for the dataset cache plus what its datasets take (the cache evicts them, least recently used
    first, to make room for a new one)."""
    from ...runtime.paths import datasets_dir
    from ..dataset_cache import free_bytes, list_datasets

    need = int(dataset_bytes(workload, min(settings.cassandra.replication_factor, settings.cassandra.nodes))
               * DISK_SLACK)
    if room is None:
        folder = datasets_dir()
        room = free_bytes(folder) + (sum(info.bytes for info in list_datasets(folder)) if folder.exists() else 0)
    if need > room:
        raise UsageError(f"{workload.name}: {workload.records:,} records need about {need / 1e9:.1f} GB of disk (a "
                         f"dataset and the node's copy of it); {room / 1e9:.1f} GB are free or held by cached "
                         "datasets: give fewer records")


def config_fragment(settings: TrialSettings, overrides: dict[str, Any]) -> list[str]:
    """The knob values as a cassandra.yaml fragment, with the CQL statements and JVM options of the knobs that
    live elsewhere in comments."""
    import yaml

    from .node import set_dotted

    from ..base import with_design

    designed, overrides = with_design(knob_space(settings), settings, overrides)
    design = designed.cassandra
    placed = place(knob_space(settings), overrides)
    nested: dict[str, Any] = {}
    for key, value in placed.yaml.items():
        set_dotted(nested, key, value)
    lines = [yaml.safe_dump(nested, sort_keys=False).rstrip()] if nested else []
    lines += [f"# CQL: {statement};" for statement in
              placed.keyspace_statements(KEYSPACE) + placed.table_statements(KEYSPACE, TABLE)]
    lines += [f"# JVM option: {flag}" for flag in placed.jvm]
    if design.design() != {"nodes": 1, "replication_factor": 1}:
        lines.append(f"# physical design: {design.nodes} node(s), keyspace {KEYSPACE} with replication_factor "
                     f"{design.replication_factor}")
    return lines


SETTLE_TIMEOUT_S = 600.0   # how long a dataset build waits for the loaded data's compactions
BUILD_YAML = {"compaction_throughput": "0MiB/s"}   # the node that builds a dataset: compaction unthrottled


def cassandra_dataset_key(version: str, data_shape: dict[str, Any], reload_knobs: dict[str, Any],
                          heap_mb: int, method: str = "cql") -> str:
    parts = {"cassandra": version, "data": data_shape, "knobs": reload_knobs, "heap_mb": heap_mb}
    if method != "cql":   # datasets loaded over CQL keep the keys they had before bulk loading existed
        parts["load"] = method
    return dataset_key(parts)


def load_method(settings: TrialSettings) -> str:
    """How a dataset of these settings is loaded: bulk (SSTables written and imported) on a single node, else CQL
    (a cluster's nodes would each have to import the SSTables of the token ranges they own)."""
    return "bulk" if settings.cassandra.load_method == "bulk" and settings.cassandra.nodes == 1 else "cql"


def _create_schema(address: str, port: int, workload: Workload, replication_factor: int = 1,
                   table_statements: list[str] = (), progress: Progress = quiet) -> None:
    """The workload's keyspace and table (YCSB's, or a profile's with its replication rewritten for the rig), with
    the table options that shape the data on disk (`table_statements`)."""
    if workload.snapshot:   # the snapshot's own table (its schema.cql), in a keyspace of the rig's replicas
        statements = [f"CREATE KEYSPACE IF NOT EXISTS {cql_name(workload.keyspace)} WITH replication = "
                      f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}",
                      workload.snapshot["schema"]]
    elif workload.profile:
        from .schema import create_keyspace, create_table

        keyspace, rewritten = create_keyspace(workload.profile, replication_factor)
        if rewritten:
            progress(f"keyspace {workload.keyspace}: {rewritten}")
        statements = [keyspace, create_table(workload.profile, {}).replace("CREATE TABLE", "CREATE TABLE IF NOT "
                                                                           "EXISTS", 1)]
    else:
        fields = ", ".join(f"field{i} varchar" for i in range(workload.fieldcount))
        statements = [f"CREATE KEYSPACE IF NOT EXISTS {KEYSPACE} WITH replication = "
                      f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}",
                      f"CREATE TABLE IF NOT EXISTS {KEYSPACE}.{TABLE} (y_id varchar PRIMARY KEY, {fields})"]
    with cql.session(address, port) as sess:
        for statement in statements:
            sess.execute(statement)
        for statement in table_statements:
            try:
                sess.execute(statement)
            except Exception as exc:
                raise TrialError("refused", f"Cassandra rejected {statement!r}: {exc}") from None


def build_dataset(dataset: Dataset, workload: Workload, placed: PlacedConfig, settings: TrialSettings,
                  progress: Progress = quiet) -> Dataset:
    """Boot a fresh node (with the load-affecting knobs), create the schema, load, drain: the dataset. With
    `settings.cassandra.nodes` > 1 a local cluster does it, and the dataset holds one folder per node (node1, ...)."""

    method = load_method(settings)

    def build(home: Path) -> dict[str, Any]:
        # only the knobs that shape the loaded data (e.g. num_tokens) are set while loading, and compaction runs
        # unthrottled: the build waits for it (leveled compaction of 2M records took 338 s at the default
        # 64 MiB/s), and its speed does not shape the data
        servers = _Servers(home, {**placed.reload_yaml, **BUILD_YAML}, [], settings)
        with servers:
            progress(f"loading {workload.records} records (dataset {dataset.key})")
            if method == "bulk" and workload.snapshot:   # the snapshot's SSTables, copied to be imported
                from .bulk import copy_snapshot, import_written

                written = copy_snapshot(workload.snapshot, home / "bulk")
                progress(f"copied the snapshot's {written['sstables']} SSTables ({written['bytes'] / 1e6:,.0f} MB)")
            elif method == "bulk" and workload.profile:   # the profile's rows, written for its own table
                from .bulk import BulkSettings, import_written, write_profile_sstables
                from .schema import create_table

                written = write_profile_sstables(workload, home / "bulk",
                                                 create_table(workload.profile, placed.reload_table),
                                                 version=settings.cassandra.cassandra_version,
                                                 yaml_overrides=placed.reload_yaml,
                                                 settings=BulkSettings(cpus=settings.client_cpus))
                progress(f"wrote {written['rows']:,} rows in {written['partitions']:,} partitions "
                         f"({written['bytes'] / 1e6:,.0f} MB of SSTables)")
            elif method == "bulk":   # the records written as SSTables by Cassandra's own writer, before the node boots
                from .bulk import BulkSettings, import_written, table_statement, write_sstables

                written = write_sstables(workload, home / "bulk", table_statement(KEYSPACE, TABLE, workload.fieldcount,
                                                                                  placed.reload_table_options()),
                                         version=settings.cassandra.cassandra_version,
                                         yaml_overrides=placed.reload_yaml,
                                         settings=BulkSettings(cpus=settings.client_cpus))
            boot = servers.start(settings.boot_timeout)
            first = servers.first
            _create_schema(first.address, first.ports.native, workload,
                           settings.cassandra.loaded_design()["replication_factor"],
                           placed.reload_table_statements(workload.keyspace, workload.table), progress)
            if method == "bulk":   # ... and imported into it (nodetool import)
                bulk = import_written(written, first.ports.jmx, keyspace=workload.keyspace, table=workload.table)
                load = {"errors": 0, "wall_seconds": bulk["load_s"], "throughput_ops_s": bulk["throughput_ops_s"],
                        "bulk": bulk}
            else:
                loader = Workload.from_dict({**workload.to_dict(), "threads": settings.load_threads})
                load = run_client("load", loader, host=servers.hosts, port=first.ports.native,
                                  trial_dir=home / "load", timeout=client_timeout(workload, "load"),
                                  cpus=settings.client_cpus, extra=_consistency(settings))
            # the data as its compaction strategy leaves it (bulk SSTables under leveled or unified compaction are
            # merged now, not during the first trial); what is still pending after SETTLE_TIMEOUT_S is stored
            progress("flushing the loaded data and waiting for its compactions")
            for node in servers.members:   # the memtables first: their SSTables start compactions too
                internals.flush(node.ports.jmx, workload.keyspace)
            settled = [internals.wait_compactions(node.ports.jmx, SETTLE_TIMEOUT_S, keyspace=workload.keyspace,
                                                  table=workload.table) for node in servers.members]
            with cql.session(first.address, first.ports.native) as sess:   # what a restaged knob is compared with
                table_options = built_options(sess, load_space("cassandra"), workload.keyspace, workload.table)
            started = time.monotonic()
            servers.stop(drain=True)
            drain_s = time.monotonic() - started
        if load["errors"]:
            raise TrialError("workload", f"loading the dataset had {load['errors']} failed inserts")
        if settings.cassandra.nodes > 1:   # home/data/node1, home/data/node2, ...: each node's data folder
            (home / "data").mkdir()
            for i in range(1, settings.cassandra.nodes + 1):
                (home / f"node{i}" / "data").rename(home / "data" / f"node{i}")
                shutil.rmtree(home / f"node{i}")
        for sub in ("commitlog", "saved_caches", "hints", "cdc_raw", "conf", "logs", "load", "tmp"):
            shutil.rmtree(home / sub, ignore_errors=True)
        return {"key": dataset.key, "records": workload.records, "data": workload.dataset_properties(),
                "reload_knobs": placed.reload, "cassandra_version": settings.cassandra.cassandra_version,
                "design": settings.cassandra.loaded_design(),
                "boot_s": boot, "load_s": load["wall_seconds"], "load_throughput_ops_s": load["throughput_ops_s"],
                "load_method": method, **({"bulk": load["bulk"]} if "bulk" in load else {}),
                **({"profile": workload.profile["name"]} if workload.profile else {}),
                **({"snapshot": workload.snapshot["dir"]} if workload.snapshot else {}),
                "drain_s": drain_s, "settle_s": max(x["settle_s"] for x in settled), "table_options": table_options,
                "pending_compactions_stored": sum(x["pending"] for x in settled), "created_at": time.time()}

    # least recently used datasets evicted first to fit the budget with the build's peak beside them
    peak = dataset_bytes(workload, settings.cassandra.loaded_design()["replication_factor"]) * BUILD_PEAK
    return create_dataset(dataset, build, expected_bytes=int(peak))


class _Servers:
    """One node (the trial's home is the node's home, as always) or a local cluster (home/node1, ...)."""

    def __init__(self, home: Path, yaml_overrides: dict[str, Any], jvm_flags: list[str],
                 settings: TrialSettings, per_node: dict[int, dict[str, Any]] | None = None,
                 memory_limit_mb: int | None = None, volumes: dict[int, NodeVolume] | None = None) -> None:
        self.settings = settings
        self.volumes = volumes if volumes is not None else {}   # filled by the trial once mounted
        per_node = per_node or {}
        cassandra = settings.cassandra
        if cassandra.nodes == 1:
            self.members = [CassandraNode(home=home, version=cassandra.cassandra_version, heap_mb=cassandra.heap_mb,
                                          yaml_overrides={**yaml_overrides, **per_node.get(1, {})},
                                          jvm_flags=jvm_flags, cpus=settings.server_cpus,
                                          memory_limit_mb=memory_limit_mb, volume=self.volumes.get(1))]
            self.cluster = None
        else:
            from .cluster import LocalCluster

            self.cluster = LocalCluster(home=home, nodes=cassandra.nodes, heap_mb=cassandra.heap_mb,
                                        version=cassandra.cassandra_version, yaml_overrides=yaml_overrides,
                                        per_node=per_node, jvm_flags=jvm_flags, memory_limit_mb=memory_limit_mb,
                                        volumes=self.volumes)
            self.members = self.cluster.members   # filled by start()

    @property
    def first(self) -> CassandraNode:
        return self.members[0]

    @property
    def hosts(self) -> str:
        """The client's contact points: every node."""
        return ",".join(n.address for n in self.members)

    def node_homes(self) -> list[tuple[Path, str | None]]:
        """(home, the dataset's part for it) per node."""
        if self.cluster is None:
            return [(self.first.home, None)]
        return [(self.cluster.home / f"node{i}", f"node{i}") for i in range(1, self.settings.cassandra.nodes + 1)]

    def data_dirs(self) -> list[tuple[Path, str | None]]:
        """(data folder, the dataset's part for it) per node: in its volume, or in its home."""
        return [((self.volumes[i].storage if i in self.volumes else home) / "data", part)
                for i, (home, part) in enumerate(self.node_homes(), 1)]

    def disks(self) -> list[str] | None:
        """Each node's volume for the client's I/O counters (loadgen's cost.disks), None without volumes."""
        return [n.disk_spec() or "" for n in self.members] if self.volumes else None

    def cost_sources(self) -> list[str]:
        """Each node's CPU and GC, read by the client over JMX (user/system split from /proc: they are local)."""
        return [f"jmx:127.0.0.1:{n.ports.jmx}:{n.proc.pid}" for n in self.members]

    def start(self, timeout: float, restored: bool = False) -> float:
        """Boot the node (or the cluster); a boot that failed on a full disk is the disk's fault, not the
        configuration's: the study stops with the fix (base.no_space) instead of failing every trial after it."""
        try:
            return self.first.start(timeout) if self.cluster is None else self.cluster.start(timeout, restored)
        except TrialError as exc:
            home = self.node_homes()[0][0]
            said = NO_SPACE in (exc.log_excerpt or "") or NO_SPACE in self.log_excerpt()
            try:   # a full disk may leave no log to say so
                low = shutil.disk_usage(home).free < LOW_SPACE_BYTES
            except OSError:
                low = False
            if said or low:
                raise no_space(str(home.parent)) from None
            raise

    def dead(self) -> CassandraNode | None:
        return next((n for n in self.members if not n.is_running()), None)

    def log_excerpt(self) -> str:
        return "\n".join(n.log_excerpt() for n in self.members)

    def stop(self, drain: bool) -> None:
        try:
            for node in reversed(self.members):
                node.stop(drain=drain, timeout=30 if drain else 0)
        finally:
            for volume in self.volumes.values():   # after the JVMs: nothing holds their files any more
                volume.close(keep=self.settings.keep_node)

    def __enter__(self) -> "_Servers":
        return self

    def __exit__(self, *exc) -> None:
        self.stop(drain=False)


def per_node_yaml(settings: TrialSettings) -> dict[int, dict[str, Any]]:
    """The per-node knobs of the settings (`per_node` of --config) as cassandra.yaml overrides per node number."""
    from ...knobs import load_space

    space = load_space("cassandra")
    return {int(number): place(space, knobs).yaml for number, knobs in settings.cassandra.per_node.items()
            if int(number) <= settings.cassandra.nodes}


def _design_statements(settings: TrialSettings, workload: Workload | None = None) -> list[str]:
    """A replication factor above the node count is set on the restored data (loaded with one replica per
    node: nothing to stream)."""
    if settings.cassandra.replication_factor == settings.cassandra.loaded_design()["replication_factor"]:
        return []
    return [f"ALTER KEYSPACE {workload.keyspace if workload else KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', "
            f"'replication_factor': {settings.cassandra.replication_factor}}}"]


def _consistency(settings: TrialSettings) -> dict[str, str]:
    return {"cassandra.readconsistencylevel": settings.cassandra.read_consistency,
            "cassandra.writeconsistencylevel": settings.cassandra.write_consistency}


def ensure_dataset(space: KnobSpace, overrides: dict[str, Any], workload: Workload, settings: TrialSettings,
                   progress: Progress = quiet) -> tuple[Dataset, float]:
    """The dataset this trial restores, built first if missing; returns it and the seconds spent building."""
    return _ensure_dataset(place(space, overrides, restages(settings)), workload, settings, progress)


def _ensure_dataset(placed: PlacedConfig, workload: Workload, settings: TrialSettings,
                    progress: Progress) -> tuple[Dataset, float]:
    key = cassandra_dataset_key(settings.cassandra.cassandra_version, workload.dataset_properties(), placed.reload,
                                settings.cassandra.heap_mb, load_method(settings))
    if settings.cassandra.loaded_design() != {"nodes": 1, "replication_factor": 1}:
        key = dataset_key({"single": key, "design": settings.cassandra.loaded_design()})
    dataset = dataset_for(key)
    if dataset.hold():   # held: no other process evicts it before this trial has restored it
        return dataset, 0.0
    started = time.monotonic()
    build_dataset(dataset, workload, placed, settings, progress)
    return dataset, time.monotonic() - started


def data_clock(workload: Workload, dataset: Dataset) -> list[str]:
    """The JVM flags that set a node's clock to the time its dataset was built, for a profile whose rows age (a
    TTL): the rows were written as if at times within the TTL before the build, and a dataset kept in the cache for
    days must not lose them to the calendar. [] for data without a TTL. The build's end is the time: the schema
    was made before it, so the trial's ALTER TABLE statements are newer than its CREATE TABLE."""
    from ...workloads.profile import data_time

    if not workload.profile or not data_time(workload.profile)[0]:
        return []
    built = dataset.meta().get("created_at")
    if not built:
        return []
    offset = int(built * 1000 - time.time() * 1000)
    return ["-Dcassandra.clock=nosqltune.loadgen.OffsetClock", f"-Dnosqltune.clock.offset_ms={offset}"]


def run_trial(space: KnobSpace, overrides: dict[str, Any], workload: Workload, settings: TrialSettings,
              progress: Progress = quiet) -> TrialResult:
    """Run one cold trial; never raises for a trial failure (the result says FAIL and why)."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    home = work_dir() / "nodes" / uuid.uuid4().hex[:12]
    servers: _Servers | None = None
    result = TrialResult(state="FAIL")
    try:
        with failures_recorded(result, lambda: servers.log_excerpt() if servers else ""):
            claim_trial_dir(home)   # marked as ours: removed by a later trial if we are killed
            preflight(workload, settings)   # a design searched by tune may not fit: a refused trial
            placed = place(space, overrides, restages(settings))
            if settings.restore_mode == "reload":
                dataset = dataset_for("reload-" + home.name)
                t0 = time.monotonic()
                build_dataset(dataset, workload, placed, settings, progress)
                timings["load_s"] = time.monotonic() - t0
            else:
                dataset, built = _ensure_dataset(placed, workload, settings, progress)
                if built:
                    timings["dataset_build_s"] = built
            volumes: dict[int, NodeVolume] = {}
            clock = data_clock(workload, dataset)
            servers = _Servers(home, placed.yaml, settings.jvm_flags() + placed.jvm + clock, settings,
                               per_node=per_node_yaml(settings), memory_limit_mb=settings.cassandra.memory_limit_mb(),
                               volumes=volumes)
            if clock:   # the node runs at the time its data was written (OffsetClock, in loadgen's jar)
                from ...workloads.loadgen import loadgen_classpath

                servers.first.extra_classpath = [loadgen_classpath()[0]]
                result.internals["data_clock_offset_s"] = round(int(clock[-1].split("=")[1]) / 1000)
            mode = "copy" if settings.restore_mode == "copy" else "link"
            spec = settings.cassandra.volume_spec()
            if spec is not None:
                progress("mounting each node's volume")
                timings["restore_s"] = 0.0
                for i, (node_home, part) in enumerate(servers.node_homes(), 1):   # the dataset is held already
                    volumes[i] = NodeVolume.open(spec, dataset, part, node_home / "volume",
                                                 placed.volume.get("read_ahead_kb"))
                    if servers.cluster is None:   # a cluster's nodes take theirs from `volumes` as they start
                        servers.first.volume = volumes[i]
                    timings["volume_s"] = timings.get("volume_s", 0.0) + volumes[i].prepare_s
                    timings["restore_s"] += volumes[i].restore(mode)
                result.internals["volume"] = {f"node{i}": v.describe() for i, v in volumes.items()}
            elif placed.volume:
                raise TrialError("refused", f"{', '.join(placed.volume)} sets the node's own volume, and this trial "
                                 "has none: give --volume, --disk-iops or --disk-mbps")
            progress("restoring data")
            # disk-bound: the data starts on disk
            cold = settings.cassandra.memory_limit_mb() is not None and spec is None
            if spec is None:   # a volume is mounted afresh for the trial: nothing of it is in memory yet
                if not dataset.data_dir.is_dir():   # given up for room, kept in a volume image: copied back out
                    progress(f"copying dataset {dataset.key} back out of its volume image")
                    timings["dataset_copy_back_s"] = data_from_image(dataset)
                timings["restore_s"] = sum(dataset.restore_into(data_dir, mode, part=part, warm=not cold)
                                           for data_dir, part in servers.data_dirs())
            staged, restaged = None, pending(placed, space, dataset.meta().get("table_options") or {})
            if restaged:   # its SSTables wait beside the data until the table has the trial's options
                t0 = time.monotonic()
                staged = stage(servers.data_dirs()[0][0], sorted(set(restaged.values())), workload.keyspace,
                               workload.table)
                timings["restage_s"] = time.monotonic() - t0
            ahead = read_ahead_kb(servers.data_dirs()[0][0])
            if ahead is not None:   # what a page fault of mmap reads around the page it needs
                result.internals["read_ahead_kb"] = ahead
            if cold:
                from ...runtime.page_cache import evict_page_cache

                t0 = time.monotonic()
                evicted = evict_page_cache([data_dir for data_dir, _ in servers.data_dirs()])
                timings["evict_s"] = time.monotonic() - t0
                result.internals["page_cache_evicted_bytes"] = evicted
            nodes = settings.cassandra.nodes
            progress("booting Cassandra" + (f" ({nodes} nodes)" if nodes > 1 else ""))
            timings["boot_s"] = servers.start(settings.boot_timeout, restored=True)
            node = servers.first
            for i, member in enumerate(servers.members, 1):   # the caps as the kernel holds them for each node
                if volumes and member.io_caps() is not None:
                    result.internals["volume"][f"node{i}"]["caps_in_kernel"] = member.io_caps()
            t0 = time.monotonic()
            statements = (_design_statements(settings, workload) + placed.keyspace_statements(workload.keyspace)
                          + placed.table_statements(workload.keyspace, workload.table))
            if statements:
                progress("applying table/keyspace knobs")
            with cql.session(node.address, node.ports.native) as sess:
                for statement in statements:
                    try:
                        sess.execute(statement)
                    except Exception as exc:
                        raise TrialError("refused", f"Cassandra rejected {statement!r}: {exc}") from None
                applied = _read_back(sess, placed, workload)
            if staged is not None:
                progress(f"importing the restored SSTables with {', '.join(restaged)} rebuilt")
                staged = import_staged(staged, node.ports.jmx, workload.keyspace, workload.table,
                                       [d for d, _ in servers.data_dirs()] if cold or spec is not None else None)
                timings["restage_s"] += staged["seconds"]
                result.internals["restaged"] = {"knobs": sorted(restaged), **staged}
            if placed.jvm:   # the JVM options the node runs with (its command line), and the collector in use
                applied["jvm_options"] = _jvm_read_back(node)
            per_node = per_node_yaml(settings)
            if per_node:   # what every node reports for the knobs set per node (and for all)
                wanted = set(placed.yaml).union(*per_node.values())
                applied["per_node_settings"] = {str(i): _settings_of(member, wanted)
                                                for i, member in enumerate(servers.members, 1)}
            applied["design"] = settings.cassandra.design()
            timings["apply_s"] = time.monotonic() - t0
            if settings.cassandra.warm_page_cache:
                progress("reading each node's data into its page cache, as a node long in service holds it")
                t0 = time.monotonic()
                warmed = {f"node{i}": member.warm_page_cache(data_dir)
                          for i, (member, (data_dir, _)) in enumerate(zip(servers.members, servers.data_dirs()), 1)}
                timings["warm_cache_s"] = time.monotonic() - t0
                result.internals["page_cache_warmed_bytes"] = warmed
            before = internals.node_stats(node.ports.jmx, workload.keyspace, workload.table)
            progress(f"running {workload.name}: warm-up then {workload.operations} operations, "
                     f"{workload.threads} threads")
            metrics = run_client("run", workload, host=servers.hosts, port=node.ports.native,
                                 trial_dir=home / "run", timeout=client_timeout(workload, "run"),
                                 cpus=settings.client_cpus, jvm_flags=settings.jvm_flags(), jmx_port=node.ports.jmx,
                                 cost=servers.cost_sources(), disks=servers.disks(),
                                 extra={**_consistency(settings),
                                        **({"cassandra.servertimestamps": "true"} if clock else {})})
            dead = servers.dead()
            if dead is not None:
                how = dead.crash_report() or process.death_cause(dead.proc, dead.oom_kills()) or dead.failure_cause()
                raise TrialError("crashed", f"Cassandra ({dead.address}) died during the run: {how}",
                                 dead.log_excerpt())
            record_run(result, timings, metrics)
            after = internals.stats_after_run(node.ports.jmx, keyspace=workload.keyspace, table=workload.table)
            memory = {f"node{i}": m for i, m in enumerate((n.memory() for n in servers.members), 1) if m}
            cached = {f"node{i}": member.page_cache_by_component(data_dir / workload.keyspace)   # what reads found in memory
                      for i, (member, (data_dir, _)) in enumerate(zip(servers.members, servers.data_dirs()), 1)}
            if any(cached.values()):
                result.internals["page_cache_by_component"] = cached
            result.internals = {**result.internals, **after, **applied,
                                **({"memory_cgroup": memory} if memory else {}),
                                "gc_time_ms_run": _delta(before, after, "gc_total_time_ms"),
                                "gc_count_run": _delta(before, after, "gc_total_count"),
                                "compactions_completed_run": _delta(before, after, "completed_compactions")}
            judge_errors(result, metrics)
    finally:
        # the trial's data is thrown away: no drain, no shutdown hook, SIGKILL
        end_trial(result, timings, started, lambda: servers.stop(drain=False) if servers else None, home, settings)
    return result


def _read_back(sess, placed: PlacedConfig, workload: Workload) -> dict[str, Any]:
    """What the node itself reports for the overridden settings and the table/keyspace options: evidence
    that a configuration was applied, not just written."""
    table = sess.execute("SELECT compaction, compression, caching, memtable, bloom_filter_fp_chance "
                         "FROM system_schema.tables "
                         "WHERE keyspace_name = %s AND table_name = %s", (workload.keyspace, workload.table)).one()
    keyspace = sess.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s",
                            (workload.keyspace,)).one()
    wanted = set(placed.yaml)
    settings = {row.name: row.value for row in sess.execute("SELECT name, value FROM system_views.settings")
                if row.name in wanted} if wanted else {}
    return {"node_settings": settings,
            "table_options": {**{k: dict(getattr(table, k) or {}) for k in ("compaction", "compression", "caching")},
                              "memtable": table.memtable, "bloom_filter_fp_chance": table.bloom_filter_fp_chance},
            "keyspace_replication": dict(keyspace.replication) if keyspace else {}}


def _jvm_read_back(node: CassandraNode) -> list[str]:
    """The -XX options and the heap sizes (-Xms, -Xmx: the last of each counts) of the node's running JVM, read
    from its command line (the node is a local process)."""
    try:
        args = Path(f"/proc/{node.proc.pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []
    return [a for a in args if a.startswith(("-XX:", "-Xms", "-Xmx"))]


def _settings_of(node: CassandraNode, wanted: set[str]) -> dict[str, str]:
    """The node's own view of these cassandra.yaml settings (system_views.settings)."""
    with cql.session(node.address, node.ports.native) as sess:
        return {row.name: row.value for row in sess.execute("SELECT name, value FROM system_views.settings")
                if row.name in wanted}


def _delta(before: dict, after: dict, key: str) -> float | None:
    if before.get(key) is None or after.get(key) is None:
        return None
    return after[key] - before[key]
