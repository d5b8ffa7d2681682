"""Security basics (issue 22, item 3), on the real processes the tool starts.

- Every listening TCP socket (IPv4 and IPv6) of the processes the tool starts, sampled while they run, is bound to
  a loopback address: a Cassandra node (CQL, storage, JMX and JMX's RMI server), Redis servers, the YCSB client
  JVMs, the JMX tool JVMs, and this (the tuner's own) process.
- The node's JMX, which has no authentication, is on loopback only: Cassandra 5.0.6's CassandraDaemon.maybeInitJmx
  starts a local-only JMX server when `cassandra.jmx.remote.port` is unset and `cassandra.jmx.local.port` is set
  (what CassandraNode gives it); JMXServerUtils.createJMXServer(port, local=true) then binds both the RMI registry
  and the RMI server (an anonymous port: `com.sun.management.jmxremote.rmi.port` is unset) to
  InetAddress.getLoopbackAddress() and sets java.rmi.server.hostname to it (read in cassandra-all-5.0.6.jar with
  javap, and in apache/cassandra's src/java/org/apache/cassandra/utils/JMXServerUtils.java).
- A password an external target's datastore needs (a Redis with `requirepass`, the password planted in the
  environment, with `;`, `$(...)` and backquotes in it) shows nowhere: output, the study store's bytes, best,
  report, export, and every file left under the work directory and the dataset cache; a workload file holding
  a password is refused.
- A PostgreSQL store's password stays out of `compare`, `export`'s rows, every table of the store and the side
  folder (tests/integration/test_distributed.py checks tune, best, report and the studies and trials tables).

(That an external target's commands get values through the environment, never spliced into the shell string, is
tests/unit/test_targets.py's.)"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import threading
import uuid
from pathlib import Path

import pytest
import yaml

from nosqltune.cli import main
from nosqltune.store import open_store
from nosqltune.systems.cassandra.internals import node_stats
from nosqltune.systems.cassandra.trial import _create_schema
from nosqltune.workloads.spec import Workload, make_workload
from nosqltune.workloads.ycsb import run_client
from tests import faultlog


pytestmark = pytest.mark.faults

REPO = Path(__file__).resolve().parents[2]
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed")


# ------------------------------------------------------------------------------------------------ sockets

def _address(hexaddr: str) -> tuple[ipaddress._BaseAddress, int]:
    """An address of /proc/net/tcp{,6}: the IP as 4-byte words in host (little-endian) order, then the port."""
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    ordered = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(ordered), int(port, 16)


def listening_sockets() -> dict[int, tuple[ipaddress._BaseAddress, int]]:
    """Socket inode -> (address, port) of every TCP socket in state LISTEN (0A) in this network namespace."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table) as fh:
            for line in fh.read().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    found[int(fields[9])] = _address(fields[1])
    return found


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets a process holds open (its threads share the one fd table)."""
    inodes = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def descendants(root: int) -> set[int]:
    """`root` and every process below it, now."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, pp in parent.items() if pp == pid and p not in found]
        found.update(children)
        frontier.extend(children)
    return found


def label(pid: int) -> str:
    """What a process is, from its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().decode(errors="replace").split("\0")
    except OSError:
        return "?"
    text = " ".join(args)
    for marker, name in (("CassandraDaemon", "cassandra"), ("PhasedClient", "ycsb-client"),
                         ("NodeInternals", "jmx-tool"), ("redis-server", "redis-server")):
        if marker in text:
            return name
    return "nosqltune (this process)" if pid == os.getpid() else os.path.basename(args[0] or "?")


def is_loopback(address: ipaddress._BaseAddress) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


class SocketWatch:
    """Samples, every 0.1 s until stopped, the listening TCP sockets of this process and all its descendants:
    {(pid, label, address, port)}, and which processes were seen at all (label -> pids)."""

    def __init__(self) -> None:
        self.sockets: set[tuple[int, str, str, int]] = set()
        self.seen: dict[str, set[int]] = {}
        self._lock = threading.Lock()   # sampled from the watch's thread and the test's
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        listening = listening_sockets()
        for pid in descendants(os.getpid()):
            name = label(pid)
            found = {(pid, name, str(listening[i][0]), listening[i][1]) for i in socket_inodes(pid) if i in listening}
            with self._lock:
                self.seen.setdefault(name, set()).add(pid)
                self.sockets |= found

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(0.1)

    def __enter__(self) -> "SocketWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def of(self, name: str) -> list[tuple[str, int]]:
        with self._lock:
            return sorted({(address, port) for _, n, address, port in self.sockets if n == name})

    def beyond_loopback(self) -> list[tuple[int, str, str, int]]:
        with self._lock:
            return sorted(s for s in self.sockets if not is_loopback(ipaddress.ip_address(s[2])))


def _own_address() -> str | None:
    """This machine's address on its default route (no packet is sent), if it has one besides loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if ipaddress.ip_address(address).is_loopback else address


