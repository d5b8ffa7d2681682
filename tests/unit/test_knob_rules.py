"""Knob rules (knobs/rules.py, the knob files' `rules:`): the grammar and its checks, the refusal of a user's
configuration, and every optimizer kept out of the forbidden region on Cassandra's real knobs.

The optimizers are drawn towards the region: the scores below grow with memtable_heap_space's share of the heap
past the rule `memtable_heap_space <= heap_size / 2`, so a search that ignored the rule would end up beyond it
(each test also shows that the unconstrained draws do break it, or that the search pressed against its edge)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest

from nosqltune.knobs import KnobError, load_space, load_space_file
from nosqltune.knobs.rules import Expression
from nosqltune.knobs.space import TuningSpace, categorical, choices_of, sample_knob
from nosqltune.optimizers import make_optimizer
from nosqltune.store import open_store
from nosqltune.tuning.loop import TuneSpec, TuningLoop

from . import analytic

# the rafiki (GA) and surrogate-sa (annealing) searches: their answers checked against the rules
ANSWERS = 1000 if os.environ.get("NOSQLTUNE_SLOW") == "1" else 250

MEMTABLE_AND_HEAP = ["memtable_heap_space", "heap_size"]


@pytest.fixture(scope="module")
def cassandra():
    """Cassandra's knobs as disk-bound runs them (a 1 GiB heap), as `tune --scenario disk-bound` sees them."""
    return load_space("cassandra").with_knob_defaults({"heap_size": 1024})


def share(config: dict) -> float:
    return config["memtable_heap_space"] / config["heap_size"]


def keeps(config: dict) -> bool:
    return config["memtable_heap_space"] <= config["heap_size"] / 2


# ------------------------------------------------------------------------------------------------ the grammar

def test_the_grammar_evaluates_rules_and_refuses_anything_else():
    names = ["a", "b", "mode", "on"]
    values = {"a": 300, "b": 1024, "mode": "x", "on": True}
    for text, expected in [("a <= b / 2", True), ("a * 4 > b", True), ("a // 7 == 42", True),
                           ("mode in ['x', 'y'] and not on == false", True), ("mode not in ['x']", False),
                           ("100 < a < 200 or min(a, b) == 300", True), ("a if on else b", 300),
                           ("-a + max(a, 2 * b) >= 1748", True), ("on == 1", False)]:
        assert Expression(text, names, "rule").value(values) == expected, text
    for bad in ("__import__('os').system('true')", "a.real", "[a][0]", "lambda: 1", "a <=", "c > 1",
                "open('x')", "a in b", "(a := 1)", "f'{a}'"):
        with pytest.raises(KnobError):
            Expression(bad, names, "rule")


def test_rules_evaluate_a_whole_population_at_once():
    expr = Expression("a <= b / 2 or mode == 'x'", ["a", "b", "mode"], "rule")
    got = expr.values({"a": np.array([100.0, 600.0, 600.0]), "b": 1024,
                       "mode": np.array(["y", "y", "x"], dtype=object)})
    assert got.tolist() == [True, False, True]


# ------------------------------------------------------------------------------------------------ the knob files

def test_the_knob_files_state_their_rules_with_why_and_source():
    (rule,) = load_space("cassandra").rules
    assert rule.name == "memtable_within_half_heap" and rule.text == "memtable_heap_space <= heap_size / 2"
    assert rule.when_set == ("memtable_heap_space",) and "disk-bound trials" in rule.source and rule.why
    (scylla,) = load_space("scylla").rules
    assert set(scylla.knobs) == {"reader_concurrency_semaphore_kill_limit_multiplier",
                                 "reader_concurrency_semaphore_serialize_limit_multiplier"}
    assert load_space("redis").rules == ()
    # a subset keeps the space's rules: they may use a knob it leaves out, at its default or fixed value
    assert load_space("cassandra").subset("eppinger").rules == load_space("cassandra").rules


SPACE = """\
system: t
version: "1"
knobs:
  low: {type: int, range: [1, 100], default: 10, applies: yaml, key: low, description: d}
  high: {type: int, range: [1, 100], default: 50, applies: yaml, key: high, description: d}
  mode: {type: enum, choices: [x, y], default: x, applies: yaml, key: mode, description: d}
rules:
"""


