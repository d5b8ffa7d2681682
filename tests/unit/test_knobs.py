"""The knob space: the Cassandra 5.0 YAML loads and is consistent; values coerce, render and fail in one line."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import nosqltune
from nosqltune.errors import NosqltuneError
from nosqltune.knobs import (Knob, KnobError, KnobSpace, load_overrides_file, load_space, load_space_file,
                             parse_assignments)

IRACE23 = {"concurrent_writes", "file_cache_size", "memtable_cleanup_threshold", "concurrent_compactors",
           "compaction_method", "num_tokens", "concurrent_reads", "replication_factor", "memtable_heap_space",
           "memtable_allocation_type", "row_cache_size", "sstable_preemptive_open_interval", "trickle_fsync",
           "inter_dc_stream_throughput_outbound", "key_cache_size", "stream_throughput_outbound",
           "row_cache_save_period", "column_index_size", "compaction_throughput", "memtable_offheap_space",
           "commitlog_segment_size", "memtable_flush_writers", "index_summary_capacity"}


@pytest.fixture(scope="module")
def space() -> KnobSpace:
    return load_space("cassandra")


# ------------------------------------------------------------------ the shipped space

def test_space_identity_and_cache(space):
    assert space.system == "cassandra" and space.version == "5.0"
    assert load_space() is space
    assert "2 GiB heap" in space.reference_setup
    assert len(space) == len(list(space)) == len(space.knobs)
    assert [k.name for k in space][:3] == ["concurrent_writes", "file_cache_size", "memtable_cleanup_threshold"]


def test_every_default_validates_and_is_inside_its_range(space):
    defaults = space.defaults()
    assert space.validate(defaults) == defaults
    full = space.with_defaults({})
    for knob in space:
        assert isinstance(knob, Knob)
        if knob.range:
            assert knob.range[0] <= knob.default <= knob.range[1], knob.name
            assert all(knob.range[0] <= v <= knob.range[1] for v in knob.special), knob.name
        if knob.choices:
            assert knob.default in knob.choices, knob.name
        assert knob.sources, knob.name
        assert not any(s.startswith("seed") for s in knob.sources), knob.name   # readable tags: irace-table1, ...
        assert "\n" not in knob.description
        knob.is_active(full)  # every condition evaluates on the default config
        knob.rendered(knob.default)


def test_spot_defaults_of_the_reference_setup(space):
    expected = {"concurrent_writes": 32, "file_cache_size": 512, "memtable_heap_space": 512,
                "memtable_offheap_space": 512, "concurrent_compactors": 2, "key_cache_size": 100,
                "index_summary_capacity": 102, "num_tokens": 16, "memtable_flush_writers": 2,
                "compaction_throughput": 64, "stream_throughput_outbound": 24, "replication_factor": 1,
                "file_cache_enabled": False, "compaction_method": "SizeTiered", "memtable_cleanup_threshold": 0.33}
    defaults = space.defaults()
    assert {k: defaults[k] for k in expected} == expected


def test_units_and_places(space):
    assert space["file_cache_size"].unit == "MiB"
    assert space["stream_throughput_outbound"].unit == "MiB/s"
    assert space["stream_throughput_outbound"].range == (12, 48)  # irace's 100-400 Mbit/s
    assert space["column_index_size"].unit == "KiB"
    assert space["row_cache_save_period"].unit == "s"
    assert space["num_tokens"].reload and space["compaction_method"].reload and not space["memtable"].reload
    assert space["replication_factor"].applies == "design" and space["nodes"].applies == "design"
    assert space["replication_factor"].key == "replication_factor" and space["nodes"].key == "nodes"
    assert space["compaction_method"].applies == "table" and space["compaction_method"].key == "compaction.class"
    assert space["memtable_cleanup_threshold"].bounds == (0.01, 0.99)
    assert space["concurrent_writes"].live.startswith("nodetool setconcurrency")
    assert space["num_tokens"].live is None


def test_irace23_has_the_23_knobs(space):
    irace = space.subset("irace23")
    assert len(irace) == 23
    assert {k.name for k in irace} == IRACE23
    # the papers chose between size-tiered and leveled only
    assert irace["compaction_method"].choices == ("SizeTiered", "Leveled")
    assert space["compaction_method"].choices == ("SizeTiered", "Leveled", "UnifiedCompaction", "TimeWindow")
    # the sets named before the profiles keep the strategies they were named with; the profile set adds TWCS
    assert space.subset("v5")["compaction_method"].choices == ("SizeTiered", "Leveled", "UnifiedCompaction")
    assert "TimeWindow" in space.subset("profile")["compaction_method"].choices
    assert {"twcs_window_unit", "gc_grace_seconds", "tombstone_failure_threshold"} <= set(space.subset("profile").knobs)
    assert irace["concurrent_compactors"].range == (2, 16)


def test_a_set_less_a_knob_whose_choices_leave_out_a_tables_default(space):
    """The transfer study's disk-bound knobs (v5 less the compaction strategy) on the time-series profile, whose
    table makes TimeWindow the strategy's default: v5's choices (SizeTiered, Leveled, UnifiedCompaction) would
    leave it out, but the knob is left out too, so the subset stands."""
    on_timeseries = space.with_knob_defaults({"compaction_method": "TimeWindow"})
    with pytest.raises(KnobError, match="choices of knob compaction_method leave out its default TimeWindow"):
        on_timeseries.subset("v5")
    subset = on_timeseries.subset({"set": "v5", "leave_out": ["compaction_method", "ucs_scaling_parameters"]})
    assert "compaction_method" not in subset.knobs and len(subset) == 18
    assert subset["concurrent_reads"].range == space.subset("v5")["concurrent_reads"].range
    with pytest.raises(KnobError, match="leave_out names 'nodes', which is not in the subset"):
        on_timeseries.subset({"set": "v5", "leave_out": ["compaction_method", "nodes"]})


@pytest.mark.parametrize("name,size", [("irace23", 23), ("rafiki5", 5), ("vorstella5", 5), ("mlos10", 10),
                                       ("eppinger", 7), ("v5-screen", 27), ("v5", 20),
                                       ("online12", 12), ("cloud", 13)])
def test_named_sets_resolve(space, name, size):
    sub = space.subset(name)
    assert len(sub) == size == len(space.knob_sets[name]["knobs"])
    assert sub.label == name
    assert space.knob_sets[name]["source"]
    assert sub.validate(sub.defaults()) == sub.defaults()
    for knob in sub:
        if knob.range:
            assert knob.range[0] <= knob.default <= knob.range[1]


def test_online12_holds_only_what_online_can_change(space):
    """Every knob of the online set changes live or by a rolling restart: none shapes the SSTables (a rewrite) or
    is fixed on a running cluster (online/plan.py decides the route from the knob's own metadata)."""
    from nosqltune.online.plan import route_of

    routes = {k.name: route_of(k)[0] for k in space.subset("online12")}
    assert set(routes.values()) == {"live", "restart"}, routes


def test_set_ranges_override_the_base_range(space):
    mlos = space.subset("mlos10")
    assert mlos["row_cache_save_period"].range == (0, 14400)
    assert mlos["compaction_throughput"].range == (16, 64)  # [16, 32] widened to the 5.0 default
    assert mlos["compaction_throughput"].special == ()      # 0 (unthrottled) is outside the set's range
    eppinger = space.subset("eppinger")
    assert eppinger["concurrent_writes"].range == (2, 256)
    assert eppinger.validate({"concurrent_writes": 256}) == {"concurrent_writes": 256}
    with pytest.raises(KnobError, match=r"outside its range \[8, 64\]"):
        space.validate({"concurrent_writes": 256})
    assert space["concurrent_writes"].range == (8, 64)  # the cached space is untouched


def test_unknown_set_lists_the_available_ones(space):
    with pytest.raises(KnobError) as err:
        space.subset("irace24")
    assert str(err.value) == ("unknown knob set 'irace24' for cassandra; "
                              "available: irace23, wide24, rafiki5, vorstella5, mlos10, eppinger, v5-screen, v5, profile, online12, "
                              "cloud")


def test_subset_from_a_list_keeps_file_order(space):
    sub = space.subset(["num_tokens", "concurrent_writes"])
    assert [k.name for k in sub] == ["concurrent_writes", "num_tokens"]
    with pytest.raises(KnobError, match="did you mean num_tokens"):
        space.subset(["num_token"])


def test_a_subset_rejects_knobs_outside_it(space):
    sub = space.subset("rafiki5")
    with pytest.raises(KnobError, match="knob num_tokens is not in knob set rafiki5"):
        sub.validate({"num_tokens": 8})


# ------------------------------------------------------------------ coercion

@pytest.mark.parametrize("knob,raw,typed", [
    ("concurrent_writes", "32", 32), ("concurrent_writes", 32.0, 32), ("concurrent_writes", " 48 ", 48),
    ("file_cache_size", "1024MiB", 1024), ("file_cache_size", "1024", 1024),
    ("memtable_cleanup_threshold", "0.5", 0.5), ("memtable_cleanup_threshold", 1 / 4, 0.25),
    ("trickle_fsync", "true", True), ("trickle_fsync", "No", False), ("trickle_fsync", "1", True),
    ("trickle_fsync", 0, False), ("trickle_fsync", True, True),
    ("compaction_method", "leveled", "Leveled"), ("compaction_method", "LeveledCompactionStrategy", "Leveled"),
    ("memtable_allocation_type", "OFFHEAP_OBJECTS", "offheap_objects"),
    ("compression_chunk_length", "32", 32), ("compression_chunk_length", 64, 64),
])
def test_coerce_accepts(space, knob, raw, typed):
    value = space[knob].coerce(raw)
    assert value == typed and type(value) is type(typed)


@pytest.mark.parametrize("knob,raw,message", [
    ("concurrent_writes", "abc", "knob concurrent_writes expects an integer, got 'abc'"),
    ("concurrent_writes", 32.5, "knob concurrent_writes expects an integer, got 32.5"),
    ("concurrent_writes", True, "knob concurrent_writes expects an integer, got True"),
    ("concurrent_writes", None, "knob concurrent_writes expects an integer, got None"),
    ("concurrent_writes", 500, "knob concurrent_writes=500 is outside its range [8, 64]"),
    ("memtable_cleanup_threshold", "x", "knob memtable_cleanup_threshold expects a number, got 'x'"),
    ("memtable_cleanup_threshold", "nan", "knob memtable_cleanup_threshold expects a number, got 'nan'"),
    ("memtable_cleanup_threshold", 0.95, "knob memtable_cleanup_threshold=0.95 is outside its range [0.1, 0.9]"),
    ("trickle_fsync", "maybe", "knob trickle_fsync expects true or false, got 'maybe'"),
    ("compaction_method", "Tiered",
     "knob compaction_method expects one of SizeTiered, Leveled, UnifiedCompaction, TimeWindow, got 'Tiered'"),
    ("compression_chunk_length", 12, "knob compression_chunk_length expects one of 4, 8, 16, 32, 64, got 12"),
])
def test_coerce_errors_are_one_line(space, knob, raw, message):
    with pytest.raises(KnobError) as err:
        space[knob].coerce(raw)
    assert str(err.value) == message
    assert isinstance(err.value, ValueError) and isinstance(err.value, NosqltuneError)


@pytest.mark.parametrize("name", ["concurrent_reads", "concurrent_writes", "native_transport_max_threads",
                                  "concurrent_compactors", "memtable_flush_writers", "parallel_gc_threads"])
def test_a_thread_count_has_an_upper_bound_that_says_why(space, name):
    """Cassandra takes any thread count; a million would starve the machine before the trial failed, so each
    thread-count knob stops at what a large node runs, and its refusal says why (one line)."""
    knob = space[name]
    lo, hi = knob.bounds
    assert hi is not None and knob.range[1] <= hi <= 8192 and knob.bounds_why
    assert knob.coerce(hi, allow_outside_range=True) == hi
    with pytest.raises(KnobError) as err:
        knob.coerce(1_000_000, allow_outside_range=True)
    assert str(err.value) == (f"knob {name}=1000000 is outside the values it takes ([{lo}, {hi}]: "
                              f"{knob.bounds_why})")


def test_outside_the_tuning_range_needs_permission_and_stays_inside_what_cassandra_accepts(space):
    knob = space["concurrent_writes"]
    assert knob.coerce(500, allow_outside_range=True) == 500
    assert space.validate({"concurrent_writes": "128"}, allow_outside_range=True) == {"concurrent_writes": 128}
    with pytest.raises(KnobError, match=r"concurrent_writes=1 is outside the values the datastore accepts \(>= 2\)"):
        knob.coerce(1, allow_outside_range=True)
    with pytest.raises(KnobError, match=r"\[0.01, 0.99\]"):
        space["memtable_cleanup_threshold"].coerce(1.5, allow_outside_range=True)
    with pytest.raises(KnobError, match="accepts"):  # sizes with a unit are never negative
        space["file_cache_size"].coerce(-1, allow_outside_range=True)


def test_validate_returns_only_the_overrides_typed(space):
    assert space.validate({"concurrent_writes": "64", "trickle_fsync": "yes"}) == {
        "concurrent_writes": 64, "trickle_fsync": True}
    assert space.validate({}) == {}
    full = space.with_defaults({"concurrent_writes": "64"})
    assert full["concurrent_writes"] == 64 and full["concurrent_reads"] == 32 and len(full) == len(space)
    with pytest.raises(KnobError, match="must be a mapping"):
        space.validate(["concurrent_writes"])


def test_typo_suggestions(space):
    with pytest.raises(KnobError) as err:
        space.validate({"concurent_writes": 64})
    assert str(err.value) == "unknown knob 'concurent_writes' for cassandra; did you mean concurrent_writes?"
    with pytest.raises(KnobError) as err:
        space.validate({"memtable_space": 64})
    assert str(err.value) == ("unknown knob 'memtable_space' for cassandra; "
                              "did you mean memtable_heap_space, memtable_offheap_space?")
    with pytest.raises(KnobError, match=r"did you mean file_cache_size\?$"):  # a pre-4.1 name
        space.validate({"file_cache_size_in_mb": 512})
    with pytest.raises(KnobError) as err:
        space["zzz"]
    assert str(err.value) == "unknown knob 'zzz' for cassandra"


# ------------------------------------------------------------------ conditions

def test_conditions(space):
    assert not space["file_cache_size"].is_active(space.with_defaults({}))
    assert space["file_cache_size"].is_active(space.with_defaults({"file_cache_enabled": "true"}))
    offheap = space["memtable_offheap_space"]
    assert not offheap.is_active(space.with_defaults({}))
    assert offheap.is_active(space.with_defaults({"memtable_allocation_type": "offheap_buffers"}))
    assert offheap.is_active(space.with_defaults({"memtable_allocation_type": "offheap_objects"}))
    save = space["row_cache_save_period"]
    assert not save.is_active(space.with_defaults({}))
    assert not save.is_active(space.with_defaults({"row_cache_size": 8}))  # no table caches rows
    assert save.is_active(space.with_defaults({"row_cache_size": 8, "caching_rows_per_partition": "all"}))
    assert not space["row_cache_size"].is_active(space.with_defaults({}))
    assert space["row_cache_size"].is_active(space.with_defaults({"caching_rows_per_partition": "ALL"}))
    lcs = space["lcs_sstable_size"]
    assert not lcs.is_active(space.with_defaults({}))
    assert lcs.is_active(space.with_defaults({"compaction_method": "Leveled"}))
    assert space["stcs_min_threshold"].is_active(space.with_defaults({}))
    assert space["concurrent_writes"].is_active({})  # no condition
    assert len({knob for knob in space}) == len(space)  # knobs are hashable


def test_a_subset_fills_in_what_its_conditions_need(space):
    irace = space.subset("irace23")
    full = irace.with_defaults({"file_cache_size": 1024})
    assert full["file_cache_enabled"] is False and full["caching_rows_per_partition"] == "NONE"
    assert not irace["file_cache_size"].is_active(full)
    assert set(irace.defaults()) == IRACE23
    with pytest.raises(KnobError, match="file_cache_enabled is not in the config"):
        irace["file_cache_size"].is_active(irace.defaults())


def test_condition_operators():
    knob = Knob(name="x", type="int", default=1, description="d", applies="yaml", key="x", range=(0, 9),
                condition="a != off and b not in [1, 2] and c >= 3 and c < 5")
    assert knob.is_active({"a": "on", "b": 3, "c": 4})
    assert not knob.is_active({"a": "OFF", "b": 3, "c": 4})
    assert not knob.is_active({"a": "on", "b": 2, "c": 4})
    assert not knob.is_active({"a": "on", "b": 3, "c": 5})
    bad = Knob(name="y", type="int", default=1, description="d", applies="yaml", key="y", range=(0, 9),
               condition="a ~ 3")
    with pytest.raises(KnobError, match="cannot read condition"):
        bad.is_active({"a": 3})


# ------------------------------------------------------------------ rendering

def test_rendering(space):
    assert space["file_cache_size"].rendered(512) == "512MiB"
    assert space["file_cache_size"].rendered("768") == "768MiB"
    assert space["stream_throughput_outbound"].rendered(24) == "24MiB/s"
    assert space["row_cache_save_period"].rendered(0) == "0s"
    assert space["column_index_size"].rendered(64) == "64KiB"
    assert space["concurrent_writes"].rendered(64) == 64
    assert space["memtable_cleanup_threshold"].rendered(0.2) == 0.2
    assert space["trickle_fsync"].rendered("yes") is True
    assert space["compaction_method"].rendered("Leveled") == "LeveledCompactionStrategy"
    assert space["compaction_method"].rendered("unifiedcompaction") == "UnifiedCompactionStrategy"
    assert space["memtable_allocation_type"].rendered("offheap_objects") == "offheap_objects"
    assert space["lcs_sstable_size"].rendered(160) == 160  # CQL option maps carry plain numbers
    assert space["replication_factor"].rendered(3) == 3


# ------------------------------------------------------------------ user subset files

def _write(path, data):
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_user_file_narrows_ranges(space, tmp_path):
    path = _write(tmp_path / "mine.yaml", {"knobs": {
        "concurrent_writes": {"range": [16, 48]},
        "compaction_method": {"choices": ["sizetiered", "Leveled"]},
        "trickle_fsync": None,
        "row_cache_size": {"range": [0, 8]}}})
    sub = space.subset(path)
    assert [k.name for k in sub] == ["concurrent_writes", "compaction_method", "row_cache_size", "trickle_fsync"]
    assert sub["concurrent_writes"].range == (16, 48)
    assert sub["compaction_method"].choices == ("SizeTiered", "Leveled")
    assert sub["row_cache_size"].special == (0,)
    assert sub.label == "mine.yaml"
    with pytest.raises(KnobError, match=r"knob concurrent_writes=64 is outside its range \[16, 48\]"):
        sub.validate({"concurrent_writes": 64})
    assert space.subset(str(path))["concurrent_writes"].range == (16, 48)  # a str path works too
    listed = space.subset(_write(tmp_path / "list.yml", {"knobs": ["num_tokens", "trickle_fsync"]}))
    assert len(listed) == 2 and listed["num_tokens"].range == (2, 256)


def test_a_user_file_may_widen_a_range_within_the_knobs_bounds(space, tmp_path):
    """A node larger than the rig wants larger ranges: a user's file widens them, never past the bounds."""
    path = _write(tmp_path / "wide.yaml", {"knobs": {"concurrent_writes": {"range": [4, 256]},
                                                     "heap_size": {"range": [512, 16384]}}})
    sub = space.subset(path)
    assert sub["concurrent_writes"].range == (4, 256) and sub["heap_size"].range == (512, 16384)
    sub.validate({"concurrent_writes": 200})


@pytest.mark.parametrize("knobs,message", [
    ({"concurrent_writes": {"range": [1, 48]}}, "range [1, 48] of knob concurrent_writes goes beyond the values "
                                                "the datastore accepts (>= 2)"),
    ({"memtable_cleanup_threshold": {"range": [0.1, 1.5]}}, "accepts ([0.01, 0.99])"),
    ({"concurrent_writes": {"range": [40, 64]}}, "leaves out its default 32"),
    ({"concurrent_writes": {"range": [48, 16]}}, "lo > hi"),
    ({"concurrent_writes": {"range": ["a", 16]}}, "expects an integer, got 'a'"),
    ({"concurrent_writes": {"choices": [8, 16]}}, "it takes a range, not choices"),
    ({"compaction_method": {"choices": ["Leveled", "Tiered"]}}, "'Tiered' is not a choice of knob"),
    ({"compaction_method": {"choices": ["Leveled"]}}, "leave out its default SizeTiered"),
    ({"compaction_method": {"range": [1, 2]}}, "it takes choices, not a range"),
    ({"concurrent_writes": {"rnage": [8, 16]}}, "takes {range: [lo, hi]} or {choices: [...]}"),
    ({"concurent_writes": None}, "did you mean concurrent_writes"),
    ({}, "non-empty list"),
])
def test_a_user_file_cannot_widen_or_break_the_space(space, tmp_path, knobs, message):
    path = _write(tmp_path / "bad.yaml", {"knobs": knobs})
    with pytest.raises(KnobError) as err:
        space.subset(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_subset_file_problems(space, tmp_path):
    with pytest.raises(KnobError, match="knob subset file not found"):
        space.subset(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("knobs: [a, b\n", encoding="utf-8")
    with pytest.raises(KnobError, match=r"cannot parse knob subset file .*broken.yaml"):
        space.subset(broken)
    with pytest.raises(KnobError, match="unknown entry extra"):
        space.subset(_write(tmp_path / "x.yaml", {"knobs": ["num_tokens"], "extra": 1}))


# ------------------------------------------------------------------ broken space files

MINIMAL = {
    "system": "demo",
    "version": "1.0",
    "knobs": {
        "threads": {"type": "int", "range": [2, 32], "default": 8, "applies": "yaml", "key": "threads",
                    "description": "worker threads", "log": True},
        "mode": {"type": "enum", "choices": ["fast", "safe"], "default": "safe", "applies": "table",
                 "key": "options.mode", "value_map": {"fast": "FastMode"}, "description": "mode"},
        "cache": {"type": "int", "range": [0, 64], "default": 16, "unit": "MiB", "applies": "yaml",
                  "key": "cache.size", "description": "cache", "condition": "mode == fast", "special": [0]},
        "gc_threads": {"type": "int", "range": [1, 8], "default": 2, "applies": "jvm",
                       "key": "-XX:ParallelGCThreads={value}", "description": "GC threads"},
    },
    "knob_sets": {"two": {"description": "two knobs", "source": "test", "knobs": ["threads", "mode"],
                          "ranges": {"threads": [4, 64]}}},
}


def _mutated(change):
    data = copy.deepcopy(MINIMAL)
    change(data)
    return data


def test_a_minimal_space_file_loads(tmp_path):
    demo = load_space_file(_write(tmp_path / "demo.yaml", MINIMAL))
    assert demo.system == "demo" and len(demo) == 4
    assert demo["gc_threads"].key.format(value=demo["gc_threads"].rendered(4)) == "-XX:ParallelGCThreads=4"
    assert demo["cache"].rendered(32) == "32MiB"
    assert demo.subset("two")["threads"].range == (4, 64)


@pytest.mark.parametrize("change,message", [
    (lambda d: d["knobs"]["threads"].update(colour="red"), "knob threads: unknown field colour"),
    (lambda d: d["knobs"]["threads"].update(default=64), r"knob threads: field default: .*outside its range"),
    (lambda d: d["knobs"]["threads"].update(default="many"), "knob threads: field default: .*expects an integer"),
    (lambda d: d["knobs"]["threads"].update(type="number"), "knob threads: field type must be one of"),
    (lambda d: d["knobs"]["threads"].pop("range"), "knob threads: field range is missing"),
    (lambda d: d["knobs"]["threads"].update(range=[32, 2]), "knob threads: field range .* lo < hi"),
    (lambda d: d["knobs"]["threads"].update(range=[0, 32], default=8), "knob threads: field log needs"),
    (lambda d: d["knobs"]["threads"].update(range=[2.5, 32]), "knob threads: field range must hold integers"),
    (lambda d: d["knobs"]["threads"].update(bounds=[4, None]), "knob threads: field range goes beyond"),
    (lambda d: d["knobs"]["threads"].pop("description"), "knob threads: field description is missing"),
    (lambda d: d["knobs"]["threads"].update(description="two\nlines"), "knob threads: field description must"),
    (lambda d: d["knobs"]["mode"].update(default="slow"), "knob mode: field default: .*expects one of fast, safe"),
    (lambda d: d["knobs"]["mode"].update(range=[1, 2]), "knob mode: field range is only for int and float"),
    (lambda d: d["knobs"]["mode"].update(value_map={"slow": "X"}), "knob mode: field value_map maps 'slow'"),
    (lambda d: d["knobs"]["mode"].update(applies="disk"), "knob mode: field applies must be one of"),
    (lambda d: d["knobs"]["cache"].update(condition="modes == fast"),
     "knob cache: field condition refers to unknown knob modes"),
    (lambda d: d["knobs"]["cache"].update(condition="mode == slow"),
     "knob cache: field condition: knob mode expects one of"),
    (lambda d: d["knobs"]["cache"].update(condition="mode > 2"), "knob cache: field condition compares mode"),
    (lambda d: d["knobs"]["cache"].update(condition="cache > 0"), "knob cache: field condition refers to the knob"),
    (lambda d: d["knobs"]["cache"].update(condition="mode is fast"), "knob cache: field condition: cannot read"),
    (lambda d: d["knobs"]["cache"].update(restaged={"when": "mode == fast", "component": "Filter.db"}),
     "knob cache: field restaged is .* for a knob with reload true"),
    (lambda d: d["knobs"]["cache"].update(reload=True, restaged={"when": "mode == fast"}),
     "knob cache: field restaged is {when: CONDITION, component: FILE SUFFIX}"),
    (lambda d: d["knobs"]["cache"].update(reload=True, restaged={"when": "modes == fast", "component": "F.db"}),
     "knob cache: field restaged refers to unknown knob modes"),
    (lambda d: d["knobs"]["cache"].update(reload=True, restaged={"when": "mode == slow", "component": "F.db"}),
     "knob cache: field restaged: knob mode expects one of"),
    (lambda d: d["knobs"]["cache"].update(reload=True, restaged={"when": "cache > 1", "component": "F.db"}),
     "knob cache: field restaged refers to the knob itself"),
    (lambda d: d["knobs"]["cache"].update(special=[100]), r"knob cache: field special: .*outside its range"),
    (lambda d: d["knobs"]["cache"].update(unit="MB"), "knob cache: field unit must be one of"),
    (lambda d: d["knobs"]["gc_threads"].update(key="-XX:ParallelGCThreads=2"), "knob gc_threads: field key"),
    (lambda d: d["knobs"].update(Bad={}), "knob name 'Bad' must be lower_case"),
    (lambda d: d.update(extra=1), "unknown top-level field extra"),
    (lambda d: d.pop("version"), "top-level field version is missing"),
    (lambda d: d.update(version=1.0), "version must be a quoted string"),
    (lambda d: d["knob_sets"]["two"]["knobs"].append("nope"), "knob set two: field knobs names unknown knob 'nope'"),
    (lambda d: d["knob_sets"]["two"].update(ranges={"threads": [16, 64]}), "knob set two: .*leaves out its default"),
    (lambda d: d["knob_sets"]["two"].update(ranges={"cache": [0, 8]}), "knob set two: field ranges names 'cache'"),
    (lambda d: d["knob_sets"]["two"].update(size=2), "knob set two: unknown field size"),
    (lambda d: d["knob_sets"]["two"].pop("source"), "knob set two: field source is missing"),
])
def test_a_broken_space_file_is_rejected(tmp_path, change, message):
    path = _write(tmp_path / "demo.yaml", _mutated(change))
    with pytest.raises(KnobError, match=message) as err:
        load_space_file(path)
    assert str(err.value).startswith("demo.yaml: ") and "\n" not in str(err.value)


def test_unparsable_space_file(tmp_path):
    path = tmp_path / "demo.yaml"
    path.write_text("system: demo\nknobs: {a: [\n", encoding="utf-8")
    with pytest.raises(KnobError, match=r"cannot parse knob space .*demo.yaml at line \d+"):
        load_space_file(path)


def test_unknown_system():
    with pytest.raises(KnobError, match="unknown system 'mongodb'; available: cassandra"):
        load_space("mongodb")
    with pytest.raises(KnobError, match="unknown system"):
        load_space("../cassandra")


# ------------------------------------------------------------------ user input

def test_parse_assignments():
    assert parse_assignments(["concurrent_writes=64", " trickle_fsync = true ", "k=a=b"]) == {
        "concurrent_writes": "64", "trickle_fsync": "true", "k": "a=b"}
    assert parse_assignments([]) == {} and parse_assignments(None) == {}
    for bad in ("foo", "=3", "x="):
        with pytest.raises(KnobError) as err:
            parse_assignments([bad])
        assert str(err.value) == f"expected knob=value, got {bad!r}"


def test_load_overrides_file(space, tmp_path):
    path = tmp_path / "over.yaml"
    path.write_text("concurrent_writes: 48\ncompaction_method: Leveled\ntrickle_fsync: yes\n", encoding="utf-8")
    raw = load_overrides_file(path)
    assert space.validate(raw) == {"concurrent_writes": 48, "compaction_method": "Leveled", "trickle_fsync": True}
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    assert load_overrides_file(empty) == {}
    with pytest.raises(KnobError, match="knob overrides file not found"):
        load_overrides_file(tmp_path / "nope.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- concurrent_writes\n", encoding="utf-8")
    with pytest.raises(KnobError, match="must be a mapping of knob: value, got list"):
        load_overrides_file(listed)
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: b: c\n", encoding="utf-8")
    with pytest.raises(KnobError, match=r"cannot parse knob overrides file .* at line 1"):
        load_overrides_file(broken)


def test_import_is_light():
    code = ("import sys, nosqltune.knobs; "
            "heavy = [m for m in ('yaml', 'difflib', 'cassandra', 'numpy') if m in sys.modules]; "
            "assert not heavy, heavy")
    src = str(Path(nosqltune.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def test_latest_is_cassandra_5s_own_recommendation_as_knob_values(tmp_path):
    from nosqltune.cli import build_parser
    from nosqltune.evaluation.compare import parse_candidates
    from nosqltune.cli.options import _overrides
    from nosqltune.knobs import KnobError, load_config, named_configs
    from nosqltune.systems.cassandra.config import place

    space = load_space("cassandra")
    assert named_configs("cassandra") == ["latest"] and named_configs("redis") == []
    latest = load_config("latest", "cassandra")
    # cassandra_latest.yaml's differences that act on a YCSB table (bench/results/landscape.md)
    assert latest == {"memtable": "trie", "memtable_allocation_type": "offheap_objects", "sstable_format": "bti",
                      "compaction_method": "UnifiedCompaction", "key_cache_size": 0,
                      "commitlog_disk_access_mode": "auto", "concurrent_compactors": 8, "column_index_size": 4,
                      "trickle_fsync": True}
    args = build_parser().parse_args(["bench", "--config", "latest", "--set", "concurrent_reads=16"])
    overrides = _overrides(args, space)    # column_index_size 4 is below the tuning range: named, so accepted
    assert overrides["column_index_size"] == 4 and overrides["concurrent_reads"] == 16
    placed = place(space, overrides)
    assert placed.yaml["sstable.selected_format"] == "bti" and placed.yaml["storage_compatibility_mode"] == "NONE"
    assert placed.reload == {"sstable_format": "bti", "compaction_method": "UnifiedCompaction"}
    candidates = parse_candidates("best,latest", space, {"concurrent_writes": 64})
    assert list(candidates) == ["default", "best", "latest"] and candidates["latest"]["memtable"] == "trie"
    with pytest.raises(Exception, match="latest"):
        parse_candidates("newest", space, None)
    with pytest.raises(KnobError, match="named configuration of cassandra: latest"):
        load_config(tmp_path / "missing.yaml", "cassandra")
    own = tmp_path / "mine.yaml"
    own.write_text("concurrent_writes: 48\n")
    assert load_config(own, "cassandra") == {"concurrent_writes": 48}
    # another study's best, found in v5's wider range (concurrent_writes [2, 128], the catalog's [8, 64]): measured
    other = tmp_path / "irace-best.yaml"
    other.write_text("concurrent_writes: 68\nmemtable: trie\n")
    assert parse_candidates(f"best,{other}", space, {"concurrent_writes": 64})["irace-best"] == {
        "concurrent_writes": 68, "memtable": "trie"}
    other.write_text("concurrent_writes: -3\n")   # a value Cassandra refuses is still refused
    with pytest.raises(KnobError, match="outside the values the datastore accepts"):
        parse_candidates(str(other), space, None)


def test_the_heap_knob_defaults_to_the_trials_heap_and_sets_both_flags():
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.systems import CassandraSettings, TrialSettings
    from nosqltune.systems.cassandra.config import place
    from nosqltune.systems.cassandra.trial import knob_space

    for heap in (1024, 2048):
        space = knob_space(TrialSettings(datastore=CassandraSettings(heap_mb=heap)))
        assert space["heap_size"].default == heap
        assert TuningSpace(space.subset("v5-screen")).default()["heap_size"] == heap   # the default runs as is
    assert place(knob_space(TrialSettings(datastore=CassandraSettings(heap_mb=1024))), {"heap_size": 768}).jvm == ["-Xms768M", "-Xmx768M"]
    assert load_space("cassandra")["heap_size"].default == 2048     # the knob file's reference heap


def test_v5_knobs_are_placed_where_they_act():
    from nosqltune.systems.cassandra.config import place
    from nosqltune.systems.cassandra.node import jvm_options

    space = load_space("cassandra")
    screened = {k.name for k in space.subset("v5-screen")}
    assert {"gc", "sstable_format", "bloom_filter_fp_chance", "disk_access_mode"} <= screened
    zgc = place(space, {"gc": "ZGC", "g1_max_pause": 100})
    assert zgc.jvm == ["-XX:+UseZGC"]               # G1's pause goal has no effect under ZGC
    shipped = jvm_options()
    assert "-XX:+UseG1GC" in shipped and "-XX:MaxGCPauseMillis=300" in shipped
    others = jvm_options(zgc.jvm)
    assert not any(o.startswith(("-XX:+UseG1GC", "-XX:G1", "-XX:MaxGCPauseMillis")) for o in others)
    assert "-XX:+AlwaysPreTouch" in others and jvm_options(["-XX:+UseG1GC"]) == shipped
    # under G1 the knobs' flags come after the shipped ones on the node's command line: the JVM takes the last
    g1 = place(space, {"g1_max_pause": 100, "parallel_gc_threads": 1}).jvm
    assert g1 == ["-XX:MaxGCPauseMillis=100", "-XX:ParallelGCThreads=1"]
    # table options that shape SSTables are set before the load (and key the dataset); UCS's fan factor after it
    placed = place(space, {"compaction_method": "UnifiedCompaction", "ucs_scaling_parameters": "L4",
                           "bloom_filter_fp_chance": 0.05, "compression": "ZstdCompressor", "compression_level": 5})
    assert placed.reload_table == {"compaction": {"class": "UnifiedCompactionStrategy"},
                                   "bloom_filter_fp_chance": 0.05,
                                   "compression": {"class": "ZstdCompressor", "chunk_length_in_kb": 16,
                                                   "compression_level": 5}}
    assert placed.table["compaction"]["scaling_parameters"] == "L4"
    assert "compression_level" not in place(space, {"compression_level": 5}).table.get("compression", {})
