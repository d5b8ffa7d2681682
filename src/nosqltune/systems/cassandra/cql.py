"""CQL from Python (DataStax/Apache python driver): readiness checks, schema, ALTER statements."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

logging.getLogger("cassandra").setLevel(logging.CRITICAL)  # the driver logs every refused connection


@dataclass(frozen=True)
class CqlAccess:
    """How to reach a cluster whose CQL asks for a user and password, or runs over TLS (a cluster nosqltune did not
    start): files only, never a password on a command line or in the store. `credentials_file`: its first line that
    is not a comment is `USER PASSWORD`; `ca_file`: the certificate (PEM) the nodes' certificates are signed
    with."""

    credentials_file: str | None = None
    ca_file: str | None = None

    def credentials(self) -> tuple[str, str] | None:
        if not self.credentials_file:
            return None
        from ...errors import UsageError

        try:
            lines = [ln.strip() for ln in Path(self.credentials_file).read_text().splitlines()]
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"CQL credentials file {self.credentials_file}: {getattr(exc, 'strerror', exc)}") from None
        first = next((ln for ln in lines if ln and not ln.startswith("#")), "")
        user, _, password = first.partition(" ")
        if not user or not password.strip():
            raise UsageError(f"CQL credentials file {self.credentials_file}: its first line must be 'USER PASSWORD'")
        return user, password.strip()

    def record(self) -> dict:
        """What is stored of it: which files, never what is in them."""
        return {"credentials_file": self.credentials_file, "ca_file": self.ca_file}


def _cluster(address: str, port: int, timeout: float, access: CqlAccess | None = None):
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy

    extra = {}
    if access is not None:
        credentials = access.credentials()
        if credentials:
            from cassandra.auth import PlainTextAuthProvider

            extra["auth_provider"] = PlainTextAuthProvider(username=credentials[0], password=credentials[1])
        if access.ca_file:
            import ssl

            context = ssl.create_default_context(cafile=access.ca_file)
            context.check_hostname = False   # nodes are named by address; the CA is what is checked
            extra["ssl_context"] = context
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]), request_timeout=60.0)
    return Cluster([address], port=port, protocol_version=5, connect_timeout=timeout,
                   control_connection_timeout=timeout, execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                   schema_metadata_enabled=False, token_metadata_enabled=False, **extra)


@contextmanager
def session(address: str, port: int, timeout: float = 10.0, access: CqlAccess | None = None) -> Iterator:
    cluster = _cluster(address, port, timeout, access)
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
