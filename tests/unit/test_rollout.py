"""The rollout's decisions on scripted nodes: the order of the steps, one node at a time, the canary's verdict and
its restore, resuming an interrupted rollout, the dry run, and the checks that refuse a cluster before any step."""

import json

import pytest

from nosqltune.errors import UsageError
from nosqltune.online.guard import judge_on_nodes, judge_change
from nosqltune.online.rollout import Rollout, RolloutPlan, RolloutRecorder, RolloutSettings, snapshot_dict, \
    snapshot_from
from nosqltune.online.window import NodeCounters, PerKind, Snapshot, window_between

NODES = ["n1", "n2", "n3"]


def plan_folder(tmp_path, **over):
    data = {"plan": "nosqltune", "format": 1, "system": "cassandra", "version": "5.0.6",
            "evidence": {"line": "x1.5", "confirmed": True},
            "config": {"concurrent_reads": 48, "heap_size": 1536, "compression": "Zstd"},
            "settings": [{"knob": "concurrent_reads", "tags": ["live"]},
                         {"knob": "heap_size", "tags": ["restart", "tuned on the rig"]},
                         {"knob": "compression", "tags": ["rewrite", "irreversible"]}],
            "live": {"concurrent_reads": 48}, "yaml": {"concurrent_reads": 48},
            "jvm": {"add": ["-Xms1536M", "-Xmx1536M"], "remove": []},
            "tables": ["shop.orders"], "schema": ["ALTER TABLE shop.orders WITH compression = {'class': 'Zstd'}"],
            "table_options": ["compression"],
            "rewrite": {"knobs": ["compression"], "tables": ["shop.orders"], "throttle_mib_s": 64}, "volume": {}}
    data.update(over)
    folder = tmp_path / "plan"
    folder.mkdir(exist_ok=True)
    (folder / "plan.json").write_text(json.dumps(data))
    return folder


class Killed(BaseException):
    """A SIGKILL of the rollout's process: nothing of it runs after."""


