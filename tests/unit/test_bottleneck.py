"""What limited a trial: each rule of nosqltune.bottleneck on the figures that decide it, the line a person reads,
and the verdicts on the committed studies (disk-bound's trials are limited by the cores, as impact_tuning.md found
from the 1.90-1.93 cores busy in its compare runs)."""

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from nosqltune.bottleneck import LIMITS, THRESHOLDS, diagnose, of_trial

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
GP3 = {"volume": {"name": "aws-gp3", "read_iops": 3000, "write_iops": 3000, "read_mbps": 125, "write_mbps": 125,
                  "read_ahead_kb": 128}}


def _summary(**figures):
    return {"throughput_ops_s": 3000.0, **figures}


def test_cpu_bound_trial_is_limited_by_the_cores_of_whoever_uses_more():
    v = diagnose(_summary(node_cpu_cores=1.25, client_cpu_cores=0.66), {}, {}, cores=2)
    assert v.limit == "node-cores" and v.utilisation["cores_busy"] == pytest.approx(0.955)
    assert "limited by the node's cores" in v.line() and "node 1.25 + client 0.66 of 2 cores" in v.line()
    assert diagnose(_summary(node_cpu_cores=0.7, client_cpu_cores=1.2), {}, {}, cores=2).limit == "client-cores"
    # just under the threshold: not saturated
    assert diagnose(_summary(node_cpu_cores=1.0, client_cpu_cores=0.79), {}, {}, cores=2).limit == "client-threads"


def test_pinned_processes_are_judged_against_their_own_cores():
    settings = {"server_cpus": "0", "client_cpus": "1"}
    assert diagnose(_summary(node_cpu_cores=0.95, client_cpu_cores=0.3), settings, {}, cores=2).limit == "node-cores"
    assert diagnose(_summary(node_cpu_cores=0.5, client_cpu_cores=0.97), settings, {}, cores=2).limit == "client-cores"
    assert diagnose(_summary(node_cpu_cores=0.8, client_cpu_cores=0.8), settings, {},
                    cores=2).limit == "client-threads"


def test_a_volume_at_its_iops_cap_wins_over_everything_else():
    figures = _summary(node_group_read_iops=2970.0, node_group_write_iops=12.0, node_group_read_mib_s=11.6,
                       node_group_write_mib_s=0.5, node_dev_read_ios_per_op=0.99, node_dev_write_ios_per_op=0.004,
                       node_dev_read_bytes_per_op=4096.0, node_dev_write_bytes_per_op=300.0,
                       node_group_write_bytes_per_op=100.0, node_cpu_cores=0.4, client_cpu_cores=0.3)
    v = diagnose(figures, GP3, {}, cores=2)
    assert v.limit == "volume-iops" and v.utilisation["volume_read_iops"] == pytest.approx(0.99)
    assert v.per_op["ios"] == pytest.approx(0.994) and v.per_op["bytes"] == 4396.0
    line = v.line()
    assert line.startswith("limited by the volume's IOPS cap: reads 2,970.0 IOPS = 99% of the cap")
    assert "67% of the bytes written were not charged to the node's group" in line   # 200 of 300 bytes per op
    # the same I/O rate without a cap is not a limit
    assert diagnose(figures, {}, {}, cores=2).limit == "client-threads"


def test_a_volume_at_its_bandwidth_cap():
    figures = _summary(node_group_read_iops=900.0, node_group_read_mib_s=124.0, node_cpu_cores=0.5)
    assert diagnose(figures, GP3, {}, cores=2).limit == "volume-bandwidth"
    # where the group's counters are missing the device's own are used
    figures = _summary(node_dev_read_iops=2800.0, node_cpu_cores=0.5)
    assert diagnose(figures, GP3, {}, cores=2).limit == "volume-iops"


def test_a_kept_fixed_rate_is_nothing_saturated_and_a_missed_one_is_not():
    kept = _summary(target_ops_s=3100.0, rate_sustained=True, node_cpu_cores=1.0, client_cpu_cores=0.5)
    v = diagnose(kept, {}, {}, cores=2)
    assert v.limit == "rate" and "of the asked rate" in v.line()
    missed = {**kept, "rate_sustained": False, "node_cpu_cores": 1.3, "client_cpu_cores": 0.6}
    assert diagnose(missed, {}, {}, cores=2).limit == "node-cores"


