"""The model side of online re-tuning: a fitted surrogate asked for the best configuration of an observed mix.

`Advisor` wraps a model written by `nosqltune model fit` (surrogate.pipeline.Surrogate) and answers three
questions for the online loop:

- Can this model tune the running cluster at all (`check`)? It must be fitted on the cluster's datastore, on the
  cluster's knob set when that is known, on throughput (the cost-benefit of a restart weighs operations per
  second), and with the workload among its features (TD1 or TD3: a model of one workload cannot follow a mix).
  The running configuration may only set knobs of the model's space. Any of these failing is a one-line
  UsageError before anything starts.
- Which features describe an observed mix (`features_for`)? The rules:
  1. read_ratio is the share of reads among all operations, scans counted with the writes. That is how the
     training data counted a YCSB mix (surrogate.features.workload_features: reads over reads + updates + inserts
     + read-modify-writes + scans), so the model reads an observed mix on the scale it learnt.
  2. scan_ratio, the share of range scans among all operations, when the model has it (its training data had
     scans: surrogate.features). A model without it cannot express a mix with scans (above `SCAN_NOTE`, 1%):
     the record says so, and the nearest it can express (rule 1) is used.
  3. A read ratio outside the range of the training workloads is taken at the nearest end of that range, and
     said (a tree ensemble is flat beyond its data, a network extrapolates without evidence).
  4. The key distribution cannot be seen in the request counters: the model's first distribution is used
     (zipfian when it knows it), said when the model knows several.
  5. The design features, when the model has them, are the cluster's: the number of nodes and the replication
     factor the caller gives.
- What does the model predict (`predict`) and recommend (`recommend`)? The search (genetic algorithm by default,
  as RAFIKI) starts from the running configuration and holds the knobs re-tuning cannot change (plan.py's
  `fixed` route: the physical design, the volume, settings read at the first start) at their running values, so
  every prediction is about a configuration the cluster could run.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import UsageError
from ..knobs.space import categorical, choices_of
from .plan import route_of
from .window import PerKind

SCAN_NOTE = 0.01            # a scan share above this is said when the model has no scan feature
THROUGHPUT = "throughput"


@dataclass(frozen=True)
class MixFeatures:
    """The model's workload features for an observed mix, and what was said in mapping it."""

    mix: dict[str, float | None]
    read_ratio: float
    distribution: str
    design: dict[str, float]
    notes: tuple[str, ...] = ()
    scan_ratio: float = 0.0

    def for_model(self) -> dict[str, Any]:
        return {"read_ratio": self.read_ratio, "scan_ratio": self.scan_ratio, "distribution": self.distribution,
                "design": dict(self.design)}

    def as_dict(self) -> dict[str, Any]:
        return {"mix": dict(self.mix), "read_ratio": self.read_ratio, "scan_ratio": self.scan_ratio,
                "distribution": self.distribution, "design": dict(self.design), "notes": list(self.notes)}


@dataclass(frozen=True)
class Advice:
    """The model's best configuration for a mix (the full configuration of its space), with its prediction and
    the running configuration's, in operations per second."""

    config: dict[str, Any]
    predicted: float
    predicted_running: float
    search: str
    evaluations: int
    search_seconds: float
    pinned: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"config": dict(self.config), "predicted": self.predicted, "predicted_running": self.predicted_running,
                "predicted_gain": self.predicted / self.predicted_running if self.predicted_running > 0 else None,
                "search": self.search, "evaluations": self.evaluations, "search_seconds": self.search_seconds,
                "pinned": list(self.pinned)}


def _training_read_ratios(meta: Mapping[str, Any]) -> tuple[float, float] | None:
    """The lowest and highest read ratio among the model's training workloads (None when the model does not
    say)."""
    best = meta.get("best_measured") or {}
    ratios = [float(v["read_ratio"]) for v in best.values() if isinstance(v, Mapping)
              and isinstance(v.get("read_ratio"), (int, float))]
    return (min(ratios), max(ratios)) if ratios else None


