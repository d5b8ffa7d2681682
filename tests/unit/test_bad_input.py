"""Bad input, table-driven (issue 22, item 2): every command refuses a bad flag, file, URL, name or environment with
exit 2 and one line `nosqltune: error: ...` that names the problem and the fix, and writes nothing.

Each case runs `nosqltune.cli.main` in-process, in a fresh folder that is its working directory (so the default
study `.nosqltune/study.db` would land there), with NOSQLTUNE_HOME and NOSQLTUNE_CACHE inside it; afterwards the
folder must hold exactly the files the case put there itself, unchanged. No datastore, no JVM is started."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from nosqltune.cli import main
from tests import faultlog

pytestmark = pytest.mark.faults

# inputs the cases copy into their folder, built once per module (see `fixtures`)
STUDY = "@study"      # a SQLite store with a finished tuning study (Cassandra, rafiki5, 6 trials)
TRAIN = "@train"      # a SQLite store with a collection over two workloads (for model fit/report)
MODEL = "@model"      # a folder with an rf model of TRAIN fitted for one workload (tuning domain TD2)
FOLDER = "@folder"    # an empty folder
NEWER = "@newer"      # STUDY as a newer nosqltune would leave it (a higher schema version)
FOREIGN = "@foreign"  # a SQLite database of another program


@dataclass(frozen=True)
class Case:
    id: str                      # what is wrong, in a few words (the row of bench/results/faults.md)
    argv: tuple[str, ...]        # {tmp} stands for the case's folder
    expect: str                  # part of the one-line message
    files: dict[str, str] = field(default_factory=dict)   # name -> text, or one of STUDY, TRAIN, MODEL, FOLDER
    env: dict[str, str | None] = field(default_factory=dict)   # None: unset; {tmp} as in argv
    code: int = 2


def case(id: str, argv: str | list[str], expect: str, files: dict | None = None, env: dict | None = None,
         code: int = 2) -> Case:
    return Case(id, tuple(argv.split() if isinstance(argv, str) else argv), expect, dict(files or {}),
                dict(env or {}), code)


KNOBS_BAD_YAML = "concurrent_writes: [64\n"
PROPS = "readproportion=0.5\nupdateproportion=0.5\n"
TARGET_OK = """\
name: t
knobs: redis
binding: redis
endpoint: {host: 127.0.0.1, port: auto}
config: {format: none}
steps:
  start: {run: "true", timeout: 5, background: true}
  health: {run: "true", timeout: 5}
  stop: {run: "true", timeout: 5}
