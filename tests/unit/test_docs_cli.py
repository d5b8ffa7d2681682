"""The command line's help, `nosqltune knobs` and the docs say the same thing, each read as a user reads it (the
help as `--help` prints it, the docs' Markdown tables and sentences) and checked against the data it comes from:
the knob files' sets, the scenarios' sizes, the request distributions a YCSB properties file takes."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from nosqltune.cli import build_parser, main
from nosqltune.cli.reference import commands

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def help_text(capsys, monkeypatch, *argv: str) -> str:
    """`nosqltune ARGV --help` as printed, on one line per flag (a wide terminal: argparse wraps at its width,
    breaking words at hyphens, which would split 'in-memory')."""
    monkeypatch.setenv("COLUMNS", "100000")
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def flag_help(text: str, flag: str) -> str:
    """The help of one flag in a --help output printed unwrapped: the line that starts with it, after its value."""
    for line in text.splitlines():
        if re.match(rf"\s+{re.escape(flag)}\b", line):
            return line
    raise AssertionError(f"{flag} is not in the help")


def markdown_table(path: Path, heading: str) -> list[list[str]]:
    """The rows (cells stripped of backticks) of the first table under a `## heading` of a Markdown page."""
    text = path.read_text()
    section = re.search(rf"(?ms)^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text)
    assert section, f"{path.name} has no section '{heading}'"
    rows = [line for line in section.group(1).splitlines() if line.startswith("|")]
    assert len(rows) > 2, f"{path.name}, '{heading}': no table"
    return [[cell.strip().replace("`", "") for cell in row.strip("|").split("|")] for row in rows[2:]]


def names(cell: str) -> list[str]:
    return [] if cell.strip() in ("", "-") else [n.strip() for n in cell.split(",")]


# ---------------------------------------------------------------------------------------------------- knob sets

def knob_data() -> list[dict]:
    """Every set of every knob file, from the knob data itself (not from the help's generator): its knobs that do
    nothing at the defaults (the search's inert knobs) and those online's plan routes `fixed`."""
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.online.plan import route_of

    rows = []
    for system in sorted(p.stem for p in (ROOT / "src/nosqltune/knobs").glob("*.yaml")):
        space = load_space(system)
        for name in space.knob_sets:
            subset = space.subset(name)
            rows.append({"set": name, "space": f"{system} {space.version}", "knobs": len(subset),
                         "inert": TuningSpace(subset).inert, "fixed": [k.name for k in subset
                                                                       if route_of(k)[0] == "fixed"]})
    return rows


def tune_knobs_help(capsys, monkeypatch) -> dict:
    """What `tune --help` says of the knob sets: the sets of each knob space, and per set its inert and fixed knobs."""
    text = flag_help(help_text(capsys, monkeypatch, "tune"), "--knobs")
    listed = re.search(r"Knob sets by knob space \(`nosqltune knobs SPACE`\): (.*?)\. Every set", text)
    inert = re.search(r"unless another knob is set \(left out of the search, and said so\): (.*?)\. Settings", text)
    fixed = re.search(r"left as they run by online\): (.*)$", text)
    assert listed and inert and fixed, text

    def per_set(part: str) -> dict[str, list[str]]:
        return {entry.split(" ", 1)[0]: names(entry.split(" ", 1)[1]) for entry in part.strip().split("; ")}

    spaces = {}
    for entry in listed.group(1).split("; "):
        space, _, sets = entry.partition(": ")
        spaces[space] = names(sets)
    return {"spaces": spaces, "inert": per_set(inert.group(1)), "fixed": per_set(fixed.group(1))}


def test_tune_help_lists_every_knob_set_of_every_knob_file(capsys, monkeypatch):
    said = tune_knobs_help(capsys, monkeypatch)
    data = knob_data()
    expected: dict[str, list[str]] = {}
    for row in data:
        expected.setdefault(row["space"], []).append(row["set"])
    assert said["spaces"] == expected
    assert "wide24" in said["spaces"]["cassandra 5.0"]   # the README's example searches it
    assert said["inert"] == {r["set"]: r["inert"] for r in data if r["inert"]}
    assert said["fixed"] == {r["set"]: r["fixed"] for r in data if r["fixed"]}
    # what the user asked after: irace23 holds settings no running node takes, and knobs inert in 5.0
    assert {"num_tokens", "replication_factor"} <= set(said["fixed"]["irace23"])
    assert "file_cache_size" in said["inert"]["irace23"]


def test_tune_help_lists_the_sets_knobs_lists(capsys, monkeypatch):
    said = tune_knobs_help(capsys, monkeypatch)["spaces"]
    for space, sets in said.items():
        system = space.split(" ")[0]
        assert main(["knobs", system]) == 0
        header = capsys.readouterr().out.splitlines()[0]
        listed = re.search(r"; sets: (.*)$", header)
        assert listed, header
        assert names(listed.group(1)) == sets, f"`nosqltune knobs {system}` and `tune --help` disagree"


def test_docs_table_of_knob_sets_is_the_knob_files(capsys, monkeypatch):
    table = markdown_table(DOCS / "tuning.md", "Knob sets")
    documented = [{"set": row[0], "space": row[1], "knobs": int(row[2]), "inert": names(row[3]),
                   "fixed": names(row[4])} for row in table]
    assert documented == knob_data(), "docs/tuning.md's table of knob sets differs from the knob files"
    said = tune_knobs_help(capsys, monkeypatch)["spaces"]
    assert [row["set"] for row in documented] == [s for sets in said.values() for s in sets]


# ---------------------------------------------------------------------------------------------------- sizes

SIZE_FLAGS = {"--records": "records", "--operations": "operations", "--threads": "threads",
              "--warmup-ops": "warmup_ops", "--max-seconds": "max_seconds"}


def scenario_sizes(size: str) -> dict[str, int | None]:
    """Each shipped scenario's value of a size (Workload's own where the scenario sets none)."""
    import dataclasses

    from nosqltune.scenarios import scenarios
    from nosqltune.workloads.spec import Workload

    own = {f.name: f.default for f in dataclasses.fields(Workload)}[{"warmup_ops": "warmup_operations"}.get(size, size)]
    return {name: s.sizes.get(size, own) for name, s in scenarios().items()}


@pytest.mark.parametrize("command", ["bench", "tune", "compare", "calibrate", "collect"])
def test_size_defaults_in_help_are_the_scenarios(capsys, monkeypatch, command):
    text = help_text(capsys, monkeypatch, command)
    for flag, size in SIZE_FLAGS.items():
        if not re.search(rf"^\s+{re.escape(flag)}\b", text, re.M):
            continue   # compare has no sizes of its own: a study's
        line = flag_help(text, flag)
        if command == "compare":   # a size compare is given sets its rounds apart from the study's own
            assert line.endswith("(default: the study's)"), f"{command} {flag}: {line}"
            continue
        expected = scenario_sizes(size)
        per_scenario = re.search(r"\(default: the scenario's, (.*?)\)$", line)
        if per_scenario:
            entries = [re.fullmatch(r"(\S+) (\d+|no cap)", e) for e in per_scenario.group(1).split(", ")]
            assert all(entries), f"{command} {flag}: {line}"
            said = {e.group(1): None if e.group(2) == "no cap" else int(e.group(2)) for e in entries}
            assert said == expected, f"{command} {flag}: {line}"
        else:
            single = re.search(r"\(default (\d+|no cap)\)$", line)
            assert single, f"{command} {flag}: {line}"
            assert set(expected.values()) == {None if single.group(1) == "no cap" else int(single.group(1))}


def test_scenario_help_names_every_scenario(capsys, monkeypatch):
    from nosqltune.scenarios import DEFAULT, scenarios

    line = flag_help(help_text(capsys, monkeypatch, "bench"), "--scenario")
    listed = re.search(r"are the defaults: (.*?); every flag", line)
    assert listed and names(listed.group(1).replace(" (default)", "")) == list(scenarios())
    assert f"{DEFAULT} (default)" in listed.group(1)


def test_getting_started_states_the_default_scenarios_sizes_and_measurement():
    from nosqltune.scenarios import DEFAULT, scenarios

    default = scenarios()[DEFAULT]
    text = " ".join((DOCS / "getting-started.md").read_text().split())
    said = re.search(rf"Defaults are the `{DEFAULT}` scenario's .*?: (\d+)K records, (\d+)K measured operations after "
                     r"an? (\d+)K-operation warm-up", text)
    assert said, "docs/getting-started.md no longer states the default scenario's sizes"
    assert [int(n) * 1000 for n in said.groups()] == [default.sizes[k] for k in ("records", "operations", "warmup_ops")]
    measured = re.search(r"CV ([\d.]+)% over (\d+) cold trials, (\d+) s per trial", default.measured)
    assert measured, default.measured
    assert f"CV {measured.group(1)}% over {measured.group(2)} cold trials, {measured.group(3)} s per trial" in text
    assert f"CV of at most {default.max_cv:.0%}" in text


# ---------------------------------------------------------------------------------------------------- distributions

def choices_of(text: str, flag: str) -> list[str]:
    shown = re.search(rf"^\s+{re.escape(flag)} \{{([^}}]*)\}}", text, re.M)
    assert shown, f"{flag} shows no choices"
    return shown.group(1).split(",")


def accepted_by_properties_file(tmp_path, value: str) -> bool:
    from nosqltune.workloads.spec import WorkloadError, make_workload

    path = tmp_path / f"w-{value}.properties"
    path.write_text(f"readproportion=0.5\nupdateproportion=0.5\nrequestdistribution={value}\n")
    try:
        return make_workload(str(path)).mix["requestdistribution"] == value
    except WorkloadError:
        return False


@pytest.mark.parametrize("command", ["bench", "tune", "recommend"])
def test_distribution_choices_are_what_a_properties_file_takes(capsys, monkeypatch, tmp_path, command):
    offered = choices_of(help_text(capsys, monkeypatch, command), "--distribution")
    assert len(offered) == len(set(offered)) >= 6
    assert all(accepted_by_properties_file(tmp_path, value) for value in offered)
    # a value beside them is refused by the properties path too, so the two accept the same
    for other in ("bogus", "Zipfian", "gaussian"):
        assert not accepted_by_properties_file(tmp_path, other)


def test_getting_started_lists_the_distributions(capsys, monkeypatch):
    offered = choices_of(help_text(capsys, monkeypatch, "bench"), "--distribution")
    text = " ".join((DOCS / "getting-started.md").read_text().split())
    listed = re.search(r"`--distribution ([a-z|]+)`", text)
    assert listed and listed.group(1).split("|") == offered


# ---------------------------------------------------------------------------------------------------- the rest

def test_no_help_prints_a_doubled_percent(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100000")
    for path, sub, _ in commands(build_parser()):
        assert "%%" not in sub.format_help(), f"nosqltune {' '.join(path)} --help prints '%%'"
    assert "95% bootstrap interval" in dict((p, s) for p, s, _ in commands(build_parser()))[("compare",)].format_help()


def test_the_external_run_steps_environment_is_documented():
    from nosqltune.systems.external.target import STEPS
    from nosqltune.systems.external.trial import _places

    target = SimpleNamespace(host="127.0.0.1", directory=Path("/t"), config_file="${workdir}/x.conf")
    places = _places(target, Path("/w"), 9042, Path("/d"), SimpleNamespace(records=10))
    text = " ".join((DOCS / "datastores.md").read_text().split())
    assert "**The `run` step**" in text and "run" in STEPS
    for name in places:
        assert f"NOSQLTUNE_{name.upper()}" in text, f"docs/datastores.md does not name NOSQLTUNE_{name.upper()}"
    assert "KNOB_<NAME>" in text and "[OVERALL], Throughput(ops/sec)" in text


def test_online_config_help_and_docs_say_where_the_running_configuration_comes_from(capsys, monkeypatch):
    line = flag_help(help_text(capsys, monkeypatch, "online"), "--config")
    docs = " ".join((DOCS / "online.md").read_text().split())
    for said in (line, docs):
        assert "over the defaults of the model's knobs" in said
        assert "knob file's defaults at the start" not in said


def best_study(tmp_path) -> Path:
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.store import open_store
    from nosqltune.tuning.loop import Outcome, TuneSpec, TuningLoop

    space = TuningSpace(load_space("cassandra").subset("rafiki5"))
    store = open_store(tmp_path / "s.db")
    study = store.study("tune")
    spec = TuneSpec(optimizer="random", workloads=["ycsb-a"], budget=3,
                    objective={"metric": "throughput", "constraints": []})
    store.update_study_settings(study, {"tune": {"spec": spec.to_dict(), "workloads": [], "fixed": {},
                                                 "knobs": "rafiki5", "harness": {}}})
    TuningLoop(store, study, spec, space, lambda config, workload: Outcome(
        "COMPLETE", summary={"throughput_ops_s": 1000.0 + config["concurrent_writes"]}), workdir=tmp_path / "w").run()
    store.close()
    return tmp_path / "s.db"


def test_best_json_is_json_on_stdout_as_elsewhere(tmp_path, capsys):
    study = str(best_study(tmp_path))
    assert main(["best", "--study", study, "--format", "json"]) == 0
    as_format = json.loads(capsys.readouterr().out)
    assert main(["best", "--study", study, "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == as_format
    assert main(["best", "--study", study, "--json", "--format", "yaml"]) == 2
    assert "not both" in capsys.readouterr().err
