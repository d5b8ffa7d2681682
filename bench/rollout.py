#!/usr/bin/env python3
"""A rollout under traffic, step by step: `nosqltune rollout` on 3 local nodes at RF 3 (`cluster up`), with YCSB A
at a fixed rate and QUORUM sent to every node meanwhile; bench/results/rollout.md.

Two plans, each exported by `export-config`:
- **tuned**: the committed cloud-disk GP best (bench/results/strategies_v5/cloud-disk-real.db, study `gp`): live
  settings, a restart into a new heap, collector, SSTable format and disk access mode, and a rewrite into Zstd
  chunks. Rolled out on a fresh cluster in each of `--repeat` runs (its SSTable format cannot be undone).
- **slower**: 1 MiB memtables flushed by one writer, under twice the writes: it stays up but is slower, and the
  canary must stop it on its first node and put that node back. Once, on the last run's cluster.
- **slower-reads** (with `--plans`): every read decompresses a 64 KiB Zstd chunk, with the chunk cache and the
  key cache off: slower by the CPU each read costs. Once, on the last run's cluster.
- **pile-up** (with `--plans`): the slower plan, with size-tiered compaction waiting for 32 SSTables of a size
  and throttled to 1 MiB/s: SSTables pile up and a read merges more of them each window. Once, on the last run's
  cluster.
- **restart-only** (with `--plans`): a restart into the heap the nodes already run, nothing else: what a restart
  alone does to the canary's verdict. Every run on one cluster.

Per step: its kind, node and seconds, and the requests the client had served meanwhile (its per-second series
over the step, against the offered rate); per run: failed requests at QUORUM, the canary's verdict, the most nodes
down at once. The machine (CPU and disk probes) is stored with each run. Settings: windows of `--window` seconds,
3 before the canary's change and up to 6 after it (judged one at a time: guard.py rule 7), 60 s for the canary to
settle; the traffic is 300 ops/s (600 for the
slower plan) of 8 threads over 20,000 records. Nothing else may run beside it.

    python3 bench/rollout.py [--repeat 2] [--plans tuned,slower,restart-only]
    python3 bench/rollout.py --write-only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import RESULTS, ROOT, kept_notes, log, nosqltune  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))

FOLDER = RESULTS / "rollout"
RUNS = FOLDER / "runs.json"
TUNED = (RESULTS / "strategies_v5" / "cloud-disk-real.db", "gp")
SLOWER = {"memtable_heap_space": 1, "memtable_flush_writers": 1}
# a restart and nothing else: the heap the nodes run with already (cluster up --heap 768M), so the canary is judged
# on a node just restarted into its own configuration, the control for what a restart alone does to the verdict
# reads made slower by what they cost: every read decompresses a 64 KiB Zstd chunk (the chunk cache off) and finds
# its key in the index (the key cache off); the "chunk cache off, tiny key cache on a read-heavy table"
SLOWER_READS = {"compression": "ZstdCompressor", "compression_chunk_length": 64, "file_cache_enabled": False,
                "key_cache_size": 0}
# SSTables that pile up: 1 MiB memtables flushed every few seconds under twice the writes, compacted only once 32
# of a size are there (stcs_min_threshold, a table option), and then at 1 MiB/s: a zipfian read of a hot key
# merges more SSTables each window, so its p99 keeps rising instead of coming down as a restarted node's does
PILE_UP = {**SLOWER, "stcs_min_threshold": 32, "compaction_throughput": 1}
# pile-up on the canary alone: no table option, so the other nodes are a control (rule 9)
PILE_UP_NODE = {**SLOWER, "compaction_throughput": 1, "concurrent_compactors": 1}
CONFIGS = {"slower": SLOWER, "slower-reads": SLOWER_READS, "restart-only": {"heap_size": 768}, "pile-up": PILE_UP,
           "pile-up-node": PILE_UP_NODE}
RECORDS, THREADS = 20_000, 8
JUDGE = ("windows until decided (rule 7, recovering: a p99 bucket lower), p99 from the window's bucket counts, "
         "a baseline still falling read on (rule 8), p99 baselines moved with the other nodes' (rule 9); reads to "
         "every replica")   # how this revision's runs judge the canary
QUORUM = {"cassandra.readconsistencylevel": "QUORUM", "cassandra.writeconsistencylevel": "QUORUM",
          "cassandra.idempotent": "true"}   # a request whose connection a drain closed goes to another node


class Traffic:
    """YCSB A at `rate` ops/s and QUORUM against every node for `seconds`, in a thread; its per-second series is
    placed in wall time from the end of the run (the measured phase ends with the client)."""

    def __init__(self, up: dict, folder: Path, seconds: int, rate: int) -> None:
        from nosqltune.workloads.spec import make_workload

        self.workload = make_workload("ycsb-a", records=RECORDS, operations=10 ** 9, threads=THREADS, target=rate,
                                      max_seconds=seconds, warmup_operations=0)
        self.up, self.folder, self.seconds, self.rate = up, folder, seconds, rate
        self.result, self.error, self.ended = None, None, None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from nosqltune.workloads.ycsb import run_client

        contact = ",".join(m["address"] for m in self.up["members"])
        try:
            self.result = run_client("run", self.workload, host=contact, port=self.up["native_port"],
                                     trial_dir=self.folder, timeout=self.seconds + 240, extra=QUORUM)
        except Exception as exc:   # noqa: BLE001 - said in the figures
            self.error = str(exc)
        self.ended = time.time()

    def join(self) -> dict:
        self.thread.join(self.seconds + 300)
        series = (self.result or {}).get("intervals_ops_s") or []
        return {"rate": self.rate, "seconds": self.seconds, "error": self.error, "ended": self.ended,
                "series": series, "errors": (self.result or {}).get("errors"),
                "throughput": (self.result or {}).get("throughput_ops_s")}


def served(traffic: dict, start: float, end: float) -> dict:
    """The client's requests within [start, end] (wall seconds), from its per-second series."""
    series, ended = traffic["series"], traffic["ended"]
    if not series or ended is None:
        return {"requests": None, "ops_s": None}
    first = ended - len(series)
    picked = [v for i, v in enumerate(series) if start <= first + i + 0.5 <= end]
    return {"requests": round(sum(picked)), "ops_s": sum(picked) / len(picked) if picked else None}


