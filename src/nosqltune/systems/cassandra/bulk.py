"""Bulk loading a dataset: YCSB's load phase written straight into SSTables, then imported into the node.

Loading over CQL goes through the whole write path of a node (commit log, memtables, flushes, compactions
while loading): about 14,000 inserts a second for 1M records on two cores. Here loadgen's `SSTableWriterDB`
binding runs YCSB's own load phase (CoreWorkload, same keys, fields and values as over CQL) in a client JVM that
carries Cassandra's jars: it buffers the records, sorts each full buffer by token and has Cassandra's
`CQLSSTableWriter` write it out as one SSTable of the table's own format and options (compression ...), under
the node's cassandra.yaml (the SSTable version the node writes itself), with a bloom filter rebuilt for its
partitions (the writer's own is sized for none). Then the node that holds the schema imports them as
`nodetool import` does (JMX `importNewSSTables`, the files are moved, not copied) and serves them at once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...errors import TrialError
from ...runtime.java import require_java
from ...workloads.loadgen import loadgen_classpath, loadgen_java_command
from ...workloads.spec import Workload
from ...workloads.ycsb import (CLIENT_CLASS, _last_line, _tail, client_timeout, parse_output, run_client_process,
                               write_properties)
from .node import NodePorts, render_yaml
from .provision import cassandra_classpath, jar_named

WRITER_BINDING = "nosqltune.loadgen.SSTableWriterDB"
ROWS_FILE = "rows"   # SSTableWriterDB.ROWS_FILE: a flusher's row count, written once all was written
# what Cassandra's client code needs of the JDK's internals on Java 17 (as in its own jvm17 options)
_JDK_ACCESS = ["--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
               "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
               "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
               "--add-opens=java.base/java.lang=ALL-UNNAMED",
               "--add-opens=java.base/java.nio=ALL-UNNAMED",
               "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
               "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
               "--add-opens=java.base/java.io=ALL-UNNAMED",
               "--add-opens=java.base/java.util=ALL-UNNAMED",
               "-Dio.netty.tryReflectionSetAccessible=true"]


# The SSTables' sizes: a bucket of 4 (min_threshold) SSTables of similar size (within 0.5x-1.5x of its mean) is
# what size-tiered compaction merges. A load over CQL leaves what it converged to, e.g. 3 x 290 MiB + 73 + 65 MiB for
# 1M records; SSTables of one size would be merged at the first trial's start, beside its measurement (8 x 132 MiB
# measured 4,900 reads/s against 6,600-7,400 on the CQL-loaded data, bench/results/bulk_load.md). So: at most 3
# SSTables of each size, each size a third of the one before (never in one bucket), largest first (the last buffer,
# written after the load, is the smallest).
PER_SIZE = 3
SIZE_RATIO = 3
SINGLE_MB = 384            # data up to this size: one buffer, one SSTable (as one memtable flush)
KEY_BYTES = 24             # a YCSB key: "user" and up to 20 digits


@dataclass
class BulkSettings:
    """How the SSTable writer JVM runs: YCSB's load phase on `threads` client threads fills one buffer they share
    (`buffers` "shared") or one each ("thread"); a full buffer is sorted and written as one SSTable by one of
    `flushers` threads while the clients fill the next. The buffers' sizes follow `buffer_plan` with at most
    `largest_mb` MiB of keys and values (None: what the data needs, within half the machine's memory: the writer
    runs before the node boots)."""

    threads: int = 2
    buffers: str = "shared"
    flushers: int = 2
    largest_mb: float | None = None
    heap_mb: int | None = None          # None: `heap` of the largest buffer
    cpus: str | None = None             # taskset list for the writer JVM
    verify: bool = False                # have the node verify checksums and tokens before the import

    def buffers_in_hand(self) -> int:
        """Buffers on the heap at once: those the clients fill and those the flushers write."""
        return (1 if self.buffers == "shared" else self.threads) + self.flushers

    def heap(self, largest_mb: float) -> int:
        """A buffer takes a little more than its bytes on the heap (packed); three times that leaves the collector a
        young generation larger than what lives (with less, the parallel collector spent more time than the load)."""
        return self.heap_mb or int(512 + self.buffers_in_hand() * 3 * largest_mb)

    def largest(self, data_mb: float, memory_mb: float) -> float:
        """The largest buffer: `largest_mb`, or a quarter of the data (the largest of two sizes, see buffer_plan)
        and at least SINGLE_MB, as long as the heap stays within half of `memory_mb`."""
        if self.largest_mb:
            return self.largest_mb
        fits = (memory_mb / 2 - 512) / (self.buffers_in_hand() * 3)
        return max(64.0, min(max(data_mb / 4, SINGLE_MB), fits))


def buffer_plan(data_mb: float, largest_mb: float) -> list[float]:
    """The sizes of the successive buffers (MiB of keys and values, one SSTable each; the last repeats) for
    `data_mb` of records: one buffer when they fit `largest_mb` and SINGLE_MB, else PER_SIZE buffers of each of the
    fewest sizes (a SIZE_RATIO apart, largest first) whose largest fits `largest_mb`. When none does, buffers of
    `largest_mb`: SSTables of one size, which the node will merge."""
    if data_mb <= min(largest_mb, SINGLE_MB):
        return [round(max(data_mb, 1.0) * 1.1, 1)]
    for sizes in range(2, 8):
        smallest = data_mb / (PER_SIZE * (SIZE_RATIO ** sizes - 1) / (SIZE_RATIO - 1))
        if smallest * SIZE_RATIO ** (sizes - 1) <= largest_mb * 1.001:
            return [round(smallest * SIZE_RATIO ** i, 1) for i in reversed(range(sizes)) for _ in range(PER_SIZE)]
    return [round(largest_mb, 1)]


def data_mb(workload: Workload) -> float:
    """MiB of keys and values the workload's records come to (constant field lengths, YCSB's default)."""
    return workload.records * (KEY_BYTES + workload.fieldcount * workload.fieldlength) / (1 << 20)


def writer_classpath(version: str) -> list[str]:
    """loadgen's jar, then Cassandra `version`'s jars, then loadgen's dependencies that Cassandra does not
    bring itself (its own versions win; logback stays out, so loadgen's slf4j-simple logs for both)."""
    own, *deps = loadgen_classpath()
    cassandra = [jar for jar in cassandra_classpath(version) if not _artifact(jar).startswith("logback-classic")]
    provided = {_artifact(jar) for jar in cassandra}
    return [own, *cassandra, *(jar for jar in deps if _artifact(jar) not in provided)]


def _artifact(jar: str) -> str:
    """The Maven artifact id of a jar in a Maven repository (.../artifact/version/artifact-version.jar)."""
    path = Path(jar)
    return path.parent.parent.name if path.parent.parent.name else path.stem


def table_statement(keyspace: str, table: str, fieldcount: int, options: str | None = None) -> str:
    """The YCSB table as CREATE TABLE, with `options` (a CQL WITH clause's body, e.g. compression = {...})."""
    fields = ", ".join(f"field{i} varchar" for i in range(fieldcount))
    statement = f"CREATE TABLE {keyspace}.{table} (y_id varchar PRIMARY KEY, {fields})"
    return f"{statement} WITH {options}" if options else statement


def write_sstables(workload: Workload, out_dir: Path, schema: str, *, version: str,
                   yaml_overrides: dict[str, Any] | None = None, keyspace: str = "ycsb", table: str = "usertable",
                   settings: BulkSettings | None = None) -> dict[str, Any]:
    """Run YCSB's load phase of `workload` through SSTableWriterDB into `out_dir` (one sub-folder per flusher),
    under the cassandra.yaml the importing node gets (ours with `yaml_overrides`, as the node renders it): the
    SSTables are then of the version and format the node writes itself (a node in storage compatibility mode
    CASSANDRA_4 refuses 5.0's own version). No node is needed meanwhile. Returns {"write_s", "rows", "directories"
    (the folders to import), "sstables", "bytes", "throughput_ops_s", "out_dir", "client": parsed YCSB output}.
    TrialError('workload') when a record failed, a flusher did not finish, or the rows written are not the
    workload's records."""
    settings = settings or BulkSettings()
    node_yaml = _node_yaml(out_dir, yaml_overrides)
    loader = Workload.from_dict({**workload.to_dict(), "threads": settings.threads})
    size = data_mb(workload) * 1.02   # a little more: the last, smallest size is not repeated for a few records
    plan = buffer_plan(size, settings.largest(size, _memory_mb()))
    heap = settings.heap(max(plan))
    props = loader.properties("load")
    props.update({"db": WRITER_BINDING, "sstable.directory": str(out_dir), "sstable.schema": schema,
                  "sstable.buffers": settings.buffers, "sstable.buffer_mb": ",".join(f"{mb:g}" for mb in plan),
                  "sstable.flushers": settings.flushers,
                  "sstable.cassandra_yaml": str(node_yaml),
                  "cassandra.keyspace": keyspace, "table": table})
    props_file = out_dir / "load.properties"
    write_properties(props_file, props)
    out_path, err_path = out_dir / "load.out", out_dir / "load.err"
    proc, wall = _run_writer(out_dir, version, heap, settings, [CLIENT_CLASS, "-load", "-P", str(props_file), "-s"],
                             client_timeout(workload, "load"))
    try:
        client = parse_output(out_path.read_text(errors="replace"))
    except ValueError as exc:
        raise TrialError("workload", f"the SSTable writer printed no result: {exc}", _tail(err_path)) from None
    if client["errors"]:
        raise TrialError("workload", f"writing SSTables had {client['errors']} failed inserts", _tail(err_path))
    written = written_sstables(out_dir, keyspace, table)
    if written["rows"] != workload.records:
        raise TrialError("workload", f"the SSTable writer wrote {written['rows']} rows, not the workload's "
                         f"{workload.records} records", _tail(err_path))
    return {"write_s": wall, "throughput_ops_s": client["throughput_ops_s"], **written, "out_dir": str(out_dir),
            "buffer_mb": plan, "heap_mb": heap, "client": client}


def _node_yaml(out_dir: Path, yaml_overrides: dict[str, Any] | None) -> Path:
    """The cassandra.yaml the importing node gets, for the writer's tool mode (its directories and ports are never
    used)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    node_yaml = out_dir / "cassandra.yaml"
    node_yaml.write_text(yaml.safe_dump(render_yaml(out_dir / "node", NodePorts(9042, 7000, 7199), yaml_overrides),
                                        sort_keys=False))
    return node_yaml


def _run_writer(out_dir: Path, version: str, heap: int, settings: BulkSettings, main: list[str], timeout: float):
    """Run a writer JVM (`main`: its class and arguments) on Cassandra's classpath, its output in out_dir/load.out
    and load.err; (the process, its wall seconds). TrialError('workload') when it failed."""
    classpath = writer_classpath(version)
    # the parallel collector: the buffers live for seconds and die together, G1 spent twice the time on them
    tmp = out_dir.parent / "tmp"   # native libraries unpack beside the output, not into /tmp (removed with it)
    tmp.mkdir(parents=True, exist_ok=True)
    # a writer thread out of memory would leave the JVM waiting for it: exit at once, and the build fails with why
    flags = [f"-Xms{heap}M", f"-Xmx{heap}M", "-XX:+UseParallelGC", "-XX:+ExitOnOutOfMemoryError",
             f"-Djava.io.tmpdir={tmp}",
             f"-javaagent:{jar_named(classpath, 'jamm')}", *_JDK_ACCESS]
    cmd = [require_java(17), *flags, "-cp", os.pathsep.join(classpath), *main]
    if settings.cpus:
        cmd = ["taskset", "-c", settings.cpus, *cmd]
    out_path, err_path = out_dir / "load.out", out_dir / "load.err"
    proc, wall = run_client_process(cmd, out_path, err_path, timeout, "writing SSTables")
    if proc.returncode != 0:
        raise TrialError("workload", f"writing SSTables failed (exit {proc.returncode}): {_last_line(err_path)}",
                         _tail(err_path))
    return proc, wall


PROFILE_WRITER = "nosqltune.loadgen.ProfileWriter"
PROFILE_HEAP_MB = 1536    # the writers hold one partition each as Cassandra's row objects: room for wide ones


def write_profile_sstables(workload: Workload, out_dir: Path, schema: str, *, version: str,
                           yaml_overrides: dict[str, Any] | None = None,
                           settings: BulkSettings | None = None) -> dict[str, Any]:
    """A profile's dataset (every row of its partitions, workloads/profile.py) written as SSTables by loadgen's
    ProfileWriter for `schema` (the profile's CREATE TABLE, keyspace-qualified, with the options that shape
    SSTables), under the importing node's cassandra.yaml; returns what write_sstables returns."""
    from ...workloads.profile import loadgen_properties, row_bytes

    settings = settings or BulkSettings()
    node_yaml = _node_yaml(out_dir, yaml_overrides)
    size = workload.records * row_bytes(workload.profile) / (1 << 20) * 1.02   # SSTable sizes (without windows)
    plan = buffer_plan(size, settings.largest(size, _memory_mb()))
    props = {**loadgen_properties(workload.profile, workload.records), "profile.schema": schema,
             "sstable.directory": str(out_dir), "sstable.buffer_mb": ",".join(f"{mb:g}" for mb in plan),
             "sstable.flushers": settings.flushers, "sstable.cassandra_yaml": str(node_yaml)}
    props_file = out_dir / "load.properties"
    write_properties(props_file, props)
    heap = settings.heap_mb or PROFILE_HEAP_MB
    proc, wall = _run_writer(out_dir, version, heap, settings, [PROFILE_WRITER, str(props_file)],
                             client_timeout(workload, "load"))
    printed = [line for line in (out_dir / "load.out").read_text(errors="replace").splitlines()
               if line.startswith("[PROFILE-LOAD]")]
    if not printed:
        raise TrialError("workload", "the profile's SSTable writer printed no result", _tail(out_dir / "load.err"))
    written = written_sstables(out_dir, workload.keyspace, workload.table)
    fields = [f for line in printed for f in line.split()[1:]]   # "[PROFILE-LOAD] name value name value ..."
    said = dict(zip(fields[::2], fields[1::2]))
    return {"write_s": wall, "throughput_ops_s": written["rows"] / wall if wall else None, **written,
            "out_dir": str(out_dir), "buffer_mb": plan, "heap_mb": heap,
            "partitions": props["profile.partitions"], "data_time_ms": int(said.get("data_time_ms", 0)),
            "windows": int(said.get("windows", 1))}


def copy_snapshot(snapshot: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """A table's snapshot (workloads/snapshot.py) copied into `out_dir`/N/<keyspace>/<table>/, one N per node's
    snapshot (their SSTables may share names: each folder is imported on its own), ready to import (the import
    moves the files: the user's snapshot is never touched); what import_written takes."""
    from ...workloads.snapshot import sstable_files

    started = time.monotonic()
    directories, sstables, size = [], 0, 0
    for n, files in enumerate(sstable_files(snapshot)):
        folder = out_dir / str(n) / snapshot["keyspace"] / snapshot["table"]
        folder.mkdir(parents=True, exist_ok=True)
        for path in files:
            shutil.copy2(path, folder / path.name)
        directories.append(str(folder))
        sstables += sum(1 for p in files if p.name.endswith("-Data.db"))
        size += sum(p.stat().st_size for p in files)
    return {"write_s": time.monotonic() - started, "throughput_ops_s": None, "rows": 0, "out_dir": str(out_dir),
            "directories": directories, "sstables": sstables, "bytes": size, "buffer_mb": None, "heap_mb": None}


def written_sstables(out_dir: Path, keyspace: str = "ycsb", table: str = "usertable") -> dict[str, Any]:
    """What the writer JVM left in `out_dir`: its flushers' folders of SSTables, the rows they wrote, the SSTables
    (Data files) and bytes. TrialError when a flusher did not finish (no row count beside its SSTables)."""
    directories, rows, sstables, size = [], 0, 0, 0
    for writer in sorted((p for p in out_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)):
        if not (writer / ROWS_FILE).exists():
            raise TrialError("workload", f"SSTable flusher {writer.name} did not finish (no {ROWS_FILE} file)")
        rows += int((writer / ROWS_FILE).read_text().strip())
        folder = writer / keyspace / table
        files = [f for f in folder.iterdir() if f.is_file()] if folder.is_dir() else []
        sstables += sum(1 for f in files if f.name.endswith("-Data.db"))
        size += sum(f.stat().st_size for f in files)
        if files:
            directories.append(str(folder))
    return {"directories": directories, "rows": rows, "sstables": sstables, "bytes": size}


def import_sstables(jmx_port: int, directories: list[str], keyspace: str = "ycsb", table: str = "usertable",
                    verify: bool = False, timeout: float = 600.0, keep_level: bool = False) -> float:
    """`nodetool import` of `directories` into the node's table over JMX (loadgen's NodeInternals); seconds
    taken. `keep_level`: the SSTables keep their compaction levels and repair state (restored data), else they
    are reset as for new data. TrialError('internals') when the node refused any of them."""
    args = ["--jmx-port", str(jmx_port), "import", "--keyspace", keyspace, "--table", table,
            "--timeout-seconds", str(int(timeout))]
    for directory in directories:
        args += ["--directory", directory]
    if verify:
        args.append("--verify")
    if keep_level:
        args.append("--keep-level")
    started = time.monotonic()
    try:
        proc = subprocess.run(loadgen_java_command("nosqltune.loadgen.NodeInternals", args), capture_output=True,
                              text=True, timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        raise TrialError("timeout", f"importing SSTables did not finish within {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise TrialError("internals", f"importing SSTables failed: {proc.stderr.strip()[-500:]}")
    return time.monotonic() - started


def import_written(written: dict[str, Any], jmx_port: int, *, keyspace: str = "ycsb", table: str = "usertable",
                   verify: bool = False) -> dict[str, Any]:
    """Import what `write_sstables` wrote into the node listening for JMX on `jmx_port` (it holds the schema), remove
    the writer's folder (`out_dir`), and return what the load took: {"write_s", "import_s", "load_s", "throughput_ops_s"
    (records per second over both), "rows", "sstables", "bytes", "writer_throughput_ops_s"}."""
    import_s = import_sstables(jmx_port, written["directories"], keyspace, table, verify=verify,
                               timeout=120 + written["bytes"] / 20e6)
    shutil.rmtree(written["out_dir"], ignore_errors=True)
    load_s = written["write_s"] + import_s
    return {"write_s": written["write_s"], "import_s": import_s, "load_s": load_s,
            "throughput_ops_s": written["rows"] / load_s if load_s else None,
            "writer_throughput_ops_s": written["throughput_ops_s"], "rows": written["rows"],
            "sstables": written["sstables"], "bytes": written["bytes"], "buffer_mb": written["buffer_mb"],
            "heap_mb": written["heap_mb"],
            **{k: written[k] for k in ("partitions", "data_time_ms", "windows") if k in written}}   # a profile's


def bulk_load(workload: Workload, out_dir: Path, schema: str, jmx_port: int, *, version: str,
              yaml_overrides: dict[str, Any] | None = None, keyspace: str = "ycsb", table: str = "usertable",
              settings: BulkSettings | None = None) -> dict[str, Any]:
    """Both steps for a node that is up and holds the schema: write the workload's records as SSTables into
    `out_dir` (on the node's file system: the import moves the files), import them; returns import_written's
    timings. (build_dataset writes before the node boots, then imports.)"""
    settings = settings or BulkSettings()
    written = write_sstables(workload, out_dir, schema, version=version, yaml_overrides=yaml_overrides,
                             keyspace=keyspace, table=table, settings=settings)
    return import_written(written, jmx_port, keyspace=keyspace, table=table, verify=settings.verify)


def _memory_mb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 20)