@pytest.mark.parametrize("rule, message", [
    ("{name: r, expression: low <= hgh, why: w, source: s}", "'hgh', which is not one of"),
    ("{name: r, expression: mode == 'z' or low < high, why: w, source: s}", "'z' is not a choice of mode"),
    ("{name: r, expression: low > high, why: w, source: s}", "the defaults break it"),
    ("{name: r, expression: low < high, why: w}", "field source is missing"),
    ("{name: r, expression: low < high, why: w, source: s, when: low}", "unknown field when"),
    ("{name: r, expression: low < high, why: w, source: s, when_set: [mode]}", "when_set must list knobs"),
    ("{name: r, expression: low.bit_length() < 9, why: w, source: s}", "is not allowed"),
])
def test_a_bad_rule_in_a_knob_file_is_refused_with_its_place(tmp_path, rule, message):
    path = tmp_path / "t.yaml"
    path.write_text(SPACE + f"  - {rule}\n")
    with pytest.raises(KnobError, match=message) as caught:
        load_space_file(path)
    assert "t.yaml: rule r" in str(caught.value) and "\n" not in str(caught.value)


# ------------------------------------------------------------------------------------------------ the user's values

def test_a_configuration_is_checked_with_the_trials_heap_and_its_defaults_filled_in():
    space = load_space("cassandra")
    space.check_rules({"memtable_heap_space": 1024})                       # half of the 2 GiB default heap
    with pytest.raises(KnobError, match="memtable_heap_space=1025, heap_size=2048"):
        space.check_rules({"memtable_heap_space": 1025})
    disk_bound = space.with_knob_defaults({"heap_size": 1024})            # --heap 1G, or the scenario's
    with pytest.raises(KnobError, match=r"knob rule memtable_within_half_heap \(memtable_heap_space <= heap_size / 2\)"):
        disk_bound.check_rules({"memtable_heap_space": 600})
    disk_bound.check_rules({"memtable_heap_space": 600, "heap_size": 1200})
    # memtable space left unset: Cassandra takes a quarter of whatever heap runs, so a small heap is no breach
    space.with_knob_defaults({"heap_size": 512}).check_rules({"concurrent_reads": 16})
    space.check_rules({"heap_size": 512})
    # a rule over a searched knob is the search's to keep
    disk_bound.check_rules({"memtable_heap_space": 600}, searched=["heap_size"])


def test_force_runs_a_configuration_that_breaks_a_rule_with_a_warning(capsys):
    """A best stored before a rule was added (disk-bound's SMAC best: memtables of 562 MiB on a 643 MiB heap) can
    still be benchmarked as it was found, with --force; without it the rule refuses it."""
    from nosqltune.cli import build_parser
    from nosqltune.cli.options import _overrides

    space = load_space("cassandra")
    given = ["bench", "--set", "memtable_heap_space=562", "--set", "heap_size=643"]
    with pytest.raises(KnobError, match="memtable_within_half_heap"):
        _overrides(build_parser().parse_args(given), space)
    forced = build_parser().parse_args([*given, "--force"])
    assert _overrides(forced, space, rules_warn=forced.force)["memtable_heap_space"] == 562   # as bench calls it
    warned = capsys.readouterr().err
    assert "warning: knob rule memtable_within_half_heap" in warned and "--force" in warned, warned


def test_the_search_space_carries_the_rules_over_its_knobs(cassandra):
    # fixed values alone are checked before a study starts (tune's --set: test_bad_input), and a stored study is
    # read as it ran
    assert TuningSpace(cassandra.subset("rafiki5"), {"memtable_heap_space": 768}).rules == ()
    # the rule binds the search where one of its knobs is searched, with the other knob's fixed value
    space = TuningSpace(cassandra.subset("eppinger"), {"heap_size": 512})
    assert [r.name for r in space.rules] == ["memtable_within_half_heap"]
    assert not space.allowed({**space.default(), "memtable_heap_space": 257})
    assert space.allowed({**space.default(), "memtable_heap_space": 256})
    # without the memtable space in the search or fixed, Cassandra sizes it from the heap: nothing to keep
    assert TuningSpace(cassandra.subset("cloud")).rules == ()