def cluster(*args: str) -> dict:
    out = nosqltune("cluster", *args, "--json", ok=(0, 1, 2))
    return json.loads(out) if out.strip() else {}


def load(up: dict) -> None:
    from nosqltune.systems.cassandra.cql import session
    from nosqltune.systems.cassandra.trial import KEYSPACE, TABLE
    from nosqltune.workloads.spec import make_workload
    from nosqltune.workloads.ycsb import client_timeout, run_client

    first, port = up["members"][0]["address"], up["native_port"]
    with session(first, port) as sess:
        sess.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', "
                     f"'replication_factor': {len(up['members'])}}}")
        # every read to every replica (speculative_retry ALWAYS): at RF 3 on 3 nodes a QUORUM read asks the 2
        # replicas the coordinators' dynamic snitch scores best, and a replica just restarted scores worst, so the
        # canary would serve no reads to judge until the snitch resets its scores (10 minutes)
        sess.execute(f"CREATE TABLE {KEYSPACE}.{TABLE} (y_id varchar PRIMARY KEY, "
                     + ", ".join(f"field{i} varchar" for i in range(10)) + ") WITH speculative_retry = 'ALWAYS'")
    workload = make_workload("ycsb-a", records=RECORDS)
    run_client("load", workload, host=first, port=port, trial_dir=FOLDER / "work" / "load",
               timeout=client_timeout(workload, "load"), extra=QUORUM)


