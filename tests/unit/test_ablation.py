"""The ablation of a best (`best --ablation`, `compare --ablation`) on the recorded surrogate: each changed setting
reverted alone, beside the best and the default in interleaved rounds; its share of the gain, and which are
optional. The unit parts (the variants, the shares) on hand-made values."""

from __future__ import annotations

import json
import math

import pytest

from nosqltune.cli import main
from nosqltune.evaluation.ablation import shares, variants
from nosqltune.knobs import load_space


def test_a_variant_reverts_one_setting_and_names_what_becomes_inert_with_it():
    space = load_space("cassandra")
    best = {"file_cache_enabled": True, "file_cache_size": 64, "heap_size": 512, "concurrent_reads": 32}
    found = variants(space, best)
    assert set(found) == {"file_cache_enabled", "file_cache_size", "heap_size"}   # concurrent_reads is its default
    config, inert = found["file_cache_enabled"]
    assert "file_cache_enabled" not in config and inert == ["file_cache_size"]
    assert found["heap_size"][1] == []


def test_a_share_is_the_part_of_the_gain_on_a_log_scale_lost_without_the_setting():
    # best x4 over the default; without the setting x2: half the gain (log 2 of log 4) is lost
    assert shares([400.0], [100.0], [200.0], maximize=True) == [pytest.approx(0.5)]
    # a latency: lower is better
    assert shares([1.0], [4.0], [1.0], maximize=False) == [0.0]
    # rounds where a run failed, or the best did not beat the default, carry no share
    assert shares([None, 90.0, 400.0], [100.0, 100.0, 100.0], [50.0, 50.0, 400.0], maximize=True) == [0.0]
    assert math.isclose(shares([300.0], [100.0], [100.0], maximize=True)[0], 1.0)


def test_best_ablation_on_a_surrogate_study(tmp_path, capsys, monkeypatch, surrogate_cache):
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    study = tmp_path / "a.db"
    # the cloud-disk scenario's recorded dataset, where a best gains most by its heap (bench/results/landscape.md)
    assert main(["tune", "--system", "surrogate:cloud13", "--read-ratio", "0.95", "--distribution", "uniform",
                 "--optimizer", "random", "--budget", "12", "--seed", "1", "--study", str(study), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert main(["best", "--study", str(study), "--ablation", "--ablation-rounds", "6", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    ablation = result["ablation"]
    space = load_space("cassandra")
    changed = {k for k, v in best["config"].items() if space[k].coerce(v, allow_outside_range=True) != space[k].default}
    assert set(ablation["settings"]) == changed and ablation["rounds"] == 6
    (workload,) = ablation["workloads"]
    assert ablation["gain"][workload]["verdict"] == "better"
    for name, per in ablation["settings"].items():
        w = per[workload]
        assert w["rounds"] <= 6 and w["versus_best"]["pairs"] == 6
        assert isinstance(per["optional"], bool)
        assert w["interval"][0] <= w["share"] <= w["interval"][1]
        # optional exactly when reverting is not measurably worse and the share is not above 0
        assert per["optional"] == (w["versus_best"]["verdict"] != "worse" and w["interval"][0] <= 0)
    ranked = sorted(ablation["settings"], key=lambda k: -ablation["settings"][k][workload]["share"])
    assert ranked[0] == "heap_size" and ablation["settings"]["heap_size"][workload]["share"] > 0.5
    assert not ablation["settings"]["heap_size"]["optional"] and any(p["optional"] for p in ablation["settings"].values())
    # the best, the default and one variant per setting, each in every round, stored as the comparison's runs
    from nosqltune.store import open_store

    store = open_store(str(study))
    try:
        rows = [r for r in store.trials() if (r.get("meta") or {}).get("group", "").startswith("ablation")]
    finally:
        store.close()
    assert len(rows) == 6 * (2 + len(changed))
    # shown again without running anything, as lines
    assert main(["best", "--study", str(study)]) == 0
    out = capsys.readouterr().out
    assert f"ablation on {workload} (6 interleaved rounds)" in out and "sum of the shares" in out
    assert "heap_size" in out and "OPTIONAL" in out
    assert len(open_store(str(study)).trials()) == len(rows) + 12
