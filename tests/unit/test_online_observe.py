"""The node side of online re-tuning without a node: the `requests` answers of loadgen's NodeInternals become the
Snapshots window.py expects, a node that does not answer is left out in one line, and a live change reads back
what the node says, even when that is not what was asked. The answers are literals of the shape the Java prints
(NodeRequests.requests / set); tests/integration/test_online_node.py reads them from a real node."""

from __future__ import annotations

import json

import pytest

from nosqltune.errors import TrialError, UsageError
from nosqltune.knobs import load_space
from nosqltune.online import plan_changes, window_between
from nosqltune.online.observe import JmxNode, apply_live, node_counters, read_snapshot, snapshot_of
from nosqltune.online.plan import Change
from nosqltune.systems.cassandra import internals


def answer(uptime_ms=600_000, read=(1000, 310.5, 2100.0), write=(500, 120.0, 900.0), scan=None, unit="microseconds",
           failures=0, timeouts=0, unavailables=0):
    """A `requests` answer as NodeInternals prints it; scan None: RangeSlice not registered yet (no range scan
    served), which the Java prints as a count of 0 with null percentiles and unit."""
    def scope(values):
        if values is None:
            return {"count": 0, "p50": None, "p99": None, "unit": None, "failures": 0, "timeouts": 0,
                    "unavailables": 0}
        count, p50, p99 = values
        return {"count": count, "p50": p50, "p99": p99, "unit": unit, "failures": failures, "timeouts": timeouts,
                "unavailables": unavailables}
    return {"uptime_ms": uptime_ms, "scopes": {"Read": scope(read), "Write": scope(write), "RangeSlice": scope(scan)}}


# ------------------------------------------------------------------------------------------ requests -> Snapshot

def test_an_answer_becomes_node_counters_per_kind():
    counters = node_counters(answer(scan=(40, 800.0, 5000.0), failures=2, timeouts=1, unavailables=3))
    assert counters.requests.as_dict() == {"read": 1000.0, "write": 500.0, "scan": 40.0}
    assert counters.failures.read == 5.0          # Failures + Unavailables: both fail at the client
    assert counters.timeouts.as_dict() == {"read": 1.0, "write": 1.0, "scan": 1.0}
    assert (counters.p50.read, counters.p99.read) == (310.5, 2100.0)
    assert counters.p99.scan == 5000.0
    assert counters.uptime_seconds == 600.0


def test_a_scope_the_node_has_not_served_counts_zero_without_percentiles():
    counters = node_counters(answer(scan=None))
    assert counters.requests.scan == 0.0
    assert counters.p50.scan is None and counters.p99.scan is None
    absent = node_counters({"uptime_ms": 1000, "scopes": {"Read": answer()["scopes"]["Read"]}})   # no Write at all
    assert absent.requests.as_dict() == {"read": 1000.0, "write": 0.0, "scan": 0.0}
    assert absent.p99.write is None


def test_percentiles_are_converted_to_microseconds_from_the_timers_unit():
    assert node_counters(answer(read=(10, 0.3, 2.5), unit="milliseconds")).p99.read == pytest.approx(2500.0)
    assert node_counters(answer(read=(10, 300_000.0, 2_500_000.0), unit="nanoseconds")).p99.read == \
        pytest.approx(2500.0)
    with pytest.raises(ValueError, match="unit"):
        node_counters(answer(unit="fortnights"))


def test_answers_of_several_nodes_make_a_window():
    before = snapshot_of(100.0, {"n1": answer(read=(1000, 300.0, 2000.0)), "n2": answer(read=(2000, 300.0, 1500.0))})
    after = snapshot_of(160.0, {"n1": answer(uptime_ms=660_000, read=(1600, 300.0, 2500.0), write=(800, 1.0, 900.0)),
                                "n2": answer(uptime_ms=660_000, read=(2900, 300.0, 1800.0), write=(500, 1.0, 900.0))})
    window = window_between(before, after)
    assert not window.partial
    assert window.requests.as_dict() == {"read": 1500.0, "write": 300.0, "scan": 0.0}
    assert window.ops_per_second == pytest.approx(1800 / 60)
    assert window.mix.read == pytest.approx(1500 / 1800)
    assert window.p99_read == 2500.0


