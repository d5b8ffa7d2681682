"""A study that runs on more than one machine: the default re-run on each as its reference, and every run's value
brought to the machine the study began on.

A long study is resumed session after session, and a session may be given another machine: the transfer study's
disk-bound YCSB B search ran its first 31 trials on an AMD EPYC host and its next ones on an Intel Xeon host, where
the default ran at 0.38 of its speed (3,177 against 8,460 ops/s; 467 against 178 us of node CPU per operation:
bench/results/workloads.md). Told as measured, those trials teach
the optimizer that the region it explored on the slow machine is poor, and the best of the study is then a race
between machines, not between configurations.

So a serial study (TuningLoop) resumed on another machine (another CPU model, core count or memory: the hardware
of runtime/environment.py's fingerprint; a new kernel or Java on the same hardware is the same machine) first
runs the default there, once per workload, before anything else: that run is the machine's **reference** (meta
`machine_reference`), kept apart from the default's own runs. Every run on a machine is then valued as if it had
run on the study's first machine (its *home*):

    value on home = value measured x (the default's mean on home / the reference's value on this machine)

for the objective's metric, per workload. The factor is fixed when the reference runs (kept on the reference's
row) and kept on each run's row (meta `machine_factor`), so that `best`, `report` and the confirmation read the
same values the optimizer was told, session after session; the figures measured stay as they were. A reference
that fails leaves its machine's runs valued as measured (said), and is not run again.

What this assumes, and where it does not hold: that a change of machine moves every configuration by the same
ratio. A configuration limited by the node's cores follows the CPU; one limited by a volume's IOPS cap (a scenario's
own limit, the same on every machine) does not, so across a machine change the correction over-credits it by up to
the machines' ratio. One reference run carries one run's noise into every value of its machine. It is the nearest
honest figure one reference run gives; a study that must rank such configurations across machines confirms its
best on one machine (`best --confirm`, as every study here does). Constraints stay as measured on each machine
(a p99 bound is a bound on the machine that serves it). A study with `--denoise` runs no reference: there the
probe's elasticity, fitted on repeats, corrects for the machine (tuning.denoise), and two corrections would count
one speed twice. A `--parallel` session runs none either (each worker may be a machine); rows of earlier serial
sessions keep their factor.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..objective import metric_keys, metric_value

REFERENCE_KEY = "machine_reference"    # meta: this run is the default re-run on a new machine
FACTOR_KEY = "machine_factor"          # meta: what the run's objective value is multiplied by to be valued on home
HARDWARE = ("cpu_model", "cores", "memory_gib")   # what makes another machine; the rest of a fingerprint does not


def hardware_of(environments: Mapping[int, Mapping[str, Any]]) -> dict[int, tuple]:
    """Each stored environment's machine: its CPU model, cores and memory (whole GiB: a kernel may see 23.4 or 23.5)."""
    return {env: tuple(int(fp.get(k)) if k == "memory_gib" and isinstance(fp.get(k), (int, float)) else fp.get(k)
                       for k in HARDWARE) for env, fp in environments.items()}


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


def is_reference(row: dict[str, Any]) -> bool:
    return bool((row.get("meta") or {}).get(REFERENCE_KEY))


@dataclass(frozen=True)
class MachineFactors:
    """The study's home machine and, per (machine, workload), the factor of its runs. A machine whose reference
    failed or never ran has no factor (its runs are valued as measured, and `unreferenced` names it)."""

    metric: str
    machines: dict[int, Any] = field(default_factory=dict)     # environment id -> machine (hardware_of)
    home: Any = None
    factors: dict[tuple[Any, str], float] = field(default_factory=dict)
    unreferenced: tuple[int, ...] = ()                          # environment ids

    def machine(self, env: int | None) -> Any:
        return self.machines.get(env, env)

    def of(self, row: dict[str, Any]) -> float | None:
        """The factor of a run (None on home, or where its machine has no reference)."""
        env = row.get("environment_id")
        if env is None or self.home is None or self.machine(env) == self.home:
            return None
        return self.factors.get((self.machine(env), (row.get("meta") or {}).get("instance")))

    def describe(self) -> str | None:
        """One line for the terminal when the study spans machines; None when it ran on one."""
        if not self.factors and not self.unreferenced:
            return None
        said = [f"{_name(m)} on {name}: x{f:.3f}" for (m, name), f in sorted(self.factors.items(), key=str)]
        line = (f"this study ran on more than one machine: each run valued as on its first ({_name(self.home)}) "
                "by the default's runs on both" + (f" ({'; '.join(said)})" if said else ""))
        if self.unreferenced:
            which = ", ".join(map(str, self.unreferenced))
            line += (f"; no reference on environment{'s' if len(self.unreferenced) > 1 else ''} {which}: "
                     "its runs are valued as measured")
        return line


