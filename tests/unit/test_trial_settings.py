"""The harness settings (systems/settings.py): a part every trial has and a part per datastore, stored and read
back per datastore, and read from the flat form stored before the split.

Everything keyed by the settings must not move when their shape does: 40 GB of cached datasets and the committed
studies depend on it. The first tests below pin, as literals captured with the flat TrialSettings before the
split, the dataset keys, the rate cache key, the surrogate's features, the machine fingerprint and the stored
bottleneck verdict for representative settings; every committed study in bench/results must open and give back
what its flat dict said, field by field."""

from __future__ import annotations

import copy
import glob
import json
import sqlite3
from pathlib import Path

import pytest

from nosqltune.systems import target
from nosqltune.systems.base import TrialResult
from nosqltune.systems.settings import (COMMON_FIELDS, FLAT_FORM, CassandraSettings, ExternalSettings, RedisSettings,
                                        TrialSettings)
from nosqltune.workloads.spec import make_workload

ROOT = Path(__file__).resolve().parents[2]


def settings_of(flat: dict) -> TrialSettings:
    """Settings from a flat dict, the form every study stored before the split (before it: TrialSettings(**flat))."""
    return TrialSettings.from_dict(flat)


def flat_of(settings: TrialSettings) -> dict:
    """The settings as the flat dict stored before the split (before it: settings.to_dict())."""
    return settings.flat()


GP3 = {"name": "aws-gp3", "read_ahead_kb": 128, "read_iops": 1000, "read_mbps": 42, "write_iops": 1000,
       "write_mbps": 42}

# representative settings, flat, as `cli/harness.py` made them before the split
CASES = {
    "cassandra-default": {"system": "cassandra", "jit": "c1", "scenario": "in-memory"},
    "cassandra-bare": {},
    "disk-bound": {"system": "cassandra", "jit": "c1", "heap_mb": 1024, "scenario": "disk-bound",
                   "page_cache_mb": 256, "offheap_mb": 768, "warm_page_cache": False},
    "disk-bound-warm-cql": {"system": "cassandra", "jit": "c1", "heap_mb": 1024, "scenario": "disk-bound",
                            "page_cache_mb": 256, "offheap_mb": 768, "warm_page_cache": True, "load_method": "cql",
                            "server_cpus": "0", "client_cpus": "1"},
    "cloud-disk": {"system": "cassandra", "jit": "c1", "heap_mb": 1024, "scenario": "cloud-disk",
                   "page_cache_mb": 256, "offheap_mb": 768, "warm_page_cache": True, "volume": dict(GP3)},
    "cluster-2n-rf2": {"system": "cassandra", "jit": "c1", "heap_mb": 768, "nodes": 2, "replication_factor": 2,
                       "read_consistency": "TWO", "write_consistency": "ONE",
                       "per_node": {"2": {"concurrent_writes": 64}}},
    "redis": {"system": "redis", "jit": "c1", "scenario": "in-memory"},
    "external": {"system": "external", "jit": "c1", "scenario": "in-memory", "target_file": "/srv/targets/kv.yaml"},
}

# the verdict stored for verdict_of's fixed trial where nothing caps the node: its client's threads are the limit
CLIENT_LIMITED = {"limit": "client-threads",
                  "utilisation": {"client_cores": 0.4, "cores_available": 2, "cores_busy": 0.65, "node_cores": 0.9,
                                  "read_iops": 950.0, "read_mbps": 5.0, "write_iops": 10.0, "write_mbps": 1.0}}

