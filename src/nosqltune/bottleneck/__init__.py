"""What limited a trial: the one resource its measured phase saturated, named from the figures the trial stored.

A trial is limited by the first of these that holds (the thresholds are `THRESHOLDS`):

1. `volume-iops`: the node's volume served at least 90% of its IOPS cap, in either direction (the group's serviced
   I/Os per second over the measured phase against the cap; the busiest node of a cluster). cgroup v1 keeps no
   count of throttled time, so the serviced rate is the evidence.
2. `volume-bandwidth`: the same for the MiB/s cap.
3. `node-cores` or `client-cores`: the cores were at least 90% busy: the node's and the client's CPU time over
   the measured phase against the cores they could use (each one's own set when pinned; else the machine's,
   shared, and the one using more is named).
4. `rate`: a fixed request rate (--target, --rate-fraction) that the run kept up with: nothing saturated, the
   client asked for no more.
5. `read-threads`: the node's read threads (concurrent_reads, its read stage) were at least 90% busy: the time its
   local reads took, summed over the measured phase and divided by the phase's length (the reads in progress on
   average, Little's law), against its read threads. A read that waits on the disk holds its thread, so few threads
   and slow reads keep a volume below its cap.
6. `memory`: the node's memory cgroup was full (page cache at least 90% of what the cap leaves beside its other
   memory) and it read from its disk at least 0.1 I/Os (or 512 bytes) per operation: the reads that miss
   its memory wait on the device, which is not itself saturated (page-cache churn).
7. `client-threads`: nothing above: the client's threads, each waiting for its answer, set the pace.

Every verdict comes with the utilisations that decided it; a figure the trial lacks is left out, and a rule
whose figures are missing does not apply."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

THRESHOLDS = {"cap": 0.90, "cores": 0.90, "read_threads": 0.90, "page_cache_full": 0.90, "churn_ios_per_op": 0.1,
              "churn_bytes_per_op": 512}
LIMITS = ("volume-iops", "volume-bandwidth", "node-cores", "client-cores", "rate", "read-threads", "memory",
          "client-threads")
_WORDS = {"volume-iops": "the volume's IOPS cap", "volume-bandwidth": "the volume's bandwidth cap",
          "node-cores": "the node's cores", "client-cores": "the client's cores",
          "rate": "nothing saturated (a fixed request rate)",
          "read-threads": "the node's read threads (concurrent_reads)", "memory": "memory (page-cache churn)",
          "client-threads": "nothing saturated (the client's threads)"}


@dataclass(frozen=True)
class Bottleneck:
    limit: str                                   # one of LIMITS
    utilisation: dict[str, float] = field(default_factory=dict)   # the figures that decided, 0..1 where shares
    per_op: dict[str, float] = field(default_factory=dict)        # I/Os and bytes per operation, as the device saw

    @property
    def words(self) -> str:
        return _WORDS[self.limit]

    def line(self) -> str:
        """One line for a person: what limited the trial and the figures that say so."""
        u, parts = self.utilisation, []
        for kind, unit in (("iops", "IOPS"), ("mbps", "MiB/s")):
            for direction in ("read", "write"):
                share = u.get(f"volume_{direction}_{kind}")
                if share is not None and u.get(f"{direction}_{kind}") and (direction == "read" or share >= 0.01):
                    parts.append(f"{direction}s {u[f'{direction}_{kind}']:,.1f} {unit} = {share:.0%} of the cap")
        if u.get("writes_uncharged") is not None and u.get("writes_uncharged", 0) > 0.01:
            parts.append(f"{u['writes_uncharged']:.0%} of the bytes written were not charged to the node's group "
                         "(write-back, the filesystem's journal)")
        if u.get("node_cores") is not None:
            cores = f"node {u['node_cores']:.2f}"
            if u.get("client_cores") is not None:
                cores += f" + client {u['client_cores']:.2f}"
            parts.append(f"{cores} of {u.get('cores_available', 0):g} cores")
        if u.get("read_threads_busy") is not None:
            parts.append(f"{u['reads_in_progress']:.1f} reads in progress on {u['read_threads']:g} read threads "
                         f"({u['read_threads_busy']:.0%})")
        if u.get("page_cache_full") is not None:
            parts.append(f"page cache {u['page_cache_full']:.0%} full")
        if u.get("data_in_memory") is not None:
            index = u.get("index_in_memory")
            parts.append(f"{u['data_in_memory']:.0%} of the data" + (f" and {index:.0%} of the partition index"
                                                                       if index is not None else "") + " in memory")
        if u.get("device_ms_per_read") is not None:
            parts.append(f"{u['device_ms_per_read']:.2f} ms per read at the device")
        if self.per_op:
            io = self.per_op.get("ios")
            kb = self.per_op.get("bytes")
            said = ([f"{io:.2f} I/Os"] if io is not None else []) + ([f"{kb / 1000:.1f} KB"] if kb is not None else [])
            if said:
                parts.append(" and ".join(said) + " per operation")
        if u.get("rate_kept") is not None:
            parts.append(f"{u['rate_kept']:.0%} of the asked rate")
        return f"limited by {self.words}" + (f": {'; '.join(parts)}" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "line": self.line(), "utilisation": dict(self.utilisation),
                "per_op": dict(self.per_op), "thresholds": dict(THRESHOLDS)}


def _usable_cores() -> int:
    """The cores this process may run on (its affinity: a container's or a taskset's cpuset), not the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _cpus(text: str | None) -> int | None:
    """How many CPUs a taskset list names ("0", "0-1", "0,2-3")."""
    if not text:
        return None
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def _get(mapping: dict[str, Any], key: str) -> float | None:
    value = mapping.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def diagnose(summary: dict[str, Any], settings: dict[str, Any] | None = None,
             internals: dict[str, Any] | None = None, cores: int | None = None) -> Bottleneck | None:
    """What limited a trial, from its summary (ycsb.summary), harness settings (TrialSettings.to_dict) and node
    internals; None without a measured phase. `cores`: the machine's (default: this machine's)."""
    if not summary or summary.get("throughput_ops_s") is None:
        return None
    settings, internals = settings or {}, internals or {}
    u: dict[str, float] = {}
    per_op: dict[str, float] = {}
    verdicts: list[str] = []

    caps = (settings.get("volume") or {})
    for kind in ("iops", "mbps"):
        unit = "iops" if kind == "iops" else "mib_s"
        for direction in ("read", "write"):
            cap = caps.get(f"{direction}_{kind}")
            rate = _get(summary, f"node_group_{direction}_{unit}")
            if rate is None:
                rate = _get(summary, f"node_dev_{direction}_{unit}")
            if rate is not None:
                u[f"{direction}_{kind}"] = rate
            if cap and rate is not None:
                u[f"volume_{direction}_{kind}"] = rate / cap
        shares = [u[k] for k in (f"volume_read_{kind}", f"volume_write_{kind}") if k in u]
        if shares and max(shares) >= THRESHOLDS["cap"]:
            verdicts.append("volume-iops" if kind == "iops" else "volume-bandwidth")

    # what the device wrote beyond what the node's group was charged escaped the cap: write-back (cgroup v1 charges
    # it to no group) and the filesystem's journal (written by its own kernel thread)
    written, charged = _get(summary, "node_dev_write_bytes_per_op"), _get(summary, "node_group_write_bytes_per_op")
    if written and charged is not None:
        u["writes_uncharged"] = max(0.0, written - charged) / written

    node, client = _get(summary, "node_cpu_cores"), _get(summary, "client_cpu_cores")
    machine = cores or _usable_cores()
    node_set, client_set = _cpus(settings.get("server_cpus")), _cpus(settings.get("client_cpus"))
    if node is not None:
        u["node_cores"] = node
        if client is not None:
            u["client_cores"] = client
        if node_set or client_set:   # pinned: each against its own set
            u["cores_available"] = (node_set or machine) + (client_set or 0) if client_set else (node_set or machine)
            if node / (node_set or machine) >= THRESHOLDS["cores"]:
                verdicts.append("node-cores")
            elif client is not None and client / (client_set or machine) >= THRESHOLDS["cores"]:
                verdicts.append("client-cores")
        else:
            u["cores_available"] = machine
            busy = (node + (client or 0.0)) / machine
            u["cores_busy"] = busy
            if busy >= THRESHOLDS["cores"]:
                verdicts.append("node-cores" if client is None or node >= client else "client-cores")

    if summary.get("target_ops_s"):
        u["rate_kept"] = summary["throughput_ops_s"] / summary["target_ops_s"]
        if summary.get("rate_sustained"):
            verdicts.append("rate")

    threads_busy = _get(summary, "node_read_threads_busy")
    if threads_busy is not None:
        u.update(read_threads_busy=threads_busy, reads_in_progress=_get(summary, "node_reads_in_progress") or 0.0,
                 read_threads=_get(summary, "node_read_threads") or 0.0)
        if threads_busy >= THRESHOLDS["read_threads"]:
            verdicts.append("read-threads")

    ios = [_get(summary, f"node_dev_{d}_ios_per_op") for d in ("read", "write")]
    if all(v is not None for v in ios):
        per_op["ios"] = sum(ios)
        per_op["read_ios"] = ios[0]
    moved = [_get(summary, f"node_dev_{d}_bytes_per_op") for d in ("read", "write")]
    if not all(v is not None for v in moved):
        moved = [_get(summary, f"node_disk_{d}_bytes_per_op") for d in ("read", "write")]
    if all(v is not None for v in moved):
        per_op["bytes"] = sum(moved)
        per_op["read_bytes"] = moved[0]
    memory = [m for m in (internals.get("memory_cgroup") or {}).values() if isinstance(m, dict)]
    if memory:
        fills = []
        for m in memory:
            room = (m.get("limit_bytes") or 0) - (m.get("anon") or 0)
            if room > 0 and m.get("page_cache") is not None:
                fills.append(m["page_cache"] / room)
        if fills:
            u["page_cache_full"] = max(fills)
            reading = (per_op.get("read_ios", 0) >= THRESHOLDS["churn_ios_per_op"]
                       or per_op.get("read_bytes", 0) >= THRESHOLDS["churn_bytes_per_op"])
            if u["page_cache_full"] >= THRESHOLDS["page_cache_full"] and reading:
                verdicts.append("memory")

    _residency(u, internals.get("page_cache_by_component"))
    device_ms = _get(summary, "node_dev_read_ms_per_io")
    if device_ms is not None and (u.get("read_iops") or 0) > 0:
        u["device_ms_per_read"] = device_ms

    order = {name: i for i, name in enumerate(LIMITS)}
    limit = min(verdicts, key=order.__getitem__) if verdicts else "client-threads"
    return Bottleneck(limit, {k: round(v, 4) for k, v in u.items()}, {k: round(v, 4) for k, v in per_op.items()})


