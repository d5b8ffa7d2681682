"""What every target shares about a trial: one cold run of one configuration on one workload, against the datastore the settings name.

The datastore-specific work lives in `systems/<name>/trial.py`; this module holds what every target shares:
the harness settings stored with each trial, the result, and the rule that too many failed operations
make a failed trial."""

from __future__ import annotations

import errno
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import SetupError, TrialError, UsageError


if TYPE_CHECKING:
    from pathlib import Path

    from ..knobs import KnobSpace
    from ..volumes import Volume

Progress = Callable[[str], None]
CASSANDRA_VERSION = "5.0.6"       # the Cassandra release trials run unless told (from Maven)
MAX_ERROR_SHARE = 0.01  # a trial with more failed operations than this is a failed trial


def quiet(_: str) -> None:
    pass


@dataclass
class TrialSettings:
    """How trials run (the harness, not the datastore's knobs); stored with every trial."""

    system: str = "cassandra"           # the target: cassandra | redis | external (see systems/__init__.py)
    target_file: str | None = None      # the external target's description (system external)
    cassandra_version: str = CASSANDRA_VERSION
    heap_mb: int = 2048
    server_cpus: str | None = None      # taskset list for Cassandra, e.g. "0"
    client_cpus: str | None = None      # taskset list for the YCSB client, e.g. "1"
    restore_mode: str = "link"          # link | copy | reload (load the data afresh every trial)
    load_threads: int = 16
    boot_timeout: float = 120.0
    keep_node: bool = False             # keep the trial's node directory (logs, data) for inspection
    jit: str = "tiered"                 # tiered (the JVM's default C1+C2) | c1 (both JVMs stop at C1)
    # physical design (Cassandra): a local cluster of `nodes` on 127.0.0.1.. (see systems/cassandra/cluster.py)
    nodes: int = 1
    replication_factor: int = 1         # of the YCSB keyspace, set when the data is loaded
    read_consistency: str = "ONE"
    write_consistency: str = "ONE"
    # per-node cassandra.yaml knobs on top of the configuration every node gets: {"2": {knob: value}}
    per_node: dict[str, dict[str, Any]] = field(default_factory=dict)
    # how a dataset is loaded (Cassandra): "bulk" writes the records as SSTables with Cassandra's own writer and
    # imports them into the node (systems/cassandra/bulk.py; a cluster loads over CQL), "cql" inserts them through
    # the node, as YCSB's load phase does
    load_method: str = "bulk"
    # the benchmark scenario (scenarios/scenarios.yaml) these settings come from
    scenario: str = "in-memory"
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

    def jvm_flags(self) -> list[str]:
        """Flags for both JVMs of a trial. With 'c1', server and client reach compiled steady state within
        seconds instead of minutes on a 2-core machine, at a lower absolute throughput (see docs/trials.md)."""
        if self.jit == "c1":
            return ["-XX:TieredStopAtLevel=1"]
        if self.jit != "tiered":
            raise ValueError(f"unknown jit mode {self.jit!r}")
        return []

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def design(self) -> dict[str, int]:
        """The physical design as numbers (features of the surrogate models, seed 004's TD1-TD4)."""
        return {"nodes": self.nodes, "replication_factor": self.replication_factor}

    def loaded_design(self) -> dict[str, int]:
        """The design the data is loaded with: at most one replica per node (a factor above the node count
        changes the schema only, set after the restore)."""
        return {"nodes": self.nodes, "replication_factor": min(self.replication_factor, self.nodes)}


def with_design(space: "KnobSpace", settings: TrialSettings,
                overrides: dict[str, Any]) -> tuple[TrialSettings, dict[str, Any]]:
    """Split the physical-design knobs (`applies: design`, e.g. nodes, replication_factor) off a configuration:
    the settings of the trial's design and the remaining knobs. A design knob in the configuration wins over
    the harness's --nodes/--rf, so a design searched by `tune --design` is the design each trial runs on."""
    design = {name: value for name, value in overrides.items() if name in space and space[name].applies == "design"}
    if not design:
        return settings, overrides
    return (replace(settings, **{space[name].key: int(value) for name, value in design.items()}),
            {name: value for name, value in overrides.items() if name not in design})


@dataclass
class TrialResult:
    state: str                                    # COMPLETE or FAIL
    summary: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    internals: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    failure_kind: str | None = None
    error: str | None = None
    log_excerpt: str | None = None


