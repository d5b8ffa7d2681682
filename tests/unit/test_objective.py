"""Objectives and constraints on a trial's summary: the node's cost per operation among them."""

import pytest

from nosqltune.errors import UsageError
from nosqltune.objective import Objective


def _trial(throughput, cpu=None, gc=None, read_p99=None):
    return {"throughput_ops_s": throughput, "node_cpu_us_per_op": cpu, "node_gc_us_per_op": gc,
            "read_p99_ms": read_p99}


def test_cpu_per_op_is_minimized_in_microseconds():
    objective = Objective.parse("cpu-per-op")
    assert not objective.maximize and objective.unit == "us/op"
    cheap, costly = objective.evaluate([_trial(5000, cpu=150)]), objective.evaluate([_trial(7000, cpu=300)])
    assert cheap.value == 150 and costly.value == 300
    assert objective.cost(cheap, None) < objective.cost(costly, None)   # the cheaper node wins, not the faster pair


def test_a_throughput_constraint_keeps_a_cheap_but_slow_configuration_from_winning():
    objective = Objective.parse("cpu-per-op", ["throughput>=5000"])
    slow = objective.evaluate([_trial(3000, cpu=100)])
    ok = objective.evaluate([_trial(6000, cpu=200)])
    assert not slow.feasible and slow.violation == pytest.approx(0.4)
    assert ok.feasible
    assert objective.cost(slow, worst=200) > objective.cost(ok, worst=200)


def test_no_gc_pause_in_the_phase_is_a_value_not_a_failure():
    objective = Objective.parse("gc-per-op")
    assert objective.evaluate([_trial(5000, gc=0.0)]).value == 0.0
    assert objective.evaluate([_trial(5000, gc=0.0), _trial(5000, gc=4.0)]).value == 0.0
    assert objective.evaluate([_trial(5000, gc=None)]).value is None    # not measured: no value
    # a zero latency or throughput is still no result
    assert Objective.parse("p99-read").evaluate([_trial(5000, read_p99=0.0)]).value is None


def test_cost_metrics_can_be_constraints_and_unknown_names_are_refused():
    objective = Objective.parse("throughput", ["cpu-per-op<=250"])
    assert not objective.evaluate([_trial(8000, cpu=300)]).feasible
    assert objective.evaluate([_trial(8000, cpu=200)]).feasible
    with pytest.raises(UsageError, match="cpu-per-op"):
        Objective.parse("cpu-per-operation")
