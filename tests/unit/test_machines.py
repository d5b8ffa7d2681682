"""The machine check: runs grouped by machine, and figures from machines more than 20% apart in speed named."""

from __future__ import annotations

import time

from nosqltune.evaluation.machines import by_day, check_machines, is_default_config, judge, speed_of

DAY = 86_400.0
T0 = time.mktime((2026, 11, 26, 12, 0, 0, 0, 0, 0))


def run(cpu_mb_s=None, cpu_us=None, *, day=0, candidate="default", env=1, state="COMPLETE", workload="ycsb-a",
        jit=None):
    harness = {"scenario": "in-memory", **({"jit": jit} if jit else {})}
    return {"state": state, "started_at": T0 + day * DAY, "environment_id": env,
            "workload": {"name": workload, "harness": harness},
            "meta": {"candidate": candidate, "round": 0},
            "internals": {"machine_probe": {"cpu_mb_s": cpu_mb_s}} if cpu_mb_s else {},
            "metrics": {"summary": {"node_cpu_us_per_op": cpu_us}}}


def test_one_day_on_one_machine_is_one_machine():
    rows = [run(2000, 250), run(2010, 300, candidate="best"), run(1990, 255)]
    check = check_machines(rows)
    assert not check.apart and len(check.groups) == 1
    (group,) = check.groups
    # the default's CPU per operation is the default's runs only: the best's 300 us is left out
    assert group.cpu_mb_s == 2000 and group.default_cpu_us_per_op == 252.5 and group.default_runs == 2
    assert check.verdict() == "one machine"


def test_a_slower_day_by_the_default_cpu_per_operation_is_named_with_its_ratio():
    rows = [run(2000, 250), run(2000, 250, candidate="best"), run(1900, 700, day=1), run(1900, 680, day=1)]
    check = check_machines(rows)
    assert check.apart and check.by == "the default's node CPU per operation"
    assert check.ratio == round(690 / 250, 3)
    assert "x2.76" in check.line() and "2026-11-26" in check.line() and "2026-11-27" in check.line()


def test_the_probe_alone_tells_machines_apart_and_20_percent_is_the_edge():
    near = check_machines([run(2000), run(1700, day=1)])     # x1.18
    assert not near.apart and near.ratio == round(2000 / 1700, 3)
    far = check_machines([run(2000), run(1600, day=1)])      # x1.25
    assert far.apart and far.by == "the CPU probe"


def test_runs_without_a_machine_record_are_unknown_not_equal():
    check = check_machines([run(2000, 250), run(day=1, candidate="best")])
    assert not check.apart and check.unknown == (by_day(run(day=1)),)
    assert "no machine record for" in check.line()


def test_failed_runs_are_left_out_and_groups_can_be_chosen():
    rows = [run(2000, 250), run(500, 900, state="FAIL"), run(2100, 260, env=2)]
    assert len(check_machines(rows).groups) == 2      # environment 2 is another machine on the same day
    one = check_machines(rows, group=lambda r: "all")
    assert len(one.groups) == 1 and one.groups[0].runs == 2 and not one.apart


def test_the_default_is_known_in_compare_rounds_tuning_studies_and_bare_runs():
    assert is_default_config({"meta": {"candidate": "default"}, "config": {"a": 1}})
    assert not is_default_config({"meta": {"candidate": "best"}, "config": {}})
    assert is_default_config({"meta": {"kind": "default"}, "config": {"heap_size": 1024}})
    assert not is_default_config({"meta": {"kind": "suggested"}, "config": {}})
    assert is_default_config({"meta": {}, "config": {}})


def test_judge_sets_groups_summed_elsewhere_side_by_side():
    a = speed_of("a", [run(2000, 250)], is_default_config)
    b = speed_of("b", [run(1500, 255)], is_default_config)
    check = judge([a, b])
    assert check.apart and check.by == "the CPU probe" and check.to_dict()["line"].startswith("figures from")


def test_the_report_names_studies_from_machines_apart_in_a_warning():
    from types import SimpleNamespace

    from nosqltune.report.page import machines_section

    fast = SimpleNamespace(name="gp", all_rows=[run(2000, 250), run(2000, 260, candidate="best")])
    slow = SimpleNamespace(name="smac", all_rows=[run(1400, 700, day=-1)])
    page = machines_section([fast, slow])
    assert "class='warn'" in page and "x2.80" in page and "gp, 2026-11-26" in page and "smac, 2026-11-25" in page
    alone = machines_section([fast])
    assert "class='muted'" in alone and "one machine" in alone


def test_the_default_cpu_per_operation_is_compared_within_one_workload_only():
    """Another mix costs another CPU per operation on the same machine: write-heavy's default against ycsb-a's is
    no evidence of two machines; the probe still is."""
    rows = [run(2000, 250), run(2000, 600, day=1, workload="write90")]
    check = check_machines(rows)
    assert not check.apart and check.ratio == 1.0
    assert check_machines([run(2000, 250), run(1500, 600, day=1, workload="write90")]).by == "the CPU probe"


def test_the_default_cpu_per_operation_is_compared_within_one_jit_only():
    """C1 costs the node about three times tiered's CPU per operation on one machine: a C1 default against a tiered
    one is no evidence of two machines; the same JIT on both days still is, and so is the probe."""
    c1_day, tiered_day = run(2000, 562, jit="c1"), [run(2000, 172, day=1, jit="tiered") for _ in range(3)]
    check = check_machines([c1_day, *tiered_day])
    assert not check.apart and check.ratio == 1.0
    assert [g.workload for g in check.groups] == ["ycsb-a (in-memory, c1)", "ycsb-a (in-memory, tiered)"]
    slower = check_machines([run(2000, 562, jit="c1"), run(2000, 172 * 1.5, day=1, jit="c1")])
    assert slower.apart and slower.by == "the default's node CPU per operation"
    assert check_machines([c1_day, run(3400, 172, day=1, jit="tiered")]).by == "the CPU probe"
