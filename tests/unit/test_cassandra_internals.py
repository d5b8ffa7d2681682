"""The node's stats after a measured run: a node slow to answer over JMX then costs the trial its internals,
not its run (a disk-bound trial whose node missed JMX's 5 s connect once after a complete run was stored as a
failure)."""

from __future__ import annotations

import pytest

from nosqltune.errors import TrialError
from nosqltune.systems.cassandra import internals


def _node_answering_on(call: int, calls: list):
    def node_stats(jmx_port, **kwargs):
        calls.append(jmx_port)
        if len(calls) < call:
            raise TrialError("internals", "JMX call stats failed: no answer within 5 s")
        return {"gc_total_count": 7, "live_sstables": 3}
    return node_stats


def test_a_late_answer_still_gives_the_stats(monkeypatch):
    calls: list = []
    monkeypatch.setattr(internals, "node_stats", _node_answering_on(3, calls))
    assert internals.stats_after_run(7199, tries=3, pause=0) == {"gc_total_count": 7, "live_sstables": 3}
    assert calls == [7199, 7199, 7199]


def test_no_answer_is_recorded_not_raised(monkeypatch):
    calls: list = []
    monkeypatch.setattr(internals, "node_stats", _node_answering_on(99, calls))
    after = internals.stats_after_run(7199, tries=2, pause=0)
    assert len(calls) == 2
    assert set(after) == {"internals_error"}
    assert "2 tries" in after["internals_error"] and "no answer within 5 s" in after["internals_error"]


def test_other_errors_are_not_swallowed(monkeypatch):
    def broken(jmx_port, **kwargs):
        raise ValueError("not JSON")
    monkeypatch.setattr(internals, "node_stats", broken)
    with pytest.raises(ValueError):
        internals.stats_after_run(7199, tries=2, pause=0)


def test_a_builds_wait_for_compactions_outlasts_a_call_that_fails_for_a_moment(monkeypatch):
    """A finished 2M-record build was thrown away when one stats call failed (the JVM that asks could not start for
    a moment): the wait asks again before it gives up."""
    calls: list = []
    pending = iter([4, 0])

    def node_stats(jmx_port, keyspace="ycsb", table="usertable"):
        calls.append(jmx_port)
        if len(calls) == 2:
            raise TrialError("internals", "JMX call stats failed: Error: could not create the Java Virtual Machine")
        return {"pending_compactions": next(pending)}

    monkeypatch.setattr(internals, "node_stats", node_stats)
    assert internals.wait_compactions(7199, timeout=60, poll=0)["pending"] == 0
    assert len(calls) == 3
    calls.clear()

    def never(jmx_port, keyspace="ycsb", table="usertable"):
        calls.append(jmx_port)
        raise TrialError("internals", "JMX call stats failed: connection refused")

    monkeypatch.setattr(internals, "node_stats", never)
    with pytest.raises(TrialError, match="3 tries: JMX call stats failed: connection refused"):
        internals.wait_compactions(7199, timeout=60, poll=0)
    assert len(calls) == 3   # a node that does not answer at all still fails the build
