"""`nosqltune rollout` on a real local cluster: a plan of export-config with a live setting, a restart and a
rewrite, applied node after node (never two down), dry run by default, resumable; 3 nodes at RF 3 under a QUORUM
trace with the canary's verdict. `make test` runs only the refusals (no node starts); the rest is make test-all."""

import json
import time
from pathlib import Path

import pytest
import yaml

from nosqltune.cli import main
from nosqltune.store import open_store

from .test_cluster import cluster_cli

CONFIG = {"concurrent_reads": 48, "memtable_flush_writers": 4, "compression": "ZstdCompressor"}


def _schema(address, port, rf, rows=200):
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    from nosqltune.systems.cassandra.cql import session

    with session(address, port) as sess:
        sess.execute("CREATE KEYSPACE shop WITH replication = {'class': 'SimpleStrategy', "
                     f"'replication_factor': {rf}}}")
        sess.execute("CREATE TABLE shop.orders (id int PRIMARY KEY, item text)")
        for k in range(rows):
            sess.execute(SimpleStatement(f"INSERT INTO shop.orders (id, item) VALUES ({k}, 'item{k}')",
                                         consistency_level=ConsistencyLevel.ALL))


def _read_all(address, port, rows=200):
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    from nosqltune.systems.cassandra.cql import session

    with session(address, port) as sess:
        got = sess.execute(SimpleStatement("SELECT count(*) FROM shop.orders", consistency_level=ConsistencyLevel.ALL))
        compression = sess.execute("SELECT compression FROM system_schema.tables WHERE keyspace_name = 'shop' AND "
                                   "table_name = 'orders'").one().compression
    return got.one()[0], dict(compression)