def plan_of(name: str) -> Path:
    out = FOLDER / "work" / f"plan-{name}"
    if out.exists():
        return out
    if name == "tuned":
        nosqltune("export-config", "--study", str(TUNED[0]), "--study-name", TUNED[1], "--table", "ycsb.usertable",
                  "--out", str(out))
    else:
        import yaml

        config = FOLDER / "work" / f"{name}.yaml"
        config.write_text(yaml.safe_dump(CONFIGS[name]))
        nosqltune("export-config", "--config", str(config), "--force", "--table", "ycsb.usertable", "--out",
                  str(out))
    return out


def rollout(plan: Path, study: Path, window: int, settle: int) -> tuple[int, dict]:
    cmd = [sys.executable, "-m", "nosqltune", "rollout", "--plan", str(plan), "--cluster", "local", "--apply",
           "--window", str(window), "--windows", "3", "--settle", str(settle), "--node-timeout", "300", "--study",
           str(study), "--json"]
    log(" ".join(cmd[2:]))
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    try:
        return proc.returncode, json.loads(proc.stdout)
    except json.JSONDecodeError:
        return proc.returncode, {"state": "no-json", "error": proc.stderr[-1500:]}


def step_rows(study: Path) -> list[dict]:
    """The rows of the rollout's study in its store, every tag."""
    from nosqltune.store import open_store

    store = open_store(str(study))
    try:
        (found,) = [s for s in store.studies() if s["name"].startswith("rollout-")]
        return store.trials(found["id"])
    finally:
        store.close()


def steps(study: Path) -> list[dict]:
    rows = [r for r in step_rows(study) if r["tag"] == "rollout-step"]
    return [{"step": r["meta"]["rollout"]["step"], "kind": r["meta"]["rollout"]["kind"],
             "node": r["meta"]["rollout"]["node"], "state": r["state"], "started": r["started_at"],
             "finished": r["finished_at"]} for r in rows]


def judged_now(study: Path) -> dict | None:
    """The canary's verdict under this revision's guard, from the windows its rollout stored (the before and after
    snapshots of its observe and judge steps): what the rule says of the same traffic, not a rollout run again.
    Where the stored windows end before the rule decides (a run before rule 7 read one window after the settle),
    the verdict is "undecided"."""
    from nosqltune.online.guard import GuardSettings
    from nosqltune.online.rollout import RolloutSettings, judge_canary, snapshot_from
    from nosqltune.online.window import window_between
    if not study.exists():
        return None
    metas = [(r["meta"] or {}).get("rollout") or {} for r in step_rows(study)]
    snaps = {m["kind"]: [snapshot_from(x) for x in (m.get("result") or {}).get("snapshots") or ()]
             for m in metas if m.get("kind") in ("observe-before", "observe-after", "judge")}
    canary = next((m["node"] for m in metas if m.get("kind") == "observe-before"), None)
    before = snaps.get("observe-before") or []
    after = snaps.get("judge") or snaps.get("observe-after") or []
    if canary is None or len(before) < 2 or len(after) < 2:
        return None
    base = [window_between(a, b) for a, b in zip(before, before[1:])]
    window_s = (before[-1].at - before[0].at) / len(base)
    limit = RolloutSettings(window_s=max(1.0, round(window_s)), windows=len(base)).windows_after
    decided, verdicts, _ = judge_canary(base, after, canary, GuardSettings(), limit)
    if decided is not None:
        return decided.as_dict()
    if not verdicts:
        return None
    last = verdicts[-1]
    return {**last.as_dict(), "verdict": "undecided",
            "reason": f"{len(verdicts)} window(s) stored after the settle, and the rule reads another before it "
                      f"decides: {last.reason}"}


def most_down(rows: list[dict]) -> int:
    """The most restart steps that overlap in time (nodes down at once)."""
    spans = [(r["started"], r["finished"] or r["started"]) for r in rows if r["kind"] == "restart"]
    return max((sum(a <= t < b for a, b in spans) for t, _ in spans), default=0)


