"""The loop of `nosqltune online` (online/controller.py) driven by scripted node answers and a scripted applier,
with a real fitted model (the recorded wide24 surrogate's throughput model): one recommendation per mix, live
changes applied and read back, the guard's rollback, restart decisions recorded and not performed (or rolled out
through a scripted restarter), dry runs, a
silent node, the stored study, models refused; and the command line's help and one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.errors import UsageError
from nosqltune.online.advisor import Advisor
from nosqltune.online.controller import NOT_PERFORMED
from nosqltune.online.observe import JmxNode, LiveOutcome, ReadBack, snapshot_of
from nosqltune.online.record import SETTINGS_KEY, WINDOW_TAG
from nosqltune.online.run import run_online
from nosqltune.online.settings import OnlineSettings, OnlineSummary
from nosqltune.online.window import PerKind
from nosqltune.store import open_store

WINDOW = 60.0
NODES = ("n1", "n2")


# ------------------------------------------------------------------------------------------------ the model
@pytest.fixture(scope="module")
def model_dir(wide24_model) -> Path:
    return wide24_model


# ------------------------------------------------------------------------------------------------ scripts
def answers(readings: list[dict]) -> list[dict]:
    """Cumulative `requests` answers (loadgen's shape, as internals.client_requests returns them) of each node at
    each reading, from per-window traffic: [{"read": share, "ops": per node, "scan": share, "p99": (r, w)}], with
    a node's own "ops" or "p99" in {"node": {"n1": {...}}}; a reading may name a node, or several, that do not answer ({"silent": "n2"}, {"silent": ("n1", "n2")})."""
    totals = {n: {"Read": 0, "Write": 0, "RangeSlice": 0} for n in NODES}
    out = [{n: _answer(totals[n], (2000.0, 800.0)) for n in NODES}]
    for i, r in enumerate(readings, 1):
        scan = r.get("scan", 0.0)
        shares = {"Read": r["read"], "Write": 1.0 - r["read"] - scan, "RangeSlice": scan}
        reading = {}
        for n in NODES:
            own = {**r, **r.get("node", {}).get(n, {})}   # a node's own traffic, where the reading sets one
            for scope, share in shares.items():
                totals[n][scope] += round(own.get("ops", 30_000) * share)
            reading[n] = _answer(totals[n], own.get("p99", (2000.0, 800.0)), up_s=86_400 + i * WINDOW)
        for node in ((r["silent"],) if isinstance(r.get("silent"), str) else r.get("silent", ())):
            reading[node] = TimeoutError("JMX did not answer within 15 s")
        out.append(reading)
    return out


def _answer(totals: dict, p99: tuple[float, float], up_s: float = 86_400) -> dict:
    """A node up a day at the first reading, its uptime growing with every window read after."""
    def scope(name, p):
        count = totals[name]
        return {"count": count, "p50": None if not count else p / 4, "p99": None if not count else p,
                "unit": "microseconds", "failures": 0, "timeouts": 0, "unavailables": 0}
    return {"uptime_ms": int(up_s * 1000), "scopes": {"Read": scope("Read", p99[0]), "Write": scope("Write", p99[1]),
                                                "RangeSlice": scope("RangeSlice", 3000.0)}}


class ScriptedReader:
    """The node side as observe.snapshot_of makes it, from scripted answers, one per window. With the run's clock,
    a reading is the answer of the window boundary nearest its time (a reading taken again after a change, with
    no traffic scripted between); without one, the next answer at each reading."""

    def __init__(self, readings: list[dict], clock=None) -> None:
        self.answers = answers(readings)
        self.reads = 0
        self.clock = clock

    def read(self, say):
        at = self.clock() if self.clock else self.reads * WINDOW
        index = int(at / WINDOW + 1e-6) if self.clock else self.reads
        if index >= len(self.answers):
            raise KeyboardInterrupt   # the script is over: as Ctrl-C
        self.reads += 1
        return snapshot_of(at, self.answers[index], say)


class ScriptedApplier:
    """Records each call; every node reads back what it was given, or `differ[knob]`; before the first change of a
    knob it reports `ran[knob]` (a node whose value the run did not know), then what it was last given."""

    def __init__(self, differ: dict | None = None, ran: dict | None = None) -> None:
        self.calls: list[list] = []
        self.targets: list[tuple] = []     # the nodes each call went to
        self.differ = differ or {}
        self.ran = dict(ran or {})

    def apply(self, changes, say, nodes=None):
        self.calls.append(list(changes))
        self.targets.append(tuple(NODES) if nodes is None else tuple(nodes))
        results, not_jmx = [], []
        for c in changes:
            if c.applies in ("table", "keyspace"):
                not_jmx.append(c)
                continue
            before = self.ran.get(c.knob)
            back = self.differ.get(c.knob, c.after)
            for n in self.targets[-1]:
                results.append(ReadBack(c.knob, n, c.after, float(back) if not isinstance(back, str) else None,
                                        before=before))
            self.ran[c.knob] = back
        return LiveOutcome(tuple(results), tuple(not_jmx))


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class ScriptedRestarter:
    """A rolling restart as the nodes would answer it: each node comes back in `seconds`, except `fails`."""

    def __init__(self, seconds: float = 20.0, fails: str | None = None) -> None:
        self.seconds, self.fails, self.calls = seconds, fails, []

    def roll(self, changes, running, say):
        from nosqltune.online.controller import NodeRestart

        self.calls.append(list(changes))
        self.running = dict(running)
        turns = []
        for node in NODES:
            if node == self.fails:
                turns.append(NodeRestart(node, False, 90.0, "did not serve within 90 s; started again as it was"))
                break
            turns.append(NodeRestart(node, True, self.seconds))
        return tuple(turns)


def run(model_dir, tmp_path, readings, *, applier=None, lines=None, restarter=None, **options):
    nodes = tuple(JmxNode(n, 7199, host=f"10.0.0.{i + 1}") for i, n in enumerate(NODES))
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              window_seconds=WINDOW, duration_seconds=options.pop("duration", None), **options)
    clock = Clock()
    applier = applier or ScriptedApplier()
    out = lines if lines is not None else []
    summary = run_online(settings, reader=ScriptedReader(readings, clock), applier=applier, clock=clock,
                         sleep=clock.sleep,
                         say=out.append, progress=out.append, restarter=restarter)
    return summary, applier, out