# ------------------------------------------------------------------------------------------------ cheap optimizers

def test_random_search_keeps_the_rules_in_1000_suggestions(cassandra, tmp_path):
    space = TuningSpace(cassandra.subset("v5"))
    rng = random.Random(5)
    unconstrained = [{k.name: sample_knob(k, rng) for k in space.knobs} for _ in range(1000)]
    assert sum(not keeps(c) for c in unconstrained) > 200     # the rule cuts a large share of v5's box
    optimizer = make_optimizer("random", space, seed=5, budget=1000, workloads=["w"], workdir=tmp_path)
    suggestions = [optimizer.ask().config for _ in range(1000)]
    assert all(keeps(c) for c in suggestions)
    assert max(share(c) for c in suggestions) > 0.45           # right up to the edge, not a narrowed box


def _score(space: TuningSpace):
    """Model rows -> the memtables' share of the heap (maximized): pulls a search across the rule's edge."""
    column, at = {}, 0
    for knob in space.knobs:
        column[knob.name] = at
        at += len(choices_of(knob)) if categorical(knob) else 1
    memtable, heap = (space.by_name[n] for n in MEMTABLE_AND_HEAP)

    def value(rows: np.ndarray) -> np.ndarray:
        # back from TuningSpace.encode's [0, 1] to MiB (both knobs are linear integers): the share itself
        m = memtable.range[0] + rows[:, column["memtable_heap_space"]] * (memtable.range[1] - memtable.range[0] + 1)
        h = heap.range[0] + rows[:, column["heap_size"]] * (heap.range[1] - heap.range[0] + 1)
        return m / h
    return value


@pytest.mark.parametrize("method, options", [("ga", {"population": 10, "generations": 4}),
                                             ("anneal", {"chains": 4, "steps": 8})])
def test_the_genetic_search_and_the_annealing_keep_the_rules_in_every_answer(cassandra, method, options):
    """The searches of rafiki (GA) and surrogate-sa (annealing), small: 250 of them (5 s), 1,000 in make test-all."""
    from nosqltune.surrogate.search import Codec, search

    space = TuningSpace(cassandra.subset("v5"))
    codec = Codec(space)
    score = _score(space)
    answers = [search(codec, score, method=method, seed=seed, **options).config for seed in range(ANSWERS)]
    assert all(keeps(c) for c in answers)
    assert np.mean([share(c) for c in answers]) > 0.3          # they pressed towards the edge
    # the box searched does cross the edge: the rule, not the score, keeps the answers inside
    box = codec.lo + np.random.default_rng(0).random((2000, codec.dims)) * (codec.hi - codec.lo)
    assert 0.1 < codec.feasible(box).mean() < 0.9
    assert codec.feasible(codec.random(np.random.default_rng(0), 2000)).all()


def test_surrogate_annealing_suggests_only_configurations_that_keep_the_rules(cassandra, tmp_path):
    space = TuningSpace(cassandra.subset(MEMTABLE_AND_HEAP + ["concurrent_reads"]))
    optimizer = make_optimizer("surrogate-sa", space, seed=2, budget=12, workloads=["w"], workdir=tmp_path)
    for _ in range(12):
        suggestion = optimizer.ask()
        assert keeps(suggestion.config), suggestion
        optimizer.tell(suggestion, -analytic.memtable_share(suggestion.config))


def test_llamatune_checks_the_configuration_it_maps_back(cassandra, tmp_path):
    space = TuningSpace(cassandra.subset("v5"))
    optimizer = make_optimizer("random", space, seed=3, budget=1000, workloads=["w"], workdir=tmp_path,
                               options={"space_adapter": "llamatune", "llamatune_dims": 4})
    optimizer.observe(space.default(), -analytic.memtable_share(space.full(space.default())))
    suggestions = []
    for _ in range(1000):
        suggestion = optimizer.ask()
        suggestions.append(suggestion.config)
        optimizer.tell(suggestion, -analytic.memtable_share(suggestion.config))
    assert all(keeps(c) for c in suggestions)
    assert suggestion.meta["refused"] > 50     # the projection does land beyond the edge, and is sent back


