"""A study that runs on more than one machine: the default re-run on each as its reference, and every run's value
brought to the machine the study began on.

A long study is resumed session after session, and a session may be given another machine: the transfer study's
disk-bound YCSB B search ran its first 31 trials on an AMD EPYC host and its next ones on an Intel Xeon host, where
the default ran at 0.38 of its speed (3,177 against 8,460 ops/s; 467 against 178 us of node CPU per operation:
bench/results/workloads.md). Told as measured, those trials teach
the optimizer that the region it explored on the slow machine is poor, and the best of the study is then a race
between machines, not between configurations.

So a serial study (TuningLoop) resumed on a machine whose environment (runtime/environment.py's fingerprint: CPU
model, cores, memory, kernel, versions) differs from the one its default ran on first runs the default again
before anything else, once per workload: that run is the machine's **reference** (meta `machine_reference`). Every
run on a machine is then valued as if it had run on the study's first machine (its *home*):

    value on home = value measured x (the default's mean on home / the default's mean on this machine)

for the objective's metric, per workload. The factor is kept on each run's row (meta `machine_factor`), so that
`best`, `report` and the confirmation read the same values the optimizer was told; the figures measured stay as
they were. The default's own runs then agree with each other, as they should.

What this assumes, and where it does not hold: that a change of machine moves every configuration by the same
ratio. A configuration limited by the node's cores follows the CPU; one limited by a volume's IOPS cap (a scenario's
own limit, the same on every machine) does not, so across a machine change the correction over-credits it by up to
the machines' ratio. It is the nearest honest figure one reference run gives; a study that must rank such
configurations across machines should confirm its best on one machine (`best --confirm`, as every study here does).
Drift within one machine (the same fingerprint on another day) is `--denoise`'s (tuning.denoise): the probe's
elasticity, fitted on repeats. Parallel studies (`--parallel`) are not corrected: each worker may be a machine.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..objective import metric_keys, metric_value

REFERENCE_KEY = "machine_reference"    # meta: this run is the default re-run on a new machine
FACTOR_KEY = "machine_factor"          # meta: what the run's objective value is multiplied by to be valued on home


def home_summary(row: dict[str, Any], metric: str) -> dict[str, Any]:
    """A stored run's summary with the objective's figures brought to the study's first machine (by the row's
    `machine_factor`; as measured when it has none)."""
    summary = row["metrics"]["summary"]
    factor = (row.get("meta") or {}).get(FACTOR_KEY)
    if not factor or factor == 1:
        return summary
    scaled = dict(summary)
    for key in metric_keys(metric, summary):
        if isinstance(scaled.get(key), (int, float)):
            scaled[key] = scaled[key] * factor
    return scaled


@dataclass(frozen=True)
class MachineFactors:
    """The study's home environment and, per (environment, workload), the factor of its runs. An environment without
    a default run on a workload has no factor there (its runs are valued as measured, and `unreferenced` names it)."""

    metric: str
    home: int | None = None
    factors: dict[tuple[int, str], float] = field(default_factory=dict)
    unreferenced: tuple[int, ...] = ()

    def of(self, row: dict[str, Any]) -> float | None:
        """The factor of a run (None on home, or where its machine has no reference)."""
        env = row.get("environment_id")
        if env is None or env == self.home:
            return None
        return self.factors.get((env, (row.get("meta") or {}).get("instance")))

    def describe(self) -> str | None:
        """One line for the terminal when the study spans machines; None when it ran on one."""
        if not self.factors and not self.unreferenced:
            return None
        said = [f"environment {env} on {name}: x{f:.3f}" for (env, name), f in sorted(self.factors.items())]
        line = ("this study ran on more than one machine: each run valued as on its first machine (environment "
                f"{self.home}) by the default's runs on both" + (f" ({'; '.join(said)})" if said else ""))
        if self.unreferenced:
            which = ", ".join(map(str, self.unreferenced))
            line += (f"; no default ran on environment{'s' if len(self.unreferenced) > 1 else ''} {which}: "
                     "its runs are valued as measured")
        return line


def _default_runs(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The study's complete runs of the default point (suggestion 0, kind default), in the order they ran."""
    out = [r for r in rows if r["state"] == "COMPLETE" and (r.get("meta") or {}).get("kind") == "default"
           and r.get("failure_kind") != "interrupted"]
    return sorted(out, key=lambda r: (r.get("started_at") or 0, r["id"]))


def machine_factors(rows: list[dict[str, Any]], metric: str) -> MachineFactors:
    """The factors from a study's tuning runs: home is the environment of the default's first complete run; each
    other environment's factor on a workload is the default's mean there over its mean on home."""
    defaults = _default_runs(rows)
    home = next((r.get("environment_id") for r in defaults), None)
    if home is None:
        return MachineFactors(metric)
    means: dict[tuple[int, str], list[float]] = {}
    for row in defaults:
        value = metric_value(metric, row["metrics"]["summary"])
        if row.get("environment_id") is not None and value:
            means.setdefault((row["environment_id"], row["meta"]["instance"]), []).append(float(value))
    factors = {}
    for (env, name), values in means.items():
        base = means.get((home, name))
        if env != home and base:
            factors[(env, name)] = round(statistics.mean(base) / statistics.mean(values), 6)
    seen = {r.get("environment_id") for r in rows if r.get("environment_id") is not None} - {home}
    unreferenced = tuple(sorted(env for env in seen if not any(e == env for e, _ in factors)))
    return MachineFactors(metric, home, factors, unreferenced)


def needs_reference(default_rows: list[dict[str, Any]], environment_id: int | None,
                    workloads: list[str]) -> list[str]:
    """The workloads on which the default must run on this machine before the study goes on: those where its
    runs so far are all on other environments (none when the study has not run its default yet, or the machines
    are unknown)."""
    runs = _default_runs(default_rows)
    if environment_id is None or not runs or any(r.get("environment_id") is None for r in runs):
        return []
    here = {r["meta"]["instance"] for r in runs if r.get("environment_id") == environment_id}
    ran = {r["meta"]["instance"] for r in runs}
    return [w for w in workloads if w in ran and w not in here]
