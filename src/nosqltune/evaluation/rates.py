"""Fixed request rates (the latency-slo scenario): a share of the default configuration's maximum throughput for
a workload on this machine, measured once with cold unthrottled trials and kept in the user's cache, so every
later run on the same machine, datastore, harness and workload reuses it.

A run at a fixed rate that does not reach SUSTAINED of it could not keep up: its latency is not comparable with
that of a configuration that served the whole rate (it served fewer requests, and a closed-loop client waits
less when the server falls behind), so the rate becomes a constraint, never ranked away."""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import TrialError
from ..runtime.paths import cache_dir
from ..systems import Progress, TrialSettings, quiet, target
from ..workloads.ycsb import RATE_SUSTAINED

if TYPE_CHECKING:
    from ..workloads.spec import Workload

SUSTAINED = RATE_SUSTAINED   # share of the asked rate a run must reach to count as sustaining it
MAX_THROUGHPUT_RUNS = 3    # cold unthrottled trials of the default that measure the maximum


def _key(settings: TrialSettings, workload: "Workload", overrides: dict[str, Any]) -> str:
    """What the maximum throughput depends on: the machine, the datastore and harness, the workload (without
    its rate and the length of its measured phase) and the scenario's fixed knob values."""
    from ..systems.dataset import dataset_key

    # the harness as one flat dict, as stored before the split: the keys of measured rates stay what they were
    harness = {k: v for k, v in settings.flat().items() if k not in ("keep_node",)}
    shape = {k: v for k, v in workload.to_dict().items() if k not in ("target", "operations", "max_seconds")}
    return dataset_key({"machine": target(settings.system).fingerprint(settings), "harness": harness,
                        "workload": shape, "knobs": overrides})


def _path() -> Path:
    """The user's cache of measured maximum throughputs (NOSQLTUNE_RATES names another file)."""
    return Path(os.environ.get("NOSQLTUNE_RATES") or cache_dir() / "rates.json")


def _read() -> dict[str, Any]:
    try:
        return json.loads(_path().read_text())
    except (FileNotFoundError, ValueError):
        return {}


def max_throughput(settings: TrialSettings, workload: "Workload", overrides: dict[str, Any] | None = None, *,
                   runs: int = MAX_THROUGHPUT_RUNS, progress: Progress = quiet) -> dict[str, Any]:
    """The default configuration's maximum throughput for `workload` on this machine: the mean of `runs` cold
    unthrottled trials, measured on first use and read from the cache after. Returns the cached entry
    ({"max_ops_s", "runs_ops_s", "measured_at", "workload"})."""
    overrides = dict(overrides or {})
    key = _key(settings, workload, overrides)
    found = _read().get(key)
    if found:
        return found
    datastore = target(settings.system)
    space = datastore.knob_space(settings)
    unthrottled = replace(workload, target=None)
    values = []
    for i in range(runs):
        progress(f"maximum throughput of the default for {workload.name} (once on this machine): run {i + 1}/{runs}")
        result = datastore.run_trial(space, overrides, unthrottled, settings, progress=progress)
        if result.state != "COMPLETE":
            raise TrialError(result.failure_kind or "error",
                             f"measuring the default's maximum throughput failed: {result.error}", result.log_excerpt)
        values.append(result.summary["throughput_ops_s"])
    entry = {"max_ops_s": statistics.mean(values), "runs_ops_s": values, "measured_at": time.time(),
             "workload": workload.name, "records": workload.records, "system": settings.system}
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:    # two runs measuring at once: both entries kept
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = _read()
        table[key] = entry
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True))
        tmp.replace(path)
    return entry


def check_replay_pace(settings: TrialSettings, workload: "Workload", overrides: dict[str, Any] | None = None, *,
                      progress: Progress = quiet) -> float:
    """The statements per second a paced replay asks (its window at its pace), once checked against what the default
    configuration serves of the same statements as fast as it can here (one trial, then kept, as a fixed rate's
    maximum is): a pace above that is refused as infeasible (UsageError) before any trial is ranked on it."""
    from ..errors import UsageError
    from ..workloads.replay import pace_speed

    rate = workload.replay["rate_ops_s"]
    fastest = replace(workload, replay={**workload.replay, "pace": "max", "rate_ops_s": None},
                      name=f"{workload.name}-max")
    # one run: a check that the pace can be served at all, with SUSTAINED's margin, not a rate derived from it
    entry = max_throughput(settings, fastest, overrides, runs=1, progress=progress)
    if rate > SUSTAINED * entry["max_ops_s"]:
        raise UsageError(f"replay pace {workload.replay['pace']} asks {rate:.0f} statements/s of the node; the "
                         f"default serves at most {entry['max_ops_s']:.0f}/s of them here: infeasible; replay at "
                         f"x{entry['max_ops_s'] * SUSTAINED / rate * pace_speed(workload.replay['pace']):.2g} or "
                         "below, or as fast as answered (max)")
    progress(f"replay pace {workload.replay['pace']}: {rate:.0f} statements/s, the default serves up to "
             f"{entry['max_ops_s']:.0f}/s here")
    return rate


def fixed_rate(settings: TrialSettings, workload: "Workload", fraction: float,
               overrides: dict[str, Any] | None = None, *, progress: Progress = quiet) -> int:
    """`fraction` of the default's maximum throughput for `workload` here, in whole operations per second."""
    entry = max_throughput(settings, workload, overrides, progress=progress)
    rate = max(1, int(round(fraction * entry["max_ops_s"])))
    progress(f"fixed rate {rate} ops/s: {fraction:g} of the default's maximum {entry['max_ops_s']:.0f} ops/s")
    return rate

