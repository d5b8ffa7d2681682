"""The surrogate pipeline on real Cassandra: a tiny collection (resumed, then extended) feeding a fitted model
and a recommendation; one-knob-at-a-time importance. The rafiki strategy reaching its model step runs on the
recorded surrogate (tests/unit/test_surrogate.py)."""

import json

from nosqltune.cli import main
from nosqltune.knobs import load_space
from nosqltune.knobs.space import TuningSpace
from nosqltune.store import open_store
from nosqltune.surrogate.importance import levels

from .conftest import SMALL


def run(capsys, *argv: str) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def test_collect_fit_recommend(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "train.db"
    base = ["collect", "--knobs", "rafiki5", "--read-ratios", "0.2,0.8", "--noise-repeats", "1", *SMALL,
            "--study", str(study)]
    code, result = run(capsys, *base, "--configs", "1")
    assert code == 0, result
    assert result["planned"] == 1 * 2 + 2 and result["ran"] == 4 and result["remaining"] == 0
    code, again = run(capsys, *base, "--configs", "1")
    assert code == 0 and again["ran"] == 0 and again["done_before"] == 4          # resumable: nothing re-run
    code, more = run(capsys, *base, "--configs", "2")
    assert code == 0 and more["ran"] == 2 and more["planned"] == 6               # extended: one new config x 2
    rows = open_store(str(study)).trials()
    assert len(rows) == 6 and all(r["state"] == "COMPLETE" and r["tag"] == "collect" for r in rows)
    ratios = sorted({r["workload"]["mix"]["readproportion"] for r in rows})
    assert ratios == [0.2, 0.8]
    assert sorted({r["meta"]["collect"]["config"] for r in rows}) == [0, 1]

    model_dir = tmp_path / "model"
    code, fitted = run(capsys, "model", "fit", "--study", str(study), "--kind", "rf", "--out", str(model_dir))
    assert code == 0 and fitted["trials"] == 6 and (model_dir / "model.pkl").exists()
    assert fitted["noise"]["groups"] == 2 and fitted["noise"]["cv"] is not None   # the default ran twice per ratio
    code = main(["recommend", "--model", str(model_dir), "--workload", "read=0.5", "--format", "json"])
    rec = json.loads(capsys.readouterr().out)
    assert code == 0 and set(rec["config"]) == {"compaction_method", "concurrent_writes", "memtable_cleanup_threshold",
                                                "concurrent_compactors"}   # file_cache_size is inert in 5.0
    assert rec["predicted"] > 0 and rec["read_ratio"] == 0.5
    code = main(["model", "report", "--study", str(study), "--kinds", "rf", "--repeats", "2"])
    assert code == 0 and "| rf | configs |" in capsys.readouterr().out


def test_importance_one_knob_at_a_time(nosqltune_home, tmp_path, capsys):
    knobs = tmp_path / "knobs.yaml"
    knobs.write_text("knobs: [concurrent_writes]\n")
    study = tmp_path / "imp.db"
    code, result = run(capsys, "importance", "--workload", "ycsb-a", "--knobs", str(knobs), "--levels", "2", *SMALL,
                       "--study", str(study), "--chart", str(tmp_path / "imp.png"))
    assert code == 0, result
    rows = open_store(str(study)).trials()
    # the default, then concurrent_writes at 8 and at 64
    space = TuningSpace(load_space("cassandra").subset(str(knobs)))
    assert {v for k, v in levels(space, 2) if k == "concurrent_writes"} == {8, 64}
    assert len(rows) == 3 and rows[0]["config"] == {"concurrent_writes": 32}     # the default first
    assert sorted(r["config"]["concurrent_writes"] for r in rows[1:]) == [8, 64]
    assert all(r["state"] == "COMPLETE" for r in rows)
    assert [r["knob"] for r in result["ranking"]] == ["concurrent_writes"]
    assert result["key_knobs"] == ["concurrent_writes"] and (tmp_path / "imp.png").stat().st_size > 1000