@contextmanager
def failures_recorded(result: TrialResult, log_excerpt: Callable[[], str]) -> Iterator[None]:
    """What goes wrong inside a trial becomes its FAIL result with the reason and `log_excerpt()` (the
    datastore's log), except an interruption (stored as interrupted, then raised on) and a SetupError: the
    tooling is broken (a client that does not build, missing jars), not the configuration, so the command
    stops (exit 3) and the store marks the trial interrupted, for a rerun to measure it again."""
    try:
        yield
    except TrialError as exc:
        result.state, result.failure_kind, result.error = "FAIL", exc.kind, str(exc)
        result.log_excerpt = exc.log_excerpt or log_excerpt()
    except UsageError as exc:   # e.g. an external target file that broke between trials
        result.state, result.failure_kind, result.error = "FAIL", "refused", str(exc)
    except (KeyboardInterrupt, SystemExit):
        result.state, result.failure_kind, result.error = "FAIL", "interrupted", "interrupted by the user"
        raise
    except SetupError:
        raise
    except TimeoutError as exc:   # a call to the datastore that got no answer in its time: hung or overloaded
        result.state, result.failure_kind = "FAIL", "timeout"
        result.error = f"the datastore stopped answering ({exc or 'no reply in time'}): hung, or too slow to answer"
        result.log_excerpt = log_excerpt()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:   # a full disk fails every trial after it too: the study stops, resumable
            raise no_space(exc.filename2 or exc.filename or "the work directory") from None
        _unforeseen(result, exc, log_excerpt)
    except Exception as exc:
        _unforeseen(result, exc, log_excerpt)


def no_space(where: str) -> SetupError:
    """A full disk: not the configuration's fault, and every trial after it would fail too, so the study stops
    (exit 3) with the fix; `tune --resume` runs the trial again."""
    return SetupError(f"no space left on the disk of {where}: free space (`nosqltune datasets` shows and prunes the "
                      "dataset cache), then go on with `tune --resume`")


def _unforeseen(result: TrialResult, exc: Exception, log_excerpt: Callable[[], str]) -> None:
    """A bug or an unforeseen fault: the trial still ends as FAIL with the reason."""
    result.state, result.failure_kind, result.error = "FAIL", "error", f"{type(exc).__name__}: {exc}"
    result.log_excerpt = log_excerpt()


def record_run(result: TrialResult, timings: dict[str, float], metrics: dict[str, Any]) -> None:
    """Store a measured run's metrics, headline summary and client phase timings in the result."""
    from ..workloads.ycsb import summary

    timings["client_s"] = metrics.pop("wall_seconds")
    timings["warmup_s"] = metrics["warmup"].get("runtime_ms", 0) / 1000.0
    timings["measure_s"] = (metrics["runtime_ms"] or 0) / 1000.0
    result.metrics = metrics
    result.summary = summary(metrics)


def end_trial(result: TrialResult, timings: dict[str, float], started: float, stop: Callable[[], None],
              home: "Path", settings: TrialSettings) -> None:
    """The end of every local trial, whatever happened: stop the datastore (`stop`), record the stop and total
    times, remove the trial's folder (unless kept) and a per-trial reloaded dataset."""
    import shutil
    import time

    from .dataset import dataset_for

    from ..runtime.paths import release_leftovers
    from ..runtime.process import interrupts_deferred

    with interrupts_deferred():   # a Ctrl-C now waits for the cleanup: no mount, group or node left half-undone
        t0 = time.monotonic()
        try:
            stop()
        finally:   # a volume left mounted in the folder is unmounted before anything is removed
            released = release_leftovers(home)
        timings["stop_s"] = time.monotonic() - t0
        timings["total_s"] = time.monotonic() - started
        result.timings = timings
        if not settings.keep_node and released:
            shutil.rmtree(home, ignore_errors=True)
        elif home.exists():
            from ..runtime.paths import keep_trial_dir

            keep_trial_dir(home)
        if settings.restore_mode == "reload":
            shutil.rmtree(dataset_for("reload-" + home.name).root, ignore_errors=True)


def judge_errors(result: TrialResult, metrics: dict[str, Any]) -> None:
    """Mark a measured run COMPLETE, or FAIL when more than MAX_ERROR_SHARE of its operations failed."""
    result.state = "COMPLETE"
    measured = sum(op.get("count", 0) for op in metrics["operations"].values()) + metrics["errors"]
    if metrics["errors"]:
        first = (metrics.get("error_samples") or [None])[0]
        result.error = f"{metrics['errors']} of {measured} operations failed" + (f"; the first: {first}" if first else "")
        if metrics["errors"] > MAX_ERROR_SHARE * measured:
            # failed operations return fast and inflate throughput: such a figure is not a result
            result.state, result.failure_kind = "FAIL", "workload"
