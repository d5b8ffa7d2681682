"""`nosqltune node`: one Cassandra node in the foreground."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import UsageError
from .harness import heap_mb, cassandra_version


def cmd_node(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from ..systems.cassandra.node import flatten_dotted, serve
    from ..systems.cassandra.provision import DEFAULT_VERSION

    overrides: dict[str, Any] = {}
    if args.yaml:
        try:
            data = yaml.safe_load(Path(args.yaml).read_text()) or {}
        except OSError as exc:
            raise UsageError(f"--yaml {args.yaml}: {exc.strerror}: give a YAML file of cassandra.yaml "
                             "settings") from None
        except yaml.YAMLError as exc:
            raise UsageError(f"--yaml {args.yaml} is not valid YAML ({str(exc).splitlines()[0]}): fix the "
                             "file") from None
        if not isinstance(data, dict):
            raise UsageError(f"--yaml {args.yaml}: expected a mapping of cassandra.yaml settings")
        overrides = flatten_dotted(data)
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port must be a port number within 1..65535, got {args.port}")
    home = Path(args.home).expanduser().resolve()
    if home.exists() and not home.is_dir():
        raise UsageError(f"--home {args.home} is a file: give a folder for the node's data (made when missing)")
    return serve(home, args.port, overrides, heap_mb(args.heap),
                 cassandra_version(args.cassandra_version) or DEFAULT_VERSION, say=lambda line: print(line, flush=True))


def add_parsers(sub) -> None:
    p = sub.add_parser("node", help="run one Cassandra node in the foreground (for external targets, or your own use)",
                       description="Start a Cassandra node from the project's jars with its data in --home, serve "
                                   "CQL on --port until SIGTERM or Ctrl-C, then drain and stop (the data is left at "
                                   "rest, ready to copy). HOME/ready exists while the node serves CQL. Example: "
                                   "nosqltune node --home /tmp/n1 --port 9042 --yaml overrides.yaml")
    p.add_argument("--home", required=True, metavar="DIR", help="the node's directory (data, commitlog, logs)")
    p.add_argument("--port", type=int, metavar="N", help="CQL port (default: a free one)")
    p.add_argument("--yaml", metavar="FILE", help="cassandra.yaml settings over the defaults (nested or dotted keys)")
    p.add_argument("--heap", default="1G", metavar="SIZE", help="heap, e.g. 1G or 1536M (default 1G)")
    p.add_argument("--cassandra-version", default=None, help="Cassandra release from Maven (default 5.0.6)")
    p.set_defaults(func=cmd_node)