def one(name: str, plan: Path, up: dict, seconds: int, rate: int, window: int, settle: int, number: int) -> dict:
    from nosqltune.runtime.probe import machine_record

    work = FOLDER / "work" / f"{name}-{number}"
    machine = machine_record(FOLDER / "work")
    traffic = Traffic(up, work / "traffic", seconds, rate)
    time.sleep(20)   # the client connected and at its rate before the first reading
    began = time.time()
    study = FOLDER / f"{name}-{number}.db"   # the rollout's own study, kept beside the page
    code, result = rollout(plan, study, window, settle)
    took = time.time() - began
    client = traffic.join()
    rows = steps(study)
    for r in rows:
        r.update(seconds=(r["finished"] or r["started"]) - r["started"], **served(client, r["started"],
                                                                                   r["finished"] or r["started"]))
    return {"plan": name, "run": number, "window": window, "settle": settle, "judge": JUDGE, "exit": code, "state": result.get("state"), "result": result,
            "seconds": took, "steps": rows, "most_down": most_down(rows), "machine": machine,
            "client": {k: v for k, v in client.items() if k != "series"}, "series": client["series"]}


def run(repeat: int, window: int, settle: int, plans: list[str]) -> None:
    """`tuned` on a fresh cluster in each run (its SSTable format cannot be undone), `slower` on the last run's
    cluster after it; `restart-only`, which changes nothing, every run on one cluster."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    runs = json.loads(RUNS.read_text()) if RUNS.exists() else []
    done = {(r["plan"], r["run"]) for r in runs}
    rounds = [[(p, n) for p in plans if p != "restart-only" and (p, n) not in done
               and (p == "tuned" or n == repeat)] for n in range(1, repeat + 1)]   # a slower plan after tuned
    if "restart-only" in plans:
        rounds.append([("restart-only", n) for n in range(1, repeat + 1) if ("restart-only", n) not in done])
    for todo in (r for r in rounds if r):
        up = cluster("up", "--nodes", "3", "--heap", "768M")
        try:
            if not up.get("members"):
                raise SystemExit(f"cluster up failed: {up}")
            load(up)
            for name, number in todo:
                # the traffic outlasts the rollout: the canary's windows before (3) and after (up to 6), its
                # settling, and the other nodes' restarts and rewrites (about 30 s each here)
                seconds = 10 * window + settle + (60 if name.startswith("slower") or name.startswith("pile-up") else 240)
                rate = 600 if name in ("slower", "pile-up", "pile-up-node") else 300
                runs.append(one(name, plan_of(name), up, seconds, rate, window, settle, number))
                RUNS.write_text(json.dumps(runs, indent=1, default=str) + "\n")
                log(f"{name} run {number}: {runs[-1]['state']} in {runs[-1]['seconds']:.0f} s")
        finally:
            cluster("down")


def write() -> None:
    runs = json.loads(RUNS.read_text()) if RUNS.exists() else []
    path = RESULTS / "rollout.md"
    lines = ["# A rollout under traffic, step by step", "",
             "Generated by `python3 bench/rollout.py`: `nosqltune rollout --cluster local --apply --window W "
             "--windows 3 --settle S` of two plans onto 3 local nodes at RF 3 (`cluster up --nodes 3 --heap 768M`, "
             f"{RECORDS:,} YCSB records), while YCSB A at a fixed rate and QUORUM ({THREADS} threads) is sent to every "
             "node. `tuned` is export-config of the committed cloud-disk GP best (a fresh cluster each run: its "
             "SSTable format cannot be undone); `slower` (1 MiB memtables, one flush writer, under twice the rate) "
             "must be stopped by the canary; `restart-only` restarts each node into the heap it runs already and "
             "changes nothing else (the control: what a restart alone does to the canary's verdict). Requests served are the client's, over each step's span, against the "
             "offered rate.", ""]
    lines += kept_notes(path, Path(__file__).name)
    if not runs:
        path.write_text("\n".join(lines + ["Not run yet."]) + "\n")
        return
    lines += ["| plan | run | window, settle (s) | canary judged | outcome | seconds | canary verdict | judged on | "
              "failed requests (QUORUM) | most nodes down at once | client ops/s (offered) | CPU probe (MB/s) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        verdict = (r["result"].get("verdict") or {})
        probe = (r.get("machine") or {}).get("cpu_mb_s")
        lines.append(f"| {r['plan']} | {r['run']} | {r.get('window', 20)}, {r.get('settle', 60)} | "
                     f"{r.get('judge', 'one window after the settle; the snitch chose the replicas')} | {r['state']} | {r['seconds']:.0f} | {verdict.get('verdict', '-')} "
                     f"| {verdict.get('judged_on', '-')} | {r['client']['errors']} | {r['most_down']} | "
                     f"{(r['client']['throughput'] or 0):.0f} ({r['client']['rate']}) | "
                     f"{probe if probe is not None else '-'} |")
    lines += ["", "## Steps", "", "| plan | run | step | kind | node | state | seconds | requests served | ops/s "
              "meanwhile |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        for s in r["steps"]:
            ops = f"{s['ops_s']:.0f}" if s.get("ops_s") is not None else "-"
            lines.append(f"| {r['plan']} | {r['run']} | {s['step']} | {s['kind']} | {s['node'] or 'cluster'} | "
                         f"{s['state']} | {s['seconds']:.1f} | {s['requests'] if s['requests'] is not None else '-'} "
                         f"| {ops} |")
    lines += ["", "## The canary's verdicts", "",
              "As the rollout judged, and as this revision's guard judges the same stored windows (a p99 is held to "
              "no less than one bucket of Cassandra's latency histogram since 2026-11-28; since 2026-11-29 the windows "
              "after the settle are judged one at a time by guard rule 7, and a kind judged before and not after "
              "keeps nothing: see the notes). \"undecided\": the stored windows end before the rule decides.", ""]
    for r in runs:
        verdict = r["result"].get("verdict") or {}
        lines.append(f"- {r['plan']} run {r['run']}: **{verdict.get('verdict', '-')}**: {verdict.get('reason', '-')}"
                     + (f"; restored: {', '.join(r['result'].get('restored') or [])}" if r["result"].get("restored")
                        else ""))
        now = judged_now(FOLDER / f"{r['plan']}-{r['run']}.db")
        if now is not None:
            lines.append(f"  - judged now: **{now['verdict']}**: {now['reason']}")
    lines += ["", "## Which settings carry the gain", "",
              "The ablation of the committed cloud-disk bests is in [ablation.md](ablation.md): each changed setting "
              "reverted alone in interleaved cold rounds, its share of the gain with its interval, and the settings "
              "whose reversal costs nothing beyond the noise marked optional (export-config lists them apart)."]
    path.write_text("\n".join(lines) + "\n")
    (RESULTS / "rollout.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "series"} for r in runs],
                                                     indent=1, default=str) + "\n")
    log(f"wrote {path}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--window", type=int, default=20, help="the canary's window, seconds (default 20)")
    p.add_argument("--settle", type=int, default=60, help="the canary's settling after its change (default 60)")
    p.add_argument("--plans", default="tuned,slower",
                   help="comma-separated: tuned, slower, slower-reads, pile-up, restart-only (default "
                        "tuned,slower)")
    p.add_argument("--write-only", action="store_true")
    a = p.parse_args()
    plans = [x.strip() for x in a.plans.split(",") if x.strip()]
    unknown = sorted(set(plans) - {"tuned", *CONFIGS})
    if unknown:
        p.error(f"unknown plan(s): {', '.join(unknown)}")
    if not a.write_only:
        run(a.repeat, a.window, a.settle, plans)
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
