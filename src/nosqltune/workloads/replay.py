"""Replaying a captured workload in trials (`--workload replay:FILE[:PACE]`).

The capture (workloads/capture.py) holds the query kinds, a sample of each kind's values and the sequence of
statements with their start times. A trial replays a window of that sequence with loadgen's ReplayWorkload: each
statement as its kind's prepared statement, bound to the kind's sampled values in turn, at the recorded pace, a
multiple of it (`x2`), or as fast as the node answers (`max`).

What is stored with a trial (`Workload.replay`) names the capture (its path and digest), the pace, the window and
the kinds without their values: the values stay in the capture file and in the plan file written from it into the
dataset folder, never in a study's store.

Kinds on tables the data lacks, or naming columns its table lacks (a snapshot of another schema), are left out of
the replay, with their share said; a capture nothing of which can be replayed on the data is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Collection

from .capture import CaptureError, read_capture

PREFIX = "replay:"
REPLAY_WORKLOAD = "nosqltune.loadgen.ReplayWorkload"
PACE = re.compile(r"recorded|max|x(\d+(?:\.\d+)?)")


def split_spec(spec: str) -> tuple[Path, str]:
    """`replay:FILE[:PACE]` -> (FILE, PACE); PACE is recorded (the default), xF (F times the recorded pace) or max."""
    body = spec[len(PREFIX):]
    path, pace = body, "recorded"
    head, sep, tail = body.rpartition(":")
    if sep and PACE.fullmatch(tail.lower()):
        path, pace = head, tail.lower()
    elif sep and re.fullmatch(r"x.*|rec.*|max.*", tail.lower()):
        raise CaptureError(f"replay pace {tail!r}: recorded, max, or xF with F > 0 (x2: twice the recorded pace)")
    match = PACE.fullmatch(pace)
    if match.group(1) is not None and float(match.group(1)) <= 0:
        raise CaptureError(f"replay pace {pace!r}: xF needs F > 0")
    if not path:
        raise CaptureError("--workload replay: needs the capture file (replay:FILE, made by `nosqltune capture`)")
    return Path(path), pace


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pace_speed(pace: str) -> float | None:
    """How many times the recorded pace: 1 for recorded, F for xF, None for max."""
    if pace == "max":
        return None
    return 1.0 if pace == "recorded" else float(pace[1:])


def replay_of(path: Path, pace: str, tables: set[str], capture: dict[str, Any] | None = None,
              columns: Collection[str] | None = None) -> dict[str, Any]:
    """What a trial stores of the replay of the capture at `path` (`capture`: its content, when read already) on
    data holding `tables` (keyspace.table) whose table has `columns` (None: not checked): no values. Kinds on
    other tables, or naming columns the table lacks, are left out; CaptureError when none is left."""
    from .profile import query_columns

    capture = capture if capture is not None else read_capture(path)
    on_table = [k for k in capture["kinds"] if f"{k['keyspace']}.{k['table']}" in tables]
    if not on_table:
        raise CaptureError(f"the capture's tables ({', '.join(capture['tables'])}) are not in the data "
                           f"({', '.join(sorted(tables)) or 'none'}): give the data the capture was made on")
    lacking = {}
    for k in on_table if columns is not None else ():
        bound, named = query_columns(k["cql"])
        missing = sorted({c for c in bound + named if c not in columns})
        if missing:
            lacking[k["name"]] = missing
    if len(lacking) == len(on_table):
        named = sorted({c for cs in lacking.values() for c in cs})
        raise CaptureError(f"the data's table {', '.join(sorted(tables))} lacks the column(s) {', '.join(named)} "
                           "the capture's statements name: its schema does not match the capture")
    kept = [k for k in on_table if k["name"] not in lacking]
    left = [k for k in capture["kinds"] if k not in kept]
    statements = sum(k["count"] for k in kept)
    return {
        "capture": str(Path(path).resolve()), "digest": digest(path), "pace": pace,
        "statements": statements,
        "kinds": [{"name": k["name"], "cql": k["cql"], "operation": k["operation"], "share": k["count"] / statements}
                  for k in kept],
        "left_out": {k["name"]: k["share"] for k in left},
        **({"lacking": lacking} if lacking else {}),   # kinds left out for the columns the table lacks
        "seconds": capture["seconds"],
        "redacted": capture.get("redacted", False),
    }


def asked_rate(capture: dict[str, Any], replay: dict[str, Any], warmup: int, operations: int) -> float | None:
    """The statements per second the measured window of `replay` (of `capture`) asks of the node at its pace (None
    at max): its statements over the log's span of them, times the pace. Past the log's end the replay goes on from
    its start; the rate is then the whole log's."""
    speed = pace_speed(replay["pace"])
    if speed is None:
        return None
    kept = {i for i, k in enumerate(capture["kinds"]) if k["name"] in {kind["name"] for kind in replay["kinds"]}}
    times = [t for t, k in zip(capture["events"]["t_ms"], capture["events"]["kind"]) if k in kept]
    first = replay.get("start", 0) + warmup
    window = times[first:first + operations] if first + operations <= len(times) else times
    span_s = max(window[-1] - window[0], 1) / 1000 if len(window) > 1 else 1.0
    return len(window) / span_s * speed


