"""Recorded performance datasets and the surrogate target that answers trials from them.

A dataset is a collection study exported to one compressed JSON file: the knob space, every complete trial
(configuration, workload, metrics summary) and the environment fingerprint of the machine that measured it.
Datasets shipped with nosqltune live in `surrogate/datasets/` and are named by their stem (`wide24`).

`SurrogateTarget` stands in for a datastore in the tuning loop (`nosqltune tune --system surrogate:wide24`):
a model fitted to the dataset predicts each metric, and the noise measured in the dataset (repeats of the
default) is added to every answer, so that optimizers can be compared over many seeds in seconds (the cheap
benchmark the irace paper's conclusion asks for). Fitted models are cached per dataset, metric and model kind; a
process that finds another fitting the same model waits for it and reads its file.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import os
import json
import math
import pickle
import random
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .datafile import read_dataset, resolve

DEFAULT_KIND = "rf"
_CLOCKS: dict[str, Any] = {}   # dataset hash -> its trial clock, one per process (trial_time.py)


def export_dataset(study_path: str, out: Path, study_name: str | None = None, name: str | None = None) -> dict:
    from ..store import open_store
    from .features import pick_study, study_knobs

    store = open_store(study_path)
    try:
        study = pick_study(store, study_name)
        knobs, fixed, system = study_knobs(study)
        rows = [r for r in store.trials(study["id"]) if r["state"] == "COMPLETE" and r["tag"] in ("collect", "tune")]
        failed = [r for r in store.trials(study["id"]) if r["state"] == "FAIL" and r["failure_kind"] != "interrupted"]
        env_ids = sorted({r["environment_id"] for r in rows if r["environment_id"] is not None})
        environments = [store.environment_of(i) for i in env_ids]
    finally:
        store.close()
    harness = (study["settings"].get("collect") or study["settings"].get("tune") or {}).get("harness")
    data = {"name": name or Path(out).name.split(".")[0], "source": f"{Path(study_path).name}:{study['name']}",
            "knobs": knobs, "fixed": fixed, "system": system, "harness": harness, "environments": environments,
            "failed_trials": [{"config": r["config"], "workload": r["workload"]["name"], "failure_kind":
                               r["failure_kind"], "error": r["error"]} for r in failed],
            "trials": [{"id": r["id"], "config": r["config"],
                        "workload": {k: r["workload"][k] for k in ("name", "mix", "records", "operations", "threads")
                                     if k in r["workload"]} | ({"design": r["workload"]["design"]}
                                                               if r["workload"].get("design") else {}),
                        "metrics": {"summary": r["metrics"]["summary"]},
                        **({"timings": r["timings"]} if r.get("timings") else {})} for r in rows]}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(out, "wt") as fh:
        json.dump(data, fh, separators=(",", ":"), default=str)
    return data


class SurrogateTarget:
    """A target (systems.Target) whose trials are answered by a model of a recorded dataset, with the dataset's
    measured noise: `metrics` are the ones each trial predicts (throughput always)."""

    def __init__(self, dataset: str, kind: str = DEFAULT_KIND, seed: int = 0,
                 metrics: tuple[str, ...] = ("throughput",)) -> None:
        from .features import load_table

        self.path = resolve(dataset)
        self.name = dataset
        self.kind = kind
        self.seed = seed
        self.metrics = tuple(metrics)
        self.table = load_table(str(self.path))
        self.data_hash = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]
        self._models: dict[str, Any] = {}
        self._noise: dict[str, float] = {}
        self._calls = 0
        self.space = self.table.spec.space()

    @property
    def knobs(self) -> list[str]:
        return [k.name for k in self.space.knobs]

    # the Target interface: the dataset's knobs, no preflight, the recorded datastore's configuration language
    def knob_space(self, settings=None):
        return self.space.knob_space

    def default_knobs(self, settings=None) -> list[str]:
        return self.knobs

    def preflight(self, workload, settings=None) -> None:
        """Refuse (one line) a request distribution the dataset never recorded: the model would answer for it as
        for the recorded one (a single recorded distribution is not even among its features)."""
        from .features import workload_features

        asked = workload_features(workload.to_dict())["distribution"]
        recorded = self.table.spec.distributions
        if asked not in recorded:
            raise UsageError(f"surrogate:{self.name} recorded {' and '.join(recorded)} requests only, and the "
                             f"workload asks for {asked}: add --distribution {recorded[0]}")

    def check_searched(self, searched, fixed: dict[str, Any]) -> None:
        """Refuse (one line) knobs the dataset has no data for, and searched ranges or choices beyond those it was
        measured over (a named knob set may widen a knob past the recording: the model would extrapolate)."""
        own = self.space.knob_space
        outside = sorted((set(searched.knobs) | set(fixed)) - set(own.knobs))
        if outside:
            raise UsageError(f"surrogate:{self.name} has no data for {', '.join(outside)}: tune or fix only its knobs "
                             f"({', '.join(own.knobs)})")
        for knob in searched:
            recorded = own[knob.name]
            wider = (knob.range is not None and recorded.range is not None
                     and (knob.range[0] < recorded.range[0] or knob.range[1] > recorded.range[1])) \
                or (knob.choices is not None and not set(knob.choices) <= set(recorded.choices or ()))
            if wider:
                span = list(recorded.range or recorded.choices or ())
                raise UsageError(f"surrogate:{self.name} measured {knob.name} over {span}, and the search asks for "
                                 f"{list(knob.range or knob.choices)}: narrow it (--knobs FILE) or search the "
                                 "dataset's own knob set")

    def config_fragment(self, settings, overrides: dict[str, Any]) -> list[str]:
        from ..systems import target

        return target(self.table.spec.system).config_fragment(settings, overrides)

    def run_trial(self, space, overrides: dict[str, Any], workload, settings=None, progress=None):
        return self.run(overrides, workload, metrics=self.metrics)

    def fingerprint(self, settings=None) -> dict[str, Any]:
        data = read_dataset(self.path)
        return {"system": "surrogate", "dataset": self.path.name, "dataset_sha256": self.data_hash,
                "model": self.kind, "measured_on": data.get("environments")}

    def _model(self, metric: str):
        if metric not in self._models:
            from ..runtime.paths import cache_dir
            from .pipeline import fit, noise

            cache = cache_dir() / "surrogates" / f"{self.data_hash}.{metric}.{self.kind}.{self.seed}.pkl"
            cache.parent.mkdir(parents=True, exist_ok=True)
            with open(cache.with_suffix(".lock"), "a") as lock:   # a second process waits, then reads the first's fit
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not cache.exists():
                    model, _ = fit(self.table, self.kind, metric, seed=self.seed)
                    cv = noise(self.table, metric)["cv"] or 0.0
                    scratch = cache.with_suffix(f".{os.getpid()}.tmp")
                    with open(scratch, "wb") as fh:
                        pickle.dump((model, cv), fh)
                    scratch.replace(cache)
            with open(cache, "rb") as fh:
                self._models[metric], self._noise[metric] = pickle.load(fh)
        return self._models[metric]

    def clock(self):
        """The machine time of a trial on the recording machine (trial_time.TrialClock), None without timings."""
        if self.data_hash not in _CLOCKS:
            from .trial_time import TrialClock

            _CLOCKS[self.data_hash] = TrialClock.fit(read_dataset(self.path)["trials"], self.space.dataset_shape)
        return _CLOCKS[self.data_hash]

    def predict(self, metric: str, config: dict[str, Any], workload: dict[str, Any]) -> float:
        """The model's value without noise."""
        from .features import workload_features

        model = self._model(metric)
        row = self.table.spec.row(self.space, config, workload_features(workload))
        return float(model.predict([row])[0])

    def run(self, config: dict[str, Any], workload, metrics: tuple[str, ...] = ("throughput",)):
        """One 'trial': the predicted metrics with the dataset's noise, as a COMPLETE TrialResult."""
        from ..systems.base import TrialResult

        wl = workload.to_dict() if hasattr(workload, "to_dict") else dict(workload)
        self._calls += 1
        rng = random.Random(f"{self.seed}-{self._calls}-{json.dumps(config, sort_keys=True, default=str)}")
        summary: dict[str, Any] = {}
        for metric in dict.fromkeys(("throughput",) + tuple(metrics)):
            value = self.predict(metric, config, wl)
            value *= math.exp(rng.gauss(0.0, self._noise.get(metric, 0.0)))
            summary[_summary_key(metric)] = value
        clock = self.clock()
        timings = clock.trial(config, summary["throughput_ops_s"]) if clock else {}
        return TrialResult(state="COMPLETE", summary=summary, metrics={"surrogate": self.kind}, timings=timings)


def _summary_key(metric: str) -> str:
    if metric == "throughput":
        return "throughput_ops_s"
    stat, _, op = metric.partition("-")
    return f"{op}_{stat}_ms"


def surrogate_target(system: str, seed: int, metrics: tuple[str, ...] = ("throughput",)) -> SurrogateTarget:
    """`surrogate:NAME[:KIND]` -> the target answering trials from the model of a recorded dataset."""
    from .models import KINDS

    _, _, rest = system.partition(":")
    name, _, kind = rest.partition(":")
    kind = kind or DEFAULT_KIND
    if kind not in KINDS:
        raise UsageError(f"unknown surrogate model {kind!r} in --system {system}: use one of {', '.join(KINDS)}")
    return SurrogateTarget(name, kind=kind, seed=seed, metrics=metrics)
