#!/usr/bin/env python3
"""Where tuning pays, tuned at the shape of production: for each node shape kept as a preset (gp3-node, a gp3-like
cloud node; local-ssd-node, a local NVMe node), a 60-trial GP search on the rig derived from the shape (`tune
--node-shape`), then its best, `latest` and cloud-disk's 1x-tuned GP best (strategies_real.md, exported as a YAML)
against the default at 1x and 2x the shape's data (`compare --data-growth 1,2`), 10 interleaved cold rounds at each
size; bench/results/shape.md.

Goal: x1.3 or more over the default at both sizes, p < 0.05, and the gain at 2x at least 0.85 times the gain at 1x.

Disk, said before anything runs (`--plan` prints it alone): the records the rig derives keep the shape's data to
page cache ratio within the rig's 2 GiB memory cap (gp3-node: about 6.2M records of 1 KB, local-ssd-node 5.2M);
YCSB's records take about 1.1 KB each on disk with LZ4 (2M records: 2.2 GB), so a data layout is about 6.8 GB and
5.7 GB at 1x, twice at 2x. Each layout a trial runs on a capped volume is kept twice: the dataset's folder and the
node's volume image of it (NodeVolume), beside it in the dataset cache; when the cache needs room, a dataset whose
image holds its data whole gives up its folder first (its trials restore from the image). The comparison's four
candidates (three or four layouts: `latest` changes the SSTable format) at 2x then take four images and the newest
folder: gp3-node about 5 x 13.6 GB = 68 GB (local-ssd-node, with no volume, keeps four folders: 46 GB). The cache's
default budget (half the free disk, at most 50 GiB) would evict a layout every run and build it again every round,
so the bench sets NOSQLTUNE_DATASET_BUDGET to the room there is (free disk plus cached datasets) less 12 GB for the
nodes' writes and logs, unless it is set already, and refuses a size that does not fit it. The search builds one
dataset per data layout it visits. Needs root (memory cgroups, capped loop volumes); nothing else may run beside it.
Resumable: tune --resume, and compare continues its rounds. Hours: a build of 6M records takes about 2.5 minutes
here (12M: about 6, with its image), a trial about 1.5; 60 trials and about 20 builds per shape, then 10 rounds x 4
runs x 2 sizes; a new machine builds the four layouts of a size again before its rounds go on.

    python3 bench/shape.py --plan
    python3 bench/shape.py [--shapes gp3-node,local-ssd-node] [--budget 72] [--rounds 10]
    python3 bench/shape.py --write-only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from common import (RESULTS, compare, counted_rows, export_best, kept_notes, log, machines, mechanism_table,  # bench/
                    nosqltune, study_rows, study_settings)  # bench/common.py

SHAPES = ("gp3-node", "local-ssd-node")
FOLDER = RESULTS / "shape"
ONE_X = (RESULTS / "strategies_v5" / "cloud-disk-real.db", "gp")   # the 1x-tuned best set beside
ONE_X_YAML = FOLDER / "cloud-disk-gp-best.yaml"
# on a shape without a volume the 1x best runs without the settings of the node's own volume (read_ahead_kb: a
# trial refuses them where there is no volume to set them on; a local drive keeps its own read-ahead)
ONE_X_LOCAL_YAML = FOLDER / "cloud-disk-gp-best-novolume.yaml"
WORKLOAD = ["--workload", "ycsb-b", "--distribution", "uniform", "--operations", "30000", "--warmup-ops", "10000"]
# the comparison's operations per run where the study's 30,000 measure too few seconds: gp3-node's runs, held to
# about 400 ops/s by the volume's IOPS cap, measure about 75 s; local-ssd-node's node ran the default at about 4,000
# ops/s in its search (6-8 s measured) and the tiered confirmation at 5,500-9,600 (3-5 s), so its comparison measures
# 150,000 (30-40 s at the search's speed, as disk-bound's trials); stored as its own comparison (`x1-ops150000`)
COMPARE_OPERATIONS = {"local-ssd-node": 150_000}
BYTES_PER_RECORD = 1.1e3   # YCSB's 1 KB records on disk with LZ4 (2M records: about 2.2 GB)
GOAL, KEEP = 1.3, 0.85
LAYOUTS = 4        # the comparison's candidates, each a data layout at most
MARGIN = 12e9      # disk left beside the dataset cache: the nodes' writes and logs
BUDGET = "NOSQLTUNE_DATASET_BUDGET"


def db_of(shape: str) -> Path:
    return FOLDER / f"{shape}.db"


def one_x_without_volume() -> Path:
    """ONE_X_YAML less the knobs that set the node's own volume (`applies: volume`), as ONE_X_LOCAL_YAML."""
    import yaml

    from nosqltune.knobs import load_space

    space = load_space("cassandra")
    best = yaml.safe_load(ONE_X_YAML.read_text()) or {}
    kept = {k: v for k, v in best.items() if k not in space or space[k].applies != "volume"}
    dropped = sorted(set(best) - set(kept))
    ONE_X_LOCAL_YAML.write_text(f"# {ONE_X_YAML.name} without {', '.join(dropped) or 'nothing'}: the settings of a "
                                "volume of the node's own, which a shape without a volume has not\n"
                                + yaml.safe_dump(kept, sort_keys=True))
    return ONE_X_LOCAL_YAML


