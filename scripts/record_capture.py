"""Record the shipped capture (src/nosqltune/workloads/captures/keyvalue.json.gz): a node running the shipped
keyvalue profile's operations at a fixed rate under the full query log, read back by `nosqltune capture`'s reader.
With --example DIR (`make capture-example`): the same on a node that holds the profile's data, the raw log kept in
DIR/querylog and the table's snapshot after the run in DIR/snapshot, to try capture and replay from a log and a
snapshot as a user's.

    .venv/bin/python scripts/record_capture.py [--seconds 60] [--rate 200]
    .venv/bin/python scripts/record_capture.py --example build/capture-example

Its values are the profile's generated data, not anybody's production data. Replay the shipped one with
`nosqltune bench --workload replay:keyvalue --data profile:keyvalue` (the records it was made on are in the file)."""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from nosqltune.systems.cassandra.querylog import record_profile
from nosqltune.workloads.capture import SHIPPED_CAPTURES, summary, write_capture
from nosqltune.workloads.spec import make_workload

RECORDS = 5000   # the profile's data a replay runs on: the keys the capture's statements name
SAMPLE = 300     # values kept per kind: the file stays small enough to ship


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rate", type=int, default=200, help="statements per second")
    parser.add_argument("--example", metavar="DIR", help="record with the data, keep the log and the snapshot here")
    args = parser.parse_args()
    workload = make_workload("profile:keyvalue", records=RECORDS, operations=args.seconds * args.rate,
                             threads=4, target=args.rate, warmup_operations=0)
    if args.example:
        out = Path(args.example)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        capture = record_profile(workload, out, sample=SAMPLE, with_data=True)
        for left in ("node", "client", "bulk", "tmp"):
            shutil.rmtree(out / left, ignore_errors=True)
        print("\n".join(summary(capture)))
        print(f"the log is in {out / 'querylog'}, the table's snapshot in {out / 'snapshot'}; try:\n"
              f"  nosqltune capture {out / 'querylog'} --name example\n"
              f"  nosqltune bench --workload replay:example --data snapshot:{out / 'snapshot'}")
        return
    with tempfile.TemporaryDirectory(prefix="nosqltune-record-") as home:
        capture = record_profile(workload, Path(home), sample=SAMPLE)
    capture["sources"] = [{**s, "path": "a node running profile:keyvalue"} for s in capture["sources"]]
    out = SHIPPED_CAPTURES / "keyvalue.json.gz"
    write_capture(capture, out)
    out.chmod(0o644)   # generated data: the shipped file is readable by all
    print("\n".join(summary(capture)))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