def plan_file(replay: dict[str, Any]) -> Path:
    """The plan loadgen's ReplayWorkload reads, written once into the dataset folder (<datasets>/captures: it holds
    the values too, readable by the owner only): the kinds kept, their values, and the sequence of their
    statements. CaptureError when the capture changed since the study recorded it."""
    from ..runtime.paths import datasets_dir

    capture_path = Path(replay["capture"])
    kinds = hashlib.sha256(" ".join(k["name"] for k in replay["kinds"]).encode()).hexdigest()[:6]
    plan = datasets_dir() / "captures" / f"{capture_path.name.split('.')[0]}-{replay['digest'][:12]}-{kinds}.plan"
    if plan.exists():
        return plan
    if not capture_path.exists() or digest(capture_path) != replay["digest"]:
        raise CaptureError(f"the capture {capture_path} is gone or changed since this replay was set up "
                           f"(digest {replay['digest'][:12]})")
    capture = read_capture(capture_path)
    names = [k["name"] for k in replay["kinds"]]
    number = {name: i for i, name in enumerate(names)}
    by_name = {k["name"]: k for k in capture["kinds"]}
    old_index = {k["name"]: i for i, k in enumerate(capture["kinds"])}
    lines = []
    for i, name in enumerate(names):
        kind = by_name[name]
        lines.append(f"K\t{i}\t{kind['consistency']}\t{int(kind['literals'])}\t{name}\t{kind['cql']}")
        for values in kind["values"]:
            lines.append(f"V\t{i}\t" + ",".join(_plan_value(v, kind["literals"]) for v in values))
    keep = {old_index[name]: number[name] for name in names}
    for t, k in zip(capture["events"]["t_ms"], capture["events"]["kind"]):
        if k in keep:
            lines.append(f"E\t{t}\t{keep[k]}")
    plan.parent.mkdir(parents=True, exist_ok=True)
    tmp = plan.with_name(plan.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")
    os.replace(tmp, plan)
    return plan


def _plan_value(value: Any, literal: bool) -> str:
    if value is None:
        return "-"
    return value.encode().hex() if literal else value


def replay_lines(workload) -> list[str]:
    """What a trial of `workload` replays, in lines for people: the window of the log, the pace, what is left out."""
    replay = workload.replay
    start = replay.get("start", 0)
    warm, measured = workload.warmup_operations, workload.operations
    total = replay["statements"]
    speed = pace_speed(replay["pace"])
    seconds = replay["seconds"] * min(1.0, (warm + measured) / total) if total else 0.0
    lines = [f"replaying {replay['capture']}: statements {start + 1}-{start + warm} warm up, "
             f"{start + warm + 1}-{start + warm + measured} measured, of its {total}"
             + (" (past its end the replay starts again from its start)" if start + warm + measured > total else "")
             + (f"; {replay['pace']} pace, about {seconds / speed:.0f} s of the log's time" if speed else
                "; as fast as the node answers")]
    nodes = replay.get("nodes") or {}
    if nodes and nodes["logs"] > nodes["snapshots"]:
        lines.append(f"  the capture merges {nodes['logs']} logs and the data holds {nodes['snapshots']} node(s)' "
                     "snapshots: reads of keys only the other nodes hold find no row (counted apart)")
    elif nodes and nodes["logs"] < nodes["snapshots"]:
        lines.append(f"  the capture holds {nodes['logs']} log(s) and the data {nodes['snapshots']} nodes' "
                     "snapshots: the replay sends one node's share of the traffic to the data of all")
    lacking = replay.get("lacking") or {}
    for name, share in replay.get("left_out", {}).items():
        why = (f"it names {', '.join(lacking[name])}, which the data's table lacks" if name in lacking else
               "its table is not in the data")
        lines.append(f"  left out: {name} ({share:.1%} of the capture's statements), {why}")
    return lines


def missed_reads(metrics: dict[str, Any]) -> str | None:
    """How many of a replay trial's reads found no row, in words (None when all found theirs): a key the data lacks,
    the sign of a capture and a snapshot from different nodes or times (or a redacted capture)."""
    ops = metrics.get("operations") or {}
    missed = {op[:-len("-MISS")]: s.get("count", 0) for op, s in ops.items() if op.endswith("-MISS")}
    if not any(missed.values()):
        return None
    reads = sum(n + (ops.get(op) or {}).get("count", 0) for op, n in missed.items())
    total = sum(missed.values())
    return (f"{total} of {reads} reads found no row ({total / reads:.1%}): keys the data lacks (a capture and a "
            "snapshot of other nodes or times, or a redacted capture, read keys the data does not hold)")
