"""cassandra-stress user profiles (`--workload profile:FILE`): what is read, what is refused by name with the
profile's line, the replication rewritten for the rig, and what the client and the dataset writer are handed.
The fixtures below are written here to carry the features of the reference examples in Apache Cassandra's
tools/cqlstress-*.yaml (a composite partition key over six clustering columns, a LOGGED batch of up to 50
partitions, samerow and multirow queries, token-range queries, an insert condition, counters)."""

from __future__ import annotations

import textwrap

import pytest

from nosqltune.cli import main
from nosqltune.errors import UsageError
from nosqltune.workloads.profile import (ProfileError, distribution, load_profile, loadgen_properties, parse_ops,
                                         partitions_for, ratio, replication_for, row_bytes, rows_per_partition)
from nosqltune.workloads.spec import WorkloadError, make_workload, shipped_profiles

WIDE = """\
keyspace: stresscql
keyspace_definition: |
  CREATE KEYSPACE stresscql WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};
table: typestest
table_definition: |
  CREATE TABLE typestest (
        name text,
        choice boolean,
        date timestamp,
        address inet,
        dbl double,
        lval bigint,
        ival int,
        uid timeuuid,
        value blob,
        PRIMARY KEY((name,choice), date, address, dbl, lval, ival, uid)
  ) WITH compaction = { 'class':'LeveledCompactionStrategy' }
columnspec:
  - name: name
    size: uniform(1..10)
    population: uniform(1..10)
  - name: date
    cluster: uniform(20..40)
  - name: lval
    population: gaussian(1..1000)
    cluster: uniform(1..4)
insert:
  partitions: uniform(1..50)
  batchtype: LOGGED
  select: uniform(1..10)/10
queries:
   simple1:
      cql: select * from typestest where name = ? and choice = ? LIMIT 100
      fields: samerow
   range1:
      cql: select * from typestest where name = ? and choice = ? and date >= ? LIMIT 100
      fields: multirow
token_range_queries:
  all_columns_tr_query:
    columns: '*'
    page_size: 5000
"""