class Scripted:
    """ClusterActions on scripted nodes: each serves `rate` requests a second at a p99 of `p99` us; a node the
    plan reached (its live settings or its restart) serves at `changed_p99`. Every action is logged, and the
    nodes up are checked at each: never two down at once."""

    def __init__(self, clock, rate=1000.0, p99=2000.0, changed_p99=2000.0, versions=None, down=(), schemas=1,
                 rf=3, fail_restart_of=None, free=100 << 30, read_share=None):
        self.clock, self.rate, self.p99, self.changed_p99 = clock, rate, p99, changed_p99
        self.read_share = read_share   # the share of its reads a changed node serves, by its seconds up
        self.reads = {n: 0.0 for n in NODES}
        self.versions = versions or {n: "5.0.6" for n in NODES}
        self.down, self.schemas, self.rf, self.fail_restart_of = set(down), schemas, rf, fail_restart_of
        self.free = free
        self.killed_in_restart_of = None
        self.log, self.changed, self.counts = [], set(), {n: 0.0 for n in NODES}
        self.started = {n: 0.0 for n in NODES}
        self.live = {n: {"concurrent_reads": 32} for n in NODES}
        self.tables = {"shop.orders": {"compression": {"class": "LZ4Compressor"}}}
        self.last = clock()

    def _advance(self):
        now = self.clock()
        for n in NODES:
            self.counts[n] += self.rate * (now - self.last)
            share = self.read_share(now - self.started[n]) if n in self.changed and self.read_share else 1.0
            self.reads[n] += 0.7 * share * self.rate * (now - self.last)
        self.last = now

    def status(self, node):
        if node in self.down:
            raise RuntimeError("connection refused")
        return {"version": self.versions[node], "mode": "NORMAL",
                "live": [f"/{a}" for a in NODES if a not in self.down], "unreachable": sorted(self.down),
                "schema_versions": {f"v{i}": NODES for i in range(self.schemas)}, "pending_hints": []}

    def address(self, node):
        return node

    def counters(self):
        self._advance()
        nodes = {}
        for n in NODES:
            p99 = self.changed_p99 if n in self.changed else self.p99
            if callable(p99):   # a p99 that moves with the time since the node started
                p99 = p99(self.clock() - self.started[n])
            nodes[n] = NodeCounters(requests=PerKind(read=self.reads[n], write=self.counts[n] * 0.3),
                                    p99=PerKind(read=p99, write=p99 / 2, scan=None),
                                    uptime_seconds=self.clock() - self.started[n] + 1000)
        return Snapshot(at=self.clock(), nodes=nodes, asked=tuple(NODES))

    def check_tables(self, tables, need_rf):
        if self.rf < need_rf:
            raise UsageError(f"keyspace shop keeps {self.rf} replica(s)")

    def set_live(self, node, knob, value):
        self.log.append(("live", node, knob, value))
        before = self.live[node][knob]
        self.live[node][knob] = value
        if value == 48:
            self.changed.add(node)
        else:
            self.changed.discard(node)
        return {"before": before, "read_back": value, "error": None}

    def table_options(self, tables):
        return {t: dict(self.tables[t]) for t in tables}

    def alter(self, statements):
        self.log.append(("alter", tuple(statements)))
        self.tables["shop.orders"] = {"compression": {"class": "ZstdCompressor"}}

    def restore_tables(self, options):
        self.log.append(("restore-tables",))
        self.tables.update({k: dict(v) for k, v in options.items()})

    def restart(self, node, plan):
        assert not self.down - {node}, f"{node} restarted while {self.down} is down"
        self.log.append(("restart", node, "plan" if plan else "previous"))
        if node == self.fail_restart_of:
            raise RuntimeError("the service did not start")
        if node == self.killed_in_restart_of:   # the rollout's process killed while the node is stopped
            self.down.add(node)
            raise Killed()
        self.down.discard(node)
        self.counts[node] = self.reads[node] = 0.0   # counters start again
        self.started[node] = self.clock()
        if plan is None:
            self.changed.discard(node)
            self.live[node]["concurrent_reads"] = 32
        else:
            self.changed.add(node)

    def rewrite(self, node, table, throttle):
        self.log.append(("rewrite", node, table, throttle))
        return {"status": 0, "seconds": 1.0}

    def pending_compactions(self, node):
        return 0

    def table_bytes(self, node, table):
        return 10 << 30

    def free_disk(self, node):
        return self.free


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def rollout(tmp_path, cluster, clock, recorder=None, **settings):
    plan = RolloutPlan.load(plan_folder(tmp_path))
    s = RolloutSettings(**{"window_s": 60.0, "windows": 3, "apply": True, **settings})
    said = []
    return Rollout(plan, NODES, cluster, s, recorder, say=said.append, clock=clock, sleep=clock.sleep), said


def test_the_canary_first_then_one_node_at_a_time_in_the_plans_order(tmp_path):
    clock = Clock()
    cluster = Scripted(clock)
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "done", said
    assert result.verdict is not None and result.verdict.keep
    kinds = [(s.kind, s.node) for s in r.steps]
    assert kinds[:4] == [("check", None), ("observe-before", "n1"), ("schema", None), ("live", "n1")]
    assert kinds[4:9] == [("restart", "n1"), ("rewrite", "n1"), ("observe-after", "n1"), ("judge", "n1"),
                          ("live", "n2")]
    # every node gets the plan, each node's steps done before the next node's start
    nodes_in_order = [e[1] for e in cluster.log if e[0] in ("live", "restart", "rewrite")]
    assert nodes_in_order == ["n1"] * 3 + ["n2"] * 3 + ["n3"] * 3
    assert ("alter", ("ALTER TABLE shop.orders WITH compression = {'class': 'Zstd'}",)) in cluster.log
    assert all(cluster.live[n]["concurrent_reads"] == 48 for n in NODES)


