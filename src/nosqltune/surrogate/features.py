"""Model inputs from stored trials: workload features, knob values and physical design, as one numeric row.

Knobs are encoded as the optimizers see them (numbers scaled to [0, 1], log scale where the knob says so;
categories one-hot; a knob whose condition is off holds its default). Workloads are described by their read
ratio (RAFIKI's workload axis) and, when the data has more than one, their request distribution (one-hot).
Physical design (node count, replication factor) enters as numbers when trials carry it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import UsageError

DISTRIBUTIONS = ("zipfian", "uniform", "latest")


def workload_features(workload: Mapping[str, Any]) -> dict[str, Any]:
    """Read ratio, request distribution and design of a stored workload (a Workload dict)."""
    mix = workload.get("mix", {})
    reads = float(mix.get("readproportion", 0) or 0)
    writes = sum(float(mix.get(k, 0) or 0) for k in ("updateproportion", "insertproportion",
                                                      "readmodifywriteproportion", "scanproportion"))
    total = reads + writes
    return {"read_ratio": round(reads / total, 6) if total else 0.0,
            "distribution": mix.get("requestdistribution", "zipfian"),
            "design": design_of(workload)}


DESIGN_DEFAULTS = {"nodes": 1, "replication_factor": 1}


def design_of(workload: Mapping[str, Any]) -> dict[str, float]:
    """The physical design a trial ran on: a stored `design`, else the harness's cluster settings when they are
    not a single node with RF 1 (so single-node studies keep no constant design columns)."""
    if workload.get("design"):
        return dict(workload["design"])
    harness = workload.get("harness") or {}
    design = {k: harness.get(k, v) for k, v in DESIGN_DEFAULTS.items()}
    return design if design != DESIGN_DEFAULTS else {}


@dataclass
class FeatureSpec:
    """How a (configuration, workload) pair becomes a row; stored with a fitted model."""

    knobs: Any                         # knob set name or mapping, as stored with the study
    fixed: dict[str, Any] = field(default_factory=dict)
    distributions: list[str] = field(default_factory=lambda: ["zipfian"])
    design: list[str] = field(default_factory=list)
    system: str = "cassandra"          # the knob space (cassandra, redis, ...)

    def space(self):
        from ..knobs import load_space
        from ..optimizers.space import TuningSpace

        return TuningSpace(load_space(self.system).subset(self.knobs), self.fixed)

    def names(self, space=None) -> list[str]:
        from ..optimizers.space import categorical, choices_of

        space = space or self.space()
        out = ["read_ratio"]
        if len(self.distributions) > 1:
            out += [f"distribution={d}" for d in self.distributions]
        out += list(self.design)
        for knob in space.knobs:
            out += [f"{knob.name}={c}" for c in choices_of(knob)] if categorical(knob) else [knob.name]
        return out

    def knob_columns(self, space=None) -> dict[str, list[int]]:
        """Column indexes of each knob (one for a number, one per choice for a category)."""
        names = self.names(space)
        out: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            knob = name.split("=", 1)[0]
            if knob not in ("read_ratio", "distribution") and knob not in self.design:
                out.setdefault(knob, []).append(i)
        return out

    def workload_row(self, features: Mapping[str, Any]) -> list[float]:
        row = [float(features["read_ratio"])]
        if len(self.distributions) > 1:
            row += [1.0 if features["distribution"] == d else 0.0 for d in self.distributions]
        design = features.get("design") or {}
        for name in self.design:
            if name not in design and name not in DESIGN_DEFAULTS:
                raise UsageError(f"the model needs the design feature {name!r}")
            row.append(float(design.get(name, DESIGN_DEFAULTS.get(name))))
        return row

    def row(self, space, config: Mapping[str, Any], features: Mapping[str, Any]) -> list[float]:
        return self.workload_row(features) + space.encode(config)

    def to_dict(self) -> dict[str, Any]:
        return {"knobs": self.knobs, "fixed": self.fixed, "distributions": self.distributions,
                "design": self.design, "system": self.system}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "FeatureSpec":
        return cls(**data)


@dataclass
class Table:
    """Complete trials of a study as model rows."""

    spec: FeatureSpec
    X: Any                              # numpy array, one row per trial
    metrics: list[dict[str, Any]]       # each trial's summary
    configs: list[str]                  # canonical configuration key of each row (grouping: unseen configs)
    workloads: list[str]                # workload name of each row (grouping: unseen workloads)
    read_ratios: list[float]
    trial_ids: list[int]
    raw_configs: list[dict[str, Any]]

    def target(self, metric: str):
        """The metric per row (numpy), and the mask of rows that have it."""
        import numpy as np

        from ..tuning.objective import metric_value

        values = [metric_value(metric, m) for m in self.metrics]
        mask = np.array([v is not None and v > 0 for v in values])
        return np.array([v if ok else np.nan for v, ok in zip(values, mask)], dtype=float), mask


def study_knobs(study: Mapping[str, Any]) -> tuple[Any, dict[str, Any], str]:
    """The knob subset, the fixed values and the knob space's name of a collection or tuning study."""
    settings = study.get("settings") or {}
    for key in ("collect", "tune"):
        if key in settings:
            harness = settings[key].get("harness") or {}
            system = harness.get("system", "cassandra")
            if system == "external":
                from ..systems.external.target import load_target

                system = load_target(harness["target_file"]).knobs
            return settings[key]["knobs"], dict(settings[key].get("fixed") or {}), system
    raise UsageError(f"study '{study['name']}' is neither a collection nor a tuning run: no knob space stored")


