"""Against a real redis-server (Debian's package): bench, a short tune, the memory guard, a refused start, and
the external target driving the same Redis through user-style command files."""

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from nosqltune.cli import main
from nosqltune.store import open_store

from .conftest import assert_cost_measured, dataset_dirs, our_jvms

REPO = Path(__file__).resolve().parents[2]
REDIS_TARGET = REPO / "examples" / "targets" / "redis" / "target.yaml"
SMALL = ["--records", "3000", "--operations", "20000", "--threads", "4", "--warmup-ops", "5000"]

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                                reason="redis-server is not installed (scripts/setup.sh installs it)")


def run(capsys, *args: str) -> tuple[int, dict]:
    code = main([*args, "--json"])
    out = capsys.readouterr().out
    return code, (json.loads(out) if out.strip() else {})


def test_bench_redis_cold_trials(nosqltune_home, dataset_cache, tmp_path, capsys):
    study = tmp_path / "redis.db"
    code, result = run(capsys, "bench", "--system", "redis", "--workload", "ycsb-a", *SMALL, "--repeat", "2",
                       "--study", str(study))
    assert code == 0, result
    code, tuned = run(capsys, "bench", "--system", "redis", "--workload", "ycsb-a", *SMALL, "--study", str(study),
                      "--set", "appendonly=true", "--set", "appendfsync=always", "--set", "hz=50",
                      "--set", "hash_max_listpack_value=128")
    assert code == 0, tuned
    store = open_store(str(study))
    rows = store.trials()
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3
    assert store.find_study("bench")["system"] == "redis"
    for row in rows:
        summary = row["metrics"]["summary"]
        assert summary["read_count"] + summary["update_count"] == 20000
        assert summary["errors"] == 0                       # every read found its record: the dump was loaded
        assert_cost_measured(summary, gc=False)             # redis-server's CPU from INFO cpu; no GC
        assert row["internals"]["keys"] == 3001             # the records and the scan index
        assert row["internals"]["used_memory"] > 3000 * 1000
    # the server itself reports the configuration (CONFIG GET), the append-only file was written during the run
    applied = rows[2]["internals"]
    assert applied["server_settings"] == {"appendonly": "yes", "appendfsync": "always", "hz": "50",
                                          "hash-max-listpack-value": "128"}
    assert applied["aof_current_size"] > 0
    assert rows[0]["internals"]["server_settings"] == {}
    # one dataset (one dump.rdb) made once, restored three times; no trial directory left behind
    # (other tests of the session load Redis datasets of other sizes: this one's are those of 3000 records)
    redis_sets = [d for d in dataset_dirs(dataset_cache) if (d / "data" / "dump.rdb").exists()
                  and json.loads((d / "meta.json").read_text())["records"] == 3000]
    assert len(redis_sets) == 1
    assert not [d for d in (nosqltune_home / "nodes").iterdir() if d.name.startswith("redis-")]


def test_calibrate_runs_the_grid_round_robin(nosqltune_home, tmp_path, capsys):
    """`calibrate` on real trials (Redis: cheap): every cell of the grid repeated, rounds interleaved, the
    cheapest setup under the CV threshold recommended (or none)."""
    study = tmp_path / "calibrate.db"
    code, result = run(capsys, "calibrate", "--system", "redis", *SMALL, "--grid-operations", "1000,2000",
                       "--repeat", "2", "--max-cv", "0.99", "--metric", "cpu-per-op", "--study", str(study))
    assert code == 0, result
    cells = result["cells"]
    assert [(c["operations"], c["n"], c["failed"]) for c in cells] == [(1000, 2, 0), (2000, 2, 0)]
    assert all(c["mean_ops_s"] > 0 and c["cv"] is not None for c in cells)
    rows = open_store(str(study)).trials()
    assert [r["workload"]["operations"] for r in rows] == [1000, 2000, 1000, 2000]     # round-robin
    # the node's CPU per operation and its spread, from the same trials; it picks the setup here
    for cell, pair in zip(cells, (rows[0::2], rows[1::2])):
        values = [r["metrics"]["summary"]["node_cpu_us_per_op"] for r in pair]
        assert cell["cpu-per-op_mean"] == pytest.approx(sum(values) / 2)
        assert cell["cpu-per-op_cv"] is not None
    assert result["metric"] == "cpu-per-op"
    assert result["recommended"] == min(cells, key=lambda c: c["trial_seconds"])


