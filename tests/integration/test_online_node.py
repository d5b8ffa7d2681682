"""Online re-tuning's node side on a real Cassandra node (issue 39): the ClientRequest counters a window is made of
grow with the traffic a short YCSB run sends (reads, updates and range scans) and carry percentiles; a live knob
set over JMX reads back its new value, and a table option changed with ALTER TABLE from the schema; a knob without a JMX path is refused; a node that does not answer is left
out of the snapshot in one line. The node is conftest's module fixture `node` (one small node started as a trial's node
is), started for this module."""

from __future__ import annotations

import socket
import subprocess

import pytest

from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.online import plan_changes, window_between
from nosqltune.online.observe import JmxNode, apply_live, read_snapshot, snapshot_of
from nosqltune.online.window import bucket_percentile
from nosqltune.systems.cassandra.internals import client_requests, set_live
from nosqltune.systems.cassandra.trial import _create_schema
from nosqltune.workloads.loadgen import loadgen_java_command
from nosqltune.workloads.spec import Workload, make_workload
from nosqltune.workloads.ycsb import run_client

# reads, updates and short range scans, so that every ClientRequest scope a window reads has traffic
MIX = {"readproportion": 0.45, "updateproportion": 0.45, "scanproportion": 0.1, "insertproportion": 0,
       "maxscanlength": 10}
SCOPES = ("Read", "Write", "RangeSlice")


@pytest.fixture(scope="module")
def traffic(node, tmp_path_factory):
    """The node's `requests` answer before and after a short YCSB load and run, and the run's metrics."""
    work = tmp_path_factory.mktemp("online-node")
    base = make_workload("ycsb-a", records=1000, operations=3000, threads=2, warmup_operations=200)
    workload = Workload.from_dict({**base.to_dict(), "mix": {**base.mix, **MIX}})
    _create_schema(node.address, node.ports.native, workload)
    before = client_requests(node.ports.jmx)
    run_client("load", workload, host=node.address, port=node.ports.native, trial_dir=work / "load", timeout=180)
    metrics = run_client("run", workload, host=node.address, port=node.ports.native, trial_dir=work / "run",
                         timeout=180)
    after = client_requests(node.ports.jmx)
    return before, after, metrics


@pytest.mark.slow
def test_requests_grow_with_the_traffic_and_carry_percentiles(traffic):
    before, after, metrics = traffic
    assert metrics["errors"] == 0 and metrics["throughput_ops_s"] > 0
    assert after["uptime_ms"] > before["uptime_ms"] > 0
    for scope in SCOPES:
        was, now = before["scopes"][scope], after["scopes"][scope]
        assert now["count"] > was["count"], (scope, was, now)
        assert now["p50"] > 0 and now["p99"] >= now["p50"], (scope, now)
        assert now["unit"] == "microseconds"
        # the plain counts per latency bucket, one per request since the start, whose median is the reported
        # p50 to a bucket (the reported one weighs the recent requests more)
        assert sum(now["buckets"]) == now["count"], (scope, now)
        assert now["p50"] / 1.21 <= bucket_percentile(now["buckets"], 0.5) <= now["p50"] * 1.21, (scope, now)
        assert all(isinstance(now[k], int) and now[k] >= 0 for k in ("failures", "timeouts", "unavailables"))
    # 1000 inserts, the warm-up and 3000 measured operations, each coordinated once by the only node
    # the window as long as the node's uptime grew (a restart shows as an uptime that grew by less than the window)
    seconds = (after["uptime_ms"] - before["uptime_ms"]) / 1000
    window = window_between(snapshot_of(0.0, {"n1": before}), snapshot_of(seconds, {"n1": after}))
    assert not window.partial
    assert window.operations >= 1000 + 3000
    assert window.requests.write >= 1000 and window.requests.read > 0 and window.requests.scan > 0
    assert window.p99_read is not None and window.p99_read > 0


@pytest.mark.slow
def test_a_live_knob_reads_back_its_new_value(node):
    reads = set_live(node.ports.jmx, "concurrent_reads", 24)
    throughput = set_live(node.ports.jmx, "compaction_throughput", 16)
    try:
        assert (reads["name"], reads["value_asked"], reads["value_read_back"]) == ("concurrent_reads", 24, 24)
        assert throughput["value_read_back"] == 16 and throughput["unit"] == "MiB/s"
        # what each ran before, read in the same call: the node's 5.0 defaults (what a rollback would put back)
        assert reads["value_before"] == 32 and throughput["value_before"] == 64
        assert "setConcurrency" in reads["via"] and "CompactionThroughput" in throughput["via"]
        plan = plan_changes(load_space("cassandra"), {"concurrent_reads": 24, "compaction_throughput": 16},
                            {"concurrent_reads": 40, "compaction_throughput": 32})
        outcome = apply_live(plan.live, [JmxNode("n1", node.ports.jmx)])
        assert outcome.ok, outcome.as_dict()
        assert {r.knob: r.read_back for r in outcome.results} == {"concurrent_reads": 40, "compaction_throughput": 32}
        assert {r.knob: r.before for r in outcome.results} == {"concurrent_reads": 24, "compaction_throughput": 16}
    finally:   # the module's node as it was started (5.0's defaults)
        set_live(node.ports.jmx, "concurrent_reads", 32)
        set_live(node.ports.jmx, "compaction_throughput", 64)


