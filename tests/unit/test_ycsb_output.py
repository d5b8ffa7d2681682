"""Parsing YCSB's text output (with PhasedClient's WARMUP/INTERVALS lines) into metrics."""

from pathlib import Path

import pytest

from nosqltune.workloads.ycsb import parse_output, summary, write_properties

SAMPLE = (Path(__file__).parent / "data" / "ycsb_run_a.out").read_text()


def test_overall_and_per_operation_figures():
    m = parse_output(SAMPLE)
    assert m["runtime_ms"] == 20411
    assert m["throughput_ops_s"] == pytest.approx(4899.319, rel=1e-6)
    assert set(m["operations"]) == {"READ", "UPDATE"}  # CLEANUP and client GC sections are not operations
    read = m["operations"]["READ"]
    assert (read["count"], read["p50_us"], read["p95_us"], read["p99_us"]) == (49870, 2285, 6779, 13863)
    assert read["returns"] == {"OK": 49870, "NOT_FOUND": 3}
    assert m["operations"]["UPDATE"]["avg_us"] == pytest.approx(3364.1)


def test_failed_operations_are_visible():
    m = parse_output(SAMPLE)
    assert m["errors"] == 3
    assert m["failed"]["READ"]["count"] == 3


def test_warmup_and_intervals():
    m = parse_output(SAMPLE)
    assert m["warmup"] == {"operations": 30000, "runtime_ms": 9120, "steady": True, "errors": 0}
    assert m["intervals_ops_s"] == [4700, 4950, 5012.5, 4880, 4925]


def test_summary_in_milliseconds():
    s = summary(parse_output(SAMPLE))
    assert s["read_p99_ms"] == pytest.approx(13.863)
    assert s["update_p95_ms"] == pytest.approx(7.867)
    assert s["throughput_median_interval_ops_s"] == 4925
    expected_avg = (49870 * 2911.6620613595347 + 50127 * 3364.1) / (49870 + 50127) / 1000
    assert s["all_avg_ms"] == pytest.approx(expected_avg)
    assert s["errors"] == 3


def test_output_without_result_is_an_error():
    with pytest.raises(ValueError, match="Throughput"):
        parse_output("Error connecting\n[READ], Operations, 5\n")


def test_properties_file_roundtrip(tmp_path):
    path = tmp_path / "w.properties"
    write_properties(path, {"readallfields": True, "recordcount": 1000, "requestdistribution": "zipfian"})
    assert path.read_text().splitlines() == ["readallfields=true", "recordcount=1000", "requestdistribution=zipfian"]


def test_per_second_series_beside_the_throughput():
    text = (Path(__file__).parent / "data" / "ycsb_run_a.out").read_text()
    text += ("[INTERVALS], P99(ms), 4.1 3.9 NaN 4.4 4.0\n"
             "[INTERVALS], SSTablesPerRead, 1.000 1.200 1.250 1.300 1.310\n"
             "[INTERVALS], DiskUsed(MB), 80.5 80.5 96.0 96.0 96.0\n")
    m = parse_output(text)
    assert m["intervals_ops_s"] == [4700, 4950, 5012.5, 4880, 4925]
    assert m["intervals"]["p99_ms"] == [4.1, 3.9, None, 4.4, 4.0]        # NaN (no operation that second) -> None
    assert m["intervals"]["sstables_per_read"][-1] == 1.31 and m["intervals"]["disk_used_mb"][2] == 96.0


COST = """[OVERALL], RunTime(ms), 10000
[OVERALL], Throughput(ops/sec), 2000.0
[READ], Operations, 20000
[READ], AverageLatency(us), 500
[COST], Operations, 20000
[COST], node1.CpuTime(ms), 4000.000
[COST], node1.UserTime(ms), 3000.000
[COST], node1.SystemTime(ms), 1000.000
[COST], node1.GcTime(ms), 100.000
[COST], node1.GcCount, 4.000
[COST], node2.CpuTime(ms), 2000.000
[COST], node2.UserTime(ms), 1500.000
[COST], node2.SystemTime(ms), 500.000
[COST], node2.GcTime(ms), 0.000
[COST], node2.GcCount, 0.000
[COST], client.CpuTime(ms), 5000.000
[COST], client.GcTime(ms), 20.000
"""


