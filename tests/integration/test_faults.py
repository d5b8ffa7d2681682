"""Faults on real nodes: ports taken by someone else, a workload YCSB rejects; each gives a clear cause."""

import socket

import pytest

from nosqltune.cli import main
from nosqltune.errors import TrialError
from nosqltune.store import open_store
from nosqltune.systems.cassandra import node as node_mod
from nosqltune.systems.cassandra.node import CassandraNode, NodePorts
from tests.faultlog import record

from .conftest import SMALL

pytestmark = pytest.mark.faults


@pytest.fixture
def busy_port():
    """A port some other program listens on (as a user's own Cassandra would)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_taken_port_gives_a_clear_failure(nosqltune_home, busy_port):
    free = NodePorts.allocate()
    node = CassandraNode(home=nosqltune_home / "nodes" / "busy", heap_mb=1024,
                         ports=NodePorts(native=free.native, storage=busy_port, jmx=free.jmx))
    with pytest.raises(TrialError) as info:
        node.start(timeout=60)
    assert info.value.kind == "refused"
    assert str(busy_port) in str(info.value) and "in use" in str(info.value) and "\n" not in str(info.value)
    assert not node.is_running()
    record("fault", fault="the node's port taken by another program (a user's port)", phase="boot",
           system="cassandra", outcome=f"refused: {info.value}", lost=0, counted_twice=0, orphans=0,
           files_outside=0, resumed=True, detect_s=None)


@pytest.mark.slow   # 14 s, a whole node boot: make test-all (make test keeps the taken-port refusal above)
def test_port_taken_between_choice_and_launch_is_retried(nosqltune_home, busy_port, monkeypatch):
    real_allocate = NodePorts.allocate
    calls = []

    def allocate():
        calls.append(1)
        ports = real_allocate()
        return NodePorts(native=ports.native, storage=busy_port, jmx=ports.jmx) if len(calls) == 1 else ports

    monkeypatch.setattr(node_mod.NodePorts, "allocate", staticmethod(allocate))
    with CassandraNode(home=nosqltune_home / "nodes" / "retry", heap_mb=1024) as node:
        node.start(timeout=120)
        assert node.is_running() and node.ports.storage != busy_port
    assert len(calls) == 2
    record("fault", fault="a chosen port taken by another process just before boot", phase="boot",
           system="cassandra", outcome="new ports chosen, the node booted (retried once)", lost=0, counted_twice=0,
           orphans=0, files_outside=0, resumed=True, detect_s=None)


def test_workload_the_client_rejects_is_stored_as_failed(nosqltune_home, tmp_path, capsys):
    workload = tmp_path / "bogus.properties"
    # a request distribution YCSB does not know is refused before anything starts (exit 2, nothing stored)
    workload.write_text("readproportion=0.5\nupdateproportion=0.5\nrequestdistribution=bogus\n")
    refused = tmp_path / "refused.db"
    assert main(["bench", *SMALL, "--workload", str(workload), "--study", str(refused), "--json"]) == 2
    assert "requestdistribution must be one of" in capsys.readouterr().err and not refused.exists()
    # a property only the client checks (the field lengths' distribution) fails the trial, stored with its reason
    workload.write_text("readproportion=0.5\nupdateproportion=0.5\nfieldlengthdistribution=bogus\n")
    study = tmp_path / "bogus.db"
    code = main(["bench", *SMALL, "--workload", str(workload), "--study", str(study), "--json"])
    capsys.readouterr()
    assert code == 1
    (row,) = open_store(str(study)).trials()
    assert (row["state"], row["failure_kind"]) == ("FAIL", "workload")
    assert "bogus" in row["error"] or "distribution" in row["error"].lower()
    assert "\n" not in row["error"]


def test_heap_too_small_to_start_is_stored_as_failed(nosqltune_home, tmp_path, capsys):
    study = tmp_path / "heap.db"
    code = main(["bench", *[a for a in SMALL if a not in ("--heap", "1G")], "--heap", "64M", "--study", str(study)])
    assert code == 1
    (row,) = open_store(str(study)).trials()
    assert (row["state"], row["failure_kind"]) == ("FAIL", "refused")
    assert "OutOfMemoryError" in row["error"] and "\n" not in row["error"]
    assert "OutOfMemoryError" in row["log_excerpt"]
    out = capsys.readouterr()
    assert "OutOfMemoryError" in out.out + out.err