def pick_study(store, name: str | None) -> dict[str, Any]:
    studies = list(store.studies())
    if name:
        found = store.find_study(name)
        if not found:
            raise UsageError(f"no study named '{name}' (studies: {', '.join(s['name'] for s in studies) or 'none'})")
        return found
    for preferred in ("collect", "tune"):
        for s in studies:
            if s["name"] == preferred:
                return s
    usable = [s for s in studies if {"collect", "tune"} & set(s.get("settings") or {})]
    if len(usable) == 1:
        return usable[0]
    raise UsageError("the store has no collection or tuning study" if not usable else
                     f"several studies ({', '.join(s['name'] for s in usable)}): pick one with --study-name")


def existing_store(study_path: str):
    """Open a store that must exist already (reading commands never create one)."""
    from pathlib import Path

    from ..store import open_store

    if not str(study_path).startswith(("sqlite:", "postgresql:")) and not Path(study_path).exists():
        raise UsageError(f"no study store at {study_path}")
    return open_store(study_path)


def _study_rows(study_path: str, study_name: str | None) -> tuple[str, Any, dict, list[dict]]:
    store = existing_store(study_path)
    try:
        study = pick_study(store, study_name)
        knobs, fixed, system = study_knobs(study)
        rows = [r for r in store.trials(study["id"]) if r["state"] == "COMPLETE" and r["tag"] in ("collect", "tune")]
    finally:
        store.close()
    return study["name"], knobs, fixed, system, rows


def load_table(source: str, study_name: str | None = None) -> Table:
    """Every complete trial (tagged collect or tune) of a study, or of an exported dataset file
    (.json / .json.gz, see `surrogate.dataset`), as a Table."""
    import numpy as np

    if str(source).endswith((".json", ".json.gz")):
        from .dataset import read_dataset

        data = read_dataset(source)
        name, knobs, fixed, rows = data["name"], data["knobs"], data["fixed"], data["trials"]
        system = data.get("system", "cassandra")
    else:
        name, knobs, fixed, system, rows = _study_rows(source, study_name)
    if not rows:
        raise UsageError(f"study '{name}' has no complete trial to learn from")
    features = [workload_features(r["workload"]) for r in rows]
    distributions = sorted({f["distribution"] for f in features}, key=lambda d: (d not in DISTRIBUTIONS, d))
    searched = FeatureSpec(knobs=knobs, fixed=fixed, system=system).space()
    # a design the study searched (tune --design) is a knob column; a fixed one (--nodes, --rf) a design column
    design = sorted({k for f in features for k in f["design"]} - set(searched.names))
    spec = FeatureSpec(knobs=knobs, fixed=fixed, distributions=distributions, design=design, system=system)
    space = spec.space()
    X = np.array([spec.row(space, r["config"], f) for r, f in zip(rows, features)], dtype=float)
    return Table(spec=spec, X=X, metrics=[r["metrics"]["summary"] for r in rows],
                 configs=[space.key(r["config"]) for r in rows], workloads=[r["workload"]["name"] for r in rows],
                 read_ratios=[f["read_ratio"] for f in features], trial_ids=[r["id"] for r in rows],
                 raw_configs=[space.canonical(r["config"]) for r in rows])