def test_a_node_that_does_not_answer_is_left_out_in_one_line():
    said = []
    silent = TrialError("timeout", "JMX call requests did not answer in 15 s")
    snapshot = snapshot_of(50.0, {"n1": answer(), "n2": silent, "n3": None}, say=said.append)
    assert set(snapshot.nodes) == {"n1"}
    assert len(said) == 2 and all("\n" not in line for line in said)
    assert "n2" in said[0] and "did not answer in 15 s" in said[0] and "left out" in said[0]
    assert "n3" in said[1]


def test_a_window_no_node_answered_for_is_partial_not_idle():
    # 2026-11-28: both nodes busy past the JMX timeout at two readings running were taken for a window without
    # traffic (nothing to subtract, nothing missing), which a guard would read as throughput 0
    silent = TrialError("timeout", "no answer within 5 s")
    before = snapshot_of(0.0, {"n1": silent, "n2": silent})
    after = snapshot_of(20.0, {"n1": silent, "n2": silent})
    window = window_between(before, after)
    assert window.missing == ("n1", "n2") and window.partial and window.operations == 0
    # a node silent at the start but answering at the end has nothing to subtract: unmatched, not missing
    after_one = snapshot_of(20.0, {"n1": answer(uptime_ms=900_000), "n2": silent})
    window = window_between(before, after_one)
    assert window.unmatched == ("n1",) and window.missing == ("n2",) and window.partial


def test_an_answer_that_cannot_be_read_is_left_out_not_raised():
    said = []
    broken = answer()
    broken["scopes"]["Read"]["count"] = -5
    snapshot = snapshot_of(50.0, {"n1": answer(), "n2": broken, "n3": ["not", "an", "object"]}, say=said.append)
    assert set(snapshot.nodes) == {"n1"}
    assert len(said) == 2 and "n2" in said[0] and "count" in said[0]


def test_read_snapshot_asks_every_node_and_goes_on_without_the_one_that_fails():
    asked, said = [], []
    ticks = iter([10.0, 12.0])

    def read(port, timeout, host):
        asked.append((port, host))
        if port == 7299:
            raise TrialError("internals", "JMX call requests failed: error: cannot connect to JMX at ...: refused")
        return answer()

    nodes = [JmxNode("n1", 7199), JmxNode("n2", 7299, host="10.0.0.2")]
    snapshot = read_snapshot(nodes, timeout=5, say=said.append, clock=lambda: next(ticks), read=read)
    assert sorted(asked) == [(7199, None), (7299, "10.0.0.2")]
    assert snapshot.at == 11.0 and set(snapshot.nodes) == {"n1"}
    assert len(said) == 1 and "n2" in said[0] and "refused" in said[0]


# ------------------------------------------------------------------------------------------ live changes

def _set_answer(name, asked, read_back, unit=None, before=None):
    return {"name": name, "value_asked": asked, "value_read_back": read_back, "unit": unit,
            "via": "StorageService ...", "value_before": before}


def _live_plan():
    space = load_space("cassandra")
    return plan_changes(space, {}, {"concurrent_reads": 48, "compaction_throughput": 16, "key_cache_size": 50})