# captured with the flat TrialSettings (commit 2a1e121) before the split, the machine and Redis's version held still
EXPECTED = {"cassandra-default": {"dataset": "5e994e92a10c0686",
                       "design": {},
                       "fingerprint": {"system": "cassandra", "system_version": "5.0.6"},
                       "rate": "864df4a1727154c4",
                       "verdict": CLIENT_LIMITED},
 "cassandra-bare": {"dataset": "5e994e92a10c0686",
                    "design": {},
                    "fingerprint": {"system": "cassandra", "system_version": "5.0.6"},
                    "rate": "f85f82756c9a7b0c",
                    "verdict": CLIENT_LIMITED},
 "disk-bound": {"dataset": "6d33256266574dca",
                "design": {},
                "fingerprint": {"system": "cassandra", "system_version": "5.0.6"},
                "rate": "d5e9ec66d17c0ef1",
                "verdict": CLIENT_LIMITED},
 "disk-bound-warm-cql": {"dataset": "9c825989967c9330",
                         "design": {},
                         "fingerprint": {"system": "cassandra", "system_version": "5.0.6"},
                         "rate": "5466379385f473a3",
                         "verdict": {"limit": "node-cores",
                                     "utilisation": {"client_cores": 0.4,
                                                     "cores_available": 2,
                                                     "node_cores": 0.9,
                                                     "read_iops": 950.0,
                                                     "read_mbps": 5.0,
                                                     "write_iops": 10.0,
                                                     "write_mbps": 1.0}}},
 "cloud-disk": {"dataset": "6d33256266574dca",
                "design": {},
                "fingerprint": {"system": "cassandra", "system_version": "5.0.6"},
                "rate": "70a69a96f2c880a2",
                "verdict": {"limit": "volume-iops",
                            "utilisation": {"client_cores": 0.4,
                                            "cores_available": 2,
                                            "cores_busy": 0.65,
                                            "node_cores": 0.9,
                                            "read_iops": 950.0,
                                            "read_mbps": 5.0,
                                            "volume_read_iops": 0.95,
                                            "volume_read_mbps": 0.119,
                                            "volume_write_iops": 0.01,
                                            "volume_write_mbps": 0.0238,
                                            "write_iops": 10.0,
                                            "write_mbps": 1.0}}},
 "cluster-2n-rf2": {"dataset": "d222d79ac53eb486",
                    "design": {"nodes": 2, "replication_factor": 2},
                    "fingerprint": {"system": "cassandra", "system_version": "5.0.6"},
                    "rate": "9bd96a71a897c0a0",
                    "verdict": CLIENT_LIMITED},
 "redis": {"dataset": "3f964ce9bee9eb23",
           "design": {},
           "fingerprint": {"system": "redis", "system_version": "7.0.15"},
           "rate": "0d6be3afc7479930",
           "verdict": CLIENT_LIMITED},
 "external": {"dataset": "b329753f5ae6b827",
              "design": {},
              "fingerprint": {"system": "external:kv", "system_version": "unknown"},
              "rate": "e377b1c956f9e613",
              "verdict": CLIENT_LIMITED}}

TARGET_TEXT = """\
name: kv
knobs: redis
steps:
  start: {run: "server --port ${port}", timeout: 20, background: true}
  health: {run: "check ${port}", timeout: 10}
  stop: "stop ${port}"
"""


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    """What the keys read besides the settings held still: the machine (fingerprint), Redis's version, the
    external target file (read from tmp_path whatever path the settings name), and the dataset cache (a dataset
    found held, so nothing is built)."""
    import nosqltune.runtime.environment as environment
    import nosqltune.systems.cassandra.trial as cassandra
    import nosqltune.systems.external.trial as external
    import nosqltune.systems.redis.trial as redis
    from nosqltune.systems.external.target import load_target

    monkeypatch.setattr(environment, "fingerprint", lambda system, version: {"system": system,
                                                                            "system_version": version})
    monkeypatch.setattr(redis, "redis_version", lambda: "7.0.15")
    file = tmp_path / "kv.yaml"
    file.write_text(TARGET_TEXT)
    monkeypatch.setattr(external, "load_target", lambda _path: load_target(file))
    keys: list[str] = []

    class Held:
        def __init__(self, key):
            keys.append(key)
            self.key = key

        def hold(self):
            return True

    for module in (cassandra, redis, external):
        monkeypatch.setattr(module, "dataset_for", Held)
    return keys


def _workload():
    return make_workload("ycsb-a", records=5000, operations=2000, threads=8)


def dataset_key_of(settings: TrialSettings, keys: list[str]) -> str:
    from nosqltune.knobs import load_space

    workload = _workload()
    if settings.system == "cassandra":
        from nosqltune.systems.cassandra.trial import ensure_dataset

        ensure_dataset(load_space("cassandra"), {}, workload, settings)
    elif settings.system == "redis":
        from nosqltune.systems.redis.trial import ensure_dataset

        ensure_dataset(workload, settings)
    else:
        from nosqltune.systems.external.trial import _target, ensure_dataset

        found = _target(settings)
        ensure_dataset(found, found.knob_space(), workload, settings)
    return keys[-1]


def rate_key_of(settings: TrialSettings) -> str:
    from nosqltune.evaluation.rates import _key

    return _key(settings, _workload(), {"concurrent_reads": 32} if settings.system == "cassandra" else {})


