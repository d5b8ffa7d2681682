"""One cold trial of Redis: restore dump.rdb -> start redis-server with the rendered config -> warm up +
measure -> SIGKILL.

Cold trials restore the dataset from an RDB snapshot made once per data shape (the load takes a YCSB load
phase; starting a server from the snapshot takes well under a second for 100K records), so every trial
starts from the same bytes, as Cassandra's trials do. Reloading through YCSB per trial would measure the
load again each time for no gain (`--restore reload` does it anyway, for comparison).
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from ...errors import SetupError, TrialError, UsageError
from ...knobs import KnobSpace
from ...runtime import process
from ...runtime.paths import claim_trial_dir, work_dir
from ..base import (Progress, TrialResult, TrialSettings, end_trial, failures_recorded, judge_errors, quiet,
                      record_run)
from ...workloads.spec import Workload
from ...workloads.ycsb import client_timeout, run_client
from ..dataset import Dataset, dataset_for, dataset_key
from ..dataset_cache import create_dataset
from .resp import RedisError, parse_info_number
from .server import RedisServer, directive_value, redis_version, render_directives

# Redis ignores dump.rdb when it starts with the append-only file on (it loads the, here empty, AOF
# instead): such knobs are set live once the snapshot is loaded, which rewrites the AOF from memory.
LIVE_AFTER_LOAD = ("appendonly",)
CLIENT_JVM_RESERVE = 1536 << 20      # the YCSB client JVM (1 GiB heap) and the harness beside the server
_INFO_FIGURES = {"memory": ("used_memory", "used_memory_rss", "mem_fragmentation_ratio"),
                 "stats": ("total_commands_processed", "evicted_keys", "expired_keys", "keyspace_hits",
                           "keyspace_misses", "total_net_input_bytes", "total_net_output_bytes"),
                 "persistence": ("rdb_changes_since_last_save", "rdb_bgsave_in_progress",
                                 "aof_rewrite_in_progress", "aof_current_size")}

def default_knobs(settings: TrialSettings) -> str | None:
    """The knob set `tune` searches unless --knobs says otherwise."""
    return "mlos6"


def knob_space(settings: TrialSettings) -> KnobSpace:
    from ...knobs import load_space

    return load_space("redis")


def fingerprint(settings: TrialSettings) -> dict[str, Any]:
    from ...runtime.environment import fingerprint as machine

    try:
        version = redis_version()
    except (SetupError, OSError):
        version = "not installed"
    return machine("redis", version)


def config_fragment(settings: TrialSettings, overrides: dict[str, Any]) -> list[str]:
    """The knob values as redis.conf directives."""
    return render_directives(knob_space(settings), overrides)


def estimated_bytes(workload: Workload) -> int:
    """Memory Redis needs for the loaded records: a hash per record (each field a dict entry with two strings;
    YCSB's 100-byte values exceed the listpack limit, so full hash tables) plus the key and its sorted-set
    index entry: about 2 KB per record of 10 x 100 B (measured: 21.1 MB used_memory for 10,000 such records,
about 1 MB of it Redis's own)."""
    per_record = workload.fieldcount * (workload.fieldlength + 80) + 200
    return workload.records * per_record


def available_bytes() -> int | None:
    from ...runtime.environment import meminfo_kib

    kib = meminfo_kib("MemAvailable")
    return None if kib is None else kib * 1024


def preflight(workload: Workload, settings: TrialSettings, available: int | None = None) -> None:
    """The memory guard: refuse a dataset that would not fit in memory beside the client (the MLOS / LlamaTune
    report ran Redis out of RAM at 1M records), instead of letting the kernel's OOM killer end the run. The snapshot's fork
    shares pages copy-on-write, so the dataset counts once."""
    available = available_bytes() if available is None else available
    if available is None:
        return
    need = estimated_bytes(workload)
    if need + CLIENT_JVM_RESERVE > available:
        raise UsageError(f"{workload.records} records of {workload.fieldcount} x {workload.fieldlength} B need "
                         f"about {need / 2**30:.1f} GiB in Redis, plus {CLIENT_JVM_RESERVE / 2**30:.1f} GiB for "
                         f"the client; this machine has {available / 2**30:.1f} GiB available: use fewer "
                         "--records or a smaller --fieldlength")


def redis_dataset_key(version: str, data_shape: dict[str, Any]) -> str:
    return dataset_key({"redis": version, "data": data_shape})


def build_dataset(dataset: Dataset, workload: Workload, settings: TrialSettings,
                  progress: Progress = quiet) -> Dataset:
    """Start an empty server (no persistence), load the records with YCSB, SAVE: the dataset is dump.rdb."""

    def build(home: Path) -> dict[str, Any]:
        with RedisServer(home=home, directives=['save ""', "appendonly no"], cpus=settings.server_cpus) as server:
            progress(f"loading {workload.records} records into Redis (dataset {dataset.key})")
            boot = server.start(settings.boot_timeout)
            loader = Workload.from_dict({**workload.to_dict(), "threads": settings.load_threads})
            load = run_client("load", loader, host=server.address, port=server.port, trial_dir=home / "load",
                              timeout=client_timeout(workload, "load"), cpus=settings.client_cpus,
                              binding="redis")
            with server.connect() as conn:
                keys, memory = conn.call("DBSIZE"), conn.info("memory")
            started = time.monotonic()
            server.save_and_stop()
            save_s = time.monotonic() - started
        if load["errors"]:
            raise TrialError("workload", f"loading the dataset had {load['errors']} failed inserts")
        shutil.rmtree(home / "load", ignore_errors=True)
        return {"key": dataset.key, "system": "redis", "records": workload.records, "keys": keys,
                "data": workload.dataset_properties(), "redis_version": redis_version(), "boot_s": boot,
                "used_memory": parse_info_number(memory.get("used_memory")),
                "estimated_bytes": estimated_bytes(workload), "load_s": load["wall_seconds"],
                "load_throughput_ops_s": load["throughput_ops_s"], "save_s": save_s, "created_at": time.time()}

    return create_dataset(dataset, build, expected_bytes=estimated_bytes(workload))


def ensure_dataset(workload: Workload, settings: TrialSettings,
                   progress: Progress = quiet) -> tuple[Dataset, float]:
    dataset = dataset_for(redis_dataset_key(redis_version(), workload.dataset_properties()))
    if dataset.hold():   # held: no other process evicts it before this trial has restored it
        return dataset, 0.0
    started = time.monotonic()
    build_dataset(dataset, workload, settings, progress)
    return dataset, time.monotonic() - started


def run_trial(space: KnobSpace, overrides: dict[str, Any], workload: Workload, settings: TrialSettings,
              progress: Progress = quiet) -> TrialResult:
    """Run one cold trial; never raises for a trial failure (the result says FAIL and why)."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    home = work_dir() / "nodes" / ("redis-" + uuid.uuid4().hex[:12])
    server: RedisServer | None = None
    result = TrialResult(state="FAIL")
    try:
        with failures_recorded(result, lambda: server.log_excerpt() if server else ""):
            claim_trial_dir(home)   # marked as ours: removed by a later trial if we are killed
            at_start = {k: v for k, v in overrides.items() if k not in LIVE_AFTER_LOAD}
            live = {k: v for k, v in overrides.items() if k in LIVE_AFTER_LOAD}
            directives = render_directives(space, at_start)
            if settings.restore_mode == "reload":
                dataset = dataset_for("reload-" + home.name)
                t0 = time.monotonic()
                build_dataset(dataset, workload, settings, progress)
                timings["load_s"] = time.monotonic() - t0
            else:
                dataset, built = ensure_dataset(workload, settings, progress)
                if built:
                    timings["dataset_build_s"] = built
            progress("restoring dump.rdb")
            timings["restore_s"] = dataset.restore_into(home / "data", "copy" if settings.restore_mode == "copy"
                                                        else "link")
            server = RedisServer(home=home, directives=directives, cpus=settings.server_cpus)
            progress("starting redis-server")
            timings["boot_s"] = server.start(settings.boot_timeout)
            t0 = time.monotonic()
            with server.connect() as conn:
                keys = conn.call("DBSIZE")
                expected = dataset.meta().get("keys")
                if expected is not None and keys != expected:
                    raise TrialError("error", f"redis-server loaded {keys} keys from the snapshot, not {expected}",
                                     server.log_excerpt())
                for name, value in live.items():
                    _set_live(conn, space, name, value)
                applied = _read_back(conn, space, overrides)
            timings["apply_s"] = time.monotonic() - t0
            progress(f"running {workload.name}: warm-up then {workload.operations} operations, "
                     f"{workload.threads} threads")
            metrics = run_client("run", workload, host=server.address, port=server.port, trial_dir=home / "run",
                                 timeout=client_timeout(workload, "run"), cpus=settings.client_cpus,
                                 jvm_flags=settings.jvm_flags(), binding="redis",
                                 cost=[f"redis:{server.address}:{server.port}:{server.proc.pid}"])
            if not server.is_running():
                raise TrialError("crashed", f"redis-server died during the run: "
                                 f"{process.death_cause(server.proc) or server.failure_cause()}",
                                 server.log_excerpt())
            with server.connect() as conn:
                figures = {section: conn.info(section) for section in _INFO_FIGURES}
            record_run(result, timings, metrics)
            result.internals = {**applied, "keys": keys,
                                **{key: parse_info_number(figures[section].get(key))
                                   for section, keys_ in _INFO_FIGURES.items() for key in keys_}}
            judge_errors(result, metrics)
    finally:
        end_trial(result, timings, started, lambda: server.stop() if server else None, home, settings)
    return result


def _set_live(conn, space: KnobSpace, name: str, value: Any, timeout: float = 600.0) -> None:
    """CONFIG SET a knob on the running server and wait for the background work it starts (turning the AOF on
    rewrites it from the whole dataset) to finish, so the measured phase does not pay for it."""
    knob = space.knobs[name]
    text = directive_value(knob, value)
    try:
        conn.call("CONFIG", "SET", knob.key, text)
    except RedisError as exc:
        raise TrialError("refused", f"Redis refused CONFIG SET {knob.key} {text}: {exc}") from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = conn.info("persistence")
        if info.get("aof_rewrite_in_progress") == "0" and info.get("aof_rewrite_scheduled") == "0" \
                and info.get("rdb_bgsave_in_progress") == "0":
            return
        time.sleep(0.1)
    raise TrialError("timeout", f"Redis's background rewrite after CONFIG SET {knob.key} did not end in "
                     f"{timeout:.0f} s")


def _read_back(conn, space: KnobSpace, overrides: dict[str, Any]) -> dict[str, Any]:
    """What the server reports for the set directives (CONFIG GET): evidence that a configuration was
    applied, not just written."""
    names = sorted({space.knobs[n].key.split()[0] for n in overrides})
    settings = {}
    for directive in names:
        reply = conn.call("CONFIG", "GET", directive) or []
        settings.update(dict(zip(reply[::2], reply[1::2])))
    return {"server_settings": settings}
