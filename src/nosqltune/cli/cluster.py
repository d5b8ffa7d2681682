"""`nosqltune cluster up|status|down`: a local Cassandra cluster that outlives the command."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager

from ..errors import UsageError
from .harness import heap_mb, cassandra_version


@contextmanager
def _held(home, name: str):
    """The cluster folder's lock, for a start or a stop: two at once would each take the folder for their own (the
    second deleting the first's node folders and leaving its nodes running, untracked). Refused in one line."""
    from ..runtime.volume import lock_image

    try:
        held = lock_image(home, wait=False)
    except BlockingIOError:
        raise UsageError(f"cluster '{name}' is being started or stopped by another nosqltune process: wait for "
                         "it") from None
    try:
        yield
    finally:
        held.close()


def cmd_cluster(args: argparse.Namespace) -> int:
    from ..runtime.paths import check_writable, work_dir
    from ..systems.cassandra import cluster

    home = cluster.cluster_home(work_dir(), args.name)
    if args.action == "up":
        from ..knobs import load_space, parse_assignments
        from ..systems.cassandra.config import place
        from ..systems.cassandra.provision import DEFAULT_VERSION

        space = load_space("cassandra")
        overrides = space.validate(parse_assignments(args.assignments))
        placed = place(space, overrides)
        elsewhere = [n for n in overrides if space.knobs[n].applies != "yaml"]
        if elsewhere:
            raise UsageError(f"cluster up sets cassandra.yaml knobs only; {elsewhere[0]} applies to the "
                             f"{space.knobs[elsewhere[0]].applies}: leave it out (bench and tune set it per trial)")
        heap = heap_mb(args.heap)
        space.with_knob_defaults({"heap_size": heap}).check_rules(overrides)   # on the nodes' heap
        cluster.check_fits(args.nodes, heap)
        check_writable("work", "cache")   # the nodes' folders, and Cassandra's jars
        local = cluster.LocalCluster(home=home, nodes=args.nodes, heap_mb=heap, detached=True,
                                     version=cassandra_version(args.cassandra_version) or DEFAULT_VERSION,
                                     yaml_overrides=placed.yaml)
        with _held(home, args.name):
            existing = cluster.read_state(home)   # under the lock: no other process starts it meanwhile
            if existing and any(cluster.pid_alive(m["pid"], m["home"]) for m in existing["members"]):
                raise UsageError(f"cluster '{args.name}' is already running (nosqltune cluster down --name "
                                 f"{args.name})")
            if home.exists():
                import shutil

                shutil.rmtree(home)
            print(f"  starting {args.nodes} node(s) in {home}", file=sys.stderr, flush=True)
            seconds = local.start()
            (home / cluster.STATE_FILE).write_text(json.dumps(local.state(), indent=1))
        result = {**cluster.status(home), "start_seconds": seconds}
    elif args.action == "status":
        result = cluster.status(home)
    else:
        if cluster.read_state(home) is None:
            raise UsageError(f"no cluster at {home}")
        with _held(home, args.name):
            result = {"stopped": cluster.down(home), "home": str(home)}
    if args.json:
        print(json.dumps(result, default=str))
    elif args.action == "down":
        print(f"stopped {len(result['stopped'])} node(s): {', '.join(result['stopped']) or 'none were running'}")
    else:
        print(f"cluster {args.name}: {result['nodes']} node(s), {'up' if result['up'] else 'NOT up'}; CQL port "
              f"{result['native_port']}; contact points {','.join(m['address'] for m in result['members'])}")
        for m in result["members"]:
            print(f"  {m['address']}  {'running' if m['running'] else 'stopped'}  pid {m['pid']}  jmx {m['jmx_port']}"
                  f"  sees {', '.join(m['peers']) or 'no peers'}")
    return 0 if args.action == "down" or result["up"] else 1


def add_parsers(sub) -> None:
    p = sub.add_parser("cluster", help="a local Cassandra cluster for your own use: up, status, down",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run N Cassandra nodes on this machine, each on its own loopback address "
                                   "(127.0.0.1, 127.0.0.2, ...) with the same ports, as ccm does. The nodes keep "
                                   "running after `up` returns; `down` drains and stops them.\n\nExamples:\n"
                                   "  nosqltune cluster up --nodes 3 --heap 1G\n  nosqltune cluster status\n"
                                   "  nosqltune cluster down")
    p.add_argument("action", choices=["up", "status", "down"])
    p.add_argument("--nodes", type=int, default=3, metavar="N", help="up: number of nodes (default 3)")
    p.add_argument("--heap", default="1G", metavar="SIZE", help="up: heap per node (default 1G)")
    p.add_argument("--set", metavar="KNOB=VALUE", action="append", default=[], dest="assignments",
                   help="up: a cassandra.yaml knob for every node (repeatable)")
    p.add_argument("--name", default="local", help="the cluster's name (its folder under .nosqltune/clusters)")
    p.add_argument("--cassandra-version", default=None, help="Cassandra release from Maven (default 5.0.6)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_cluster)
