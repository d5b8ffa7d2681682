"""The surrogate pipeline on real Cassandra: a tiny collection (resumed, then extended) feeding a fitted model
and a recommendation; one-knob-at-a-time importance. The rafiki strategy reaching its model step runs on the
recorded surrogate (tests/unit/test_surrogate.py)."""

import json

import pytest

from nosqltune.cli import main
from nosqltune.knobs import load_space
from nosqltune.knobs.space import TuningSpace
from nosqltune.store import open_store
from nosqltune.surrogate.datafile import DATASETS
from nosqltune.surrogate.importance import levels

from .conftest import SMALL


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


@pytest.mark.slow   # 40 s of Cassandra trials: make test-all (the surrogate commands run on recorded data in make test)
def test_collect_then_fit_and_recommend(nosqltune_home, tmp_path, capsys):
    """`collect` on real Cassandra: planned, resumed (nothing re-run), extended (only the new configuration);
    then a model fitted, reported and asked for a recommendation (on the shipped dataset: a handful of real
    trials makes no model)."""
    study = tmp_path / "train.db"
    base = ["collect", "--knobs", "rafiki5", "--read-ratios", "0.5", "--noise-repeats", "0", *SMALL,
            "--study", str(study)]
    code, result = run(capsys, *base, "--configs", "1")
    assert code == 0, result
    assert result["planned"] == 1 and result["ran"] == 1 and result["remaining"] == 0
    code, again = run(capsys, *base, "--configs", "1")
    assert code == 0 and again["ran"] == 0 and again["done_before"] == 1          # resumable: nothing re-run
    code, more = run(capsys, *base, "--configs", "2")
    assert code == 0 and more["ran"] == 1 and more["planned"] == 2               # extended: one new config
    rows = open_store(str(study)).trials()
    assert len(rows) == 2 and all(r["state"] == "COMPLETE" and r["tag"] == "collect" for r in rows)
    assert {r["workload"]["mix"]["readproportion"] for r in rows} == {0.5}
    assert sorted(r["meta"]["collect"]["config"] for r in rows) == [0, 1]
    assert rows[0]["config"] != rows[1]["config"]

    dataset = str(DATASETS / "wide24.json.gz")
    model_dir = tmp_path / "model"
    code, fitted = run(capsys, "model", "fit", "--study", dataset, "--kind", "rf", "--out", str(model_dir))
    assert code == 0 and fitted["trials"] > 100 and (model_dir / "model.pkl").exists()
    assert fitted["noise"]["cv"] is not None                # the dataset repeats the default
    code = main(["recommend", "--model", str(model_dir), "--workload", "read=0.5", "--format", "json"])
    rec = json.loads(capsys.readouterr().out)
    assert code == 0 and rec["predicted"] > 0 and rec["read_ratio"] == 0.5
    assert set(rec["config"]) <= set(load_space("cassandra").knobs) and rec["config"]
    code = main(["model", "report", "--study", dataset, "--kinds", "rf", "--repeats", "1", "--domain", "TD2",
                 "--workload", "read90-zipfian"])
    out = capsys.readouterr().out
    assert code == 0 and "| rf | configs |" in out and "(53 trials, tuning domain TD2" in out


@pytest.mark.slow   # 14 s of Cassandra trials: make test-all (its bad input is checked in make test: unit/test_cli.py)
def test_importance_one_knob_at_a_time(nosqltune_home, tmp_path, capsys):
    knobs = tmp_path / "knobs.yaml"
    knobs.write_text("knobs: [trickle_fsync]\n")
    study = tmp_path / "imp.db"
    code, result = run(capsys, "importance", "--workload", "ycsb-a", "--knobs", str(knobs), "--levels", "2", *SMALL,
                       "--study", str(study), "--chart", str(tmp_path / "imp.png"))
    assert code == 0, result
    rows = open_store(str(study)).trials()
    # the default (trickle_fsync off), then the knob's other value
    space = TuningSpace(load_space("cassandra").subset(str(knobs)))
    assert [v for _, v in levels(space, 2)] == [True]
    assert [r["config"] for r in rows] == [{"trickle_fsync": False}, {"trickle_fsync": True}]
    assert all(r["state"] == "COMPLETE" for r in rows)
    assert rows[1]["internals"]["node_settings"] == {"trickle_fsync": "true"}     # it reached the node
    assert [r["knob"] for r in result["ranking"]] == ["trickle_fsync"]
    assert result["key_knobs"] == ["trickle_fsync"] and (tmp_path / "imp.png").stat().st_size > 1000
