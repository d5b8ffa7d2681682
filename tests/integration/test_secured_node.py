"""A node that asks for credentials, as a cluster nosqltune did not start may: JMX with a password (remote JMX,
authenticated) and CQL with PasswordAuthenticator. nosqltune's JMX calls and CQL sessions reach it with the
credentials from files, are refused without them or with wrong ones, and never show the password."""

import json

import pytest

from nosqltune.errors import TrialError
from nosqltune.runtime import process
from nosqltune.systems.cassandra import internals
from nosqltune.systems.cassandra.cql import CqlAccess, session
from nosqltune.systems.cassandra.internals import JmxAccess
from nosqltune.systems.cassandra.node import CassandraNode, NodePorts

SECRET = "n0t-on-any-command-line"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    folder = tmp_path_factory.mktemp("secured")
    passwords = folder / "jmxremote.password"
    passwords.write_text(f"operator {SECRET}\n")
    passwords.chmod(0o600)   # the JVM refuses a password file others can read
    access = folder / "jmxremote.access"
    access.write_text("operator readwrite\n")
    access.chmod(0o600)
    ports = NodePorts.allocate()
    flags = [f"-Dcassandra.jmx.remote.port={ports.jmx}", "-Dcom.sun.management.jmxremote.authenticate=true",
             f"-Dcom.sun.management.jmxremote.password.file={passwords}",
             f"-Dcom.sun.management.jmxremote.access.file={access}", "-Dcom.sun.management.jmxremote.ssl=false",
             "-Djava.rmi.server.hostname=127.0.0.1", "-Dcassandra.superuser_setup_delay_ms=0"]
    node = CassandraNode(home=folder / "node", heap_mb=768, ports=ports, jvm_flags=flags,
                         yaml_overrides={"authenticator": "PasswordAuthenticator",
                                         "authorizer": "CassandraAuthorizer"})
    try:
        node.prepare()
        node.launch()
        with process._lock:
            process._live.discard(node.proc)
        _wait_for_cql(node)
        yield node, folder
    finally:
        node.stop(drain=False)


def _wait_for_cql(node, timeout=180.0):
    """A node with PasswordAuthenticator answers only a session with credentials (the default superuser's)."""
    import time

    creds = node.home.parent / "cassandra.cql"
    creds.write_text("cassandra cassandra\n")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with session(node.address, node.ports.native, timeout=5, access=CqlAccess(str(creds))) as sess:
                sess.execute("SELECT release_version FROM system.local")
                return
        except Exception:
            if node.proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def test_jmx_with_credentials_from_a_file_and_refused_without(secured, tmp_path):
    node, folder = secured
    good = tmp_path / "jmx"
    good.write_text(f"# the operator's\noperator {SECRET}\n")
    status = internals.node_status(node.ports.jmx, access=JmxAccess(credentials_file=str(good)))
    assert status["mode"] == "NORMAL" and status["version"].startswith("5.0")
    with pytest.raises(TrialError) as refused:
        internals.node_status(node.ports.jmx)
    assert "credentials" in str(refused.value).lower() or "authentication" in str(refused.value).lower()
    wrong = tmp_path / "wrong"
    wrong.write_text("operator guessed\n")
    with pytest.raises(TrialError) as refused:
        internals.node_status(node.ports.jmx, access=JmxAccess(credentials_file=str(wrong)))
    assert SECRET not in str(refused.value) and "guessed" not in str(refused.value)
    counters = internals.client_requests(node.ports.jmx, access=JmxAccess(credentials_file=str(good)))
    assert "scopes" in counters and json.dumps(counters)


def test_cql_with_credentials_from_a_file_and_refused_with_wrong_ones(secured, tmp_path):
    node, folder = secured
    wrong = tmp_path / "wrong"
    wrong.write_text("cassandra guessed\n")
    with pytest.raises(Exception) as refused:
        with session(node.address, node.ports.native, timeout=5, access=CqlAccess(str(wrong))) as sess:
            sess.execute("SELECT release_version FROM system.local")
    assert "guessed" not in str(refused.value)
    with session(node.address, node.ports.native, timeout=5,
                 access=CqlAccess(str(node.home.parent / "cassandra.cql"))) as sess:
        assert sess.execute("SELECT release_version FROM system.local").one()[0].startswith("5.0")
