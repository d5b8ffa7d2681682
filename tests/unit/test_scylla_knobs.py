"""ScyllaDB's knob space as data (issue 7, second part): only scylla.yaml options that ScyllaDB 6.2 honours
(db/config.cc, tag scylla-6.2.3), ScyllaDB's defaults and units, and rendering to scylla.yaml with bare numbers."""

from __future__ import annotations

import random

import pytest
import yaml

from nosqltune.knobs import KnobError, load_space
from nosqltune.knobs.space import TuningSpace
from nosqltune.systems.scylla.config import render_scylla_yaml

# Well-known Cassandra options that db/config.cc (scylla-6.2.3) declares Invalid (value not even stored) or Unused
# (stored, read by nothing); commitlog_sync_batch_window_in_ms is declared Used but no code reads it.
SCYLLA_INVALID = ("concurrent_reads", "concurrent_writes", "concurrent_compactors", "memtable_flush_writers",
                  "memtable_cleanup_threshold", "memtable_allocation_type", "memtable_total_space_in_mb",
                  "native_transport_max_threads")
SCYLLA_UNUSED = ("file_cache_size_in_mb", "key_cache_size_in_mb", "row_cache_size_in_mb", "row_cache_save_period",
                 "memtable_heap_space_in_mb", "memtable_offheap_space_in_mb", "index_summary_capacity_in_mb",
                 "sstable_preemptive_open_interval_in_mb", "trickle_fsync", "concurrent_counter_writes",
                 "stream_throughput_outbound_megabits_per_sec",
                 "inter_dc_stream_throughput_outbound_megabits_per_sec")
SCYLLA_NEVER_READ = ("commitlog_sync_batch_window_in_ms",)

# The options of the space that config.cc declares liveness::LiveUpdate (all others are MustRestart).
SCYLLA_LIVE_UPDATE = {"compaction_throughput_mb_per_sec", "compaction_static_shares", "memtable_flush_static_shares",
                      "compaction_enforce_min_threshold", "cache_index_pages", "index_cache_fraction",
                      "column_index_auto_scale_threshold_in_kb", "reader_concurrency_semaphore_cpu_concurrency",
                      "reader_concurrency_semaphore_serialize_limit_multiplier",
                      "reader_concurrency_semaphore_kill_limit_multiplier", "stream_io_throughput_mb_per_sec"}


@pytest.fixture(scope="module")
def space():
    return load_space("scylla")


def test_loads_and_validates(space):
    assert space.system == "scylla" and space.version == "6.2"
    assert 15 <= len(space) <= 30
    assert all(k.applies == "yaml" for k in space)
    assert all(k.key == k.name for k in space)            # the knob name is the scylla.yaml key
    assert all(k.description and "\n" not in k.description for k in space)
    assert all(any(s.startswith("config.cc") for s in k.sources) for k in space)


def test_defaults_in_range_and_typed(space):
    for knob in space:
        value = knob.default
        if knob.type == "int":
            assert isinstance(value, int) and not isinstance(value, bool), knob.name
            assert knob.range[0] <= value <= knob.range[1], knob.name
        elif knob.type == "float":
            assert isinstance(value, float), knob.name
            assert knob.range[0] <= value <= knob.range[1], knob.name
        elif knob.type == "bool":
            assert isinstance(value, bool), knob.name
        else:
            assert value in knob.choices, knob.name
        assert knob.coerce(value) == value
        assert all(knob.coerce(v) == v for v in knob.special)


def test_scylla_defaults_and_units(space):
    knobs = space.knobs
    # shipped conf/scylla.yaml of 6.2.3 where it sets the key, config.cc otherwise
    defaults = {"compaction_throughput_mb_per_sec": 0, "compaction_static_shares": 0.0,
                "memtable_flush_static_shares": 0.0, "commitlog_segment_size_in_mb": 32,
                "commitlog_sync": "periodic", "commitlog_sync_period_in_ms": 10000,
                "commitlog_total_space_in_mb": -1, "column_index_size_in_kb": 64, "unspooled_dirty_soft_limit": 0.6,
                "index_cache_fraction": 0.2, "sstable_summary_ratio": 0.0005, "num_tokens": 256,
                "enable_tablets": True, "enable_cache": True,
                "reader_concurrency_semaphore_cpu_concurrency": 1}
    assert {name: knobs[name].default for name in defaults} == defaults
    units = {"compaction_throughput_mb_per_sec": "MiB/s", "commitlog_segment_size_in_mb": "MiB",
             "commitlog_total_space_in_mb": "MiB", "commitlog_sync_period_in_ms": "ms",
             "column_index_size_in_kb": "KiB", "stream_io_throughput_mb_per_sec": "MiB/s"}
    assert {name: knobs[name].unit for name in units} == units
    assert {k.name for k in space if k.reload} == {"enable_tablets", "num_tokens"}
    assert knobs["commitlog_sync_period_in_ms"].condition == "commitlog_sync == periodic"


def test_live_exactly_where_config_cc_says_live_update(space):
    assert {k.name for k in space if k.live} == SCYLLA_LIVE_UPDATE
    for name in SCYLLA_LIVE_UPDATE:
        assert f"name = '{name}'" in space[name].live


def test_no_option_scylla_ignores(space):
    ignored = set(SCYLLA_INVALID) | set(SCYLLA_UNUSED) | set(SCYLLA_NEVER_READ)
    assert not ignored & {k.name for k in space}
    assert not ignored & {k.key for k in space}
    # nor their Cassandra 5.0 names
    stems = {name.removesuffix("_in_mb").removesuffix("_megabits_per_sec") for name in ignored}
    assert not stems & {k.name for k in space}


