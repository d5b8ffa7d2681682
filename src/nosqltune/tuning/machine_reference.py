"""A study that runs on more than one machine: the default and the study's best re-run on each as its
references, and every run's value brought to the machine the study began on.

A long study is resumed session after session, and a session may be given another machine: the transfer study's
disk-bound YCSB B search ran its first 31 trials on an AMD EPYC host and its next ones on an Intel Xeon host, where
the default ran at 0.38 of its speed (3,177 against 8,460 ops/s; 467 against 178 us of node CPU per operation:
bench/results/workloads.md). Told as measured, those trials teach
the optimizer that the region it explored on the slow machine is poor, and the best of the study is then a race
between machines, not between configurations.

So a serial study (TuningLoop) resumed on another machine (another CPU model, core count or memory: the hardware
of runtime/environment.py's fingerprint; a new kernel or Java on the same hardware is the same machine) first
runs, once per workload and before anything else, the default there and the study's incumbent (its best on the
first machine, when that is not the default): those runs are the machine's **references** (meta
`machine_reference`: "default" or "incumbent"), kept apart from the configurations' own runs. Every run on a
machine is then valued as if it had run on the study's first machine (its *home*):

    value on home = value measured x factor,
    factor = the geometric mean, over the references, of (the configuration's mean on home / its value here)

for the objective's metric, per workload. The factor is fixed when the references run (kept on their rows) and
kept on each run's row (meta `machine_factor`), so that `best`, `report` and the confirmation read the same values
the optimizer was told, session after session; the figures measured stay as they were. A reference that fails is
not run again; the other then values the machine alone, and with neither its runs are valued as measured (said).

What this assumes, and where it does not hold: that a change of machine moves every configuration by the same
ratio. A configuration limited by the node's cores follows the CPU; one limited by a volume's IOPS cap (a scenario's
own limit, the same on every machine) does not, so across a machine change the correction over-credits it by up to
the machines' ratio. The two references test this: when the default's ratio and the incumbent's lie more than
SPREAD apart, the study's line says the values across machines are approximate. They also halve the noise one run
on each side carries into every value of the machine (a study that began before the incumbent's reference existed
keeps the factor its default's reference gave). A study that must rank configurations across machines confirms
its best on one machine (`best --confirm`, as every study here does). Constraints stay as measured on each machine
(a p99 bound is a bound on the machine that serves it). A study with `--denoise` runs no reference: there the
probe's elasticity, fitted on repeats, corrects for the machine (tuning.denoise), and two corrections would count
one speed twice. A `--parallel` session runs none either (each worker may be a machine); rows of earlier serial
sessions keep their factor.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ..objective import metric_keys, metric_value

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
    """The study's home machine and, per (machine, workload), the factor of its runs and the ratios it comes from
    (home over here, per reference kind). A machine whose references failed or never ran has no factor (its runs
    are valued as measured, and `unreferenced` names it)."""

    metric: str
    machines: dict[int, Any] = field(default_factory=dict)     # environment id -> machine (hardware_of)
    home: Any = None
    factors: dict[tuple[Any, str], float] = field(default_factory=dict)
    unreferenced: tuple[int, ...] = ()                          # environment ids
    ratios: dict[tuple[Any, str], dict[str, float]] = field(default_factory=dict)

    def machine(self, env: int | None) -> Any:
        return self.machines.get(env, env)

    def of(self, row: dict[str, Any]) -> float | None:
        """The factor of a run (None on home, or where its machine has no reference)."""
        env = row.get("environment_id")
        if env is None or self.home is None or self.machine(env) == self.home:
            return None
        return self.factors.get((self.machine(env), (row.get("meta") or {}).get("instance")))

    def apart(self) -> list[tuple[Any, str]]:
        """The (machine, workload)s where the default and the incumbent moved by ratios more than SPREAD apart:
        there the machines do not move every configuration alike, and values across them are approximate."""
        return [key for key, r in sorted(self.ratios.items(), key=str)
                if len(r) > 1 and max(r.values()) / min(r.values()) > SPREAD]

    def describe(self) -> str | None:
        """One line for the terminal when the study spans machines; None when it ran on one."""
        if not self.factors and not self.unreferenced:
            return None
        said = [f"{_name(m)} on {name}: x{f:.3f}" + _ratios(self.ratios.get((m, name), {}))
                for (m, name), f in sorted(self.factors.items(), key=str)]
        line = (f"this study ran on more than one machine: each run valued as on its first ({_name(self.home)}) "
                "by the runs of its default (and best) on both" + (f" ({'; '.join(said)})" if said else ""))
        apart = self.apart()
        if apart:
            line += (f"; on {', '.join(name for _, name in apart)} the default and the best moved apart by more "
                     f"than x{SPREAD}: the machines do not move every configuration alike, so values across them "
                     "are approximate (confirm the best on one machine)")
        if self.unreferenced:
            which = ", ".join(map(str, self.unreferenced))
            line += (f"; no reference on environment{'s' if len(self.unreferenced) > 1 else ''} {which}: "
                     "its runs are valued as measured")
        return line


SPREAD = 1.15   # default's and incumbent's ratios further apart than this: said (about 3 runs' noise at 5% each)


def _ratios(ratios: dict[str, float]) -> str:
    return f" (default x{ratios['default']:.3f}, best x{ratios['incumbent']:.3f})" if len(ratios) > 1 else ""


def _name(machine: Any) -> str:
    if isinstance(machine, tuple):
        return f"{machine[0]}, {machine[1]} cores, {machine[2]} GiB"
    return f"environment {machine}"


def _counted(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The complete runs (not cut short), in the order they ran."""
    return sorted((r for r in rows if r["state"] == "COMPLETE" and r.get("failure_kind") != "interrupted"),
                  key=lambda r: (r.get("started_at") or 0, r["id"]))


