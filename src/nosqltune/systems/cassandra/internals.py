"""Node internals (SSTables, SSTables per read, compactions, disk, GC) and drain, over JMX via loadgen."""

from __future__ import annotations

import json
import subprocess

from ...errors import TrialError
from ...workloads.loadgen import loadgen_java_command


def _run(jmx_port: int, args: list[str], timeout: float) -> str:
    cmd = loadgen_java_command("nosqltune.loadgen.NodeInternals", ["--jmx-port", str(jmx_port), *args])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TrialError("timeout", f"JMX call {args[0]} did not answer in {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise TrialError("internals", f"JMX call {args[0]} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def node_stats(jmx_port: int, keyspace: str = "ycsb", table: str = "usertable", timeout: float = 30.0) -> dict:
    return json.loads(_run(jmx_port, ["stats", "--keyspace", keyspace, "--table", table], timeout))


def drain(jmx_port: int, timeout: float = 60.0) -> None:
    _run(jmx_port, ["drain", "--timeout-seconds", str(int(timeout))], timeout + 15)
