"""Phase-changing traces (issue 39 item 2): the shipped trace, the mix each phase shows the node, the phase at a
time, bad trace files refused in one line, each phase's client workload, and the phases driven in order."""

import threading

import pytest

from nosqltune.workloads.trace import (MAX_THREADS, TraceError, drive, load_trace, parse_trace,
                                       shipped_traces)


def test_the_shipped_trace_shifts_between_read_write_and_scan_heavy_phases():
    assert "shifting" in shipped_traces() and shipped_traces()["shifting"]
    trace = load_trace("shifting")
    assert [p.name for p in trace.phases] == ["read-heavy", "write-heavy", "scan-heavy"]
    assert trace.seconds == 540 and all(p.rate is None for p in trace.phases)   # full speed
    mixes = [p.node_mix() for p in trace.phases]
    assert mixes[0] == pytest.approx({"read": 0.95, "write": 0.05, "scan": 0.0})
    assert mixes[1] == pytest.approx({"read": 0.10, "write": 0.90, "scan": 0.0})
    assert mixes[2] == pytest.approx({"read": 0.0, "write": 0.05, "scan": 0.95})
    # each phase is dominated by another kind: what the shift detector must tell apart
    assert [max(m, key=m.get) for m in mixes] == ["read", "write", "scan"]
    assert trace.average_node_mix() == pytest.approx({"read": 1.05 / 3, "write": 1.0 / 3, "scan": 0.95 / 3})


def test_a_read_modify_write_counts_as_a_read_and_a_write_on_the_node():
    trace = parse_trace({"phases": [{"workload": "ycsb-f", "seconds": 10}]})
    assert trace.phases[0].node_mix() == pytest.approx({"read": 2 / 3, "write": 1 / 3, "scan": 0.0})
    assert trace.phases[0].name == "phase-1"


def test_the_phase_at_a_time():
    trace = parse_trace({"phases": [{"name": "a", "workload": "ycsb-c", "seconds": 60},
                                    {"name": "b", "workload": "ycsb-a", "seconds": 30, "rate": 500}]})
    assert [getattr(trace.phase_at(t), "name", None) for t in (-1, 0, 59.9, 60, 89.9, 90)] == \
        [None, "a", "a", "b", "b", None]


def test_each_phase_is_one_client_run_without_warm_up_stopped_at_its_length():
    trace = parse_trace({"phases": [{"name": "slow", "workload": "read90", "seconds": 45.4, "rate": 750.6,
                                     "threads": 8}]})
    props = trace.phases[0].client_workload(records=2_000_000).properties("run")
    assert props["readproportion"] == pytest.approx(0.9) and props["recordcount"] == 2_000_000
    assert props["warmup.operations"] == 0 and props["maxexecutiontime"] == 45
    assert props["target"] == 751 and props["threadcount"] == 8
    # the length is the time; the count is out of its reach but not so far that the inserts' key space swamps the
    # records (YCSB sizes it from the count: reads would then draw keys that do not exist over and over)
    assert 45.4 * 750.6 < props["operationcount"] <= 2 * 45.4 * 750.6
    full = parse_trace({"phases": [{"workload": "write90", "seconds": 180}]}).phases[0]
    assert full.client_workload(records=10).properties("run")["operationcount"] == 180 * 50_000
    assert "target" not in full.client_workload(records=10).properties("run")


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must be a mapping with 'phases:'"),
    ({"phases": []}, "has no phases"),
    ({"phases": [{"workload": "ycsb-a", "seconds": 5}], "speed": 1}, "unknown key 'speed'"),
    ({"phases": [{"workload": "ycsb-a"}]}, "phase 1 has no seconds"),
    ({"phases": [{"seconds": 5}]}, "phase 1 has no workload"),
    ({"phases": [{"workload": "ycsb-z", "seconds": 5}]}, "phase 1: "),
    ({"phases": [{"workload": "ycsb-a", "seconds": 0}]}, "seconds must be above 0"),
    ({"phases": [{"workload": "ycsb-a", "seconds": "long"}]}, "seconds must be a number"),
    ({"phases": [{"workload": "ycsb-a", "seconds": 5, "rate": -3}]}, "rate must be above 0"),
    ({"phases": [{"workload": "ycsb-a", "seconds": 5, "threads": 1_000_000}]},
     f"threads must be a whole number from 1 to {MAX_THREADS}"),
    ({"phases": [{"workload": "ycsb-a", "seconds": 5, "threads": 2.5}]}, "threads must be a whole number"),
    ({"phases": [{"workload": "ycsb-a", "seconds": 5, "rates": 3}]}, "phase 1: unknown key 'rates'"),
    ({"phases": [{"name": "x", "workload": "ycsb-a", "seconds": 5},
                 {"name": "x", "workload": "ycsb-b", "seconds": 5}]}, "phase 2: the name 'x' is taken"),
    ({"phases": ["ycsb-a"]}, "phase 1 must be a mapping"),
])
def test_a_trace_that_cannot_run_is_one_line(data, message):
    with pytest.raises(TraceError) as caught:
        parse_trace(data, "trace file t.yaml")
    text = str(caught.value)
    assert message in text and "\n" not in text and caught.value.exit_code == 2


