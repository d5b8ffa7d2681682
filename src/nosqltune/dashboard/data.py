"""What the dashboard's page shows of a study, as JSON-ready dicts: the studies of a store, each trial in a few
fields, and a study's summary (best against the default, confirmation, comparisons, machine time, importance).

A feed keeps what it last read of each study: a poll that finds the study as it was (the same trials, the same
last start and end, the same settings) costs two small queries; only then are the trials read and the summary
made again. The page asks for the trials changed after a cursor (`after`), so it receives each trial once
more per change, not the whole study every poll."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError

ERROR_CHARS = 400      # a failed trial's error, cut for the table (the store keeps it whole)
IMPORTANCE_BINS = 6    # a number knob's values fall into this many quantile bins for its importance
OPEN_STATES = ("RUNNING", "WAITING")


def tuning_studies(store) -> list[dict[str, Any]]:
    """The store's tuning studies (made by `tune`), oldest first: name, system, optimizer, created."""
    out = []
    for study in store.studies():
        tune = study["settings"].get("tune")
        if not tune:
            continue
        out.append({"name": study["name"], "system": tune.get("system", study["system"]),
                    "optimizer": tune.get("spec", {}).get("optimizer"), "created_at": study["created_at"]})
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def trial_view(row: dict[str, Any], metric: str, knob_names: list[str]) -> dict[str, Any]:
    """One trial as the page shows it: its objective figure, where it failed and why, its running phase, the
    node's CPU and disk and what limited it (where stored), and its knob values. The figure is the value the
    optimizer was told: a run on another machine than the study's first is valued as on the first (its figure as
    measured is `measured`; tuning.machine_reference). A machine's reference runs are of kind `reference`, as
    measured (what measures the machine; no suggestion's value, and their factor is stored only after they end)."""
    from ..objective import metric_value
    from ..tuning.machine_reference import FACTOR_KEY, home_summary, is_reference

    meta = row.get("meta") or {}
    summary = (row.get("metrics") or {}).get("summary") or {}
    internals = row.get("internals") or {}
    verdict = internals.get("bottleneck") if isinstance(internals.get("bottleneck"), dict) else None
    config = row.get("config") or {}
    started, finished = row.get("started_at"), row.get("finished_at")
    read_iops = _number(summary.get("node_group_read_iops"))
    view = {
        "id": row["id"], "number": row["number"], "tag": row.get("tag"), "state": row["state"],
        "value": (_number(metric_value(metric, summary if is_reference(row) else
                                       home_summary({**row, "metrics": {"summary": summary}}, metric)))
                  if row["state"] == "COMPLETE" else None),
        "measured": (_number(metric_value(metric, summary)) if row["state"] == "COMPLETE" and not is_reference(row)
                     and meta.get(FACTOR_KEY) not in (None, 1) else None),
        "failure_kind": row.get("failure_kind"),
        "error": (row.get("error") or "")[:ERROR_CHARS] or None,
        "phase": meta.get("phase"), "phase_at": meta.get("phase_at"),
        "workload": meta.get("instance") or (row.get("workload") or {}).get("name"),
        "kind": "reference" if is_reference(row) else meta.get("kind") or meta.get("candidate"),
        "round": meta.get("round"),
        "started_at": started, "finished_at": finished,
        "seconds": (finished - started) if started and finished else None,
        "cpu_cores": _number(summary.get("node_cpu_cores")),
        "disk_busy": _number(summary.get("node_dev_busy")),
        "read_iops": read_iops if read_iops is not None else _number(summary.get("node_dev_read_iops")),
        "limit": verdict.get("limit") if verdict else None,
        "bottleneck": verdict.get("line") if verdict else None,
        "config": {k: config.get(k) for k in knob_names if k in config},
    }
    return {k: v for k, v in view.items() if v is not None}   # what a trial lacks is left out: a smaller answer