def test_cost_of_the_measured_phase_is_summed_over_the_nodes_and_divided_by_the_operations():
    m = parse_output(COST)
    assert set(m["operations"]) == {"READ"}     # [COST] is not an operation type
    assert m["cost"]["node2"] == {"cpu_ms": 2000, "user_ms": 1500, "sys_ms": 500, "gc_ms": 0, "gc_count": 0}
    s = summary(m)
    assert s["node_cpu_ms"] == 6000 and s["node_cpu_user_ms"] == 4500 and s["node_cpu_sys_ms"] == 1500
    assert s["node_cpu_us_per_op"] == pytest.approx(300.0)       # 6 s of CPU over 20,000 operations
    assert s["node_gc_us_per_op"] == pytest.approx(5.0)
    assert s["node_gc_count"] == 4
    assert s["node_cpu_cores"] == pytest.approx(0.6)             # 6 s of CPU in a 10 s phase
    assert s["client_cpu_us_per_op"] == pytest.approx(250.0)
    assert s["client_cpu_user_ms"] is None                       # a figure the source did not give


def test_a_node_whose_cost_was_not_read_leaves_the_cluster_figure_unknown():
    # node2 gave nothing: a sum over node1 alone would pass for the cluster's cost
    text = COST.replace("[COST], node2.CpuTime(ms), 2000.000\n", "")
    s = summary(parse_output(text))
    assert s["node_cpu_ms"] is None and s["node_cpu_us_per_op"] is None
    assert s["node_gc_us_per_op"] == pytest.approx(5.0)


def test_output_without_cost_lines_has_no_cost_figures():
    s = summary(parse_output(SAMPLE))
    assert s["node_cpu_us_per_op"] is None and s["client_cpu_us_per_op"] is None


DISK_FIGURES = ("dev_read_ios", "dev_write_ios", "dev_read_bytes", "dev_write_bytes",
                "group_read_ios", "group_write_ios", "group_read_bytes", "group_write_bytes")
DISK_KEYS = ([f"node_{f}_per_op" for f in DISK_FIGURES]
             + [f"node_{by}_{direction}_{unit}" for by in ("dev", "group") for direction in ("read", "write")
                for unit in ("iops", "mib_s")]
             + ["node_dev_busy", "node_dev_read_ms_per_io"])

# two nodes on volumes of their own: node1 reads more, node2 writes more and is the busier
DISKS = COST + """[COST], node1.DevReadIOs, 30000.000
[COST], node1.DevWriteIOs, 5000.000
[COST], node1.DevReadBytes, 122880000.000
[COST], node1.DevWriteBytes, 327680000.000
[COST], node1.DevReadMs, 15000.000
[COST], node1.DevWriteMs, 2500.000
[COST], node1.DevBusyMs, 6000.000
[COST], node1.GroupReadIOs, 29000.000
[COST], node1.GroupWriteIOs, 4000.000
[COST], node1.GroupReadBytes, 118784000.000
[COST], node1.GroupWriteBytes, 262144000.000
[COST], node2.DevReadIOs, 10000.000
[COST], node2.DevWriteIOs, 8000.000
[COST], node2.DevReadBytes, 40960000.000
[COST], node2.DevWriteBytes, 1048576000.000
[COST], node2.DevReadMs, 5000.000
[COST], node2.DevWriteMs, 8000.000
[COST], node2.DevBusyMs, 9500.000
[COST], node2.GroupReadIOs, 11000.000
[COST], node2.GroupWriteIOs, 8000.000
[COST], node2.GroupReadBytes, 45056000.000
[COST], node2.GroupWriteBytes, 1048576000.000
"""


def test_disk_lines_are_the_nodes_figures():
    m = parse_output(DISKS)
    node1 = m["cost"]["node1"]
    assert node1["cpu_ms"] == 4000
    assert (node1["dev_read_ios"], node1["dev_write_ios"], node1["dev_read_bytes"], node1["dev_write_bytes"]) == \
        (30000, 5000, 122880000, 327680000)
    assert (node1["dev_read_ms"], node1["dev_write_ms"], node1["dev_busy_ms"]) == (15000, 2500, 6000)
    assert (node1["group_read_ios"], node1["group_write_ios"], node1["group_read_bytes"],
            node1["group_write_bytes"]) == (29000, 4000, 118784000, 262144000)
    assert "dev_read_ios" not in m["cost"]["client"]