def test_calibrate_a_scenario_over_warm_ups_and_keep_its_pick(nosqltune_home, shipped_scenario_sizes, tmp_path,
                                                              capsys):
    """`calibrate --scenario`: the scenario's goal, a warm-up grid interleaved, and the pick stored as the
    scenario's defaults on this machine."""
    from nosqltune.scenarios import scenario

    study = tmp_path / "calibrate-scenario.db"
    try:
        code, result = run(capsys, "calibrate", "--system", "redis", "--scenario", "in-memory", *SMALL,
                           "--grid-warmup", "1000,3000", "--repeat", "2", "--max-cv", "0.99", "--study", str(study))
        assert code == 0 and result["max_trial_seconds"] == 60 and result["metric"] == "throughput"
        assert [c["warmup_ops"] for c in result["cells"]] == [1000, 3000]
        rows = open_store(str(study)).trials()
        assert [r["workload"]["warmup_operations"] for r in rows] == [1000, 3000, 1000, 3000]   # round-robin
        assert result["saved_to"] == str(shipped_scenario_sizes)
        pick = result["recommended"]
        assert scenario("in-memory", "redis").sizes == {"records": 3000, "operations": 20000, "threads": 4,
                                                        "warmup_ops": pick["warmup_ops"]}
        assert scenario("in-memory").calibrated_here is None      # Cassandra's defaults are its own
    finally:
        shipped_scenario_sizes.unlink(missing_ok=True)


def test_refused_start_is_a_failed_trial(nosqltune_home, tmp_path, capsys):
    """Debian's redis-server cannot enable active defragmentation: Redis refuses the config file, and the trial
    is stored as failed with Redis's own reason."""
    study = tmp_path / "refused.db"
    code, result = run(capsys, "bench", "--system", "redis", *SMALL, "--set", "activedefrag=true",
                       "--study", str(study))
    assert code == 1
    (row,) = open_store(str(study)).trials()
    assert row["state"] == "FAIL" and row["failure_kind"] == "refused"
    assert "Active defragmentation cannot be enabled" in row["error"]
    assert "activedefrag" in row["log_excerpt"]


def test_memory_guard_refuses_before_loading(nosqltune_home, dataset_cache, tmp_path, capsys):
    study = tmp_path / "huge.db"
    before = sorted(p.name for p in dataset_cache.iterdir())
    code = main(["bench", "--system", "redis", "--records", "200000000", "--study", str(study)])
    err = capsys.readouterr().err
    assert code == 2
    assert "GiB" in err and "available" in err and len(err.strip().splitlines()) == 1
    assert not study.exists()                              # nothing written: no store, no dataset
    after = sorted(p.name for p in dataset_cache.iterdir())
    assert after == before