def _residency(u: dict[str, float], cached: dict[str, Any] | None) -> None:
    """The share of the table's data (Data.db) and of its partition index (BIG's Index.db, BTI's Partitions.db) in
    the page cache at the end of the run, the least of any node's (internals.page_cache_by_component): what a read
    could find in memory. Figures for the line; they decide no verdict."""
    nodes = [n for n in (cached or {}).values() if isinstance(n, dict)]
    for key, components in (("data_in_memory", ("Data.db",)), ("index_in_memory", ("Index.db", "Partitions.db"))):
        shares = []
        for node in nodes:
            parts = [node[c] for c in components if isinstance(node.get(c), dict) and node[c].get("mib")]
            if parts:
                shares.append(sum(p["cached"] * p["mib"] for p in parts) / sum(p["mib"] for p in parts))
        if shares:
            u[key] = min(shares)


def of_trial(row: dict[str, Any], settings: dict[str, Any] | None = None, cores: int | None = None) -> Bottleneck | None:
    """The verdict of a stored trial (a store row: metrics.summary, internals): the one it stored, or one made now
    from its figures and its study's harness `settings` (trials stored before verdicts were)."""
    internals = row.get("internals") or {}
    stored = internals.get("bottleneck")
    if isinstance(stored, dict) and stored.get("limit") in LIMITS:
        return Bottleneck(stored["limit"], dict(stored.get("utilisation") or {}), dict(stored.get("per_op") or {}))
    if row.get("state") not in (None, "COMPLETE"):
        return None
    summary = row.get("summary") or (row.get("metrics") or {}).get("summary") or {}
    return diagnose(summary, settings, internals, cores)


def most_common(verdicts: list[Bottleneck]) -> dict[str, Any] | None:
    """Several trials of one configuration in one line: their most common verdict, how many trials it covers, the
    line of the last trial that had it, and the mean I/Os and bytes per operation over all of them."""
    if not verdicts:
        return None
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v.limit] = counts.get(v.limit, 0) + 1
    limit = max(counts, key=lambda k: (counts[k], -LIMITS.index(k)))
    per_op = {}
    for key in ("ios", "bytes"):
        values = [v.per_op[key] for v in verdicts if key in v.per_op]
        if values:
            per_op[key] = sum(values) / len(values)
    return {"limit": limit, "of": counts[limit], "trials": len(verdicts), "counts": counts,
            "line": [v for v in verdicts if v.limit == limit][-1].line(), "per_op": per_op}