def test_memory_churn_needs_a_full_page_cache_and_reads_from_the_disk():
    memory = {"memory_cgroup": {"node1": {"limit_bytes": 2048 << 20, "anon": 1536 << 20, "page_cache": 500 << 20}}}
    churn = _summary(node_cpu_cores=0.6, client_cpu_cores=0.3, node_disk_read_bytes_per_op=24000.0,
                     node_disk_write_bytes_per_op=0.0)
    v = diagnose(churn, {}, memory, cores=2)
    assert v.limit == "memory" and v.utilisation["page_cache_full"] == pytest.approx(500 / 512, abs=1e-3)
    # reads that fit in memory, or a page cache with room: not memory
    assert diagnose({**churn, "node_disk_read_bytes_per_op": 100.0}, {}, memory, cores=2).limit == "client-threads"
    roomy = {"memory_cgroup": {"node1": {"limit_bytes": 2048 << 20, "anon": 1024 << 20, "page_cache": 500 << 20}}}
    assert diagnose(churn, {}, roomy, cores=2).limit == "client-threads"


def test_busy_read_threads_come_before_memory_and_below_the_caps():
    """A cloud-disk trial with 4 read threads held the volume at 42% of its cap with its page cache full: its reads
    waited on the volume while holding every read thread, so the threads, not memory, set the pace."""
    memory = {"memory_cgroup": {"node1": {"limit_bytes": 2048 << 20, "anon": 1536 << 20, "page_cache": 500 << 20}}}
    few = _summary(node_cpu_cores=0.8, client_cpu_cores=0.2, node_dev_read_ios_per_op=0.54,
                   node_dev_write_ios_per_op=0.0, node_group_read_iops=420.0, node_reads_in_progress=3.9,
                   node_read_threads=4.0, node_read_threads_busy=3.9 / 4)
    caps = {"volume": {"read_iops": 1000, "write_iops": 1000}}
    v = diagnose(few, caps, memory, cores=2)
    assert v.limit == "read-threads" and v.utilisation["volume_read_iops"] == pytest.approx(0.42)
    assert "3.9 reads in progress on 4 read threads (98%)" in v.line()
    # threads with room: the churn of a full page cache is what is left
    assert diagnose({**few, "node_read_threads_busy": 0.5}, caps, memory, cores=2).limit == "memory"
    # a volume at its cap wins over busy threads (they wait because the volume is full)
    assert diagnose({**few, "node_group_read_iops": 990.0}, caps, memory, cores=2).limit == "volume-iops"
    assert LIMITS.index("read-threads") < LIMITS.index("memory") and THRESHOLDS["read_threads"] == 0.9


def test_the_summary_counts_reads_in_progress_from_the_nodes_read_time():
    from nosqltune.workloads.ycsb import cost_summary

    cost = {"operations": 30000, "node1": {"cpu_ms": 20000.0, "read_busy_us": 78_000_000.0, "read_threads": 4.0},
            "client": {"cpu_ms": 5000.0}}
    flat = cost_summary(cost, runtime_ms=20000.0)
    assert flat["node_reads_in_progress"] == pytest.approx(3.9)
    assert flat["node_read_threads"] == 4.0 and flat["node_read_threads_busy"] == pytest.approx(0.975)
    assert cost_summary({"operations": 1, "node1": {"cpu_ms": 1.0}}, 1000.0)["node_read_threads_busy"] is None


def test_no_measured_phase_no_verdict_and_a_stored_verdict_is_read_back():
    assert diagnose({}, {}, {}) is None
    stored = diagnose(_summary(node_cpu_cores=1.9), {}, {}, cores=2).to_dict()
    assert stored["thresholds"] == THRESHOLDS and stored["limit"] in LIMITS
    row = {"state": "COMPLETE", "metrics": {"summary": {}}, "internals": {"bottleneck": stored}}
    assert of_trial(row).limit == "node-cores" and of_trial(row).line() == stored["line"]
    assert of_trial({"state": "FAIL", "internals": {}}) is None


