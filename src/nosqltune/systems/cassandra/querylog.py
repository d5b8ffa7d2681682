"""Reading Cassandra's full query logs (`nodetool enablefullquerylog`) into a capture (workloads/capture.py).

A log is a Chronicle queue whose entries only Cassandra's own codec decodes (a query's options, with its bound
values, are the native protocol's bytes), so loadgen's QueryLogReader reads it in a JVM that carries Cassandra's
jars, as the SSTable writers do, and prints one JSON line per entry; this module runs it and streams its lines.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator

from ...runtime.java import require_java
from ...workloads.capture import CaptureBuilder, CaptureError
from ...workloads.spec import Workload
from .bulk import _JDK_ACCESS, writer_classpath
from .provision import DEFAULT_VERSION

READER = "nosqltune.loadgen.QueryLogReader"
READER_HEAP_MB = 512
# Chronicle reaches into the JDK further than Cassandra's client code does (as conf/jvm17-clients.options allows)
_CHRONICLE_ACCESS = [*_JDK_ACCESS, "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED"]


def check_log_dir(path: Path) -> None:
    """CaptureError unless `path` is a directory holding a Chronicle queue: Chronicle itself opens any directory
    (and creates a missing one) and finds nothing in it, so this is checked before it is opened."""
    if not path.is_dir():
        raise CaptureError(f"not a full query log: {path} is not a directory")
    if not any(p.name == "metadata.cq4t" or p.suffix == ".cq4" for p in path.iterdir()):
        raise CaptureError(f"not a full query log: {path} holds no Chronicle queue (no metadata.cq4t, no .cq4 file); "
                           "give the directory of `nodetool enablefullquerylog --path`")


def read_log(path: Path, version: str = DEFAULT_VERSION) -> Iterator[dict[str, Any]]:
    """The entries of the log at `path`, as QueryLogReader prints them, its end line last. CaptureError when the
    reader refuses the log (a version it does not know) or fails."""
    check_log_dir(path)
    cmd = [require_java(17), f"-Xmx{READER_HEAP_MB}M", "-da:net.openhft...", *_CHRONICLE_ACCESS,
           "-cp", os.pathsep.join(writer_classpath(version)), READER, str(path)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.strip():
                    yield json.loads(line)
        finally:
            if proc.poll() is None:
                proc.kill()
            code = proc.wait()
        if code != 0:
            err.seek(0)
            # the reader's own refusal is its last line; a Java failure's cause is its last line not of the trace
            lines = [ln for ln in err.read().decode(errors="replace").splitlines()
                     if ln.strip() and not ln.startswith(("\t", " "))]
            raise CaptureError(lines[-1] if code == 2 and lines else
                               f"reading the log at {path} failed (exit {code}): {lines[-1] if lines else ''}")


def capture_logs(paths: list[Path], *, sample: int, version: str = DEFAULT_VERSION) -> dict[str, Any]:
    """The capture of the logs at `paths` (one per node: merged by start time)."""
    builder = CaptureBuilder(sample=sample)
    for path in paths:
        builder.add_log(str(path), read_log(path, version))
    return builder.capture()


def record_profile(workload: Workload, home: Path, *, sample: int, timeout: float = 600.0,
                   with_data: bool = False) -> dict[str, Any]:
    """The capture of a node running a profile's operations (`workload`, a profile:... Workload, its rate and
    length as given): a node started in `home`, the profile's schema, the full query log on (into home/querylog,
    left there), loadgen's ProfileWorkload run against it, the log off and read. The statements need no data to be
    logged: without `with_data` the node's table stays empty, and a replay runs them on the profile's generated data
    of the same records, whose keys they are. `with_data`: the profile's data is imported first, and the table is
    snapshotted after the run (`nodetool snapshot`), the snapshot copied to home/snapshot: what the statements read
    and wrote, as a user's snapshot of a production table. How the shipped capture is made
    (scripts/record_capture.py) and what the tests record."""
    import shutil

    from ...workloads.ycsb import run_client
    from .bulk import import_written, write_profile_sstables
    from .internals import query_log, snapshot
    from .node import CassandraNode
    from .schema import create_table
    from .trial import _create_schema

    if not workload.profile:
        raise CaptureError("recording a capture runs a profile's operations: give a profile:... workload")
    home = home.resolve()   # the writers and the node run in folders of their own
    log_dir = home / "querylog"
    node = CassandraNode(home=home / "node", heap_mb=1024)
    try:
        if with_data:   # written before the node boots, as a dataset build does
            written = write_profile_sstables(workload, home / "bulk", create_table(workload.profile, {}),
                                             version=node.version)
        node.start(timeout=180)
        _create_schema(node.address, node.ports.native, workload)
        if with_data:
            import_written(written, node.ports.jmx, keyspace=workload.keyspace, table=workload.table)
        query_log(node.ports.jmx, str(log_dir))
        try:
            run_client("run", workload, host=node.address, port=node.ports.native, trial_dir=home / "client",
                       timeout=timeout)
        finally:
            query_log(node.ports.jmx, None)
        if with_data:
            snapshot(node.ports.jmx, workload.keyspace, workload.table, "capture")
            (taken,) = [p for p in (home / "node").rglob("snapshots/capture") if p.is_dir()]
            shutil.copytree(taken, home / "snapshot")
    finally:
        node.stop(drain=False)
    capture = capture_logs([log_dir], sample=sample)
    # the data the statements' keys are of: a replay on the same profile defaults to these records
    capture["data"] = {"profile": workload.profile["name"], "records": workload.records}
    return capture
