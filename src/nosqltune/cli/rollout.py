"""`nosqltune rollout`: apply an export-config plan to a running cluster, a canary node first (online/rollout.py)."""

from __future__ import annotations

import argparse
import json

from ..errors import UsageError
from .online import _access, add_access_flags
from .options import DEFAULT_STUDY


def _nodes(args: argparse.Namespace, plan):
    """(RemoteNodes, the CQL address, the restart or None, what is stored of the cluster)."""
    from ..online.remote import RemoteNode, command_restarter, local_restarter
    from .online import parse_cql, parse_hosts

    if bool(args.hosts) == bool(args.cluster):
        raise UsageError("give the cluster's nodes: --hosts HOST:JMXPORT,... (any cluster) or --cluster NAME (one "
                         "`nosqltune cluster up` started)")
    if args.cluster:
        from ..runtime.paths import work_dir
        from ..systems.cassandra.cluster import cluster_home, read_state

        if args.restart_command:
            raise UsageError("--cluster restarts its nodes itself: leave --restart-command out")
        home = cluster_home(work_dir(), args.cluster)
        state = read_state(home)
        if state is None:
            raise UsageError(f"no cluster '{args.cluster}' (start one with `nosqltune cluster up --name "
                             f"{args.cluster}`)")
        nodes = [RemoteNode(m["address"], m["jmx_port"], None, m["address"]) for m in state["members"]]
        cql = (state["members"][0]["address"], state["native_port"])
        return nodes, cql, local_restarter(home, plan.digest[:12]), {"cluster": args.cluster,
                                                   "homes": {m["address"]: m["home"] for m in state["members"]}}
    jmx = parse_hosts(args.hosts)
    nodes = [RemoteNode(n.name, n.jmx_port, n.host, n.host) for n in jmx]
    cql = parse_cql(args.cql, jmx)
    restart = command_restarter(args.restart_command, args.plan) if args.restart_command else None
    return nodes, cql, restart, {"hosts": args.hosts, "restart_command": args.restart_command}