# ------------------------------------------------------------------------------------------------ SMAC and GP

def test_smac_is_given_the_rules_configspace_can_state_as_forbidden_clauses(cassandra):
    from nosqltune.optimizers.smac_bo import configspace_of

    fixed_heap = TuningSpace(cassandra.subset("eppinger"))     # heap at the scenario's 1024 MiB
    cs = configspace_of(fixed_heap, seed=1)
    assert [str(f) for f in cs.forbidden_clauses] == ["Forbidden: memtable_heap_space > 512"]
    assert all(keeps({**fixed_heap.full(dict(c))}) for c in cs.sample_configuration(1000))
    # both knobs searched: arithmetic between them, which ConfigSpace cannot state (rejection at ask time)
    assert configspace_of(TuningSpace(cassandra.subset(MEMTABLE_AND_HEAP)), seed=1).forbidden_clauses == []
    # a relation it can state: ScyllaDB's kill limit above the serialize limit (0 turns either off)
    scylla = TuningSpace(load_space("scylla").subset(["reader_concurrency_semaphore_kill_limit_multiplier",
                                                      "reader_concurrency_semaphore_serialize_limit_multiplier"]))
    cs = configspace_of(scylla, seed=1)
    assert len(cs.forbidden_clauses) == 1
    assert all(scylla.allowed(dict(c)) for c in cs.sample_configuration(1000))


def _ask_tell(optimizer_name: str, rounds: int, tmp_path: Path, cassandra, options=None):
    space = TuningSpace(cassandra.subset(MEMTABLE_AND_HEAP))
    optimizer = make_optimizer(optimizer_name, space, seed=4, budget=rounds, workloads=["w"],
                               workdir=tmp_path / optimizer_name, options=options)
    optimizer.observe(space.default(), -analytic.memtable_share(space.full(space.default())))
    suggestions = []
    try:
        for _ in range(rounds):
            suggestion = optimizer.ask()
            suggestions.append(suggestion)
            optimizer.tell(suggestion, -analytic.memtable_share(suggestion.config))
    finally:
        optimizer.close()
    assert all(keeps(s.config) for s in suggestions)
    assert max(share(s.config) for s in suggestions) > 0.45    # the model led it to the edge
    return suggestions


@pytest.mark.parametrize("rounds", [pytest.param(40, id="40"), pytest.param(200, id="200", marks=pytest.mark.slow)])
def test_smac_keeps_the_rules_in_its_ask_tell_rounds(cassandra, tmp_path, rounds):
    """The smallest real subset that holds the rule's knobs (memtable_heap_space and heap_size, both [512, 3072]
    MiB; a 1 GiB default heap): on v5's 20 knobs 200 rounds took too long for the unit tests, and on these
    two 200 rounds took 94-111 s at nice 19 beside a benchmark (2026-11-26), so the unit run makes 40 and `make
    test-all` 200. With both knobs searched the rule is arithmetic between them, kept by rejection."""
    suggestions = _ask_tell("smac", rounds, tmp_path, cassandra)
    assert suggestions[-1].meta.get("refused", 0) > 0               # SMAC did propose beyond the edge, and was told


@pytest.mark.parametrize("rounds", [pytest.param(40, id="40"), pytest.param(200, id="200", marks=pytest.mark.slow)])
def test_gp_keeps_the_rules_in_its_ask_tell_rounds(cassandra, tmp_path, rounds):
    """The same two knobs as SMAC's test; the Gaussian process's fit grows with the rounds (40 took about 35 s at
    nice 19 beside a benchmark), so the unit run makes 40 rounds and `make test-all` 200."""
    suggestions = _ask_tell("gp", rounds, tmp_path, cassandra, options={"initial": 5, "candidates": 300})
    assert sum(s.meta["phase"] == "ei" for s in suggestions) >= rounds - 6


# ------------------------------------------------------------------------------------------------ irace

