"""The YCSB runner's fault paths: a client that hangs is killed on time, one that fails says why."""

import time

import pytest

from nosqltune.errors import TrialError
from nosqltune.workloads import ycsb
from nosqltune.workloads.spec import make_workload


def _fake_client(monkeypatch, script: list[str]):
    monkeypatch.setattr(ycsb, "loadgen_java_command", lambda main, args, flags=None: script)


def test_hanging_client_is_killed_and_reported(monkeypatch, tmp_path):
    _fake_client(monkeypatch, ["sleep", "60"])
    started = time.monotonic()
    with pytest.raises(TrialError) as info:
        ycsb.run_client("run", make_workload("ycsb-a"), host="127.0.0.1", port=1, trial_dir=tmp_path, timeout=1)
    assert info.value.kind == "timeout" and "did not finish within 1 s" in str(info.value)
    assert time.monotonic() - started < 10


def test_failing_client_gives_its_last_line(monkeypatch, tmp_path):
    _fake_client(monkeypatch, ["sh", "-c", "echo 'SLF4J: noise' >&2; echo 'error: cannot connect to 127.0.0.1:1' >&2; "
                                           "exit 1"])
    with pytest.raises(TrialError) as info:
        ycsb.run_client("run", make_workload("ycsb-a"), host="127.0.0.1", port=1, trial_dir=tmp_path, timeout=10)
    assert info.value.kind == "workload"
    assert str(info.value) == "YCSB run failed (exit 1): error: cannot connect to 127.0.0.1:1"
    assert "cannot connect" in info.value.log_excerpt


def test_client_without_result_is_a_failed_workload(monkeypatch, tmp_path):
    _fake_client(monkeypatch, ["sh", "-c", "echo '[READ], Operations, 5'"])
    with pytest.raises(TrialError, match="printed no result"):
        ycsb.run_client("run", make_workload("ycsb-a"), host="127.0.0.1", port=1, trial_dir=tmp_path, timeout=10)


def test_properties_given_to_the_client(monkeypatch, tmp_path):
    _fake_client(monkeypatch, ["sh", "-c", "echo '[OVERALL], Throughput(ops/sec), 10.0'"])
    w = make_workload("ycsb-c", records=1000, operations=2000, threads=3, warmup_operations=500)
    metrics = ycsb.run_client("run", w, host="127.0.0.1", port=9999, trial_dir=tmp_path, timeout=10)
    assert metrics["throughput_ops_s"] == 10.0 and metrics["wall_seconds"] >= 0
    props = dict(line.split("=", 1) for line in (tmp_path / "run.properties").read_text().splitlines())
    assert (props["hosts"], props["port"], props["recordcount"], props["operationcount"]) == \
        ("127.0.0.1", "9999", "1000", "2000")
    assert (props["threadcount"], props["warmup.operations"], props["readproportion"]) == ("3", "500", "1")
