"""CQL from Python (DataStax/Apache python driver): readiness checks, schema, ALTER statements."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

logging.getLogger("cassandra").setLevel(logging.CRITICAL)  # the driver logs every refused connection


def _cluster(address: str, port: int, timeout: float):
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]), request_timeout=60.0)
    return Cluster([address], port=port, protocol_version=5, connect_timeout=timeout,
                   control_connection_timeout=timeout, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                   schema_metadata_enabled=False, token_metadata_enabled=False)


@contextmanager
def session(address: str, port: int, timeout: float = 10.0) -> Iterator:
    cluster = _cluster(address, port, timeout)
    try:
        yield cluster.connect()
    finally:
        cluster.shutdown()


def try_query(address: str, port: int) -> bool:
    """True when the node answers a CQL query (our definition of ready)."""
    import socket

    with socket.socket() as s:  # cheap check first: the driver is slow to fail on a closed port
        s.settimeout(0.5)
        if s.connect_ex((address, port)) != 0:
            return False
    try:
        with session(address, port, timeout=5.0) as sess:
            sess.execute("SELECT release_version FROM system.local")
        return True
    except Exception:
        return False
