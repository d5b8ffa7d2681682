#!/usr/bin/env python3
"""Loading a dataset in bulk versus over CQL: the same dataset (1M YCSB records by default) built both ways in one
run, then checked the same way.

  cql   = boot a fresh node, create the schema, YCSB's load phase inserts the records over CQL (16 threads), drain.
  bulk  = YCSB's load phase hands the records to Cassandra's own SSTable writer in a client JVM (loadgen's
          SSTableWriterDB), then a fresh node boots, the schema is created, the node imports the SSTables
          (nodetool import), drain.

Per method: the seconds of the load step (CQL: the client's run; bulk: writing + importing) and of the whole
build, records/s, the dataset's size on disk and its SSTables. Then each dataset is restored into a node that
counts its rows (token range by token range), and serves workload C trials (all reads; a record not found counts
as an error), interleaved with the other dataset's.

    python bench/bulk_load.py [--records 1000000] [--operations 100000] [--trials 3] [--skip-check] [--keep]

Writes bench/results/bulk_load.json and .md. The datasets go where trials find them (NOSQLTUNE_DATASETS, or the
user's cache) and are removed at the end (--keep keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from common import RESULTS, log  # noqa: E402  bench/common.py

from nosqltune.knobs import load_space  # noqa: E402
from nosqltune.runtime.environment import fingerprint  # noqa: E402
from nosqltune.runtime.paths import work_dir  # noqa: E402
from nosqltune.systems.base import TrialSettings  # noqa: E402
from nosqltune.systems.cassandra import cql  # noqa: E402
from nosqltune.systems.cassandra.node import CassandraNode  # noqa: E402
from nosqltune.systems.cassandra.config import place  # noqa: E402
from nosqltune.systems.cassandra.trial import (cassandra_dataset_key, ensure_dataset, load_method,  # noqa: E402
                                               run_trial)
from nosqltune.systems.dataset import Dataset, dataset_for  # noqa: E402
from nosqltune.workloads.spec import make_workload  # noqa: E402

METHODS = ("bulk", "cql")
TOKEN_RANGES = 64


def disk_usage(root: Path) -> dict[str, int]:
    """Bytes of the dataset's data folder, of the YCSB table alone, its SSTables (Data files) and their sizes."""
    total = table = 0
    sizes = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            size = os.path.getsize(os.path.join(dirpath, name))
            total += size
            if f"{os.sep}ycsb{os.sep}usertable-" in dirpath + os.sep:
                table += size
                if name.endswith("-Data.db"):
                    sizes.append(size)
    return {"bytes": total, "table_bytes": table, "sstables": len(sizes),
            "sstable_mib": sorted((round(size / (1 << 20)) for size in sizes), reverse=True)}


