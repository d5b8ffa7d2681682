"""Against real Cassandra: boot, load, bench two configurations and see them stored, failures stored as failed."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store

from .conftest import OPERATIONS, SMALL, assert_cost_measured, dataset_dirs, our_jvms, sigint_default


def bench(study: Path, *extra: str, capsys=None) -> tuple[int, dict]:
    code = main(["bench", "--workload", "ycsb-a", *SMALL, "--study", str(study), "--json", *extra])
    out = capsys.readouterr().out if capsys else ""
    return code, (json.loads(out) if out.strip() else {})


@pytest.mark.slow   # 92 s (a Leveled dataset): make test-all; make test keeps the settings of 5.0 reaching the
# node (below) and the shared study of best, compare, report and export (test_tune.py)
def test_bench_two_configurations_are_stored_and_knobs_reach_the_node(nosqltune_home, dataset_cache, tmp_path,
                                                                       capsys):
    """The default twice, then knobs of every kind: cassandra.yaml at boot, table and keyspace options after the
    restore; the node itself reports them."""
    study = tmp_path / "two.db"
    code, default = bench(study, "--repeat", "2", capsys=capsys)
    assert code == 0, default
    tuned_config = {"concurrent_writes": 64, "compaction_method": "Leveled", "lcs_sstable_size": 64,
                    "concurrent_reads": 48, "replication_factor": 2, "memtable": "trie"}
    code, tuned = bench(study, *[a for k, v in tuned_config.items() for a in ("--set", f"{k}={v}")], capsys=capsys)
    assert code == 0, tuned

    rows = open_store(str(study)).trials()
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3
    assert [r["config"] for r in rows] == [{}, {}, tuned_config]
    for row in rows:
        summary = row["metrics"]["summary"]
        assert summary["throughput_ops_s"] > 50
        assert summary["read_count"] + summary["update_count"] == OPERATIONS   # every measured op is counted
        assert summary["errors"] == 0
        assert_cost_measured(summary)         # the node's CPU and GC over JMX, the client's own
        assert row["metrics"]["cost"]["operations"] == OPERATIONS
        # what limited it, with the figures that decided: data in memory, no cap, no fixed rate
        verdict = row["internals"]["bottleneck"]
        assert verdict["limit"] in ("node-cores", "client-cores", "client-threads"), verdict
        assert verdict["utilisation"]["node_cores"] == round(summary["node_cpu_cores"], 4)
        assert verdict["line"].startswith("limited by ") and "cores" in verdict["line"]
        assert row["metrics"]["warmup"]["operations"] >= 300
        assert row["internals"]["live_sstable_count"] >= 1
        assert row["internals"]["live_disk_space_used_bytes"] > 5000 * 1000  # 5000 rows of 10 x 100 bytes
        t = row["timings"]   # a JVM boots in seconds; the phases follow each other within the trial's total
        assert t["boot_s"] > 1 and t["warmup_s"] > 0 and t["measure_s"] > 0 and t["stop_s"] > 0 and t["restore_s"] >= 0
        assert t["total_s"] >= t["restore_s"] + t["boot_s"] + t["warmup_s"] + t["measure_s"] + t["stop_s"]
        assert row["environment_id"] is not None
    # two datasets: the default one, loaded once and restored twice, and one loaded under leveled compaction (the
    # strategy shapes the SSTables: it keys the dataset); they live in the dataset cache, not the work directory,
    # written back to the disk before the first restore, the leveled one after its compactions settled
    metas = {d.name: json.loads((d / "meta.json").read_text()) for d in dataset_dirs(dataset_cache)}
    assert sorted(m["reload_knobs"].get("compaction_method", "-") for m in metas.values()) == ["-", "Leveled"]
    assert not (nosqltune_home / "datasets").exists()
    for meta in metas.values():
        assert meta["sync_s"] >= 0 and meta["bytes"] > 5000 * 100
        assert meta["settle_s"] >= 0 and meta["pending_compactions_stored"] == 0
    assert main(["datasets", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["datasets"]
    assert sorted((d["key"], d["system"], d["records"], d["in_use"]) for d in listed) == \
        sorted((key, "cassandra", 5000, False) for key in metas)
    assert default["throughput"]["n"] == 2
    assert default["node_cpu_us_per_op"]["n"] == default["client_cpu_us_per_op"]["n"] == 2
    for row in rows[:2]:
        assert row["internals"]["table_options"]["compaction"]["class"].endswith("SizeTieredCompactionStrategy")
    internals = rows[2]["internals"]
    assert internals["table_options"]["compaction"]["class"].endswith("LeveledCompactionStrategy")
    # the strategy was loaded with the data; its size set after the restore (it does not key the dataset)
    assert internals["table_options"]["compaction"]["sstable_size_in_mb"] == "64"
    assert internals["table_options"]["memtable"] == "trie" and rows[0]["internals"]["table_options"]["memtable"] is None
    assert internals["keyspace_replication"]["replication_factor"] == "2"
    assert internals["node_settings"] == {"concurrent_reads": "48", "concurrent_writes": "64"}


@pytest.mark.slow   # 45 s: make test-all (make test keeps the node settings reaching the node, above)
def test_the_settings_that_move_5_0_reach_the_node(nosqltune_home, dataset_cache, tmp_path, capsys):
    """Issue 20's knobs, each read back from the node: JVM options from its command line and the collector from
    its GC beans, cassandra.yaml values from system_views.settings, table options from system_schema, and the
    SSTable format from the loaded dataset's files (the format shapes the data: it is loaded with it)."""
    study = tmp_path / "v5.db"
    config = {"gc": "ZGC", "sstable_format": "bti", "compression": "ZstdCompressor", "compression_level": 5,
              "bloom_filter_fp_chance": 0.05, "compaction_method": "UnifiedCompaction",
              "ucs_scaling_parameters": "L4", "disk_access_mode": "standard",
              "commitlog_disk_access_mode": "auto", "native_transport_max_threads": 64, "heap_size": 1536}
    code, result = bench(study, *[a for k, v in config.items() for a in ("--set", f"{k}={v}")], capsys=capsys)
    assert code == 0, result
    (row,) = open_store(str(study)).trials()
    internals = row["internals"]
    assert "-XX:+UseZGC" in internals["jvm_options"] and "-XX:+UseG1GC" not in internals["jvm_options"]
    heap = [a for a in internals["jvm_options"] if a.startswith(("-Xms", "-Xmx"))]
    assert heap[-2:] == ["-Xms1536M", "-Xmx1536M"], heap     # the knob's, after the harness's 1 GiB (the last counts)
    assert any(name.startswith("ZGC") for name in internals["gc"]), internals["gc"]
    assert internals["node_settings"] == {"sstable.selected_format": "bti", "storage_compatibility_mode": "NONE",
                                          "disk_access_mode": "standard", "commitlog_disk_access_mode": "auto",
                                          "native_transport_max_threads": "64"}
    table = internals["table_options"]
    assert table["compression"]["class"].endswith("ZstdCompressor") and table["compression"]["compression_level"] == "5"
    assert table["bloom_filter_fp_chance"] == pytest.approx(0.05)
    assert table["compaction"]["class"].endswith("UnifiedCompactionStrategy")
    assert table["compaction"]["scaling_parameters"] == "L4"
    (dataset,) = [d for d in dataset_dirs(dataset_cache)
                  if json.loads((d / "meta.json").read_text())["reload_knobs"].get("sstable_format") == "bti"]
    data_files = [f.name for f in dataset.rglob("*-Data.db")]
    assert data_files and all("-bti-" in name for name in data_files), data_files