"""

CASES = [
    # ------------------------------------------------------------------------------------------- bench: flags
    case("unknown knob", "bench --set concurent_writes=64", "did you mean concurrent_writes"),
    case("knob value outside its range", "bench --set concurrent_writes=500", "outside its range"),
    case("--set without =value", "bench --set concurrent_writes", "knob=value"),
    case("knob value not a number", "bench --set concurrent_writes=lots", "expects an integer"),
    case("knob value not a choice", "bench --set compaction_method=Sized", "expects one of"),
    case("redis knob value not a choice", "bench --system redis --set maxmemory-policy=sometimes",
         "maxmemory_policy"),
    case("unknown workload", "bench --workload ycsb-z", "unknown workload"),
    case("read share above 100%", "bench --workload read150", "must be within 0..1"),
    case("read ratio above 1", "bench --read-ratio 1.5", "--read-ratio must be within 0..1"),
    case("--workload and --read-ratio", "bench --workload ycsb-b --read-ratio 0.5", "not both"),
    case("zero records", "bench --records 0", "--records must be a positive integer"),
    case("zero threads", "bench --threads 0", "--threads must be a positive integer"),
    case("a million client threads", "bench --threads 1000000", "client threads (256 per core)"),
    case("a million client threads in a study", "tune --threads 1000000 --budget 2", "give fewer"),
    case("records not a number", "bench --records many", "--records"),
    case("unknown distribution", "bench --distribution gaussian", "--distribution"),
    case("unknown restore mode", "bench --restore move", "--restore"),
    case("zero --max-seconds", "bench --max-seconds 0", "--max-seconds must be a positive integer"),
    case("zero --repeat", "bench --repeat 0", "--repeat must be a positive integer"),
    case("negative warm-up", "bench --warmup-ops -5", "--warmup-ops"),
    case("negative target rate", "bench --target -100", "--target"),
    case("rate fraction above 1", "bench --rate-fraction 1.5", "--rate-fraction must be within"),
    case("heap not a size", "bench --heap lots", "--heap expects a size"),
    case("heap too small for a JVM", "bench --heap 8M", "too small"),
    case("heap beyond the machine", "bench --heap 500G", "use a heap of at most"),
    case("page cache not a size", "bench --page-cache lots", "--page-cache expects a size"),
    case("cassandra version not a release", "bench --cassandra-version latest", "not a Cassandra release"),
    case("server cpus not a CPU list", "bench --server-cpus x", "--server-cpus expects a CPU list"),
    case("server cpus on a cluster", "bench --nodes 2 --server-cpus 0", "--server-cpus pins a single node"),
    case("server cpus on a searched cluster size", "tune --design nodes=1..3 --server-cpus 0 --budget 2",
         "up to 3 nodes"),
    case("client cpus the machine lacks", "bench --client-cpus 0-4095", "use CPUs of this machine"),
    case("unknown scenario", "bench --scenario huge", "unknown scenario 'huge'"),
    case("disk-bound scenario on redis", "bench --scenario disk-bound --system redis", "for Cassandra"),
    case("unknown system", "bench --system mysql", "unknown --system"),
    case("zero nodes", "bench --nodes 0", "--nodes must be at least 1"),
    case("rf above the node count", "bench --rf 3", "--rf must be within"),
    case("unknown consistency level", "bench --consistency MOST", "unknown read consistency"),
    case("consistency beyond the replicas", "bench --nodes 2 --rf 1 --consistency TWO", "needs 2 replicas"),
    case("cluster flags on redis", "bench --system redis --nodes 2", "Cassandra's"),
    case("redis dataset beyond memory", "bench --system redis --records 1000000000", "use fewer --records"),
    # ------------------------------------------------------------------------------------- bench: files
    case("memtables above half the heap", "bench --set memtable_heap_space=1536",
         "knob rule memtable_within_half_heap (memtable_heap_space <= heap_size / 2) is broken by "
         "memtable_heap_space=1536, heap_size=2048"),
    case("memtables above half the scenario's heap", "bench --scenario disk-bound --set memtable_heap_space=768",
         "memtable_heap_space=768, heap_size=1024"),
    case("memtables above half the heap in a knob file", "bench --config {tmp}/knobs.yaml --set heap_size=1024",
         "knob rule memtable_within_half_heap", files={"knobs.yaml": "memtable_heap_space: 600\n"}),
    case("knob file missing", "bench --config {tmp}/missing.yaml", "knob overrides file not found"),
    case("knob file not YAML", "bench --config {tmp}/knobs.yaml", "cannot parse",
         files={"knobs.yaml": KNOBS_BAD_YAML}),
    case("knob file a list", "bench --config {tmp}/knobs.yaml", "must be a mapping",
         files={"knobs.yaml": "- concurrent_writes\n"}),
    case("unknown named configuration", "bench --config newest", "named configuration of cassandra: latest"),
    case("per_node on redis", "bench --system redis --config {tmp}/knobs.yaml", "is for Cassandra clusters",
         files={"knobs.yaml": "per_node:\n  2: {concurrent_reads: 16}\n"}),
    case("per_node for a node the cluster lacks", "bench --config {tmp}/knobs.yaml", "not one of the cluster's nodes",
         files={"knobs.yaml": "per_node:\n  5: {concurrent_reads: 16}\n"}),
    case("workload file missing", "bench --workload {tmp}/mine.properties", "unknown workload"),
    case("workload file with a bad number", "bench --workload {tmp}/mine.properties", "recordcount",
         files={"mine.properties": PROPS + "recordcount=lots\n"}),
    case("workload file with a bad proportion", "bench --workload {tmp}/mine.properties", "readproportion",
         files={"mine.properties": "readproportion=most\n"}),
    case("workload file with no operations", "bench --workload {tmp}/mine.properties", "has no operations",
         files={"mine.properties": "readproportion=0\nupdateproportion=0\n"}),
    case("workload file is a folder", "bench --workload {tmp}/props", "props", files={"props": FOLDER}),
    case("external target without a file", "bench --system external", "needs --target-file"),
    case("target file without external", "bench --target-file {tmp}/t.yaml", "goes with --system external",
         files={"t.yaml": TARGET_OK}),
    case("target file missing", "bench --system external --target-file {tmp}/t.yaml", "target file not found"),
    case("target file not YAML", "bench --system external --target-file {tmp}/t.yaml", "not valid YAML",
         files={"t.yaml": "name: [t\n"}),
    case("target file without a stop step", "bench --system external --target-file {tmp}/t.yaml",
         "missing step stop", files={"t.yaml": TARGET_OK.replace('  stop: {run: "true", timeout: 5}\n', "")}),
    case("target file with an unknown binding", "bench --system external --target-file {tmp}/t.yaml",
         "binding must be one of", files={"t.yaml": TARGET_OK.replace("binding: redis", "binding: mongo")}),
    # ------------------------------------------------------------------------------------------- study URLs
    case("study URL of another scheme", "bench --study mysql://x/y", "sqlite:///"),
    case("study in a place that cannot be made", "bench --study /proc/nope/s.db", "/proc/nope"),
    case("study is a folder", "bench --study {tmp}/runs", "is a directory", files={"runs": FOLDER}),
    case("study is not a store", "bench --study {tmp}/notes.txt", "notes.txt",
         files={"notes.txt": "not a database\n" * 100}),
    # ------------------------------------------------------------------------------------------- environment
    case("dataset budget not a size", "bench", "NOSQLTUNE_DATASET_BUDGET", env={"NOSQLTUNE_DATASET_BUDGET": "lots"}),
    case("cache is a regular file", "bench", "NOSQLTUNE_CACHE", files={"cachefile": "x"},
         env={"NOSQLTUNE_CACHE": "{tmp}/cachefile"}),
    case("cache cannot be created", "bench", "NOSQLTUNE_CACHE",
         env={"NOSQLTUNE_CACHE": "/proc/nosqltune-cache"}),
    case("work directory is a regular file", "bench", "NOSQLTUNE_HOME", files={"homefile": "x"},
         env={"NOSQLTUNE_HOME": "{tmp}/homefile"}),
    case("datasets folder is a regular file", "bench", "NOSQLTUNE_DATASETS", files={"dsfile": "x"},
         env={"NOSQLTUNE_DATASETS": "{tmp}/dsfile"}),
    # ------------------------------------------------------------------------------------------------- tune
    case("unknown objective", "tune --objective p42-read", "unknown objective"),
    case("constraint without <= or >=", "tune --constraint p99-read<5", "cannot read constraint"),
    case("unknown knob set", "tune --knobs irace42", "unknown knob set"),
    case("knob subset file with an unknown knob", "tune --knobs {tmp}/subset.yaml", "unknown knob",
         files={"subset.yaml": "knobs: [concurrent_writes, concurent_reads]\n"}),
    case("zero budget", "tune --budget 0", "--budget"),
    case("duration not a duration", "tune --max-time soon", "--max-time"),
    case("same workload twice", "tune --workload ycsb-a,ycsb-a", "same workload twice"),
    case("a tuned knob also fixed", "tune --knobs rafiki5 --set concurrent_writes=16", "is tuned"),
    case("fixed memtables above half the heap", "tune --knobs rafiki5 --set memtable_heap_space=2048",
         "knob rule memtable_within_half_heap"),
    case("fixed memtables above half the heap, forced", "tune --knobs rafiki5 --set memtable_heap_space=2048 --force",
         "knob rule memtable_within_half_heap"),   # --force runs a rule-breaking configuration in bench, not a search
    case("design range upside down", "tune --design nodes=4..2", "LO < HI"),
    case("design and --nodes", "tune --design nodes=1..2 --nodes 2", "--nodes cannot also set it"),
    case("zero parallel", "tune --parallel 0", "--parallel must be at least 1"),
    case("more trials at once than nodes fit", "tune --parallel 1000 --study {tmp}/p.db", "at most 9 run side by side"),
    case("parallel trials beyond the memory", "tune --parallel 8 --heap 8G --study {tmp}/p.db",
         "runs 8 nodes at once: 8 nodes with a 8192 MiB heap need"),
    case("ray address without ray", "tune --address auto", "--executor ray"),
    case("one confirmation round", "tune --confirm-rounds 1", "--confirm-rounds at least 2"),
    case("unknown surrogate dataset", "tune --system surrogate:nope", "unknown surrogate dataset"),
    case("unknown optimizer", "tune --optimizer hillclimb", "--optimizer"),
    case("resume without a store", "tune --resume", "nothing to resume"),
    case("knob subset range beyond the knob's", "tune --knobs {tmp}/subset.yaml", "concurrent_writes",
         files={"subset.yaml": "knobs:\n  concurrent_writes: {range: [1, 100000]}\n"}),
    case("a million request threads in a knob file", "tune --knobs {tmp}/subset.yaml",
         "goes beyond the values it takes ([2, 8192]: 32 threads per core of a 256-core node",
         files={"subset.yaml": "knobs:\n  concurrent_reads: {range: [8, 1000000]}\n"}),
    case("constraint on an unknown metric", "tune --constraint speed>=5", "speed"),
    case("llamatune with no dimensions", "tune --space-adapter llamatune --llamatune-dims 0",
         "at least 1 synthetic dimension"),
    case("special-value bias above 1", "tune --space-adapter llamatune --special-bias 2", "bias"),
    case("zero stale-after", "tune --stale-after 0", "--stale-after must be a positive number"),
    case("study of a newer nosqltune", ["tune", "--study", "{tmp}/s.db"], "newer", files={"s.db": NEWER}),
    case("study a SQLite file of another program", ["tune", "--study", "{tmp}/s.db"], "s.db",
         files={"s.db": FOREIGN}),
    # ------------------------------------------------------------------------------------------------- best
    case("best without a store", "best", "no study store"),
    case("best of an unknown study name", ["best", "--study", "{tmp}/s.db", "--study-name", "nope"],
         "no tuning study 'nope'", files={"s.db": STUDY}),
    case("best confirm with no configurations", ["best", "--study", "{tmp}/s.db", "--confirm", "--top", "0"],
         "--top must be at least 1", files={"s.db": STUDY}),
    case("best in an unknown format", "best --format xml", "--format"),
    # ---------------------------------------------------------------------------------------------- compare
    case("compare with one round", "compare --repeat 1", "--repeat must be at least 2"),
    case("compare at scale 0", "compare --scale 0", "--scale must be positive"),
    case("compare unknown metric", "compare --metrics speed", "unknown"),
    case("compare without a store", "compare", "no study store"),
    case("compare unknown candidate", ["compare", "--study", "{tmp}/s.db", "--candidates", "best,fastest"],
         "unknown candidate 'fastest'", files={"s.db": STUDY}),
    case("compare nothing but the default", ["compare", "--study", "{tmp}/s.db", "--candidates", "default"],
         "names nothing to compare", files={"s.db": STUDY}),
    case("compare a candidate file with an unknown knob", ["compare", "--study", "{tmp}/s.db", "--candidates",
                                                            "{tmp}/mine.yaml"],
         "unknown knob", files={"s.db": STUDY, "mine.yaml": "concurent_writes: 64\n"}),
    case("a search at a data size the disk cannot hold", "tune --data-sizes 1,100000 --budget 4",
         "give fewer records"),
    case("a node shape whose data the disk cannot hold", "tune --node-shape {tmp}/huge.yaml --budget 4",
         "give fewer records", files={"huge.yaml": "cores: 8\nmemory_gib: 32\ndata_gib: 500000\n"}),
    case("compare at a data size the disk cannot hold, checked before the first size runs",
         ["compare", "--study", "{tmp}/s.db", "--data-growth", "1,100000", "--repeat", "2"],
         "give fewer records", files={"s.db": STUDY}),
    # --------------------------------------------------------------------------------------- report, export
    case("report without a store", "report --out {tmp}/r", "no study store"),
    case("report into a file", ["report", "--study", "{tmp}/s.db", "--out", "{tmp}/r.html"], "not a directory",
         files={"s.db": STUDY, "r.html": "x"}),
    case("report of an unknown study name", ["report", "--study", "{tmp}/s.db", "--study-name", "nope",
                                             "--out", "{tmp}/r"], "nope", files={"s.db": STUDY}),
    case("export without a store", "export", "no study store"),
    case("export of an unknown study name", ["export", "--study", "{tmp}/s.db", "--study-name", "nope"],
         "no study named 'nope'", files={"s.db": STUDY}),
    case("export into a missing folder", ["export", "--study", "{tmp}/s.db", "--out", "{tmp}/no/such/x.csv"],
         "--out", files={"s.db": STUDY}),
    case("export into a folder", ["export", "--study", "{tmp}/s.db", "--out", "{tmp}/out"], "is a folder",
         files={"s.db": STUDY, "out": FOLDER}),
    case("export in an unknown format", "export --format xml", "--format"),
    # ------------------------------------------------------------------------------------ collect, importance
    case("collect read ratios beyond 1", "collect --read-ratios 0:2:0.5", "--read-ratios"),
    case("collect zero configurations", "collect --configs 0", "--configs"),
    case("collect with --workload and --read-ratios", "collect --workload ycsb-a --read-ratios 0.5", "not both"),
    case("collect with --read-ratio", "collect --read-ratio 0.5", "not --read-ratio"),
    case("collect at a fixed rate", "collect --scenario latency-slo", "fixed rate"),
    case("collect with repeats", "collect --repeat 3", "--noise-repeats"),
    case("importance with one level", "importance --levels 1", "--levels"),
    case("importance on two workloads", "importance --workload ycsb-a,ycsb-b", "one --workload"),
    case("importance from a missing study", "importance --from-study {tmp}/x.db", "no study store"),
    # ---------------------------------------------------------------------------------------------- models
    case("model fit unknown target", ["model", "fit", "--study", "{tmp}/t.db", "--target", "p42-read"],
         "unknown target", files={"t.db": TRAIN}),
    case("model fit without a store", "model fit --study {tmp}/t.db", "no study store"),
    case("model fit for a workload it has no trial of", ["model", "fit", "--study", "{tmp}/t.db", "--domain", "TD2",
                                                         "--workload", "ycsb-a"],
         "no trial of workload 'ycsb-a'", files={"t.db": TRAIN}),
    case("model fit --workload outside TD2/TD4", ["model", "fit", "--study", "{tmp}/t.db", "--workload",
                                                  "read90-zipfian"],
         "--workload goes with TD2 or TD4", files={"t.db": TRAIN}),
    case("model report unknown kind", ["model", "report", "--study", "{tmp}/t.db", "--kinds", "svm"],
         "unknown model kind", files={"t.db": TRAIN}),
    case("model report sizes not numbers", ["model", "report", "--study", "{tmp}/t.db", "--sizes", "a,b"],
         "--sizes", files={"t.db": TRAIN}),
    case("model report zero repeats", ["model", "report", "--study", "{tmp}/t.db", "--repeats", "0"],
         "--repeats", files={"t.db": TRAIN}),
    case("model without an action", "model", "fit or report"),
    # ------------------------------------------------------------------------------------------- recommend
    case("recommend from a missing model", "recommend --model {tmp}/m", "no fitted model"),
    case("recommend unknown search", "recommend --model {tmp}/m --search hill", "--search"),
    case("recommend from a broken model", "recommend --model {tmp}/m", "model.json",
         files={"m/model.json": "{not json", "m/model.pkl": "x"}),
    case("recommend another workload than the model's", ["recommend", "--model", "{tmp}/m", "--workload", "read10"],
         "leave out --workload", files={"m": MODEL}),
    case("recommend unknown workload", ["recommend", "--model", "{tmp}/m", "--workload", "ycsb-z"],
         "unknown workload", files={"m": MODEL}),
    # -------------------------------------------------------------------------------- knobs, scenarios
    case("knobs of an unknown datastore", "knobs mongodb", "unknown system"),
    case("knobs of an unknown set", "knobs cassandra --set irace42", "unknown knob set"),
    case("knobs of a missing subset file", "knobs cassandra --set {tmp}/subset.yaml", "knob subset file not found"),
    case("scenarios unknown name", "scenarios huge", "unknown scenario"),
    case("scenarios unknown system", "scenarios --system mongodb", "mongodb"),
    # ------------------------------------------------------------------------------------------- datasets
    case("prune keep not a size", "datasets prune --keep lots", "--keep expects a size"),
    case("prune age not a duration", "datasets prune --older-than soon", "--older-than expects a duration"),
    case("prune keep and all", "datasets prune --keep 1G --all", "not both"),
    case("prune with a bad budget", "datasets prune", "NOSQLTUNE_DATASET_BUDGET",
         env={"NOSQLTUNE_DATASET_BUDGET": "lots"}),
    case("datasets list in a regular file", "datasets list", "NOSQLTUNE_DATASETS", files={"dsfile": "x"},
         env={"NOSQLTUNE_DATASETS": "{tmp}/dsfile"}),
    case("datasets without an action", "datasets", "list or prune"),
    # ------------------------------------------------------------------------------------------ calibrate
    case("calibrate unknown metric", "calibrate --metric speed", "unknown --metric"),
    case("calibrate zero max cv", "calibrate --max-cv 0", "--max-cv must be positive"),
    case("calibrate grid not numbers", "calibrate --grid-records 1k,2k", "--grid-records"),
    case("calibrate grid with zero", "calibrate --grid-threads 0,4", "--grid-threads"),
    case("calibrate unknown scenario", "calibrate --scenario nowhere", "unknown scenario"),
    # -------------------------------------------------------------------------------------- node, cluster
    case("node port out of range", "node --home {tmp}/n --port 70000", "--port"),
    case("node yaml missing", "node --home {tmp}/n --yaml {tmp}/missing.yaml", "missing.yaml"),
    case("node yaml a list", "node --home {tmp}/n --yaml {tmp}/c.yaml", "expected a mapping",
         files={"c.yaml": "- a\n- b\n"}),
    case("node heap not a size", "node --home {tmp}/n --heap lots", "--heap"),
    case("node home is a regular file", "node --home {tmp}/n", "--home", files={"n": "x"}),
    case("node without --home", "node", "--home"),
    case("cluster up unknown knob", "cluster up --set concurent_writes=64", "did you mean concurrent_writes"),
    case("cluster up a table knob", "cluster up --set compaction_method=Leveled", "cassandra.yaml knobs only"),
    case("cluster up zero nodes", "cluster up --nodes 0", "--nodes"),
    case("cluster up heap not a size", "cluster up --heap lots", "--heap"),
    case("cluster up memtables above half the heap", "cluster up --heap 1G --set memtable_heap_space=600",
         "memtable_heap_space=600, heap_size=1024"),
    case("cluster unknown action", "cluster restart", "'up', 'status', 'down'"),
    case("cluster name with a slash", "cluster up --name ../x", "plain word"),
    case("setup cassandra version not a release", "setup --cassandra-version 5.x", "not a Cassandra release"),
    # ------------------------------------------------------------------------------ setup problems (exit 3)
    case("setup problem, not bad input: no Java", "bench", "Java not found", code=3,
         env={"PATH": "/nonexistent", "JAVA_HOME": None}),
]


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """The stores and the model the cases copy: built once, in the module's own folder."""
    root = tmp_path_factory.mktemp("bad-input-fixtures")
    built = {STUDY: _tuning_study(root / "study.db"), TRAIN: _collection(root / "train.db")}
    built[NEWER] = root / "newer.db"
    shutil.copyfile(built[STUDY], built[NEWER])
    built[FOREIGN] = root / "foreign.db"
    for path, statement in ((built[NEWER], "PRAGMA user_version = 99"),
                            (built[FOREIGN], "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")):
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(statement)
            db.commit()
    model = root / "model"
    assert main(["model", "fit", "--study", str(built[TRAIN]), "--kind", "rf", "--domain", "TD2", "--workload",
                 "read90-zipfian", "--out", str(model)]) == 0
    built[MODEL] = model
    return built


