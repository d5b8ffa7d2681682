"""`nosqltune export-config` on committed studies: the files an operator applies, every setting tagged with how it
is applied, and only a configuration confirmed against the default exported unless --force."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from nosqltune.cli import main
from nosqltune.export import FILES, patched_yaml, tablestats_bytes

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"
# what a stock 5.0 cassandra.yaml looks like where these keys live: the sstable block's key commented out
BASE = """cluster_name: 'Prod Cluster'
num_tokens: 16
concurrent_reads: 32
# key_cache_size:
sstable:
#  selected_format: big
storage_compatibility_mode: CASSANDRA_4
"""
TABLESTATS = """Total number of tables: 2
----------------
Keyspace : shop
\tRead Count: 10
\t\tTable: orders
\t\tSpace used (live): 1073741824
\t\tSpace used (total): 1073741824
\t\tTable: carts
\t\tSpace used (live): 5000
"""


@pytest.fixture()
def cloud_disk(tmp_path):
    study = tmp_path / "cloud-disk.db"
    shutil.copy(RESULTS / "impact" / "cloud-disk.db", study)
    return study


def test_the_confirmed_cloud_disk_best_is_written_as_files_with_every_setting_tagged(cloud_disk, tmp_path, capsys):
    base = tmp_path / "cassandra.yaml"
    base.write_text(BASE)
    stats = tmp_path / "tablestats.txt"
    stats.write_text(TABLESTATS)
    out = tmp_path / "plan"
    assert main(["export-config", "--study", str(cloud_disk), "--study-name", "irace", "--out", str(out),
                 "--table", "shop.orders", "--base", str(base), "--tablestats", str(stats), "--device", "nvme1n1",
                 "--optional", "key_cache_size", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)
    assert said["confirmed"] and "10 interleaved cold rounds" in said["evidence"]
    tags = {s["knob"]: s["tags"] for s in said["settings"]}
    assert "live" in tags["concurrent_reads"] and "tuned on the rig" in tags["concurrent_reads"]
    assert {"restart", "tuned on the rig"} <= set(tags["heap_size"]) and tags["gc"] == ["restart"]
    assert {"rewrite", "irreversible"} <= set(tags["compression"])
    assert {"cluster-wide, in steps", "irreversible", "restart"} <= set(tags["sstable_format"])
    assert "optional" in tags["key_cache_size"]
    files = {name: (out / name).read_text() for name in FILES}

    # the patch applies to the operator's own file and gives what the configuration asks
    work = tmp_path / "apply"
    work.mkdir()
    (work / "cassandra.yaml").write_text(BASE)
    subprocess.run(["patch", "-s", "cassandra.yaml"], input=files["cassandra.yaml.patch"], text=True, cwd=work,
                   check=True)
    applied = yaml.safe_load((work / "cassandra.yaml").read_text())
    assert applied["concurrent_reads"] == 3 and applied["sstable"] == {"selected_format": "bti"}
    assert applied["storage_compatibility_mode"] == "NONE" and applied["cluster_name"] == "Prod Cluster"
    assert "# key_cache_size:" in (work / "cassandra.yaml").read_text()   # comments kept

    # ZGC takes the G1 lines with it; the heap as -Xms/-Xmx
    jvm = files["jvm-server.options"]
    assert "#   -XX:+UseG1GC" in jvm and "#   -XX:G1HeapRegionSize=16m" in jvm and "\n-XX:+UseZGC" in jvm
    assert "\n-Xms642M\n-Xmx642M" in jvm
    # the user's table, not the benchmark's; the rewrite said
    assert "ALTER TABLE shop.orders WITH compression = {'class': 'ZstdCompressor'" in files["schema.cql"]
    assert "ycsb" not in files["schema.cql"] and "nodetool upgradesstables -a -j 1 shop orders" in files["schema.cql"]
    # read-ahead in 512-byte sectors, and a udev rule
    assert "blockdev --setra 30 /dev/nvme1n1" in files["volume.txt"]
    assert 'KERNEL=="nvme1n1", ATTR{bdi/read_ahead_kb}="15"' in files["volume.txt"]
    operator = yaml.safe_load(files["cass-operator.yaml"])["spec"]["config"]
    assert operator["jvm-server-options"] == {"initial_heap_size": "642M", "max_heap_size": "642M"}
    assert operator["jvm17-server-options"]["additional-jvm-opts"] == ["-XX:+UseZGC"]
    assert operator["cassandra-yaml"]["storage_compatibility_mode"] == "NONE"
    assert "k8ssandra-client" in files["cass-operator.yaml"] and "read 2026-11-28" in files["cass-operator.yaml"]
    plan = files["PLAN.md"]
    steps = plan[plan.index("## In this order"):]
    # the order: live first, the compatibility steps before the format, restarts, schema, rewrite with its I/O
    order = [steps.index(s) for s in ("Live settings", "UPGRADING", "storage_compatibility_mode: NONE",
                                     "Restart settings", "Table options", "Rewrite for", "read-ahead")]
    assert order == sorted(order)
    assert "about 1.0 GiB read and as much written per node" in plan      # orders only, from its tablestats
    assert "## Optional" in plan and "scenario cloud-disk" in plan and "tuned on the rig" in plan
    # plan.json: the same for a program, without the optional setting
    data = json.loads(files["plan.json"])
    assert data["system"] == "cassandra" and data["version"] == "5.0.6" and data["format"] == 1
    assert "key_cache_size" not in data["config"] and data["config"]["concurrent_reads"] == 3
    assert data["live"]["concurrent_reads"] == 3 and "heap_size" not in data["live"]
    assert data["yaml"]["storage_compatibility_mode"] == "NONE" and "-XX:+UseZGC" in data["jvm"]["add"]
    assert data["schema"][0].startswith("ALTER TABLE shop.orders WITH compression")
    assert data["rewrite"]["tables"] == ["shop.orders"] and "compression" in data["rewrite"]["knobs"]
    assert data["volume"] == {"read_ahead_kb": 15} and data["evidence"]["confirmed"]


def test_an_unconfirmed_best_is_refused_unless_forced_and_then_marked(tmp_path, capsys):
    study = tmp_path / "s.db"
    shutil.copy(RESULTS / "strategies_v5" / "cloud-disk-real.db", study)
    out = tmp_path / "plan"
    # gp+llamatune's own 3-round confirmation has p = 0.25: not enough; its 10-round comparison in the random
    # study is what confirms it, and the export finds it there
    assert main(["export-config", "--study", str(study), "--study-name", "gp+llamatune", "--out", str(out)]) == 0
    assert "in 10 interleaved cold rounds" in capsys.readouterr().out
    # a study's single-run best with no comparison: refused in one line, nothing written
    single = tmp_path / "single.db"
    shutil.copy(RESULTS / "tuning" / "llamatune-a.db", single)
    assert main(["export-config", "--study", str(single), "--out", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert "not confirmed against the default at p < 0.05" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
    assert main(["export-config", "--study", str(single), "--out", str(tmp_path / "forced"), "--force"]) == 0
    assert "NOT CONFIRMED" in (tmp_path / "forced" / "PLAN.md").read_text()


def test_bad_input_is_one_line_and_writes_nothing(cloud_disk, tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("concurrent_reads: [unclosed\n")
    cases = [(["--base", str(bad)], "does not parse as YAML"),
             (["--table", "orders"], "--table takes KEYSPACE.TABLE"),
             (["--candidate", "nope"], "has a candidate 'nope'"),
             (["--tablestats", str(bad)], "no 'Space used (live)' line")]
    for extra, message in cases:
        out = tmp_path / "out"
        code = main(["export-config", "--study", str(cloud_disk), "--study-name", "irace", "--out", str(out), *extra])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (extra, err)
        assert not out.exists()


def test_a_nested_key_goes_inside_its_block_and_a_missing_one_at_the_end():
    text = patched_yaml("sstable:\n#  selected_format: big\nother: 1\n", {"sstable.selected_format": "bti",
                                                                           "concurrent_reads": 8})
    assert yaml.safe_load(text) == {"sstable": {"selected_format": "bti"}, "other": 1, "concurrent_reads": 8}
    assert tablestats_bytes(TABLESTATS) == 1073741824 + 5000
    assert tablestats_bytes(TABLESTATS, ["shop.carts"]) == 5000 and tablestats_bytes("nothing", []) is None
