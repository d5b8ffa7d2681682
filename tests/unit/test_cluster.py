"""The local cluster's checks that need no node."""

import pytest

from nosqltune.errors import UsageError
from nosqltune.systems.cassandra.cluster import address, check_fits, cluster_home


def test_a_cluster_that_does_not_fit_is_refused():
    check_fits(3, 1024, available=8000)
    with pytest.raises(UsageError, match=r"3 nodes with a 4096 MiB heap need about 15624 MiB .* at most 1554 MiB"):
        check_fits(3, 4096, available=8000)
    with pytest.raises(UsageError, match="within 1..9"):
        check_fits(12, 512, available=10 ** 6)


def test_a_cluster_without_heap_gets_the_largest_that_fits():
    from nosqltune.systems.cassandra.cluster import fitting_heap

    assert fitting_heap(3, 2048, available=22000) == 2048                  # 3 x (2048 + 600) + 1536 fits
    assert fitting_heap(9, 2048, available=22000) == 1536                  # 2,273 MiB a node: 1,536 + 600 fit
    assert fitting_heap(4, 2048, available=8000) == 768                    # 1,616 MiB a node: 768 + 600 fit
    with pytest.raises(UsageError, match="4 nodes with a 512 MiB heap need about 5984 MiB"):
        fitting_heap(4, 2048, available=5000)


def test_the_heap_is_checked_before_anything_runs(tmp_path, capsys, monkeypatch):
    """A cluster that does not fit is refused at the start, in one line, with no study written; without
    --heap, a cluster gets the heap that fits, and a single node 2G."""
    import argparse

    from nosqltune.cli import main
    from nosqltune.cli.harness import trial_heap
    from nosqltune.systems.cassandra import cluster

    monkeypatch.setattr(cluster, "available_mb", lambda: 8000)
    assert main(["bench", "--nodes", "3", "--heap", "4G", "--study", str(tmp_path / "s.db")]) == 2
    assert "3 nodes with a 4096 MiB heap need about 15624 MiB" in capsys.readouterr().err
    assert main(["tune", "--design", "nodes=1..3", "--heap", "4G", "--study", str(tmp_path / "s.db")]) == 2
    assert "need about 15624 MiB" in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()
    assert trial_heap(argparse.Namespace(heap=None), 3) == 1536    # (8000 - 1536) / 3 - 600 = 1554
    assert trial_heap(argparse.Namespace(heap=None), 1) == 2048
    assert trial_heap(argparse.Namespace(heap="1G"), 3) == 1024


def test_addresses_and_names():
    assert [address(i) for i in (1, 2, 3)] == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    with pytest.raises(UsageError, match="plain word"):
        cluster_home(__import__("pathlib").Path("/w"), "../x")