def stored(tmp_path):
    store = open_store(str(tmp_path / "online.db"))
    try:
        (study,) = list(store.studies())
        rows = store.trials(study["id"])
    finally:
        store.close()
    return study, rows, [r["meta"][SETTINGS_KEY] for r in rows]


SHIFT = [{"read": 0.9}] * 10 + [{"read": 0.5}] * 6


# ------------------------------------------------------------------------------------------------ the loop
def test_a_shift_asks_the_model_once_and_every_window_and_decision_is_stored(model_dir, tmp_path):
    summary, applier, lines = run(model_dir, tmp_path, SHIFT, duration=len(SHIFT) * WINDOW)
    assert summary.windows == 16 and summary.stopped == "duration"
    # asked at the start (the first window sets the reference) and once on the shift, not once per window
    assert summary.recommendations == 2 and summary.shifts == 1
    study, rows, records = stored(tmp_path)
    assert [r["window"] for r in records] == list(range(1, 17))
    asked = [r["window"] for r in records if "recommendation" in r]
    assert asked == [1, 13]   # windows 11-13 beyond the 90% reference: the third declares the shift
    assert [r["shift"]["state"] for r in records][10:13] == ["beyond", "beyond", "shift"]
    first, second = (records[i - 1] for i in asked)
    assert first["features"]["read_ratio"] == pytest.approx(0.9)
    assert second["features"]["read_ratio"] == pytest.approx(0.5, abs=0.01)
    assert first["recommendation"]["predicted"] >= first["recommendation"]["predicted_running"] > 0
    # the design knob re-tuning cannot change stays as it runs
    assert "replication_factor" in first["recommendation"]["pinned"]
    assert all(c["knob"] != "replication_factor" for c in first["plan"]["changes"])
    # the live changes were applied, read back, and the running configuration took them
    live = [c for c in first["plan"]["changes"] if c["route"] == "live"]
    assert live and applier.calls and [c.knob for c in applier.calls[0]] == [c["knob"] for c in live]
    assert first["live"]["applied"] and first["live"]["outcome"]["ok"]
    assert records[1]["guard"]["verdict"]["verdict"] == "keep" and "rollback" not in records[1]["guard"]
    jmx_live = [c for c in live if c["applies"] not in ("table", "keyspace")]
    later = rows[2]["config"]
    assert all(later[c["knob"]] == c["after"] for c in jmx_live)
    assert rows[0]["config"] == Advisor.load(model_dir).space.default()   # window 1 ran the defaults
    # each row is a window with its figures, tagged apart from tuning trials
    assert {r["tag"] for r in rows} == {WINDOW_TAG} and all(r["state"] == "COMPLETE" for r in rows)
    assert rows[0]["metrics"]["summary"]["throughput_ops_s"] == pytest.approx(60_000 / WINDOW)
    assert rows[0]["metrics"]["summary"]["read_p99_ms"] == pytest.approx(2.0)
    assert rows[12]["workload"]["observed_mix"]["read"] == pytest.approx(0.5)
    online = study["settings"][SETTINGS_KEY]
    assert online["hosts"] == list(NODES) and online["window_seconds"] == WINDOW
    assert online["horizon_seconds"] == 1800.0 and online["model"] == str(model_dir)
    assert online["summary"]["recommendations"] == 2 and "tune" not in study["settings"]
    # one progress line per window
    assert sum(line.startswith("window ") for line in lines) == 16
    # every window carries the machine record: the environment watched from, and a speed probe taken beside the
    # cluster (under load), one probe shared by the windows of the same 5 wall minutes
    assert {r["environment_id"] for r in rows} == {rows[0]["environment_id"]} and rows[0]["environment_id"]
    probes = [r["internals"]["machine_probe"] for r in rows]
    assert all(p["cpu_mb_s"] > 0 and p["under_load"] is True and p["age_s"] >= 0 for p in probes)
    assert len({p["cpu_mb_s"] for p in probes}) == 1


def test_the_dashboard_and_the_model_fitting_do_not_take_an_online_study_for_a_tuning_study(model_dir, tmp_path):
    from nosqltune.dashboard.data import tuning_studies
    from nosqltune.surrogate.features import pick_study

    run(model_dir, tmp_path, SHIFT[:3], duration=3 * WINDOW)
    store = open_store(str(tmp_path / "online.db"))
    try:
        assert tuning_studies(store) == []
        with pytest.raises(UsageError, match="no collection or tuning study"):
            pick_study(store, None)
    finally:
        store.close()


def test_the_guard_rolls_a_live_change_back_when_the_next_window_is_worse(model_dir, tmp_path):
    readings = [{"read": 0.9}, {"read": 0.9, "ops": 18_000, "p99": (5000.0, 2000.0)}, {"read": 0.9}]
    summary, applier, lines = run(model_dir, tmp_path, readings, duration=3 * WINDOW)
    assert summary.rollbacks == 1 and summary.live_kept == 0
    applied, undone = applier.calls
    assert [(c.knob, c.after) for c in undone] == [(c.knob, c.before) for c in applied]   # the previous values
    assert all(c.reason == "rollback" for c in undone)
    _, rows, records = stored(tmp_path)
    guard = records[1]["guard"]
    assert guard["verdict"]["verdict"] == "rollback" and guard["rollback"]["applied"]["ok"]
    assert "throughput" in guard["rollback"]["reason"]
    assert rows[2]["config"] == rows[0]["config"]   # the window after the rollback ran the configuration before
    assert any(line.startswith("rollback of ") for line in lines)


def test_a_canary_takes_the_change_first_and_the_other_nodes_once_it_is_kept(model_dir, tmp_path):
    """With a canary, a live change goes to one node, is judged on that node's requests, then goes to the others
    with the cluster's table options, and is judged again on theirs; the study records both stages."""
    summary, applier, lines = run(model_dir, tmp_path, [{"read": 0.9}] * 4, duration=4 * WINDOW, canary=True)
    assert applier.targets == [("n1",), ("n2",)] and summary.rollbacks == 0
    first, second = applier.calls
    assert first and not any(c.applies in ("table", "keyspace") for c in first)   # the cluster's options wait
    assert {c.knob for c in first} <= {c.knob for c in second}
    _, _, records = stored(tmp_path)
    assert records[0]["live"]["canary"] == "n1"
    canary, others = records[1]["guard"], records[2]["guard"]
    assert canary["stage"] == "canary" and canary["verdict"]["verdict"] == "keep" and canary["spread"]["nodes"] == ["n2"]
    assert canary["demand_change"] == pytest.approx(0.0, abs=1e-6)   # n2's requests, unchanged meanwhile
    assert others["stage"] == "others" and others["nodes"] == ["n2"] and others["verdict"]["verdict"] == "keep"
    assert summary.live_kept == len(second)
    assert any("on the canary n1 first" in line for line in lines)


