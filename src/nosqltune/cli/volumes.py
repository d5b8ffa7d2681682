"""`nosqltune volumes`: the cloud volumes a node's data can live on (--volume NAME), their caps and sources."""

from __future__ import annotations

import argparse
import json
import textwrap


def cmd_volumes(args: argparse.Namespace) -> int:
    from ..volumes import presets

    found = presets()
    if args.json:
        print(json.dumps([{"name": p.name, "summary": p.summary, **p.volume.to_dict(), "source": p.source,
                           "read_on": p.read_on} for p in found.values()]))
        return 0
    for p in found.values():
        print(p.volume.describe())
        print(textwrap.fill(p.summary, width=110, initial_indent="  ", subsequent_indent="  "))
        print(textwrap.fill(f"source (read {p.read_on}): {p.source}", width=110, initial_indent="  ",
                            subsequent_indent="    "))
    print("\nEach direction is capped on its own (a provider caps reads and writes together); no latency is added "
          "per I/O unless a preset or --disk-latency-ms gives one (then through FUSE, with its own ~0.3-0.5 ms); on "
          "cgroup v1 buffered write-back passes uncapped: each trial's bottleneck line says how much.")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("volumes", help="list the cloud volumes (--volume NAME): caps, read-ahead, sources",
                       description="The volume presets bench, tune, compare, calibrate and collect take with "
                                   "--volume NAME: each node's data on a loop-mounted filesystem of its own, its I/O "
                                   "capped as the provider caps one such volume (--disk-iops, --disk-mbps and "
                                   "--disk-latency-ms win over a preset's figures).")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_volumes)
