"""The target seam without a datastore: registry, Redis config rendering and memory guard, external target files
(checking and rendering)."""

import textwrap

import pytest
import yaml

from nosqltune.errors import UsageError
from nosqltune.knobs import load_space
from nosqltune.systems import TARGETS, target
from nosqltune.systems.external.target import load_target
from nosqltune.systems.external.trial import render_config
from nosqltune.systems.redis.server import RedisServer, render_directives
from nosqltune.systems.redis.trial import estimated_bytes, preflight
from nosqltune.systems.base import TrialSettings
from nosqltune.workloads.spec import make_workload


def test_every_target_has_the_interface():
    for name in TARGETS:
        module = target(name).module   # each datastore's trial module has the six functions of the Target
        for function in ("knob_space", "default_knobs", "preflight", "fingerprint", "config_fragment",
                         "run_trial"):
            assert callable(getattr(module, function)), (name, function)
    with pytest.raises(ValueError, match="unknown system 'mongodb'"):
        target("mongodb")


def test_settings_stored_before_the_seam_mean_cassandra():
    old = TrialSettings().flat()
    del old["system"], old["target_file"]
    assert TrialSettings.from_dict(old).system == "cassandra"


def test_redis_directives_are_written_in_redis_conf_terms():
    space = load_space("redis")
    overrides = space.validate({"appendonly": "true", "maxmemory": "256", "maxmemory_policy": "allkeys-lru",
                                "save_60_changes": "2000", "hz": "50"})
    lines = render_directives(space, overrides)
    assert lines == ["appendonly yes", "maxmemory 256mb", "maxmemory-policy allkeys-lru",
                     "save 3600 1 300 100 60 2000", "hz 50"]
    server = RedisServer(home=__import__("pathlib").Path("/srv/t"), directives=lines, port=7001)
    text = server.config_text()
    # the harness's own lines first, the knobs last (in redis.conf the last of a repeated directive wins)
    assert text.index("port 7001") < text.index("appendonly yes")
    assert "dir /srv/t/data" in text and text.endswith("hz 50\n")


def test_redis_config_fragment_is_what_best_prints():
    settings = TrialSettings(system="redis")
    assert target("redis").config_fragment(settings, {"timeout": 30, "tcp_backlog": 128}) == \
        ["timeout 30", "tcp-backlog 128"]
    assert target("redis").default_knobs(settings) == "mlos6"


def test_memory_guard():
    workload = make_workload("ycsb-a", records=1_000_000)
    need = estimated_bytes(workload)
    assert 1.5e9 < need < 2.5e9            # about 2 KB per record of 10 x 100 B
    settings = TrialSettings(system="redis")
    preflight(workload, settings, available=need + (2 << 30))    # fits with room for the client
    with pytest.raises(UsageError, match=r"1000000 records of 10 x 100 B need about 1\.9 GiB .* 3\.0 GiB available"):
        preflight(workload, settings, available=3 << 30)
    small = make_workload("ycsb-a", records=1_000_000, fieldlength=10)
    preflight(small, settings, available=3 << 30)                 # smaller records fit where the large did not


def write_target(tmp_path, text: str, **files: str):
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    path = tmp_path / "target.yaml"
    path.write_text(textwrap.dedent(text))
    return path


STEPS = """\
steps:
  start: {run: "server --port ${port}", timeout: 20, background: true}
  health: {run: "check ${port}", timeout: 10}
  stop: "stop ${port}"
"""


