"""`compare --data-growth`: the candidates and the default at each data multiple (records multiplied, operations
held), each size in its own interleaved rounds, stored; `best` prints the gain against the data size and the report
draws it. On the recorded surrogate (the sizes' structure; what the data does to a gain is a real-trial question)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.evaluation.compare import growth_table
from nosqltune.store import open_store


@pytest.fixture()
def study(tmp_path, capsys, monkeypatch, surrogate_cache):
    monkeypatch.setenv("NOSQLTUNE_CACHE", str(surrogate_cache))
    path = tmp_path / "g.db"
    assert main(["tune", "--system", "surrogate:cloud13", "--read-ratio", "0.95", "--distribution", "uniform",
                 "--optimizer", "random", "--budget", "8", "--seed", "1", "--study", str(path), "--json"]) == 0
    capsys.readouterr()
    return path


def test_each_size_is_its_own_interleaved_comparison_at_equal_work(study, capsys):
    assert main(["compare", "--study", str(study), "--data-growth", "1,2", "--repeat", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["growth"] == [1.0, 2.0] and set(out["sizes"]) == {"1.0", "2.0"}
    store = open_store(str(study))
    try:
        rows = [r for r in store.trials() if r["tag"] == "compare"]
        comparisons = store.find_study("tune")["settings"]["compare"]
    finally:
        store.close()
    assert set(comparisons) == {"x1", "x1-data2"}
    by_size = {}
    for row in rows:
        by_size.setdefault(row["meta"]["group"], []).append(row["workload"])
    assert len(by_size) == 2 and all(len(v) == 3 * 2 for v in by_size.values())   # default and best, 3 rounds
    small, large = (v[0] for v in sorted(by_size.values(), key=lambda v: v[0]["records"]))
    assert large["records"] == 2 * small["records"] and large["operations"] == small["operations"]
    table = growth_table(comparisons)
    assert [(r["candidate"], r["multiple"]) for r in table] == [("best", 1.0), ("best", 2.0)]
    assert all(r["pairs"] == 3 for r in table) and out["table"] == table

    # best prints it, and the report draws it
    assert main(["best", "--study", str(study)]) == 0
    printed = capsys.readouterr().out
    assert "gain against the data size" in printed and "data x2:" in printed
    out_dir = study.parent / "report"
    assert main(["report", "--study", str(study), "--out", str(out_dir), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    figure = [f for f in written["figures"] if f.endswith("-growth.png")]
    assert figure and Path(figure[0]).stat().st_size > 10_000
    assert "the gain against the data size" in Path(written["report"]).read_text()


@pytest.mark.parametrize("flags, message", [
    (["--data-growth", "1,2", "--scale", "2"], "give one of them"),
    (["--data-growth", "0,2"], "distinct positive multiples"),
    (["--data-growth", "1,1"], "distinct positive multiples"),
    (["--data-growth", "one"], "--data-growth takes multiples"),
])
def test_bad_growth_is_one_line_and_runs_nothing(study, capsys, flags, message):
    assert main(["compare", "--study", str(study), "--repeat", "2", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not [r for r in open_store(str(study)).trials() if r["tag"] == "compare"]


def test_compare_and_confirm_take_another_jit_stored_apart(study, capsys):
    """Fidelity: the study tuned with c1 (tune's default) measured with tiered JVMs: its own comparison and its own
    confirmation, the JIT stored with each; the trials' harness says tiered."""
    assert main(["compare", "--study", str(study), "--repeat", "2", "--jit", "tiered", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jit"] == "tiered"
    assert main(["best", "--study", str(study), "--confirm", "--top", "1", "--rounds", "2", "--jit", "tiered",
                 "--format", "json"]) == 0
    confirmed = json.loads(capsys.readouterr().out)["confirm"]
    assert confirmed["jit"] == "tiered" and confirmed["group"].endswith("-tiered-plateau120s")
    store = open_store(str(study))
    try:
        record = store.find_study("tune")["settings"]
        rows = [r for r in store.trials() if r["tag"] == "compare"]
    finally:
        store.close()
    assert "x1-tiered-plateau120s" in record["compare"]
    assert rows and all(r["workload"]["harness"]["jit"] == "tiered" for r in rows)
    assert all("-tiered-plateau120s" in r["meta"]["group"] for r in rows)
    # tiered rounds warm up until the JIT's plateau (at least 120 s, then two 20 s windows within 5%, at most 300
    # s), whatever the
    # study's warm-up was; the loadgen is told the drift bound
    from nosqltune.workloads.spec import Workload

    assert all((r["workload"]["warmup_min_seconds"], r["workload"]["warmup_steady_window"],
                r["workload"]["warmup_steady_drift"], r["workload"]["warmup_max_seconds"]) == (120, 20, 0.05, 300)
               for r in rows)
    stored = {k: v for k, v in rows[0]["workload"].items() if k != "harness"}
    props = Workload.from_dict(stored).properties("run")
    assert props["warmup.steady.drift"] == 0.05 and props["warmup.steady.window"] == 20
    assert props["warmup.minseconds"] == 120
    assert "warmup.steady.drift" not in Workload.from_dict({**stored, "warmup_steady_drift": None}).properties("run")
    assert main(["best", "--study", str(study), "--jit", "tiered"]) == 2       # --jit without --confirm
    assert "give --confirm too" in capsys.readouterr().err


def test_a_confirmation_counts_the_warmups_that_reached_no_plateau(study, capsys, monkeypatch):
    """As compare does: a tiered confirmation warms each run up to the JIT's plateau, and a run whose warm-up ended at
    its cap without one (here top1's first round, marked so as a real write-heavy run would be) is counted for its
    candidate, stored and printed."""
    from nosqltune.evaluation import compare as compare_module

    original = compare_module.run_interleaved

    def marked(*args, **kwargs):
        runs = original(*args, **kwargs)
        runs["top1"][0]["metrics"]["warmup"] = {"steady": False, "runtime_ms": 300000}
        return runs

    monkeypatch.setattr(compare_module, "run_interleaved", marked)
    assert main(["best", "--study", str(study), "--confirm", "--top", "1", "--rounds", "2", "--jit", "tiered",
                 "--format", "json"]) == 0
    confirmed = json.loads(capsys.readouterr().out)["confirm"]
    assert confirmed["unsettled"] == {"default": 0, "top1": 1}
    assert main(["best", "--study", str(study)]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "plateau" in line]
    assert said == ["  top1: 1 of 2 warm-ups reached no plateau before their time cap: those runs did more work "
                    "before measuring than the others"]


def test_a_warmup_by_time_is_its_own_comparison(study, capsys):
    assert main(["compare", "--study", str(study), "--repeat", "2", "--warmup-seconds", "45", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warmup_seconds"] == 45
    store = open_store(str(study))
    try:
        record = store.find_study("tune")["settings"]
        rows = [r for r in store.trials() if r["tag"] == "compare"]
        tuned = [r for r in store.trials() if r["tag"] != "compare"]
    finally:
        store.close()
    assert set(record["compare"]) == {"x1-warm45s"}
    assert rows and all(r["workload"]["warmup_max_seconds"] == 45 for r in rows)
    assert {r["workload"]["warmup_max_seconds"] for r in tuned} != {45}


def test_more_operations_alone_is_its_own_comparison_at_every_size(study, capsys):
    """`--operations N`: a longer measured phase with the records held (where --scale multiplies both), stored apart
    from the study's own rounds; with --data-growth every size runs N and the growth table names the variant."""
    store = open_store(str(study))
    tuned_ops = {r["workload"]["operations"] for r in store.trials()}
    store.close()
    assert main(["compare", "--study", str(study), "--repeat", "2", "--operations", "123456", "--data-growth", "1,2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert all(result["operations"] == 123456 for result in out["sizes"].values())
    store = open_store(str(study))
    try:
        comparisons = store.find_study("tune")["settings"]["compare"]
        rows = [r for r in store.trials() if r["tag"] == "compare"]
    finally:
        store.close()
    assert set(comparisons) == {"x1-ops123456", "x1-data2-ops123456"} and 123456 not in tuned_ops
    assert rows and {r["workload"]["operations"] for r in rows} == {123456}
    assert len({r["workload"]["records"] for r in rows}) == 2
    assert {r["variant"] for r in growth_table(comparisons)} == {"ops123456"}


@pytest.mark.parametrize("flags, message", [
    (["--operations", "0"], "--operations must be a positive integer"),
    (["--operations", "-5"], "--operations must be a positive integer"),
    (["--operations", "1000", "--scale", "2"], "give one of them"),
])
def test_bad_operations_are_one_line_and_run_nothing(study, capsys, flags, message):
    assert main(["compare", "--study", str(study), "--repeat", "2", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not [r for r in open_store(str(study)).trials() if r["tag"] == "compare"]


@pytest.mark.parametrize("command", [["compare", "--repeat", "2"], ["best", "--confirm", "--rounds", "2"]])
@pytest.mark.parametrize("seconds", ["0", "601", "-5"])
def test_a_warmup_out_of_range_is_refused_before_any_run(study, capsys, command, seconds):
    assert main([command[0], "--study", str(study), *command[1:], "--warmup-seconds", seconds]) == 2
    err = capsys.readouterr().err
    assert "--warmup-seconds takes 1 to 600" in err and len(err.strip().splitlines()) == 1
    assert not [r for r in open_store(str(study)).trials() if r["tag"] == "compare"]


def test_a_confirmation_runs_at_productions_jit_unless_told():
    """Real Cassandra studies (trials C1-only) confirm at the tiered JIT; a surrogate's or a tiered study's keeps its
    own; `best --confirm --jit c1` gives the trials' JIT back (fidelity.md)."""
    from types import SimpleNamespace

    from nosqltune.evaluation.confirmation import production_jit

    def study(system, jit):
        return SimpleNamespace(system=system, settings=SimpleNamespace(jit=jit))

    assert production_jit(study("cassandra", "c1")) == "tiered"
    assert production_jit(study("cassandra", "tiered")) is None
    assert production_jit(study("surrogate:cloud13", "c1")) is None
    assert production_jit(study("redis", "c1")) is None


def _comparison(data, speedup, pairs, *, warmup=None, jit=None):
    stats = {"mean_speedup": speedup, "ci_low": speedup - 0.1, "ci_high": speedup + 0.1, "p_value": 0.01,
             "pairs": pairs, "verdict": "faster"}
    return {"scale": 1.0, "data": data, "jit": jit, "warmup_seconds": warmup,
            "workloads": {"w": {"stats": {"best": stats}}}}


def test_the_growth_table_keeps_rounds_run_another_way_apart():
    """A fidelity check at x1 (a warm-up by time, more pairs) is not the growth run's x1; rounds at another JIT, or
    warmed another way (the 60 s tiered rounds of before the plateau rule, the plateau rule's rounds of its first
    floor), are a growth of their own, and such
    rounds at one size only have no rows."""
    table = growth_table({
        "x1:best+latest": _comparison(1.0, 3.6, 3), "x1-data2:best+latest": _comparison(2.0, 1.4, 3),
        "x1-warm20s": _comparison(1.0, 3.4, 10, warmup=20, jit="c1"),
        "x1-tiered": _comparison(1.0, 2.8, 10, jit="tiered"),
        "x1-tiered-plateau:best+latest": _comparison(1.0, 2.5, 4, jit="tiered"),
        "x1-data2-tiered-plateau:best+latest": _comparison(2.0, 1.2, 4, jit="tiered"),
        "x1-tiered-plateau120s:best+latest": _comparison(1.0, 2.4, 5, jit="tiered"),   # the plateau rule's floor now
        "x1-data2-tiered-plateau120s:best+latest": _comparison(2.0, 1.3, 5, jit="tiered"),
        "x1-data4-c1": _comparison(4.0, 1.1, 4, jit="c1"),
        "x1-warm45s": _comparison(1.0, 2.0, 3, warmup=45), "x1-data2-warm45s": _comparison(2.0, 1.5, 3, warmup=45),
    })
    got = [(r["variant"], r["multiple"], r["mean_speedup"], r["pairs"]) for r in table]
    assert got == [("", 1.0, 3.6, 3), ("", 2.0, 1.4, 3), ("tiered-plateau", 1.0, 2.5, 4),
                   ("tiered-plateau", 2.0, 1.2, 4), ("tiered-plateau120s", 1.0, 2.4, 5),
                   ("tiered-plateau120s", 2.0, 1.3, 5), ("warm45s", 1.0, 2.0, 3), ("warm45s", 2.0, 1.5, 3)]
    assert growth_table({"x1": _comparison(1.0, 3.6, 3), "x1-warm20s": _comparison(2.0, 1.0, 3, warmup=20)}) == []


def test_growth_checks_every_size_before_the_first_runs_and_adds_latest(monkeypatch):
    """The disk for 4x is refused before 1x runs; Cassandra's `latest` is measured at every size."""
    from dataclasses import replace
    from types import SimpleNamespace

    import nosqltune.evaluation.compare as compare
    from nosqltune.errors import UsageError

    events = []

    def preflight(workload, harness):
        events.append(("check", workload))
        if workload == "w x4":
            raise UsageError("w: 400 records need about 9 GB of disk: give fewer records")

    study = SimpleNamespace(system="cassandra", objective=SimpleNamespace(metric="throughput"),
                            target=lambda metrics: SimpleNamespace(preflight=preflight))
    monkeypatch.setattr(compare, "_rig", lambda s, settings: ("harness", None, [f"w x{settings.data:g}"]))
    monkeypatch.setattr(compare, "compare_study",
                        lambda s, settings, say: events.append(("run", settings.data, settings.candidates)) or {})
    settings = compare.CompareSettings(candidates="best", rounds=2)
    with pytest.raises(UsageError, match="give fewer records"):
        compare.compare_growth(study, settings, (1.0, 2.0, 4.0))
    assert [e[0] for e in events] == ["check", "check", "check"]
    events.clear()
    out = compare.compare_growth(study, replace(settings), (1.0, 2.0))
    assert events == [("check", "w x1"), ("check", "w x2"), ("run", 1.0, "best,latest"), ("run", 2.0, "best,latest")]
    assert set(out["sizes"]) == {1.0, 2.0}
