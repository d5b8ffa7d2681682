"""Rendering a node's cassandra.yaml and placing knobs where they apply (yaml, CQL table/keyspace)."""


import pytest
import yaml

from nosqltune.errors import SetupError
from nosqltune.knobs import load_space
from nosqltune.systems.cassandra.config import place
from nosqltune.systems.cassandra.node import CassandraNode, NodePorts, jvm_options, render_yaml


@pytest.fixture(scope="module")
def space():
    return load_space("cassandra")


def test_yaml_has_node_paths_ports_and_5_0_defaults(tmp_path):
    ports = NodePorts(native=19042, storage=17000, jmx=17199)
    settings = render_yaml(tmp_path, ports, {"concurrent_writes": 64, "sstable.selected_format": "big"})
    assert settings["native_transport_port"] == 19042 and settings["storage_port"] == 17000
    assert settings["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.1:17000"
    assert settings["data_file_directories"] == [str(tmp_path / "data")]
    assert settings["commitlog_directory"] == str(tmp_path / "commitlog")
    assert settings["num_tokens"] == 16 and settings["memtable_allocation_type"] == "heap_buffers"
    assert settings["concurrent_writes"] == 64
    assert settings["sstable"] == {"selected_format": "big"}  # dotted keys become nested mappings
    # what is written is valid YAML that reads back the same
    assert yaml.safe_load(yaml.safe_dump(settings)) == settings


def test_knobs_are_placed_with_5_0_units(space):
    placed = place(space, space.validate({"file_cache_size": "1024", "file_cache_enabled": "true",
                                          "compaction_throughput": 16, "concurrent_reads": 48}))
    assert placed.yaml == {"file_cache_size": "1024MiB", "file_cache_enabled": True,
                           "compaction_throughput": "16MiB/s", "concurrent_reads": 48}
    assert not placed.table and not placed.keyspace and not placed.reload


def test_inactive_knobs_are_left_out(space):
    # the chunk cache is off by default in 5.0: its size means nothing then
    placed = place(space, space.validate({"file_cache_size": 1024}))
    assert "file_cache_size" not in placed.yaml


def test_table_and_keyspace_knobs_become_cql(space):
    placed = place(space, space.validate({"compaction_method": "Leveled", "lcs_sstable_size": 64,
                                          "replication_factor": 3}))
    (table,) = placed.table_statements("ycsb", "usertable")
    assert table.startswith("ALTER TABLE ycsb.usertable WITH compaction = {")
    assert "'class': 'LeveledCompactionStrategy'" in table and "'sstable_size_in_mb': '64'" in table
    assert placed.keyspace_statements("ycsb") == []   # the replication factor is the design: the trial's
    assert placed.yaml == {}


def test_design_knobs_set_the_trials_design():
    """nodes and replication_factor leave the configuration and become the trial's design; the data is loaded
    with at most one replica per node, and a factor above the node count is set on the restored data."""
    from nosqltune.knobs import load_space
    from nosqltune.systems.cassandra.trial import _design_statements
    from nosqltune.systems.base import CassandraSettings, TrialSettings, with_design

    space = load_space("cassandra")
    harness = TrialSettings(datastore=CassandraSettings(nodes=2, replication_factor=2))
    settings, rest = with_design(space, harness, {"concurrent_reads": 16, "nodes": 3, "replication_factor": 5})
    assert rest == {"concurrent_reads": 16}
    assert (settings.cassandra.nodes, settings.cassandra.replication_factor) == (3, 5) and harness.cassandra.nodes == 2
    assert settings.cassandra.loaded_design() == {"nodes": 3, "replication_factor": 3}
    assert _design_statements(settings) == ["ALTER KEYSPACE ycsb WITH replication = {'class': 'SimpleStrategy', "
                                            "'replication_factor': 5}"]
    same, untouched = with_design(space, harness, {"concurrent_reads": 16})
    assert same is harness and untouched == {"concurrent_reads": 16} and _design_statements(same) == []


def test_load_affecting_knobs_are_marked(space):
    placed = place(space, space.validate({"num_tokens": 4, "concurrent_writes": 16}))
    assert placed.reload == {"num_tokens": 4}
    assert placed.reload_yaml == {"num_tokens": 4}
    assert placed.yaml["concurrent_writes"] == 16


def test_jvm_flags_follow_cassandras_options_for_java_17():
    flags = jvm_options()
    assert "-XX:+UseG1GC" in flags and "--add-opens=java.base/java.lang=ALL-UNNAMED" in flags
    assert "-XX:+AlwaysPreTouch" in flags  # without it page faults of fresh heap pages land in the measurement
    assert all(f.startswith("-") for f in flags)


def test_missing_java_is_a_setup_error(monkeypatch, tmp_path):
    from nosqltune.runtime import java

    java.java_executable.cache_clear()
    java.java_version.cache_clear()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    try:
        with pytest.raises(SetupError, match="Java not found"):
            java.require_java(17)
    finally:
        java.java_executable.cache_clear()
        java.java_version.cache_clear()


def test_missing_maven_is_a_setup_error(monkeypatch, tmp_path):
    from nosqltune.runtime import java

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SetupError, match="Maven not found"):
        java.run_maven(tmp_path / "pom.xml", ["validate"])