def _tuning_study(path: Path) -> Path:
    """A finished tuning study as `tune` leaves it, its trials answered by an analytic function."""
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.store import open_store
    from nosqltune.systems.base import TrialSettings
    from nosqltune.tuning.loop import Outcome, TuneSpec, TuningLoop
    from nosqltune.workloads.spec import make_workload

    subset = load_space("cassandra").subset("rafiki5")
    space = TuningSpace(subset)
    store = open_store(str(path))
    study = store.study("tune", "cassandra")
    spec = TuneSpec(optimizer="random", workloads=["ycsb-a"], budget=6,
                    objective={"metric": "throughput", "constraints": []})
    store.update_study_settings(study, {"tune": {
        "spec": spec.to_dict(), "workloads": [make_workload("ycsb-a").to_dict()], "fixed": {}, "knobs": "rafiki5",
        "harness": TrialSettings().to_dict(), "system": "cassandra"}})

    def runner(config, workload):
        return Outcome("COMPLETE", summary={"throughput_ops_s": 1000.0 + config["concurrent_writes"]})

    TuningLoop(store, study, spec, space, runner, workdir=path.parent / "work").run()
    store.close()
    return path


def _collection(path: Path) -> Path:
    """Trials of two workloads over one knob, throughput rising with it."""
    from nosqltune.store import open_store
    from nosqltune.systems.base import TrialSettings

    store = open_store(str(path))
    study = store.study("collect", "cassandra")
    store.update_study_settings(study, {"collect": {"knobs": ["concurrent_writes"], "fixed": {},
                                                    "harness": TrialSettings().to_dict()}})
    for ratio in (0.1, 0.9):
        for writes in (8, 16, 24, 32, 48, 64, 80, 96):
            workload = {"name": f"read{round(ratio * 100)}-zipfian", "harness": TrialSettings().to_dict(),
                        "mix": {"readproportion": ratio, "updateproportion": 1 - ratio}}
            trial = store.start_trial(study, {"concurrent_writes": writes}, workload, tag="collect")
            store.finish_trial(trial, "COMPLETE",
                               metrics={"summary": {"throughput_ops_s": 5000.0 * (1 + writes / 200) * (1 + ratio)}})
    store.close()
    return path