def _rows(db: Path):
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    for r in con.execute("SELECT * FROM trials WHERE state = 'COMPLETE'"):
        row = dict(r)
        for key in ("metrics", "internals", "config"):
            row[key] = json.loads(row[key]) if row[key] else None
        yield row


def _copy_of_disk_bound(tmp_path) -> Path:
    """A copy of the committed study: SQLite leaves -shm/-wal files beside a WAL store even when it only reads."""
    import shutil

    return Path(shutil.copy(RESULTS / "impact" / "disk-bound.db", tmp_path / "disk-bound.db"))


def test_disk_bound_trials_of_the_committed_study_are_limited_by_the_cores(tmp_path):
    # the search's trials and impact_tuning.md's comparisons; not fidelity.md's rounds at other warm-ups and JITs (on
    # a slow day 2 of the default's 10 C1 runs there had idle cores with a full page cache: memory)
    verdicts = [(row, of_trial(row, cores=2)) for row in _rows(_copy_of_disk_bound(tmp_path))
                if not any(k in json.loads(row["meta"] or "{}").get("group", "") for k in ("-x1-warm", "-x1-tiered"))]
    counts = Counter(v.limit for _, v in verdicts)
    assert counts["node-cores"] >= 0.85 * len(verdicts), counts
    # the default configuration's trials all are (node and client share 2 cores, impact_tuning.md)
    defaults = [v for row, v in verdicts if not row["config"]]
    assert defaults and all(v.limit == "node-cores" for v in defaults)
    # the others are the slow configurations (mmap under the 8 MiB read-ahead): page cache full, reading, idle cores
    for row, v in verdicts:
        if v.limit != "node-cores":
            assert v.limit == "memory" and v.utilisation["cores_busy"] < THRESHOLDS["cores"]


def test_best_shows_what_limited_the_default_and_the_best(capsys, tmp_path):
    from nosqltune.cli import main

    study = _copy_of_disk_bound(tmp_path)   # best reads, but never writes, a committed study
    assert main(["best", "--study", str(study), "--study-name", "smac"]) == 0
    out = capsys.readouterr().out
    assert "default limited by the node's cores: node " in out
    assert "best limited by the node's cores" in out
    counts = [line for line in out.splitlines() if line.startswith("what limited the trials: ")]
    assert counts and counts[0].split(": ", 1)[1].startswith("node-cores ")


@pytest.mark.slow   # 18 s: make test-all (make test keeps the verdicts and `best`'s lines above)
def test_the_report_draws_each_trials_verdict(tmp_path):
    from nosqltune.report.data import load_views
    from nosqltune.report.page import build

    views = load_views(str(_copy_of_disk_bound(tmp_path)), "smac")
    index, files = build(views, tmp_path / "report", source="disk-bound")
    assert any(f.name == "smac-bottleneck.png" for f in files)
    assert "What limited each trial" in index.read_text()


def test_the_line_says_what_a_read_could_find_in_memory_and_how_long_the_device_took():
    cached = {"node1": {"Data.db": {"mib": 2000.0, "cached": 0.37}, "Index.db": {"mib": 58.0, "cached": 1.0}},
              "node2": {"Data.db": {"mib": 1500.0, "cached": 0.8}, "Partitions.db": {"mib": 17.0, "cached": 0.5},
                        "Filter.db": {"mib": 2.0, "cached": 0.0}}}
    figures = _summary(node_group_read_iops=946.0, node_dev_read_ms_per_io=1.25, node_cpu_cores=0.7)
    v = diagnose(figures, {"volume": {"read_iops": 1000}}, {"page_cache_by_component": cached}, cores=2)
    assert v.limit == "volume-iops"   # figures for the line: they decide nothing
    assert v.utilisation["data_in_memory"] == 0.37 and v.utilisation["index_in_memory"] == 0.5   # the least node's
    assert v.line().endswith("37% of the data and 50% of the partition index in memory; 1.25 ms per read at the device")
    # without the components (a node without a memory group) or without reads, neither is said
    bare = diagnose(_summary(node_dev_read_ms_per_io=0.1, node_cpu_cores=0.7), {}, {}, cores=2)
    assert "in memory" not in bare.line() and "at the device" not in bare.line()
