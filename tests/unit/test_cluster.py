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
    from nosqltune.trial import TrialSettings

    cluster = {"mix": {"readproportion": 0.5, "updateproportion": 0.5},
               "harness": TrialSettings(nodes=3, replication_factor=2).to_dict()}
    single = {"mix": {"readproportion": 1.0}, "harness": TrialSettings().to_dict()}
    assert workload_features(cluster)["design"] == {"nodes": 3, "replication_factor": 2}
    assert workload_features(single)["design"] == {}
    spec = FeatureSpec(knobs=["concurrent_writes"], design=["nodes", "replication_factor"])
    assert spec.workload_row(workload_features(cluster)) == [0.5, 3.0, 2.0]
    assert spec.workload_row(workload_features(single)) == [1.0, 1.0, 1.0]