def _own_defaults(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The default's own complete runs (not the references), in the order they ran."""
    return [r for r in _counted(rows) if (r.get("meta") or {}).get("kind") == "default" and not is_reference(r)]


def home_of(rows: list[dict[str, Any]], machines: Mapping[int, Any] | None = None) -> Any:
    """The study's home: the machine of the default's first complete run (None before it ran, or unknown)."""
    machine = MachineFactors("", dict(machines or {})).machine
    return next((machine(r["environment_id"]) for r in _own_defaults(rows) if r.get("environment_id") is not None),
                None)


def home_runs(rows: list[dict[str, Any]], machines: Mapping[int, Any] | None = None) -> list[dict[str, Any]]:
    """The runs (not references) on the study's home machine: where the incumbent a reference re-runs is picked."""
    machine = MachineFactors("", dict(machines or {})).machine
    home = home_of(rows, machines)
    return [r for r in rows if home is not None and r.get("environment_id") is not None
            and machine(r["environment_id"]) == home and not is_reference(r)]


def machine_factors(rows: list[dict[str, Any]], metric: str,
                    machines: Mapping[int, Any] | None = None) -> MachineFactors:
    """The factors from a study's tuning runs (`machines`: environment id -> machine, hardware_of; each id its own
    machine without it). A machine's factor on a workload is the one its reference's row keeps, once set; else the
    geometric mean, over its references (the default's, the incumbent's), of the configuration's mean on home over
    its value here."""
    machines = dict(machines or {})
    machine = MachineFactors(metric, machines).machine
    home = home_of(rows, machines)
    if home is None:
        return MachineFactors(metric, machines)
    at_home: dict[tuple[str, bytes], list[float]] = {}   # (workload, configuration) -> its values on home
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
    factors = {**{key: round(statistics.geometric_mean(r.values()), 6) for key, r in ratios.items()}, **kept}
    seen = {r.get("environment_id") for r in rows if r.get("environment_id") is not None}
    unreferenced = tuple(sorted(env for env in seen if machine(env) != home
                                and not any(m == machine(env) for m, _ in factors)))
    return MachineFactors(metric, machines, home, factors, unreferenced, ratios)


def _config_key(row: dict[str, Any]) -> str:
    return json.dumps(row.get("config") or {}, sort_keys=True, default=str)


def needs_reference(rows: list[dict[str, Any]], environment_id: int | None, workloads: list[str],
                    machines: Mapping[int, Any] | None = None,
                    incumbent: bool = False) -> list[tuple[str, str]]:
    """The references to run on this machine before the study goes on, as (workload, "default" | "incumbent"):
    on each workload where the default has run (completely) only on other machines, the default once (unless tried
    here already: a failed one is not run again) and, when the study has an `incumbent` other than the default,
    the incumbent once (unless tried here, or the machine's factor is kept already: a study valued before the
    incumbent's reference existed keeps its factor). None when the study has not run its default yet, or the
    machines are unknown."""
    machine = MachineFactors("", dict(machines or {})).machine
    own = _own_defaults(rows)
    if environment_id is None or not own or any(r.get("environment_id") is None for r in own):
        return []
    here = machine(environment_id)
    mine = {r["meta"]["instance"] for r in own if machine(r["environment_id"]) == here}
    references = [r for r in rows if is_reference(r) and machine(r.get("environment_id")) == here]
    tried = {(r["meta"]["instance"], reference_kind(r)) for r in references}
    kept = {r["meta"]["instance"] for r in references if r["meta"].get(FACTOR_KEY)}
    ran = {r["meta"]["instance"] for r in own}
    out = []
    for name in (w for w in workloads if w in ran and w not in mine):
        out += [(name, kind) for kind in ("default", "incumbent")[:1 + incumbent] if (name, kind) not in tried
                and (kind == "default" or name not in kept)]
    return out
