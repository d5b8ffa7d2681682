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