class Advisor:
    """A fitted surrogate, checked against the cluster it is to tune (module docstring)."""

    def __init__(self, model: Any, meta: Mapping[str, Any], source: str = "model", *, system: str = "cassandra",
                 knobs: str | None = None, nodes: int = 1, replication_factor: int = 1, search: str = "ga",
                 seed: int = 0) -> None:
        from ..surrogate.pipeline import Surrogate

        self.source, self.meta = source, dict(meta)
        self.system, self.knobs = system, knobs
        self.nodes, self.replication_factor = nodes, replication_factor
        self.method, self.seed = search, seed
        spec = self.meta.get("spec") or {}
        fitted_on = spec.get("system", "cassandra")
        if fitted_on != system:
            raise UsageError(f"the model in {source} was fitted on {fitted_on}, not on the running cluster's "
                             f"datastore {system}: fit one on a collection of this cluster")
        try:
            self.surrogate = Surrogate(model, self.meta)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"the model in {source} does not describe its features ({exc}): fit it again with "
                             "`nosqltune model fit`") from None
        self.space = self.surrogate.space
        self.held: dict[str, Any] = {}      # knobs outside the model's space whose values hold on the cluster
        self.check()
        self.read_ratios = _training_read_ratios(self.meta)

    def hold(self, values: Mapping[str, Any]) -> None:
        """Values of knobs the model does not search that hold on the cluster (a local cluster's heap): the knob
        rules are checked against them, not against the knob file's defaults (memtables within half the heap
        the nodes really have)."""
        self.held = {k: v for k, v in values.items() if k not in self.space.names}

    @classmethod
    def load(cls, directory: str | Path, **options: Any) -> "Advisor":
        """The model written by `nosqltune model fit` in `directory`, checked (UsageError: one line)."""
        from ..surrogate.models import load

        model, meta = load(Path(directory))
        return cls(model, meta, str(directory), **options)

    # -- can it tune this cluster
    def check(self) -> None:
        spec, meta = self.surrogate.spec, self.meta
        if self.knobs is not None:
            from ..knobs import KnobError, load_space

            try:
                wanted = {k.name for k in load_space(self.system).subset(self.knobs)}
            except KnobError as exc:
                raise UsageError(f"the cluster's knob set: {exc}") from None
            if wanted != {k.name for k in self.space.knob_space}:
                raise UsageError(f"the model in {self.source} was fitted on knob set {_label(spec.knobs)}, not on "
                                 f"the cluster's {self.knobs}: fit one on a collection over {self.knobs}")
        if meta.get("metric") != THROUGHPUT:
            raise UsageError(f"the model in {self.source} predicts {meta.get('metric')}, and online re-tuning weighs "
                             "a restart in operations per second: fit a throughput model (`model fit --target "
                             "throughput`)")
        if not spec.has_workload:
            raise UsageError(f"the model in {self.source} is of tuning domain {spec.domain}, fitted on one workload: "
                             "it cannot follow a changing mix; fit one of domain TD1 or TD3")
        unknown = [d for d in spec.design if d not in ("nodes", "replication_factor")]
        if unknown:
            raise UsageError(f"the model in {self.source} needs design features the cluster does not give: "
                             f"{', '.join(unknown)}")

    def running_config(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The running configuration over the model's space: the knobs `given` at their values, the others at the
        space's defaults. A knob the model's space does not have means a model of another knob set: UsageError."""
        from ..knobs import KnobError

        unknown = sorted(set(given) - set(self.space.names))
        if unknown:
            raise UsageError(f"the running configuration sets {', '.join(unknown)}, which the model's knob set "
                             f"({_label(self.surrogate.spec.knobs)}) does not have: a model of another knob set")
        try:
            return {**self.space.default(), **self.space.canonical(dict(given))}
        except (KnobError, ValueError, TypeError) as exc:
            raise UsageError(f"the running configuration: {exc}") from None

    # -- mix -> features
    def features_for(self, mix: PerKind) -> MixFeatures:
        spec = self.surrogate.spec
        shares = mix.shares()
        read, scan = shares.read or 0.0, shares.scan or 0.0
        notes = []
        if scan > SCAN_NOTE and not spec.scans:
            notes.append(f"the model has no scan feature: the scans ({scan:.0%} of operations) are counted with the "
                         f"writes, as its training data counted them (read ratio {read:.2f})")
        ratio = read
        if self.read_ratios is not None:
            lo, hi = self.read_ratios
            if not lo - 1e-9 <= read <= hi + 1e-9:
                ratio = min(max(read, lo), hi)
                notes.append(f"read ratio {read:.2f} is outside the model's training range {lo:g}..{hi:g}: taken as "
                             f"{ratio:g}, the nearest it knows")
        distribution = "zipfian" if "zipfian" in spec.distributions else spec.distributions[0]
        if len(spec.distributions) > 1:
            notes.append(f"the key distribution cannot be observed: taken as {distribution}")
        design = {name: float(self.nodes if name == "nodes" else self.replication_factor) for name in spec.design}
        return MixFeatures(shares.as_dict(), round(float(ratio), 6), distribution, design, tuple(notes),
                           round(float(scan), 6) if spec.scans else 0.0)

    # -- the model's answers
    def predict(self, configs: list[Mapping[str, Any]], features: MixFeatures) -> list[float]:
        full = [{**self.space.default(), **c} for c in configs]
        return [float(v) for v in self.surrogate.predict(full, features.for_model())]

    def pinned(self) -> tuple[str, ...]:
        """The knobs of the model's space that re-tuning a running cluster cannot change (plan.py's fixed route)."""
        return tuple(k.name for k in self.space.knobs if route_of(k)[0] == "fixed")

    def recommend(self, features: MixFeatures, running: Mapping[str, Any]) -> Advice:
        """The best configuration the model knows for the mix, the pinned knobs held at their running values, the
        search starting from the running configuration (so the answer is never predicted worse than it)."""
        from ..surrogate.search import search

        started = time.perf_counter()
        codec = self.surrogate.codec(features.for_model())
        if self.held:   # the rules over the knobs held as they are on the cluster
            from ..knobs.space import TuningSpace
            from ..surrogate.search import Codec

            codec = Codec(TuningSpace(self.space.knob_space, fixed=self.held), codec.prefix.tolist())
        pinned = self.pinned()
        sign = 1.0 if self.surrogate.maximize else -1.0

        def score(rows: np.ndarray) -> np.ndarray:
            return sign * np.log(self.surrogate.model.predict(rows))

        try:
            result = search(_pin(codec, running, pinned), score, method=self.method, seed=self.seed,
                            start=[codec.genome(dict(running))])
        except ValueError:
            if not self.held:
                raise
            # no value within the model's ranges keeps a rule with the knobs held as they are (a 768 MiB heap
            # leaves no memtable space the model knows): the knobs of the rules are left as they run
            ruled = {n for rule in self.space.knob_space.rules for n in rule.knobs} & set(self.space.names)
            pinned = (*pinned, *sorted(ruled - set(pinned)))
            codec = self.surrogate.codec(features.for_model())
            result = search(_pin(codec, running, pinned), score, method=self.method, seed=self.seed,
                            start=[codec.genome(dict(running))])
        config = {**running, **result.config, **{k: running[k] for k in pinned if k in running}}
        predicted, now = self.predict([config, dict(running)], features)
        return Advice(config, predicted, now, self.method, result.evaluations, time.perf_counter() - started,
                      tuple(pinned))

    def describe(self) -> dict[str, Any]:
        spec = self.surrogate.spec
        return {"model": self.source, "kind": self.meta.get("kind"), "metric": self.meta.get("metric"),
                "system": spec.system, "knobs": spec.knobs, "domain": spec.domain, "trials": self.meta.get("trials"),
                "read_ratios": None if self.read_ratios is None else list(self.read_ratios),
                "distributions": list(spec.distributions), "design": list(spec.design)}


def _label(knobs: Any) -> str:
    if isinstance(knobs, str):
        return knobs
    if isinstance(knobs, Mapping) and isinstance(knobs.get("set"), str):
        return f"{knobs['set']} (changed)"
    return "a list of knobs"


def _pin(codec, running: Mapping[str, Any], names: tuple[str, ...]):
    """A copy of the search codec whose genes of `names` cannot leave their running values: the bounds of each such
    gene shrink to the cell of its running value."""
    if not names:
        return codec
    pinned = copy.copy(codec)
    pinned.lo, pinned.hi = codec.lo.copy(), codec.hi.copy()
    values = codec.space.canonical(dict(running))
    genome = codec.genome(dict(running))
    for name in names:
        if name not in codec.index:
            continue
        j, knob = codec.index[name], codec.knobs[codec.index[name]]
        value = values[name]
        if categorical(knob):
            i = float(choices_of(knob).index(value))
            pinned.lo[j], pinned.hi[j] = i, i + 1.0
        elif knob.type == "int":   # the integer's cell: [v, v + 1), on the log scale when the gene is
            log = knob.log and knob.range[0] > 0
            pinned.lo[j], pinned.hi[j] = (math.log(value), math.log(value + 1)) if log else (value, value + 1.0)
        else:
            pinned.lo[j], pinned.hi[j] = genome[j], genome[j] + max(abs(genome[j]), 1.0) * 1e-12
    return pinned
