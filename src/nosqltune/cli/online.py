"""`nosqltune online`: re-tune a running Cassandra cluster as its workload mix shifts (online/controller.py)."""

from __future__ import annotations

import argparse
import json
import math

from ..errors import UsageError
from .options import _progress


def parse_hosts(text: str):
    """HOST:JMXPORT[,HOST:JMXPORT...] -> JmxNodes named HOST:PORT; UsageError (one line) for a bad entry."""
    from ..online.observe import JmxNode

    nodes = []
    for entry in (e.strip() for e in text.split(",")):
        host, sep, port = entry.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host   # [::1]:7199
        if not entry or not sep or not host or any(c.isspace() for c in host):
            raise UsageError(f"--hosts: {entry or '(empty)'!r} is not HOST:JMXPORT (e.g. 127.0.0.1:7199)")
        try:
            number = int(port)
        except ValueError:
            raise UsageError(f"--hosts: the JMX port of {entry!r} is not a number") from None
        if not 0 < number < 65536:
            raise UsageError(f"--hosts: the JMX port of {entry!r} must be within 1..65535")
        nodes.append(JmxNode(name=f"{host}:{number}", jmx_port=number, host=host))
    names = [n.name for n in nodes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"--hosts: {', '.join(twice)} given twice")
    return tuple(nodes)


def _access(args: argparse.Namespace):
    """(JmxAccess, CqlAccess) from the credential and trust store files given, or (None, None); UsageError for a
    file that cannot be read. Passwords come from files only."""
    import os
    from pathlib import Path

    from ..systems.cassandra.cql import CqlAccess
    from ..systems.cassandra.internals import JmxAccess

    files = {flag: getattr(args, dest, None) for flag, dest in (
        ("--jmx-credentials", "jmx_credentials"), ("--jmx-truststore", "jmx_truststore"),
        ("--jmx-truststore-password-file", "jmx_truststore_password_file"), ("--cql-credentials", "cql_credentials"),
        ("--cql-ca", "cql_ca"))}
    for flag, path in files.items():
        if path is not None and not (Path(path).is_file() and os.access(path, os.R_OK)):
            raise UsageError(f"{flag} {path}: not a readable file")
    jmx = JmxAccess(files["--jmx-credentials"], files["--jmx-truststore"], files["--jmx-truststore-password-file"])
    cql = CqlAccess(files["--cql-credentials"], files["--cql-ca"])
    if cql.credentials_file:
        cql.credentials()   # a malformed file: refused before anything starts
    return (jmx if any(jmx.record().values()) else None), (cql if any(cql.record().values()) else None)


def add_access_flags(p) -> None:
    """The flags of a cluster that asks for credentials or TLS (files only: no password on the command line)."""
    p.add_argument("--jmx-credentials", metavar="FILE", help="JMX user and password: the file's first line is "
                                                             "'USER PASSWORD' (never given on the command line)")
    p.add_argument("--jmx-truststore", metavar="FILE", help="JMX over TLS: a trust store with the nodes' certificates")
    p.add_argument("--jmx-truststore-password-file", metavar="FILE", help="the trust store's password, in a file")
    p.add_argument("--cql-credentials", metavar="FILE", help="CQL user and password: 'USER PASSWORD' in a file")
    p.add_argument("--cql-ca", metavar="FILE", help="CQL over TLS: the CA certificate (PEM) of the nodes")


def _not_ok_text(row: dict) -> str:
    """A trace phase's errors by operation and status: ' (332 read NOT_FOUND)'; '' for a row without them."""
    from ..workloads.ycsb import describe_not_ok

    text = describe_not_ok(row.get("not_ok") or {})
    return f" ({text})" if text else ""


def parse_cql(text: str | None, nodes) -> tuple[str, int]:
    """--cql HOST:PORT (default: the first watched node's host, port 9042); UsageError for a bad one."""
    if text is None:
        return nodes[0].host, 9042
    host, sep, port = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--cql: {text!r} is not HOST:PORT with a port within 1..65535 (e.g. 127.0.0.1:9042)")
    return host, int(port)