def _plan(tmp_path, capsys, config=CONFIG, table="shop.orders"):
    best = tmp_path / "best.yaml"
    best.write_text(yaml.safe_dump(config))
    out = tmp_path / "plan"
    assert main(["export-config", "--config", str(best), "--force", "--table", table, "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def _first_rollout(up, tmp_path, capsys):
    """CONFIG's plan, dry run then applied, through the 2 nodes of `up`: (the plan, the store of its steps, the
    cluster's status after)."""
    first, port = up["members"][0]["address"], up["native_port"]
    _schema(first, port, rf=2)
    plan = _plan(tmp_path, capsys)
    pids = [m["pid"] for m in up["members"]]

    # without --apply: every step printed, nothing touched
    assert main(["rollout", "--plan", str(plan), "--cluster", "local"]) == 0
    said = capsys.readouterr().out
    assert "dry run" in said and "restart" in said and "127.0.0.2" in said
    assert [m["pid"] for m in cluster_cli(capsys, "status")[1]["members"]] == pids

    study = tmp_path / "rollout.db"
    code = main(["rollout", "--plan", str(plan), "--cluster", "local", "--apply", "--no-canary", "--study",
                 str(study), "--json", "--node-timeout", "240"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["state"] == "done", (result["error"], result)
    code, status = cluster_cli(capsys, "status")
    assert code == 0 and status["up"]
    assert all(m["pid"] not in pids for m in status["members"]), "both nodes restarted"
    for m in status["members"]:   # the restart's cassandra.yaml key, the live one written for the next start too
        conf = yaml.safe_load(open(f"{m['home']}/conf/cassandra.yaml"))
        assert conf["memtable_flush_writers"] == 4 and conf["concurrent_reads"] == 48
    count, compression = _read_all(first, port)
    assert count == 200 and compression["class"].endswith("ZstdCompressor")

    # the steps in the store, each node's restart and rewrite before the next node's start
    store = open_store(str(study))
    (found,) = [s for s in store.studies() if s["name"].startswith("rollout-")]
    rows = [r for r in store.trials(found["id"]) if r["tag"] == "rollout-step"]
    store.close()
    steps = [(r["meta"]["rollout"]["kind"], r["meta"]["rollout"]["node"]) for r in rows]
    node_steps = [n for k, n in steps if k in ("live", "restart", "rewrite")]
    assert node_steps == ["127.0.0.1"] * 3 + ["127.0.0.2"] * 3, steps
    restarts = [r for r in rows if r["meta"]["rollout"]["kind"] == "restart"]
    assert all(str(r["state"]).endswith("COMPLETE") for r in rows)
    assert restarts[0]["finished_at"] <= restarts[1]["started_at"], "never two nodes restarting at once"
    return plan, study, status


@pytest.mark.slow   # about 75 s (4 node starts): make test-all; the refusals below stay in make test
def test_a_plan_rolls_through_a_two_node_cluster_one_node_at_a_time(nosqltune_home, tmp_path, capsys):
    code, up = cluster_cli(capsys, "up", "--nodes", "2", "--heap", "768M")
    try:
        assert code == 0, up
        plan, study, status = _first_rollout(up, tmp_path, capsys)

        # the same command again: everything was done, nothing is redone
        pids = [m["pid"] for m in status["members"]]
        assert main(["rollout", "--plan", str(plan), "--cluster", "local", "--apply", "--no-canary", "--study",
                     str(study), "--json"]) == 0
        again = json.loads(capsys.readouterr().out)
        assert again["state"] == "done" and again["steps_run"] == 1   # the check alone
        assert [m["pid"] for m in cluster_cli(capsys, "status")[1]["members"]] == pids
    finally:
        cluster_cli(capsys, "down")


@pytest.mark.slow   # about 80 s more than the test above (4 more restarts): make test-all
def test_a_second_plan_builds_on_the_first_and_its_rollback_returns_to_it(nosqltune_home, tmp_path, capsys):
    code, up = cluster_cli(capsys, "up", "--nodes", "2", "--heap", "768M")
    try:
        assert code == 0, up
        _, study, _ = _first_rollout(up, tmp_path, capsys)

        # a second plan builds on the first one's settings, and its rollback goes back to them, not to the
        # configuration the cluster started with
        (tmp_path / "second").mkdir()
        second = _plan(tmp_path / "second", capsys, config={"memtable_heap_space": 96})
        for extra in ([], ["--rollback"]):
            code = main(["rollout", "--plan", str(second), "--cluster", "local", "--apply", "--no-canary",
                         "--study", str(study), "--json", "--node-timeout", "240", *extra])
            result = json.loads(capsys.readouterr().out)
            assert code == 0, (result["error"], result)
            for m in cluster_cli(capsys, "status")[1]["members"]:
                conf = yaml.safe_load(open(f"{m['home']}/conf/cassandra.yaml"))
                assert conf["memtable_flush_writers"] == 4, (extra, m["address"])
                assert (conf.get("memtable_heap_space") == "96MiB") == (not extra), (extra, conf.get(
                    "memtable_heap_space"))
    finally:
        cluster_cli(capsys, "down")


def test_bad_input_is_refused_before_any_node_is_touched(nosqltune_home, tmp_path, capsys):
    plan = _plan(tmp_path, capsys)
    data = json.loads((plan / "plan.json").read_text())
    cases = [
        (["--plan", str(tmp_path / "none"), "--cluster", "local"], "no plan.json"),
        (["--plan", str(plan)], "give the cluster's nodes"),
        (["--plan", str(plan), "--cluster", "nothere"], "no cluster 'nothere'"),
        (["--plan", str(plan), "--hosts", "127.0.0.1:7199"], "give --restart-command"),
        (["--plan", str(plan), "--hosts", "127.0.0.1:notaport"], "is not a number"),
        (["--plan", str(plan), "--hosts", "127.0.0.1:7199", "--restart-command", "true", "--jmx-credentials",
          str(tmp_path / "missing")], "--jmx-credentials"),
    ]
    for args, said in cases:
        assert main(["rollout", *args]) == 2, args
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1, err
    redis = tmp_path / "redis"
    redis.mkdir()
    (redis / "plan.json").write_text(json.dumps({**data, "system": "redis"}))
    assert main(["rollout", "--plan", str(redis), "--cluster", "local"]) == 2
    assert "a plan for 'redis'" in capsys.readouterr().err
    # a node that does not answer: refused at the check, with --apply, nothing done
    creds = tmp_path / "creds"
    creds.write_text("cassandra cassandra\n")
    code = main(["rollout", "--plan", str(plan), "--hosts", "127.0.0.1:1", "--restart-command", "true", "--apply",
                 "--jmx-credentials", str(creds), "--study", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 2 and "does not answer over JMX" in err and "cassandra cassandra" not in err


QUORUM = {"cassandra.readconsistencylevel": "QUORUM", "cassandra.writeconsistencylevel": "QUORUM",
          "cassandra.idempotent": "true"}   # a request whose connection closed under it (a drain) goes elsewhere
RECORDS = 5000


def _ycsb_table(up):
    from nosqltune.systems.cassandra.cql import session
    from nosqltune.systems.cassandra.trial import KEYSPACE, TABLE
    from nosqltune.workloads.spec import make_workload
    from nosqltune.workloads.ycsb import client_timeout, run_client

    first, port = up["members"][0]["address"], up["native_port"]
    fields = ", ".join(f"field{i} varchar" for i in range(10))
    with session(first, port) as sess:
        sess.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', "
                     f"'replication_factor': {len(up['members'])}}}")
        # every read to every replica: at RF 3 on 3 nodes a QUORUM read asks the 2 replicas the coordinators'
        # dynamic snitch scores best, and a replica just restarted scores worst, so it would serve no reads to judge
        # (until the snitch resets its scores, 10 minutes); speculative_retry ALWAYS asks the third one too
        sess.execute(f"CREATE TABLE {KEYSPACE}.{TABLE} (y_id varchar PRIMARY KEY, {fields}) "
                     "WITH speculative_retry = 'ALWAYS'")
    load = make_workload("ycsb-a", records=RECORDS)
    run_client("load", load, host=first, port=port, trial_dir=Path(up["home"]) / "load",
               timeout=client_timeout(load, "load"), extra=QUORUM)


class Traffic:
    """YCSB A at a fixed rate and QUORUM against every node, in a thread, for `seconds`."""

    def __init__(self, up, folder, seconds, rate=300):
        import threading

        from nosqltune.workloads.spec import make_workload

        self.workload = make_workload("ycsb-a", records=RECORDS, operations=10 ** 8, threads=8, target=rate,
                                      max_seconds=seconds)
        self.contact = ",".join(m["address"] for m in up["members"])
        self.port, self.folder, self.seconds = up["native_port"], folder, seconds
        self.result, self.error = None, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        from nosqltune.workloads.ycsb import run_client

        try:
            self.result = run_client("run", self.workload, host=self.contact, port=self.port, trial_dir=self.folder,
                                     timeout=self.seconds + 180, extra=QUORUM)
        except Exception as exc:   # the test says it
            self.error = exc

    def join(self):
        self.thread.join(self.seconds + 240)
        assert self.error is None, self.error
        return self.result


def _rollout_process(args):
    """`nosqltune rollout ARGS` in a process of its own (a command's main() stops the children this process
    tracks as it returns: the traffic's client among them); (exit code, its JSON)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "nosqltune", "rollout", *args], capture_output=True, text=True,
                          timeout=1200)
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"rollout printed no JSON (exit {proc.returncode}): {proc.stderr[-2000:]}") from None


def _answers(address, port):
    """Whether the node's CQL port takes a connection (a drained or stopped node's does not)."""
    import socket

    try:
        socket.create_connection((address, port), timeout=1).close()
        return True
    except OSError:
        return False


def _steps_if_any(study):
    """The steps recorded so far ([] before the rollout's study exists)."""
    try:
        return _steps(study)
    except ValueError:   # no rollout study yet
        return []


def _steps(study):
    store = open_store(str(study))
    try:
        (found,) = [s for s in store.studies() if s["name"].startswith("rollout-")]
        return [r for r in store.trials(found["id"]) if r["tag"] == "rollout-step"]
    finally:
        store.close()


@pytest.mark.slow   # about 16 minutes: make test-all
def test_three_nodes_at_rf3_under_quorum_traffic_and_a_canary_that_stops_a_worse_plan(nosqltune_home, tmp_path,
                                                                                      capsys):
    code, up = cluster_cli(capsys, "up", "--nodes", "3", "--heap", "768M")
    try:
        assert code == 0, up
        _ycsb_table(up)
        # first, on the fresh cluster as in bench/results/rollout.md: a plan that stays up but is slower on the
        # canary alone: memtables of 1 MiB flushed by one writer under writes, compacted by one compactor at
        # 1 MiB/s, so a read merges more SSTables each window (pile-up-node, stopped in 3 runs of 3 there against
        # the other nodes' drift). Run after the good plan instead, on a cluster whose read p99 had risen to 2-4
        # times a fresh one's and moved from window to window, it was kept twice: the canary's few hundred
        # microseconds drowned in that noise
        status = cluster_cli(capsys, "status")[1]
        pids = {m["address"]: m["pid"] for m in status["members"]}
        canary_yaml = f"{status['members'][0]['home']}/conf/cassandra.yaml"
        writers = yaml.safe_load(open(canary_yaml)).get("memtable_flush_writers")
        (tmp_path / "bad").mkdir()
        bad = _plan(tmp_path / "bad", capsys, config={"memtable_heap_space": 1, "memtable_flush_writers": 1,
                                                      "compaction_throughput": 1, "concurrent_compactors": 1},
                    table="ycsb.usertable")
        traffic = Traffic(up, tmp_path / "traffic", seconds=340, rate=600)
        time.sleep(20)   # the client at its rate before the first reading
        code, result = _rollout_process(["--plan", str(bad), "--cluster", "local", "--apply", "--window", "20",
                                         "--windows", "3", "--settle", "60", "--node-timeout", "240",
                                         "--study", str(tmp_path / "bad.db"), "--json"])
        traffic.join()
        assert code == 1 and result["state"] == "canary-worse", result
        assert "read" not in result["verdict"]["unjudged"], result["verdict"]
        assert "restarted into the configuration it ran" in result["restored"], result
        status = cluster_cli(capsys, "status")[1]
        canary = status["members"][0]
        assert canary["pid"] != pids[canary["address"]], "the canary restarted back"
        assert yaml.safe_load(open(canary_yaml)).get("memtable_flush_writers") == writers, "put back, not 1"
        assert all(m["pid"] == pids[m["address"]] for m in status["members"][1:]), "the others untouched"

        # then a plan with a live setting, a restart and a rewrite that the requests do not feel (LZ4 chunks of 8
        # KiB instead of 16: less to decompress per read), through every node. With CONFIG (Zstd chunks for every
        # node's new SSTables, the canary's rewritten) every node's read p99 rose here, the canary's from 258-310
        # to 924 us, the others' to 770: judged against its own windows before, the canary was stopped. (That a
        # rollback goes back to an earlier rollout's settings, not to the defaults, is the 2-node test's.)
        (tmp_path / "good").mkdir()
        good = _plan(tmp_path / "good", capsys, config={"concurrent_reads": 48, "memtable_flush_writers": 4,
                                                        "compression_chunk_length": 8}, table="ycsb.usertable")
        traffic = Traffic(up, tmp_path / "traffic2", seconds=600)
        study = tmp_path / "rollout.db"
        code, result = _rollout_process(["--plan", str(good), "--cluster", "local", "--apply", "--window", "15",
                                         "--windows", "3", "--settle", "60", "--node-timeout", "240", "--study",
                                         str(study), "--json"])
        client = traffic.join()
        assert code == 0 and result["state"] == "done", (result["error"], result)
        assert result["verdict"]["verdict"] == "keep" and not result["verdict"]["unjudged"], result["verdict"]
        assert client["errors"] == 0, client   # no failed request at QUORUM, one node down at a time
        rows = _steps(study)
        down = sorted((r["started_at"], r["finished_at"]) for r in rows if r["meta"]["rollout"]["kind"] == "restart")
        assert len(down) == 3 and all(a[1] <= b[0] for a, b in zip(down, down[1:])), "two nodes down at once"
        for m in cluster_cli(capsys, "status")[1]["members"]:
            assert yaml.safe_load(open(f"{m['home']}/conf/cassandra.yaml"))["memtable_flush_writers"] == 4
    finally:
        cluster_cli(capsys, "down")


@pytest.mark.slow   # about 1 minute: make test-all
def test_a_rollout_killed_mid_way_resumes(nosqltune_home, tmp_path, capsys):
    import signal
    import subprocess
    import sys

    code, up = cluster_cli(capsys, "up", "--nodes", "2", "--heap", "768M")
    try:
        assert code == 0, up
        _schema(up["members"][0]["address"], up["native_port"], rf=2)
        plan = _plan(tmp_path, capsys)
        study = tmp_path / "rollout.db"
        args = ["rollout", "--plan", str(plan), "--cluster", "local", "--apply", "--no-canary", "--study", str(study),
                "--node-timeout", "240"]
        proc = subprocess.Popen([sys.executable, "-m", "nosqltune", *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)   # NOSQLTUNE_HOME: the session's, from the fixture
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:   # killed while the second node's restart runs
            if study.exists():
                rows = _steps_if_any(study)
                if any(r["meta"]["rollout"]["kind"] == "restart" and r["meta"]["rollout"]["node"] == "127.0.0.2"
                       for r in rows):
                    break
            time.sleep(0.5)
        while time.monotonic() < deadline and _answers("127.0.0.2", up["native_port"]):
            time.sleep(0.2)   # and once that node is drained or stopped: the resumed run finds it down
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(2)
        assert not _answers("127.0.0.2", up["native_port"]), "the resumed run starts with that node down"
        code = main([*args, "--json"])
        printed = capsys.readouterr()
        assert printed.out, (code, printed.err[-2000:])
        result = json.loads(printed.out)
        assert code == 0 and result["state"] == "done", (result["error"], result)
        assert result["steps_skipped"] >= 3   # the first node's steps are not done again
        status = cluster_cli(capsys, "status")[1]
        assert status["up"]
        for m in status["members"]:
            conf = yaml.safe_load(open(f"{m['home']}/conf/cassandra.yaml"))
            assert conf["memtable_flush_writers"] == 4
    finally:
        cluster_cli(capsys, "down")
