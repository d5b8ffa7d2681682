"""Redis's knob space as data: the MLOS / LlamaTune report's Table 2 as the set mlos6, Redis 7.0 defaults,
directives as keys, and the conditions that say when a knob acts."""

from __future__ import annotations

import pytest

from nosqltune.knobs import KnobError, load_space, load_space_file
from nosqltune.knobs.space import TuningSpace


def test_the_mlos_reports_table2_is_mlos6():
    space = load_space("redis")
    mlos6 = space.subset("mlos6")
    assert all(k.sources == ("mlos-report-table2",) for k in mlos6.knobs.values())
    assert [k.name for k in mlos6.knobs.values()] == ["maxmemory_policy", "tcp_backlog", "appendfsync", "timeout",
                                                       "save_60_changes", "auto_aof_rewrite_percentage"]
    ranges = {k.name: k.range for k in mlos6.knobs.values() if k.range}
    assert ranges == {"tcp_backlog": (100, 600), "timeout": (0, 60), "save_60_changes": (1000, 10000),
                      "auto_aof_rewrite_percentage": (0, 100)}
    assert set(mlos6.knobs["maxmemory_policy"].choices) == {"volatile-random", "noeviction", "volatile-lru",
                                                             "allkeys-random", "allkeys-lru"}
    assert mlos6.knobs["appendfsync"].choices == ("always", "everysec", "no")   # "no" stays a string


def test_redis7_defaults_and_directives():
    knobs = load_space("redis").knobs
    defaults = {"tcp_backlog": 511, "timeout": 0, "appendfsync": "everysec", "maxmemory_policy": "noeviction",
                "hz": 10, "io_threads": 1, "appendonly": False, "maxmemory": 0, "hash_max_listpack_value": 64}
    assert {k: knobs[k].default for k in defaults} == defaults
    assert all(k.applies == "config" for k in knobs.values())
    assert knobs["save_60_changes"].key == "save 3600 1 300 100 60 {value}"
    assert knobs["maxmemory_policy"].key == "maxmemory-policy"
    assert knobs["tcp_backlog"].live is None and knobs["hz"].live.startswith("CONFIG SET hz")


def test_conditions_leave_out_knobs_that_cannot_act():
    space = TuningSpace(load_space("redis").subset("mlos6"))
    # appendfsync and the AOF rewrite act only with appendonly on, which mlos6 leaves at its default (off);
    # maxmemory_policy only with a memory limit
    assert set(space.inert) >= {"appendfsync", "auto_aof_rewrite_percentage", "maxmemory_policy"}
    with_aof = TuningSpace(load_space("redis").subset("mlos6"), {"appendonly": True})
    assert "appendfsync" not in with_aof.inert


def test_config_key_must_be_a_directive(tmp_path):
    text = """system: x
version: "1"
knobs:
  k:
    type: int
    range: [1, 9]
    default: 2
    applies: config
    key: "{key}"
    description: test
"""
    for bad in ("save 60", "Max_Memory", "two words"):
        path = tmp_path / "bad.yaml"
        path.write_text(text.replace("{key}", bad))
        with pytest.raises(KnobError, match="directive"):
            load_space_file(path)
    path = tmp_path / "good.yaml"
    path.write_text(text.replace("{key}", "save 60 {value}"))
    assert load_space_file(path).knobs["k"].key == "save 60 {value}"


def test_redis_conf_spelling_is_accepted():
    from nosqltune.knobs import load_space

    space = load_space("redis")
    assert space.validate({"maxmemory-policy": "allkeys-lru"}) == {"maxmemory_policy": "allkeys-lru"}
    with pytest.raises(Exception, match="unknown knob 'maxmemory-polcy'"):
        space.validate({"maxmemory-polcy": "allkeys-lru"})