def _place(tmp: Path, files: dict[str, str], built: dict) -> None:
    for name, content in files.items():
        target = tmp / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if content == FOLDER:
            target.mkdir()
        elif content in built and Path(built[content]).is_dir():
            shutil.copytree(built[content], target)
        elif content in built:
            shutil.copyfile(built[content], target)
        else:
            target.write_text(content)


def _snapshot(tmp: Path) -> dict[str, str]:
    """Every file and folder under `tmp` with a digest of its bytes: what was there, exactly."""
    out = {}
    for path in sorted(tmp.rglob("*")):
        rel = str(path.relative_to(tmp))
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


class WouldRun(BaseException):
    """A bad input got as far as starting a process (a datastore, a JVM, Maven): no command of the table may.
    A BaseException, so that no `except Exception` of the command can store it as a failed trial."""


def _refuse(cmd, *args, **kwargs):
    raise WouldRun(f"a bad input got as far as running {cmd!r}")


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    before: dict[str, str]   # the case's folder before the command ran (_snapshot)
    after: dict[str, str]    # ... and after


def run_case(c: Case, tmp: Path, built: dict, monkeypatch) -> Outcome:
    """Run one case in `tmp` (its own working directory) and say what it did."""
    import io
    import subprocess

    from nosqltune.runtime.java import java_executable

    _place(tmp, c.files, built)
    monkeypatch.setattr(subprocess, "Popen", _refuse)   # every child process goes through it
    if os.environ.get("NOSQLTUNE_FAULT_LOG"):   # the case runs in its own folder: keep the log where it was meant
        monkeypatch.setenv("NOSQLTUNE_FAULT_LOG", str(Path(os.environ["NOSQLTUNE_FAULT_LOG"]).absolute()))
    monkeypatch.chdir(tmp)
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp / "home"))
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(tmp / "cache"))
    for name in ("NOSQLTUNE_DATASETS", "NOSQLTUNE_DATASET_BUDGET"):
        monkeypatch.delenv(name, raising=False)
    for name, value in c.env.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value.replace("{tmp}", str(tmp)))
    java_executable.cache_clear()   # found once per process; a case may take it away (PATH)
    before = _snapshot(tmp)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([a.replace("{tmp}", str(tmp)) for a in c.argv])
        except SystemExit as exc:   # argparse's own errors
            code = exc.code
    java_executable.cache_clear()
    return Outcome(code, out.getvalue(), err.getvalue(), before, _snapshot(tmp))