def plan(shapes: list[str]) -> int | None:
    """The disk arithmetic, before anything is built; the dataset budget the comparison at 2x needs (bytes), or None
    when the disk cannot hold it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from nosqltune.runtime.paths import datasets_dir
    from nosqltune.systems.dataset_cache import free_bytes, list_datasets

    folder = datasets_dir()
    cached = sum(i.bytes for i in list_datasets(folder)) if folder.exists() else 0
    room = free_bytes(folder) + cached
    budget = room - MARGIN
    log(f"room for datasets: {room / 1e9:,.1f} GB ({cached / 1e9:,.1f} GB of it cached datasets); a budget of "
        f"{budget / 1e9:,.1f} GB leaves {MARGIN / 1e9:.0f} GB for the nodes' writes and logs")
    fits = True
    for shape in shapes:
        need, said = arithmetic(shape)
        fits &= need <= budget
        log(said + ('' if need <= budget else ' -- MORE THAN THE DISK HOLDS'))
    return budget if fits else None


def arithmetic(shape: str) -> tuple[float, str]:
    """The bytes the shape's comparison at 2x keeps in the dataset cache and its volume images, and the sentence
    that says how."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from nosqltune.shapes import derive, load_shape

    node = load_shape(shape)
    rig = derive(node)
    one = rig.records * BYTES_PER_RECORD
    # on a volume: each layout in its image, the newest also in its folder; on a local disk: the folders (a trial's
    # copy is hard links)
    on_volume = bool(node.volume or node.iops or node.mbps or node.latency_ms)
    need = ((LAYOUTS + 1) if on_volume else LAYOUTS) * 2 * one
    kept = (f"keeps {LAYOUTS} layouts in their volume images and the newest also in its folder" if on_volume
            else f"keeps {LAYOUTS} layouts' folders (no volume: a trial restores by hard links)")
    return need, (f"{shape}: {rig.records:,} records, a layout {one / 1e9:.1f} GB at 1x and {2 * one / 1e9:.1f} GB "
                  f"at 2x; the comparison at 2x {kept}: {need / 1e9:.0f} GB")


def run(shapes: list[str], budget: int, rounds: int) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    from nosqltune.shapes import load_shape

    export_best(*ONE_X, ONE_X_YAML)
    for shape in shapes:
        db = db_of(shape)
        resume = ["--resume"] if study_rows(db, "gp") else []
        # a confirmed search is done: not resumed again (a resume after the tiered warm-up's rule changed would run
        # its confirmation anew)
        if not (study_settings(db, "gp") or {}).get("confirm"):
            nosqltune("tune", "--node-shape", shape, *WORKLOAD, "--optimizer", "gp", "--budget", str(budget),
                      "--objective", "throughput", "--study", str(db), "--study-name", "gp", *resume, capture=False,
                      ok=(0, 1))
        ops = ["--operations", str(COMPARE_OPERATIONS[shape])] if shape in COMPARE_OPERATIONS else []
        one_x = ONE_X_YAML if load_shape(shape).has_volume() else one_x_without_volume()
        compare("--study", str(db), "--study-name", "gp", "--candidates", f"best,{one_x}", "--data-growth", "1,2",
                "--repeat", str(rounds), *ops)


