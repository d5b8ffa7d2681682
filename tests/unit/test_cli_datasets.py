"""`nosqltune datasets list|prune` on fake dataset folders; bad input is one line and exit 2."""

import json
import os
import time

import pytest

from nosqltune.cli import main


def _fake(folder, key, days_ago, kib=64, meta=None):
    root = folder / key
    (root / "data").mkdir(parents=True)
    (root / "data" / "dump.rdb").write_bytes(b"x" * kib * 1024)
    (root / "meta.json").write_text(json.dumps(meta or {"system": "redis", "records": 100,
                                                        "data": {"records": 100, "fieldcount": 10},
                                                        "redis_version": "7.0.15", "load_s": 1.0}))
    stamp = time.time() - days_ago * 86400
    (root / "last_used").touch()
    os.utime(root / "last_used", (stamp, stamp))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    folder = tmp_path / "datasets"
    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(folder))
    monkeypatch.delenv("NOSQLTUNE_DATASET_BUDGET", raising=False)
    return folder


def test_list_shows_every_dataset_and_the_budget(folder, capsys, monkeypatch):
    assert main(["datasets", "list"]) == 0
    assert f"0 dataset(s) in {folder}" in capsys.readouterr().out
    _fake(folder, "aaaa", 3)
    _fake(folder, "bbbb", 1, meta={"records": 5000, "data": {"records": 5000, "fieldcount": 10},
                                   "reload_knobs": {"num_tokens": 4}, "cassandra_version": "5.0.6",
                                   "drain_s": 2.0, "sync_s": 0.1})
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", "20G")
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"2 dataset(s) in {folder}: ") and "of a 20.0 GiB budget (NOSQLTUNE_DATASET_BUDGET=20G)" in out[0]
    assert out[1].split()[:9] == ["key", "datastore", "records", "size", "kept", "in", "last", "used", "in"]
    assert out[2].split()[:3] == ["bbbb", "cassandra", "5000"]         # most recently used first
    assert "cassandra_version=5.0.6 fieldcount=10 num_tokens=4" in out[2] and "drain_s" not in out[2]
    assert out[3].split()[:3] == ["aaaa", "redis", "100"] and "redis_version=7.0.15" in out[3]
    assert main(["datasets", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["budget_bytes"] == 20 << 30 and listed["folder"] == str(folder)
    assert [d["key"] for d in listed["datasets"]] == ["bbbb", "aaaa"]
    first = listed["datasets"][0]
    assert first["system"] == "cassandra" and first["records"] == 5000 and first["in_use"] is False
    assert first["bytes"] >= 64 * 1024 and first["shape"]["reload_knobs"] == {"num_tokens": 4}
    assert listed["total_bytes"] == sum(d["bytes"] for d in listed["datasets"])


def test_prune_removes_least_recently_used_and_says_what(folder, capsys):
    for key, days in (("d1", 1), ("d5", 5), ("d10", 10)):
        _fake(folder, key, days)
    assert main(["datasets", "prune", "--older-than", "7d"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("removed d10  redis") and out[-1].startswith("1 dataset(s) removed")
    assert sorted(p.name for p in folder.iterdir()) == ["d1", "d5"]
    assert main(["datasets", "prune", "--keep", "100K", "--json"]) == 0     # room for one of the two
    done = json.loads(capsys.readouterr().out)
    assert [d["key"] for d in done["removed"]] == ["d5"] and done["remaining"] == 1
    assert main(["datasets", "prune"]) == 0                                   # down to the budget: fits already
    assert "0 dataset(s) removed" in capsys.readouterr().out
    assert main(["datasets", "prune", "--all"]) == 0
    assert "removed d1" in capsys.readouterr().out and list(folder.iterdir()) == []


def test_prune_refuses_a_dataset_in_use(folder, capsys):
    import fcntl

    _fake(folder, "busy", 30)
    with open(folder / "busy" / "lock", "ab") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH)     # a trial restoring it holds it so
        assert main(["datasets", "list"]) == 0
        # key, datastore, records, size, kept in, last used, in use
        assert capsys.readouterr().out.splitlines()[2].split()[5:9:3] == ["folder", "yes"]
        assert main(["datasets", "prune", "--all"]) == 0
        out = capsys.readouterr().out
        assert "kept busy: in use by a running trial" in out and "0 dataset(s) removed" in out
    assert (folder / "busy" / "meta.json").exists()


@pytest.mark.parametrize("argv, message", [
    (["datasets", "prune", "--keep", "lots"], "--keep expects a size like 20G"),
    (["datasets", "prune", "--keep", "1G", "--all"], "not both"),
    (["datasets", "prune", "--older-than", "a while"], "--older-than expects a duration like 7d"),
    (["datasets", "list"], "NOSQLTUNE_DATASET_BUDGET expects a size"),
    (["datasets", "prune"], "NOSQLTUNE_DATASET_BUDGET expects a size"),
])
def test_bad_input_one_line_nothing_removed(argv, message, folder, capsys, monkeypatch):
    _fake(folder, "keep", 100)
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", "much" if "NOSQLTUNE" in message else "1K")
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in folder.iterdir()) == ["keep"]


def test_trial_commands_refuse_a_bad_budget_before_running(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NOSQLTUNE_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setenv("NOSQLTUNE_DATASET_BUDGET", "much")
    code = main(["bench", "--system", "redis", "--study", str(tmp_path / "s.db")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "NOSQLTUNE_DATASET_BUDGET" in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
