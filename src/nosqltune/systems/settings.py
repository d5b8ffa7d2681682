"""How trials run (the harness, not the datastore's knobs): the part every trial has and a part per datastore,
stored with every trial and study, and read back through `TrialSettings.from_dict` alone.

The common part is what the harness does around any datastore: the YCSB client (a JVM for every datastore: its
CPUs, its JIT, its load threads), the scenario, the datastore's CPUs, how a trial gets its data and how long
a boot may take, whether the trial's folder is kept. Cassandra's part is its release, its JVM heap, the physical
design (nodes, replication factor, consistency, per-node knobs), how its data is loaded, its memory cap and its
volume. Redis has no part of its own yet; the external target's part is its target file.

Stored form: the common fields, and the datastore's under "datastore":
    {"system": "redis", "scenario": "in-memory", ..., "jit": "c1", "datastore": {}}
Before the split every study stored one flat dict with Cassandra's fields whatever the datastore (`FLAT_FORM`
lists them with their defaults); `from_dict` reads it too. A Redis or external study's Cassandra fields that
hold those defaults are dropped; one that does not (a --heap given to a Redis run before it was refused) is
kept in `unused`, as stored, so that what is computed from the flat form (`flat()`: the rate cache's key) stays
what it was."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Mapping, Union

from ..errors import UsageError

if TYPE_CHECKING:
    from ..volumes import Volume

CASSANDRA_VERSION = "5.0.6"       # the Cassandra release trials run unless told (from Maven)


@dataclass
class CassandraSettings:
    """What only Cassandra's trials read."""

    cassandra_version: str = CASSANDRA_VERSION
    heap_mb: int = 2048
    # physical design: a local cluster of `nodes` on 127.0.0.1.. (see systems/cassandra/cluster.py)
    nodes: int = 1
    replication_factor: int = 1         # of the YCSB keyspace, set when the data is loaded
    read_consistency: str = "ONE"
    write_consistency: str = "ONE"
    # per-node cassandra.yaml knobs on top of the configuration every node gets: {"2": {knob: value}}
    per_node: dict[str, dict[str, Any]] = field(default_factory=dict)
    # how a dataset is loaded: "bulk" writes the records as SSTables with Cassandra's own writer and imports them
    # into the node (systems/cassandra/bulk.py; a cluster loads over CQL), "cql" inserts them through the node, as
    # YCSB's load phase does
    load_method: str = "bulk"
    # a memory cgroup per node (disk-bound): capped at heap + offheap_mb + page_cache_mb, its page cache and the
    # restored data's emptied before every trial; None: no cap, the restored data read into the page cache
    page_cache_mb: int | None = None
    offheap_mb: int | None = None
    # with page_cache_mb: after boot each node's data files are read once from inside its memory group, so its page
    # cache starts full (index files kept), as a node long in service; False: the node starts with none of it
    warm_page_cache: bool = False
    # each node's data on a volume of its own with these caps and read-ahead (volumes.Volume as a dict: --volume,
    # --disk-iops, --disk-mbps; systems/volume.py); None: the node's folders on the machine's disk
    volume: dict[str, Any] | None = None

    def memory_limit_mb(self) -> int | None:
        """The memory cgroup limit of one node, or None when the node runs uncapped."""
        if self.page_cache_mb is None:
            return None
        return self.heap_mb + (self.offheap_mb or 0) + self.page_cache_mb

    def volume_spec(self) -> "Volume | None":
        """The volume each node runs on, or None."""
        from ..volumes import Volume

        return Volume.from_dict(self.volume)

    def largest_heap_mb(self) -> int | None:
        """Under a memory cap, the largest heap a configuration may ask for: the heap may take the page cache's
        allowance but not the off-heap one (the JVM's own memory, direct buffers, off-heap memtables and
        filters). In disk-bound's 2 GiB cap a 1,764 MiB heap started and 1,888 MiB was killed at boot, every time
        (bench/results/impact_tuning.md); this keeps 768 MiB beside the heap. None when the node runs uncapped."""
        limit = self.memory_limit_mb()
        return None if limit is None else limit - (self.offheap_mb or 0)

    def design(self) -> dict[str, int]:
        """The physical design as numbers (features of the surrogate models, the RF/GBDT paper's tuning
        domains TD1-TD4)."""
        return {"nodes": self.nodes, "replication_factor": self.replication_factor}

    def loaded_design(self) -> dict[str, int]:
        """The design the data is loaded with: at most one replica per node (a factor above the node count
        changes the schema only, set after the restore)."""
        return {"nodes": self.nodes, "replication_factor": min(self.replication_factor, self.nodes)}


@dataclass
class RedisSettings:
    """What only Redis's trials read: nothing yet (a local redis-server takes the common settings)."""


@dataclass
class ExternalSettings:
    """What only the external target's trials read."""

    target_file: str | None = None      # the target's description, stored absolute (systems/external/target.py)


DatastoreSettings = Union[CassandraSettings, RedisSettings, ExternalSettings]

DATASTORE_SETTINGS: dict[str, type] = {"cassandra": CassandraSettings, "redis": RedisSettings,
                                       "external": ExternalSettings}

