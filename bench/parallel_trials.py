#!/usr/bin/env python3
"""What a parallel study costs and where it stops scaling. Three measurements, written to
bench/results/distributed.{md,json}:

1. Trials per hour of `tune --executor ray` with 1 and 2 workers (a local Ray cluster: a head and a second node
   on this machine, one `nosqltune_slot` each) and a throwaway PostgreSQL store, on the recorded surrogate
   (`surrogate:wide24`, a trial costs milliseconds: what is measured is the machinery per trial: Ray task,
   store round trips, the coordinator's polling) and on real Redis (a trial is seconds of real work, and both
   workers share this machine's 2 cores: the ratio shows that sharing, not what two machines would give).
2. Optimizer ask time with 0, 10 and 50 suggestions pending (GP's constant liar refits with every pending
   point; SMAC and random) after 50 observations on the 24 knobs of wide24.
3. Store contention: claims (claim + finish) per second on PostgreSQL with 1, 4 and 16 worker processes
   hammering one study's queue (every write holds the store's advisory lock).

Nothing else may run on the machine meanwhile (2 cores).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from common import RESULTS, ROOT, log  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from nosqltune.store import TrialState, open_store  # noqa: E402
from tests.pgserver import PostgresServer  # noqa: E402

SLOT = '{"nosqltune_slot": 1}'


def ray_cluster(home: str) -> tuple[str, dict]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "NOSQLTUNE_HOME": home}
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--resources", SLOT, "--disable-usage-stats"]
    with open(os.path.join(home, "ray-cli.log"), "ab") as out:
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "start", "--head", "--port", str(port),
                        "--include-dashboard", "false", *common], check=True, stdout=out, stderr=out, env=env,
                       stdin=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "start", "--address", f"127.0.0.1:{port}",
                        *common], check=True, stdout=out, stderr=out, env=env, stdin=subprocess.DEVNULL)
    return f"127.0.0.1:{port}", env


def tune(url: str, address: str, env: dict, parallel: int, target: list[str], budget: int) -> dict:
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nosqltune", "tune", *target, "--optimizer", "random", "--budget",
                           str(budget), "--confirm-top", "0", "--parallel", str(parallel), "--executor", "ray",
                           "--address", address, "--study", url, "--json"],
                          capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT / "src")})
    wall = time.monotonic() - began
    if proc.returncode != 0:
        raise SystemExit(f"tune failed: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    return {"parallel": parallel, "trials": result["trials"], "wall_s": round(wall, 1),
            "trials_per_hour": round(result["trials"] / wall * 3600)}


def throughput(pg: PostgresServer, rounds: int) -> list[dict]:
    home = tempfile.mkdtemp(prefix="nosqltune-dist-")
    address, env = ray_cluster(home)
    targets = {"surrogate:wide24": (["--system", "surrogate:wide24", "--knobs", "wide24", "--workload", "read90"], 60),
               "redis (ycsb-c, 3K records, 20K ops)": (
                   ["--system", "redis", "--workload", "ycsb-c", "--records", "3000", "--operations", "20000",
                    "--threads", "4", "--warmup-ops", "3000"], 16)}
    out = []
    try:
        for label, (args, budget) in targets.items():
            for r in range(rounds):
                for parallel in ((1, 2) if r % 2 == 0 else (2, 1)):   # interleaved
                    row = tune(pg.new_database(), address, env, parallel, args, budget)
                    log(f"{label} parallel {parallel}: {row}")
                    out.append({"target": label, "round": r + 1, **row})
    finally:
        subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "stop", "--force"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def ask_times() -> list[dict]:
    from nosqltune.knobs import load_space
    from nosqltune.knobs.space import TuningSpace
    from nosqltune.optimizers import make_optimizer

    space = TuningSpace(load_space("cassandra").subset("wide24"))
    rng = random.Random(0)
    out = []
    for name in ("random", "smac", "gp"):
        for pending in (0, 10, 50):
            with tempfile.TemporaryDirectory() as tmp:
                opt = make_optimizer(name, space, seed=1, budget=200, workloads=["w"], workdir=tmp,
                                     options={"initial": 10})
                try:
                    for _ in range(50):
                        s = opt.ask()
                        opt.tell(s, -rng.uniform(1000, 9000))
                    for _ in range(pending):
                        opt.ask()
                    times = []
                    for _ in range(3):
                        began = time.perf_counter()
                        opt.ask()
                        times.append(time.perf_counter() - began)
                finally:
                    opt.close()
            row = {"optimizer": name, "observed": 50, "pending": pending, "ask_s": round(statistics.median(times), 4)}
            log(str(row))
            out.append(row)
    return out


def _hammer(url: str, seconds: float, queue) -> None:
    store = open_store(url)
    study = store.find_study("q")["id"]
    me, done, end = f"p{os.getpid()}", 0, time.monotonic() + seconds
    while time.monotonic() < end:
        row = store.claim_trial(study, me)
        if row is None:
            break
        store.finish_trial(row["id"], TrialState.COMPLETE, metrics={"summary": {}}, worker=me)
        done += 1
    queue.put(done)


def contention(pg: PostgresServer, seconds: float = 5.0) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")
    out = []
    for workers in (1, 4, 16):
        url = pg.new_database()
        store = open_store(url)
        study = store.study("q")
        for i in range(20000 if workers > 1 else 8000):
            store.enqueue_trial(study, {"i": i}, {"name": "w"})
        store.close()
        queue = ctx.Queue()
        procs = [ctx.Process(target=_hammer, args=(url, seconds, queue)) for _ in range(workers)]
        for p in procs:
            p.start()
        total = sum(queue.get(timeout=120) for _ in procs)
        for p in procs:
            p.join()
        row = {"workers": workers, "claims_per_s": round(total / seconds)}
        log(str(row))
        out.append(row)
    return out


def write(results: dict) -> None:
    (RESULTS / "distributed.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = ["# Parallel studies: trials per hour, ask time with pending suggestions, store contention", "",
             "Generated by `bench/parallel_trials.py` on this machine (2 cores, 24 GiB), nothing else running. A local "
             "Ray cluster (a head and a second node on this machine, one `nosqltune_slot` each) and a throwaway "
             "PostgreSQL 15 (tests/pgserver.py) as the store.", "",
             "## Trials per hour with 1 and 2 workers", "",
             "| target | workers | rounds | trials per study | wall s (mean) | trials per hour (mean) | ratio to 1 worker |",
             "|---|---|---|---|---|---|---|"]
    by = {}
    for row in results["throughput"]:
        by.setdefault((row["target"], row["parallel"]), []).append(row)
    for (target, parallel), rows in by.items():
        base = statistics.mean(r["trials_per_hour"] for r in by[(target, 1)])
        tph = statistics.mean(r["trials_per_hour"] for r in rows)
        lines.append(f"| {target} | {parallel} | {len(rows)} | {rows[0]['trials']} | "
                     f"{statistics.mean(r['wall_s'] for r in rows):.1f} | {tph:,.0f} | x{tph / base:.2f} |")
    lines += ["", "## Ask time with suggestions pending", "",
              "Median of 3 asks after 50 observations on wide24 (24 knobs), with 0, 10 or 50 suggestions asked and "
              "not yet told.", "", "| optimizer | pending | ask s |", "|---|---|---|"]
    lines += [f"| {r['optimizer']} | {r['pending']} | {r['ask_s']:.4f} |" for r in results["ask"]]
    lines += ["", "## Store contention (PostgreSQL)", "",
              "Worker processes claiming and finishing trials of one study's queue as fast as they can for 5 s "
              "(each claim and each finish is one transaction holding the store's advisory lock).", "",
              "| worker processes | claims + finishes per second |", "|---|---|"]
    lines += [f"| {r['workers']} | {r['claims_per_s']:,} |" for r in results["contention"]]
    lines += ["", "## Reading", "", results.get("reading", "(to be written)"), ""]
    (RESULTS / "distributed.md").write_text("\n".join(lines))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    pg = PostgresServer()
    try:
        results = {"throughput": throughput(pg, a.rounds), "ask": ask_times(), "contention": contention(pg)}
    finally:
        pg.stop()
    old = RESULTS / "distributed.json"
    if old.exists():
        results["reading"] = json.loads(old.read_text()).get("reading", "(to be written)")
    write(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
