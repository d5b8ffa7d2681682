"""`nosqltune tune` on real Cassandra: a short run per strategy, irace through R, resume after Ctrl-C."""

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

from .conftest import our_jvms, sigint_default
from .test_bench import SMALL

ROOT = Path(__file__).resolve().parents[2]


def tune(study: Path, capsys, *extra: str) -> tuple[int, dict]:
    code = main(["tune", "--workload", "ycsb-a", *SMALL, "--study", str(study), "--json", *extra])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


@pytest.mark.parametrize("optimizer, budget", [("random", 3), ("gp", 3), ("smac", 3), ("irace", 6)])
def test_short_tune_per_strategy(nosqltune_home, tmp_path, capsys, optimizer, budget):
    study = tmp_path / f"{optimizer}.db"
    code, result = tune(study, capsys, "--optimizer", optimizer, "--knobs", "rafiki5", "--budget", str(budget))
    assert code == 0, result
    rows = open_store(str(study)).trials()
    assert 2 <= len(rows) <= budget and all(r["state"] == "COMPLETE" for r in rows)
    assert rows[0]["config"] == {"concurrent_writes": 32, "memtable_cleanup_threshold": 0.33,
                                 "concurrent_compactors": 2, "compaction_method": "SizeTiered"}
    for row in rows:
        assert row["meta"]["optimizer"] == optimizer and row["meta"]["instance"] == "ycsb-a"
        assert row["meta"]["cost"] == -row["metrics"]["summary"]["throughput_ops_s"]
        assert row["metrics"]["summary"]["errors"] == 0
        # what the optimizer chose reached the node: the table's compaction class is read back
        if row["config"]["compaction_method"] == "Leveled":
            assert "Leveled" in json.dumps(row["internals"])
    assert result["trials"] == len(rows) and result["default"]["trials"] >= 1
    assert result["best"]["value"] == max(r["metrics"]["summary"]["throughput_ops_s"] for r in rows) \
        or optimizer == "irace"  # irace ranks configurations by their mean over repeated runs
    if optimizer == "irace":
        assert (tmp_path / f"{optimizer}.tune.irace" / "irace.log").exists()
        assert any(r["meta"]["opt"]["irace_config"] == 1 for r in rows)  # the default, irace's initial config


def test_latency_objective_with_a_constraint(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "p99.db"
    code, result = tune(study, capsys, "--optimizer", "random", "--knobs", "vorstella5", "--budget", "3",
                        "--objective", "p99-update", "--constraint", "throughput>=10")
    assert code == 0, result
    assert result["objective"] == "minimize p99-update subject to throughput>=10"
    rows = open_store(str(study)).trials()
    assert result["best"]["value"] == min(r["metrics"]["summary"]["update_p99_ms"] for r in rows)
    assert main(["best", "--study", str(study), "--format", "yaml"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# nosqltune best: study tune")
    assert ("# diff against the default" in out) != ("# the default configuration: no changes" in out)


def test_interrupted_tune_resumes_without_lost_or_repeated_trials(nosqltune_home, tmp_path):
    study = tmp_path / "resume.db"
    cmd = [sys.executable, "-m", "nosqltune", "tune", "--workload", "ycsb-a", *SMALL, "--study", str(study),
           "--optimizer", "smac", "--knobs", "rafiki5", "--budget", "4", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    deadline = time.time() + 400
    while time.time() < deadline:
        time.sleep(0.5)
        if study.exists():
            rows = open_store(str(study)).trials()
            if len(rows) >= 3 and rows[-1]["state"] == "RUNNING":
                break
    else:
        proc.kill()
        pytest.fail("the third trial never started")
    time.sleep(3)  # inside the trial: the node is booting or measuring
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert not our_jvms(str(nosqltune_home))
    before = open_store(str(study)).trials()
    assert [r["state"] for r in before] == ["COMPLETE", "COMPLETE", "FAIL"]
    assert before[-1]["failure_kind"] == "interrupted"

    done = subprocess.run(cmd[:4] + ["--study", str(study), "--resume", "--json"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    after = open_store(str(study)).trials()
    finished = [r for r in after if r["failure_kind"] != "interrupted"]
    assert len(finished) == 4 and all(r["state"] == "COMPLETE" for r in finished)
    assert [r["id"] for r in finished[:2]] == [r["id"] for r in before[:2]]  # kept, not rerun
    assert finished[2]["config"] == before[2]["config"]  # the interrupted suggestion ran again
    assert [r["meta"]["suggestion"] for r in finished] == [0, 1, 2, 3]
    assert json.loads(done.stdout)["trials"] == 4


def test_compare_best_with_default_on_real_cassandra(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "cmp.db"
    code, _ = tune(study, capsys, "--optimizer", "random", "--knobs", "rafiki5", "--budget", "2")
    assert code == 0
    code = main(["compare", "--study", str(study), "--repeat", "2", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    entry = result["workloads"]["ycsb-a"]
    assert len(entry["values"]["default"]) == len(entry["values"]["best"]) == 2
    assert all(v and v > 0 for v in entry["values"]["default"] + entry["values"]["best"])
    assert entry["stats"]["best"]["pairs"] == 2 and entry["stats"]["best"]["verdict"]
    rows = [r for r in open_store(str(study)).trials() if r["tag"] == "compare"]
    assert [(r["meta"]["round"], r["meta"]["candidate"]) for r in rows] == \
        [(0, "default"), (0, "best"), (1, "best"), (1, "default")]          # interleaved ABBA
    stored = open_store(str(study)).find_study("tune")["settings"]["compare"]["x1"]
    assert stored["workloads"]["ycsb-a"]["stats"]["best"]["pairs"] == 2
    # every measured phase carries its per-second series: client p99 and the node's internals over JMX
    for row in rows:
        series = row["metrics"]["intervals"]
        seconds = len(row["metrics"]["intervals_ops_s"])
        assert seconds >= 1 and all(len(series[k]) == seconds for k in
                                    ("p99_ms", "sstables", "sstables_per_read", "disk_used_mb"))
        assert all(v is not None and v > 0 for v in series["p99_ms"] + series["disk_used_mb"])
        assert all(v is not None and v >= 1 for v in series["sstables"])

    # the best-practice baseline on the same study, then the report of it all
    code = main(["compare", "--study", str(study), "--candidates", "best-practice", "--repeat", "2", "--json"])
    practice = json.loads(capsys.readouterr().out)
    assert code == 0 and practice["candidates"]["best-practice"]["concurrent_writes"] == 8 * practice[
        "best_practice"]["machine"]["cores"]
    assert practice["workloads"]["ycsb-a"]["stats"]["best-practice"]["pairs"] == 2
    code = main(["report", "--study", str(study), "--out", str(tmp_path / "report"), "--json"])
    written = json.loads(capsys.readouterr().out)
    assert code == 0 and any(f.endswith("tune-internals.png") for f in written["figures"])