def test_bad_cassandra_version_is_rejected_before_maven():
    from nosqltune.systems.cassandra.provision import cassandra_classpath

    with pytest.raises(SetupError, match="not a Cassandra version"):
        cassandra_classpath("five; rm -rf /")


def test_node_command_pins_and_marks(monkeypatch, tmp_path):
    import nosqltune.systems.cassandra.node as node_mod

    monkeypatch.setattr(node_mod, "cassandra_classpath", lambda v: ["/x/jamm-0.4.0.jar", "/x/cassandra-all.jar"])
    monkeypatch.setattr(node_mod, "require_java", lambda v: "/usr/bin/java")
    node = CassandraNode(home=tmp_path, heap_mb=1024, cpus="0", ports=NodePorts(1, 2, 3))
    node.prepare()
    cmd = node.command()
    assert cmd[:3] == ["taskset", "-c", "0"]
    assert "-Xmx1024M" in cmd and "-Xms1024M" in cmd and "-Dcassandra.jmx.local.port=3" in cmd
    assert f"-Dnosqltune.node={tmp_path}" in cmd
    assert cmd[-1] == "org.apache.cassandra.service.CassandraDaemon"


def test_the_page_cache_per_sstable_component_of_a_node_in_a_memory_group(tmp_path):
    import os

    from nosqltune.runtime import page_cache
    from nosqltune.systems.cassandra.node import sstable_component

    assert [sstable_component(n) for n in ("nb-1-big-Data.db", "da-3gx0_1kq4_2x-bti-Partitions.db", "nb-1-big-TOC.txt",
                                           "manifest.json", "-Data.db", "schema.cql")] == \
        ["Data.db", "Partitions.db", None, None, None, None]
    table = tmp_path / "ycsb" / "usertable-1"
    table.mkdir(parents=True)
    (table / "nb-1-big-Data.db").write_bytes(os.urandom(1 << 20))
    (table / "nb-1-big-Index.db").write_bytes(os.urandom(1 << 18))
    (table / "nb-1-big-Filter.db").write_bytes(b"")   # empty: no share to give
    node = CassandraNode(home=tmp_path / "home", heap_mb=1024, cpus="0", ports=NodePorts(1, 2, 3))
    assert node.page_cache_by_component(tmp_path / "ycsb") is None   # no memory group: all its data is in memory
    node._group = object()   # what a node started in a memory group holds
    assert node.page_cache_by_component(tmp_path / "gone") is None   # a folder gone: no figure, no failure
    if page_cache.cached_bytes(table / "nb-1-big-Data.db") is None:
        assert node.page_cache_by_component(tmp_path / "ycsb") is None   # a kernel before 6.5 cannot tell
        return
    page_cache.evict_page_cache([table])
    (table / "nb-1-big-Index.db").read_bytes()
    assert node.page_cache_by_component(tmp_path / "ycsb") == {"Data.db": {"mib": 1.0, "cached": 0.0},
                                                               "Index.db": {"mib": 0.2, "cached": 1.0}}