def test_at_least_40_distinct_bad_inputs_over_every_command():
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids), "case ids must be distinct"
    assert sum(c.code == 2 for c in CASES) >= 40
    assert {c.argv[0] for c in CASES} >= {"bench", "tune", "best", "compare", "report", "export", "collect",
                                          "importance", "model", "recommend", "knobs", "scenarios", "datasets",
                                          "calibrate", "node", "cluster", "setup"}


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_line_and_writes_nothing(c: Case, fixtures, tmp_path, monkeypatch):
    got = run_case(c, tmp_path, fixtures, monkeypatch)
    lines = got.err.strip().splitlines()
    assert got.code == c.code, got.err
    assert len(lines) == 1 and lines[0].startswith("nosqltune: error: "), got.err
    assert "Traceback" not in got.err and c.expect in lines[0], got.err
    assert got.out == "", got.out
    assert got.after == got.before, (f"written: {sorted(set(got.after) - set(got.before))}, changed: "
                                     f"{sorted(k for k in got.before if got.after.get(k) != got.before[k])}")
    assert not (tmp_path / ".nosqltune").exists() and not (tmp_path / "home").exists()   # no study, no work dir
    faultlog.record("bad_input", command=c.argv[0], input=c.id, exit_code=got.code, message=lines[0])