def _name(machine: Any) -> str:
    if isinstance(machine, tuple):
        return f"{machine[0]}, {machine[1]} cores, {machine[2]} GiB"
    return f"environment {machine}"


def _defaults(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The complete runs of the default (its own and the references), in the order they ran."""
    return sorted((r for r in rows if r["state"] == "COMPLETE" and r.get("failure_kind") != "interrupted"
                   and (r.get("meta") or {}).get("kind") == "default"),
                  key=lambda r: (r.get("started_at") or 0, r["id"]))


def machine_factors(rows: list[dict[str, Any]], metric: str,
                    machines: Mapping[int, Any] | None = None) -> MachineFactors:
    """The factors from a study's tuning runs (`machines`: environment id -> machine, hardware_of; each id its own
    machine without it). Home is the machine of the default's first complete run. A machine's factor on a workload
    is the one its reference's row keeps, once set; else the default's mean on home over the reference's value."""
    machines = dict(machines or {})
    machine = MachineFactors(metric, machines).machine
    defaults = _defaults(rows)
    own = [r for r in defaults if not is_reference(r)]
    home = next((machine(r["environment_id"]) for r in own if r.get("environment_id") is not None), None)
    if home is None:
        return MachineFactors(metric, machines)
    base: dict[str, list[float]] = {}
    for row in own:
        value = metric_value(metric, row["metrics"]["summary"])
        if machine(row.get("environment_id")) == home and value:
            base.setdefault(row["meta"]["instance"], []).append(float(value))
    factors: dict[tuple[Any, str], float] = {}
    for row in (r for r in defaults if is_reference(r)):
        key = (machine(row.get("environment_id")), row["meta"]["instance"])
        if key[0] == home or key in factors:
            continue
        kept = row["meta"].get(FACTOR_KEY)
        value = metric_value(metric, row["metrics"]["summary"])
        if kept:
            factors[key] = float(kept)
        elif value and base.get(key[1]):
            factors[key] = round(statistics.mean(base[key[1]]) / float(value), 6)
    seen = {r.get("environment_id") for r in rows if r.get("environment_id") is not None}
    unreferenced = tuple(sorted(env for env in seen if machine(env) != home
                                and not any(m == machine(env) for m, _ in factors)))
    return MachineFactors(metric, machines, home, factors, unreferenced)


def needs_reference(rows: list[dict[str, Any]], environment_id: int | None, workloads: list[str],
                    machines: Mapping[int, Any] | None = None) -> list[str]:
    """The workloads on which the default must run on this machine before the study goes on: those where the
    default has run (completely) only on other machines and no reference was tried here (a failed one is not run
    again); none when the study has not run its default yet, or the machines are unknown."""
    machine = MachineFactors("", dict(machines or {})).machine
    own = [r for r in _defaults(rows) if not is_reference(r)]
    if environment_id is None or not own or any(r.get("environment_id") is None for r in own):
        return []
    here = machine(environment_id)
    done = {r["meta"]["instance"] for r in own if machine(r["environment_id"]) == here}
    done |= {r["meta"]["instance"] for r in rows if is_reference(r) and machine(r.get("environment_id")) == here}
    ran = {r["meta"]["instance"] for r in own}
    return [w for w in workloads if w in ran and w not in done]