# the flat form every study stored before the split, with the defaults it had then, in its order: frozen, for
# what is computed from it (the rate cache's key) and for the migration, whatever the classes' defaults become
FLAT_FORM: dict[str, Any] = {
    "system": "cassandra", "target_file": None, "cassandra_version": CASSANDRA_VERSION, "heap_mb": 2048,
    "server_cpus": None, "client_cpus": None, "restore_mode": "link", "load_threads": 16, "boot_timeout": 120.0,
    "keep_node": False, "jit": "tiered", "nodes": 1, "replication_factor": 1, "read_consistency": "ONE",
    "write_consistency": "ONE", "per_node": {}, "load_method": "bulk", "scenario": "in-memory",
    "page_cache_mb": None, "offheap_mb": None, "warm_page_cache": False, "volume": None,
}


@dataclass
class TrialSettings:
    """How trials run: the part every trial has, and the datastore's part (`datastore`, of the class its
    `system` names; None given: that class's defaults). Stored with every trial (`to_dict`), read back with
    `from_dict`."""

    system: str = "cassandra"           # the target: cassandra | redis | external (see systems/__init__.py)
    scenario: str = "in-memory"         # the benchmark scenario (scenarios/scenarios.yaml) these settings come from
    server_cpus: str | None = None      # taskset list for the datastore a trial starts, e.g. "0"
    client_cpus: str | None = None      # taskset list for the YCSB client, e.g. "1"
    restore_mode: str = "link"          # link | copy | reload (load the data afresh every trial)
    load_threads: int = 16              # the YCSB client's threads when it loads a dataset
    boot_timeout: float = 120.0         # seconds the datastore a trial starts may take to answer
    keep_node: bool = False             # keep the trial's folder (logs, data) for inspection
    jit: str = "tiered"                 # tiered (the JVM's default C1+C2) | c1 (the JVMs stop at C1)
    datastore: DatastoreSettings | None = None
    # a flat study's fields of another datastore that differ from FLAT_FORM's defaults, kept as stored (see above)
    unused: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        kind = _kind(self.system)
        if self.datastore is None:
            self.datastore = kind()
        elif not isinstance(self.datastore, kind):
            raise ValueError(f"{self.system} trials take {kind.__name__}, not {type(self.datastore).__name__}")

    @property
    def cassandra(self) -> CassandraSettings:
        """Cassandra's part (a Cassandra trial's only)."""
        if not isinstance(self.datastore, CassandraSettings):
            raise ValueError(f"a {self.system} trial has no Cassandra settings")
        return self.datastore

    @property
    def external(self) -> ExternalSettings:
        """The external target's part (an external trial's only)."""
        if not isinstance(self.datastore, ExternalSettings):
            raise ValueError(f"a {self.system} trial has no external target settings")
        return self.datastore

    def jvm_flags(self) -> list[str]:
        """Flags for the JVMs of a trial (the YCSB client's, and Cassandra's). With 'c1', server and client reach
        compiled steady state within seconds instead of minutes on a 2-core machine, at a lower absolute
        throughput (see docs/trials.md)."""
        if self.jit == "c1":
            return ["-XX:TieredStopAtLevel=1"]
        if self.jit != "tiered":
            raise ValueError(f"unknown jit mode {self.jit!r}")
        return []

    def to_dict(self) -> dict[str, Any]:
        """The stored form: the common fields, the datastore's under "datastore" (`unused` only when it holds
        something)."""
        out = asdict(self)
        if not out["unused"]:
            del out["unused"]
        return out

    def flat(self) -> dict[str, Any]:
        """Every field in one flat dict, as stored before the split: the datastore's fields beside the common
        ones, every other field of FLAT_FORM at its default (or as a flat study stored it, `unused`). What the
        rate cache's key and the bottleneck diagnosis read, so they stay what they were."""
        values = {**{f.name: getattr(self, f.name) for f in fields(self) if f.name in FLAT_FORM},
                  **asdict(self.datastore), **self.unused}
        return {name: copy.deepcopy(values.get(name, default)) for name, default in FLAT_FORM.items()}

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> "TrialSettings":
        """The settings of a stored dict: the stored form (`to_dict`), or the flat form of the studies stored
        before the split. A one-line UsageError for a field neither knows."""
        stored = copy.deepcopy(dict(stored))
        kind = _kind(stored.get("system", "cassandra"), UsageError)
        if "datastore" in stored:
            part = stored.pop("datastore") or {}
            _known(part, {f.name for f in fields(kind)}, f"the {kind.__name__}")
            _known(stored, COMMON_FIELDS | {"unused"}, "the harness settings")
            return cls(**stored, datastore=kind(**part))
        _known(stored, set(FLAT_FORM), "the harness settings")
        own = {f.name for f in fields(kind)}
        unused = {name: value for name, value in stored.items()
                  if name not in own and name not in COMMON_FIELDS and value != FLAT_FORM[name]}
        return cls(**{name: value for name, value in stored.items() if name in COMMON_FIELDS},
                   datastore=kind(**{name: value for name, value in stored.items() if name in own}), unused=unused)


COMMON_FIELDS = {f.name for f in fields(TrialSettings)} - {"datastore", "unused"}


def _kind(system: str, error: type[Exception] = ValueError) -> type:
    kind = DATASTORE_SETTINGS.get(system)
    if kind is None:
        raise error(f"unknown system {system!r} in the harness settings: use one of {', '.join(DATASTORE_SETTINGS)}")
    return kind


def _known(given: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise UsageError(f"{what} stored here have fields this version does not know: {', '.join(unknown)}")
