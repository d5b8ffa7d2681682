"""Which configuration an export writes, and the store's evidence for it against the default.

The configuration: a study's best (the confirmed one when the study has a confirmation), a comparison's candidate
(`--candidate LABEL`, as `compare` named it), or a YAML file of knob values. The evidence: every comparison in the
store whose candidate ran the same settings (the changed knobs, the scenario's own values left aside) and the
study's confirmation; the one with the most pairs, then the lowest p, is the one the plan cites. A 3-round
confirmation cannot reach p < 0.05 (Wilcoxon's floor at 3 pairs is 0.25): an export needs a comparison of 6 rounds
or more (`compare --repeat 10`), or --force.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

from ..errors import UsageError
from . import Evidence


def changed(space, config: Mapping[str, Any], leave_out: Mapping[str, Any] = ()) -> dict[str, Any]:
    """The knob values of `config` that differ from the space's defaults, typed, without the knobs `leave_out`
    names (a scenario's own values, which are its situation, not the tuning)."""
    out = {}
    for name, value in config.items():
        if name in leave_out or name not in space:
            continue
        knob = space[name]
        typed = knob.coerce(value, allow_outside_range=True)
        if typed != knob.default:
            out[knob.name] = typed
    return out


def comparisons(store, space) -> Iterator[dict[str, Any]]:
    """Every candidate of every comparison and confirmation stored, against the default: its changed settings and
    its statistics."""
    for study in store.studies():
        settings = study.get("settings") or {}
        fixed = ((settings.get("tune") or {}).get("fixed")) or {}
        for key, result in (settings.get("compare") or {}).items():
            if result.get("scale", 1) != 1 or result.get("data", 1) != 1:
                continue   # at another load or data size: evidence of that size, not of the study's
            for workload, found in (result.get("workloads") or {}).items():
                for label, stats in (found.get("stats") or {}).items():
                    config = (result.get("candidates") or {}).get(label)
                    if config is None or stats.get("mean_speedup") is None:
                        continue
                    yield {"config": changed(space, config, fixed), "stats": stats, "metric": result.get("metric"),
                           "where": f"study {study['name']}, comparison {key}, {workload}, candidate {label}"}
        confirm = settings.get("confirm") or {}
        versus = confirm.get("vs_default") or {}
        best = (confirm.get("candidates") or {}).get(confirm.get("best")) or {}
        if versus.get("mean_speedup") is not None and "config" in best:
            yield {"config": changed(space, best["config"], fixed), "stats": versus, "metric": confirm.get("metric"),
                   "where": f"study {study['name']}, its confirmation ({confirm.get('rounds')} rounds)"}


def evidence_for(store, space, config: Mapping[str, Any], source: str) -> Evidence:
    """The store's strongest comparison of exactly these settings against the default (Evidence without figures
    when there is none)."""
    wanted = changed(space, config)
    found = [c for c in comparisons(store, space) if c["config"] == wanted]
    if not found:
        return Evidence(source=source)
    best = max(found, key=lambda c: (c["stats"].get("pairs") or 0, -(c["stats"].get("p_value") or 1.0)))
    s = best["stats"]
    interval = (s["ci_low"], s["ci_high"]) if s.get("ci_low") is not None else None
    return Evidence(source=source, speedup=s["mean_speedup"], interval=interval, p_value=s.get("p_value"),
                    pairs=s.get("pairs") or 0, where=best["where"], metric=best["metric"])


def study_config(study, candidate: str | None = None) -> tuple[dict[str, Any], str]:
    """(the configuration's changed settings, where it comes from) for a tuning study: a comparison's candidate
    when `candidate` names one, else the study's best, confirmed when it was."""
    from ..tuning.results import best_configuration, confirmed_best

    fixed = study.tune.get("fixed") or {}
    if candidate is not None:
        labels = {}
        for key, result in (study.record["settings"].get("compare") or {}).items():
            for label, config in (result.get("candidates") or {}).items():
                labels.setdefault(label, (config, key))
        if candidate not in labels:
            raise UsageError(f"no comparison of study '{study.name}' has a candidate {candidate!r} (its candidates: "
                             f"{', '.join(sorted(labels)) or 'none: run nosqltune compare'})")
        config, key = labels[candidate]
        return changed(study.full_space, config, fixed), f"candidate {candidate} of study {study.name}'s comparison {key}"
    rows = study.trials()
    best = confirmed_best(best_configuration(rows, study.objective, study.spec.workloads, study.space),
                          study.record["settings"], study.space)
    if not best:
        raise UsageError(f"study '{study.name}' has no completed trial within its constraints yet: nothing to export")
    said = "the confirmed best" if best.get("confirmed") else "the best single run (not confirmed)"
    return changed(study.full_space, best["config"], fixed), f"{said} of study {study.name}"


def rig_of(study) -> str:
    """The node a study tuned on, in words: scenario, heap, memory cap, volume, the machine's cores."""
    harness = study.settings
    parts = [f"scenario {harness.scenario}"]
    c = getattr(harness, "cassandra", None)
    if c is not None:
        parts.append(f"{c.heap_mb} MiB heap")
        flat = harness.flat()
        if flat.get("page_cache_mb"):
            parts.append(f"a memory cap of heap + {flat.get('offheap_mb') or 0} MiB + {flat['page_cache_mb']} MiB of "
                         "page cache")
        volume = flat.get("volume")
        if isinstance(volume, dict):
            caps = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in volume.items() if k != "name" and v)
            parts.append(f"a volume like {volume.get('name', 'a cloud volume')} ({caps})")
        elif volume:
            parts.append(f"volume {volume}")
        parts.append(f"{c.nodes} node(s)")
    fingerprints = study.store.environments()
    cores = sorted({fp.get("cores") for fp in fingerprints.values() if fp.get("cores")})
    if cores:
        parts.append(f"{'/'.join(map(str, cores))} cores shared by node and client")
    return ", ".join(parts)
