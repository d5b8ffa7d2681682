"""`nosqltune report`: the HTML report of a store's tuning studies."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .options import DEFAULT_STUDY


def cmd_report(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..report.online import load_report
    from ..report.page import build

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory: give a folder for the report")
    views, online = load_report(args.study, args.study_name)
    index, files = build(views, out, source=f"{args.study}" + (f" / {args.study_name}" if args.study_name else ""),
                         runs=online)
    if args.json:
        print(json.dumps({"report": str(index), "figures": [str(f) for f in files],
                          "studies": [v.name for v in views], "online": [r.name for r in online]}))
    else:
        print(f"report: {index} ({len(files)} figures, also as PNG files in {out})")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "report", help="a self-contained HTML report (plots also as PNG) of a store's tuning studies and online runs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write OUT/index.html, one page that opens offline (figures embedded), and every figure as a "
                    "PNG file in OUT: study summary and environment fingerprint, best-so-far convergence per "
                    "optimizer, speedup boxplots with p-values from `nosqltune compare`, knob values per "
                    "iteration, knob/objective correlations, knob importance, node internals over the measured "
                    "phase for default vs best, predicted vs measured, and the best configuration as a "
                    "cassandra.yaml fragment with its diff against the default; for each `nosqltune online` run, "
                    "its timeline (throughput, p99 and the observed mix per window, with the shifts, live changes, "
                    "rollbacks, restart decisions and a driven trace's phases) and its decisions.\n\nExamples:\n"
                    "  nosqltune report --study runs/a.db --out report/\n"
                    "  nosqltune report --study runs/a.db --study-name tune-gp --out report-gp/ --json")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store: SQLite path or postgresql:// URL (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="only this tuning study or online run (default: every one)")
    p.add_argument("--out", default="report", metavar="DIR", help="output folder (default report/)")
    p.add_argument("--json", action="store_true", help="print the written files as JSON")
    p.set_defaults(func=cmd_report)
