"""`nosqltune online --nodes 2 --rf 2` on real nodes (issue 39): the run starts and loads its own cluster, drives a
short two-phase trace against it, asks the model (the recorded wide24 surrogate's), and with a horizon long enough
for any predicted gain to pay, rolls a restart through both nodes one at a time while the trace's client keeps
sending at consistency ONE: no operation fails, each node comes back with the changes, and everything the run
started is gone at the end."""

from __future__ import annotations

import json

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store

# long enough phases: the shift detector ignores 180 s after a change, and a restart pays only when the mix it is
# for has lasted longer than the restart takes (the cost-benefit's dwell)
TRACE = """name: short
phases:
  - {name: reads, workload: ycsb-b, seconds: 200, threads: 4}
  - {name: writes, workload: write90, seconds: 200, threads: 4}
"""


@pytest.mark.slow   # about 9 minutes: a 2-node cluster, a 400 s trace and a rolling restart
def test_a_local_cluster_is_restarted_one_node_at_a_time_without_a_failed_operation(wide24_model, nosqltune_home,
                                                                                   tmp_path, capsys):
    trace = tmp_path / "short.yaml"
    trace.write_text(TRACE)
    study = tmp_path / "online.db"
    code = main(["online", "--nodes", "2", "--rf", "2", "--heap", "768M", "--trace", str(trace), "--records", "5000",
                 "--window", "10", "--horizon", "1000000", "--model", str(wide24_model), "--study", str(study),
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    summary = json.loads(captured.out)
    acted = [d for d in summary["restart_decisions"] if d["verdict"] == "act"]
    assert acted and summary["restarts"] >= 1, captured.err[-3000:]
    assert any(d.get("performed") for d in acted), captured.err[-3000:]
    assert summary["trace_error"] is None and len(summary["trace"]) == 2
    assert all((row["errors"] or 0) == 0 for row in summary["trace"]), summary["trace"]   # ONE, RF 2: served
    assert all(row["throughput_ops_s"] > 0 for row in summary["trace"])
    # the roll is stored: each node's turn with its time, and the running configuration took the changes
    store = open_store(str(study))
    rows = store.trials()
    rolls = [r["meta"]["online"]["restart"] for r in rows
             if (((r.get("meta") or {}).get("online") or {}).get("restart") or {}).get("roll")]
    assert rolls and [t["node"] for t in rolls[0]["roll"]] == ["node1", "node2"]
    assert all(t["ok"] and t["seconds"] > 0 for t in rolls[0]["roll"])
    assert {c["knob"] for c in rolls[0]["rolled"]} <= set(summary["running"])
    # nothing left: no cluster folder (no node JVM either: the autouse no_orphans fixture checks)
    assert not list((nosqltune_home / "online").glob("cluster-*"))