def knob_importance(entries: list[dict[str, Any]], space) -> dict[str, Any]:
    """How much of the objective's spread over the study's configurations each knob's value explains, alone: its
    correlation ratio (eta squared: the variance of the mean objective between the knob's choices, or quantile
    bins of a number, over the whole variance). Cheap (no model), one knob at a time: knobs that act together
    are not seen, and with few configurations every score is noisy."""
    import numpy as np

    from ..report.data import numeric

    usable = [e for e in entries if e.get("value") is not None]
    if len(usable) < 4:
        return {"knobs": [], "configurations": len(usable), "method": "eta-squared",
                "note": "fewer than 4 measured configurations"}
    values = np.array([e["value"] for e in usable], dtype=float)
    total = float(((values - values.mean()) ** 2).sum())
    scores = []
    for knob in space.knobs:
        x = np.array([numeric(knob, e["config"][knob.name]) for e in usable], dtype=float)
        distinct = np.unique(x)
        if len(distinct) < 2 or not total:
            continue
        if len(distinct) <= IMPORTANCE_BINS:
            group = np.searchsorted(distinct, x)
        else:   # quantile bins of the values seen
            edges = distinct[(len(distinct) * np.arange(1, IMPORTANCE_BINS) // IMPORTANCE_BINS)]
            group = np.searchsorted(edges, x, side="right")
        counts = np.bincount(group)
        sums = np.bincount(group, weights=values)
        seen = counts > 0
        means = sums[seen] / counts[seen]
        between = float((counts[seen] * (means - values.mean()) ** 2).sum())
        scores.append({"knob": knob.name, "score": between / total})
    scores.sort(key=lambda s: -s["score"])
    return {"knobs": scores, "configurations": len(usable), "method": "eta-squared", "note": None}


def _value_interval(entry: dict[str, Any] | None) -> dict[str, Any] | None:
    if not entry:
        return None
    return {"value": entry.get("value"), "interval": entry.get("interval"), "trials": entry.get("trials"),
            "confirmed": bool(entry.get("confirmed")), "label": entry.get("label"),
            "single_run": (entry.get("single_run_best") or {}).get("value")}


def summary_view(opened, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The study's summary: its objective, the best against the default (confirmed or single runs), the stored
    confirmation and comparisons, the machine time split, what limited its trials, knob importance, the knobs."""
    from ..tuning.cost import result_hours, time_split
    from ..tuning.results import (best_configuration, changed_knobs, configurations, confirmed_best, counted,
                                  speedup)

    objective, space, settings = opened.objective, opened.space, opened.record["settings"]
    workloads = opened.spec.workloads
    # the finished tuning trials (an open one would count its configuration as failed)
    tuned = counted([r for r in rows if r["tag"] == "tune" and r["state"] not in OPEN_STATES])
    entries = configurations(tuned, objective, workloads, space)
    single = best_configuration(tuned, objective, workloads, space, entries)
    best = confirmed_best(single, settings, space)
    default = next((e for e in entries if e["kind"] == "default"), None)
    confirm = settings.get("confirm") or {}
    versus = None
    if best and best.get("confirmed"):   # the confirmation's rounds hold the default's mean beside the best's
        versus = (confirm.get("candidates") or {}).get("default", {}).get("mean")
    elif default:
        versus = default["value"]
    counts: dict[str, int] = {}
    for row in tuned:
        if row["state"] != "COMPLETE":
            continue
        limit = ((row.get("internals") or {}).get("bottleneck") or {}).get("limit")
        if limit:
            counts[limit] = counts.get(limit, 0) + 1
    knobs = []
    for knob in space.knobs:
        knobs.append({"name": knob.name, "type": knob.type, "default": knob.default,
                      "choices": [str(c) for c in knob.choices] if knob.choices else None,
                      "range": list(knob.range) if knob.range else None})
    return {
        "name": opened.name, "system": opened.system, "optimizer": opened.spec.optimizer,
        "workloads": workloads, "budget": opened.spec.budget,
        "objective": {"text": objective.describe(), "metric": objective.metric, "unit": objective.unit,
                      "maximize": objective.maximize},
        "trials": {"tune": len(tuned), "all": len(rows), "failed": sum(r["state"] == "FAIL" for r in rows),
                   "running": sum(r["state"] == "RUNNING" for r in rows),
                   "waiting": sum(r["state"] == "WAITING" for r in rows)},
        "configurations": len(entries),
        "best": _value_interval(best), "default": _value_interval(default),
        "versus_default": speedup(objective, best["value"] if best else None, versus),
        "changed": {k: [str(a), str(b)] for k, (a, b) in changed_knobs(space, best["config"]).items()} if best else {},
        "confirmation": _confirmation(confirm, opened.tune.get("confirm") or {}),
        "comparisons": _comparisons(settings.get("compare") or {}),
        "time": {**time_split(rows), "result_hours": result_hours(rows) if best and best.get("confirmed") else None},
        "bottlenecks": dict(sorted(counts.items(), key=lambda kv: -kv[1])),
        "importance": knob_importance(entries, space),
        "knobs": knobs,
    }


def _confirmation(confirm: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any]:
    """The confirmation's state: none, asked for by `tune` (top, rounds: it runs at the end of a budget at least
    twice its cost) or done, with each candidate's mean and interval."""
    if not confirm.get("candidates"):
        return {"state": "asked" if asked.get("top") else "none", "top": asked.get("top"),
                "rounds": asked.get("rounds")}
    return {"state": "done", "top": confirm.get("top"), "rounds": confirm.get("rounds"), "best": confirm.get("best"),
            "after_tune_trials": confirm.get("after_tune_trials"),
            "candidates": {k: {"mean": c.get("mean"), "interval": c.get("interval"),
                               "feasible_rounds": c.get("feasible_rounds"), "single_run": c.get("single_run")}
                           for k, c in confirm["candidates"].items()},
            "vs_default": confirm.get("vs_default")}


def _comparisons(compare: dict[str, Any]) -> list[dict[str, Any]]:
    """One line per stored comparison, workload and candidate: its verdict, mean speedup and interval."""
    out = []
    for key, result in compare.items():
        for workload, found in (result.get("workloads") or {}).items():
            for candidate, stats in (found.get("stats") or {}).items():
                out.append({"key": key, "workload": workload, "candidate": candidate, "metric": result.get("metric"),
                            "scale": result.get("scale"), "best_is": result.get("best_is"),
                            "verdict": stats.get("verdict"), "pairs": stats.get("pairs"),
                            "mean_speedup": stats.get("mean_speedup"), "ci_low": stats.get("ci_low"),
                            "ci_high": stats.get("ci_high"), "p_value": stats.get("p_value")})
    return out


@dataclass
class _Cached:
    signature: tuple
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    opened: Any
    settings_text: str
    read_at: float = field(default_factory=time.time)
    views: dict[int, dict[str, Any]] = field(default_factory=dict)   # trial id -> its trial_view, made once


class StudyFeed:
    """The dashboard's reader of one open store (opened read-only by the caller): the studies, and per study its
    summary and the trials changed after a cursor. Safe to call from several request threads."""

    def __init__(self, store) -> None:
        self.store = store
        self._cache: dict[str, _Cached] = {}
        self._lock = threading.Lock()

    def studies(self) -> list[dict[str, Any]]:
        return tuning_studies(self.store)

    def first_study(self, wanted: str | None = None) -> str | None:
        """The study the page opens on: `wanted` if the store has it, else the first tuning study."""
        names = [s["name"] for s in self.studies()]
        return wanted if wanted in names else (names[0] if names else None)

    def read_ahead(self, wanted: str | None = None) -> threading.Thread:
        """Read the study the page opens on in a thread of its own, as the server starts: the page's first request
        then finds it read (or waits for the read under way instead of starting another). A study that cannot be
        read is said by the request, as without this."""
        def read() -> None:
            try:
                name = self.first_study(wanted)
                if name is not None:
                    self.study(name)
            except Exception:   # noqa: BLE001 - the page's own request reads again and says what is wrong
                pass

        thread = threading.Thread(target=read, name="dashboard-read-ahead", daemon=True)
        thread.start()
        return thread

    def _load(self, name: str) -> _Cached:
        from ..evaluation.study import study_of

        record = self.store.find_study(name)
        if not (record or {}).get("settings", {}).get("tune"):
            names = [s["name"] for s in self.studies()]
            raise UsageError(f"no tuning study '{name}' in this store"
                             + (f": one of {', '.join(names)}" if names else ""))
        settings_text = json.dumps(record["settings"], sort_keys=True, default=str)
        signature = (settings_text, self.store.trials_signature(record["id"]))
        cached = self._cache.get(name)
        if cached is not None and cached.signature == signature:
            return cached
        same_study = cached is not None and cached.settings_text == settings_text
        views: dict[int, dict[str, Any]] = {}
        if same_study:   # read only the trials written since (a study of thousands: not all of them each time)
            opened = cached.opened
            by_id = {r["id"]: r for r in cached.rows}
            last_id = max(by_id, default=0)
            last_end = max((r.get("finished_at") or 0 for r in cached.rows), default=0)
            fresh = self.store.trials_changed(record["id"], last_id, last_end)
            by_id.update((r["id"], r) for r in fresh)
            rows = sorted(by_id.values(), key=lambda r: r["id"])
            views = dict(cached.views)
            for r in fresh:
                views.pop(r["id"], None)
        else:
            opened = study_of(self.store, record)
            rows = self.store.trials(record["id"])
        summary = summary_view(opened, rows)
        cached = _Cached(signature, rows, summary, opened, settings_text, views=views)
        self._cache[name] = cached
        return cached

    def study(self, name: str, after: str | None = None) -> dict[str, Any]:
        """The study's summary and its trials changed after the cursor `after` (all of them without one), with the
        cursor to send next time: "<last id>:<last end>" of what this answer holds."""
        with self._lock:   # one reader at a time: a request during a read (the read-ahead's) waits for it
            cached = self._load(name)
            after_id, after_end = _parse_cursor(after)
            metric = cached.summary["objective"]["metric"]
            knob_names = [k["name"] for k in cached.summary["knobs"]]
            changed = [r for r in cached.rows
                       if r["id"] > after_id or r["state"] in OPEN_STATES
                       or (r.get("finished_at") or 0) > after_end]
            last_id = max((r["id"] for r in cached.rows), default=0)
            last_end = max((r.get("finished_at") or 0 for r in cached.rows), default=0)
            views = cached.views   # filled as trials are first sent
            trials = [views.get(r["id"]) or views.setdefault(r["id"], trial_view(r, metric, knob_names))
                      for r in changed]
        return {"study": name, "summary": cached.summary, "full": after is None, "trials": trials,
                "cursor": f"{last_id}:{last_end!r}", "read_at": cached.read_at, "now": time.time()}


def encode(answer: Any) -> bytes:
    """An answer as the page receives it: orjson, about 10x Python's json on a study of 10,000 trials (NaN and
    Infinity become null, which browsers can parse; what JSON cannot hold becomes its str())."""
    import orjson

    return orjson.dumps(answer, default=str, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def _parse_cursor(after: str | None) -> tuple[int, float]:
    if not after:
        return 0, 0.0
    try:
        last_id, _, last_end = after.partition(":")
        return int(last_id), float(last_end or 0)
    except ValueError:
        raise UsageError(f"bad cursor {after!r}: expected <id>:<time>") from None
