"""Run the YCSB client (loadgen's PhasedClient) and parse its text output into structured metrics."""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from ..errors import TrialError
from ..runtime import process
from .loadgen import loadgen_java_command
from .spec import Workload

CLIENT_CLASS = "nosqltune.loadgen.PhasedClient"
# loadgen's YCSB bindings: the DB class and the properties naming the server
BINDINGS = {"cassandra": ("nosqltune.loadgen.CassandraCQLClient", "hosts", "port"),
            "redis": ("nosqltune.loadgen.RedisClient", "redis.host", "redis.port")}
CLIENT_JVM_FLAGS = ["-Xms512M", "-Xmx1G", "-XX:+UseG1GC"]

_LINE = re.compile(r"^\[([^\]]+)\],\s*([^,]+),\s*(.*)$")
_METRIC_KEYS = {
    "Operations": "count", "AverageLatency(us)": "avg_us", "MinLatency(us)": "min_us",
    "MaxLatency(us)": "max_us", "50thPercentileLatency(us)": "p50_us", "95thPercentileLatency(us)": "p95_us",
    "99thPercentileLatency(us)": "p99_us", "99.9PercentileLatency(us)": "p999_us",
}
_NON_OPERATIONS = {"CLEANUP", "THREAD_COUNT"}  # plus every TOTAL_GC* section (client JVM's GC)
# a run at a fixed rate (--target) kept up with it when it reached this share of it
RATE_SUSTAINED = 0.95


def _number(text: str) -> float | int:
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


# PhasedClient's [COST] figures (NodeCost) -> our names
COST_FIGURES = {"CpuTime(ms)": "cpu_ms", "UserTime(ms)": "user_ms", "SystemTime(ms)": "sys_ms",
                "GcTime(ms)": "gc_ms", "GcCount": "gc_count", "ReadBytes": "read_bytes", "WriteBytes": "write_bytes",
                "DevReadIOs": "dev_read_ios", "DevWriteIOs": "dev_write_ios", "DevReadBytes": "dev_read_bytes",
                "DevWriteBytes": "dev_write_bytes", "DevReadMs": "dev_read_ms", "DevWriteMs": "dev_write_ms",
                "DevBusyMs": "dev_busy_ms", "GroupReadIOs": "group_read_ios", "GroupWriteIOs": "group_write_ios",
                "GroupReadBytes": "group_read_bytes", "GroupWriteBytes": "group_write_bytes",
                "ReadBusyUs": "read_busy_us", "ReadThreads": "read_threads"}

# PhasedClient's per-second series beside the throughput -> our names
INTERVAL_SERIES = {"P99(ms)": "p99_ms", "SSTables": "sstables", "SSTablesPerRead": "sstables_per_read",
                   "DiskUsed(MB)": "disk_used_mb", "PendingCompactions": "pending_compactions"}


