"""`best` says in every format whether its best is confirmed: a single cold run's +1% is no reason to change a
production setting. Read from committed stores of two datastores (Redis and Cassandra), on copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nosqltune.cli import main

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
STORES = {"redis": RESULTS / "tuning" / "redis-ycsb-a-mlos6.db", "cassandra": RESULTS / "report" / "sample.db"}


@pytest.mark.parametrize("system", sorted(STORES))
def test_an_unconfirmed_best_is_marked_in_every_format(system, tmp_path, capsys):
    study = tmp_path / "study.db"
    shutil.copy(STORES[system], study)
    said = {}
    for fmt in ("table", "yaml", "json"):
        assert main(["best", "--study", str(study), "--format", fmt]) == 0
        said[fmt] = capsys.readouterr().out
    document = json.loads(said["json"])
    assert document["best_status"] == "unconfirmed" and not document["best"].get("confirmed")
    assert "best (NOT CONFIRMED):" in said["table"] and "NOT CONFIRMED: the best of single cold runs" in said["table"]
    header = [line for line in said["yaml"].splitlines() if line.startswith("#")]
    assert any(line.startswith("# NOT CONFIRMED") for line in header)   # the file an operator copies says it


def test_a_confirmed_best_says_so(tmp_path, capsys):
    study = tmp_path / "study.db"
    shutil.copy(RESULTS / "strategies_v5" / "cloud-disk-real.db", study)
    assert main(["best", "--study", str(study), "--study-name", "gp", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["best_status"] == "confirmed"
    assert main(["best", "--study", str(study), "--study-name", "gp"]) == 0
    table = capsys.readouterr().out
    assert "best:    " in table and "(confirmed: mean of interleaved cold rounds" in table
    assert "NOT CONFIRMED" not in table