def test_settings_that_shape_sstables_are_set_before_the_load_and_none_means_uncompressed(space):
    placed = place(space, {"compression": "none", "compression_chunk_length": 64, "compaction_method": "Leveled",
                           "memtable": "trie"})
    # uncompressed: Cassandra takes no other compression option, so the chunk length (inactive) is left out
    assert placed.table["compression"] == {"enabled": "false"}
    assert placed.reload == {"compression": "none", "compaction_method": "Leveled"}
    # only what shapes the data on disk (compression, the compaction strategy) is set before loading; the
    # memtable implementation after
    assert placed.reload_table == {"compression": {"enabled": "false"},
                                   "compaction": {"class": "LeveledCompactionStrategy"}}
    assert placed.reload_table_statements("ycsb", "usertable") == \
        ["ALTER TABLE ycsb.usertable WITH compression = {'enabled': 'false'} AND "
         "compaction = {'class': 'LeveledCompactionStrategy'}"]
    assert "memtable = 'trie'" in placed.table_statements("ycsb", "usertable")[0]
    assert "memtable" not in placed.reload_table_statements("ycsb", "usertable")[0]

    zstd = place(space, {"compression": "ZstdCompressor", "compression_chunk_length": 64})
    assert zstd.reload_table == {"compression": {"class": "ZstdCompressor", "chunk_length_in_kb": 64,
                                                 "compression_level": 3}}   # Zstd's level, at its default
    assert zstd.reload == {"compression": "ZstdCompressor", "compression_chunk_length": 64}
    assert place(space, {"memtable": "trie"}).reload_table == {}


def test_a_restaged_knob_does_not_shape_the_dataset_where_the_node_rebuilds_what_it_shapes(space):
    """Issue 42: the bloom filter's chance on big SSTables is set after the boot (the restored SSTables are imported
    again without their Filter.db), so it leaves the dataset's key; on bti, or where the trial cannot restage (a
    cluster, data loaded per trial), it is loaded with the data as before."""
    config = {"bloom_filter_fp_chance": 0.05, "compression": "ZstdCompressor"}
    restaged = place(space, config, restage=True)
    assert restaged.restaged == {"bloom_filter_fp_chance": "Filter.db"}
    assert restaged.reload == {"compression": "ZstdCompressor"}
    assert "bloom_filter_fp_chance" not in restaged.reload_table
    assert "bloom_filter_fp_chance = 0.05" in restaged.table_statements("ycsb", "usertable")[0]
    assert place(space, config).reload == {**config}                 # the trial cannot restage
    bti = place(space, {**config, "sstable_format": "bti"}, restage=True)
    assert not bti.restaged and bti.reload["bloom_filter_fp_chance"] == 0.05
    assert bti.reload_table["bloom_filter_fp_chance"] == 0.05
    assert not place(space, {"compression": "ZstdCompressor"}, restage=True).restaged


def test_the_memtable_implementations_a_table_may_name_are_defined(tmp_path):
    settings = render_yaml(tmp_path, NodePorts(native=19042, storage=17000, jmx=17199), {})
    assert set(settings["memtable"]["configurations"]) == {"skiplist", "trie", "default"}
    assert settings["memtable"]["configurations"]["default"] == {"inherits": "skiplist"}   # 5.0's shipped default


def test_a_boot_that_failed_on_a_full_disk_stops_the_study_with_the_fix(tmp_path, monkeypatch):
    """The node's own words for ENOSPC in its log, or almost no space left beside it, make a failed boot the
    disk's fault (SetupError: exit 3, `tune --resume` after freeing space), not the configuration's; any other
    failed boot stays the trial's failure."""
    import shutil
    from collections import namedtuple

    from nosqltune.errors import SetupError, TrialError
    from nosqltune.systems.base import TrialSettings
    from nosqltune.systems.cassandra import trial

    servers = trial._Servers(tmp_path / "node", {}, [], TrialSettings())
    said = {"log": "INFO  Starting Cassandra"}

    def fails(timeout):
        raise TrialError("crashed", "Cassandra exited during boot", log_excerpt=said["log"])

    monkeypatch.setattr(servers.first, "start", fails)
    monkeypatch.setattr(servers.first, "log_excerpt", lambda: said["log"])
    usage = namedtuple("usage", "total used free")
    free = {"bytes": 10 << 30}
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(20 << 30, 0, free["bytes"]))
    with pytest.raises(TrialError):                        # plenty of space, nothing said: the configuration's
        servers.start(10)
    said["log"] = "ERROR FSWriteError: java.io.IOException: No space left on device"
    with pytest.raises(SetupError, match="no space left on the disk of .*tune --resume"):
        servers.start(10)
    said["log"], free["bytes"] = "", 1 << 20                  # no log at all, and 1 MiB free
    with pytest.raises(SetupError, match="no space left"):
        servers.start(10)
