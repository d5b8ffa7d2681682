"""The scenarios on real Cassandra at a small size: disk-bound reads go to the disk inside a memory cgroup,
write-heavy flushes and compacts inside the measured phase, latency-slo runs at a share of the default's
maximum throughput measured once."""

import json
from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store

from .conftest import OPERATIONS, SMALL


def bench(capsys, study: Path, *argv: str) -> tuple[int, list[dict]]:
    code = main(["bench", *argv, "--study", str(study), "--json"])
    err = capsys.readouterr().err
    trials = open_store(str(study)).trials() if study.exists() else []
    assert code == 0, [line for line in err.splitlines() if "progress" not in line][-3:] + \
        [t["error"] for t in trials[-1:]]
    return code, trials


@pytest.mark.slow   # 54 s: make test-all (make test keeps a node in a memory group on a capped volume: tests/integration/test_volumes.py)
def test_disk_bound_reads_from_disk_inside_a_memory_cgroup(nosqltune_home, tmp_path, capsys):
    from nosqltune.runtime.cgroup import usable

    if usable():
        pytest.skip(f"no memory cgroup here: {usable()}")
    study = tmp_path / "disk.db"
    # 20K records (about 22 MB on disk) against 8 MiB of page cache: most reads must go to the disk
    sizes = ["--records", "20000", "--operations", str(OPERATIONS), "--threads", "8", "--warmup-ops", "300",
             "--heap", "1G"]
    code, rows = bench(capsys, study, *sizes, "--workload", "ycsb-c", "--distribution", "uniform")
    assert code == 0, rows[-1]["error"]
    code, rows = bench(capsys, study, "--scenario", "disk-bound", *sizes, "--page-cache", "8M")
    assert code == 0, rows[-1]["error"]
    warm, cold = (r["metrics"]["summary"] for r in rows)
    assert rows[1]["workload"]["harness"]["scenario"] == "disk-bound"
    assert rows[1]["workload"]["harness"]["datastore"]["page_cache_mb"] == 8   # Cassandra's part
    # the node's own reads from the disk per operation: a 16 KiB compressed chunk or more per read when cold
    assert cold["node_disk_read_bytes_per_op"] > 4096, cold
    assert warm["node_disk_read_bytes_per_op"] < cold["node_disk_read_bytes_per_op"] / 4, (warm, cold)
    memory = rows[1]["internals"]["memory_cgroup"]["node1"]
    assert memory["limit_bytes"] == (1024 + 768 + 8) << 20 and memory["used"] <= memory["limit_bytes"]
    assert memory["oom_kills"] == 0
    assert "memory_cgroup" not in rows[0]["internals"]
    # the data disk's read-ahead is on record: what a page fault of mmap reads around the page it needs
    from nosqltune.runtime.environment import read_ahead_kb

    assert [r["internals"].get("read_ahead_kb") for r in rows] == [read_ahead_kb(nosqltune_home)] * 2
    # the group went with the node
    assert not [p for p in Path("/sys/fs/cgroup").rglob("nosqltune-nodes-*") if p.is_dir()]


@pytest.mark.slow   # 24 s: make test-all (make test keeps the scenarios' settings: tests/unit/test_scenarios.py)
def test_write_heavy_flushes_and_compacts_inside_the_measured_phase(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "write.db"
    # a 4 MiB memtable space instead of the scenario's 32 MiB: the same effect on a test-sized run
    code, rows = bench(capsys, study, "--scenario", "write-heavy", *SMALL[:2], "--operations", "20000",
                       "--warmup-ops", "300", "--threads", "8", "--heap", "1G", "--set", "memtable_heap_space=4",
                       "--force")
    assert code == 0, rows[-1]["error"]
    (row,) = rows
    assert row["workload"]["name"] == "write90" and row["workload"]["harness"]["scenario"] == "write-heavy"
    assert row["metrics"]["summary"]["insert_count"] > 0 and row["metrics"]["summary"]["update_p99_ms"] > 0
    assert row["internals"]["node_settings"]["memtable_heap_space"] in ("4MiB", "4")
    assert row["internals"]["memtable_switch_count"] >= 2            # flushes during the run
    assert row["internals"]["compactions_completed_run"] >= 1


@pytest.mark.slow   # 37 s: two trials at a fixed rate after a measured maximum; the rate's arithmetic is in tests/unit
def test_latency_slo_runs_at_a_share_of_the_defaults_maximum_measured_once(nosqltune_home, tmp_path, capsys,
                                                                           monkeypatch):
    monkeypatch.setenv("NOSQLTUNE_RATES", str(tmp_path / "rates.json"))
    study = tmp_path / "slo.db"
    code, rows = bench(capsys, study, "--scenario", "latency-slo", *SMALL)
    assert code == 0, rows[-1]["error"]
    table = json.loads((tmp_path / "rates.json").read_text())
    (entry,) = table.values()
    assert len(entry["runs_ops_s"]) == 3 and entry["max_ops_s"] > 0
    (row,) = rows
    summary = row["metrics"]["summary"]
    assert summary["target_ops_s"] == max(1, round(0.6 * entry["max_ops_s"]))
    assert summary["rate_sustained"] == (summary["throughput_ops_s"] >= 0.95 * summary["target_ops_s"])
    assert summary["read_p999_ms"] >= summary["read_p99_ms"] > 0       # p99.9 stored beside p99
    # measured once: a second run reuses the stored maximum (no new unthrottled trials)
    code, rows = bench(capsys, study, "--scenario", "latency-slo", *SMALL)
    assert code == 0 and json.loads((tmp_path / "rates.json").read_text()) == table
    assert rows[1]["metrics"]["summary"]["target_ops_s"] == summary["target_ops_s"]