def design_of(settings: TrialSettings) -> dict:
    """The surrogate's design features of a trial stored with these settings, and its knob space's name."""
    from nosqltune.surrogate.features import workload_features

    return workload_features({**_workload().to_dict(), "harness": settings.to_dict()})["design"]


def verdict_of(settings: TrialSettings, monkeypatch) -> dict:
    """The bottleneck verdict a trial of these settings stores (systems.Datastore.run_trial)."""
    import nosqltune.runtime.probe as probe

    datastore = target(settings.system)
    summary = {"throughput_ops_s": 1000.0, "node_cpu_cores": 0.9, "client_cpu_cores": 0.4,
               "node_group_read_iops": 950.0, "node_group_write_iops": 10.0,
               "node_group_read_mib_s": 5.0, "node_group_write_mib_s": 1.0}
    monkeypatch.setattr(probe, "machine_probe", lambda: {"seconds": 1.0})
    monkeypatch.setattr(probe, "disk_probe", lambda folder: {})
    monkeypatch.setattr(datastore.module, "run_trial",
                        lambda *a: TrialResult(state="COMPLETE", summary=dict(summary)))
    monkeypatch.setattr("nosqltune.bottleneck._usable_cores", lambda: 2)
    from nosqltune.knobs import load_space

    space = load_space("cassandra" if settings.system == "cassandra" else "redis")
    result = datastore.run_trial(space, {}, _workload(), settings)
    stored = result.internals["bottleneck"]
    return {"limit": stored["limit"], "utilisation": stored["utilisation"]}


@pytest.mark.parametrize("name", list(CASES))
def test_keys_stay_what_they_were(name, pinned, monkeypatch):
    settings = settings_of(copy.deepcopy(CASES[name]))
    got = {"dataset": dataset_key_of(settings, pinned), "rate": rate_key_of(settings),
           "design": design_of(settings), "fingerprint": target(settings.system).fingerprint(settings),
           "verdict": verdict_of(settings, monkeypatch)}
    assert got == EXPECTED[name]


STORES = sorted(glob.glob(str(ROOT / "bench" / "results" / "**" / "*.db"), recursive=True))


@pytest.mark.parametrize("path", STORES, ids=lambda p: str(Path(p).relative_to(ROOT / "bench" / "results")))
def test_committed_studies_open_with_the_settings_they_stored(path, tmp_path):
    """Every study of the committed stores opens as the commands open it (study_of for a `tune` study) and gives
    back, field by field, what its flat dict said (a field it did not store: the flat form's default); so do
    the harness settings each of its trials stored. Read from a copy: SQLite leaves -shm/-wal files beside a
    WAL store even when it only reads it."""
    import shutil

    from nosqltune.evaluation.study import study_of
    from nosqltune.store import open_reader

    path = shutil.copy(path, tmp_path / Path(path).name)
    defaults = flat_of(TrialSettings())
    store = open_reader(path)
    try:
        for record in store.studies():
            for tag in ("tune", "collect"):
                stored = (record["settings"].get(tag) or {}).get("harness")
                if stored is None:
                    continue
                settings = study_of(store, record).settings if tag == "tune" else settings_of(stored)
                if "datastore" in stored:   # the form stored since the settings split by datastore: given back whole
                    assert settings.to_dict() == stored, (record["name"], tag)
                else:                       # the flat form of the studies stored before
                    assert flat_of(settings) == {**defaults, **stored}, (record["name"], tag)
                assert settings.system == stored.get("system", "cassandra")
    finally:
        store.close()
    # the trials' own copies, read straight from the file (the oldest stores predate columns the reader expects)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        stored_by_trials = {row[0] for row in db.execute("SELECT json_extract(workload, '$.harness') FROM trials")}
    for text in stored_by_trials - {None}:
        harness = json.loads(text)
        if "datastore" in harness:   # the nested form: given back whole
            assert settings_of(harness).to_dict() == harness, text
        else:
            assert flat_of(settings_of(harness)) == {**defaults, **harness}, text


