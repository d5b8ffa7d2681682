"""A tuning study grown to thousands of trials without running them: rows written straight into a SQLite store,
each a random configuration of the study's space with the figures of one of its measured trials and a random
throughput (one in 97 failed). For the dashboard's scale test and bench/dashboard_scale.py."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path


def add_trials(path: Path, study_name: str, count: int, seed: int = 7) -> None:
    """`count` more finished tuning trials in the study `study_name` of the SQLite store at `path`."""
    from nosqltune.evaluation.study import study_of
    from nosqltune.store import open_store

    with open_store(str(path)) as store:
        opened = study_of(store, store.find_study(study_name))
        measured = store.trials(opened.id)
        template, first = measured[1], len(measured)
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        config = opened.space.sample(rng)
        summary = {**template["metrics"]["summary"], "throughput_ops_s": rng.uniform(4000, 9000)}
        failed = i % 97 == 0
        rows.append((opened.id, first + i, "FAIL" if failed else "COMPLETE", "crash" if failed else None,
                     "the node exited with 137" if failed else None, "tune", json.dumps(config),
                     json.dumps(template["workload"]), None if failed else json.dumps({"summary": summary}),
                     json.dumps({"bottleneck": {"limit": "cores", "line": "limited by the cores"}}),
                     json.dumps({"total_s": 60.0, "measure_s": 30.0, "boot_s": 20.0}), 1.0e9 + i, 1.0e9 + i + 60,
                     json.dumps({"suggestion": first + i, "kind": "suggested", "instance": "read90"})))
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO trials (study_id, number, state, failure_kind, error, tag, config, workload, "
                       "metrics, internals, timings, started_at, finished_at, meta) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