def parse_output(text: str) -> dict[str, Any]:
    """YCSB's text exporter output (plus PhasedClient's WARMUP/INTERVALS lines) -> metrics.

    Returns {"runtime_ms", "throughput_ops_s", "operations": {OP: {count, avg_us, p95_us, ..., returns}},
    "failed": {OP: {...}} for OP-FAILED sections, "errors": non-OK returns + failed ops,
    "warmup": {...}, "intervals_ops_s": [...], "intervals": {"p99_ms": [...], "sstables": [...], ...},
    "cost": {"operations": N, "node1": {"cpu_ms", "user_ms", "sys_ms", "gc_ms", "gc_count", "read_bytes",
    "write_bytes", "dev_read_ios", "dev_write_ios", "dev_read_bytes", "dev_write_bytes", "dev_read_ms",
    "dev_write_ms", "dev_busy_ms", "group_read_ios", "group_write_ios", "group_read_bytes", "group_write_bytes"},
    ..., "client": {...}}}:
    what each datastore process and the client spent in the measured phase, and what the block device under each
    node's volume (dev_*) and the node's blkio cgroup (group_*) saw (a figure a source cannot give is absent).
    """
    result: dict[str, Any] = {"runtime_ms": None, "throughput_ops_s": None, "operations": {}, "failed": {},
                              "errors": 0, "warmup": {}, "intervals_ops_s": [], "intervals": {}, "cost": {}}
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if not match:
            continue
        section, metric, value = match.group(1), match.group(2).strip(), match.group(3).strip()
        if section == "OVERALL":
            if metric == "RunTime(ms)":
                result["runtime_ms"] = float(value)
            elif metric == "Throughput(ops/sec)":
                result["throughput_ops_s"] = float(value)
        elif section == "WARMUP":
            key = {"Operations": "operations", "RunTime(ms)": "runtime_ms", "Steady": "steady",
                   "Errors": "errors"}.get(metric, metric)
            result["warmup"][key] = (value == "true") if key == "steady" else _number(value)
        elif section == "INTERVALS":
            values = [float(v) for v in value.split()]
            if metric == "Throughput(ops/sec)":
                result["intervals_ops_s"] = values
            else:   # per-second series of the measured phase: client p99, node internals over JMX
                key = INTERVAL_SERIES.get(metric, metric.lower())
                result.setdefault("intervals", {})[key] = [None if math.isnan(v) else v for v in values]
        elif section == "COST":
            if metric == "Operations":
                result["cost"]["operations"] = int(float(value))
            else:
                source, _, figure = metric.partition(".")
                if figure in COST_FIGURES:
                    result["cost"].setdefault(source, {})[COST_FIGURES[figure]] = float(value)
        elif section in _NON_OPERATIONS or section.startswith("TOTAL_GC"):
            continue
        else:
            failed = section.endswith("-FAILED")
            op = section[:-len("-FAILED")] if failed else section
            bucket = (result["failed"] if failed else result["operations"]).setdefault(op, {"returns": {}})
            if metric.startswith("Return="):
                bucket["returns"][metric[len("Return="):]] = int(float(value))
            elif metric in _METRIC_KEYS:
                bucket[_METRIC_KEYS[metric]] = _number(value)
    # failed operations also appear as OP-FAILED latency sections; their count is already in Return= lines
    result["errors"] = sum(n for by in not_ok_returns(result).values() for n in by.values())
    if result["throughput_ops_s"] is None:
        raise ValueError("no [OVERALL], Throughput(ops/sec) line in the YCSB output")
    return result


def summary(metrics: dict[str, Any]) -> dict[str, float | None]:
    """Flat headline figures in milliseconds: throughput, and avg/p95/p99 per operation type and overall."""
    flat: dict[str, float | None] = {"throughput_ops_s": metrics["throughput_ops_s"], "errors": metrics["errors"]}
    intervals = metrics.get("intervals_ops_s") or []
    if intervals:
        ordered = sorted(intervals)
        mid = len(ordered) // 2
        flat["throughput_median_interval_ops_s"] = (ordered[mid] if len(ordered) % 2
                                                    else (ordered[mid - 1] + ordered[mid]) / 2)
    total_count = 0
    weighted_avg = 0.0
    for op, stats in metrics["operations"].items():
        name = op.lower()
        count = stats.get("count", 0)
        for key in ("avg", "p50", "p95", "p99", "p999", "max"):
            us = stats.get(f"{key}_us")
            flat[f"{name}_{key}_ms"] = None if us is None else us / 1000.0
        flat[f"{name}_count"] = count
        if stats.get("avg_us") is not None:
            total_count += count
            weighted_avg += count * stats["avg_us"]
    flat["all_avg_ms"] = weighted_avg / total_count / 1000.0 if total_count else None
    rate = metrics.get("target_ops_s")
    if rate:   # a fixed rate: what was asked, and whether the run kept up (else its latency is not comparable)
        flat["target_ops_s"] = rate
        flat["rate_sustained"] = metrics["throughput_ops_s"] >= RATE_SUSTAINED * rate
    flat.update(cost_summary(metrics.get("cost") or {}, metrics.get("runtime_ms")))
    return flat


