"""`nosqltune export`: every trial of a store as CSV or JSON."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from typing import Any

from ..errors import UsageError
from .options import DEFAULT_STUDY


# ---------------------------------------------------------------------------------------------- export
FLAT = ("id", "number", "state", "tag", "failure_kind", "error", "started_at", "finished_at", "environment_id")


def flatten(row: dict[str, Any]) -> dict[str, Any]:
    """One trial as one flat record: fields, knob values (knob.NAME), workload, summary metrics, timings."""
    out = {k: row.get(k) for k in FLAT}
    out["study"] = row.get("study_name")
    workload = row.get("workload") or {}
    out["workload"] = workload.get("name")
    out["read_ratio"] = (workload.get("mix") or {}).get("readproportion")
    for key in ("records", "operations", "threads"):
        out[f"workload.{key}"] = workload.get(key)
    for name, value in sorted((row.get("config") or {}).items()):
        out[f"knob.{name}"] = value
    for name, value in sorted(((row.get("metrics") or {}).get("summary") or {}).items()):
        out[f"metric.{name}"] = value
    for name, value in sorted((row.get("timings") or {}).items()):
        out[f"timing.{name}"] = value
    meta = row.get("meta") or {}
    for key in ("candidate", "round", "group", "suggestion", "optimizer"):
        if key in meta:
            out[f"meta.{key}"] = meta[key]
    return out


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..store import open_for_reading

    if args.out:
        folder = Path(args.out).absolute().parent
        if Path(args.out).is_dir():
            raise UsageError(f"--out {args.out} is a folder: give a file name, e.g. {Path(args.out) / 'trials.csv'}")
        if not folder.is_dir():
            raise UsageError(f"--out {args.out}: there is no folder {folder}: create it, or write elsewhere")
    store = open_for_reading(args.study)
    try:
        studies = {s["id"]: s for s in store.studies()}
        if args.study_name:
            chosen = [s for s in studies.values() if s["name"] == args.study_name]
            if not chosen:
                raise UsageError(f"no study named '{args.study_name}' in {args.study} "
                                 f"(studies: {', '.join(s['name'] for s in studies.values()) or 'none'})")
            ids = {chosen[0]["id"]}
        else:
            ids = set(studies)
        rows = [dict(r, study_name=studies[r["study_id"]]["name"]) for r in store.trials() if r["study_id"] in ids]
    finally:
        store.close()
    out = open(args.out, "w", newline="") if args.out else sys.stdout
    try:
        if args.format == "json":
            json.dump(rows, out, default=str)
            out.write("\n")
        else:
            flat = [flatten(r) for r in rows]
            columns = list(dict.fromkeys(k for r in flat for k in r))
            writer = csv.DictWriter(out, fieldnames=columns)
            writer.writeheader()
            writer.writerows(flat)
    finally:
        if args.out:
            out.close()
    if args.out:
        print(f"{len(rows)} trials written to {args.out}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("export", help="every trial of a store as CSV or JSON",
                       description="Write the trials (all studies, or --study-name) as CSV (one flat row per trial: "
                                   "knob.*, metric.*, timing.* columns) or JSON (the stored records).")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store: SQLite path or postgresql:// URL (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="only this study")
    p.add_argument("--format", choices=["csv", "json"], default="csv", help="output format (csv)")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_export)
