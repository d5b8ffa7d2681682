"""`nosqltune tune` on real Cassandra, one run per optimizer family (random: the shared study below; SMAC: the
resume test; irace through R; all in `make test-all`), and `best`, `compare`, `report`, `export` on one
shared real study. The other optimizers (gp, rafiki, surrogate-sa) run against the recorded surrogate in the
unit tests."""

import csv
import io
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

from .conftest import SMALL, our_jvms, sigint_default

ROOT = Path(__file__).resolve().parents[2]
VERDICTS = ("better", "no significant difference", "worse")


def tune(study: Path, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["tune", "--workload", "ycsb-a", *SMALL, "--study", str(study), "--json", *extra])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


@pytest.fixture(scope="module")
def latency_study(nosqltune_home, tmp_path_factory):
    """One real tuning study shared by the checks of best, compare, report and export: random search on the
    node's CPU per operation with a throughput and a latency constraint, the default and one suggestion."""
    study = tmp_path_factory.mktemp("shared") / "cost.db"
    code = main(["tune", "--workload", "ycsb-a", *SMALL, "--study", str(study), "--json", "--optimizer", "random",
                 "--knobs", "vorstella5", "--budget", "2", "--objective", "cpu-per-op", "--constraint",
                 "throughput>=10", "--constraint", "p99-update<=10000"])
    assert code == 0
    return study


