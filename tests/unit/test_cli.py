"""The CLI: help that explains, one-line errors with exit code 2 for bad input, nothing run."""

import json

import pytest

from nosqltune.cli import build_parser, main
from nosqltune.cli.bench import format_table
from nosqltune.cli.calibrate import recommend
from nosqltune.cli.harness import heap_mb


def test_help_lists_commands_and_common_flags(capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--workload", "--read-ratio", "--distribution", "--records", "--operations", "--threads",
                 "--config", "--set", "--repeat", "--study", "--json"):
        assert flag in out


def test_same_flags_in_calibrate():
    parser = build_parser()
    args = parser.parse_args(["calibrate", "--workload", "ycsb-b", "--threads", "4", "--study", "x.db", "--json"])
    assert (args.workload, args.threads, args.study, args.json, args.repeat) == ("ycsb-b", 4, "x.db", True, 10)


@pytest.mark.parametrize("argv, message", [
    (["bench", "--set", "concurent_writes=64"], "did you mean concurrent_writes"),
    (["bench", "--set", "concurrent_writes=500"], "outside its range"),
    (["bench", "--set", "concurrent_writes"], "knob=value"),
    (["bench", "--workload", "ycsb-z"], "unknown workload"),
    (["bench", "--config", "/nonexistent/knobs.yaml"], "knobs.yaml"),
    (["bench", "--heap", "lots"], "--heap"),
    (["bench", "--study", "mysql://x/y"], "sqlite:///"),
    (["bench", "--study", "/proc/nope/s.db"], "/proc/nope"),
    (["bench", "--study", "{tmp}"], "directory"),
    (["bench", "--heap", "500G"], "use a heap of at most"),
    (["bench", "--system", "redis", "--set", "maxmemory-policy=sometimes"], "maxmemory_policy"),
    (["bench", "--scenario", "huge"], "unknown scenario 'huge'"),
    (["bench", "--scenario", "disk-bound", "--system", "redis"], "for Cassandra"),
    (["collect", "--scenario", "latency-slo"], "fixed rate"),
    (["tune", "--scenario", "write-heavy", "--objective", "p42-read"], "unknown objective"),
    (["calibrate", "--metric", "speed"], "unknown --metric"),
])
def test_bad_input_one_line_no_run(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main(argv + (["--study", str(tmp_path / "s.db")] if "--study" not in argv else []))
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []   # no study, no work directory, nothing


def test_heap_sizes():
    assert heap_mb("2G") == 2048 and heap_mb("1536M") == 1536 and heap_mb("1.5g") == 1536
    with pytest.raises(Exception, match="too small"):
        heap_mb("8M")


def test_recommend_picks_cheapest_under_threshold():
    cells = [{"cv": 0.05, "n": 5, "trial_seconds": 10}, {"cv": 0.02, "n": 5, "trial_seconds": 30},
             {"cv": 0.025, "n": 5, "trial_seconds": 20}, {"cv": 0.01, "n": 1, "trial_seconds": 5}]
    assert recommend(cells, 0.03)["trial_seconds"] == 20
    assert recommend(cells, 0.001) is None


def _row(i, state="COMPLETE", tp=1000.0):
    metrics = {"summary": {"throughput_ops_s": tp, "read_avg_ms": 1.0, "read_p95_ms": 2.0, "read_p99_ms": 3.0},
               "operations": {"READ": {}}, "errors": 0}
    return {"id": i, "state": state, "metrics": metrics if state == "COMPLETE" else None,
            "timings": {"boot_s": 4.0, "total_s": 20.0}, "failure_kind": None if state == "COMPLETE" else "refused",
            "error": None if state == "COMPLETE" else "bad value"}


def test_table_shows_runs_mean_and_cv():
    text = format_table([_row(1, tp=1000.0), _row(2, tp=1100.0), _row(3, "FAIL")])
    lines = text.splitlines()
    assert lines[0].split() == ["metric", "run", "1", "run", "2", "run", "3", "mean", "sd", "cv", "%"]
    throughput = lines[1].split()
    assert throughput[:4] == ["throughput", "ops/s", "1000", "1100"] and throughput[4] == "FAIL"
    assert throughput[5] == "1050"  # mean of the completed runs only
    assert any(line.startswith("read p99 ms") for line in lines)
    assert lines[-1] == "trial 3 failed (refused): bad value"


def test_defaults_are_the_calibrated_setup_and_flags_win(tmp_path):
    from nosqltune.cli.options import _build_workload

    parser = build_parser()
    w = _build_workload(parser.parse_args(["bench"]))
    # the in-memory scenario's calibrated warm-up (bench/results/scenarios.md)
    assert (w.name, w.records, w.operations, w.threads, w.warmup_operations) == ("ycsb-a", 100_000, 100_000, 16,
                                                                                 80_000)
    props = tmp_path / "mine.properties"
    props.write_text("readproportion=1\nrecordcount=2000\noperationcount=3000\n")
    w = _build_workload(parser.parse_args(["bench", "--workload", str(props), "--operations", "500"]))
    assert (w.records, w.operations, w.warmup_operations) == (2000, 500, 80_000)


@pytest.mark.parametrize("argv, message", [
    (["tune", "--objective", "p100"], "unknown objective"),
    (["tune", "--constraint", "p99-read<5"], "cannot read constraint"),
    (["tune", "--knobs", "irace42"], "unknown knob set"),
    (["tune", "--budget", "0"], "--budget"),
    (["tune", "--repeat", "3"], "one cold trial per configuration"),
    (["tune", "--workload", "ycsb-a,ycsb-a"], "same workload twice"),
    (["tune", "--knobs", "rafiki5", "--set", "concurrent_writes=16"], "is tuned"),
    (["tune", "--optimizer", "irace", "--knobs", "rafiki5", "--budget", "4"], "below what irace can race"),
    # the race is sized for what the confirmation leaves: 9 trials less its (1 + 1) x 2 leave 5, under irace's 6
    (["tune", "--optimizer", "irace", "--knobs", "rafiki5", "--budget", "9", "--confirm-top", "1",
      "--confirm-rounds", "2"], "the search's share of --budget 9 after the confirmation's 4 trials"),
    (["tune", "--max-time", "soon"], "--max-time"),
    (["tune", "--resume"], "nothing to resume"),
    (["best"], "no study store"),
    (["tune", "--confirm-rounds", "1"], "--confirm-rounds at least 2"),
    (["tune", "--confirm-top", "-1"], "--confirm-top must be at least 0"),
    (["calibrate", "--max-cv", "0"], "--max-cv must be positive"),
    (["calibrate", "--scenario", "nowhere"], "unknown scenario"),
    (["bench", "--config", "newest"], "named configuration of cassandra: latest"),
    (["bench", "--rate-fraction", "1.5"], "--rate-fraction must be within"),
])
def test_tune_bad_input_one_line_nothing_written(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    code = main(argv + ["--study", str(tmp_path / "s.db")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "home").exists()


@pytest.mark.parametrize("argv, message", [
    (["collect", "--read-ratios", "0:2:0.5"], "--read-ratios"),
    (["collect", "--configs", "0"], "--configs"),
    (["collect", "--workload", "ycsb-a", "--read-ratios", "0.5"], "not both"),
    (["collect", "--workload", "ycsb-b,ycsb-b"], "same workload twice"),
    (["collect", "--read-ratio", "0.5"], "not --read-ratio"),
    (["collect", "--workload", "ycsb-b,no-such-mix"], "no-such-mix"),
    (["collect", "--knobs", "irace42"], "unknown knob set"),
    (["collect", "--knobs", "rafiki5", "--set", "concurrent_writes=16"], "collected over"),
    (["importance", "--levels", "1"], "--levels"),
    (["importance", "--workload", "ycsb-a,ycsb-b"], "one --workload"),
    (["importance", "--objective", "p42-read"], "unknown objective"),
    (["model", "fit", "--target", "p42-read"], "unknown target"),
    (["model", "fit"], "no study store"),
    (["model", "report", "--kinds", "svm"], "unknown model kind"),
    (["model", "report"], "no study store"),
    (["importance", "--from-study", "/nonexistent/x.db"], "no study store"),
    (["tune", "--system", "surrogate:nope"], "unknown surrogate dataset"),
    (["tune", "--system", "surrogate:wide24:svm"], "unknown surrogate model"),
    (["tune", "--system", "mysql"], "unknown --system"),
    (["tune", "--system", "surrogate:wide24", "--knobs", "irace23"], "no data for num_tokens"),
])
def test_surrogate_commands_bad_input(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    code = main(argv + ["--study", str(tmp_path / "s.db")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "home").exists()


@pytest.mark.parametrize("argv, message", [
    (["recommend", "--model", "/nonexistent/model"], "no fitted model"),
    (["recommend", "--model", "/nonexistent/model", "--search", "hill"], "--search"),
])
def test_recommend_bad_input(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_tune_flags():
    args = build_parser().parse_args(["tune", "--workload", "ycsb-a,ycsb-b", "--optimizer", "gp", "--objective",
                                      "p99-read", "--constraint", "throughput>=100", "--no-default", "--budget", "9"])
    assert (args.optimizer, args.objective, args.constraints, args.include_default, args.budget) == \
        ("gp", "p99-read", ["throughput>=100"], False, 9)
    assert build_parser().parse_args(["tune"]).include_default is True


HEAVY = ('cassandra', 'numpy', 'sklearn', 'smac', 'torch', 'ConfigSpace', 'scipy')


@pytest.mark.parametrize("argv", [[], ["bench"], ["tune"], ["best"], ["collect"], ["importance"], ["model", "fit"],
                                  ["recommend"]])
def test_help_imports_no_driver_or_heavy_library(argv):
    import subprocess
    import sys

    code = (f"import sys; from nosqltune.cli import main\ntry: main({argv + ['--help']!r})\nexcept SystemExit: pass\n"
            f"heavy = [m for m in {HEAVY!r} if m in sys.modules]; print(heavy, file=sys.stderr)")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    assert err.strip() == "[]"


def test_best_as_yaml_fragment_with_diff(tmp_path, capsys):
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.store import open_store
    from nosqltune.tuning.loop import Outcome, TuneSpec, TuningLoop

    subset = load_space("cassandra").subset("rafiki5")
    space = TuningSpace(subset)
    store = open_store(tmp_path / "s.db")
    study = store.study("tune")
    spec = TuneSpec(optimizer="random", workloads=["ycsb-a"], budget=6, objective={"metric": "throughput",
                                                                                   "constraints": []})
    store.update_study_settings(study, {"tune": {"spec": spec.to_dict(), "workloads": [], "fixed": {},
                                                 "knobs": "rafiki5", "harness": {}}})

    def runner(config, workload):  # analytic: Leveled and more writers are faster
        value = 1000.0 * (2 if config["compaction_method"] == "Leveled" else 1) + config["concurrent_writes"]
        return Outcome("COMPLETE", summary={"throughput_ops_s": value})

    loop = TuningLoop(store, study, spec, space, runner, workdir=tmp_path / "w")
    loop.run()
    store.close()
    assert main(["best", "--study", str(tmp_path / "s.db"), "--format", "yaml"]) == 0
    out = capsys.readouterr().out
    import yaml

    fragment = yaml.safe_load(out)
    best = loop.best.config
    assert "# diff against the default:" in out
    for name in ("concurrent_writes", "memtable_cleanup_threshold", "concurrent_compactors"):
        if best[name] != subset[name].default:
            assert fragment[name] == best[name] and f"#   {name}: {subset[name].default} -> {best[name]}" in out
    if best["compaction_method"] == "Leveled":
        assert "# CQL: ALTER TABLE ycsb.usertable WITH compaction = {'class': 'LeveledCompactionStrategy'" in out
    assert main(["best", "--study", str(tmp_path / "s.db"), "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["best"]["config"] == best and result["trials"] == 6
    assert result["speedup"] == pytest.approx(result["best"]["value"] / result["default"]["value"])


def test_knobs_lists_a_space_and_a_named_set(capsys):
    assert main(["knobs", "cassandra", "--set", "rafiki5", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {k["name"] for k in listed} == {"concurrent_writes", "memtable_cleanup_threshold", "concurrent_compactors",
                                          "compaction_method", "file_cache_size"}
    assert all(k["description"] and k["applies"] for k in listed)
    by_name = {k["name"]: k for k in listed}   # the bounds a knob file may widen a range to, and why if ours
    assert by_name["concurrent_writes"]["bounds"] == [2, 8192] and by_name["concurrent_writes"]["bounds_why"]
    assert by_name["memtable_cleanup_threshold"]["bounds"] == [0.01, 0.99]
    assert by_name["memtable_cleanup_threshold"]["bounds_why"] is None
    assert main(["knobs", "redis"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("redis ") and "sets: " in out.splitlines()[0]
    assert any(line.startswith("maxmemory_policy ") for line in out.splitlines())


def test_one_text_table_pads_columns_aligns_numbers_right_and_lets_the_last_run_on():
    from nosqltune.cli.text import text_table

    rows = [["knob", "size", "meaning"], ["heap_size", "1024", "the JVM's heap"], ["gc", "7", "which collector"]]
    assert text_table(rows, right={1}, free_last=True).split("\n") == [
        "knob       size  meaning",
        "heap_size  1024  the JVM's heap",
        "gc            7  which collector"]
    assert text_table(rows[:2]).split("\n")[0] == "knob       size  meaning"   # every column padded, trailing cut
    assert text_table([]) == ""