def test_sets_resolve(space):
    assert set(space.knob_sets) == {"operator8", "controllers4", "irace_honoured4", "memory7"}
    for name, spec in space.knob_sets.items():
        subset = space.subset(name)
        assert list(subset.knobs) == [k for k in space.knobs if k in spec["knobs"]]
        assert len(subset) == len(spec["knobs"])
        tuning = TuningSpace(subset)
        assert tuning.names
    assert len(space.subset("operator8")) == 8
    assert space.subset("irace_honoured4")["commitlog_segment_size_in_mb"].range == (16, 64)
    # num_tokens acts only on vnodes; the shipped scylla.yaml turns tablets on
    assert TuningSpace(space.subset("irace_honoured4")).inert == ["num_tokens"]
    assert TuningSpace(space.subset("irace_honoured4"), {"enable_tablets": False}).inert == []


def test_validation_rejects_bad_values(space):
    with pytest.raises(KnobError, match=r"knob commitlog_segment_size_in_mb=512 is outside its range \[8, 128\]"):
        space.validate({"commitlog_segment_size_in_mb": 512})
    with pytest.raises(KnobError, match="outside the values the datastore accepts"):
        space.validate({"commitlog_segment_size_in_mb": 5000}, allow_outside_range=True)
    with pytest.raises(KnobError, match="knob compaction_static_shares expects a number, got 'lots'"):
        space.validate({"compaction_static_shares": "lots"})
    with pytest.raises(KnobError, match="knob num_tokens expects an integer, got 2.5"):
        space.validate({"num_tokens": 2.5})
    with pytest.raises(KnobError, match="knob enable_cache expects true or false"):
        space.validate({"enable_cache": "sometimes"})
    with pytest.raises(KnobError, match="knob commitlog_sync expects one of periodic, batch, got 'group'"):
        space.validate({"commitlog_sync": "group"})
    with pytest.raises(KnobError, match="knob commitlog_total_space_in_mb expects one of -1, 2048"):
        space.validate({"commitlog_total_space_in_mb": 1000})
    with pytest.raises(KnobError, match="knob reader_concurrency_semaphore_cpu_concurrency=0 is outside"):
        space.validate({"reader_concurrency_semaphore_cpu_concurrency": 0}, allow_outside_range=True)
    with pytest.raises(KnobError, match="unknown knob 'concurrent_writes' for scylla"):
        space.validate({"concurrent_writes": 64})
    # unit suffixes and strings are accepted on input
    assert space.validate({"commitlog_segment_size_in_mb": "64MiB", "enable_cache": "no",
                           "sstable_summary_ratio": "0.001"}) == {
        "commitlog_segment_size_in_mb": 64, "enable_cache": False, "sstable_summary_ratio": 0.001}


def test_render_scylla_yaml_bare_numbers_exact_keys(space):
    overrides = {"commitlog_segment_size_in_mb": "64MiB", "compaction_throughput_mb_per_sec": 128,
                 "commitlog_total_space_in_mb": "4096", "commitlog_sync_period_in_ms": "2000ms",
                 "compaction_static_shares": 250, "unspooled_dirty_soft_limit": 0.4, "enable_cache": "false",
                 "sstable_summary_ratio": 0.002}
    rendered = render_scylla_yaml(space, overrides)
    assert rendered == {"commitlog_segment_size_in_mb": 64, "compaction_throughput_mb_per_sec": 128,
                        "commitlog_total_space_in_mb": 4096, "commitlog_sync_period_in_ms": 2000,
                        "compaction_static_shares": 250.0, "unspooled_dirty_soft_limit": 0.4, "enable_cache": False,
                        "sstable_summary_ratio": 0.002}
    assert type(rendered["commitlog_segment_size_in_mb"]) is int
    text = yaml.safe_dump(rendered, sort_keys=False)
    assert not any(isinstance(v, str) for v in rendered.values())                   # no "64MiB"
    assert yaml.safe_load(text) == rendered
    assert render_scylla_yaml(space, {}) == {}


def test_render_leaves_out_knobs_whose_condition_is_off(space):
    rendered = render_scylla_yaml(space, {"commitlog_sync": "batch", "commitlog_sync_period_in_ms": 500})
    assert rendered == {"commitlog_sync": "batch"}
    assert render_scylla_yaml(space, {"num_tokens": 64}) == {}                         # tablets on by default
    assert render_scylla_yaml(space, {"num_tokens": 64, "enable_tablets": False}) == {
        "num_tokens": 64, "enable_tablets": False}


def test_render_checks_values(space):
    with pytest.raises(KnobError, match="outside its range"):
        render_scylla_yaml(space, {"index_cache_fraction": 0.9}, allow_outside_range=False)
    assert render_scylla_yaml(space, {"index_cache_fraction": 0.9}) == {"index_cache_fraction": 0.9}
    with pytest.raises(KnobError, match="outside the values the datastore accepts"):
        render_scylla_yaml(space, {"index_cache_fraction": 1.5})
    with pytest.raises(KnobError, match="unknown knob"):
        render_scylla_yaml(space, {"file_cache_size_in_mb": 512})


def test_sampled_configurations_render(space):
    tuning = TuningSpace(space)
    rng = random.Random(7)
    for _ in range(50):
        config = tuning.sample(rng)
        rendered = render_scylla_yaml(space, config)
        for name, value in rendered.items():
            assert not isinstance(value, str) or space[name].type == "enum", (name, value)
        assert set(rendered) <= set(config)