@pytest.mark.slow   # 40 s: make test-all (make test keeps a real tune on Redis, tests/integration/test_redis.py, and
#                     real Cassandra trials in test_security.py and test_capture.py; the loop on the recorded surrogate)
def test_random_search_on_the_nodes_cpu_per_operation(latency_study, capsys):
    rows = open_store(str(latency_study)).trials()
    assert [r["state"] for r in rows] == ["COMPLETE", "COMPLETE"]
    assert rows[0]["meta"]["kind"] == "default"      # the default is measured first, as the study's reference
    for row in rows:
        assert row["meta"]["optimizer"] == "random" and row["meta"]["instance"] == "ycsb-a"
        assert row["meta"]["cost"] == row["metrics"]["summary"]["node_cpu_us_per_op"] > 0   # minimized as it is
    assert main(["best", "--study", str(latency_study), "--format", "json"]) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["objective"] == "minimize cpu-per-op subject to throughput>=10, p99-update<=10000"
    assert best["unit"] == "us/op"
    assert best["best"]["value"] == min(r["metrics"]["summary"]["node_cpu_us_per_op"] for r in rows)
    assert main(["best", "--study", str(latency_study), "--format", "yaml"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# nosqltune best: study tune")
    assert ("# diff against the default" in out) != ("# the default configuration: no changes" in out)


@pytest.mark.slow   # 65 s: make test-all (make test keeps compare, report and export on the recorded surrogate: tests/unit/test_surrogate.py, test_report.py)
def test_compare_report_export_on_the_shared_study(latency_study, tmp_path, capsys):
    code = main(["compare", "--study", str(latency_study), "--repeat", "2", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    rows = [r for r in open_store(str(latency_study)).trials() if r["tag"] == "compare"]
    assert [(r["meta"]["round"], r["meta"]["candidate"]) for r in rows] == \
        [(0, "default"), (0, "best"), (1, "best"), (1, "default")]          # interleaved ABBA
    entry = result["workloads"]["ycsb-a"]
    assert len(entry["values"]["default"]) == len(entry["values"]["best"]) == 2
    assert all(v and v > 0 for v in entry["values"]["default"] + entry["values"]["best"])
    stats = entry["stats"]["best"]
    assert stats["pairs"] == 2 and stats["verdict"] in VERDICTS
    # two pairs can never show a difference at p < 0.05 (the smallest two-sided Wilcoxon p of 2 pairs is 0.5)
    assert stats["verdict"] == "no significant difference"
    # throughput is tested beside the objective, on the same runs
    side = entry["also"]["throughput"]
    assert side["unit"] == "ops/s" and side["stats"]["best"]["pairs"] == 2
    assert side["values"]["default"] == [r["metrics"]["summary"]["throughput_ops_s"] for r in rows
                                         if r["meta"]["candidate"] == "default"]
    assert entry["values"]["best"] == [r["metrics"]["summary"]["node_cpu_us_per_op"] for r in rows
                                       if r["meta"]["candidate"] == "best"]
    stored = open_store(str(latency_study)).find_study("tune")["settings"]["compare"]["x1"]
    assert stored["workloads"]["ycsb-a"]["stats"]["best"]["pairs"] == 2
    # every measured phase carries its per-second series, whatever the machine's speed: client p99 and the
    # node's internals over JMX (a phase shorter than a second has one sample)
    for row in rows:
        series = row["metrics"]["intervals"]
        seconds = len(row["metrics"]["intervals_ops_s"])
        assert seconds >= 1 and all(len(series[k]) == seconds for k in
                                    ("p99_ms", "sstables", "sstables_per_read", "disk_used_mb"))
        assert all(v is not None and v > 0 for v in series["p99_ms"] + series["disk_used_mb"])
        assert all(v is not None and v >= 1 for v in series["sstables"])

    code = main(["report", "--study", str(latency_study), "--out", str(tmp_path / "report"), "--json"])
    written = json.loads(capsys.readouterr().out)
    assert code == 0 and any(f.endswith("tune-internals.png") for f in written["figures"])
    assert any(f.endswith("tune-node-cost.png") for f in written["figures"])     # CPU per operation per trial
    assert "mean speedup" in (tmp_path / "report" / "index.html").read_text()

    code = main(["export", "--study", str(latency_study), "--format", "csv"])
    records = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert code == 0 and len(records) == 6 and {r["tag"] for r in records} == {"tune", "compare"}
    assert all(float(r["metric.node_cpu_us_per_op"]) > 0 and float(r["metric.client_cpu_us_per_op"]) > 0
               for r in records)


@pytest.mark.slow   # 55 s; irace through R runs in `make test` on the analytic function (tests/unit)
def test_irace_races_on_real_cassandra(nosqltune_home, tmp_path, capsys):
    knobs = tmp_path / "two.yaml"
    knobs.write_text("knobs: [compaction_method, concurrent_writes]\n")
    study = tmp_path / "irace.db"
    code, result = tune(study, capsys, "--optimizer", "irace", "--knobs", str(knobs), "--budget", "6")
    assert code == 0, result
    rows = open_store(str(study)).trials()
    # irace may end its race before the budget (no new configuration could enter it)
    assert 3 <= len(rows) <= 6 and all(r["state"] == "COMPLETE" for r in rows)
    assert rows[0]["config"] == {"compaction_method": "SizeTiered", "concurrent_writes": 32}   # irace's initial
    assert any(r["meta"]["opt"]["irace_config"] == 1 for r in rows)   # the default is irace's first configuration
    for row in rows:
        assert row["meta"]["optimizer"] == "irace"
        assert row["meta"]["cost"] == -row["metrics"]["summary"]["throughput_ops_s"]
        # what irace chose reached the node: the table's compaction class is read back for every trial
        wanted = {"SizeTiered": "SizeTieredCompactionStrategy", "Leveled": "LeveledCompactionStrategy",
                  "UnifiedCompaction": "UnifiedCompactionStrategy"}
        assert row["internals"]["table_options"]["compaction"]["class"].endswith(
            wanted[row["config"]["compaction_method"]])
    assert result["trials"] == len(rows) and result["default"]["trials"] >= 1
    assert (tmp_path / "irace.tune.irace" / "irace.log").exists()


@pytest.mark.slow   # 61 s: make test-all (make test keeps SMAC's resume after an interrupt on the analytic function,
# tests/unit/test_tuning_loop.py, Ctrl-C during a real Cassandra bench and a killed tuner's resume in the fault campaign)
def test_interrupted_smac_tune_resumes_without_lost_or_repeated_trials(nosqltune_home, tmp_path):
    study = tmp_path / "resume.db"
    cmd = [sys.executable, "-m", "nosqltune", "tune", "--workload", "ycsb-a", *SMALL, "--study", str(study),
           "--optimizer", "smac", "--knobs", "rafiki5", "--budget", "3", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    deadline = time.time() + 400
    while time.time() < deadline:
        time.sleep(0.5)
        if study.exists():
            rows = open_store(str(study)).trials()
            if len(rows) >= 2 and rows[-1]["state"] == "RUNNING":
                break
    else:
        proc.kill()
        pytest.fail("the second trial never started")
    # while the run holds the study, a second tune is refused in one line and read-only commands still work
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert second.returncode == 2 and "being tuned by another process" in second.stderr, second.stderr
    assert len(second.stderr.strip().splitlines()) == 1
    assert subprocess.run(cmd[:3] + ["export", "--study", str(study), "--format", "json"], env=env,
                          capture_output=True, timeout=120).returncode == 0
    time.sleep(3)  # inside the trial: the node is booting or measuring
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert not our_jvms(str(nosqltune_home))
    before = open_store(str(study)).trials()
    assert [r["state"] for r in before] == ["COMPLETE", "FAIL"]
    assert before[-1]["failure_kind"] == "interrupted"
    assert before[0]["config"] == {"concurrent_writes": 32, "memtable_cleanup_threshold": 0.33,
                                   "concurrent_compactors": 2, "compaction_method": "SizeTiered"}
    for row in before[:1]:
        assert row["meta"]["optimizer"] == "smac"
        assert row["meta"]["cost"] == -row["metrics"]["summary"]["throughput_ops_s"]

    done = subprocess.run(cmd[:4] + ["--study", str(study), "--resume", "--json"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = open_store(str(study)).trials()
    finished = [r for r in after if r["failure_kind"] != "interrupted"]
    assert len(finished) == 3 and all(r["state"] == "COMPLETE" for r in finished)
    assert finished[0]["id"] == before[0]["id"]  # kept, not rerun
    assert finished[1]["config"] == before[1]["config"]  # the interrupted suggestion ran again
    assert [r["meta"]["suggestion"] for r in finished] == [0, 1, 2]
    result = json.loads(done.stdout)
    assert result["trials"] == 3
    assert result["best"]["value"] == max(r["metrics"]["summary"]["throughput_ops_s"] for r in finished)
