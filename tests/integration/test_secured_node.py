"""A node that asks for credentials, as a cluster nosqltune did not start may: JMX with a password (remote JMX,
authenticated) and CQL with PasswordAuthenticator. nosqltune's JMX calls and CQL sessions reach it with the
credentials from files, are refused without them or with wrong ones, and never show the password. And a node whose
JMX and CQL run over TLS only (a certificate made here with keytool): reached with the trust store or the CA
certificate, refused without."""

import json
import subprocess

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
        creds = node.home.parent / "cassandra.cql"
        creds.write_text("cassandra cassandra\n")
        _wait_for_cql(node, CqlAccess(str(creds)))
        yield node, folder
    finally:
        node.stop(drain=False)


def _wait_for_cql(node, access, timeout=180.0):
    """Until the node answers a CQL session made with `access` (PasswordAuthenticator answers only a session with
    credentials; a TLS-only port only a session over TLS)."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            with session(node.address, node.ports.native, timeout=5, access=access) as sess:
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


STORE_SECRET = "st0re-secret"


def _certificates(folder):
    """A node's key store (its key and a certificate for 127.0.0.1), a trust store holding that certificate, and
    the certificate as PEM, made with the JDK's keytool."""
    keystore, truststore, pem = folder / "node.jks", folder / "trust.jks", folder / "node.pem"
    run = lambda *args: subprocess.run(["keytool", *args], check=True, capture_output=True)  # noqa: E731
    run("-genkeypair", "-alias", "node", "-keyalg", "RSA", "-keysize", "2048", "-validity", "2", "-dname",
        "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1", "-keystore", str(keystore), "-storetype", "JKS", "-storepass",
        STORE_SECRET, "-keypass", STORE_SECRET)
    run("-exportcert", "-rfc", "-alias", "node", "-keystore", str(keystore), "-storepass", STORE_SECRET,
        "-file", str(pem))
    run("-importcert", "-noprompt", "-alias", "node", "-file", str(pem), "-keystore", str(truststore),
        "-storetype", "JKS", "-storepass", STORE_SECRET)
    return keystore, truststore, pem


@pytest.fixture(scope="module")
def over_tls(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    keystore, truststore, pem = _certificates(folder)
    ports = NodePorts.allocate()
    flags = [f"-Dcassandra.jmx.remote.port={ports.jmx}", "-Dcom.sun.management.jmxremote.authenticate=false",
             "-Dcom.sun.management.jmxremote.ssl=true", "-Dcom.sun.management.jmxremote.registry.ssl=true",
             f"-Djavax.net.ssl.keyStore={keystore}", f"-Djavax.net.ssl.keyStorePassword={STORE_SECRET}",
             "-Djava.rmi.server.hostname=127.0.0.1"]
    node = CassandraNode(home=folder / "node", heap_mb=768, ports=ports, jvm_flags=flags,
                         yaml_overrides={"client_encryption_options": {
                             "enabled": True, "optional": False, "keystore": str(keystore),
                             "keystore_password": STORE_SECRET}})
    try:
        node.prepare()
        node.launch()
        with process._lock:
            process._live.discard(node.proc)
        _wait_for_cql(node, CqlAccess(ca_file=str(pem)))
        yield node, truststore, pem
    finally:
        node.stop(drain=False)


def test_jmx_over_tls_with_the_trust_store_and_refused_without(over_tls, tmp_path):
    node, truststore, _ = over_tls
    password = tmp_path / "truststore.password"
    password.write_text(STORE_SECRET + "\n")
    access = JmxAccess(truststore=str(truststore), truststore_password_file=str(password))
    status = internals.node_status(node.ports.jmx, access=access)
    assert status["mode"] == "NORMAL" and status["version"].startswith("5.0")
    assert "scopes" in internals.client_requests(node.ports.jmx, access=access)
    with pytest.raises(TrialError) as refused:   # plain RMI against a TLS registry
        internals.node_status(node.ports.jmx)
    assert STORE_SECRET not in str(refused.value)


def test_cql_over_tls_with_the_ca_certificate_and_refused_without(over_tls):
    node, _, pem = over_tls
    with session(node.address, node.ports.native, timeout=5, access=CqlAccess(ca_file=str(pem))) as sess:
        assert sess.execute("SELECT release_version FROM system.local").one()[0].startswith("5.0")
    with pytest.raises(Exception):   # a plain connection to a port that speaks TLS only
        with session(node.address, node.ports.native, timeout=5) as sess:
            sess.execute("SELECT release_version FROM system.local")