def write(shapes: list[str]) -> None:
    from nosqltune.evaluation.compare import growth_table

    path = RESULTS / "shape.md"
    lines = ["# Where tuning pays, tuned at the shape of production", "",
             "Generated by `python3 bench/shape.py`: per shape, `nosqltune tune --node-shape SHAPE " + " ".join(WORKLOAD)
             + " --optimizer gp --budget 72 --objective throughput --study bench/results/shape/SHAPE.db --study-name "
             "gp` (60 trials of search, then 12 runs of its confirmation: `--budget` counts both), then `nosqltune "
             "compare --study bench/results/shape/SHAPE.db --study-name gp --candidates best,cloud-disk-gp-best.yaml "
             "--data-growth 1,2 --repeat 10` (`latest` added by the command): the best of the search at the shape, "
             "cloud-disk's 1x-tuned GP best and the default at 1x and 2x the shape's data, each size in its own "
             "interleaved cold rounds (`--operations N` added where the shape's runs are fast: "
             + ", ".join(f"{s} {n:,}" for s, n in COMPARE_OPERATIONS.items())
             + f"). Goal: x{GOAL} or more at both sizes, p < 0.05, the 2x gain at least {KEEP} times the 1x gain.", ""]
    lines += kept_notes(path, Path(__file__).name)
    found = {s: (study_settings(db_of(s), "gp") or {}) for s in shapes if db_of(s).exists()}
    if not found:
        path.write_text("\n".join(lines + ["Not run yet."]) + "\n")
        return
    lines += ["The disk arithmetic, said before anything is built (`python3 bench/shape.py --plan`):", "",
              *[f"- {arithmetic(s)[1]}" for s in shapes], "", "The searches:", ""]
    for shape in found:
        rows = counted_rows(db_of(shape), "gp")
        searched = [r for r in rows if r["tag"] == "tune"]
        confirmed = [r for r in rows if r["tag"] == "compare" and r["meta"].get("group", "").startswith("confirm")]
        lines.append(f"- {shape}: {len(searched)} trials searched ({sum(r['state'] == 'COMPLETE' for r in searched)} "
                     f"complete), {len(confirmed)} runs of its confirmation")
    lines += ["", f"**Machines**: {machines({s: (db_of(s), 'gp') for s in found}).line()}.", "",
              "| shape | data | candidate | vs default (mean, 95% interval) | p | rounds |", "|---|---|---|---|---|---|"]
    out = {}
    for shape, settings in found.items():
        # the study's own rounds, each size as soon as it has run
        own = f"ops{COMPARE_OPERATIONS[shape]}" if shape in COMPARE_OPERATIONS else ""
        table = [r for r in growth_table(settings.get("compare") or {}, min_sizes=1) if r["variant"] == own]
        out[shape] = table
        for r in table:
            lines.append(f"| {shape} | x{r['multiple']:g} | {r['candidate']} | x{r['mean_speedup']:.3f} "
                         f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}] | {r['p_value'] if r['p_value'] is not None else '-'}"
                         f" | {r['pairs']} |")
    for shape in found:
        keys = {r["key"] for r in out.get(shape, [])}   # the comparisons in the table (not one given up)
        rows = [r for r in counted_rows(db_of(shape), "gp") if r["tag"] == "compare" and r["state"] == "COMPLETE"
                and any(r["meta"].get("group", "").endswith("-" + k) for k in keys)]
        if not rows:
            continue   # not compared yet
        lines += ["", f"The mechanism on {shape} (means over each candidate's comparison runs at each size):", "",
                  *mechanism_table(rows)]
    path.write_text("\n".join(lines) + "\n")
    (RESULTS / "shape.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    log(f"wrote {path}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", default=",".join(SHAPES))
    p.add_argument("--budget", type=int, default=72, help="the search's trials and its confirmation's 12 runs")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--plan", action="store_true", help="print the disk arithmetic only")
    p.add_argument("--write-only", action="store_true")
    a = p.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    budget = plan(shapes)
    if a.plan:
        return 0
    if not a.write_only:
        if budget is None:
            log("the comparison at 2x does not fit this disk: free some, or run fewer shapes")
            return 2
        if BUDGET not in os.environ:   # the children (tune, compare) see it
            os.environ[BUDGET] = f"{int(budget) >> 20}M"
            log(f"{BUDGET}={os.environ[BUDGET]}")
        run(shapes, a.budget, a.rounds)
    write(shapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