def test_each_live_change_reaches_every_node_and_reads_back():
    calls = []

    def setter(port, knob, value, timeout, host):
        calls.append((port, knob, value))
        unit = {"compaction_throughput": "MiB/s", "key_cache_size": "MiB"}.get(knob)
        return _set_answer(knob, value, float(value) if unit else value, unit, before=7 if port == 7299 else None)

    plan = _live_plan()
    assert {c.knob for c in plan.live} == {"concurrent_reads", "compaction_throughput", "key_cache_size"}
    outcome = apply_live(plan.live, [JmxNode("n1", 7199), JmxNode("n2", 7299)], setter=setter)
    assert outcome.ok and not outcome.differing and not outcome.failed
    assert len(outcome.results) == 6 and len(calls) == 6
    assert [(port, knob) for port, knob, _ in calls[:2]] == [(7199, calls[0][1]), (7299, calls[0][1])]   # knob by knob
    by = {(r.node, r.knob): r for r in outcome.results}
    assert by[("n2", "compaction_throughput")].read_back == 16.0 and by[("n2", "compaction_throughput")].unit == "MiB/s"
    # what each node reported before the change, where it did: what a rollback puts back
    assert by[("n2", "key_cache_size")].before == 7.0 and by[("n1", "key_cache_size")].before is None
    assert by[("n2", "key_cache_size")].as_dict()["before"] == 7.0


def test_a_value_read_back_that_differs_is_reported():
    said = []

    def setter(port, knob, value, timeout, host):
        if knob == "key_cache_size" and port == 7299:
            return _set_answer(knob, value, 25.0, "MiB")        # the node kept another capacity
        return _set_answer(knob, value, value)

    outcome = apply_live(_live_plan().live, [JmxNode("n1", 7199), JmxNode("n2", 7299)], say=said.append,
                         setter=setter)
    assert not outcome.ok
    (odd,) = outcome.differing
    assert (odd.node, odd.knob, odd.asked, odd.read_back) == ("n2", "key_cache_size", 50, 25.0)
    assert said == ["node n2: key_cache_size asked 50 MiB, read back 25 MiB"]
    stored = [r for r in outcome.as_dict()["results"] if r["differs"]]
    assert stored == [{"knob": "key_cache_size", "node": "n2", "asked": 50, "read_back": 25.0, "unit": "MiB",
                       "error": None, "differs": True, "before": None}]


def test_a_node_that_refuses_or_does_not_answer_is_said_and_the_others_go_on():
    said = []

    def setter(port, knob, value, timeout, host):
        if port == 7299:
            raise TrialError("timeout", "JMX call set did not answer in 45 s")
        return _set_answer(knob, value, None if knob == "concurrent_reads" else value)

    outcome = apply_live(_live_plan().live, [JmxNode("n1", 7199), JmxNode("n2", 7299)], say=said.append,
                         setter=setter)
    assert len(outcome.results) == 6 and len(outcome.failed) == 3
    assert all(r.node == "n2" and "did not answer" in r.error for r in outcome.failed)
    (silent,) = outcome.differing        # n1 gave no value back for concurrent_reads: reported, not taken as asked
    assert (silent.node, silent.knob, silent.read_back) == ("n1", "concurrent_reads", None)
    assert len(said) == 4 and all("\n" not in line for line in said)


def test_table_options_are_left_to_alter_table_and_other_routes_refused():
    space = load_space("cassandra")
    plan = plan_changes(space, {}, {"concurrent_reads": 48, "memtable": "trie"})
    outcome = apply_live(plan.live, [JmxNode("n1", 7199)],
                         setter=lambda port, knob, value, timeout, host: _set_answer(knob, value, value))
    assert [r.knob for r in outcome.results] == ["concurrent_reads"]
    assert [c.knob for c in outcome.not_jmx] == ["memtable"]
    restart = Change("concurrent_reads", "yaml", 32, 48, "restart", "rolling restart", "test")
    with pytest.raises(UsageError, match="not a live change"):
        apply_live([restart], [JmxNode("n1", 7199)], setter=lambda *a, **k: pytest.fail("a node was touched"))