@pytest.mark.parametrize("flags, message", [
    (["--nodes", "2", "--rf", "3"], "--rf must be within 1..2"),
    (["--nodes", "3", "--rf", "2", "--consistency", "THREE"], "read consistency THREE needs 3 replicas"),
    (["--consistency", "SOME"], "unknown read consistency 'SOME'"),
    (["--system", "redis", "--nodes", "2"], "are Cassandra's"),
    (["--nodes", "0"], "--nodes must be at least 1"),
])
def test_design_flags_are_checked(flags, message, tmp_path, capsys):
    from nosqltune.cli import main

    assert main(["bench", *flags, "--study", str(tmp_path / "s.db")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def test_design_reaches_the_model_features():
    """Seed 004's physical design as model inputs: taken from the trial's harness; single-node studies keep no
    constant design columns; a design feature missing from an older trial counts as 1 node, RF 1."""
    from nosqltune.surrogate.features import FeatureSpec, workload_features
    from nosqltune.systems.base import CassandraSettings, TrialSettings

    cluster = {"mix": {"readproportion": 0.5, "updateproportion": 0.5},
               "harness": TrialSettings(datastore=CassandraSettings(nodes=3, replication_factor=2)).to_dict()}
    single = {"mix": {"readproportion": 1.0}, "harness": TrialSettings().to_dict()}
    assert workload_features(cluster)["design"] == {"nodes": 3, "replication_factor": 2}
    assert workload_features(single)["design"] == {}
    spec = FeatureSpec(knobs=["concurrent_writes"], design=["nodes", "replication_factor"])
    assert spec.workload_row(workload_features(cluster)) == [0.5, 3.0, 2.0]
    assert spec.workload_row(workload_features(single)) == [1.0, 1.0, 1.0]


# ---------------------------------------------------------------- the design in the search (tune --design)

def test_design_ranges_are_parsed_and_checked():
    from nosqltune.cli.harness import parse_design

    assert parse_design("nodes=2..4, rf=1..3") == {"nodes": (2, 4), "replication_factor": (1, 3)}
    assert parse_design("replication_factor=1..2") == {"replication_factor": (1, 2)}
    assert parse_design(None) == {}
    for text, message in (("nodes=3", "expects nodes=LO..HI"), ("nodes=4..2", "1 <= LO < HI"),
                          ("disks=1..2", "expects nodes=LO..HI"), ("nodes=1..2,nodes=2..3", "names nodes twice"),
                          ("nodes=1..12", "at most 9 nodes"), ("", "expects nodes=LO..HI")):
        with pytest.raises(UsageError, match=message):
            parse_design(text)


@pytest.mark.parametrize("flags, message", [
    (["--design", "nodes=2..4", "--nodes", "3"], "--nodes cannot also set it"),
    (["--design", "rf=1..2", "--rf", "2", "--nodes", "2"], "--rf cannot also set it"),
    (["--design", "nodes=1..2", "--rf", "3"], "--rf must be within 1..2"),
    (["--design", "nodes=1..3", "--consistency", "TWO"], "read consistency TWO needs 2 replicas; the design has 1"),
    (["--design", "nodes=2..3", "--system", "redis"], "are Cassandra's"),
    (["--design", "rf=1..12"], "replication_factor is not inside its range"),
    (["--design", "rf=1..2", "--knobs", "eppinger", "--set", "replication_factor=2"],
     "replication_factor is searched (--design)"),
])
def test_tune_design_flags_are_checked(flags, message, tmp_path, capsys):
    from nosqltune.cli import main

    assert main(["tune", *flags, "--study", str(tmp_path / "s.db")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "s.db").exists()


def _tune_args(*flags):
    import argparse

    return argparse.Namespace(**{"design": None, "nodes": 1, "rf": None, **dict(flags)})


def test_the_design_joins_the_searched_knobs_as_a_stored_recipe():
    """--design adds nodes and replication_factor with the given ranges (the default design is the range's
    smallest); a fixed design (--nodes/--rf) leaves a knob set's replication_factor out; either way the stored
    knobs rebuild the same space (what tune --resume, best, compare and report do)."""
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.cli.tune import design_knobs
    from nosqltune.tuning.results import stored_subset as _subset_mapping

    full = load_space("cassandra")
    irace = full.subset("irace23")
    assert "replication_factor" in irace and "nodes" not in irace
    assert design_knobs(_tune_args(), full, irace) is irace               # a single node: the set unchanged

    searched = design_knobs(_tune_args(("design", "nodes=2..4,rf=1..3")), full, irace)
    assert (searched["nodes"].range, searched["nodes"].default) == ((2, 4), 2)
    assert (searched["replication_factor"].range, searched["replication_factor"].default) == ((1, 3), 1)
    assert searched["stream_throughput_outbound"].range == irace["stream_throughput_outbound"].range  # set's ranges
    stored = _subset_mapping(searched, full)
    assert stored["set"] == "irace23"
    again = full.subset(stored)
    assert {k.name: k.range for k in again} == {k.name: k.range for k in searched}
    assert TuningSpace(again).default()["nodes"] == 2

    fixed = design_knobs(_tune_args(("nodes", 3), ("rf", 2)), full, irace)
    assert "replication_factor" not in fixed and len(fixed) == len(irace) - 1
    assert "replication_factor" not in full.subset(_subset_mapping(fixed, full))

    eppinger = full.subset("eppinger")    # no design knob in the set: nothing to leave out
    assert design_knobs(_tune_args(("nodes", 2)), full, eppinger) is eppinger


def test_subset_recipes_are_checked():
    from nosqltune.knobs import KnobError, load_space

    full = load_space("cassandra")
    with pytest.raises(KnobError, match="set 'nope' is not a knob set"):
        full.subset({"set": "nope"})
    with pytest.raises(KnobError, match="leave_out names 'nodes', which is not in the subset"):
        full.subset({"set": "eppinger", "leave_out": ["nodes"]})
    with pytest.raises(KnobError, match="leaves out its default"):   # only a design range may move the default
        full.subset({"knobs": {"concurrent_reads": {"range": [40, 64]}}})


def test_per_node_knobs_are_read_from_the_config_file(tmp_path):
    import argparse

    from nosqltune.cli.harness import per_node as read_per_node

    def per_node(text, nodes=3, system="cassandra"):
        path = tmp_path / "c.yaml"
        path.write_text(text)
        return read_per_node(argparse.Namespace(config=str(path), force=False), system, nodes)

    assert per_node("concurrent_reads: 16\nper_node:\n  2: {concurrent_writes: 64}\n  node3: {concurrent_reads: 8}\n") \
        == {"2": {"concurrent_writes": 64}, "3": {"concurrent_reads": 8}}
    assert per_node("concurrent_reads: 16\n") == {}
    for text, message in (("per_node:\n  4: {concurrent_reads: 8}\n", "not one of the cluster's nodes 1..3"),
                          ("per_node:\n  2: {memtable: trie}\n", "applies to table"),
                          ("per_node:\n  2: {compaction_method: Leveled}\n", "applies to the loaded data"),
                          ("per_node:\n  2: {num_tokens: 4}\n", "applies to the loaded data"),
                          ("per_node:\n  2: {}\n", "needs a mapping"),
                          ("per_node: 3\n", "must map node numbers")):
        with pytest.raises(UsageError, match=message):
            per_node(text)
    with pytest.raises(UsageError, match="for Cassandra clusters"):
        per_node("per_node:\n  2: {concurrent_reads: 8}\n", system="redis")


def test_per_node_knobs_become_each_nodes_yaml():
    from nosqltune.systems.cassandra.trial import per_node_yaml
    from nosqltune.systems.base import CassandraSettings, TrialSettings

    settings = TrialSettings(datastore=CassandraSettings(
        nodes=2, per_node={"2": {"concurrent_writes": 64, "memtable_heap_space": 256}, "3": {"concurrent_reads": 8}}))
    assert per_node_yaml(settings) == {2: {"concurrent_writes": 64, "memtable_heap_space": "256MiB"}}


def test_a_searched_design_is_a_knob_column_not_a_design_column(tmp_path):
    """Trials of tune --design carry the design in their configuration: the model sees it once, as knobs."""
    from nosqltune.store import open_store
    from nosqltune.surrogate.features import load_table
    from nosqltune.systems.base import CassandraSettings, TrialSettings

    store = open_store(str(tmp_path / "s.db"))
    study = store.study("tune", "cassandra")
    knobs = {"set": "eppinger", "knobs": {"nodes": {"range": [1, 3]}}}
    harness = TrialSettings(datastore=CassandraSettings(nodes=1)).to_dict()
    store.update_study_settings(study, {"tune": {"knobs": knobs, "fixed": {}, "harness": harness}})
    for nodes, value in ((1, 5000.0), (2, 3500.0), (3, 2500.0)):
        trial = store.start_trial(study, {"nodes": nodes}, {"name": "ycsb-a", "mix": {"readproportion": 0.5},
                                                            "harness": harness}, tag="tune")
        store.finish_trial(trial, "COMPLETE", metrics={"summary": {"throughput_ops_s": value}})
    store.close()
    table = load_table(str(tmp_path / "s.db"))
    assert table.spec.design == [] and "nodes" in table.spec.names()


def test_design_default_is_the_default_knobs_on_the_best_design():
    from nosqltune.evaluation.compare import parse_candidates
    from nosqltune.knobs import load_space

    space = load_space("cassandra")
    best = {"concurrent_writes": 64, "nodes": 3, "replication_factor": 2}
    assert parse_candidates("best,design-default", space, best) == {
        "default": {}, "best": best, "design-default": {"nodes": 3, "replication_factor": 2}}
    with pytest.raises(UsageError, match="needs a best configuration with a searched design"):
        parse_candidates("design-default", space, {"concurrent_writes": 64})


def test_cluster_nodes_wait_for_schema_agreement():
    """A lone node's 1 s schema wait (jvm17.options) is too short for a node joining a running one on a busy
    machine; the cluster's flags come later on the command line, so theirs is the value the JVM keeps."""
    from nosqltune.systems.cassandra.cluster import CLUSTER_JVM_FLAGS
    from nosqltune.systems.cassandra.node import jvm_options

    flags = [f for f in jvm_options() + CLUSTER_JVM_FLAGS if f.startswith("-Dcassandra.schema_delay_ms=")]
    assert int(flags[0].split("=")[1]) == 1000 and int(flags[-1].split("=")[1]) >= 30000


def test_a_restored_nodes_stale_peer_rows_do_not_count_as_seeing_the_peer(monkeypatch):
    """A restored node's system.peers_v2 holds rows of the ports its dataset was built on from its first answer;
    only a row on this start's ports (written once the peer's gossip arrived) counts."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from nosqltune.systems.cassandra import cluster, cql

    rows = [SimpleNamespace(peer="127.0.0.2", peer_port=7001, native_port=9043)]   # from the build

    @contextmanager
    def fake_session(address, port, timeout=10.0):
        yield SimpleNamespace(execute=lambda query: list(rows))

    monkeypatch.setattr(cql, "session", fake_session)
    assert cluster.peers_of("127.0.0.1", 9142, 7100) == set()          # only the stale row: not seen yet
    assert cluster.peers_of("127.0.0.1", 9142) == {"127.0.0.2"}         # what `cluster status` used to count
    rows.append(SimpleNamespace(peer="127.0.0.2", peer_port=7100, native_port=9142))   # its gossip arrived
    assert cluster.peers_of("127.0.0.1", 9142, 7100) == {"127.0.0.2"}


@pytest.mark.parametrize("action", ["up", "down"])
def test_a_cluster_another_process_is_starting_or_stopping_is_refused(tmp_path, monkeypatch, capsys, action):
    """Two `cluster up` of one name at once would each take the folder (the second deleting the first's nodes'
    folders and leaving them running, untracked): the second is refused in one line while the first holds it."""
    import json

    from nosqltune.cli import main
    from nosqltune.runtime.volume import lock_image
    from nosqltune.systems.cassandra.cluster import STATE_FILE, cluster_home

    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path))
    home = cluster_home(tmp_path, "local")
    if action == "down":   # a cluster to stop
        home.mkdir(parents=True)
        (home / STATE_FILE).write_text(json.dumps({"nodes": 1, "members": []}))
    held = lock_image(home, wait=False)   # as a running `cluster up` holds it
    try:
        assert main(["cluster", action, "--heap", "512M"] if action == "up" else ["cluster", action]) == 2
        err = capsys.readouterr().err
        assert "being started or stopped by another nosqltune process" in err and len(err.strip().splitlines()) == 1
    finally:
        held.close()
    if action == "up":
        assert not home.exists(), "nothing made in the folder"
    else:
        assert (home / STATE_FILE).exists(), "the cluster's state kept"
