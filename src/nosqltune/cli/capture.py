"""`nosqltune capture LOG_DIR...`: a node's full query log (or every node's) turned into a workload file."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ..errors import UsageError


def default_out(name: str) -> Path:
    from ..runtime.paths import datasets_dir

    return datasets_dir() / "captures" / f"{name}.json"


def cmd_capture(args: argparse.Namespace) -> int:
    from ..systems.cassandra.querylog import capture_logs, check_log_dir
    from ..workloads.capture import redact, summary, write_capture

    logs = [Path(p) for p in args.logs]
    if args.sample < 1:
        raise UsageError(f"--sample must be at least 1 value per kind, not {args.sample}")
    name = args.name or logs[0].resolve().name
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
        raise UsageError(f"--name {name!r}: use letters, digits, '.', '_' and '-'")
    out = Path(args.out) if args.out else default_out(name)
    if out.exists() and out.is_dir():
        raise UsageError(f"--out {out} is a directory: give the capture file's path")
    for log in logs:   # every log checked before any is read
        check_log_dir(log)
    capture = capture_logs(logs, sample=args.sample)
    if args.redact:
        capture = redact(capture)
    write_capture(capture, out)
    if args.json:
        print(json.dumps({"file": str(out), **{k: v for k, v in capture.items() if k not in ("kinds", "events")},
                          "kinds": [{k: v for k, v in kind.items() if k != "values"} for kind in capture["kinds"]],
                          "pace": {"step_s": capture["pace"]["step_s"],
                                   "seconds": len(capture["pace"]["statements"])}}, indent=1))
        return 0
    for line in summary(capture):
        print(line)
    held = "redacted" if args.redact else "the log's own"
    print(f"written to {out} (it holds {held} values: keep it with "
          f"the data); replay it with --workload replay:{out}")
    return 0


def add_parsers(sub) -> None:
    from ..workloads.capture import SAMPLE_PER_KIND

    p = sub.add_parser(
        "capture", help="turn a full query log (nodetool enablefullquerylog) into a workload file",
        description="Read Cassandra full query logs (the directory `nodetool enablefullquerylog --path DIR` "
                    "writes; read it after `nodetool disablefullquerylog`) and write a workload file: the query "
                    "kinds as prepared statements with their shares, a sample of each kind's values, and the "
                    "recorded pace (statements per second, and the sequence a replay plays back). A log holds "
                    "what one node coordinated: give every node's log to capture the cluster's traffic (merged "
                    "by start time). Batches, schema changes and queries of the system keyspaces are left out "
                    "and counted. The values are your data: the file is written, readable by you only, to the "
                    "dataset folder unless --out says where; --redact replaces them.")
    p.add_argument("logs", nargs="+", metavar="LOG_DIR", help="a full query log directory (one per node)")
    p.add_argument("--out", metavar="FILE", help="the workload file (default: <datasets>/captures/NAME.json)")
    p.add_argument("--name", help="the capture's name (default: the first log directory's name)")
    p.add_argument("--redact", action="store_true",
                   help="replace every sampled value by one of the same size (the same value always by the same "
                        "replacement, so the keys' repeat pattern is kept); none of the log's values is kept")
    p.add_argument("--sample", type=int, default=SAMPLE_PER_KIND, metavar="N",
                   help=f"values kept per query kind (a uniform sample of its runs; default {SAMPLE_PER_KIND})")
    p.add_argument("--json", action="store_true", help="print what the file holds as JSON (without values)")
    p.set_defaults(func=cmd_capture)