def test_everything_the_tool_starts_listens_on_loopback_only(node, nosqltune_home, tmp_path, capsys):
    """While a Cassandra node runs, its YCSB client (CQL plus JMX for the node's internals and cost) loads and
    runs against it and the JMX tool reads its statistics, then `bench --system redis` starts Redis servers (the
    dataset's and the trial's) and their clients; every listening socket of every process below this one, and of
    this one, is on loopback. The client and tool JVMs listen on nothing (loadgen opens no server socket and starts
    no JMX agent: no -Dcom.sun.management.jmxremote on their command line; the sampling shows it too)."""
    workload = make_workload("ycsb-a", records=800, operations=4000, threads=2, warmup_operations=200)
    with SocketWatch() as watch:
        watch.sample()
        _create_schema(node.address, node.ports.native, workload)
        load = Workload.from_dict({**workload.to_dict(), "threads": 2})
        run_client("load", load, host=node.address, port=node.ports.native, trial_dir=nosqltune_home / "security-load",
                   timeout=120)
        metrics = run_client("run", workload, host=node.address, port=node.ports.native,
                             trial_dir=nosqltune_home / "security-run", timeout=120, jmx_port=node.ports.jmx,
                             cost=[f"jmx:{node.address}:{node.ports.jmx}:{node.proc.pid}"])
        assert metrics["throughput_ops_s"] > 0 and metrics["errors"] == 0
        assert node_stats(node.ports.jmx)   # the JMX tool a trial runs before and after its measured phase
        cassandra = watch.of("cassandra")
        if shutil.which("redis-server"):
            code = main(["bench", "--system", "redis", "--workload", "ycsb-c", "--records", "2000", "--operations",
                         "20000", "--threads", "2", "--warmup-ops", "500", "--study", str(tmp_path / "redis.db"),
                         "--json"])
            capsys.readouterr()
            assert code == 0
        watch.sample()
    assert not watch.beyond_loopback(), f"listening beyond loopback: {watch.beyond_loopback()}"
    # the node: CQL, storage (internode), the JMX registry and the JMX RMI server (an anonymous port)
    ports = {port for _, port in cassandra}
    named = {"native": node.ports.native, "storage": node.ports.storage, "jmx": node.ports.jmx}
    assert set(named.values()) <= ports, (named, cassandra)
    others = sorted(ports - set(named.values()))
    assert len(others) <= 1, f"the node listens on more than CQL, storage, JMX and JMX's RMI server: {cassandra}"
    assert watch.seen.get("ycsb-client"), "no YCSB client was seen running"
    assert not watch.of("ycsb-client"), f"a YCSB client listens: {watch.of('ycsb-client')}"
    assert watch.seen.get("jmx-tool") and not watch.of("jmx-tool")
    redis = watch.of("redis-server")
    if shutil.which("redis-server"):
        assert redis   # the trial's server (and the dataset's, unless the session's cache already held it)
    rows = [f"cassandra {name} {a}:{p}" for name, port in named.items() for a, p in cassandra if p == port]
    rows += [f"cassandra jmx-rmi-server {a}:{p}" for a, p in cassandra if p in others]
    rows += [f"redis-server {a}:{p}" for a, p in redis]
    listening_others = sorted({(n, a, p) for _, n, a, p in watch.sockets if n not in ("cassandra", "redis-server")})
    rows += [f"{n} {a}:{p}" for n, a, p in listening_others]
    rows.append(f"ycsb-client: none ({len(watch.seen['ycsb-client'])} JVMs sampled)")
    rows.append(f"jmx-tool: none ({len(watch.seen['jmx-tool'])} JVMs sampled)")
    faultlog.record("security", check="listening sockets on loopback", outcome="pass", detail="; ".join(rows))