def count_rows(dataset: Dataset, settings: TrialSettings) -> int:
    """The dataset's rows, counted by a node restored from it, one token range at a time (no query times out)."""
    home = work_dir() / "nodes" / "bench-bulk-count"
    shutil.rmtree(home, ignore_errors=True)
    dataset.restore_into(home / "data")
    try:
        with CassandraNode(home=home, version=settings.cassandra.cassandra_version,
                           heap_mb=settings.cassandra.heap_mb) as node:
            node.start(settings.boot_timeout)
            lo, hi = -2 ** 63, 2 ** 63 - 1
            bounds = [lo + (hi - lo) * i // TOKEN_RANGES for i in range(TOKEN_RANGES)] + [hi]
            total = 0
            with cql.session(node.address, node.ports.native) as sess:   # no key has the minimum token
                for start, end in zip(bounds, bounds[1:]):
                    total += sess.execute("SELECT count(*) FROM ycsb.usertable WHERE token(y_id) > %s AND "
                                          "token(y_id) <= %s", (start, end)).one()[0]
            return total
    finally:
        shutil.rmtree(home, ignore_errors=True)


def dataset_of(workload, settings: TrialSettings) -> Dataset:
    """The dataset a trial of these settings restores (the default knobs, one node)."""
    placed = place(load_space("cassandra"), {})
    return dataset_for(cassandra_dataset_key(settings.cassandra.cassandra_version, workload.dataset_properties(),
                                             placed.reload, settings.cassandra.heap_mb, load_method(settings)))


def build(method: str, workload, settings: TrialSettings) -> tuple[Dataset, dict]:
    space = load_space("cassandra")
    settings = replace(settings, load_method=method)
    shutil.rmtree(dataset_of(workload, settings).root, ignore_errors=True)   # built afresh, timed
    log(f"{method}: building {workload.records} records")
    started = time.monotonic()
    dataset, _ = ensure_dataset(space, {}, workload, settings, progress=log)
    build_s = time.monotonic() - started
    meta = dataset.meta()
    assert meta["load_method"] == method, meta
    row = {"method": method, "build_s": build_s, "boot_s": meta["boot_s"], "load_s": meta["load_s"],
           "drain_s": meta["drain_s"], "load_records_s": workload.records / meta["load_s"],
           "build_records_s": workload.records / build_s, **disk_usage(dataset.data_dir)}
    if method == "bulk":
        row.update({k: meta["bulk"][k] for k in ("write_s", "import_s", "writer_throughput_ops_s", "buffer_mb",
                                                 "heap_mb")},
                   written_sstables=meta["bulk"]["sstables"], written_bytes=meta["bulk"]["bytes"])
    log(f"{method}: {json.dumps(row)}")
    return dataset, row


def count(dataset: Dataset, row: dict, settings: TrialSettings) -> None:
    row["rows"] = count_rows(dataset, replace(settings, load_method=row["method"]))
    log(f"{row['method']}: {row['rows']} rows")


def trial(row: dict, trial_workload, settings: TrialSettings) -> None:
    result = run_trial(load_space("cassandra"), {}, trial_workload, replace(settings, load_method=row["method"]),
                       progress=log)
    summary = result.summary
    internals = result.internals
    row.setdefault("trials", []).append({
        "state": result.state, "error": result.error, "errors": summary.get("errors"),
        "reads": summary.get("read_count"), "throughput_ops_s": summary.get("throughput_ops_s"),
        "read_p99_ms": summary.get("read_p99_ms"),
        "sstables_per_read": (internals.get("sstables_per_read") or {}).get("mean"),
        "compactions_during_run": internals.get("compactions_completed_run"),
        "pending_compactions_after": internals.get("pending_compactions"),
        "sstables_after": internals.get("live_sstable_count"),
        "dataset_build_s": result.timings.get("dataset_build_s", 0)})
    log(f"{row['method']}: workload C trial {row['trials'][-1]}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--operations", type=int, default=100_000, help="of each workload C trial")
    p.add_argument("--trials", type=int, default=3, help="workload C trials on each dataset, interleaved")
    p.add_argument("--skip-check", action="store_true", help="no row count, no workload C trial")
    p.add_argument("--keep", action="store_true", help="keep the two datasets")
    p.add_argument("--output", default="bulk_load", help="name of the results files in bench/results")
    a = p.parse_args()
    settings = TrialSettings(jit="c1")   # nosqltune's trials run with --jit c1 unless told
    workload = make_workload("ycsb-c", records=a.records)
    trial_workload = make_workload("ycsb-c", records=a.records, operations=a.operations)
    # not timed: Maven builds loadgen and resolves Cassandra if needed, the JVMs' jars reach the page cache
    warmup = make_workload("ycsb-c", records=2000)
    for method in METHODS:
        dataset, _ = build(method, warmup, settings)
        shutil.rmtree(dataset.root)
    rows, datasets = {}, {}
    for method in METHODS:
        datasets[method], rows[method] = build(method, workload, settings)
    if not a.skip_check:
        for method in METHODS:
            count(datasets[method], rows[method], settings)
        for round_ in range(a.trials):   # interleaved, the order alternating
            for method in (METHODS if round_ % 2 == 0 else METHODS[::-1]):
                trial(rows[method], trial_workload, settings)
    if not a.keep:
        for dataset in datasets.values():
            shutil.rmtree(dataset.root, ignore_errors=True)
    bulk, cql_ = rows["bulk"], rows["cql"]
    result = {"records": a.records, "methods": rows, "load_speedup": cql_["load_s"] / bulk["load_s"],
              "build_speedup": cql_["build_s"] / bulk["build_s"], "settings": settings.to_dict(),
              "environment": fingerprint("cassandra", settings.cassandra.cassandra_version), "measured_at": time.time()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{a.output}.json").write_text(json.dumps(result, indent=2))
    (RESULTS / f"{a.output}.md").write_text(markdown(result, a))
    print(markdown(result, a))
    return 0


def markdown(result: dict, a) -> str:
    rows = result["methods"]
    mib = 1 << 20
    lines = [f"# Loading {result['records']:,} YCSB records: bulk (SSTables written and imported) vs CQL", "",
             "One run on this machine (2 cores), both datasets built one after the other with the same settings "
             "(heap 2 GiB, default knobs; not timed before them: one build of 2,000 records each way, so that Maven, "
             "the jars and the page cache are warm). Load = the load step alone (CQL: YCSB's load phase, 16 threads; "
             "bulk: writing the SSTables before the node boots + importing them); build = from the fresh node's boot "
             "(bulk: from the writer's start) to the drained dataset written back to the disk.", "",
             "| method | load s | load records/s | build s | build records/s | data on disk MiB | table MiB | "
             "SSTables (MiB) |", "|---|---|---|---|---|---|---|---|"]
    for method in METHODS:
        r = rows[method]
        sizes = ", ".join(str(size) for size in r.get("sstable_mib", []))
        lines.append(f"| {method} | {r['load_s']:.1f} | {r['load_records_s']:,.0f} | {r['build_s']:.1f} | "
                     f"{r['build_records_s']:,.0f} | {r['bytes'] / mib:,.0f} | {r['table_bytes'] / mib:,.0f} | "
                     f"{r['sstables']} ({sizes}) |")
    bulk = rows["bulk"]
    lines += ["", "SSTable sizes: size-tiered compaction (the table's default) merges any 4 SSTables of similar size. "
              "A first version of the writer cut 1M records into 8 SSTables of 132 MiB: the first trial on them ran "
              "beside the node merging them (2 compactions pending, 4,900 reads/s against 6,600-7,400 on the "
              "CQL-loaded data). The writer now cuts the data as a load over CQL leaves it: at most 3 SSTables of "
              "each size, each size a third of the one before (`buffer_plan` in systems/cassandra/bulk.py)."]
    lines += ["", f"**Load step: bulk is {result['load_speedup']:.1f}x faster than CQL; whole build: "
              f"{result['build_speedup']:.1f}x** (goal: at least 10x at 1M records).", "",
              f"Bulk load step = writing {bulk['write_s']:.1f} s (the writer JVM from start to exit; YCSB's load "
              f"phase inside it ran at {bulk['writer_throughput_ops_s']:,.0f} records/s; buffers of "
              f"{', '.join(f'{mb:g}' for mb in bulk.get('buffer_mb', []))} MiB, heap {bulk.get('heap_mb')} MiB) "
              f"+ import "
              f"{bulk['import_s']:.1f} s. Boot {bulk['boot_s']:.1f} s (CQL {rows['cql']['boot_s']:.1f} s), drain "
              f"{bulk['drain_s']:.1f} s (CQL {rows['cql']['drain_s']:.1f} s).", "",
              "Why not 10x: the goal assumed ~7,000 inserts/s over CQL; at 1M records the CQL load runs at ~13,500 "
              "here. The writer JVM is CPU-bound on the 2 cores (about 20 CPU-seconds per 1M records, from JFR "
              "samples: Cassandra's own work per row in CQLSSTableWriter, i.e. binding the INSERT's values (validating "
              "every varchar value as UTF-8 alone is ~15% of the CPU), building and serializing the rows, LZ4; then "
              "YCSB's value generation ~10%, the sort, the collector), plus ~2 s to start the JVM and set up "
              "Cassandra's tool mode. CQLSSTableWriter's own unsorted mode was slower still (1M records in 14-15 s at "
              "best, a tree map lookup per row was a third of the CPU; one writer per client thread in its own "
              "directory took twice as long as one shared writer in a 2 GiB heap, and the same in 4 GiB). Boot and "
              "drain (~12 s) are the same both ways and bound the whole build's ratio."]
    if "rows" in bulk:
        lines += ["", f"Check: each dataset restored into a node that counts its rows (64 token ranges), then "
                  f"{a.trials} workload C trials on it, interleaved with the other's ({a.operations:,} reads each "
                  f"after the warm-up, zipfian, 16 threads, --jit c1; a record not found counts as an error):", "",
                  "| method | rows counted | trials complete | reads | errors | reads/s (each trial) | "
                  "read p99 ms (mean) | SSTables per read | compactions during the runs | pending after |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for method in METHODS:
            r, ts = rows[method], rows[method]["trials"]
            ops = ", ".join("-" if t["throughput_ops_s"] is None else f"{t['throughput_ops_s']:,.0f}" for t in ts)
            p99s = [t["read_p99_ms"] for t in ts if t["read_p99_ms"] is not None]
            p99 = f"{sum(p99s) / len(p99s):.2f}" if p99s else "-"
            lines.append(f"| {method} | {r['rows']:,} | {sum(t['state'] == 'COMPLETE' for t in ts)}/{len(ts)} | "
                         f"{sum(t['reads'] or 0 for t in ts)} | {sum(t['errors'] or 0 for t in ts)} | {ops} | {p99} "
                         f"| {max(t.get('sstables_per_read') or 0 for t in ts)} | "
                         f"{sum(t.get('compactions_during_run') or 0 for t in ts)} | "
                         f"{max(t.get('pending_compactions_after') or 0 for t in ts)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