def test_a_canary_that_did_not_answer_is_judged_on_the_next_window(model_dir, tmp_path):
    readings = [{"read": 0.9}, {"read": 0.9, "silent": "n1"}, {"read": 0.9}, {"read": 0.9}, {"read": 0.9}]
    summary, applier, _ = run(model_dir, tmp_path, readings, duration=5 * WINDOW, canary=True)
    _, _, records = stored(tmp_path)
    guards = [r["guard"] for r in records if "guard" in r]
    assert guards[0]["verdict"]["verdict"] == "wait" and guards[0]["stage"] == "canary"   # n1 silent: not judged
    judged = next(g for g in guards if g["verdict"]["verdict"] != "wait")
    assert judged["stage"] == "canary" and judged["verdict"]["verdict"] == "keep" and "spread" in judged
    assert applier.targets == [("n1",), ("n2",)] and summary.rollbacks == 0


def test_a_worse_canary_is_put_back_and_the_other_nodes_are_never_touched(model_dir, tmp_path):
    slow = {"node": {"n1": {"p99": (6000.0, 2400.0)}}}
    readings = [{"read": 0.9}, {"read": 0.9, **slow}, {"read": 0.9}]
    summary, applier, _ = run(model_dir, tmp_path, readings, duration=3 * WINDOW, canary=True,
                              replication_factor=2)
    assert summary.rollbacks == 1 and summary.live_kept == 0
    assert applier.targets == [("n1",), ("n1",)]   # the change, then the rollback, on the canary alone
    _, _, records = stored(tmp_path)
    guard = records[1]["guard"]
    assert guard["stage"] == "canary" and "p99_read" in guard["rollback"]["reason"]


def test_a_drop_in_demand_is_told_from_a_regression_by_the_nodes_left_unchanged(model_dir, tmp_path):
    """Every node serves 30% less after the change, at the same latencies: the clients sent less. Judged on the
    whole cluster the drop reads as a regression; with a canary at RF 1 the other node's requests show the demand
    fell as much, and the change is kept."""
    readings = [{"read": 0.9}] + [{"read": 0.9, "ops": 21_000}] * 3
    (tmp_path / "all").mkdir()
    whole, _, _ = run(model_dir, tmp_path / "all", readings, duration=4 * WINDOW)
    assert whole.rollbacks == 1
    summary, applier, _ = run(model_dir, tmp_path, readings, duration=4 * WINDOW, canary=True)
    assert summary.rollbacks == 0 and applier.targets == [("n1",), ("n2",)]
    _, _, records = stored(tmp_path)
    guard = records[1]["guard"]
    assert guard["demand_change"] == pytest.approx(-0.3, abs=0.01) and guard["verdict"]["verdict"] == "keep"
    assert "demand moved -30" in guard["verdict"]["reason"]


def test_a_rollback_puts_back_what_the_nodes_ran_before_not_what_the_run_assumed(model_dir, tmp_path):
    """A cluster the run did not start (or one changed by hand since): each node reports a knob's value just
    before it is set, and the guard's rollback restores that value, said once, rather than the one assumed."""
    readings = [{"read": 0.9}, {"read": 0.9, "ops": 18_000, "p99": (5000.0, 2000.0)}, {"read": 0.9}]
    probe = ScriptedApplier()
    (tmp_path / "probe").mkdir()
    run(model_dir, tmp_path / "probe", readings, duration=3 * WINDOW, applier=probe)
    # the first node setting the model changes with a number, and a value the run does not assume it has
    change = next(c for c in probe.calls[0] if c.applies not in ("table", "keyspace")
                  and isinstance(c.before, (int, float)) and not isinstance(c.before, bool))
    knob, by_hand = change.knob, change.before + 3
    summary, applier, lines = run(model_dir, tmp_path, readings, duration=3 * WINDOW,
                                  applier=ScriptedApplier(ran={knob: by_hand}))
    assert summary.rollbacks == 1
    applied, undone = applier.calls
    back = {c.knob: c.after for c in undone}
    assert back[knob] == by_hand and back == {**{c.knob: c.before for c in applied}, knob: by_hand}
    assert sum(f"{knob}: the nodes ran {by_hand} before the change" in line for line in lines) == 1


def test_the_window_after_a_live_change_starts_once_the_change_is_made(model_dir, tmp_path):
    """The JMX calls of a change take seconds a node: the traffic before they end is not the change's, so the
    window the guard judges starts when the nodes are read again after them."""
    class Slow(ScriptedApplier):
        def __init__(self, clock, seconds):
            super().__init__()
            self.clock, self.seconds = clock, seconds

        def apply(self, changes, say, nodes=None):
            self.clock.t += self.seconds   # the calls to both nodes
            return super().apply(changes, say, nodes)

    def spans(seconds, folder):
        folder.mkdir()
        nodes = tuple(JmxNode(n, 7199, host=f"10.0.0.{i + 1}") for i, n in enumerate(NODES))
        settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(folder / "online.db"),
                                  window_seconds=WINDOW, duration_seconds=4 * WINDOW)
        clock = Clock()
        applier, reader = Slow(clock, seconds), ScriptedReader([{"read": 0.9}] * 4, clock)
        run_online(settings, reader=reader, applier=applier, clock=clock, sleep=clock.sleep)
        (applied,) = applier.calls   # at the end of window 1, kept by the guard on the window after
        assert reader.reads == 1 + len(stored(folder)[1]) + 1   # the first reading, one a window, one after it
        return [(r["timings"]["window_start"], r["timings"]["window_end"]) for r in stored(folder)[1]]

    assert spans(20.0, tmp_path / "a") == [(0.0, WINDOW), (WINDOW + 20.0, 2 * WINDOW), (2 * WINDOW, 3 * WINDOW),
                                           (3 * WINDOW, 4 * WINDOW)]
    # calls that take more than half a window: the window after them ends on the grid one window later
    assert spans(40.0, tmp_path / "b") == [(0.0, WINDOW), (WINDOW + 40.0, 3 * WINDOW), (3 * WINDOW, 4 * WINDOW)]


