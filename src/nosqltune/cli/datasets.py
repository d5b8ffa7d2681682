"""`nosqltune datasets list|prune`: the loaded datasets kept in the user's cache, their disk budget, pruning."""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import Any

from ..errors import UsageError
from .text import text_table


def parse_age(text: str, flag: str = "--older-than") -> float:
    """'7d', '12h', '90m', '2w', '45s' or plain seconds -> seconds."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([smhdw]?)\s*", str(text).lower())
    if not match:
        raise UsageError(f"{flag} expects a duration like 7d, 12h or 90m, got {text!r}")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}[match.group(2)]


def parse_keep(text: str) -> int:
    from ..systems.dataset_cache import parse_size

    try:
        return parse_size(text)
    except ValueError:
        raise UsageError(f"--keep expects a size like 20G or 500M, got {text!r}") from None


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "-"


def _flat(value: Any, prefix: str = "") -> list[str]:
    if isinstance(value, dict):
        return [item for k, v in value.items() for item in _flat(v, f"{prefix}{k}.")]
    if isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    return [f"{prefix[:-1]}={value}"]


def shaped_by(info) -> str:
    """The meta that shaped a dataset, in one line: versions, data shape, load-affecting knobs, design."""
    shape = dict(info.shape)
    data = {k: v for k, v in (shape.pop("data", None) or {}).items() if k != "records"}
    knobs = shape.pop("reload_knobs", None) or {}
    parts = _flat(shape) + _flat(data) + _flat(knobs)
    return " ".join(parts) or "-"


def _row(info) -> dict[str, Any]:
    return {**info.to_dict(), "last_used_text": _when(info.last_used)}


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError("datasets needs an action: list or prune (`nosqltune datasets --help` says what each does)")


def cmd_list(args: argparse.Namespace) -> int:
    from ..runtime.paths import check_writable, datasets_dir
    from ..systems.dataset_cache import dataset_budget, format_size, free_bytes, list_datasets

    check_writable("datasets")
    folder = datasets_dir()
    infos = list_datasets(folder, probe_use=True)
    total = sum(i.bytes for i in infos)
    budget = dataset_budget(folder, used=total)
    if args.json:
        print(json.dumps({"folder": str(folder), "budget_bytes": budget.bytes, "budget": budget.source,
                          "total_bytes": total, "free_bytes": free_bytes(folder),
                          "datasets": [_row(i) for i in reversed(infos)]}))
        return 0
    print(f"{len(infos)} dataset(s) in {folder}: {format_size(total)} of a {format_size(budget.bytes)} budget "
          f"({budget.source})")
    if not infos:
        return 0
    table = [["key", "datastore", "records", "size", "kept in", "last used", "in use", "shaped by"]]
    for info in reversed(infos):   # most recently used first
        table.append([info.key, info.system, "-" if info.records is None else str(info.records),
                      format_size(info.bytes), "image" if info.image_only else "folder", _when(info.last_used),
                      "yes" if info.in_use else "-", shaped_by(info)])
    print(text_table(table, right={2, 3}, free_last=True))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from ..runtime.paths import check_writable, datasets_dir
    from ..systems.dataset_cache import budget_setting, format_size, prune

    if args.keep is not None and args.all:
        raise UsageError("give --keep SIZE or --all, not both")
    keep = 0 if args.all else parse_keep(args.keep) if args.keep is not None else None
    older = parse_age(args.older_than) if args.older_than is not None else None
    if keep is None and older is None:
        budget_setting()   # pruning down to the budget: a bad NOSQLTUNE_DATASET_BUDGET is bad input
    check_writable("datasets")
    done = prune(datasets_dir(), keep_bytes=keep, older_than_s=older)
    left = sum(i.bytes for i in done.kept + done.in_use)
    if args.json:
        print(json.dumps({"removed": [_row(i) for i in done.removed], "in_use": [_row(i) for i in done.in_use],
                          "remaining_bytes": left, "remaining": len(done.kept) + len(done.in_use),
                          "target_bytes": done.target_bytes}))
        return 0
    for info in done.removed:
        print(f"removed {info.key}  {info.system}  {format_size(info.bytes)}  last used {_when(info.last_used)}  "
              f"{shaped_by(info)}")
    for info in done.in_use:
        print(f"kept {info.key}: in use by a running trial ({format_size(info.bytes)})")
    freed = sum(i.bytes for i in done.removed)
    print(f"{len(done.removed)} dataset(s) removed ({format_size(freed)}); {len(done.kept) + len(done.in_use)} "
          f"left ({format_size(left)})")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("datasets", help="the loaded datasets trials restore: list them, prune them",
                       description="Datasets (the loaded data every trial restores) are kept in the user's cache "
                                   "(NOSQLTUNE_DATASETS, else $NOSQLTUNE_CACHE/datasets or ~/.cache/nosqltune/"
                                   "datasets) within a disk budget (NOSQLTUNE_DATASET_BUDGET, e.g. 20G; default: "
                                   "the smaller of 50 GiB and half the space free for them): before a build, the "
                                   "least recently used ones go until the new one fits; first a dataset whose "
                                   "volume image holds its data whole gives up its data folder (kept in: image; "
                                   "trials on a volume restore from the image, others copy it back out). A dataset a running "
                                   "trial holds is never removed.")
    p.set_defaults(func=_no_action)
    dsub = p.add_subparsers(dest="datasets_command", metavar="ACTION")
    d = dsub.add_parser("list", help="every dataset: key, datastore, records, size, last use, what shaped it",
                        description="Every dataset, most recently used first: key, datastore, records, size on "
                                    "disk, where its data is kept (its folder, or its volume image alone), last use, whether a running trial holds it, and the meta that shaped "
                                    "it (versions, data shape, load-affecting knobs, design); the budget above.")
    d.add_argument("--json", action="store_true", help="print JSON")
    d.set_defaults(func=cmd_list)
    d = dsub.add_parser("prune", help="remove datasets, least recently used first",
                        description="Remove datasets least recently used first until at most --keep SIZE is left "
                                    "(--all: none; neither: the budget); --older-than DURATION limits it to datasets "
                                    "not used for that long (alone: all of those). Datasets in use by a running "
                                    "trial are kept and named. Prints what it removed.")
    d.add_argument("--keep", metavar="SIZE", help="leave at most this much, e.g. 20G or 500M")
    d.add_argument("--all", action="store_true", help="remove every dataset not in use")
    d.add_argument("--older-than", metavar="DURATION", help="only datasets last used longer ago, e.g. 7d, 12h, 90m")
    d.add_argument("--json", action="store_true", help="print JSON")
    d.set_defaults(func=cmd_prune)