def test_a_knob_without_a_jmx_path_is_refused_before_any_jvm_starts(monkeypatch):
    monkeypatch.setattr(internals, "_run", lambda *a, **k: pytest.fail("a JVM was started"))
    with pytest.raises(UsageError, match="no JMX path") as info:
        internals.set_live(7199, "memtable_allocation_type", 1)
    assert info.value.exit_code == 2 and "\n" not in str(info.value)
    with pytest.raises(UsageError, match="ALTER TABLE"):
        internals.set_live(7199, "compression", 1)
    fake = Change("memtable_allocation_type", "yaml", "heap_buffers", "offheap_objects", "live", "-", "test")
    with pytest.raises(UsageError, match="no JMX path"):
        apply_live([fake], [JmxNode("n1", 7199)], setter=lambda *a, **k: pytest.fail("a node was touched"))


def test_set_live_and_client_requests_speak_the_java_commands_flags(monkeypatch):
    seen = []

    def run(port, args, timeout):
        seen.append((port, args))
        if args[0] == "set":
            return '{"name": "compaction_throughput", "value_asked": 16, "value_read_back": 16.0, "unit": "MiB/s"}'
        return '{"uptime_ms": 5, "scopes": {}}'

    monkeypatch.setattr(internals, "_run", run)
    assert internals.set_live(7199, "compaction_throughput", 16.0, timeout=20)["value_read_back"] == 16.0
    assert internals.client_requests(7299, host="10.0.0.2") == {"uptime_ms": 5, "scopes": {}}
    assert seen == [(7199, ["set", "--name", "compaction_throughput", "--value", "16", "--timeout-seconds", "20"]),
                    (7299, ["requests", "--host", "10.0.0.2"])]


# ------------------------------------------------------------------------------------------ ALTER TABLE, live
class FakeSchema:
    """One table as system_schema.tables shows it. An ALTER TABLE it is sent replaces the option whole, as
    Cassandra does (the statement's CQL literal is also a Python literal in the forms we send); `refuse` maps an
    option to the error Cassandra would raise, and an option in `ignore` keeps its value."""

    def __init__(self, refuse=None, ignore=()):
        self.options = {"caching": {"keys": "NONE", "rows_per_partition": "NONE"}, "memtable": "default",
                        "compaction": {"class": "SizeTieredCompactionStrategy"}}
        self.refuse, self.ignore, self.statements = refuse or {}, set(ignore), []

    def execute(self, query, params=None):
        import ast
        from types import SimpleNamespace

        if query.startswith("SELECT"):
            assert params == ("ycsb", "usertable")
            row = SimpleNamespace(_asdict=lambda: dict(self.options))
            return SimpleNamespace(one=lambda: row)
        self.statements.append(query)
        head, _, body = query.partition(" WITH ")
        option, _, value = body.partition(" = ")
        assert head == "ALTER TABLE ycsb.usertable" and " AND " not in body
        if option in self.refuse:
            raise RuntimeError(self.refuse[option])
        if option not in self.ignore:
            self.options[option] = ast.literal_eval(value)

    def connect(self):
        from contextlib import nullcontext

        return nullcontext(self)


def _table_plan(**recommended):
    return plan_changes(load_space("cassandra"), {}, recommended).live


def test_table_options_change_with_alter_table_and_read_back_from_the_schema():
    from nosqltune.online.observe import TableTarget, alter_table

    schema, said = FakeSchema(), []
    changes = _table_plan(memtable="trie", caching_rows_per_partition="ALL")
    results = alter_table(changes, load_space("cassandra"), TableTarget("127.0.0.1"), say=said.append,
                          connect=schema.connect)
    assert sorted(schema.statements) == [
        "ALTER TABLE ycsb.usertable WITH caching = {'keys': 'NONE', 'rows_per_partition': 'ALL'}",  # keys kept
        "ALTER TABLE ycsb.usertable WITH memtable = 'trie'"]
    assert {(r.knob, r.node, r.asked, r.read_back, r.differs) for r in results} == {
        ("memtable", "schema", "trie", "trie", False), ("caching_rows_per_partition", "schema", "ALL", "ALL", False)}
    assert said == [] and schema.options["compaction"] == {"class": "SizeTieredCompactionStrategy"}


