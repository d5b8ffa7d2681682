"""Restore-from-snapshot versus reloading the data, side by side and interleaved, on real Cassandra.

Both paths end at the same point: a booted node holding the loaded dataset, ready for the workload.
  reload  = boot a fresh node + create the schema + load the records with YCSB (what the irace
            study did before every trial); its drain and stop are not counted, to be fair to it.
  link    = restore the dataset directory (hard links for immutable SSTable files, copies of the rest)
            + boot the node on it.
  copy    = full copy of the dataset directory + boot.
Writes bench/results/restore_vs_reload.json and .md.

    python bench/restore_vs_reload.py [--records 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from nosqltune.runtime.environment import fingerprint  # noqa: E402
from nosqltune.knobs import load_space  # noqa: E402
from nosqltune.runtime.paths import work_dir  # noqa: E402
from nosqltune.systems.cassandra.config import place  # noqa: E402
from nosqltune.systems.dataset import dataset_for  # noqa: E402
from nosqltune.systems.cassandra.node import CassandraNode  # noqa: E402
from nosqltune.systems.cassandra.trial import build_dataset, ensure_dataset  # noqa: E402
from nosqltune.systems.base import TrialSettings  # noqa: E402
from nosqltune.workloads.spec import make_workload  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    space = load_space("cassandra")
    settings = TrialSettings()
    workload = make_workload("ycsb-a", records=args.records)
    dataset, _ = ensure_dataset(space, {}, workload, settings, progress=print)
    rows = []
    for rnd in range(args.rounds):
        # reload: a throwaway dataset build; boot + schema + load are timed inside it
        scratch = dataset_for(f"bench-reload-{rnd}")
        build_dataset(scratch, workload, place(space, {}), settings, progress=print)
        meta = scratch.meta()
        rows.append({"round": rnd, "method": "reload", "seconds": meta["boot_s"] + meta["load_s"],
                     "detail": {"boot_s": meta["boot_s"], "load_s": meta["load_s"]}})
        shutil.rmtree(scratch.root)
        for method in ("link", "copy"):
            home = work_dir() / "nodes" / f"bench-{method}-{rnd}"
            restore_s = dataset.restore_into(home / "data", method)
            with CassandraNode(home=home, version=settings.cassandra.cassandra_version,
                               heap_mb=settings.cassandra.heap_mb) as node:
                boot_s = node.start()
            shutil.rmtree(home)
            rows.append({"round": rnd, "method": method, "seconds": restore_s + boot_s,
                         "detail": {"restore_s": restore_s, "boot_s": boot_s}})
        print(rows[-3:], flush=True)
    means = {m: statistics.mean(r["seconds"] for r in rows if r["method"] == m) for m in ("reload", "link", "copy")}
    result = {"records": args.records, "rounds": args.rounds, "rows": rows, "mean_seconds": means,
              "reload_over_link": means["reload"] / means["link"], "reload_over_copy": means["reload"] / means["copy"],
              "environment": fingerprint("cassandra", settings.cassandra.cassandra_version), "measured_at": time.time()}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "restore_vs_reload.json").write_text(json.dumps(result, indent=2))
    lines = [f"# Restore vs reload ({args.records} records, {args.rounds} interleaved rounds)", "",
             "Seconds until a booted node holds the dataset.", "",
             "| method | mean s | rounds |", "|---|---|---|"]
    for m in ("reload", "link", "copy"):
        per = ", ".join(f"{r['seconds']:.1f}" for r in rows if r["method"] == m)
        lines.append(f"| {m} | {means[m]:.1f} | {per} |")
    lines += ["", f"reload / link = {result['reload_over_link']:.1f}x; reload / copy = "
              f"{result['reload_over_copy']:.1f}x (target: at least 3x)"]
    (RESULTS / "restore_vs_reload.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