def cost_summary(cost: dict[str, Any], runtime_ms: float | None) -> dict[str, float | None]:
    """The node's own cost in the measured phase, summed over the datastore's processes (the nodes of a
    cluster), and the client's: CPU (user + system) and GC pause time in ms, per operation in microseconds,
    and the CPU as cores busy on average. With the nodes' disks (run_client's `disks`): the I/Os and bytes per
    operation the devices and the blkio groups saw, summed over the nodes; I/Os and MiB per second and the share
    of the phase the device was busy, the largest node's (each node has its own volume and its own caps); the
    device's average time per read I/O. None where the run has no such figure (e.g. no node source, or a node
    without it)."""
    operations = cost.get("operations") or 0
    nodes = [figures for source, figures in cost.items() if source.startswith("node")]
    flat: dict[str, float | None] = {}

    def total(sources: list[dict[str, float]], key: str) -> float | None:
        values = [s.get(key) for s in sources]
        return None if not values or any(v is None for v in values) else sum(values)

    def largest_per_s(key: str) -> float | None:
        values = [s.get(key) for s in nodes]
        if not values or any(v is None for v in values) or not runtime_ms:
            return None
        return max(values) * 1000.0 / runtime_ms

    for prefix, sources in (("node", nodes), ("client", [cost["client"]] if "client" in cost else [])):
        cpu, gc = total(sources, "cpu_ms"), total(sources, "gc_ms")
        flat[f"{prefix}_cpu_ms"] = cpu
        flat[f"{prefix}_cpu_user_ms"] = total(sources, "user_ms")
        flat[f"{prefix}_cpu_sys_ms"] = total(sources, "sys_ms")
        flat[f"{prefix}_gc_ms"] = gc
        flat[f"{prefix}_gc_count"] = total(sources, "gc_count")
        flat[f"{prefix}_cpu_us_per_op"] = cpu * 1000.0 / operations if cpu is not None and operations else None
        flat[f"{prefix}_gc_us_per_op"] = gc * 1000.0 / operations if gc is not None and operations else None
        flat[f"{prefix}_cpu_cores"] = cpu / runtime_ms if cpu is not None and runtime_ms else None
    # what the datastore read from and wrote to the disk itself (page-cache hits are not reads), per operation
    for direction in ("read", "write"):
        moved = total(nodes, f"{direction}_bytes")
        flat[f"node_disk_{direction}_bytes_per_op"] = moved / operations if moved is not None and operations else None
    # what the block device under each node's volume, and the blkio group charged for the node's I/O, saw
    for seen_by in ("dev", "group"):
        for direction in ("read", "write"):
            for unit in ("ios", "bytes"):
                moved = total(nodes, f"{seen_by}_{direction}_{unit}")
                flat[f"node_{seen_by}_{direction}_{unit}_per_op"] = (moved / operations
                                                                     if moved is not None and operations else None)
            ios = largest_per_s(f"{seen_by}_{direction}_ios")
            moved = largest_per_s(f"{seen_by}_{direction}_bytes")
            flat[f"node_{seen_by}_{direction}_iops"] = ios
            flat[f"node_{seen_by}_{direction}_mib_s"] = None if moved is None else moved / 2**20
    busy = largest_per_s("dev_busy_ms")
    # the counters are read a moment before and after the phase's own clock: a device busy throughout may exceed 1
    flat["node_dev_busy"] = None if busy is None else min(1.0, busy / 1000.0)
    # the node's read threads at work: the time its local reads took, summed, over the phase (reads in progress on
    # average), against its read threads (concurrent_reads); the busiest node's
    busy = [(s["read_busy_us"] / (runtime_ms * 1000.0), s.get("read_threads")) for s in nodes
            if s.get("read_busy_us") is not None and runtime_ms]
    flat["node_reads_in_progress"] = max((b for b, _ in busy), default=None)
    shares = [b / t for b, t in busy if t]
    flat["node_read_threads"] = next((t for _, t in busy if t), None)
    flat["node_read_threads_busy"] = max(shares) if shares else None
    reads, read_ms = total(nodes, "dev_read_ios"), total(nodes, "dev_read_ms")
    flat["node_dev_read_ms_per_io"] = read_ms / reads if reads and read_ms is not None else None
    # the objectives io-per-op and bytes-per-op: reads and writes together, as the node's volume saw them (the
    # process's own storage-layer bytes where the node has no volume of its own)
    ios = [flat[f"node_dev_{d}_ios_per_op"] for d in ("read", "write")]
    flat["node_io_per_op"] = None if None in ios else sum(ios)
    moved = [flat[f"node_dev_{d}_bytes_per_op"] for d in ("read", "write")]
    if None in moved:
        moved = [flat[f"node_disk_{d}_bytes_per_op"] for d in ("read", "write")]
    flat["node_bytes_per_op"] = None if None in moved else sum(moved)
    return flat


