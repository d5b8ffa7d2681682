"""A study that runs on more than one machine: the default re-run on each as its reference (and the study's best
beside it, as a check), and every run's value brought to the machine the study began on.

A long study is resumed session after session, and a session may be given another machine: the transfer study's
disk-bound YCSB B search ran its first 31 trials on an AMD EPYC host and its next ones on an Intel Xeon host, where
the default ran at 0.38 of its speed (3,177 against 8,460 ops/s; 467 against 178 us of node CPU per operation:
bench/results/workloads.md). Told as measured, those trials teach
the optimizer that the region it explored on the slow machine is poor, and the best of the study is then a race
between machines, not between configurations.

So a serial study (TuningLoop) resumed on another machine (another CPU model, core count or memory: the hardware
of runtime/environment.py's fingerprint; a new kernel or Java on the same hardware is the same machine) first
runs, once per workload and before anything else there, the default and the study's incumbent (its best on the
first machine, measured on every workload there, when that is not the default): those runs are the machine's
**references** (meta `machine_reference`: "default" or "incumbent"; True from before the incumbent's), kept apart
from the configurations' own runs. Every run on a machine is then valued as if it had run on the study's first
machine (its *home*):

    value on home = value measured x (the default's mean on home / its reference's value on this machine)

for the objective's metric, per workload. The factor is fixed when the reference runs (kept on its row) and kept
on each run's row from its start (meta `machine_factor`), so that `best`, `report`, the dashboard and the
confirmation read the same values the optimizer was told, session after session; the figures measured stay as
they were. A reference that fails is not run again; where the default's failed, that machine's runs on the
workload are valued as measured (said), and a failed incumbent's only loses the check below. No reference runs on
a machine that ran the study's configurations before, and no run that began before its machine's references is
revalued (it was told as measured; revalued, a replayed study would diverge). The budget takes the default's
references first.

What this assumes, and where it does not hold: that a change of machine moves every configuration by the same
ratio. A configuration limited by the node's cores follows the CPU; one limited by a volume's IOPS cap (a scenario's
own limit, the same on every machine) does not, so across a machine change the correction over-credits it by up to
the machines' ratio. The incumbent's reference checks this: it is no part of the factor (its value on home is the
best of many runs, luck included, so on any machine it seems to lose more than it does), but when it lost less than
the default by more than SPREAD, the study's line says configurations like it are over-credited there, and when it
lost more by SPREAD, that they may be under-credited. One reference run carries one run's noise into every value of
its machine. A study that must rank configurations across machines confirms its best on one machine (`best
--confirm`, as every study here does). Constraints stay as measured on each machine (a p99 bound is a bound on the
machine that serves it). A study with `--denoise` runs no reference: there the probe's elasticity, fitted on
repeats, corrects for the machine (tuning.denoise), and two corrections would count one speed twice. A
`--parallel` session runs none either (each worker may be a machine); rows of earlier serial sessions keep their
factor.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..objective import Objective, metric_keys, metric_value

REFERENCE_KEY = "machine_reference"    # meta: this run re-ran the default ("default") or the best ("incumbent") here
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


def reference_kind(row: dict[str, Any]) -> str | None:
    """Which configuration a reference run re-ran: "default" or "incumbent" (a reference stored before the
    incumbent's was added says True: the default's)."""
    kind = (row.get("meta") or {}).get(REFERENCE_KEY)
    return None if not kind else "default" if kind is True else str(kind)


@dataclass(frozen=True)
class MachineFactors:
    """The study's home machine and, per (machine, workload), the factor of its runs and the ratios of its references
    (home over here, per kind). Where the default's reference failed or never ran there is no factor (those runs
    are valued as measured, and `unreferenced` names them)."""

    metric: str
    machines: dict[int, Any] = field(default_factory=dict)     # environment id -> machine (hardware_of)
    home: Any = None
    factors: dict[tuple[Any, str], float] = field(default_factory=dict)
    unreferenced: tuple[tuple[int, str], ...] = ()              # (environment id, workload) valued as measured
    ratios: dict[tuple[Any, str], dict[str, float]] = field(default_factory=dict)
    since: dict[Any, float] = field(default_factory=dict)      # machine -> when its first reference began

    def machine(self, env: int | None) -> Any:
        return self.machines.get(env, env)

    def of(self, row: dict[str, Any]) -> float | None:
        """The factor of a run (None on home, where its machine has no reference, or for a run that began before
        its machine's references: it was told as measured, and stays so)."""
        env = row.get("environment_id")
        if env is None or self.home is None or self.machine(env) == self.home:
            return None
        began = row.get("started_at")
        if began is not None and not is_reference(row) and began < self.since.get(self.machine(env), began):
            return None
        return self.factors.get((self.machine(env), (row.get("meta") or {}).get("instance")))

    def apart(self) -> list[tuple[tuple[Any, str], float]]:
        """The (machine, workload)s where the incumbent lost more than SPREAD less, or more, than the default on
        moving there, with the ratio of its loss to the default's (below 1: it lost less). Its loss is biased up
        (it was picked as the best of many runs on home, its luck with it), so below 1/SPREAD says the machines do
        not move every configuration alike; above SPREAD it may be in part that luck."""
        sign = 1 if Objective.parse(self.metric).maximize else -1
        out = []
        for key, r in sorted(self.ratios.items(), key=str):
            if "default" in r and "incumbent" in r:
                q = (r["incumbent"] / r["default"]) ** sign
                if q < 1 / SPREAD or q > SPREAD:
                    out.append((key, q))
        return out

    def describe(self) -> str | None:
        """One line for the terminal when the study spans machines; None when it ran on one."""
        if not self.factors and not self.unreferenced:
            return None
        said = [f"{_name(m)} on {name}: x{f:.3f}" + _best(self.ratios.get((m, name), {}))
                for (m, name), f in sorted(self.factors.items(), key=str)]
        line = (f"this study ran on more than one machine: each run valued as on its first ({_name(self.home)}) "
                "by the default's runs on both" + (f" ({'; '.join(said)})" if said else ""))
        for (_, name), q in self.apart():
            if q < 1:
                line += (f"; on {name} the best so far lost x{q:.2f} of what the default lost there: the machines "
                         "do not move every configuration alike, and values of configurations like the best are "
                         "over-credited there (confirm the best on one machine)")
            else:
                line += (f"; on {name} the best so far lost x{q:.2f} of what the default lost there (part of it may "
                         "be its luck when it was picked): values of configurations like it may be under-credited")
        if self.unreferenced:
            which = ", ".join(f"environment {env} on {name}" for env, name in self.unreferenced)
            line += f"; no default's reference for {which}: those runs are valued as measured"
        return line


SPREAD = 1.15   # the incumbent's loss against the default's beyond this is said (two runs' noise on each side)


def _best(ratios: dict[str, float]) -> str:
    return f" (the best so far: x{ratios['incumbent']:.3f})" if "incumbent" in ratios else ""


def _name(machine: Any) -> str:
    if isinstance(machine, tuple):
        return f"{machine[0]}, {machine[1]} cores, {machine[2]} GiB"
    return f"environment {machine}"


def _lookup(machines: Mapping[int, Any] | None):
    """environment id -> its machine (hardware_of); each id its own machine where `machines` does not say."""
    known = dict(machines or {})
    return lambda env: known.get(env, env)


def _counted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The complete runs (not cut short), in the order they ran."""
    return sorted((r for r in rows if r["state"] == "COMPLETE" and r.get("failure_kind") != "interrupted"),
                  key=lambda r: (r.get("started_at") or 0, r["id"]))


def _own_defaults(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The default's own complete runs (not the references), in the order they ran."""
    return [r for r in _counted(rows) if (r.get("meta") or {}).get("kind") == "default" and not is_reference(r)]


def home_of(rows: list[dict[str, Any]], machines: Mapping[int, Any] | None = None) -> Any:
    """The study's home: the machine of the default's first complete run (None before it ran, or unknown)."""
    machine = _lookup(machines)
    return next((machine(r["environment_id"]) for r in _own_defaults(rows) if r.get("environment_id") is not None),
                None)


def home_runs(rows: list[dict[str, Any]], machines: Mapping[int, Any] | None = None) -> list[dict[str, Any]]:
    """The runs (not references) on the study's home machine: where the incumbent a reference re-runs is picked."""
    machine = _lookup(machines)
    home = home_of(rows, machines)
    return [r for r in rows if home is not None and r.get("environment_id") is not None
            and machine(r["environment_id"]) == home and not is_reference(r)]


def machine_factors(rows: list[dict[str, Any]], metric: str,
                    machines: Mapping[int, Any] | None = None) -> MachineFactors:
    """The factors from a study's tuning runs (`machines`: environment id -> machine, hardware_of; each id its own
    machine without it). A machine's factor on a workload is the one its reference's row keeps, once set; else the
    default's mean on home over its reference's value here. The ratios (home over here) of both references are kept
    in `ratios`: the incumbent's is no part of the factor (its value on home is the best of many runs, luck
    included, so its ratio is biased), only the check that the machines move configurations alike (`apart`)."""
    machines = dict(machines or {})
    machine = _lookup(machines)
    home = home_of(rows, machines)
    if home is None:
        return MachineFactors(metric, machines)
    at_home: dict[tuple[str, str], list[float]] = {}   # (workload, configuration) -> its values on home
    for row in _counted(rows):
        value = metric_value(metric, row["metrics"]["summary"])
        if not is_reference(row) and row.get("environment_id") is not None and \
                machine(row["environment_id"]) == home and value:
            at_home.setdefault((row["meta"]["instance"], _config_key(row)), []).append(float(value))
            if row["meta"].get("kind") == "default":
                at_home.setdefault((row["meta"]["instance"], "default"), []).append(float(value))
    kept: dict[tuple[Any, str], float] = {}
    ratios: dict[tuple[Any, str], dict[str, float]] = {}
    for row in (r for r in _counted(rows) if is_reference(r)):
        key = (machine(row.get("environment_id")), row["meta"]["instance"])
        if key[0] == home:
            continue
        if row["meta"].get(FACTOR_KEY) and key not in kept:
            kept[key] = float(row["meta"][FACTOR_KEY])
        value = metric_value(metric, row["metrics"]["summary"])
        kind = reference_kind(row)
        base = at_home.get((key[1], "default" if kind == "default" else _config_key(row)))
        if value and base:
            ratios.setdefault(key, {}).setdefault(kind, statistics.mean(base) / float(value))
    factors = {**{key: round(r["default"], 6) for key, r in ratios.items() if "default" in r}, **kept}
    seen = {(r["environment_id"], (r.get("meta") or {}).get("instance")) for r in rows
            if r.get("environment_id") is not None and machine(r["environment_id"]) != home}
    unreferenced = tuple(sorted((env, name) for env, name in seen if (machine(env), name) not in factors
                                and name is not None))
    since: dict[Any, float] = {}
    for row in (r for r in rows if is_reference(r) and r.get("started_at") is not None):
        key = machine(row.get("environment_id"))
        since[key] = min(since.get(key, row["started_at"]), row["started_at"])
    return MachineFactors(metric, machines, home, factors, unreferenced, ratios, since)


def _config_key(row: dict[str, Any]) -> str:
    return json.dumps(row.get("config") or {}, sort_keys=True, default=str)


def needs_reference(rows: list[dict[str, Any]], environment_id: int | None, workloads: list[str],
                    machines: Mapping[int, Any] | None = None,
                    incumbent: bool = False) -> list[tuple[str, str]]:
    """The references to run on this machine before the study goes on, as (workload, "default" | "incumbent"), the
    default's first: on each workload where the default has run (completely) only on other machines and the study has
    run nothing else here yet, the default once and, when the study has an `incumbent` other than the default, the
    incumbent once; a reference tried here already (a failed one too) is not run again. Nothing where this machine
    ran the study's configurations before (a reference then would revalue runs the optimizer was told as
    measured), when the study has not run its default yet, or when the machines are unknown."""
    machine = _lookup(machines)
    own = _own_defaults(rows)
    if environment_id is None or not own or any(r.get("environment_id") is None for r in own):
        return []
    here = machine(environment_id)
    mine = [r for r in rows if r.get("environment_id") is not None and machine(r["environment_id"]) == here]
    busy = {r["meta"]["instance"] for r in mine if not is_reference(r)}
    tried = {(r["meta"]["instance"], reference_kind(r)) for r in mine if is_reference(r)}
    ran = {r["meta"]["instance"] for r in own}
    return [(name, kind) for kind in ("default", "incumbent")[:1 + incumbent] for name in workloads
            if name in ran and name not in busy and (name, kind) not in tried]