@pytest.mark.slow   # 26 s: make test-all (make test keeps a node that fails to start, stored as failed: tests/integration/test_faults.py)
def test_refused_configuration_is_stored_as_failed(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "bad.db"
    # outside the tuning range but inside what nosqltune knows of Cassandra's bounds: only the node can refuse it
    # (5.0 caps column_index_size at 2 GiB in bytes)
    code, result = bench(study, "--set", "column_index_size=4194304", "--force", capsys=capsys)
    assert code != 0
    (row,) = open_store(str(study)).trials()
    assert row["state"] == "FAIL"
    assert row["failure_kind"] == "refused"
    assert "column_index_size" in row["error"] and "2147483646" in row["error"]
    assert row["log_excerpt"]


def test_out_of_range_value_is_rejected_before_anything_runs(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "never.db"
    code = main(["bench", "--set", "concurent_writes=64", "--study", str(study)])
    err = capsys.readouterr().err
    assert code != 0 and "did you mean concurrent_writes" in err and len(err.strip().splitlines()) == 1
    assert not study.exists()


@pytest.mark.slow   # 35 s: make test-all (make test keeps the fault campaign's tuner-kill@boot case, on Redis)
def test_interrupt_leaves_no_jvm_and_marks_the_trial(nosqltune_home, tmp_path):
    study = tmp_path / "interrupted.db"
    env = {**os.environ, "NOSQLTUNE_HOME": str(nosqltune_home),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "nosqltune", "bench", *SMALL, "--operations", "500000",
                             "--study", str(study)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=sigint_default)
    deadline = time.monotonic() + 240
    # wait until the measured phase runs: a client JVM of ours is up
    while time.monotonic() < deadline and not [p for p in our_jvms(str(nosqltune_home)) if "PhasedClient" in p
                                               and "run.properties" in p]:
        time.sleep(0.5)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
    assert proc.wait(timeout=60) == 130
    deadline = time.monotonic() + 15   # killed JVMs exit within moments, longer on a loaded machine
    while our_jvms(str(nosqltune_home)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert our_jvms(str(nosqltune_home)) == []
    (row,) = open_store(str(study)).trials()
    assert (row["state"], row["failure_kind"]) == ("FAIL", "interrupted")


@pytest.mark.parametrize("workload, operations", [
    pytest.param("ycsb-b", {"READ", "UPDATE"}, marks=pytest.mark.slow),
    pytest.param("ycsb-c", {"READ"}, marks=pytest.mark.slow),
    pytest.param("ycsb-d", {"READ", "INSERT"}, marks=pytest.mark.slow),
    pytest.param("ycsb-e", {"SCAN", "INSERT"}, marks=pytest.mark.slow),
    pytest.param("ycsb-f", {"READ", "READ-MODIFY-WRITE", "UPDATE"}, marks=pytest.mark.slow),
])
def test_every_core_workload_runs(nosqltune_home, tmp_path, capsys, workload, operations):
    study = tmp_path / f"{workload}.db"
    code = main(["bench", "--workload", workload, *SMALL, "--study", str(study), "--json"])
    capsys.readouterr()
    (row,) = open_store(str(study)).trials()
    assert code == 0 and row["state"] == "COMPLETE", row["error"]
    assert set(row["metrics"]["operations"]) == operations
    assert row["metrics"]["errors"] == 0
