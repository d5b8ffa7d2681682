"""`nosqltune setup`: resolve Cassandra's jars and build the YCSB client."""

from __future__ import annotations

import argparse
import sys


def cmd_setup(args: argparse.Namespace) -> int:
    from ..systems.cassandra.provision import DEFAULT_VERSION, cassandra_classpath
    from ..workloads.loadgen import loadgen_classpath
    from .harness import cassandra_version

    version = cassandra_version(args.cassandra_version) or DEFAULT_VERSION
    print(f"Cassandra {version}: {len(cassandra_classpath(version))} jars", file=sys.stderr)
    print(f"loadgen: {loadgen_classpath()[0]}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("setup", help="resolve Cassandra with Maven and build the YCSB client (done on first use "
                       "anyway)")
    p.add_argument("--cassandra-version", default=None)
    p.set_defaults(func=cmd_setup)