@pytest.mark.parametrize("name", list(CASES))
def test_stored_form_round_trips(name):
    """to_dict -> from_dict gives the same settings, through JSON too (as a store keeps them); the datastore's
    fields sit under "datastore", and a Redis or external trial stores none of Cassandra's."""
    settings = settings_of(copy.deepcopy(CASES[name]))
    stored = json.loads(json.dumps(settings.to_dict()))
    assert TrialSettings.from_dict(stored) == settings
    assert TrialSettings.from_dict(stored).to_dict() == stored
    assert flat_of(TrialSettings.from_dict(stored)) == {**FLAT_FORM, **CASES[name]}
    own = {"cassandra": set(FLAT_FORM) - COMMON_FIELDS - {"target_file"}, "redis": set(),
           "external": {"target_file"}}[settings.system]
    assert set(stored) == COMMON_FIELDS | {"datastore"} and set(stored["datastore"]) == own


def test_the_parts_are_typed_per_datastore():
    assert isinstance(TrialSettings().datastore, CassandraSettings)
    assert isinstance(TrialSettings(system="redis").datastore, RedisSettings)
    external = TrialSettings(system="external", datastore=ExternalSettings(target_file="/t.yaml"))
    assert external.external.target_file == "/t.yaml"
    with pytest.raises(ValueError, match="a redis trial has no Cassandra settings"):
        TrialSettings(system="redis").cassandra
    with pytest.raises(ValueError, match="redis trials take RedisSettings, not CassandraSettings"):
        TrialSettings(system="redis", datastore=CassandraSettings())
    # the flat form's defaults are the classes' defaults today (FLAT_FORM is frozen: a changed default shows here)
    assert TrialSettings().flat() == FLAT_FORM and FLAT_FORM["heap_mb"] == CassandraSettings().heap_mb


def test_a_flat_redis_study_drops_cassandras_defaults_and_keeps_the_rest():
    """Migration: Cassandra's fields in a flat Redis or external dict are dropped when they hold the flat form's
    defaults (every committed one does); one that does not is kept in `unused`, as stored, so the flat form (and
    the rate key computed from it) is what it was, and it survives a round trip."""
    plain = TrialSettings.from_dict({**FLAT_FORM, "system": "redis", "jit": "c1"})
    assert plain.unused == {} and "unused" not in plain.to_dict() and plain.datastore == RedisSettings()
    odd = {**FLAT_FORM, "system": "redis", "jit": "c1", "heap_mb": 4096, "cassandra_version": "4.1.5"}
    settings = TrialSettings.from_dict(odd)
    assert settings.unused == {"heap_mb": 4096, "cassandra_version": "4.1.5"}
    assert settings.flat() == odd
    assert TrialSettings.from_dict(json.loads(json.dumps(settings.to_dict()))) == settings
    external = TrialSettings.from_dict({"system": "external", "target_file": "/t.yaml", "nodes": 1, "heap_mb": 2048})
    assert external.datastore == ExternalSettings(target_file="/t.yaml") and external.unused == {}


def test_a_field_no_form_knows_is_one_line():
    from nosqltune.errors import UsageError

    with pytest.raises(UsageError, match="fields this version does not know: colour$"):
        TrialSettings.from_dict({"system": "cassandra", "colour": "blue"})
    with pytest.raises(UsageError, match="CassandraSettings stored here have fields this version does not know: x"):
        TrialSettings.from_dict({"system": "cassandra", "datastore": {"x": 1}})
    with pytest.raises(UsageError, match="unknown system 'mongodb'"):
        TrialSettings.from_dict({"system": "mongodb"})


def test_a_design_knob_sets_cassandras_part():
    from nosqltune.knobs import load_space
    from nosqltune.systems.base import with_design

    space = load_space("cassandra")
    designed, rest = with_design(space, TrialSettings(), {"nodes": 3, "replication_factor": 2,
                                                          "concurrent_reads": 32})
    assert designed.cassandra.design() == {"nodes": 3, "replication_factor": 2}
    assert rest == {"concurrent_reads": 32} and TrialSettings().cassandra.nodes == 1


@pytest.mark.parametrize("flags", [["--heap", "1G"], ["--cassandra-version", "5.0.6"]])
@pytest.mark.parametrize("system", ["redis", "external"])
def test_cassandras_flags_are_refused_for_another_datastore(flags, system, tmp_path, monkeypatch, capsys):
    from nosqltune.cli import main

    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    file = tmp_path / "kv.yaml"
    file.write_text(TARGET_TEXT)
    argv = ["bench", "--system", system, *flags, "--study", str(tmp_path / "s.db")]
    code = main(argv + (["--target-file", str(file)] if system == "external" else []))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"is for Cassandra (--system cassandra), not {system}" in err
    assert not (tmp_path / "s.db").exists()