def test_a_refused_option_a_value_not_taken_and_a_silent_cluster_are_each_said_in_one_line():
    from nosqltune.online.observe import TableTarget, alter_table

    space, target = load_space("cassandra"), TableTarget("127.0.0.1")
    changes = _table_plan(memtable="trie", caching_rows_per_partition="ALL")
    schema, said = FakeSchema(refuse={"memtable": "Memtable configuration \"trie\" not found.\nat ..."},
                              ignore={"caching"}), []
    results = {r.knob: r for r in alter_table(changes, space, target, say=said.append, connect=schema.connect)}
    assert not results["memtable"].applied and "not found" in results["memtable"].error
    assert results["caching_rows_per_partition"].differs and results["caching_rows_per_partition"].read_back == "NONE"
    assert len(said) == 2 and all("\n" not in line for line in said)
    assert any("caching_rows_per_partition asked ALL, read back NONE" in line for line in said)

    def no_cluster():
        raise ConnectionError("Unable to connect to any servers")

    said.clear()
    results = alter_table(changes, space, target, say=said.append, connect=no_cluster)
    assert len(results) == 2 and all("Unable to connect" in r.error for r in results)
    assert len(said) == 1 and "memtable = trie" in said[0] and "caching_rows_per_partition = ALL" in said[0]


def test_an_option_changed_but_not_read_back_counts_as_applied_so_the_guard_judges_it():
    from nosqltune.online.observe import TableTarget, alter_table

    class Forgetful(FakeSchema):     # the schema read after the ALTER TABLE times out
        def execute(self, query, params=None):
            if query.startswith("SELECT") and self.statements:
                raise TimeoutError("Client request timeout")
            return super().execute(query, params)

    schema, said = Forgetful(), []
    results = alter_table(_table_plan(memtable="trie"), load_space("cassandra"), TableTarget("127.0.0.1"),
                          say=said.append, connect=schema.connect)
    assert schema.options["memtable"] == "trie"
    assert [(r.applied, r.read_back, r.differs) for r in results] == [(True, None, True)]
    assert len(said) == 1 and "not read back" in said[0] and "\n" not in said[0]


def test_the_jmx_applier_sends_table_options_to_alter_table_when_the_run_has_a_cql_address(monkeypatch):
    from nosqltune.online.observe import TableTarget
    from nosqltune.online.run import JmxApplier
    from nosqltune.systems.cassandra import cql

    schema = FakeSchema()
    monkeypatch.setattr(cql, "session", lambda host, port, timeout, access=None: schema.connect())
    changes = _table_plan(memtable="trie")
    without = JmxApplier([JmxNode("n1", 7199)]).apply(changes, lambda _: None)
    assert [c.knob for c in without.not_jmx] == ["memtable"] and schema.statements == []
    space = load_space("cassandra")
    outcome = JmxApplier([JmxNode("n1", 7199)], table=TableTarget("127.0.0.1"), space=space).apply(changes,
                                                                                                   lambda _: None)
    assert outcome.ok and outcome.not_jmx == () and [r.read_back for r in outcome.results] == ["trie"]
    with pytest.raises(UsageError, match="plain CQL name"):
        TableTarget("127.0.0.1", keyspace="ycsb; DROP TABLE x")


# ------------------------------------------------------------------------------------------ latency buckets

def _with_buckets(base, read_buckets, unit="microseconds"):
    base["scopes"]["Read"]["buckets"] = list(read_buckets)
    base["scopes"]["Read"]["unit"] = unit
    return base