@pytest.mark.slow
def test_table_options_change_live_with_alter_table_and_read_back_from_the_schema(node, traffic):
    """The memtable and the row caching of YCSB's table, through the applier `online` uses: the schema reports the
    new values, caching keeps its `keys` entry, and the other way back restores the table as it was."""
    from nosqltune.online.observe import TableTarget
    from nosqltune.online.run import JmxApplier
    from nosqltune.systems.cassandra import cql

    space = load_space("cassandra")
    applier = JmxApplier([JmxNode("n1", node.ports.jmx)], table=TableTarget(node.address, node.ports.native),
                         space=space)
    said = []
    there = plan_changes(space, {}, {"memtable": "trie", "caching_rows_per_partition": "ALL"}).live
    outcome = applier.apply(there, said.append)
    assert outcome.ok and not outcome.not_jmx and said == [], outcome.as_dict()
    assert {r.knob: r.read_back for r in outcome.results} == {"memtable": "trie", "caching_rows_per_partition": "ALL"}
    with cql.session(node.address, node.ports.native) as sess:
        row = sess.execute("SELECT caching, memtable FROM system_schema.tables WHERE keyspace_name = 'ycsb' "
                           "AND table_name = 'usertable'").one()
    assert dict(row.caching) == {"keys": "ALL", "rows_per_partition": "ALL"} and row.memtable == "trie"
    back = plan_changes(space, {"memtable": "trie", "caching_rows_per_partition": "ALL"},
                        {"memtable": "skiplist", "caching_rows_per_partition": "NONE"}).live
    outcome = applier.apply(back, said.append)
    assert outcome.ok and {r.knob: r.read_back for r in outcome.results} == {
        "memtable": "skiplist", "caching_rows_per_partition": "NONE"}, outcome.as_dict()


@pytest.mark.slow
def test_a_knob_without_a_live_path_is_refused(node):
    with pytest.raises(UsageError, match="no JMX path"):
        set_live(node.ports.jmx, "memtable_allocation_type", 1)
    # the JMX tool itself refuses too, with exit code 2 and one line, before it connects
    cmd = loadgen_java_command("nosqltune.loadgen.NodeInternals",
                               ["--jmx-port", str(node.ports.jmx), "set", "--name", "compression", "--value", "1"])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no JMX path" in errors[0] and "Usage:" not in proc.stderr


@pytest.mark.slow
def test_a_node_that_does_not_answer_is_left_out_in_one_line(node):
    with socket.socket() as s:       # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        silent = s.getsockname()[1]
    said = []
    snapshot = read_snapshot([JmxNode("n1", node.ports.jmx), JmxNode("gone", silent)], timeout=60, say=said.append)
    assert set(snapshot.nodes) == {"n1"}
    assert len(said) == 1 and "gone" in said[0] and "left out" in said[0] and "\n" not in said[0]


@pytest.mark.slow
def test_each_phase_of_a_trace_shows_the_node_the_mix_it_declares(node, traffic, tmp_path):
    """A trace driven by the YCSB client (workloads/trace.py) against the node: the ClientRequest counters read
    around each phase give the read, write and scan shares the phase declares (Phase.node_mix), so `online`'s
    windows see the trace's shifts as the trace says they happen."""
    from nosqltune.workloads.trace import drive, parse_trace, ycsb_phase_runner

    trace = parse_trace({"name": "three", "phases": [
        {"name": "reads", "workload": "ycsb-c", "seconds": 6, "rate": 400, "threads": 2},
        {"name": "writes", "workload": "write90", "seconds": 6, "rate": 400, "threads": 2},
        {"name": "scans", "workload": "ycsb-e", "seconds": 6, "rate": 100, "threads": 2}]})
    client = ycsb_phase_runner(node.address, node.ports.native)
    seen = {}

    def run_phase(phase, workload, folder):
        before = client_requests(node.ports.jmx)
        metrics = client(phase, workload, folder)
        after = client_requests(node.ports.jmx)
        seconds = (after["uptime_ms"] - before["uptime_ms"]) / 1000    # the phase's length as the node saw it
        seen[phase.name] = window_between(snapshot_of(0.0, {"n1": before}), snapshot_of(seconds, {"n1": after}))
        return metrics

    rows = drive(trace, run_phase, records=1000, folder=tmp_path)
    assert [r["phase"] for r in rows] == ["reads", "writes", "scans"]
    for phase, row in zip(trace.phases, rows):
        window = seen[phase.name]
        assert row["errors"] == 0 and row["throughput_ops_s"] > 0.5 * (phase.rate or 0), row
        assert window.operations > 0.5 * phase.rate * phase.seconds, (phase.name, window.operations)
        for kind, share in phase.node_mix().items():
            assert getattr(window.mix, kind) == pytest.approx(share, abs=0.05), (phase.name, kind, window.mix)