def write_properties(path: Path, props: dict[str, Any]) -> None:
    lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in props.items()]
    path.write_text("\n".join(lines) + "\n")


def _escaped(value: str) -> str:
    """A value as a Java properties file reads it back unchanged."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def client_timeout(workload: Workload, phase: str) -> float:
    """Seconds after which a client phase counts as hung."""
    if phase == "load":
        return 120 + workload.records / 200
    measured = workload.max_seconds or workload.operations / 200
    return 90 + workload.warmup_max_seconds + measured


def not_ok_returns(metrics: dict[str, Any]) -> dict[str, dict[str, int]]:
    """The returns that were not OK, by operation and status: {"READ": {"NOT_FOUND": 332}}; their sum is `errors`.
    A read at consistency ONE that reaches a replica which missed the write (down while it was made, its hints not
    replayed yet) returns NOT_FOUND, a stale read the client counts as an error without a failure on any node or a
    line of its own; a failed request returns ERROR and is printed (`error_samples`)."""
    out: dict[str, dict[str, int]] = {}
    for op, stats in (metrics.get("operations") or {}).items():
        bad = {status: int(n) for status, n in ((stats or {}).get("returns") or {}).items() if status != "OK" and n}
        if bad:
            out[op] = bad
    return out


def describe_not_ok(not_ok: dict[str, dict[str, int]]) -> str:
    """`not_ok_returns` in words: '3,677 read NOT_FOUND, 1 update ERROR'; '' for none."""
    return ", ".join(f"{n:,} {op.lower()} {status}" for op, by in not_ok.items() for status, n in by.items())


def run_client(phase: str, workload: Workload, *, host: str, port: int, trial_dir: Path,
               timeout: float, cpus: str | None = None, jvm_flags: list[str] | None = None,
               jmx_port: int | None = None, binding: str = "cassandra", cost: list[str] | None = None,
               disks: list[str] | None = None, extra: dict[str, Any] | None = None,
               secrets: dict[str, str] | None = None) -> dict[str, Any]:
    """Run PhasedClient for `phase` ('load' or 'run') with one of loadgen's BINDINGS; returns parsed metrics
    plus 'wall_seconds'. `jmx_port`: a Cassandra node's JMX port, for node internals sampled every second of
    the measured phase. `cost`: the datastore's processes whose CPU and GC time the client reads at the measured
