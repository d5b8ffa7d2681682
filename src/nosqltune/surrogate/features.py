"""Model inputs from stored trials: workload features, knob values and physical design, as one numeric row.

Knobs are encoded as the optimizers see them (numbers scaled to [0, 1], log scale where the knob says so;
categories one-hot; a knob whose condition is off holds its default). Workloads are described by their read
ratio (RAFIKI's workload axis: reads among all operations, scans counted with the writes), when the data has
range scans by their scan ratio (scans among all operations: a YCSB E mix and an update-heavy one have the same
read ratio, and a scan reads whole chunks), and when the data has more than one, their request distribution
(one-hot).
Physical design (node count, replication factor) enters as numbers when trials carry it.

The tuning domains of the RF/GBDT tuning paper (Eppinger & Stoerl, its Table 3) choose which of these a model
sees: TD1 all of them; TD2 no workload features (the trials of one workload); TD3 no design features (the
trials of one design); TD4 the knobs only (one workload on one design).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import UsageError

DISTRIBUTIONS = ("zipfian", "uniform", "latest")
WORKLOAD_COLUMNS = ("read_ratio", "scan_ratio", "distribution")   # the workload's columns of a row, by name


def workload_features(workload: Mapping[str, Any]) -> dict[str, Any]:
    """Read ratio, scan ratio, request distribution and design of a stored workload (a Workload dict). A
    cassandra-stress profile's: its SELECT queries' share of the mix as reads, those that read more than one row
    (a slice: a LIMIT above 1 or a range on a clustering column) as scans, distribution `profile`."""
    if workload.get("profile"):
        return _profile_features(workload)
    mix = workload.get("mix", {})
    reads = float(mix.get("readproportion", 0) or 0)
    scans = float(mix.get("scanproportion", 0) or 0)
    writes = sum(float(mix.get(k, 0) or 0) for k in ("updateproportion", "insertproportion",
                                                      "readmodifywriteproportion")) + scans
    total = reads + writes
    return {"read_ratio": round(reads / total, 6) if total else 0.0,
            "scan_ratio": round(scans / total, 6) if total else 0.0,
            "distribution": mix.get("requestdistribution", "zipfian"),
            "design": design_of(workload)}


def _profile_features(workload: Mapping[str, Any]) -> dict[str, Any]:
    import re

    profile = workload["profile"]
    total = sum(profile["ops"].values()) or 1.0
    reads = scans = 0.0
    for name, weight in profile["ops"].items():
        query = profile["queries"].get(name)
        if not query or query["kind"] != "select":
            continue
        reads += weight
        limit = re.search(r"\blimit\s+(\d+)", query["cql"], re.IGNORECASE)
        ranged = re.search(r"[<>]=?\s*\?", query["cql"])
        if ranged or not limit or int(limit.group(1)) > 1:
            if profile["table"]["clustering"]:
                scans += weight
    return {"read_ratio": round(reads / total, 6), "scan_ratio": round(scans / total, 6),
            "distribution": "profile", "design": design_of(workload)}


DESIGN_DEFAULTS = {"nodes": 1, "replication_factor": 1}

# the RF/GBDT paper's Table 3: which feature groups a model of each tuning domain sees (the rest is held fixed)
DOMAINS = {"TD1": {"workload": True, "design": True}, "TD2": {"workload": False, "design": True},
           "TD3": {"workload": True, "design": False}, "TD4": {"workload": False, "design": False}}


def design_of(workload: Mapping[str, Any]) -> dict[str, float]:
    """The physical design a trial ran on: a stored `design`, else the harness's cluster settings when they are
    not a single node with RF 1 (so single-node studies keep no constant design columns)."""
    from ..systems.settings import TrialSettings

    if workload.get("design"):
        return dict(workload["design"])
    harness = TrialSettings.from_dict(workload.get("harness") or {}).flat()   # a non-Cassandra trial: 1 node, RF 1
    design = {k: harness[k] for k in DESIGN_DEFAULTS}
    return design if design != DESIGN_DEFAULTS else {}


@dataclass
class FeatureSpec:
    """How a (configuration, workload) pair becomes a row; stored with a fitted model."""

    knobs: Any                         # knob set name or mapping, as stored with the study
    fixed: dict[str, Any] = field(default_factory=dict)
    distributions: list[str] = field(default_factory=lambda: ["zipfian"])
    design: list[str] = field(default_factory=list)
    system: str = "cassandra"          # the knob space (cassandra, redis, ...)
    domain: str = "TD1"                # the RF/GBDT paper's tuning domain: which feature groups the rows carry
    scope: dict[str, Any] = field(default_factory=dict)   # what the domain holds fixed: workload, design
    scans: bool = False                # the rows carry the scan ratio (the data has range scans)
    defaults: dict[str, Any] = field(default_factory=dict)   # knob defaults the recording's harness gave (its heap)

    @property
    def has_workload(self) -> bool:
        return DOMAINS[self.domain]["workload"]

    def space(self):
        from ..knobs import load_space
        from ..knobs.space import TuningSpace

        base = load_space(self.system)
        if self.defaults:   # a knob set narrowed for a capped node (heap_size [512, 1280]) holds the node's default
            base = base.with_knob_defaults(self.defaults)
        return TuningSpace(base.subset(self.knobs), self.fixed)

    def names(self, space=None) -> list[str]:
        from ..knobs.space import categorical, choices_of

        space = space or self.space()
        out = ["read_ratio"] if self.has_workload else []
        if self.has_workload and self.scans:
            out.append("scan_ratio")
        if self.has_workload and len(self.distributions) > 1:
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
            if knob not in WORKLOAD_COLUMNS and knob not in self.design:
                out.setdefault(knob, []).append(i)
        return out

    def workload_row(self, features: Mapping[str, Any]) -> list[float]:
        row = [float(features["read_ratio"])] if self.has_workload else []
        if self.has_workload and self.scans:
            row.append(float(features.get("scan_ratio", 0.0)))
        if self.has_workload and len(self.distributions) > 1:
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
                "design": self.design, "system": self.system, "domain": self.domain, "scope": self.scope} \
            | ({"scans": True} if self.scans else {}) | ({"defaults": self.defaults} if self.defaults else {})

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

        from ..objective import metric_value

        values = [metric_value(metric, m) for m in self.metrics]
        mask = np.array([v is not None and v > 0 for v in values])
        return np.array([v if ok else np.nan for v, ok in zip(values, mask)], dtype=float), mask


def recorded_defaults(system: str, harness: Mapping[str, Any] | None) -> dict[str, Any]:
    """The knob defaults a recording's harness gave that differ from the knob file's (a scenario's heap, a
    volume's read-ahead): a space rebuilt without them may not hold the recording's narrowed ranges."""
    from ..knobs import load_space
    from ..systems import target
    from ..systems.settings import TrialSettings

    if not harness:
        return {}
    settings = TrialSettings.from_dict(harness)
    if settings.system != system:   # an external datastore's knob file: no harness defaults
        return {}
    plain = load_space(system)
    return {k.name: k.default for k in target(system).knob_space(settings)
            if k.name in plain and plain[k.name].default != k.default}


def study_harness(study: Mapping[str, Any]) -> dict[str, Any] | None:
    """The harness a collection or tuning study ran with, as stored."""
    settings = study.get("settings") or {}
    return next((settings[key].get("harness") for key in ("collect", "tune") if key in settings), None)


def study_knobs(study: Mapping[str, Any]) -> tuple[Any, dict[str, Any], str]:
    """The knob subset, the fixed values and the knob space's name of a collection or tuning study."""
    from ..systems.settings import TrialSettings

    settings = study.get("settings") or {}
    for key in ("collect", "tune"):
        if key in settings:
            harness = TrialSettings.from_dict(settings[key].get("harness") or {})
            system = harness.system
            if system == "external":
                from ..systems.external.target import load_target

                system = load_target(harness.external.target_file).knobs
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
    from ..store import open_existing_store

    return open_existing_store(study_path)


def _study_rows(study_path: str, study_name: str | None) -> tuple[str, Any, dict, str, dict | None, list[dict]]:
    store = existing_store(study_path)
    try:
        study = pick_study(store, study_name)
        knobs, fixed, system = study_knobs(study)
        rows = [r for r in store.trials(study["id"]) if r["state"] == "COMPLETE" and r["tag"] in ("collect", "tune")]
    finally:
        store.close()
    return study["name"], knobs, fixed, system, study_harness(study), rows


def trial_design(row: Mapping[str, Any], features: Mapping[str, Any]) -> dict[str, int]:
    """The design a trial ran on: its configuration's design knobs (tune --design), else its stored design."""
    return {k: int(row["config"].get(k, features["design"].get(k, v))) for k, v in DESIGN_DEFAULTS.items()}


def _in_domain(rows: list[dict], features: list[dict], domain: str, workload: str | None,
               design: Mapping[str, int] | None) -> tuple[list[int], dict[str, Any]]:
    """The rows a model of the tuning domain learns from (of one workload and/or one design, as the domain
    holds them fixed), and what it holds fixed. With one workload (design) in the data, that one is taken."""
    if domain not in DOMAINS:
        raise UsageError(f"unknown tuning domain {domain!r}: use {', '.join(DOMAINS)} "
                         "(the tuning domains of the RF/GBDT tuning paper)")
    keep, scope = list(range(len(rows))), {}
    if workload is not None and DOMAINS[domain]["workload"]:
        raise UsageError(f"{domain} learns across workloads: --workload goes with TD2 or TD4")
    if design and DOMAINS[domain]["design"]:
        raise UsageError(f"{domain} learns across designs: --nodes/--rf go with TD3 or TD4")
    if not DOMAINS[domain]["workload"]:
        names = sorted({rows[i]["workload"]["name"] for i in keep})
        if workload is None and len(names) > 1:
            raise UsageError(f"{domain} holds the workload fixed and the trials have {len(names)} "
                             f"({', '.join(names)}): pick one with --workload")
        chosen = workload if workload is not None else names[0]
        if chosen not in names:
            raise UsageError(f"no trial of workload {chosen!r} (the trials have {', '.join(names)})")
        keep = [i for i in keep if rows[i]["workload"]["name"] == chosen]
        scope["workload"] = chosen
        scope["read_ratio"] = features[keep[0]]["read_ratio"]
        scope["distribution"] = features[keep[0]]["distribution"]
    if not DOMAINS[domain]["design"]:
        designs = {tuple(sorted(trial_design(rows[i], features[i]).items())) for i in keep}
        wanted = {**DESIGN_DEFAULTS, **dict(design or {})}
        if not design and len(designs) > 1:
            raise UsageError(f"{domain} holds the design fixed and the trials ran on {len(designs)} designs: "
                             "pick one with --nodes and --rf")
        chosen = tuple(sorted(wanted.items())) if design else next(iter(designs))
        if chosen not in designs:
            raise UsageError(f"no trial on {dict(chosen)} (the trials ran on "
                             + "; ".join(str(dict(d)) for d in sorted(designs)) + ")")
        keep = [i for i in keep if tuple(sorted(trial_design(rows[i], features[i]).items())) == chosen]
        scope["design"] = dict(chosen)
    return keep, scope


def _leave_out(knobs: Any, names: list[str]) -> Any:
    """A stored knob recipe (set name, list or mapping) with these knobs left out."""
    if not names:
        return knobs
    recipe = {"set": knobs} if isinstance(knobs, str) else (
        {"knobs": list(knobs)} if isinstance(knobs, (list, tuple)) else dict(knobs))
    recipe["leave_out"] = list(recipe.get("leave_out") or []) + names
    return recipe


def load_table(source: str, study_name: str | None = None, domain: str = "TD1", workload: str | None = None,
               design: Mapping[str, int] | None = None) -> Table:
    """Every complete trial (tagged collect or tune) of a study, or of an exported dataset file
    (.json / .json.gz, see `surrogate.dataset`), as a Table with the features of a tuning domain (TD1:
    all; TD2-TD4 keep the trials of one `workload` and/or one `design`, whose features they drop)."""
    import numpy as np

    if str(source).endswith((".json", ".json.gz")):
        from .datafile import read_dataset

        data = read_dataset(source)
        name, knobs, fixed, rows = data["name"], data["knobs"], data["fixed"], data["trials"]
        system, harness = data.get("system", "cassandra"), data.get("harness")
    else:
        name, knobs, fixed, system, harness, rows = _study_rows(source, study_name)
    defaults = recorded_defaults(system, harness)
    if not rows:
        raise UsageError(f"study '{name}' has no complete trial to learn from")
    features = [workload_features(r["workload"]) for r in rows]
    keep, scope = _in_domain(rows, features, domain, workload, design)
    rows, features = [rows[i] for i in keep], [features[i] for i in keep]
    distributions = sorted({f["distribution"] for f in features}, key=lambda d: (d not in DISTRIBUTIONS, d))
    searched = FeatureSpec(knobs=knobs, fixed=fixed, system=system, defaults=defaults).space()
    if DOMAINS[domain]["design"]:
        # a design the study searched (tune --design) is a knob column; a fixed one (--nodes, --rf) a design column
        columns = sorted({k for f in features for k in f["design"]} - set(searched.names))
    else:   # one design: neither (a searched design's knobs leave the space; the trials kept hold them fixed)
        columns = []
        knobs = _leave_out(knobs, [k for k in DESIGN_DEFAULTS if k in searched.names])
    spec = FeatureSpec(knobs=knobs, fixed=fixed, distributions=distributions, design=columns, system=system,
                       domain=domain, scope=scope, scans=any(f["scan_ratio"] > 0 for f in features),
                       defaults=defaults)
    space = spec.space()
    X = np.array([spec.row(space, r["config"], f) for r, f in zip(rows, features)], dtype=float)
    return Table(spec=spec, X=X, metrics=[r["metrics"]["summary"] for r in rows],
                 configs=[space.key(r["config"]) for r in rows], workloads=[r["workload"]["name"] for r in rows],
                 read_ratios=[f["read_ratio"] for f in features], trial_ids=[r["id"] for r in rows],
                 raw_configs=[space.canonical(r["config"]) for r in rows])