def test_what_could_not_be_applied_is_said_for_what_it_is(model_dir, tmp_path):
    """A table option without a CQL address, and a node setting the nodes cannot change over JMX (JmxApplier hands
    both back): each named with its own reason."""
    class Unreachable(ScriptedApplier):
        def apply(self, changes, say, nodes=None):
            outcome = super().apply(changes, say, nodes)
            kept = [r for r in outcome.results if r.knob != "concurrent_writes"]
            cannot = tuple(c for c in changes if c.knob == "concurrent_writes")
            return LiveOutcome(tuple(kept), outcome.not_jmx + cannot)

    run(model_dir, tmp_path, [{"read": 0.9}] * 2, duration=2 * WINDOW, applier=Unreachable())
    _, _, records = stored(tmp_path)
    note = records[0]["live"]["note"]
    assert "concurrent_writes not applied: a node setting no JMX operation changes on a running node" in note
    assert not any("concurrent_writes" in part for part in note.split("; ") if "no CQL address" in part)
    assert "concurrent_writes" in {c["knob"] for c in records[0]["live"]["not_applied"]}


def test_the_guard_waits_for_a_full_window_to_judge_a_change(model_dir, tmp_path):
    readings = [{"read": 0.9}, {"read": 0.9, "silent": "n2"}, {"read": 0.9}, {"read": 0.9}]
    summary, _, _ = run(model_dir, tmp_path, readings, duration=4 * WINDOW)
    _, _, records = stored(tmp_path)
    # window 2 misses n2, window 3 has no reading of n2 to subtract: both partial, judged on window 4
    assert [r["guard"]["verdict"]["verdict"] for r in records[1:4]] == ["wait", "wait", "keep"]
    assert summary.rollbacks == 0 and summary.live_kept == summary.live_applied > 0


def test_windows_no_node_answered_for_are_waited_out_not_judged_as_idle(model_dir, tmp_path):
    # no node answers at the 2nd and 3rd readings: window 3 has no node at either end, which was taken for a
    # window without traffic (throughput 0: rolled back) before it was counted as partial
    readings = [{"read": 0.9}, {"read": 0.9, "silent": NODES}, {"read": 0.9, "silent": NODES}, {"read": 0.9},
                {"read": 0.9}]
    summary, _, lines = run(model_dir, tmp_path, readings, duration=5 * WINDOW, guard_max_waits=4)
    _, rows, records = stored(tmp_path)
    assert rows[2]["metrics"]["window"]["missing"] == list(NODES) and rows[2]["metrics"]["window"]["partial"]
    assert [r["guard"]["verdict"]["verdict"] for r in records[1:5]] == ["wait", "wait", "wait", "keep"]
    assert summary.rollbacks == 0 and summary.live_kept == summary.live_applied > 0
    assert any(line.startswith("window 3: 0 ops/s, no node answered; partial (n1, n2)") for line in lines)


def test_a_value_read_back_other_than_asked_is_recorded_and_the_running_configuration_takes_it(model_dir, tmp_path):
    summary, applier, lines = run(model_dir, tmp_path, [{"read": 0.9}] * 3, duration=3 * WINDOW,
                                  applier=ScriptedApplier(differ={"concurrent_reads": 17}))
    _, rows, records = stored(tmp_path)
    outcome = records[0]["live"]["outcome"]
    differing = [r for r in outcome["results"] if r["differs"]]
    assert outcome["ok"] is False and {r["knob"] for r in differing} == {"concurrent_reads"}
    assert rows[1]["config"]["concurrent_reads"] == 17


def test_a_restart_decision_is_recorded_with_its_numbers_and_not_performed(model_dir, tmp_path):
    # restarts measured at 5 s a node, 2 nodes with RF 2 at consistency ONE: cheap enough to pay
    summary, _, lines = run(model_dir, tmp_path, SHIFT, duration=len(SHIFT) * WINDOW, replication_factor=2,
                            restart_seconds=(5.0,))
    _, _, records = stored(tmp_path)
    decisions = [r["restart"] for r in records if r.get("restart") and r["restart"]["verdict"] != "deferred"]
    assert len(decisions) == 2 and len(summary.restart_decisions) == 2
    for d in decisions:
        n = d["decision"]
        assert d["performed"] is False and d["changes"]
        assert all(c["route"] == "restart" for c in d["changes"])
        assert {c["route"] for c in d["not_weighed"]} <= {"rewrite", "restart+rewrite"}
        assert n["nodes"] == 2 and n["replication_factor"] == 2 and n["restart_seconds_per_node"] == 5.0
        assert n["cost_operations"] == pytest.approx(2 * 5.0 * 0.5 * 1000.0)   # 2 nodes x 5 s x half of 1000 ops/s
        assert n["predicted_now"] > 0 and n["predicted_new"] > 0 and n["horizon_seconds"] == 1800.0
        assert (d["verdict"] == "act") == (n["expected_gain_operations"] > 1.5 * n["cost_operations"])
        assert d["note"] == (NOT_PERFORMED if d["verdict"] == "act" else "held: the cost-benefit does not pay")
    assert any(d["verdict"] == "act" for d in decisions)
    assert any(NOT_PERFORMED in line for line in lines)


def test_a_restart_that_pays_is_rolled_out_and_its_measured_time_prices_the_next(model_dir, tmp_path):
    """With nodes the run may restart: the act verdict rolls the restart changes out node by node, the running
    configuration takes them, and the next decision's cost uses the restarts measured (20 s a node), not the
    stated default."""
    restarter = ScriptedRestarter(seconds=20.0)
    summary, _, lines = run(model_dir, tmp_path, SHIFT, duration=len(SHIFT) * WINDOW, replication_factor=2,
                            restart_seconds=(5.0,), restarter=restarter)
    _, rows, records = stored(tmp_path)
    decisions = [r["restart"] for r in records if r.get("restart") and r["restart"]["verdict"] != "deferred"]
    performed = [d for d in decisions if d.get("performed")]
    assert performed and summary.restarts == len(restarter.calls) == len(performed)
    first = performed[0]
    assert [t["node"] for t in first["roll"]] == list(NODES) and all(t["ok"] for t in first["roll"])
    assert {c["knob"] for c in first["rolled"]} == {c["knob"] for c in first["changes"] if c["route"] == "restart"}
    # the restarter is given the configuration running then, the live changes kept so far included: a restarted
    # node must come back with them (the last roll's view)
    at_last = next(i for i in reversed(range(len(records))) if (records[i].get("restart") or {}).get("performed"))
    live = records[at_last].get("live") or {}
    applied = {c["knob"]: c["after"] for c in live.get("changes", [])} if live.get("applied") else {}
    assert restarter.running == {**rows[at_last]["config"], **applied}
    at = next(i for i, r in enumerate(records) if (r.get("restart") or {}).get("performed"))
    later = rows[at + 1]["config"] if at + 1 < len(rows) else summary.running
    assert all(later.get(c["knob"]) == c["after"] for c in first["rolled"])   # what runs now
    assert any(line.startswith("rolling restart with") and "done, 40 s over 2 node(s)" in line for line in lines)
    assert len(decisions) == 2   # the next decision priced with the restarts under load alone: 20 s twice, not the
    n = decisions[1]["decision"]  # stated 5 s (an idle start underprices a restart under load 4-5 times)
    assert n["restart_seconds_source"].startswith("measured (2)") and n["restart_seconds_per_node"] == 20.0
    assert decisions[0]["decision"]["restart_seconds_per_node"] == 5.0   # before any roll: the price given