@pytest.mark.parametrize("body, message", [
    ("knobs: redis\n", "`steps` must be a mapping"),
    ("knobs: redis\nsteps: {start: x}\n", "missing step health, stop"),
    ("knobs: nosuch\n" + STEPS, "unknown system 'nosuch'"),
    ("knobs: redis\nbinding: mongo\n" + STEPS, "binding must be one of cassandra, redis"),
    ("knobs: redis\nendpoint: {port: 99999}\n" + STEPS, "endpoint port must be a port number or auto"),
    ("knobs: redis\nconfig: {format: lines}\n" + STEPS, "config format lines needs `file:`"),
    ("knobs: redis\nconfig: {format: template, file: x}\n" + STEPS, "needs `base:`"),
    ("knobs: redis\nconfig: {format: lines, file: x, base: missing.conf}\n" + STEPS, "config base/template not found"),
    ("knobs: redis\ndefault_knobs: nosuchset\n" + STEPS, "default_knobs: unknown knob set 'nosuchset'"),
    ("knobs: redis\nsteps: {start: x, health: y, stop: z, restart: w}\n", "unknown step restart"),
    ("knobs: redis\nsteps: {start: x, health: {run: y, timeout: -1}, stop: z}\n", "timeout must be a positive"),
    ("knobs: redis\nsteps: {start: x, health: {run: y, background: true}, stop: z}\n", "for the start step only"),
    ("knobs: redis\nflavour: x\n" + STEPS, "unknown entry flavour"),
    ("knobs: [redis\n", "not valid YAML"),
])
def test_target_file_errors_are_one_line(tmp_path, body, message):
    path = write_target(tmp_path, body)
    with pytest.raises(UsageError, match=message) as info:
        load_target(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_target_rendering_lines_yaml_template(tmp_path):
    lines = load_target(write_target(tmp_path, "knobs: redis\nconfig: {format: lines, file: '${workdir}/r.conf', "
                                     "base: base.conf}\n" + STEPS, **{"base.conf": "bind 127.0.0.1\n"}))
    space = lines.knob_space()
    assert render_config(lines, space, {"appendonly": True, "timeout": 5}, {}) == \
        "bind 127.0.0.1\nappendonly yes\ntimeout 5\n"

    base = "cluster_name: test\ncompaction_throughput: 64MiB/s\nnested: {a: 1}\n"
    knob_file = tmp_path / "knobs.yaml"
    knob_file.write_text(textwrap.dedent("""\
        system: demo
        version: "1"
        knobs:
          throughput:
            type: int
            range: [0, 1024]
            default: 64
            applies: yaml
            key: compaction_throughput_mb_per_sec
            description: compaction throughput
          inner:
            type: bool
            default: false
            applies: yaml
            key: nested.b
            description: a nested key
        """))
    as_yaml = load_target(write_target(tmp_path, "knobs: knobs.yaml\nconfig: {format: yaml, file: x.yaml, "
                                       "base: base.yaml}\n" + STEPS, **{"base.yaml": base}))
    rendered = yaml.safe_load(render_config(as_yaml, as_yaml.knob_space(), {"throughput": 256, "inner": True}, {}))
    assert rendered == {"cluster_name": "test", "compaction_throughput": "64MiB/s", "nested": {"a": 1, "b": True},
                        "compaction_throughput_mb_per_sec": 256}

    template = load_target(write_target(tmp_path, "knobs: knobs.yaml\nconfig: {format: template, file: x, "
                                        "base: t.conf}\n" + STEPS,
                                        **{"t.conf": "port=${port}\nthroughput=${throughput}\ninner=${inner}\n"
                                                     "cost=$$5 ${unknown}\n"}))
    assert render_config(template, template.knob_space(), {"inner": True}, {"port": "7000"}) == \
        "port=7000\nthroughput=64\ninner=true\ncost=$5 ${unknown}\n"   # every knob, defaults included

    none = load_target(write_target(tmp_path, "knobs: redis\n" + STEPS))
    assert render_config(none, none.knob_space(), {"timeout": 5}, {}) is None
    assert none.port is None and none.binding == "cassandra" and none.name == "target"


def test_yaml_format_refuses_knobs_that_are_not_yaml_keys(tmp_path):
    target_ = load_target(write_target(tmp_path, "knobs: redis\nconfig: {format: yaml, file: x}\n" + STEPS))
    with pytest.raises(UsageError, match="timeout applies to config"):
        render_config(target_, target_.knob_space(), {"timeout": 5}, {})


def test_example_targets_render_each_datastore_in_its_own_terms():
    """ScyllaDB's old-style keys take bare numbers (with a unit suffix it logs an error and keeps its default);
    Cassandra 5.0's keys take units. The same yaml format writes each as its datastore reads it."""
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples" / "targets"
    scylla = load_target(examples / "scylla" / "target.yaml")
    text = render_config(scylla, scylla.knob_space(), {"commitlog_segment_size_in_mb": 64,
                                                       "compaction_throughput_mb_per_sec": 256}, {})
    rendered = yaml.safe_load(text)
    assert rendered["commitlog_segment_size_in_mb"] == 64 and rendered["compaction_throughput_mb_per_sec"] == 256
    assert rendered["cluster_name"] == "nosqltune"           # the base file's settings stay
    cql = load_target(examples / "cql-node" / "target.yaml")
    rendered = yaml.safe_load(render_config(cql, cql.knob_space(), {"memtable_heap_space": 1024,
                                                                    "concurrent_writes": 48}, {}))
    assert rendered == {"memtable_heap_space": "1024MiB", "concurrent_writes": 48}
    with pytest.raises(UsageError, match="applies to table"):
        render_config(cql, cql.knob_space(), {"compaction_method": "Leveled"}, {})


def test_values_reach_a_target_step_through_the_environment_never_as_shell_code(tmp_path):
    """Issue 22: a knob value (or any place) holding `;`, `$(...)` or backticks is expanded by bash as a value,
    never parsed as a command; the log shows the command with the values written in."""
    from nosqltune.systems.external.target import Step
    from nosqltune.systems.external.trial import Runner

    target = load_target(_write_target(tmp_path))
    pwned = tmp_path / "pwned"
    evil = f"x; touch {pwned}; $(touch {pwned}) `touch {pwned}`"
    workdir = tmp_path / "work dir"      # a place with a space: quoted in the command, it stays one word
    workdir.mkdir()
    places = {"workdir": str(workdir), "host": "127.0.0.1", "port": "7001"}
    log = tmp_path / "steps.log"
    runner = Runner(target, places, {"policy": evil}, log)
    step = Step(run='printf "%s|%s" "${policy}" "${workdir}" > "${workdir}/out.txt"; echo ${port} >> "${workdir}/out.txt"',
                timeout=10)
    runner.run("echo", step)
    assert not pwned.exists()
    assert (workdir / "out.txt").read_text() == f"{evil}|{workdir}7001\n"
    assert evil in log.read_text()       # what ran, with its values, for the user to read


def _write_target(tmp_path):
    path = tmp_path / "target.yaml"
    path.write_text(textwrap.dedent("""
        name: shell-test
        knobs: redis
        binding: redis
        config: {format: none}
        steps:
          start: {run: "sleep 1", background: true}
          health: "true"
          stop: "true"
    """))
    return path
