"""Node internals (SSTables, SSTables per read, compactions, disk, GC) and drain, over JMX via loadgen."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass

from ...errors import TrialError
from ...workloads.loadgen import loadgen_java_command


@dataclass(frozen=True)
class JmxAccess:
    """How to reach a node whose JMX asks for a user and password, or runs over TLS (a cluster nosqltune did not
    start): files only, so that no password is on a command line, in the store or in a log. `credentials_file`:
    its first line that is not a comment is `USER PASSWORD` (jmxremote.password's form); `truststore`: a trust
    store holding the nodes' certificates, its password in `truststore_password_file`."""

    credentials_file: str | None = None
    truststore: str | None = None
    truststore_password_file: str | None = None

    def args(self) -> list[str]:
        out = []
        for flag, value in (("--credentials-file", self.credentials_file), ("--truststore", self.truststore),
                            ("--truststore-password-file", self.truststore_password_file)):
            if value:
                out += [flag, str(value)]
        return out

    def record(self) -> dict:
        """What is stored of it: which files, never what is in them."""
        return {"credentials_file": self.credentials_file, "truststore": self.truststore,
                "truststore_password_file": self.truststore_password_file}


def _where(host: str | None, access: JmxAccess | None) -> list[str]:
    return [*(["--host", host] if host else []), *(access.args() if access else [])]


def _run(jmx_port: int, args: list[str], timeout: float) -> str:
    cmd = loadgen_java_command("nosqltune.loadgen.NodeInternals", ["--jmx-port", str(jmx_port), *args])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TrialError("timeout", f"JMX call {args[0]} did not answer in {timeout:.0f} s") from None
    if proc.returncode != 0:
        raise TrialError("internals", f"JMX call {args[0]} failed: {proc.stderr.strip()[:300]}")
    return proc.stdout


def node_stats(jmx_port: int, keyspace: str = "ycsb", table: str = "usertable", timeout: float = 30.0,
               host: str | None = None, access: JmxAccess | None = None) -> dict:
    return json.loads(_run(jmx_port, ["stats", "--keyspace", keyspace, "--table", table, *_where(host, access)],
                           timeout))


def answered_stats(jmx_port: int, tries: int = 3, pause: float = 2.0, **kwargs) -> dict:
    """The node's stats, asked up to `tries` times `pause` seconds apart: the short-lived JVM that asks over JMX
    may fail to start or connect for a moment (a machine under load), which says nothing about the node. Raises
    the last TrialError when no try answers; other errors are not retried."""
    import time

    failed = None
    for attempt in range(tries):
        if attempt:
            time.sleep(pause)
        try:
            return node_stats(jmx_port, **kwargs)
        except TrialError as exc:
            failed = exc
    raise TrialError(failed.kind, f"{tries} tries: {failed}")


def stats_after_run(jmx_port: int, tries: int = 3, pause: float = 2.0, **kwargs) -> dict:
    """The node's stats once its measured run is over. The run's figures are already whole and the node is
    alive (the caller checked): a node that is slow to answer over JMX then (a heap or page cache under
    pressure) costs the trial its internals, not its run. When no try answers, {"internals_error": why}."""
    try:
        return answered_stats(jmx_port, tries, pause, **kwargs)
    except TrialError as exc:
        return {"internals_error": f"after the run, {exc}"}


def drain(jmx_port: int, timeout: float = 60.0, host: str | None = None, access: JmxAccess | None = None) -> None:
    _run(jmx_port, ["drain", "--timeout-seconds", str(int(timeout)), *_where(host, access)], timeout + 15)


def node_status(jmx_port: int, timeout: float = 20.0, host: str | None = None,
                access: JmxAccess | None = None) -> dict:
    """What the node says of itself and the cluster: {"version", "mode" (NORMAL, JOINING, DRAINED, ...), "live",
    "unreachable", "joining" (addresses), "schema_versions" (version -> addresses; one entry when the cluster
    agrees), "hints_in_progress", "pending_hints" (the hints it holds for other nodes, one entry per node, or None
    when the node cannot say), "compaction_throughput_mib_s"}. TrialError when it does not answer."""
    return json.loads(_run(jmx_port, ["status", "--timeout-seconds", str(max(1, int(timeout))),
                                      *_where(host, access)], timeout + 15))


def rewrite_table(jmx_port: int, keyspace: str, table: str, throughput_mib_s: int | None = None,
                  timeout: float = 3600.0, host: str | None = None, access: JmxAccess | None = None) -> dict:
    """`nodetool upgradesstables -a -j 1` of one table on the node (after `setcompactionthroughput` when given):
    {"throughput_before_mib_s", "status", "seconds"}. TrialError when it fails or outlasts `timeout`."""
    args = ["rewrite", "--keyspace", keyspace, "--table", table, "--timeout-seconds", str(max(1, int(timeout))),
            *(["--throughput", str(int(throughput_mib_s))] if throughput_mib_s is not None else []),
            *_where(host, access)]
    return json.loads(_run(jmx_port, args, timeout + 30))


def query_log(jmx_port: int, directory: str | None, timeout: float = 60.0) -> None:
    """Turn the node's full query log on into `directory` (`nodetool enablefullquerylog --path`, its defaults), or
    off (None: `nodetool disablefullquerylog`, which writes out what the log still queues)."""
    args = ["querylog-on", "--directory", directory] if directory else ["querylog-off"]
    _run(jmx_port, [*args, "--timeout-seconds", str(int(timeout))], timeout + 15)


def snapshot(jmx_port: int, keyspace: str, table: str, tag: str, timeout: float = 120.0) -> None:
    """`nodetool snapshot -t TAG KEYSPACE.TABLE`: the table flushed, its SSTables hard-linked with its schema.cql
    into <data>/<keyspace>/<table>-<id>/snapshots/<tag>/."""
    _run(jmx_port, ["snapshot", "--keyspace", keyspace, "--table", table, "--name", tag,
                    "--timeout-seconds", str(int(timeout))], timeout + 15)


def flush(jmx_port: int, keyspace: str = "ycsb", timeout: float = 120.0) -> None:
    """Write the keyspace's memtables to SSTables (nodetool flush)."""
    _run(jmx_port, ["flush", "--keyspace", keyspace, "--timeout-seconds", str(int(timeout))], timeout + 15)


def wait_compactions(jmx_port: int, timeout: float, poll: float = 2.0, keyspace: str = "ycsb",
                     table: str = "usertable") -> dict:
    """Wait until the node has no compaction pending (the data as its compaction strategy settles it), polling
    its stats every `poll` seconds; returns {"settle_s", "pending"}: `pending` is what was still pending when
    `timeout` ran out (0 once settled). A slow compaction is not a failure (the caller stores what it found);
    a node that does not answer over JMX is (TrialError)."""
    import time

    started = time.monotonic()
    while True:   # a dataset's build ends here: one call that fails for a moment must not throw the build away
        stats = answered_stats(jmx_port, keyspace=keyspace, table=table, pause=poll)
        pending = max(int(stats.get("pending_compactions") or 0), int(stats.get("table_pending_compactions") or 0))
        waited = time.monotonic() - started
        if pending == 0 or waited >= timeout:
            return {"settle_s": round(waited, 3), "pending": pending}
        time.sleep(min(poll, max(0.0, timeout - waited)))


# ------------------------------------------------------------------------------------------------ online re-tuning

def client_requests(jmx_port: int, timeout: float = 15.0, host: str | None = None,
                    access: JmxAccess | None = None, table: str | None = None) -> dict:
    """The node's cumulative ClientRequest metrics and its JVM's uptime, as loadgen's `requests` prints them:
    {"uptime_ms": ms, "scopes": {"Read" | "Write" | "RangeSlice": {"count", "p50", "p99", "unit", "failures",
    "timeouts", "unavailables"}}}. A scope the node has not served yet has a count of 0 and null percentiles.
    With `table` (KS.T) the counts and percentiles are the table's own on this node (its ReadLatency, WriteLatency
    and RangeLatency: what the node serves as a replica), the failures still the coordinator's.
    TrialError when the node does not answer."""
    if table:   # KS.T: that table's own reads and writes on the node, as a replica serves them
        keyspace, _, name = table.partition(".")
        where = ["--keyspace", keyspace, "--table", name, *_where(host, access)]
    else:
        where = _where(host, access)
    return json.loads(_run(jmx_port, ["requests", *where], timeout))


def jmx_knob(knob_name: str):
    """The knob of knobs/cassandra.yaml named `knob_name` if Cassandra changes it live over JMX (its `live` entry
    is a nodetool command or a JMX operation); UsageError otherwise (a table option changes with ALTER TABLE, a
    setting without a live path needs a restart), KnobError for an unknown knob."""
    from ...errors import UsageError
    from ...knobs import load_space

    knob = load_space("cassandra")[knob_name]
    if knob.applies in ("table", "keyspace") or not knob.live or not knob.live.startswith(("nodetool", "JMX")):
        how = knob.live or "none: it is read when the node starts"
        raise UsageError(f"knob {knob.name} has no JMX path on Cassandra 5.0 (its live path: {how})")
    return knob


def _value_text(value) -> str:
    """A knob value as the command line takes it: whole numbers without a fraction."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        from ...errors import UsageError

        raise UsageError(f"a live knob's value must be a number, got {value!r}")
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def set_live(jmx_port: int, knob_name: str, value, timeout: float = 30.0, host: str | None = None,
             access: JmxAccess | None = None) -> dict:
    """Apply one knob live over JMX, in the knob file's unit (MiB, KiB, MiB/s), and read it back from the node:
    {"name", "value_asked", "value_read_back", "value_before", "unit", "via"} (`via`: the MBean operation used;
    `value_before`: what the node reported just before the change, None if nothing). The change lasts
    until the node restarts. UsageError for a knob without a JMX path (refused before any JVM starts), TrialError
    when the node does not answer or refuses the value."""
    knob = jmx_knob(knob_name)
    args = ["set", "--name", knob.name, "--value", _value_text(value), "--timeout-seconds", str(max(1, int(timeout))),
            *_where(host, access)]
    return json.loads(_run(jmx_port, args, 3 * timeout + 15))   # three calls: read, set, read back