def test_a_worse_canary_stops_the_rollout_and_is_put_back(tmp_path):
    clock = Clock()
    cluster = Scripted(clock, changed_p99=4000.0)   # the plan doubles the canary's p99
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "canary-worse", said
    assert result.verdict.rollback and result.verdict.check("p99_read").worse
    # nothing reached n2 or n3; n1 is back on what it ran, the table options too; the rewrite is said
    assert not [e for e in cluster.log if len(e) > 1 and e[1] in ("n2", "n3")]
    assert cluster.live["n1"]["concurrent_reads"] == 32 and "n1" not in cluster.changed
    assert ("restart", "n1", "previous") in cluster.log and ("restore-tables",) in cluster.log
    assert cluster.tables["shop.orders"] == {"compression": {"class": "LZ4Compressor"}}
    assert any("rewritten SSTables stay" in x for x in result.not_restored)


def test_a_canary_still_cold_after_its_settle_is_watched_until_it_recovers(tmp_path):
    """Rule 7: a restarted canary at 3x its p99 in the first window after the settle, 1.8x in the second, then at
    its old p99: kept on its third window, and the plan goes on to the other nodes."""
    clock = Clock()
    cold = {0: 6000.0, 1: 3600.0}   # by window after the 120 s settle (60 s windows)
    cluster = Scripted(clock, changed_p99=lambda up: cold.get(int((up - 120.0) // 60.0) - 1, 2000.0))
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "done", said
    assert result.verdict.keep and "window 3 after the settle" in result.verdict.reason
    assert ("restart", "n3", "plan") in cluster.log


def test_a_canary_worse_in_two_windows_and_not_recovering_stops_on_the_second(tmp_path):
    """Rule 7: worse at 2.4x then 2.2x (less than one histogram bucket lower): stopped on the second window."""
    clock = Clock()
    cluster = Scripted(clock, changed_p99=lambda up: 4800.0 if up < 240.0 else 4400.0)
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "canary-worse", said
    assert "windows 1 and 2 after the settle, not recovering" in result.verdict.reason


def test_a_canary_the_coordinators_route_reads_around_is_judged_once_its_reads_come_back(tmp_path):
    """A restarted replica served no reads (the dynamic snitch sent them to the others) for 5 minutes after its
    settle: its reads are not judged, so nothing is kept until they come back; then its p99 decides."""
    clock = Clock()
    cluster = Scripted(clock, read_share=lambda up: 0.0 if up < 420.0 else 1.0)
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "done", said
    assert result.verdict.keep and not result.verdict.unjudged
    assert "window 5 after the settle" in result.verdict.reason   # reads back in the 5th 60 s window after it


def test_a_canary_whose_reads_never_come_back_stops_the_rollout_unjudged(tmp_path):
    clock = Clock()
    cluster = Scripted(clock, read_share=lambda up: 0.0)
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "stopped" and "could not be judged" in result.error, said
    assert "p99 not judged for read" in result.error and "dynamic snitch" in result.error
    assert not [e for e in cluster.log if len(e) > 1 and e[1] in ("n2", "n3")], "the others untouched"
    assert clock.t - 1000.0 >= 600.0, "it waited out the snitch's reset"


def test_a_kind_judged_before_and_not_after_is_named_not_kept():
    from nosqltune.online.window import window_between

    def snap(t, reads):
        return Snapshot(at=t, nodes={"n1": NodeCounters(requests=PerKind(read=reads, write=t * 10),
                                                        p99=PerKind(read=2000.0, write=500.0))})

    before = [window_between(snap(t, t * 10), snap(t + 60, (t + 60) * 10)) for t in (0, 60, 120)]
    after = window_between(snap(180, 1800), snap(240, 1900))   # 100 reads after, 600 in each window before
    verdict = judge_change(before, after, latency_only=True)   # a replica's reads are the coordinators' choice
    assert verdict.keep and verdict.unjudged == ("read",) and "p99 not judged for read (100 after)" in verdict.reason
    from nosqltune.online.guard import after_restart
    assert after_restart([verdict], 6) is None
    assert after_restart([verdict] * 6, 6).verdict == "wait"


def test_the_rule_after_a_restart_keeps_stops_and_waits():
    from nosqltune.online.guard import GuardVerdict, after_restart
    from nosqltune.online.guard import Check

    def v(change):   # a verdict on one window whose read p99 moved by `change` against a tolerance of 0.2
        worse = change > 0.2
        check = Check("p99_read", 1000.0, 1000.0 * (1 + change), change, 0.2, 0.05, worse)
        return GuardVerdict("rollback" if worse else "keep", True, "p99", (check,), 3, f"{change:+.0%}",
                            ("p99_read",) if worse else ())

    assert after_restart([v(0.1)], 6).keep                      # the first window not worse keeps it
    assert after_restart([v(1.0)], 6) is None                   # one worse window: read another
    assert after_restart([v(1.0), v(0.9)], 6).rollback          # 2000 -> 1900 us: less than a bucket lower
    assert after_restart([v(1.0), v(0.5)], 6) is None           # 2000 -> 1500 us: a bucket or more, read another
    assert after_restart([v(1.0), v(0.5), v(0.45)], 6).rollback  # then stuck: stopped
    assert after_restart([v(1.0), v(0.5), v(0.1)], 6).keep
    assert after_restart([v(1.0), v(0.5)], 2).rollback          # the last window allowed decides
    assert after_restart([GuardVerdict("wait", False, "nothing")], 6) is None
    with pytest.raises(UsageError):
        after_restart([v(1.0)], 1)


def test_a_drop_in_demand_elsewhere_is_not_the_canarys_doing():
    """The guard's rule 5: the canary's throughput fell 30%, and so did the other nodes': not a regression."""
    from nosqltune.online.window import window_between

    def snap(t, n1, others):
        return Snapshot(at=t, nodes={"n1": NodeCounters(requests=PerKind(read=n1), p99=PerKind(read=2000.0)),
                                     "n2": NodeCounters(requests=PerKind(read=others), p99=PerKind(read=2000.0))})

    snaps = [snap(0, 0, 0), snap(60, 60000, 60000), snap(120, 121000, 121000), snap(180, 180500, 180500)]
    before = [window_between(a, b) for a, b in zip(snaps, snaps[1:])]
    after_snaps = [snap(180, 180500, 180500), snap(240, 222500, 222500)]   # both at 700/s
    after = window_between(*after_snaps)
    canary_before = [w.only({"n1"}) for w in before]
    plain = judge_change(canary_before, after.only({"n1"}))
    assert plain.rollback and plain.check("throughput").worse   # without the demand: read as a regression
    knowing, demand = judge_on_nodes(before, after, {"n1"}, replicated=False)   # RF 1: the throughput decides too
    assert demand == pytest.approx(-0.3, abs=0.01)   # from n2's requests: 1000/s before, 700/s after
    assert knowing.keep and not knowing.check("throughput").worse and "replica" not in knowing.judged_on
    worse, _ = judge_on_nodes(before, window_between(*after_snaps[:1], Snapshot(
        at=240, nodes={"n1": NodeCounters(requests=PerKind(read=222500 - 30000), p99=PerKind(read=2000.0)),
                       "n2": NodeCounters(requests=PerKind(read=222500), p99=PerKind(read=2000.0))})),
        {"n1"}, replicated=False)
    assert worse.rollback and worse.check("throughput").worse   # the canary fell 50% while the demand fell 30%


def test_an_interrupted_rollout_resumes_where_it_stopped(tmp_path):
    clock = Clock()
    cluster = Scripted(clock, fail_restart_of="n2")
    store = str(tmp_path / "s.db")
    plan = RolloutPlan.load(plan_folder(tmp_path))
    settings = RolloutSettings(window_s=60.0, windows=3, apply=True)
    recorder = RolloutRecorder.open(store, plan, NODES, settings, {})
    first = Rollout(plan, NODES, cluster, settings, recorder, say=lambda _: None, clock=clock, sleep=clock.sleep)
    result = first.run()
    recorder.close()
    assert result.state == "stopped" and "did not start" in result.error
    done_before = [e for e in cluster.log if e[0] in ("live", "restart", "rewrite", "alter")]
    cluster.fail_restart_of = None
    cluster.log.clear()
    recorder = RolloutRecorder.open(store, plan, NODES, settings, {})
    again = Rollout(plan, NODES, cluster, settings, recorder, say=lambda _: None, clock=clock, sleep=clock.sleep)
    result = again.run()
    recorder.close()
    assert result.state == "done" and result.steps_skipped >= 8
    # the canary's steps and n2's live setting are not done again; n2's restart and the rest are
    assert cluster.log[0] == ("restart", "n2", "plan")
    assert [e[1] for e in cluster.log if e[0] == "restart"] == ["n2", "n3"]
    assert ("live", "n2", "concurrent_reads", 48) in done_before


def test_a_rollout_killed_while_a_node_is_down_resumes_and_restarts_that_node(tmp_path):
    """Killed in n2's restart, with n2 stopped: the check of the resumed run does not refuse the cluster for the
    node its own step left down (every other refusal stands), and that restart runs again."""
    clock = Clock()
    cluster = Scripted(clock)
    cluster.killed_in_restart_of = "n2"
    store = str(tmp_path / "s.db")
    plan = RolloutPlan.load(plan_folder(tmp_path))
    settings = RolloutSettings(window_s=60.0, windows=3, apply=True)
    recorder = RolloutRecorder.open(store, plan, NODES, settings, {})
    with pytest.raises(Killed):
        Rollout(plan, NODES, cluster, settings, recorder, say=lambda _: None, clock=clock, sleep=clock.sleep).run()
    recorder.close()
    assert cluster.down == {"n2"}
    cluster.killed_in_restart_of = None
    cluster.log.clear()
    said = []
    recorder = RolloutRecorder.open(store, plan, NODES, settings, {})
    result = Rollout(plan, NODES, cluster, settings, recorder, say=said.append, clock=clock, sleep=clock.sleep).run()
    recorder.close()
    assert result.state == "done", (result.error, said)
    assert [e[1] for e in cluster.log if e[0] == "restart"] == ["n2", "n3"] and not cluster.down
    assert any("n2 does not answer: the interrupted rollout was restarting it" in line for line in said), said
    # another node down is still refused on a resume
    cluster.killed_in_restart_of = "n3"
    recorder = RolloutRecorder.open(str(tmp_path / "t.db"), plan, NODES, settings, {})
    with pytest.raises(Killed):
        Rollout(plan, NODES, cluster, settings, recorder, say=lambda _: None, clock=clock, sleep=clock.sleep).run()
    recorder.close()
    cluster.killed_in_restart_of = None
    cluster.down.add("n1")
    recorder = RolloutRecorder.open(str(tmp_path / "t.db"), plan, NODES, settings, {})
    with pytest.raises(UsageError, match="n1 does not answer"):
        Rollout(plan, NODES, cluster, settings, recorder, say=lambda _: None, clock=clock, sleep=clock.sleep).run()
    recorder.close()


def test_a_dry_run_prints_every_step_and_touches_nothing(tmp_path):
    clock = Clock()
    cluster = Scripted(clock)
    r, said = rollout(tmp_path, cluster, clock, apply=False)
    assert r.run().state == "dry-run"
    assert cluster.log == [] and len([line for line in said if "]" in line]) == len(r.steps)
    assert any("restart" in line and "n3" in line for line in said)


@pytest.mark.parametrize("cluster_args, said", [
    ({"versions": {"n1": "5.0.6", "n2": "5.0.6", "n3": "4.1.5"}}, "different Cassandra versions"),
    ({"versions": {n: "4.1.5" for n in NODES}}, "tuned on Cassandra 5.0.6; the cluster runs 4.1.5"),
    ({"down": ["n3"]}, "n3 does not answer"),
    ({"schemas": 2}, "schema disagreement"),
    ({"rf": 1}, "keyspace shop keeps 1 replica"),
    ({"free": 4 << 30}, "has 4.0 GiB free; rewriting shop.orders needs room for another copy of 10.0 GiB"),
])
def test_a_cluster_the_plan_cannot_go_to_is_refused_before_any_step(tmp_path, cluster_args, said):
    clock = Clock()
    cluster = Scripted(clock, **cluster_args)
    r, lines = rollout(tmp_path, cluster, clock)
    with pytest.raises(UsageError, match=said):
        r.run()
    assert cluster.log == []


def test_a_plan_of_another_datastore_or_format_is_refused(tmp_path):
    with pytest.raises(UsageError, match="a plan for 'redis'"):
        RolloutPlan.load(plan_folder(tmp_path, system="redis"))
    with pytest.raises(UsageError, match="plan format 7"):
        RolloutPlan.load(plan_folder(tmp_path, format=7))
    with pytest.raises(UsageError, match="no plan.json"):
        RolloutPlan.load(tmp_path / "nothing")


def test_snapshots_stored_with_a_step_come_back_the_same():
    snap = Snapshot(at=12.5, nodes={"a": NodeCounters(requests=PerKind(read=5.0, write=1.0), p99=PerKind(read=9.0),
                                                      uptime_seconds=3.0)}, asked=("a", "b"))
    assert snapshot_from(json.loads(json.dumps(snapshot_dict(snap)))) == snap


def test_a_replicas_falling_share_of_the_reads_is_not_the_plans_doing():
    """The guard's rule 6: a canary at RF > 1 served half the reads after its restart (the coordinators' dynamic
    snitch sent them elsewhere) at the same latencies: kept when its latencies decide, rolled back otherwise."""
    from nosqltune.online.window import window_between

    def snap(t, count, p99):
        return Snapshot(at=t, nodes={"n1": NodeCounters(requests=PerKind(read=count), p99=PerKind(read=p99))})

    before = [window_between(a, b) for a, b in zip([snap(0, 0, 2000.0), snap(60, 60000, 2000.0),
                                                    snap(120, 121000, 2000.0)],
                                                   [snap(60, 60000, 2000.0), snap(120, 121000, 2000.0),
                                                    snap(180, 180500, 2000.0)])]
    after = window_between(snap(180, 180500, 1900.0), snap(240, 210500, 1900.0))
    canary_before = [w.only({"n1"}) for w in before]
    assert judge_change(canary_before, after.only({"n1"})).rollback
    kept = judge_change(canary_before, after.only({"n1"}), latency_only=True)
    assert kept.keep and "replica" in kept.judged_on and kept.check("throughput").worse
    slower = window_between(snap(180, 180500, 4000.0), snap(240, 210500, 4000.0))
    assert judge_change(canary_before, slower.only({"n1"}), latency_only=True).rollback


def test_a_baseline_still_falling_is_read_on_until_it_is_steady(tmp_path):
    """Rule 8: a cluster just loaded warms for minutes (its p99 a bucket lower each window); the rollout reads more
    windows before the change until the fall stops, and judges against the steady ones."""
    clock = Clock()
    warming = {1060.0: 6000.0, 1120.0: 3600.0}   # the reported p99 at each reading, by the clock
    cluster = Scripted(clock, p99=lambda t: warming.get(t, 2000.0))
    r, said = rollout(tmp_path, cluster, clock)
    result = r.run()
    assert result.state == "done" and result.verdict.keep, said
    # 6000, 3600, 2000; then 3600, 2000, 2000 (3600 still two buckets above the last); then steady
    assert sum("still warming, one more window" in line for line in said) == 2, said
    check = result.verdict.check("p99_read")
    assert check.baseline == pytest.approx(2000.0), "the warm windows dropped"


def test_a_baseline_is_settling_only_when_its_p99_fell_two_buckets_to_its_lowest():
    from nosqltune.online.guard import settling
    from nosqltune.online.window import window_between

    def windows(values):
        snaps = [Snapshot(at=60.0 * i, nodes={"n1": NodeCounters(requests=PerKind(read=1000.0 * i, write=0.0),
                                                                 p99=PerKind(read=v, write=None, scan=None),
                                                                 uptime_seconds=100.0 + 60.0 * i)})
                 for i, v in enumerate([values[0], *values])]
        return [window_between(a, b) for a, b in zip(snaps, snaps[1:])]

    assert settling(windows([770.0, 310.0, 179.0]), "n1") == "read p99 770 -> 310 -> 179 us"
    assert settling(windows([770.0, 310.0, 310.0]), "n1") is not None    # warm since the second window
    assert settling(windows([215.0, 179.0, 149.0]), "n1") is not None    # two buckets are enough
    assert settling(windows([2000.0, 2400.0, 2000.0]), "n1") is None     # noise, not a fall
    assert settling(windows([2400.0, 2000.0, 2000.0]), "n1") is None     # one bucket: within the noise
    assert settling(windows([2000.0, 1900.0, 1800.0]), "n1") is None     # less than a bucket a window
    assert settling(windows([770.0, 179.0, 310.0]), "n1") is None        # the last not the lowest: noise


def test_a_canary_whose_baseline_keeps_falling_is_judged_after_windows_more_and_it_is_said(tmp_path):
    clock = Clock()
    cluster = Scripted(clock, p99=lambda t: 20000.0 * 0.7 ** ((t - 1000.0) / 60.0))
    r, said = rollout(tmp_path, cluster, clock)
    r.run()
    assert sum("still warming, one more window" in line for line in said) == 3, said
    assert any("still falling after 3 more windows" in line for line in said), said


def _drift(canary_after, others_after, before=200.0):
    """Three windows before at `before` us on every node, then one where the canary reads `canary_after` and the
    other two `others_after`."""
    snaps = []
    for i, (c, o) in enumerate([(before, before)] * 4 + [(canary_after, others_after)]):
        snaps.append(Snapshot(at=60.0 * i, nodes={
            n: NodeCounters(requests=PerKind(read=1000.0 * i, write=1000.0 * i), uptime_seconds=100.0 + 60.0 * i,
                            p99=PerKind(read=c if n == "n1" else o, write=100.0, scan=None)) for n in NODES}))
    windows = [window_between(a, b) for a, b in zip(snaps, snaps[1:])]
    return judge_on_nodes(windows[:-1], windows[-1], {"n1"})[0]


def test_a_slowdown_every_node_feels_is_not_the_canarys_and_one_it_alone_feels_is():
    """Rule 9: the canary's p99 baseline moves with the unchanged replicas' p99 over the same span."""
    drift = _drift(500.0, 500.0)          # every node 2.5x: the cluster, not the change
    assert drift.keep and "the p99 elsewhere moved read +150%" in drift.reason, drift.reason
    alone = _drift(500.0, 200.0)          # the canary alone 2.5x
    assert alone.rollback and "p99_read" in alone.worse, alone.reason
    better_elsewhere = _drift(200.0, 100.0)   # the others got faster and the canary did not: worse against them
    assert better_elsewhere.rollback, better_elsewhere.reason
    # the canary's ratio and the others' are each read from bucket bounds (179, 215, 258, 310, 372 us): two
    # buckets against the others are within the tolerance, three are not
    assert _drift(310.0, 215.0, before=215.0).keep and _drift(372.0, 215.0, before=215.0).rollback
    assert _drift(310.0, 215.0, before=215.0).check("p99_read").tolerance == pytest.approx(1.212 ** 2 - 1.0, abs=1e-3)