def write(tmp_path, text, name="p.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_wide_profile_is_read_as_cassandra_stress_reads_it(tmp_path):
    p = load_profile(write(tmp_path, WIDE))
    assert (p.keyspace, p.table.name) == ("stresscql", "typestest")
    assert p.table.partition_key == ("name", "choice")
    assert p.table.clustering == ("date", "address", "dbl", "lval", "ival", "uid")
    assert p.table.options == {"compaction": {"class": "LeveledCompactionStrategy"}}
    assert p.columns["name"].size.kind == "uniform" and p.columns["name"].population.high == 10
    assert p.columns["lval"].population.params == (3.0,)          # GAUSSIAN's default: 3 deviations to each edge
    assert p.columns["dbl"].size.low == 4 and p.columns["dbl"].population.high == 100 * 10**9   # the defaults
    assert p.insert.batchtype == "LOGGED" and p.insert.partitions.high == 50
    assert p.insert.select.divisor == 10 and p.insert.select.mean() == pytest.approx(0.55)
    assert p.queries["simple1"].bound == ("name", "choice") and p.queries["simple1"].fields == "samerow"
    assert p.queries["range1"].bound == ("name", "choice", "date") and p.queries["range1"].fields == "multirow"
    assert p.ops == {"insert": 1.0, "simple1": 1.0, "range1": 1.0}   # token-range queries left out of the default
    # rows of a partition: the clustering columns' cluster draws multiplied (30 x 2.5 on average)
    assert rows_per_partition(p.to_dict()) == pytest.approx(75)
    # at most the key columns' populations of partitions: 10 names x 2 booleans ... here 10 x 100e9
    assert partitions_for(p.to_dict(), 7500) == 100


def test_shipped_profiles_have_the_shapes_they_promise():
    assert shipped_profiles() == ["keyvalue", "messaging", "timeseries"]
    ts = make_workload("profile:timeseries", records=1000).profile
    assert ts["table"]["options"]["compaction"]["class"] == "TimeWindowCompactionStrategy"
    assert ts["table"]["options"]["default_time_to_live"] == 604800 and ts["table"]["order"] == {"ts": "DESC"}
    assert ts["table"]["partition_key"] == ["sensor_id", "day"] and rows_per_partition(ts) == 288
    chat = make_workload("profile:messaging", records=1000).profile
    assert {q["kind"] for q in chat["queries"].values()} == {"select", "delete"} and rows_per_partition(chat) > 100
    kv = make_workload("profile:keyvalue", records=1000).profile
    assert kv["columns"]["tags"]["type"] == "set<text>" and rows_per_partition(kv) == 1


def test_a_scenarios_records_become_rows_of_the_same_bytes():
    """A scenario sizes its data in YCSB rows of 1 KB; a profile of smaller rows gets more of them."""
    ts = make_workload("profile:timeseries", defaults={"records": 100_000})
    assert ts.records * row_bytes(ts.profile) == pytest.approx(100_000 * 1000, rel=0.01)
    assert make_workload("profile:timeseries", records=500, defaults={"records": 100_000}).records == 500


@pytest.mark.parametrize("text, kind, low, high, params, inverted", [
    ("fixed(5)", "fixed", 5, 5, (), False),
    ("UNIFORM(1..10k)", "uniform", 1, 10_000, (), False),
    ("~exp(1..1m)", "exp", 1, 10**6, (), True),
    ("gaussian(1..100,40,5)", "gaussian", 1, 100, (40.0, 5.0), False),
    ("norm(1..100)", "gaussian", 1, 100, (3.0,), False),
    ("extreme(1..1b,1.5)", "extreme", 1, 10**9, (1.5,), False),
    ("qextreme(1..1000,1.5,10)", "qextreme", 1, 1000, (1.5, 10.0), False),
    ("seq(1..100)", "seq", 1, 100, (), False),
])
def test_distributions(text, kind, low, high, params, inverted):
    d = distribution(text, "here")
    assert (d.kind, d.low, d.high, d.params, d.inverted) == (kind, low, high, params, inverted)
    assert low <= d.mean() <= high


@pytest.mark.parametrize("text, message", [
    ("weibull(1..10)", "unknown distribution WEIBULL"),
    ("uniform(10..1)", "min above its max"),
    ("uniform(1..x)", "not a number"),
    ("uniform(1)", "min..max first"),
    ("extreme(1..10)", "takes min..max and 1 more"),
    ("ten", "not a distribution"),
])
def test_bad_distributions_are_named(text, message):
    with pytest.raises(ProfileError, match=message):
        distribution(text, "p.yaml line 3")


def test_ratios():
    assert ratio("fixed(1)/288", "x").mean() == pytest.approx(1 / 288)
    with pytest.raises(ProfileError, match="within 0..1"):
        ratio("uniform(1..20)/10", "x")


def test_replication_is_rewritten_to_the_rigs_data_centre():
    nts = {"class": "NetworkTopologyStrategy", "eu-west": 3, "us-east": 2}
    assert replication_for(nts, 1)[0] == {"class": "NetworkTopologyStrategy", "datacenter1": 1}
    assert replication_for(nts, 5)[0] == {"class": "NetworkTopologyStrategy", "datacenter1": 3}
    assert "eu-west: 3" in replication_for(nts, 1)[1]
    simple = {"class": "SimpleStrategy", "replication_factor": 3}
    assert replication_for(simple, 2)[0]["datacenter1"] == 2
    kept = {"class": "NetworkTopologyStrategy", "datacenter1": 1}
    assert replication_for(kept, 1)[1] is None


def _with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize("change, message, at", [
    (("    ival int,\n", "    ival counter,\n"), "is a counter: counters are not supported", "table_definition:"),
    (("fields: samerow", "fields: samerow\n      extra: 1"), "unknown key 'extra'", "simple1:"),
    (("and date >= ?", "and nosuch >= ?"), "names column 'nosuch', which table 'typestest' lacks", "range1:"),
    (("LIMIT 100\n      fields: samerow", "IF value = ?\n      fields: samerow"), "lightweight transaction",
     "simple1:"),
    (("batchtype: LOGGED", "batchtype: LOGGED\n  condition: IF value = NULL"), "lightweight transactions",
     "condition:"),
    (("batchtype: LOGGED", "batchtype: COUNTER"), "counters are not supported", "batchtype:"),
    (("batchtype: LOGGED", "batchtype: LOGGED\n  visits: fixed(2)"), "command line", "visits:"),
    (("PRIMARY KEY((name,choice), date, address, dbl, lval, ival, uid)", "other text"), "has no PRIMARY KEY",
     "table_definition:"),
    (("population: gaussian(1..1000)", "population: weibull(1..1000)"), "unknown distribution", "- name: lval"),
    (("select * from typestest where name = ? and choice = ? LIMIT 100",
      "select * from typestest where name = ? and choice = ? LIMIT ?"), "binds a LIMIT", "simple1:"),
    (("select * from typestest where name = ? and choice = ? LIMIT 100",
      "select * from typestest where name IN ? and choice = ?"), "binds IN", "simple1:"),
    (("select * from typestest where name = ? and choice = ? LIMIT 100", "BEGIN BATCH APPLY BATCH"), "BATCH",
     "simple1:"),
    (("  - name: date\n", "  - name: nosuch\n"), "columnspec names 'nosuch'", "- name: nosuch"),
    (("value blob,", "value frozen<address_type>,"), "a user type", "table_definition:"),
    (("{ 'class':'LeveledCompactionStrategy' }", "{ 'class':'LeveledCompactionStrategy' } AND COMPACT STORAGE"),
     "COMPACT STORAGE", "table_definition:"),
])
def test_a_refused_part_is_named_with_its_line(tmp_path, change, message, at):
    text = _with(WIDE, *change)
    path = write(tmp_path, text)
    with pytest.raises(ProfileError, match=message) as caught:
        load_profile(path)
    said = str(caught.value)
    line = text[:text.index(at)].count("\n") + 1
    assert said.startswith(f"{path} line {line}: ") and "\n" not in said


@pytest.mark.parametrize("extra, message", [
    ("extra_definitions:\n  - CREATE MATERIALIZED VIEW v AS SELECT * FROM typestest", "a materialized view"),
    ("extra_definitions:\n  - CREATE CUSTOM INDEX ON typestest (value) USING 'StorageAttachedIndex'", "SAI"),
    ("extra_definitions:\n  - CREATE INDEX ON typestest (value)", "a secondary index"),
    ("ops: ops(insert=1,all_columns_tr_query=1)", "a token-range query"),
    ("ops: ops(nothing=1)", "not insert nor a query"),
    ("ops: ops(insert=0)", "no operation with a positive weight"),
])
def test_definitions_and_mixes_refused_by_name(tmp_path, extra, message):
    with pytest.raises(ProfileError, match=message):
        load_profile(write(tmp_path, WIDE + extra + "\n"))


def test_a_mix_given_with_the_workload_wins(tmp_path):
    path = write(tmp_path, WIDE + "ops: ops(insert=1)\n")
    assert load_profile(path).ops == {"insert": 1.0}
    w = make_workload(f"profile:{path}:ops(insert=1,simple1=3)", records=100)
    assert w.profile["ops"] == {"insert": 1.0, "simple1": 3.0} and w.name.startswith("profile-p-")
    with pytest.raises(ProfileError, match="mix names 'range2'"):
        parse_ops("ops(range2=1)", ["insert", "simple1"], "here")


def test_malformed_yaml_names_its_line(tmp_path):
    with pytest.raises(ProfileError, match="line 3: not YAML"):
        load_profile(write(tmp_path, "keyspace: a\ntable: b\n  bad: [\n"))


def test_what_loadgen_is_handed(tmp_path):
    w = make_workload(f"profile:{write(tmp_path, WIDE)}", records=7500)
    props = w.properties("run")
    assert props["workload"] == "nosqltune.loadgen.ProfileWorkload"
    assert props["cassandra.keyspace"] == "stresscql" and props["internals.table"] == "typestest"
    assert props["profile.partitions"] == 100 and props["profile.keys"] == "uniform 1 100 0"
    assert props["profile.column.lval.population"] == "gaussian 1 1000 0 3"
    assert props["profile.insert.select"] == "uniform 1 10 0 / 10"
    assert props["profile.query.range1.bound"] == "name,choice,date"
    assert w.dataset_properties() == {"records": 7500, "profile": w.dataset_properties()["profile"], "sstables": "sorted"}
    # the dataset's key follows the data, not the queries nor the mix
    again = make_workload(f"profile:{tmp_path / 'p.yaml'}:ops(insert=1)", records=7500)
    assert again.dataset_properties() == w.dataset_properties()


def test_the_schema_on_the_rig_keeps_the_profiles_options_under_the_knobs(tmp_path):
    from nosqltune.systems.cassandra.schema import create_keyspace, create_table

    profile = make_workload("profile:timeseries", records=1000).profile
    table = create_table(profile, {"compression": {"class": "ZstdCompressor"}})
    assert table.startswith("CREATE TABLE telemetry.readings (")
    assert "PRIMARY KEY ((\"sensor_id\", \"day\"), \"ts\")" in table and "CLUSTERING ORDER BY (\"ts\" DESC)" in table
    assert "'TimeWindowCompactionStrategy'" in table and "default_time_to_live = 604800" in table
    assert "compression = {'class': 'ZstdCompressor'}" in table
    statement, said = create_keyspace(profile, 1)
    assert "'datacenter1': '1'" in statement and "dc1: 3" in said


def test_data_the_disk_cannot_hold_is_refused_before_any_build():
    from nosqltune.systems.cassandra.trial import check_disk
    from nosqltune.systems.settings import TrialSettings

    w = make_workload("profile:keyvalue", records=1_000_000)
    check_disk(w, TrialSettings(), room=10 * 10**9)
    with pytest.raises(UsageError, match="records need about"):
        check_disk(w, TrialSettings(), room=10**9)


@pytest.mark.parametrize("workload, message", [
    ("profile:nosuch", "no profile 'nosuch'"),
    ("profile:timeseries,ycsb-a", "mixes a profile"),
])
def test_bad_profile_input_is_one_line_before_anything_starts(tmp_path, capsys, workload, message):
    store = tmp_path / "s.db"
    assert main(["tune", "--workload", workload, "--budget", "2", "--study", str(store)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not store.exists()


def test_a_profile_with_distribution_or_on_a_cluster_is_refused(tmp_path, capsys):
    assert main(["bench", "--workload", "profile:timeseries", "--distribution", "uniform"]) == 2
    assert "--distribution" in capsys.readouterr().err
    assert main(["bench", "--workload", "profile:timeseries", "--nodes", "2"]) == 2
    assert "for one node" in capsys.readouterr().err


def test_the_knob_baseline_map_is_the_profiles():
    """loadgen_properties carries no schema: the trial makes it, with the knobs (systems/cassandra/schema.py)."""
    props = loadgen_properties(make_workload("profile:messaging", records=10_000).profile, 10_000)
    assert "profile.schema" not in props and props["profile.insert.batchtype"] == "UNLOGGED"


def test_a_profiles_features_for_the_surrogate():
    """collect's workload features of a profile: its SELECTs' share of the mix as reads, its slices as scans."""
    from nosqltune.surrogate.features import workload_features

    chat = make_workload("profile:messaging", records=1000).to_dict()   # insert 2, page 6, older 1, remove 1
    features = workload_features(chat)
    assert features["read_ratio"] == pytest.approx(0.7) and features["scan_ratio"] == pytest.approx(0.7)
    assert features["distribution"] == "profile"
    kv = workload_features(make_workload("profile:keyvalue", records=1000).to_dict())   # insert 1, lookup 8, retag 1
    assert kv["read_ratio"] == pytest.approx(0.8) and kv["scan_ratio"] == 0


def test_a_cached_datasets_node_runs_at_the_time_it_was_built(tmp_path):
    """Rows with a TTL age with the calendar: a dataset built 3 days ago is served by a node whose clock is set
    back 3 days (OffsetClock), so its rows are as old as when they were written; data without a TTL keeps the
    node's own clock."""
    import json
    import time

    from nosqltune.systems.cassandra.trial import data_clock
    from nosqltune.systems.dataset import Dataset

    dataset = Dataset(key="k", root=tmp_path / "k")
    dataset.root.mkdir()
    dataset.meta_path.write_text(json.dumps({"created_at": time.time() - 3 * 86400}))
    flags = data_clock(make_workload("profile:timeseries", records=1000), dataset)
    assert flags[0] == "-Dcassandra.clock=nosqltune.loadgen.OffsetClock"
    offset_ms = int(flags[1].split("=")[1])
    assert offset_ms == pytest.approx(-3 * 86_400_000, abs=5000)
    assert data_clock(make_workload("profile:keyvalue", records=1000), dataset) == []   # no TTL
    assert data_clock(make_workload("ycsb-a", records=1000), dataset) == []
    props = make_workload("profile:timeseries", records=1000).properties("run")
    assert (props["profile.ttl_seconds"], props["profile.window_seconds"]) == (604800, 86400)


def test_an_objective_naming_a_ycsb_operation_is_refused_on_a_profile(tmp_path, capsys):
    assert main(["tune", "--workload", "profile:timeseries", "--objective", "p99-read", "--budget", "2",
                 "--study", str(tmp_path / "s.db")]) == 2
    err = capsys.readouterr().err
    assert "p99-all" in err and "insert, latest" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.db").exists()


def test_a_profiles_table_options_are_its_studys_knob_defaults():
    """The default configuration of a study on a profile is Cassandra's defaults plus the profile's own table
    options: its table knobs default to them, and a knob that moves one replaces the profile's value."""
    from nosqltune.systems.cassandra.config import place
    from nosqltune.systems.settings import TrialSettings
    from nosqltune.tuning.workers import search_space

    workload = make_workload("profile:timeseries", records=1000)
    space = search_space(TrialSettings(), "cassandra", [workload])
    assert space["compaction_method"].default == "TimeWindow" and space["gc_grace_seconds"].default == 10800
    assert space["twcs_window_unit"].default == "DAYS" and space["default_time_to_live"].default == 604800
    assert search_space(TrialSettings(), "cassandra", [workload.to_dict()])["gc_grace_seconds"].default == 10800
    assert search_space(TrialSettings(), "cassandra")["compaction_method"].default == "SizeTiered"
    subset = space.subset("profile")
    default = place(space, subset.defaults())
    assert default.table["compaction"]["class"] == "TimeWindowCompactionStrategy"
    assert default.table["compaction"]["compaction_window_unit"] == "DAYS"
    assert default.table["gc_grace_seconds"] == 10800
    moved = place(space, {**subset.defaults(), "compaction_method": "Leveled"})
    assert moved.table["compaction"]["class"] == "LeveledCompactionStrategy"


def test_a_table_definition_ending_in_its_clustering_order_is_read():
    """The column list ends at the parenthesis that closes its own, not at the last one of the statement: a WITH
    CLUSTERING ORDER BY (c DESC) at the end was read as part of the columns."""
    from nosqltune.workloads.profile import parse_table, table_columns

    cql = "CREATE TABLE t (a int, b int, PRIMARY KEY (a, b)) WITH CLUSTERING ORDER BY (b DESC)"
    table = parse_table(cql, "ks", "x")
    assert (table.partition_key, table.clustering, table.order) == (("a",), ("b",), {"b": "DESC"})
    assert table_columns(cql) == ["a", "b"]
    assert table_columns('CREATE TABLE ks.t ("Odd ""x""" int PRIMARY KEY, v text)') == ['Odd "x"', "v"]