class SlowRestarter(ScriptedRestarter):
    """A rolling restart under load on a slow day: each node takes `seconds` of the run's clock to serve again."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        super().__init__(seconds=seconds)
        self.clock = clock

    def roll(self, changes, running, say):
        turns = super().roll(changes, running, say)
        self.clock.sleep(self.seconds * len(turns))
        return turns


def test_a_shift_that_arrives_with_a_restart_is_detected_after_the_roll(model_dir, tmp_path):
    """The slow day's run (make test-all, online on a local cluster): 95% reads for 2 windows, a rolling restart
    decided for that mix and rolled for minutes, then 10% reads. The mix is the traffic's: the restart must not
    make the run forget which mix its configuration was chosen for, so the write mix is a shift."""
    clock = Clock()
    readings = [{"read": 0.95}] * 2 + [{"read": 0.10}] * 24
    nodes = tuple(JmxNode(n, 7199, host=f"10.0.0.{i + 1}") for i, n in enumerate(NODES))
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              window_seconds=WINDOW, duration_seconds=len(readings) * WINDOW, replication_factor=2,
                              restart_seconds=(5.0,), horizon_seconds=1e6)
    restarter = SlowRestarter(clock, seconds=100.0)   # 2 nodes: 200 s, longer than 3 windows
    lines: list[str] = []
    summary = run_online(settings, reader=ScriptedReader(readings, clock), applier=ScriptedApplier(), clock=clock,
                         sleep=clock.sleep, say=lines.append, progress=lines.append, restarter=restarter)
    _, rows, records = stored(tmp_path)
    rolled = [i for i, r in enumerate(records) if (r.get("restart") or {}).get("performed")]
    assert rolled and rolled[0] <= 2, [r.get("restart") for r in records]   # rolled for the reads mix
    assert records[rolled[0]]["shift"]["mix"]["read"] == pytest.approx(0.95) or rolled[0] < 2
    states = [r["shift"]["state"] for r in records]
    assert "shift" in states, states
    shifted = records[states.index("shift")]
    assert shifted["shift"]["new_reference"]["read"] == pytest.approx(0.10, abs=0.01)
    assert summary.shifts >= 1 and summary.recommendations >= 2
    assert states.index("shift") > rolled[0]          # declared on windows after the roll
    assert "dwell" not in states[:states.index("shift")]   # the roll started no dwell of its own


def test_a_rolling_restart_that_stops_at_a_node_leaves_the_configuration_as_it_was(model_dir, tmp_path):
    restarter = ScriptedRestarter(fails="n2")
    summary, _, lines = run(model_dir, tmp_path, SHIFT, duration=len(SHIFT) * WINDOW, replication_factor=2,
                            restart_seconds=(5.0,), restarter=restarter)
    _, rows, records = stored(tmp_path)
    rolled = [r["restart"] for r in records if (r.get("restart") or {}).get("roll")]
    assert rolled and all(d["performed"] is False for d in rolled)
    knobs = {c["knob"] for d in rolled for c in d["rolled"]}
    assert all(r["config"].get(k) == rows[0]["config"].get(k) for r in rows for k in knobs)   # never changed
    assert not knobs & set(summary.running)   # still at the model's defaults at the end
    assert any("stopped at n2 (did not serve within 90 s" in line for line in lines)


def test_a_restart_that_does_not_pay_is_held(model_dir, tmp_path):
    # one node, RF 1: the data is unavailable for the default 120 s restart, and the gain could only come after
    # the 100 s horizon (no mix has ended yet, so the gain is not discounted by a dwell estimate)
    nodes = (JmxNode("n1", 7199),)
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              duration_seconds=3 * WINDOW, horizon_seconds=100.0)
    clock = Clock()
    reader = ScriptedReader([{"read": 0.9}] * 3, clock)    # the decision waits for the guard on the live change
    reader.answers = [{"n1": a["n1"]} for a in reader.answers]
    summary = run_online(settings, reader=reader, applier=ScriptedApplier(), clock=clock, sleep=clock.sleep)
    (decision,) = summary.restart_decisions
    assert decision["verdict"] == "hold" and decision["cost_operations"] == pytest.approx(120 * 500.0)
    assert decision["expected_gain_operations"] == 0


def test_a_dry_run_applies_nothing_and_records_what_it_would_do(model_dir, tmp_path):
    restarter = ScriptedRestarter()   # restarts that would pay (as in the test above), and nodes it may restart
    summary, applier, lines = run(model_dir, tmp_path, SHIFT, duration=len(SHIFT) * WINDOW, dry_run=True,
                                  replication_factor=2, restart_seconds=(5.0,), restarter=restarter)
    assert applier.calls == [] and summary.live_applied == 0 and summary.recommendations == 2
    assert restarter.calls == [] and summary.restarts == 0
    assert any(d["verdict"] == "act" for d in summary.restart_decisions)
    _, rows, records = stored(tmp_path)
    assert all(r["config"] == rows[0]["config"] for r in rows)
    assert records[0]["live"]["note"] == "dry run: nothing applied" and records[0]["plan"]["changes"]
    assert any(line.startswith("dry run: would apply") for line in lines)
    acted = [r["restart"] for r in records if (r.get("restart") or {}).get("verdict") == "act"]
    assert acted and all(r["note"] == "dry run: restart not performed" and not r["performed"] for r in acted)


def test_a_silent_node_is_said_in_one_line_and_the_loop_goes_on(model_dir, tmp_path):
    readings = [{"read": 0.9}] * 4 + [{"read": 0.9, "silent": "n2"}] + [{"read": 0.9}] * 3
    summary, _, lines = run(model_dir, tmp_path, readings, duration=8 * WINDOW)
    assert summary.windows == 8
    said = [line for line in lines if "n2" in line and "not read" in line]
    assert len(said) == 1 and "\n" not in said[0] and "JMX did not answer" in said[0]
    _, rows, records = stored(tmp_path)
    assert said[0] in records[4]["said"]
    assert rows[4]["metrics"]["window"]["missing"] == ["n2"]
    assert rows[5]["metrics"]["window"]["unmatched"] == ["n2"]   # no reading to subtract from: left out
    assert rows[6]["metrics"]["window"]["partial"] is False


def test_ctrl_c_stops_cleanly_and_rolls_back_a_change_the_guard_has_not_judged(model_dir, tmp_path):
    # the script ends (Ctrl-C) right after the first window's live change
    summary, applier, lines = run(model_dir, tmp_path, [{"read": 0.9}])
    assert summary.stopped == "interrupted" and summary.windows == 1 and summary.rollbacks == 1
    applied, undone = applier.calls
    assert [(c.knob, c.after) for c in undone] == [(c.knob, c.before) for c in applied]
    study, _, _ = stored(tmp_path)
    assert study["settings"][SETTINGS_KEY]["summary"]["stopped"] == "interrupted"
    assert study["settings"][SETTINGS_KEY]["summary"]["running"] == {}


def test_ctrl_c_while_a_live_change_is_applied_puts_every_knob_back(model_dir, tmp_path):
    """The JMX calls run in our process group, so Ctrl-C can land in the middle of an apply: some nodes changed,
    the others not. Every knob of the change is put back when the run stops, and the run's record kept."""
    class Interrupted(ScriptedApplier):
        def apply(self, changes, say, nodes=None):
            outcome = super().apply(changes, say, nodes)
            if len(self.calls) == 1:
                raise KeyboardInterrupt
            return outcome

    applier = Interrupted()
    summary, _, _ = run(model_dir, tmp_path, SHIFT, duration=len(SHIFT) * WINDOW, applier=applier)
    assert summary.stopped == "interrupted" and summary.windows == 0 and summary.rollbacks == 1
    applied, undone = applier.calls
    assert [(c.knob, c.after) for c in undone] == [(c.knob, c.before) for c in applied]
    assert summary.final_rollback is not None and summary.final_rollback["said"]
    study, _, _ = stored(tmp_path)
    assert study["settings"][SETTINGS_KEY]["summary"]["stopped"] == "interrupted"