def cmd_rollout(args: argparse.Namespace) -> int:
    from ..online.guard import GuardSettings
    from ..online.remote import RemoteCluster
    from ..online.rollout import Rollout, RolloutPlan, RolloutRecorder, RolloutSettings
    from ..systems.cassandra.cql import CqlAccess
    from ..systems.cassandra.internals import JmxAccess

    plan = RolloutPlan.load(args.plan)
    settings = RolloutSettings(window_s=args.window, windows=args.windows, settle_s=args.settle,
                               node_timeout_s=args.node_timeout,
                               canary=not args.no_canary, apply=args.apply, guard=GuardSettings())
    jmx_access, cql_access = _access(args)
    jmx_access, cql_access = jmx_access or JmxAccess(), cql_access or CqlAccess()
    nodes, cql, restart, where = _nodes(args, plan)
    if plan.restart and restart is None:
        raise UsageError("the plan restarts nodes (" + ", ".join([*plan.yaml, *plan.jvm_add]) + "): give "
                         "--restart-command, the command that restarts one of your nodes")
    if plan.schema and not plan.tables:
        raise UsageError("the plan's ALTER TABLE names no table of yours: export it with --table KEYSPACE.TABLE")
    say = (lambda line: print(line, flush=True)) if not args.json else (lambda line: None)
    say(f"plan {args.plan}: {plan.line()}")
    if plan.evidence:
        say(f"  {plan.evidence}")
    if not plan.confirmed:
        say("  NOT confirmed against the default at p < 0.05 (exported with --force)")
    # the canary is judged on its own reads and writes of the first table: at QUORUM a slow replica hides behind
    # the others in the coordinators' latencies, not in its own
    cluster = RemoteCluster(nodes, cql, restart, jmx_access, cql_access, say=say, table_option_names=plan.table_options,
                            judged_table=plan.tables[0] if plan.tables else None, homes=where.pop("homes", {}))
    recorder = None
    if args.apply or args.rollback:
        recorder = RolloutRecorder.open(args.study or DEFAULT_STUDY, plan, [n.name for n in nodes], settings,
                                        {**where, "cql": f"{cql[0]}:{cql[1]}", "jmx_access": jmx_access.record(),
                                         "cql_access": cql_access.record()})
    try:
        rollout = Rollout(plan, [n.name for n in nodes], cluster, settings, recorder, say=say)
        result = rollout.rollback() if args.rollback else rollout.run()
    finally:
        if recorder is not None:
            recorder.close()
    if args.json:
        print(json.dumps({**result.as_dict(), "steps": [s.__dict__ for s in rollout.steps],
                          "study": recorder.name if recorder else None}, default=str))
    else:
        say(f"rollout: {result.state}" + (f" ({result.error})" if result.error else "")
            + (f"; recorded as study {recorder.name} in {args.study or DEFAULT_STUDY}" if recorder else ""))
    return 0 if result.state in ("done", "dry-run", "rolled-back") else 1


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "rollout", help="apply an export-config plan to a running cluster: a canary node first, then one node at a "
                        "time (dry run unless --apply)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Apply a plan written by `nosqltune export-config` (its plan.json) to a running Cassandra "
                    "cluster. First a check (every node up, one version, one schema, the tables there, RF >= 2 when "
                    "nodes restart); then the whole plan on one node, the canary, judged on its own request "
                    "latencies and throughput against the windows before (the other nodes tell how the demand "
                    "moved); if it is worse, the rollout stops and the canary is put back where a step can be "
                    "undone. Then every other node, one at a time: live settings over JMX, a restart, a throttled "
                    "rewrite, each waited for until the node is up everywhere, holds no hints and its compactions "
                    "settled. Without --apply it prints every step and touches nothing. Every step is recorded in "
                    "the store: run the same command again to resume, or with --rollback to undo.\n\n"
                    "Examples:\n"
                    "  nosqltune rollout --plan plan/ --cluster local --apply\n"
                    "  nosqltune rollout --plan plan/ --hosts 10.0.0.1:7199,10.0.0.2:7199 \\\n"
                    "      --restart-command 'ssh $NOSQLTUNE_HOST sudo /opt/apply-plan $NOSQLTUNE_CONFIG' \\\n"
                    "      --jmx-credentials ~/.jmx --cql-credentials ~/.cql --apply")
    p.add_argument("--plan", required=True, metavar="DIR", help="a folder written by export-config (plan.json)")
    p.add_argument("--hosts", metavar="HOST:JMXPORT,...", help="the cluster's nodes, the canary first")
    p.add_argument("--cluster", metavar="NAME", help="instead of --hosts: a cluster `nosqltune cluster up` started "
                                                     "(nosqltune restarts its nodes itself)")
    p.add_argument("--cql", metavar="HOST:PORT", help="a node's CQL address (default: the first host, port 9042)")
    p.add_argument("--restart-command", metavar="CMD",
                   help="how one of your nodes is restarted into the plan's cassandra.yaml and JVM options, run here "
                        "after the node is drained, with NOSQLTUNE_NODE, NOSQLTUNE_HOST, NOSQLTUNE_PLAN (the plan's "
                        "folder) and NOSQLTUNE_CONFIG (plan, or previous to go back) in its environment; it returns "
                        "once the service is started again (needed when the plan restarts nodes)")
    p.add_argument("--apply", action="store_true", help="act (default: print every step, touch nothing)")
    p.add_argument("--rollback", action="store_true",
                   help="undo what an earlier run of this rollout did, newest first (with --apply)")
    p.add_argument("--no-canary", action="store_true", help="no canary node: every node in turn without a verdict")
    p.add_argument("--window", type=float, default=60.0, metavar="S",
                   help="seconds per window the canary is judged over (default 60)")
    p.add_argument("--windows", type=int, default=3, metavar="N",
                   help="windows before the change, for the baseline and its noise (default 3; up to as many more "
                        "while the canary's p99 is still falling, a cluster warming); the canary's windows after it "
                        "are judged one at a time, up to twice as many, or past the dynamic snitch's 10-minute reset")
    p.add_argument("--settle", type=float, default=120.0, metavar="S",
                   help="seconds between the canary's last step and its windows after (default 120): a restarted "
                        "node is slow until its JIT has compiled its code and its caches are warm, which is the "
                        "restart's doing, not the plan's")
    p.add_argument("--node-timeout", type=float, default=900.0, metavar="S", dest="node_timeout",
                   help="how long a node may take to be ready after a restart or a rewrite (default 900)")
    add_access_flags(p)
    p.add_argument("--study", default=None, metavar="FILE",
                   help=f"trial store where the rollout's steps are recorded (default {DEFAULT_STUDY})")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.set_defaults(func=cmd_rollout)