def test_jmx_without_authentication_is_on_loopback_only(node):
    """The node's JMX takes no credentials (the tool's JMX tools pass none), so it must be local: its command line
    asks for Cassandra's local JMX (`cassandra.jmx.local.port`) and no remote JMX (`cassandra.jmx.remote.port`,
    `com.sun.management.jmxremote.port`) unless authentication is on; its registry and RMI server listen on
    loopback only; it answers on 127.0.0.1 and refuses this machine's other address."""
    with open(f"/proc/{node.proc.pid}/cmdline", "rb") as fh:
        args = fh.read().decode().split("\0")
    assert f"-Dcassandra.jmx.local.port={node.ports.jmx}" in args
    remote = [a for a in args if a.startswith(("-Dcassandra.jmx.remote.port", "-Dcom.sun.management.jmxremote.port",
                                               "-Dcom.sun.management.jmxremote="))]
    authenticated = "-Dcom.sun.management.jmxremote.authenticate=true" in args
    assert not remote or authenticated, f"remote JMX without authentication: {remote}"
    listening = listening_sockets()
    bound = sorted({listening[i] for i in socket_inodes(node.proc.pid) if i in listening}, key=str)
    jmx = [(str(a), p) for a, p in bound if p == node.ports.jmx]
    assert jmx and all(is_loopback(ipaddress.ip_address(a)) for a, _ in jmx), bound
    assert all(is_loopback(a) for a, _ in bound), bound
    with socket.create_connection(("127.0.0.1", node.ports.jmx), timeout=5):
        pass
    elsewhere = _own_address()
    if elsewhere:
        with pytest.raises(OSError):
            socket.create_connection((elsewhere, node.ports.jmx), timeout=5).close()
    faultlog.record("security", check="jmx only on loopback", outcome="pass",
                    detail=f"cassandra.jmx.local.port={node.ports.jmx}, no remote JMX property; JMX bound to "
                           f"{', '.join(f'{a}:{p}' for a, p in jmx)}; node sockets "
                           f"{', '.join(f'{a}:{p}' for a, p in bound)}; refused on {elsewhere or '(no other address)'}")


# ------------------------------------------------------------------------------------------------ planted secrets

def _scan(secret: str, *roots: Path) -> list[str]:
    """Files under `roots` (or the files themselves) whose bytes hold `secret`."""
    hits = []
    for root in roots:
        files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        for path in files:
            try:
                if secret.encode() in path.read_bytes():
                    hits.append(str(path))
            except OSError:
                pass
    return hits


@needs_redis
def test_a_planted_password_of_an_external_target_shows_nowhere(nosqltune_home, dataset_cache, tmp_path, capsys,
                                                                 monkeypatch):
    """An external Redis that requires a password (requirepass fed on stdin from the user's environment, so it is
    neither in a file nor on a command line), its steps authenticating with redis-cli's REDISCLI_AUTH and the YCSB
    client through `endpoint: password_env`. The health step passes only when the server refuses a client
    without the password. After a short study (its trials' folders kept), best, report and export, the password is
    in no output, in no byte of the store, and in no file of the work directory (the kept trial folders with their
    steps.log, server.log, rendered configuration and client properties) or the dataset cache; the `;`, `$(...)`
    and backquotes in it ran nothing."""
    pwned = tmp_path / "pwned"
    secret = f"pl4nted-{uuid.uuid4().hex[:12]};$(touch {pwned})`touch {pwned}`"
    monkeypatch.setenv("NOSQLTUNE_TEST_REDIS_PASSWORD", secret)
    auth = 'REDISCLI_AUTH="$NOSQLTUNE_TEST_REDIS_PASSWORD"'
    folder = tmp_path / "target"
    folder.mkdir()
    shutil.copyfile(REPO / "examples" / "targets" / "redis" / "base.conf", folder / "base.conf")
    target = {
        "name": "redis-with-password", "knobs": "redis", "default_knobs": "mlos6", "binding": "redis",
        "endpoint": {"host": "127.0.0.1", "port": "auto", "password_env": "NOSQLTUNE_TEST_REDIS_PASSWORD"},
        "config": {"format": "lines", "base": "base.conf", "file": "${workdir}/redis.conf"},
        "steps": {
            "reset": {"run": "mkdir -p ${workdir}/redis && ln ${dataset}/dump.rdb ${workdir}/redis/dump.rdb"},
            "start": {"run": "mkdir -p ${workdir}/redis && exec redis-server ${config_file} --port ${port} --dir "
                             "${workdir}/redis - <<< \"requirepass \\\"$NOSQLTUNE_TEST_REDIS_PASSWORD\\\"\"",
                      "timeout": 30, "background": True},
            "health": {"run": f"redis-cli -p ${{port}} ping | grep -q NOAUTH && {auth} redis-cli -p ${{port}} info "
                              "persistence | grep -q '^loading:0'", "timeout": 30},
            "stop": {"run": f"{auth} redis-cli -p ${{port}} shutdown || true", "timeout": 60},
            "snapshot": {"run": "cp ${workdir}/redis/dump.rdb ${dataset}/", "timeout": 300},
            "version": {"run": "redis-server --version", "timeout": 10},
        },
    }
    target_file = folder / "target.yaml"
    target_file.write_text(yaml.safe_dump(target, sort_keys=False))
    study = tmp_path / "study.db"
    flags = ["--system", "external", "--target-file", str(target_file), "--workload", "ycsb-c", "--records", "1000",
             "--operations", "4000", "--threads", "2", "--warmup-ops", "300"]
    code = main(["tune", *flags, "--optimizer", "random", "--budget", "2", "--confirm-top", "0", "--keep-nodes",
                 "--study", str(study), "--json"])   # the trials' folders (configuration, logs, client files) stay
    out = capsys.readouterr()
    assert code == 0, out.err
    rows = open_store(str(study)).trials()
    assert len(rows) == 2 and {r["state"] for r in rows} == {"COMPLETE"}, [r["error"] for r in rows]
    outputs = out.out + out.err
    assert main(["best", "--study", str(study), "--format", "yaml"]) == 0
    assert main(["report", "--study", str(study), "--out", str(tmp_path / "report")]) == 0
    assert main(["export", "--study", str(study), "--out", str(tmp_path / "trials.csv")]) == 0
    out = capsys.readouterr()
    outputs += out.out + out.err
    # a workload file is stored with every trial: a password in one is refused, and its value is never echoed
    workload_file = tmp_path / "with-password.properties"
    workload_file.write_text(f"readproportion=1\nredis.password={secret}\n")
    refused = tmp_path / "refused.db"
    code = main(["bench", *flags[:4], "--workload", str(workload_file), "--study", str(refused)])
    out = capsys.readouterr()
    outputs += out.out + out.err
    assert code == 2 and "redis.password" in out.err and len(out.err.strip().splitlines()) == 1
    assert not refused.exists()

    assert secret not in outputs and secret.split(";")[0] not in outputs
    store_files = [p for p in tmp_path.iterdir() if p.name.startswith("study.db")]
    for needle in (secret, secret.split(";")[0]):
        hits = _scan(needle, *store_files, tmp_path / "report", tmp_path / "trials.csv", nosqltune_home,
                     dataset_cache)
        assert not hits, f"the planted password is in {hits}"
    assert not pwned.exists(), "a shell command inside the password ran"
    faultlog.record("security", check="external target password planted", outcome="pass",
                    detail=f"2 trials on a Redis with requirepass; absent from output, {len(store_files)} store "
                           f"files, report, export, {nosqltune_home.name} and the dataset cache; workload file with "
                           f"redis.password refused (exit 2)")