def test_bucket_bounds_are_cassandras_and_a_percentile_is_the_bound_where_the_count_is_reached():
    from nosqltune.online.window import bucket_bounds, bucket_percentile

    bounds = bucket_bounds(40)
    # the p99 values nodes report come from these bounds (seen on 5.0.6: 179, 215, 258, 924, 1109 us)
    assert bounds[:12] == (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 17)
    assert {179, 215, 258, 924, 1109} <= set(bounds)
    counts = [0] * 30
    counts[20], counts[25] = 98, 2          # 98 requests up to 86 us, 2 up to 215 us
    assert bucket_percentile(counts, 0.5) == 86.0
    assert bucket_percentile(counts, 0.99) == 215.0   # ceil(100 * 0.99) = 99 is reached in the slow bucket
    counts[20], counts[25] = 99, 1           # now the 99th of 100 is a fast one
    assert bucket_percentile(counts, 0.99) == 86.0
    assert bucket_percentile([0, 0], 0.99) is None


def test_a_windows_percentiles_come_from_its_own_requests_not_the_nodes_decaying_reading():
    from nosqltune.online.window import Snapshot, bucket_bounds

    slow, fast = bucket_bounds(40).index(2759), bucket_bounds(40).index(124)
    start = [0] * 40
    start[slow] = 500                        # the first seconds after a restart: 500 slow reads
    end = list(start)
    end[fast] += 1000                        # the window: 1000 fast reads
    # the node still reports a p99 of 2759 us (its decaying histogram holds the slow start)
    a = node_counters(_with_buckets(answer(read=(500, 2000.0, 2759.0)), start))
    b = node_counters(_with_buckets(answer(read=(1500, 124.0, 2759.0), write=(900, 120.0, 900.0),
                                           uptime_ms=630_000), end))
    window = window_between(Snapshot(0.0, {"n1": a}), Snapshot(30.0, {"n1": b}))
    assert window.requests.read == 1000 and window.p99("read") == 124.0
    assert window.p99("write") == 900.0      # no buckets for writes: the reported p99 stands in


def test_a_node_restarted_in_the_window_is_judged_on_its_buckets_since_the_restart():
    from nosqltune.online.window import Snapshot, bucket_bounds

    i = bucket_bounds(40).index(372)
    before = [0] * 40
    before[5] = 10_000                       # what it served before the restart: gone with it
    after = [0] * 40
    after[i] = 200
    a = node_counters(_with_buckets(answer(read=(10_000, 5.0, 6.0)), before))
    b = node_counters(_with_buckets(answer(read=(200, 372.0, 999.0), uptime_ms=10_000), after))
    window = window_between(Snapshot(0.0, {"n1": a}), Snapshot(30.0, {"n1": b}))
    assert window.restarted == ("n1",) and window.p99("read") == 372.0


def test_buckets_missing_at_one_end_or_in_another_unit_leave_the_reported_percentile():
    from nosqltune.online.window import Snapshot

    counts = [0] * 30
    counts[25] = 100
    with_buckets = node_counters(_with_buckets(answer(read=(3000, 100.0, 300.0), uptime_ms=630_000), counts))
    without = node_counters(answer(read=(2000, 100.0, 310.5)))
    assert window_between(Snapshot(0.0, {"n1": without}), Snapshot(30.0, {"n1": with_buckets})).p99("read") == 300.0
    assert node_counters(_with_buckets(answer(), counts, unit="milliseconds")).buckets == {}
    with pytest.raises(ValueError):
        node_counters(_with_buckets(answer(), [1, -2]))


def test_a_stored_snapshot_keeps_its_buckets():
    from nosqltune.online.rollout import snapshot_dict, snapshot_from
    from nosqltune.online.window import Snapshot

    counts = [0, 3, 7]
    snap = Snapshot(5.0, {"n1": node_counters(_with_buckets(answer(), counts))}, asked=("n1",))
    again = snapshot_from(json.loads(json.dumps(snapshot_dict(snap))))
    assert again == snap and again.nodes["n1"].buckets == {"read": (0, 3, 7)}