def test_an_error_in_the_loop_puts_a_pending_change_back_and_keeps_the_record(model_dir, tmp_path):
    class Broken(ScriptedReader):
        def read(self, say):
            if self.reads == 2:    # the window after the first live change: the reading breaks
                raise RuntimeError("JMX answered nonsense")
            return super().read(say)

    nodes = tuple(JmxNode(n, 7199, host=f"10.0.0.{i + 1}") for i, n in enumerate(NODES))
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              window_seconds=WINDOW, duration_seconds=len(SHIFT) * WINDOW)
    clock, applier = Clock(), ScriptedApplier()
    with pytest.raises(RuntimeError, match="nonsense"):
        run_online(settings, reader=Broken(SHIFT), applier=applier, clock=clock, sleep=clock.sleep)
    applied, undone = applier.calls
    assert [(c.knob, c.after) for c in undone] == [(c.knob, c.before) for c in applied]
    study, _, _ = stored(tmp_path)
    assert study["settings"][SETTINGS_KEY]["summary"]["stopped"].startswith("failed: JMX answered nonsense")


def test_the_advice_keeps_the_knob_rules_with_the_heap_the_nodes_have(model_dir):
    """A model without the heap (wide24) still advises memtables within half the heap the nodes run with: where
    no memtable space the model knows fits (a 768 MiB heap against its range from 512 MiB), the knob is left as it
    runs. The first real rolling restart (2026-11-26) wrote 935 MiB of memtables on 768 MiB heaps before this."""
    advisor = Advisor.load(model_dir)
    features = advisor.features_for(PerKind(0.95, 0.05, 0.0))
    running = advisor.running_config({})
    advisor.hold({"heap_size": 4096})
    roomy = advisor.recommend(features, running)
    assert roomy.config["memtable_heap_space"] <= 2048
    advisor.hold({"heap_size": 768})
    tight = advisor.recommend(features, running)
    assert tight.config["memtable_heap_space"] == running["memtable_heap_space"]
    assert "memtable_heap_space" in tight.pinned


def test_a_mix_with_scans_is_said_and_mapped_to_the_nearest_the_model_knows(model_dir):
    advisor = Advisor.load(model_dir)
    features = advisor.features_for(PerKind(0.6, 0.1, 0.3))
    assert features.read_ratio == pytest.approx(0.6)
    assert any("no scan feature" in note for note in features.notes)
    high = advisor.features_for(PerKind(0.99, 0.01, 0.0))
    assert high.read_ratio == pytest.approx(0.9) and "outside the model's training range" in high.notes[0]
    advisor.surrogate.spec.scans = True   # a model fitted on data with scans is given the scan share it sees
    features = advisor.features_for(PerKind(0.6, 0.1, 0.3))
    assert features.scan_ratio == pytest.approx(0.3) and features.for_model()["scan_ratio"] == pytest.approx(0.3)
    assert not any("no scan feature" in note for note in features.notes)


def test_a_model_of_another_knob_set_or_datastore_is_refused(model_dir, tmp_path):
    from nosqltune.surrogate.models import load

    with pytest.raises(UsageError, match="knob set wide24, not on the cluster's rafiki5"):
        Advisor.load(model_dir, knobs="rafiki5")
    Advisor.load(model_dir, knobs="wide24")
    model, meta = load(model_dir)
    with pytest.raises(UsageError, match="fitted on redis, not on the running cluster's datastore cassandra"):
        Advisor(model, {**meta, "spec": {**meta["spec"], "system": "redis"}}, "m")
    with pytest.raises(UsageError, match="predicts read-p99"):
        Advisor(model, {**meta, "metric": "read-p99"}, "m")
    with pytest.raises(UsageError, match="cannot follow a changing mix"):
        Advisor(model, {**meta, "spec": {**meta["spec"], "domain": "TD2"}}, "m")
    with pytest.raises(UsageError, match="does not have: a model of another knob set"):
        Advisor.load(model_dir).running_config({"concurrent_counter_writes": 32})
    # through the command line: one line, exit 2, and no study made
    study = tmp_path / "online.db"
    code, err = _cli(["online", "--hosts", "127.0.0.1:7199", "--model", str(model_dir), "--study", str(study),
                      "--knobs", "rafiki5"])
    assert code == 2 and "knob set" in err and len(err.strip().splitlines()) == 1 and not study.exists()


