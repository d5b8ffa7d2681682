"""`nosqltune report`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_report(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from .data import load_views
    from .page import build

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    views = load_views(args.study, args.study_name)
    index, files = build(views, out, source=f"{args.study}" + (f" / {args.study_name}" if args.study_name else ""))
    if args.json:
        print(json.dumps({"report": str(index), "figures": [str(f) for f in files],
                          "studies": [v.name for v in views]}))
    else:
        print(f"report: {index} ({len(files)} figures, also as PNG files in {out})")
    return 0