phase's start and end (loadgen's NodeCost: `jmx:HOST:PORT[:PID]`, `redis:HOST:PORT`, `pid:PID`; the client's own
is always read). `disks`: the block device under each `cost` node's volume, read at the same moments, one entry per
node in the same order ('' for none): `STATFILE` (e.g. /sys/block/loop3/stat) or `STATFILE|GROUPDIR@MAJ:MIN` (and the
node's blkio cgroup folder, v1 or v2, with the device's number in it). `extra`: more client properties (e.g.
consistency levels). `secrets`: client properties that must not be kept (a password): written to a file of their
own, readable by this user only, removed when the client ends.

    TrialError('workload') when the client fails, prints no result or exceeds `timeout` (a hang)."""
    trial_dir.mkdir(parents=True, exist_ok=True)
    props_file = trial_dir / f"{phase}.properties"
    props = workload.properties(phase)
    db, host_key, port_key = BINDINGS[binding]
    props.update({"db": db, host_key: host, port_key: port, **(extra or {})})
    if jmx_port:
        props["internals.jmx.port"] = jmx_port
    if cost:
        props["cost.nodes"] = ",".join(cost)
    if disks:
        props["cost.disks"] = ",".join(disks)
    props["cost.clktck"] = os.sysconf("SC_CLK_TCK")
    write_properties(props_file, props)
    args = ["-load" if phase == "load" else "-t", "-P", str(props_file), "-s"]
    secret_file = trial_dir / f".{phase}-secrets.properties"
    if secrets:   # later -P files win; neither the command line (ps shows it) nor props_file holds them
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.writelines(f"{k}={_escaped(v)}\n" for k, v in secrets.items())
        args += ["-P", str(secret_file)]
    # the JVM's temporary files (native libraries a driver unpacks) in the trial's folder, not in /tmp
    cmd = loadgen_java_command(CLIENT_CLASS, args, [*CLIENT_JVM_FLAGS, f"-Djava.io.tmpdir={trial_dir}",
                                                    *(jvm_flags or [])])
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    out_path, err_path = trial_dir / f"{phase}.out", trial_dir / f"{phase}.err"
    try:
        proc, wall = run_client_process(cmd, out_path, err_path, timeout, f"YCSB {phase}")
    finally:
        if secrets:
            secret_file.unlink(missing_ok=True)
    if proc.returncode != 0:
        how = process.death_cause(proc) or f"failed (exit {proc.returncode})"
        raise TrialError("workload", f"YCSB {phase} {how}: {_last_line(err_path)}",
                         _tail(err_path))
    try:
        metrics = parse_output(out_path.read_text(errors="replace"))
    except ValueError as exc:
        raise TrialError("workload", f"YCSB {phase} printed no result: {exc}", _tail(err_path)) from None
    metrics["wall_seconds"] = wall
    if metrics["errors"]:   # the client's own words for the first failures: the trial's folder goes, these stay
        metrics["error_samples"] = error_samples(err_path)
    if phase == "run" and workload.target:
        metrics["target_ops_s"] = workload.target
    elif phase == "run" and workload.replay and workload.replay.get("rate_ops_s"):   # a replay at a pace
        metrics["target_ops_s"] = workload.replay["rate_ops_s"]
    return metrics


def run_client_process(cmd: list[str], out_path: Path, err_path: Path, timeout: float,
                       what: str) -> tuple[subprocess.Popen, float]:
    """Run a client JVM with its stdout and stderr in these files; returns the ended process and its wall seconds.
    TrialError('timeout') when it runs longer than `timeout` (a hang): it is stopped first."""
    started = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        # in its output's folder: what a crashing JVM writes (hs_err_pid*.log) stays out of the user's folder
        proc = process.spawn(cmd, stdout=out, stderr=err, cwd=str(out_path.parent))
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.terminate(proc, timeout=5)
            raise TrialError("timeout", f"{what} did not finish within {timeout:.0f} s", _tail(err_path)) from None
        finally:
            process.terminate(proc, timeout=5)
    return proc, time.monotonic() - started


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


ERROR_SAMPLES = 3
_FAILED_LINE = re.compile(r"^\[(cql|redis|loadgen)\] .*\bfailed\b")


def error_samples(path: Path) -> list[str]:
    """The first failed operations the client printed (loadgen prints a few, then counts the rest), one line each:
    what kind of failure (a timeout, an unavailable replica, a refused connection) a trial's error count was."""
    if not path.exists():
        return []
    found = []
    with open(path, errors="replace") as fh:
        for line in fh:
            if _FAILED_LINE.match(line):
                found.append(line.strip()[:300])
                if len(found) == ERROR_SAMPLES:
                    break
    return found


def _last_line(path: Path) -> str:
    tail = [ln for ln in _tail(path, 50).splitlines() if ln.strip() and not ln.startswith(("WARNING", "SLF4J"))]
    return tail[-1].strip()[:300] if tail else "no output"