# ------------------------------------------------------------------------------------------------ the command line
def _cli(argv, capsys=None):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return code, err.getvalue()


def test_online_help_explains(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["online", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    for words in ("--hosts", "--model", "--study", "--window", "--horizon", "--duration", "--dry-run", "--json",
                  "--confirm", "--min-dwell",
                  "hysteresis", "rolled back", "--nodes", "ALTER TABLE", "--table", "--cql",
                  "one node drained and restarted at a time", "decided and recorded"):
        assert words in " ".join(out.split()), words


@pytest.mark.parametrize("flags, message", [
    (["--hosts", "localhost"], "is not HOST:JMXPORT"),
    (["--hosts", "localhost:jmx"], "is not a number"),
    (["--hosts", "localhost:70000"], "within 1..65535"),
    (["--hosts", "a:7199,a:7199"], "given twice"),
    (["--hosts", "a:7199", "--window", "0"], "--window must be a number of seconds > 0"),
    (["--hosts", "a:7199", "--window", "-5"], "--window must be"),
    (["--hosts", "a:7199", "--horizon", "nan"], "--horizon must be"),
    (["--hosts", "a:7199", "--confirm", "0"], "--confirm must be a whole number of windows >= 1"),
    (["--hosts", "a:7199", "--min-dwell", "-1"], "--min-dwell must be a number of seconds >= 0"),
    (["--hosts", "a:7199", "--min-dwell", "inf"], "--min-dwell must be"),
    (["--hosts", "a:7199", "--duration", "0"], "--duration must be"),
    (["--hosts", "a:7199", "--rf", "0"], "--rf must be at least 1"),
    (["--hosts", "a:7199", "--model", "MISSING"], "no fitted model in"),
    (["--model", "m"], "one of the arguments --hosts"),
    (["--hosts", "a:7199", "--records", "10"], "--records is for the trace's client: give --trace too"),
    (["--hosts", "a:7199", "--table", "ycsb.user-table"], "the table must be a plain CQL name"),
    (["--hosts", "a:7199", "--cql", "a:b"], "is not HOST:PORT"),
    (["--hosts", "a:7199", "--trace", "no-such-trace"], "neither a trace that ships"),
    (["--hosts", "a:7199", "--trace", "shifting", "--cql", "a:b"], "is not HOST:PORT"),
    (["--hosts", "a:7199", "--trace", "shifting", "--duration", "60"], "shorter than the trace (540 s)"),
    (["--hosts", "a:7199", "--trace", "shifting", "--records", "0"], "records the cluster holds must be"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_starts(tmp_path, flags, message):
    study = tmp_path / "online.db"
    argv = ["online", "--model", str(tmp_path / "no-model"), "--study", str(study), *flags]
    if "--model" in flags:
        argv = ["online", "--study", str(study), *flags]
        argv = [a if a != "MISSING" else str(tmp_path / "missing") for a in argv]
    code, err = _cli(argv)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("nosqltune: error: ")
    assert not study.exists()


def test_a_trace_is_driven_while_watched_and_its_phases_are_stored_with_the_run(model_dir, tmp_path):
    """--trace: the phases run one after the other in a thread of their own (here a scripted client), the run
    lasts the trace, and what each phase did is stored in the study beside the windows."""
    from nosqltune.workloads.trace import parse_trace

    trace = parse_trace({"name": "two", "phases": [{"name": "reads", "workload": "ycsb-c", "seconds": 180},
                                                   {"name": "writes", "workload": "write90", "seconds": 180,
                                                    "rate": 900}]})
    ran = []

    def run_phase(phase, workload, folder):
        ran.append((phase.name, workload.target, workload.records, workload.max_seconds))
        return {"throughput_ops_s": 1000.0, "errors": 0, "operations": {"READ": {"p99_us": 1800}}}

    nodes = tuple(JmxNode(n, 7199, host=f"10.0.0.{i + 1}") for i, n in enumerate(NODES))
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              window_seconds=WINDOW, trace=trace, cql=("10.0.0.1", 9042),
                              trace_records=5000)
    assert settings.watch_seconds == 360
    clock = Clock()
    reader = ScriptedReader([{"read": 1.0}] * 3 + [{"read": 0.1}] * 3 + [{"read": 0.5}], clock)
    summary = run_online(settings, reader=reader, applier=ScriptedApplier(), clock=clock, sleep=clock.sleep,
                         run_phase=run_phase)
    assert summary.windows == 6 and summary.stopped == "duration"            # the trace's 360 s, not the script's
    assert ran == [("reads", None, 5000, 180), ("writes", 900, 5000, 180)]
    assert [r["phase"] for r in summary.trace] == ["reads", "writes"] and summary.trace_error is None
    study, _, _ = stored(tmp_path)
    kept = study["settings"][SETTINGS_KEY]
    assert kept["trace"]["name"] == "two" and kept["trace"]["target"] == "10.0.0.1:9042"
    assert [p["node_mix"]["write"] for p in kept["trace"]["phases"]] == pytest.approx([0.0, 0.9])
    assert [r["read_p99_ms"] for r in kept["summary"]["trace"]] == [1.8, 1.8]


def test_a_trace_whose_client_fails_is_said_and_the_loop_goes_on(model_dir, tmp_path):
    from nosqltune.workloads.trace import parse_trace

    def run_phase(phase, workload, folder):
        raise RuntimeError("YCSB run failed (exit 1): no host\nwas reachable")

    nodes = (JmxNode("n1", 7199, host="10.0.0.1"), JmxNode("n2", 7199, host="10.0.0.2"))
    trace = parse_trace({"phases": [{"workload": "ycsb-a", "seconds": 120}]})
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              window_seconds=WINDOW, trace=trace, cql=("10.0.0.1", 9042))
    clock, lines = Clock(), []
    summary = run_online(settings, reader=ScriptedReader([{"read": 0.5}] * 3, clock), applier=ScriptedApplier(),
                         clock=clock, sleep=clock.sleep, run_phase=run_phase, say=lines.append)
    assert summary.windows == 2 and summary.trace == []
    assert summary.trace_error == "YCSB run failed (exit 1): no host was reachable"
    assert "the trace's client stopped early: YCSB run failed (exit 1): no host was reachable" in lines


def test_the_report_shows_an_online_runs_timeline_and_decisions_and_renders_in_chromium(model_dir, tmp_path,
                                                                                        capsys):
    """`report` on a store holding an online run (and no tuning study): the run's timeline figure (throughput,
    p99 and mix per window, the decisions and the trace's phases marked) and its decisions as a table; the page
    opens in chromium with every figure decoded and no script error."""
    from nosqltune.report.online import load_report
    from nosqltune.workloads.trace import parse_trace
    from tests.unit.test_report import chromium, not_blank, open_report

    trace = parse_trace({"name": "two", "phases": [{"name": "reads", "workload": "read90", "seconds": 600},
                                                   {"name": "mixed", "workload": "ycsb-a", "seconds": 360}]})
    nodes = tuple(JmxNode(n, 7199, host=f"10.0.0.{i + 1}") for i, n in enumerate(NODES))
    # a long horizon: the restart pays for any gain the model predicts (its relative gain times the scripted pace
    # earns over 10^5 s more than a roll costs), so the report has one of each kind of decision
    settings = OnlineSettings(nodes=nodes, model=str(model_dir), study=str(tmp_path / "online.db"),
                              window_seconds=WINDOW, trace=trace, cql=("10.0.0.1", 9042), horizon_seconds=100_000)
    clock = Clock()
    run_online(settings, reader=ScriptedReader(SHIFT, clock), applier=ScriptedApplier(), clock=clock, sleep=clock.sleep,
               run_phase=lambda phase, workload, folder: {"throughput_ops_s": 900.0, "errors": 0})
    (run,) = load_report(str(tmp_path / "online.db"))[1]
    kinds = [kind for _, kind, _ in run.events()]
    # window 1: the live change, the restart decision deferred until it is judged; window 2: kept, then the
    # restart weighed (it pays: no mix has ended yet to discount the gain) but not performed, nothing to restart
    assert kinds[:4] == ["live", "restart-deferred", "kept", "restart-act"], kinds
    assert "shift" in kinds and kinds.index("shift") > 2
    assert [name for _, _, name in run.phases()] == ["reads", "mixed"]
    assert run.minutes()[0] == pytest.approx(0.5) and len(run.minutes()) == 16

    capsys.readouterr()
    out = tmp_path / "report"
    assert main(["report", "--study", str(tmp_path / "online.db"), "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["studies"] == [] and written["online"] == [run.name]
    figure = out / f"{run.name}-timeline.png"
    assert [Path(f) for f in written["figures"]] == [figure] and not_blank(figure)
    page = Path(written["report"]).read_text()
    for text in ("Online runs", "1 online run", "16 window(s)", "the mix shifted", "live change", "kept",
                 "restart hold (expected gain", "reads", "mixed"):
        assert text in page, text
    if chromium() is None:
        pytest.fail("chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)")
    status = open_report(Path(written["report"]), tmp_path / "shot.png")
    assert status.get("data-loaded") == "yes" and status["data-errors"] == "0" and status["data-broken"] == "0"
    assert status["data-images"] == "1"


def test_the_command_runs_the_loop_and_prints_a_line_per_window(model_dir, tmp_path, monkeypatch):
    import nosqltune.online.run as online_run

    # on the machine's clock: a reading per window, and one more after each live change (a spare is scripted)
    monkeypatch.setattr(online_run, "JmxReader", lambda nodes, access=None: ScriptedReader([{"read": 0.9}] * 5))
    given = {}
    monkeypatch.setattr(online_run, "JmxApplier", lambda nodes, **kw: given.update(kw) or ScriptedApplier())
    import io
    import contextlib

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code, err = _cli(["online", "--hosts", "127.0.0.1:7199", "--model", str(model_dir), "--study",
                          str(tmp_path / "online.db"), "--window", "0.01", "--duration", "0.03", "--json"])
    assert code == 0, err
    summary = json.loads(out.getvalue())
    # on the machine's clock, the model's advice outlasts a 0.01 s window: the window after the live change ends
    # on the grid half a window after the nodes are read again, so fewer than 3 windows may fit
    assert 1 <= summary["windows"] <= 3 and summary["recommendations"] == 1 and summary["stopped"] == "duration"
    # no --cql and no --trace: no CQL address is guessed (a wrong one could reach another cluster), so table
    # options are left unapplied, and said so (tests/unit/test_online_observe.py)
    assert given["table"] is None and given["space"] is not None
    progress = [json.loads(line)["progress"] for line in err.splitlines()]
    assert sum(p.startswith("window ") for p in progress) == summary["windows"]


def test_a_cluster_given_by_hosts_is_only_watched_unless_apply(model_dir, tmp_path, monkeypatch):
    """`online --hosts` changes nothing without --apply (a cluster nosqltune did not start); credentials come from
    files, and the study keeps their paths, never their contents."""
    import nosqltune.online.run as run_module

    seen = []

    def fake_run(settings, say=None, progress=None):
        seen.append(settings)
        return OnlineSummary(study="s", dry_run=settings.dry_run)

    monkeypatch.setattr(run_module, "run_online", fake_run)
    creds = tmp_path / "jmx"
    creds.write_text("# the operator's\nmonitor s3cret\n")
    base = ["online", "--hosts", "127.0.0.1:7199", "--model", str(model_dir), "--study", str(tmp_path / "o.db")]
    assert _cli(base)[0] == 0 and seen[-1].dry_run
    assert _cli([*base, "--apply", "--jmx-credentials", str(creds)])[0] == 0 and not seen[-1].dry_run
    record = seen[-1].record()
    assert record["jmx_access"]["credentials_file"] == str(creds) and "s3cret" not in json.dumps(record)
    code, err = _cli([*base, "--apply", "--dry-run"])
    assert code == 2 and "contradict" in err
    code, err = _cli([*base, "--cql-credentials", str(tmp_path / "none")])
    assert code == 2 and "--cql-credentials" in err and len(err.strip().splitlines()) == 1