def test_trace_files_missing_or_not_yaml_are_one_line(tmp_path):
    with pytest.raises(TraceError, match="neither a trace that ships .*shifting.* nor a file"):
        load_trace(str(tmp_path / "none.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("phases: [\n  - {workload: ycsb-a\n")
    with pytest.raises(TraceError, match=r"is not valid YAML \(line \d+\)"):
        load_trace(str(bad))
    good = tmp_path / "mine.yaml"
    good.write_text("phases:\n  - {workload: ycsb-c, seconds: 30, rate: 100}\n")
    trace = load_trace(str(good))
    assert trace.name == "mine" and trace.phases[0].rate == 100


def test_drive_runs_the_phases_in_order_and_stops_when_asked(tmp_path):
    trace = load_trace("shifting")
    calls, stop, now = [], threading.Event(), iter(range(100))

    def run_phase(phase, workload, folder):
        calls.append((phase.name, workload.mix.get("scanproportion"), folder.name))
        if len(calls) == 2:
            stop.set()   # Ctrl-C during the second phase: it ends, no third starts
        failed = ["[cql] update user1 failed: WriteTimeoutException: timed out"] if len(calls) == 2 else []
        operations = {"READ": {"p99_us": 2500, "returns": {"OK": 900, "NOT_FOUND": 3}},   # stale reads, no line
                      "UPDATE": {"returns": {"OK": 99, "ERROR": len(failed)}}}
        return {"throughput_ops_s": 1000.0 * len(calls), "errors": 3 + len(failed), "error_samples": failed,
                "operations": operations}

    rows = drive(trace, run_phase, records=1000, folder=tmp_path, stop=stop, clock=lambda: float(next(now)))
    assert calls == [("read-heavy", 0, "01-read-heavy"), ("write-heavy", 0, "02-write-heavy")]
    assert [r["phase"] for r in rows] == ["read-heavy", "write-heavy"]
    assert rows[0]["throughput_ops_s"] == 1000.0 and rows[0]["read_p99_ms"] == 2.5
    assert rows[0]["started_at"] < rows[0]["ended_at"] <= rows[1]["started_at"]
    assert rows[1]["node_mix"]["write"] == pytest.approx(0.9)
    # a failed operation is kept in the client's words: the phase's folder goes with the cluster
    assert rows[0]["error_samples"] == [] and rows[1]["errors"] == 4
    assert rows[1]["error_samples"] == ["[cql] update user1 failed: WriteTimeoutException: timed out"]
    # what the errors were: reads that found nothing are told apart from failed requests
    assert rows[0]["not_ok"] == {"READ": {"NOT_FOUND": 3}}
    assert rows[1]["not_ok"] == {"READ": {"NOT_FOUND": 3}, "UPDATE": {"ERROR": 1}}
    from nosqltune.cli.online import _not_ok_text   # and `online` prints them so

    assert _not_ok_text(rows[1]) == " (3 read NOT_FOUND, 1 update ERROR)" and _not_ok_text({}) == ""