def test_short_tune_on_redis(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "tune.db"
    code, result = run(capsys, "tune", "--system", "redis", "--optimizer", "smac", "--budget", "4",
                       "--workload", "ycsb-c", *SMALL, "--study", str(study))
    assert code == 0, result
    assert result["trials"] == 4 and result["failed_trials"] == 0
    assert sorted(result["best"]["config"]) == ["save_60_changes", "tcp_backlog", "timeout"]  # mlos6's active ones
    rows = open_store(str(study)).trials()
    assert len(rows) == 4   # the default first, with the searched knobs' default values written out
    assert rows[0]["config"] == {"save_60_changes": 10000, "tcp_backlog": 511, "timeout": 0}
    code = main(["best", "--study", str(study), "--format", "yaml"])
    text = capsys.readouterr().out
    assert code == 0
    # four SMAC trials may not beat the default: then the best is the default and the YAML says so
    if result["best"]["config"] == rows[0]["config"]:
        assert "# the default configuration: no changes" in text
    else:
        assert "# diff against the default" in text
    directives = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert all(ln.split()[0] in ("tcp-backlog", "timeout", "save") for ln in directives), directives


def test_external_target_drives_redis_by_commands(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "external.db"
    code, result = run(capsys, "bench", "--system", "external", "--target-file", str(REDIS_TARGET),
                       "--workload", "ycsb-c", *SMALL, "--repeat", "2", "--set", "hz=25", "--study", str(study))
    assert code == 0, result
    store = open_store(str(study))
    rows = store.trials()
    assert [r["state"] for r in rows] == ["COMPLETE"] * 2
    assert all(r["metrics"]["summary"]["read_count"] == 20000 and r["metrics"]["errors"] == 0 for r in rows)
    assert store.find_study("bench")["system"] == "external"
    (env,) = store.environments().values()
    assert env["system"] == "external:redis-by-commands" and "v=7" in env["system_version"]


def _target(tmp_path: Path, **steps: str) -> Path:
    """A user's target file around the example Redis one, with some steps replaced."""
    text = REDIS_TARGET.read_text()
    import yaml

    data = yaml.safe_load(text)
    data["config"]["base"] = str(REDIS_TARGET.parent / "base.conf")
    for name, run_ in steps.items():
        data["steps"][name] = yaml.safe_load(run_)
    path = tmp_path / "target.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_external_target_step_failures_are_failed_trials(nosqltune_home, tmp_path, capsys):
    """A failing step and a health check that never passes end as failed trials with the commands' output,
    and the started process is gone afterwards (the no_orphans fixture checks that too)."""
    study = tmp_path / "faults.db"
    failing = _target(tmp_path, reset='{run: "echo restoring the data; echo no space left >&2; exit 3", timeout: 10}')
    code, _ = run(capsys, "bench", "--system", "external", "--target-file", str(failing), *SMALL,
                  "--study", str(study))
    assert code == 1
    hanging = tmp_path / "hang"
    hanging.mkdir()
    never = _target(hanging, start='{run: "exec sleep 299.4321", timeout: 10, background: true}',
                    health='{run: "false", timeout: 2}')
    code, _ = run(capsys, "bench", "--system", "external", "--target-file", str(never), *SMALL,
                  "--study", str(study))
    assert code == 1
    first, second = open_store(str(study)).trials()
    assert first["state"] == "FAIL" and first["failure_kind"] == "refused"
    assert "step reset failed (exit 3): no space left" in first["error"]
    assert "restoring the data" in first["log_excerpt"]
    assert second["state"] == "FAIL" and second["failure_kind"] == "timeout"
    assert "step health did not pass within 2 s" in second["error"]
    assert second["timings"]["total_s"] < 30
    assert not our_jvms("sleep 299.4321")   # the start step's process was killed


def test_bad_target_file_is_a_one_line_error(nosqltune_home, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""\
        name: broken
        knobs: redis
        steps: {start: "redis-server"}
        """))
    code = main(["bench", "--system", "external", "--target-file", str(bad), "--study", str(tmp_path / "x.db")])
    err = capsys.readouterr().err
    assert code == 2 and "missing step health, stop" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()


@pytest.mark.slow   # 30 s; the external target's command files are exercised on Redis in `make test`
def test_external_target_with_a_cassandra_node_standing_in_for_a_cql_datastore(nosqltune_home, tmp_path, capsys):
    """The CQL path of the external target (ScyllaDB's, which cannot be installed here): schema and YCSB load
    through the Cassandra binding, snapshot after a drained stop, reset from it, the rendered yaml read by the
    node (`nosqltune node`)."""
    study = tmp_path / "cql.db"
    target_file = REPO / "examples" / "targets" / "cql-node" / "target.yaml"
    code, result = run(capsys, "bench", "--system", "external", "--target-file", str(target_file),
                       "--workload", "ycsb-a", "--records", "2000", "--operations", "3000", "--threads", "4",
                       "--warmup-ops", "1000", "--set", "concurrent_writes=48", "--keep-nodes", "--study", str(study))
    assert code == 0, result
    (row,) = open_store(str(study)).trials()
    assert row["state"] == "COMPLETE"
    summary = row["metrics"]["summary"]
    assert summary["read_count"] + summary["update_count"] == 3000 and summary["errors"] == 0
    (workdir,) = [d for d in (nosqltune_home / "nodes").iterdir() if d.name.startswith("external-")
                  and (d / "node").exists()]
    assert "concurrent_writes: 48" in (workdir / "overrides.yaml").read_text()
    assert "concurrent_writes: 48" in (workdir / "node" / "conf" / "cassandra.yaml").read_text()
    assert not (workdir / "node" / "pid").exists()          # the node drained and stopped in the stop step


def test_external_target_run_step_replaces_the_built_in_client(nosqltune_home, tmp_path, capsys):
    """A target may run the workload itself: its run step's output (YCSB's text format) is the trial's result."""
    import shlex

    from nosqltune.workloads.loadgen import loadgen_java_command
    from nosqltune.workloads.spec import make_workload
    from nosqltune.workloads.ycsb import write_properties

    props = tmp_path / "c.properties"
    workload = make_workload("ycsb-c", records=3000, operations=7000, threads=2, warmup_operations=1000)
    write_properties(props, {**workload.properties("run"), "db": "nosqltune.loadgen.RedisClient"})
    client = " ".join(shlex.quote(a) for a in loadgen_java_command(
        "nosqltune.loadgen.PhasedClient", ["-t", "-P", str(props), "-p", "PORT", "-s"], []))
    client = client.replace(" PORT ", ' "redis.port=${port}" ')   # a placeholder is a variable: not in '...'
    assert '"redis.port=${port}"' in client
    custom = _target(tmp_path, run=yaml_step(client, 120))
    study = tmp_path / "run-step.db"
    code, result = run(capsys, "bench", "--system", "external", "--target-file", str(custom), "--workload",
                       "ycsb-c", "--records", "3000", "--study", str(study))
    assert code == 0, result
    (row,) = open_store(str(study)).trials()
    assert row["state"] == "COMPLETE" and row["metrics"]["summary"]["read_count"] == 7000   # the step's figures
    assert row["metrics"]["errors"] == 0 and row["metrics"]["warmup"]["operations"] >= 1000


def yaml_step(command: str, timeout: int) -> str:
    import yaml

    return yaml.safe_dump({"run": command, "timeout": timeout}, default_flow_style=True, width=10_000)