def test_a_postgresql_password_stays_out_of_compare_export_and_side_files(postgres_server, nosqltune_home, tmp_path,
                                                                          capsys, monkeypatch):
    """A study on the recorded surrogate with a PostgreSQL store whose URL holds the password: tune, compare, best,
    report, export; the password is in no output, in no row of any table of the store, in the export and report,
    and in no side file (the store's side folder under .nosqltune/, the work directory)."""
    from tests.pgserver import PASSWORD

    monkeypatch.chdir(tmp_path)                          # the side folder .nosqltune/pg-... lands here
    monkeypatch.setenv("PGPASSWORD", "")                 # restored after the test: main() moves the URL's there
    url = postgres_server.new_database()
    assert PASSWORD in url
    study = ["--study", url]
    assert main(["tune", "--system", "surrogate:wide24", "--knobs", "wide24", "--workload", "read90", "--optimizer",
                 "random", "--budget", "4", "--confirm-top", "0", *study, "--json"]) == 0
    assert main(["compare", *study, "--repeat", "2", "--json"]) == 0
    assert main(["best", *study, "--format", "yaml"]) == 0
    assert main(["report", *study, "--out", str(tmp_path / "report")]) == 0
    assert main(["export", *study, "--out", str(tmp_path / "trials.csv")]) == 0
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err

    import psycopg

    with psycopg.connect(url) as db:
        tables = [r[0] for r in db.execute("SELECT table_name FROM information_schema.tables "
                                           "WHERE table_schema = 'public'").fetchall()]
        dump = "\n".join(r[0] for t in tables for r in db.execute(f'SELECT t::text FROM "{t}" t').fetchall())
    assert "trials" in tables and len(dump) > 1000
    assert PASSWORD not in dump
    assert len((tmp_path / "trials.csv").read_text().splitlines()) > 4
    hits = _scan(PASSWORD, tmp_path, nosqltune_home)
    assert not hits, f"the store's password is in {hits}"
    faultlog.record("security", check="postgresql password planted", outcome="pass",
                    detail=f"tune, compare, best, report, export; absent from output, {len(tables)} tables, "
                           f"report, export, side files")