def test_irace_forbidden_file_states_each_rule_with_the_fixed_values(cassandra):
    from nosqltune.optimizers.irace import forbidden_file

    both = forbidden_file(TuningSpace(cassandra.subset("v5")))
    assert both.splitlines()[-1] == "!((memtable_heap_space <= (heap_size / 2)))"
    fixed = forbidden_file(TuningSpace(cassandra.subset("eppinger")))
    assert fixed.splitlines()[-1] == "!((memtable_heap_space <= (1024 / 2)))"
    assert forbidden_file(TuningSpace(cassandra.subset("cloud"))) is None


@pytest.mark.skipif(shutil.which("Rscript") is None, reason="R not installed: run scripts/setup.sh")
def test_irace_forbidden_file_forbids_in_r_exactly_what_the_rules_forbid(tmp_path):
    """R evaluates the file as irace does (vectorized over a table of configurations, a knob whose condition is
    off NA): on 400 configurations drawn without the rules, it must flag exactly those the rules refuse."""
    from nosqltune.optimizers.irace import forbidden_file

    text = textwrap.dedent("""\
        system: t
        version: "1"
        knobs:
          memtable_heap_space: {type: int, range: [64, 768], default: 128, applies: yaml, key: m, description: d}
          heap_size: {type: int, range: [512, 2048], default: 1024, applies: yaml, key: h, description: d}
          mode: {type: enum, choices: [x, y, z], default: x, applies: yaml, key: mode, description: d}
          level: {type: float, range: [0.0, 4.0], default: 1.0, applies: yaml, key: l, description: d,
                  condition: mode == y}
        rules:
          - {name: half, expression: memtable_heap_space <= heap_size / 2, why: w, source: s}
          - {name: level, expression: "mode == 'z' or min(level, 2) * 300 < heap_size // 1", why: w, source: s}
        """)
    (tmp_path / "t.yaml").write_text(text)
    space = TuningSpace(load_space_file(tmp_path / "t.yaml"))
    rng = random.Random(7)
    configs = [space.canonical({k.name: sample_knob(k, rng) for k in space.knobs}) for _ in range(400)]
    expected = [not space.allowed(c) for c in configs]
    assert 20 < sum(expected) < 380
    rows = ["memtable_heap_space,heap_size,mode,level"]
    for c in configs:
        level = c["level"] if space.is_active("level", c) else "NA"
        rows.append(f"{c['memtable_heap_space']},{c['heap_size']},{c['mode']},{level}")
    (tmp_path / "configs.csv").write_text("\n".join(rows) + "\n")
    lines = [line for line in forbidden_file(space).splitlines() if not line.startswith("#")]
    (tmp_path / "check.R").write_text(
        'configs <- read.csv("configs.csv", stringsAsFactors = FALSE)\n'
        'forbidden <- rep(FALSE, nrow(configs))\n'
        + "".join(f"forbidden <- forbidden | (eval(quote({line}), configs) %in% TRUE)\n" for line in lines)
        + 'writeLines(ifelse(forbidden, "1", "0"), "forbidden.out")\n')
    subprocess.run(["Rscript", "check.R"], cwd=tmp_path, check=True, capture_output=True, timeout=60)
    got = [line == "1" for line in (tmp_path / "forbidden.out").read_text().split()]
    assert got == expected


def test_irace_races_only_configurations_that_keep_the_rules(cassandra, tmp_path):
    from nosqltune.optimizers.irace import irace_executable

    try:
        irace_executable()
    except Exception:
        pytest.skip("irace (r-cran-irace) not installed: run scripts/setup.sh")
    space = TuningSpace(cassandra.subset(MEMTABLE_AND_HEAP))
    store = open_store(":memory:")
    study = store.study("t")
    spec = TuneSpec(optimizer="irace", workloads=["w"], budget=60, seed=3,
                    objective={"metric": "throughput", "constraints": []})
    loop = TuningLoop(store, study, spec, space, analytic.memtable_runner, workdir=tmp_path / "irace")
    loop.run()
    configs = [r["config"] for r in store.trials(study)]
    assert len(configs) >= 30 and all(keeps(c) for c in configs)
    assert max(share(c) for c in configs) > 0.4
    assert (tmp_path / "irace" / "forbidden.txt").is_file()