def _running(args: argparse.Namespace) -> dict:
    """--config and --set (--set wins): the knob values the cluster runs, checked against the knob file."""
    from ..knobs import load_config, load_space, parse_assignments
    from .options import PER_NODE

    space = load_space("cassandra")
    config = {k: v for k, v in load_config(args.config, space.system).items() if k != PER_NODE} if args.config \
        else {}
    # outside the knob file's tuning ranges too (a model's knob set may widen them, e.g. online12): Cassandra's own
    # bounds still hold, and the model's space is checked when the model is read
    return {**space.validate(config, allow_outside_range=True),
            **space.validate(parse_assignments(args.assignments), allow_outside_range=True)}


TABLE = "ycsb.usertable"   # the table the model was fitted on, and the one a local cluster holds
DEFAULT_HEAP = "1G"        # a local cluster node's heap unless --heap says


def _seconds(flag: str, value: float | None, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be a number of seconds > 0, got {value}")


def cmd_online(args: argparse.Namespace) -> int:
    from ..online.run import run_online
    from ..online.settings import OnlineSettings
    from ..online.shift import ShiftSettings

    running = _running(args)
    local = None
    if args.nodes is not None:
        import os

        from ..online.local import LocalSetup
        from ..runtime.paths import check_writable, work_dir
        from ..systems.cassandra.cluster import check_fits
        from .harness import heap_mb

        if args.cql is not None or args.table != TABLE:
            raise UsageError("--cql and --table are for a cluster given by --hosts: with --nodes the run uses its own "
                             f"cluster's address and table ({TABLE})")
        if args.trace is None:
            raise UsageError("a local cluster has no traffic but a trace's: give --trace with --nodes")
        if args.heap is not None and "heap_size" in running:
            raise UsageError("give the nodes' heap once: --heap or heap_size in --config/--set")
        heap = int(running["heap_size"]) if "heap_size" in running else heap_mb(args.heap or DEFAULT_HEAP)
        local = LocalSetup(nodes=args.nodes, home=work_dir() / "online" / f"cluster-{os.getpid()}", heap_mb=heap,
                           config=running)
        check_fits(local.nodes, local.heap_mb)   # one line before the model is even read
        check_writable("work", "cache")
        nodes = ()
    else:
        if args.heap is not None:
            raise UsageError("--heap is for a local cluster the run starts: give --nodes N")
        nodes = parse_hosts(args.hosts)
    _seconds("--window", args.window)
    _seconds("--horizon", args.horizon)
    _seconds("--duration", args.duration, optional=True)
    if args.confirm < 1:
        raise UsageError(f"--confirm must be a whole number of windows >= 1, got {args.confirm}")
    if not (math.isfinite(args.min_dwell) and args.min_dwell >= 0):
        raise UsageError(f"--min-dwell must be a number of seconds >= 0, got {args.min_dwell}")
    if args.rf < 1:
        raise UsageError(f"--rf must be at least 1, got {args.rf}")
    trace = None
    if args.trace is not None:
        from ..workloads.trace import load_trace

        trace = load_trace(args.trace)
    elif args.records is not None:
        raise UsageError("--records is for the trace's client: give --trace too")
    keyspace, dot, table = args.table.partition(".")
    if not dot:
        raise UsageError(f"--table: {args.table!r} is not KEYSPACE.TABLE (e.g. ycsb.usertable)")
    if args.dry_run and args.apply:
        raise UsageError("--dry-run and --apply contradict each other: give one")
    if args.apply and local is not None:
        raise UsageError("--apply is for a cluster given by --hosts (one nosqltune did not start); a --nodes cluster "
                         "is the run's own and is acted on unless --dry-run")
    # a cluster nosqltune did not start is only watched and recorded unless the operator says --apply
    dry_run = args.dry_run or (local is None and not args.apply)
    jmx_access, cql_access = _access(args)
    canary = local is None if args.canary is None else args.canary   # a cluster nosqltune did not start: one node first
    settings = OnlineSettings(nodes=nodes, model=args.model, study=args.study, window_seconds=args.window,
                              horizon_seconds=args.horizon, duration_seconds=args.duration, dry_run=dry_run,
                              canary=canary,
                              jmx_access=jmx_access, cql_access=cql_access,
                              replication_factor=args.rf, knobs=args.knobs, trace=trace,
                              cql=None if local or (args.cql is None and trace is None) else parse_cql(args.cql, nodes),
                              keyspace=keyspace, table=table,
                              local=local, running=running,
                              shift=ShiftSettings(confirm=args.confirm, min_dwell_seconds=args.min_dwell),
                              trace_records=100_000 if args.records is None else args.records)
    say = _progress(args)
    summary = run_online(settings, say=say, progress=say).as_dict()
    if args.json:
        print(json.dumps(summary, default=str))
        return 0
    print(f"online study '{summary['study']}' in {args.study}: {summary['windows']} window(s), stopped by "
          f"{summary['stopped']}{' (dry run)' if summary['dry_run'] else ''}")
    print(f"  {summary['shifts']} shift(s) of the mix, {summary['recommendations']} recommendation(s); live changes: "
          f"{summary['live_applied']} applied, {summary['live_kept']} kept, {summary['rollbacks']} rollback(s)")
    for d in summary["restart_decisions"]:
        print(f"  window {d['window']}: {d['action']} {d['verdict']} (expected gain "
              f"{d['expected_gain_operations']:.0f} ops, cost {d['cost_operations']:.0f} ops)"
              + ((", performed" if d.get("performed") else ", not performed") if d["verdict"] == "act" else ""))
    for row in summary.get("trace") or []:
        print(f"  trace phase {row['phase']} ({row['workload']}): {row['throughput_ops_s'] or 0:,.0f} ops/s"
              + (f", read p99 {row['read_p99_ms']:.1f} ms" if row.get("read_p99_ms") is not None else "")
              + (f", {row['errors']} operations not OK" + _not_ok_text(row) if row.get("errors") else "")
              + (f" (first: {row['error_samples'][0]})" if row.get("error_samples") else ""))
    if summary.get("trace_error"):
        print(f"  the trace's client stopped early: {summary['trace_error']}")
    changed = summary["running"]
    print("  running now: " + (", ".join(f"{k} = {v}" for k, v in changed.items()) or "the model's defaults"))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "online", help="re-tune a running Cassandra cluster as its workload mix shifts (RAFIKI, SOPHIA)",
        description="Watch a running Cassandra cluster over JMX, one window at a time: read each node's request "
                    "counters (reads, writes, scans, p99, failures), detect a shift of the read/write/scan mix with "
                    "hysteresis (3 agreeing windows beyond max(0.10, 3 sampling sigmas), 180 s after a change), ask "
                    "the fitted model for the best configuration of the new mix, apply at once what Cassandra "
                    "changes live (JMX operations on each node, ALTER TABLE for table options; read back, kept only "
                    "if the next window's throughput and p99 are not worse, rolled back otherwise; on a cluster "
                    "given by --hosts one node first, judged on its own requests while the others tell the "
                    "demand), and weigh a "
                    "rolling restart or a rewrite for the other knobs against the gain the model predicts over "
                    "--horizon (the cost-benefit rule of SOPHIA, Mahgoub et al., USENIX ATC 2019). A restart is performed on a cluster the run started "
                    "(--nodes); on one given by --hosts it is decided and recorded, and rewrites are not performed. "
                    "A cluster given by --hosts is only watched unless --apply: nothing is changed on it without "
                    "that. Every window and decision is stored in a new study "
                    "of --study. It only observes the traffic there: it never benchmarks the cluster. Ctrl-C stops "
                    "it, leaving the last kept configuration. Example: nosqltune online --hosts 127.0.0.1:7199 "
                    "--model runs/study.throughput.rf.model --study runs/online.db")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--hosts", metavar="HOST:JMXPORT[,...]",
                       help="the running cluster's nodes, by host and JMX port (e.g. 127.0.0.1:7199,127.0.0.2:7199)")
    where.add_argument("--nodes", type=int, metavar="N",
                       help="start a local cluster of N nodes (loopback addresses 127.0.0.1..N), create YCSB's table "
                            "at --rf, load --records records, drive --trace against it and re-tune it: a restart that "
                            "pays is rolled out, one node drained and restarted at a time; the nodes are stopped and "
                            "their folder removed at the end")
    p.add_argument("--heap", default=None, metavar="SIZE", help="with --nodes: each node's heap (default 1G)")
    p.add_argument("--config", metavar="FILE",
                   help="the configuration the cluster runs, a YAML file of knob values (knob: value) or a named "
                        "one (latest), with --set over it: the running configuration the plan starts from is these "
                        "values over the defaults of the model's knobs (with --nodes, the heap is --heap's unless set "
                        "here); nothing reads what a node runs beyond the live knobs, read from the nodes when a "
                        "change is set. A knob the model's knob set does not have is refused. With --nodes, also what "
                        "its nodes start with; with --dry-run and --nodes, a static run of that configuration under "
                        "the trace")
    p.add_argument("--set", metavar="KNOB=VALUE", action="append", default=[], dest="assignments",
                   help="one knob of that configuration (repeatable); wins over --config")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a throughput model written by `nosqltune model fit` from a collection on this cluster's "
                        "setup (workload features: domain TD1 or TD3); a model of another datastore or knob set is "
                        "refused")
    p.add_argument("--study", required=True, metavar="FILE",
                   help="trial store (SQLite path or postgresql:// URL) where the run gets a study of its own, "
                        "online-DATE, one row per window")
    p.add_argument("--window", type=float, default=60.0, metavar="S", help="seconds per window (default 60)")
    p.add_argument("--confirm", type=int, default=3, metavar="N",
                   help="consecutive windows beyond the current mix, and agreeing with each other, before a shift is "
                        "declared (default 3): the hysteresis; a mix must last N windows for online to act on it")
    p.add_argument("--min-dwell", type=float, default=180.0, metavar="S", dest="min_dwell",
                   help="seconds after a shift during which windows do not count toward another shift (default "
                        "180): the configuration chosen for a mix stands at least this long plus --confirm windows; "
                        "a live change or a restart is no shift and starts no dwell")
    p.add_argument("--horizon", type=float, default=1800.0, metavar="S",
                   help="seconds over which a restart's predicted gain must pay for its cost (default 1800)")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S seconds (default: until Ctrl-C)")
    p.add_argument("--dry-run", action="store_true",
                   help="decide and record, apply nothing (the default for a cluster given by --hosts)")
    p.add_argument("--apply", action="store_true",
                   help="with --hosts: apply the live changes (node after node, each read back); without it a "
                        "cluster nosqltune did not start is only watched, and what would be done is recorded")
    p.add_argument("--canary", action=argparse.BooleanOptionalAction, default=None,
                   help="a live change goes to one node first and is judged on that node's own requests, the other "
                        "nodes' request counts telling how the demand moved meanwhile; kept there, it goes to the "
                        "others and is judged on theirs, the canary telling the demand (default: on for --hosts, "
                        "off for a --nodes cluster)")
    add_access_flags(p)
    p.add_argument("--rf", type=int, default=1, metavar="N",
                   help="the keyspace's replication factor, for the cost of a rolling restart and for the guard: "
                        "above 1 a canary's latencies and failures decide, not its share of the requests "
                        "(default 1)")
    p.add_argument("--knobs", default=None, metavar="SET",
                   help="the knob set the cluster is tuned over, when known: a model fitted on another is refused "
                        "(default: the model's)")
    p.add_argument("--trace", metavar="NAME|FILE",
                   help="also drive this phase-changing workload against the cluster with the YCSB client while "
                        "watching it, for measuring online (a trace that ships, e.g. 'shifting': read-heavy, "
                        "write-heavy and scan-heavy phases of 3 minutes; or a YAML file of phases, each a workload, "
                        "seconds, and a rate or threads); the run then lasts the trace unless --duration says more")
    p.add_argument("--cql", metavar="HOST:PORT",
                   help="a node's CQL address: live table options (row caching, the memtable) change through it with "
                        "ALTER TABLE, once for the cluster, and a --trace's client connects to it (with --trace the "
                        "default is the first --hosts host, port 9042; without either, table options are not "
                        "changed, and the record says so)")
    p.add_argument("--table", default=TABLE, metavar="KEYSPACE.TABLE",
                   help="the table whose options are tuned (default ycsb.usertable, the YCSB table the model was "
                        "fitted on)")
    p.add_argument("--records", type=int, default=None, metavar="N",
                   help="with --trace: the records the cluster's table holds, the keys its client picks; with "
                        "--nodes, the records loaded (default 100000)")
    p.add_argument("--json", action="store_true", help="progress as JSON lines on stderr, the summary as JSON")
    p.set_defaults(func=cmd_online)