def test_disk_io_per_operation_is_summed_and_the_rates_are_the_largest_nodes():
    s = summary(parse_output(DISKS))      # 20,000 operations in a 10 s phase
    assert s["node_dev_read_ios_per_op"] == pytest.approx(2.0)
    assert s["node_dev_write_ios_per_op"] == pytest.approx(0.65)
    assert s["node_dev_read_bytes_per_op"] == pytest.approx(8192.0)
    assert s["node_dev_write_bytes_per_op"] == pytest.approx((327680000 + 1048576000) / 20000)
    assert s["node_group_read_ios_per_op"] == pytest.approx(2.0)
    assert s["node_group_write_ios_per_op"] == pytest.approx(0.6)
    assert s["node_group_read_bytes_per_op"] == pytest.approx(8192.0)
    assert s["node_group_write_bytes_per_op"] == pytest.approx((262144000 + 1048576000) / 20000)
    # each node has its own volume and caps: the rate is the larger node's, not the sum
    assert s["node_dev_read_iops"] == pytest.approx(3000.0)         # node1's
    assert s["node_dev_write_iops"] == pytest.approx(800.0)         # node2's
    assert s["node_dev_read_mib_s"] == pytest.approx(122880000 / 2**20 / 10)
    assert s["node_dev_write_mib_s"] == pytest.approx(100.0)        # 1000 MiB in 10 s, node2's
    assert s["node_group_read_iops"] == pytest.approx(2900.0)
    assert s["node_group_write_iops"] == pytest.approx(800.0)
    assert s["node_group_read_mib_s"] == pytest.approx(118784000 / 2**20 / 10)
    assert s["node_group_write_mib_s"] == pytest.approx(100.0)
    assert s["node_dev_busy"] == pytest.approx(0.95)                # node2, the busier
    assert s["node_dev_read_ms_per_io"] == pytest.approx(0.5)      # 20 s of read time over 40,000 reads


def test_a_device_busy_throughout_is_busy_at_most_the_whole_phase():
    # the counters are read a moment outside the phase's own clock
    s = summary(parse_output(DISKS.replace("node2.DevBusyMs, 9500.000", "node2.DevBusyMs, 10040.000")))
    assert s["node_dev_busy"] == 1.0


def test_no_reads_leave_the_time_per_read_unknown():
    text = DISKS.replace("node1.DevReadIOs, 30000.000", "node1.DevReadIOs, 0.000").replace(
        "node2.DevReadIOs, 10000.000", "node2.DevReadIOs, 0.000")
    s = summary(parse_output(text))
    assert s["node_dev_read_ms_per_io"] is None and s["node_dev_read_ios_per_op"] == 0


def test_a_node_without_disk_figures_leaves_the_disk_figures_unknown():
    text = "".join(line + "\n" for line in DISKS.splitlines() if not line.startswith("[COST], node2.Dev"))
    s = summary(parse_output(text))
    assert all(s[key] is None for key in DISK_KEYS if key.startswith("node_dev")), s
    assert s["node_group_read_iops"] == pytest.approx(2900.0)


def test_output_without_disk_lines_has_no_disk_figures():
    for text in (COST, SAMPLE):
        s = summary(parse_output(text))
        assert {key: s[key] for key in DISK_KEYS} == dict.fromkeys(DISK_KEYS)


def test_a_trials_failed_operations_keep_the_clients_words_for_the_first_ones(tmp_path):
    """The client prints its first failed operations, then only counts them: the trial's error keeps the first
    (its folder, with the client's stderr, is removed after the trial) and the metrics the first three."""
    from nosqltune.systems.base import TrialResult, judge_errors
    from nosqltune.workloads.ycsb import error_samples

    err = tmp_path / "run.err"
    err.write_text("SLF4J: no binding\n[loadgen] warm-up: min operations 0\n"
                   "[cql] READ user123 failed: UnavailableException: Not enough replicas available (1 required, 0 alive)\n"
                   "[cql] UPDATE user9 failed: WriteTimeoutException: timed out\n"
                   "[cql] READ user5 failed: ReadTimeoutException: timed out\n[cql] READ user6 failed: x\n"
                   "[cql] further operation errors are counted but not printed\n")
    samples = error_samples(err)
    assert len(samples) == 3 and samples[0].startswith("[cql] READ user123 failed: UnavailableException")
    assert error_samples(tmp_path / "missing.err") == []
    result = TrialResult(state="RUNNING")
    judge_errors(result, {"operations": {"READ": {"count": 2871}}, "errors": 129, "error_samples": samples})
    assert result.state == "FAIL" and result.failure_kind == "workload"
    assert result.error.startswith("129 of 3000 operations failed; the first: [cql] READ user123 failed: Unavailable")
    judge_errors(result := TrialResult(state="RUNNING"), {"operations": {"READ": {"count": 3000}}, "errors": 0})
    assert result.state == "COMPLETE" and result.error is None
