#!/usr/bin/env python3
"""Where a study's machine time goes, and what bringing restored data to a knob's value saves.

Two parts, each written to bench/results/study_cost.{md,json}:

  replay   (no trial is run) every committed study of bench/results/impact/*.db: its machine time per phase
           (tuning/cost.py), its dataset builds, and the same trials replayed under today's dataset key, where
           the bloom filter's chance no longer keys a dataset of big SSTables (knobs/cassandra.yaml `restaged`):
           a trial that built its dataset would not have, when an earlier trial of the study had the same key.
           The builds so saved, their recorded seconds, and the build share that would remain (the imports that
           replace them counted at the restage time measured below).
  restage  interleaved cold runs on the disk-bound scenario of one configuration (irace's disk-bound best: no
           compression, big SSTables, a bloom filter chance of 0.004) run two ways per round: `restaged` (the
           dataset built without the chance, brought to it by a re-import that rebuilds the filters) and `built`
           (--restore reload: the data loaded by a node with the chance set, as every trial did before). Per
           arm: throughput, read p99, the node's filter size and false-positive ratio read back, the disk's
           bytes read per operation, and the seconds the restage or the load took; the Wilcoxon test on the paired rounds.

  study    the goal's study: SMAC on disk-bound with the `v5` knobs and 60 trials, as impact_tuning.md's (its store
           bench/results/impact/disk-bound.db, study `smac`, is the "before"), now with `tune --build-share 0.2`;
           then its confirmed best and the one before against the default in --compare-rounds interleaved cold
           rounds (`compare`, in the new study). Per study: the machine time of its search and confirmation, the
           build share, the builds, the suggestions run on data built before, the wall time; per candidate the
           ratio to the default with its interval and p. Hours of cold trials: nothing else may run.
           The first paced study (paced.db, 2026-11-26) told SMAC a suggestion's cost where the pacer ran it on
           data built before (a projection); `study` now runs the second (paced-ran.db), where SMAC is told the
           configuration that ran (Optimizer.tell_ran). `write` reports both.

  python3 bench/study_cost.py replay
  python3 bench/study_cost.py restage [--rounds 6]      # resumable: finished rounds are kept
  python3 bench/study_cost.py study [--share 0.2] [--compare-rounds 10]   # resumable (tune --resume, compare)
  python3 bench/study_cost.py write                     # the results files from what is stored
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from pathlib import Path

from common import RESULTS, ROOT, kept_notes, log, machines, nosqltune, paired, study_rows  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))

STORES = sorted((RESULTS / "impact").glob("*.db"))
FOLDER = RESULTS / "study_cost"
DB = FOLDER / "restage.db"
# irace's disk-bound best (impact/disk-bound-irace-best.yaml) with the two values today's knob file refuses brought
# inside: concurrent_writes 5 -> 8 (its range), memtable_heap_space 461 -> 375 (the rule: at most half the heap);
# run with --force, as `v5`'s ranges, which the study searched, are wider than the full knob set's
CONFIG = FOLDER / "restage-config.yaml"
ARMS = {"restaged": [], "built": ["--restore", "reload"]}
BEFORE = (RESULTS / "impact" / "disk-bound.db", "smac")     # impact_tuning.md's SMAC study of disk-bound
# the paced studies, by what the optimizer was told of a suggestion the pacer ran on data built before: its cost
# as the suggestion's (a projection; the first study, 2026-11-26), or the configuration that ran (Optimizer.tell_ran)
PACED = {"projection": (FOLDER / "paced.db", "smac-paced"), "ran": (FOLDER / "paced-ran.db", "smac-paced-ran")}
COMPARISONS = {"projection": FOLDER / "paced-compare.json", "ran": FOLDER / "paced-ran-compare.json"}
BEFORE_BEST = FOLDER / "disk-bound-smac-best.yaml"           # its confirmed best, a candidate of the comparison
SEARCH_TAGS = ("tune", "confirm")                            # a study's search and its confirmation


# ------------------------------------------------------------------------------------------------ replay
def _trials(path: Path) -> dict[str, list[dict]]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = db.execute("SELECT s.name, t.config, t.timings, t.state, t.started_at, t.finished_at, t.tag, t.meta "
                           "FROM trials t JOIN studies s ON s.id = t.study_id "
                           "ORDER BY t.study_id, t.started_at, t.id").fetchall()
    finally:
        db.close()
    out: dict[str, list[dict]] = {}
    for name, config, timings, state, started, finished, tag, meta in found:
        out.setdefault(name, []).append({"config": json.loads(config or "{}"), "timings": json.loads(timings or "{}"),
                                         "state": state, "started_at": started, "finished_at": finished, "tag": tag,
                                         "meta": json.loads(meta or "{}")})
    return out


def replay(rows: list[dict], restage_s: float | None) -> dict:
    """The study's recorded builds, and those it would have made with the restaged knobs out of the key."""
    from nosqltune.knobs import load_space
    from nosqltune.systems.cassandra.config import place
    from nosqltune.tuning.cost import time_split

    space = load_space("cassandra")
    seen: set[str] = set()
    seen_before: set[str] = set()   # the keys as they were when the study ran
    saved = saved_s = restaged = 0
    for row in rows:
        placed = place(space, row["config"], restage=True)
        key = json.dumps(placed.reload, sort_keys=True, default=str)
        key_before = json.dumps(place(space, row["config"]).reload, sort_keys=True, default=str)
        built_s = row["timings"].get("dataset_build_s") or 0.0
        # saved: a build the old key made the study pay; a build for another reason (an evicted dataset) stays
        if built_s and key in seen and key_before not in seen_before:
            saved += 1
            saved_s += built_s
        restaged += bool(placed.restaged)
        seen.add(key)
        seen_before.add(key_before)
    split = time_split(rows)
    build_s = split["seconds"]["build"]
    extra = restaged * restage_s if restage_s is not None else 0.0
    after = split["machine_s"] - saved_s + extra
    return {"trials": split["trials"], "machine_s": split["machine_s"], "build_s": build_s,
            "build_share": build_s / split["machine_s"] if split["machine_s"] else None, "builds": split["builds"],
            "builds_saved": saved, "build_s_saved": saved_s, "restaged_trials": restaged,
            "restage_s_added": extra if restage_s is not None else None,
            "build_share_after": (build_s - saved_s) / after if after else None,
            "machine_s_after": after}


# ------------------------------------------------------------------------------------------------ restage
def arm_rows(arm: str) -> list[dict]:
    return [r for r in study_rows(DB, arm) if r["state"] in ("COMPLETE", "FAIL") and r["failure_kind"] != "interrupted"]


def run_restage(rounds: int) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    for round_ in range(rounds):
        order = list(ARMS) if round_ % 2 == 0 else list(reversed(ARMS))
        for arm in order:
            if len(arm_rows(arm)) > round_:
                continue
            log(f"round {round_ + 1}/{rounds}: {arm}")
            before = len(study_rows(DB, arm))
            nosqltune("bench", "--scenario", "disk-bound", "--repeat", "1", "--config", str(CONFIG), "--force",
                      *ARMS[arm], "--study", str(DB), "--study-name", arm, "--json", ok=(0, 1))
            if len(study_rows(DB, arm)) == before:
                raise SystemExit(f"study_cost: {arm} stored no trial (see the lines above)")
        write()


def _arm_summary(rows: list[dict]) -> dict:
    """Per round (the arm's finished trials in order, a failed one None): the figures compared."""
    done = [r for r in rows if r["state"] == "COMPLETE"]

    def values(get) -> list:
        out = []
        for r in rows:
            try:
                out.append(get(r) if r["state"] == "COMPLETE" else None)
            except (KeyError, TypeError):
                out.append(None)
        return out

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return statistics.mean(xs) if xs else None

    out = {"runs": len(done), "failed": len(rows) - len(done),
           "throughput": values(lambda r: r["metrics"]["throughput_ops_s"]),
           "read_p99_ms": values(lambda r: r["metrics"]["summary"]["read_p99_ms"]),
           "filter_bytes": values(lambda r: r["internals"]["bloom_filter_disk_bytes"]),
           "false_ratio": values(lambda r: r["internals"]["bloom_filter_false_ratio"]),
           "read_kb_per_op": values(lambda r: r["metrics"]["summary"]["node_disk_read_bytes_per_op"] / 1024),
           "restage_s": values(lambda r: r["timings"].get("restage_s")),
           "load_s": values(lambda r: r["timings"].get("load_s")),
           "total_s": values(lambda r: r["timings"]["total_s"])}
    out["means"] = {k: mean(v) for k, v in out.items() if isinstance(v, list)}
    return out


# ------------------------------------------------------------------------------------------------ study
def run_study(share: float, rounds: int) -> None:
    """The paced study whose optimizer is told what ran (the first one, told the projection, is kept as run)."""
    import yaml

    FOLDER.mkdir(parents=True, exist_ok=True)
    told = "ran"
    db, name = PACED[told]
    begun = name in _trials(db) if db.exists() else False
    args = ["--resume"] if begun else ["--scenario", "disk-bound", "--knobs", "v5", "--optimizer", "smac", "--budget",
                                       "60", "--build-share", str(share)]
    nosqltune("tune", *args, "--study", str(db), "--study-name", name, "--json", ok=(0, 1))
    if not BEFORE_BEST.exists():
        best = json.loads(nosqltune("best", "--study", str(BEFORE[0]), "--study-name", BEFORE[1], "--format", "json"))
        BEFORE_BEST.write_text(yaml.safe_dump(best["best"]["config"], sort_keys=True))
    out = nosqltune("compare", "--study", str(db), "--study-name", name, "--candidates", f"best,{BEFORE_BEST}",
                    "--repeat", str(rounds), "--json", ok=(0, 1))
    COMPARISONS[told].write_text(out)
    write()


def _search_cost(store: Path, name: str) -> dict | None:
    """The search's time split (tuning/cost.py), with the machine seconds of its confirmation's rounds beside it
    (`confirmation_s`): a study's cost like for like is search and confirmation in machine hours, not wall time,
    which holds whatever pauses the study had."""
    from nosqltune.tuning.cost import time_split

    if not store.exists():
        return None
    rows = _trials(store).get(name, [])
    search = [r for r in rows if r["tag"] in SEARCH_TAGS]
    if not search:
        return None
    confirmation = [r for r in rows if r["tag"] == "compare"
                    and str((r.get("meta") or {}).get("group", "")).startswith("confirm")]
    return {**time_split(search), "confirmation_s": time_split(confirmation)["machine_s"] if confirmation else None}


# ------------------------------------------------------------------------------------------------ write
def write() -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    arms = {arm: _arm_summary(arm_rows(arm)) for arm in ARMS}
    restage_s = arms["restaged"]["means"].get("restage_s")
    studies = {f"{path.stem}/{name}": replay(rows, restage_s)
               for path in STORES for name, rows in _trials(path).items()}
    pair = paired(arms["restaged"]["throughput"], arms["built"]["throughput"], True)
    p99 = paired(arms["restaged"]["read_p99_ms"], arms["built"]["read_p99_ms"], False)
    results = {"studies": studies, "restage": {"config": str(CONFIG.relative_to(ROOT)), "arms": arms,
                                               "throughput": pair, "read_p99": p99}}
    (RESULTS / "study_cost.json").write_text(json.dumps(results, indent=1) + "\n")

    def f(x, spec=".0f"):
        return "-" if x is None else format(x, spec)

    path = RESULTS / "study_cost.md"
    lines = ["# Study cost: where a study's machine time goes, and restaged knobs", "",
             "Written by `python3 bench/study_cost.py` (see its docstring); `replay` reads the committed studies, "
             "`restage` runs trials.", ""]
    lines += kept_notes(path, "study_cost.py")
    lines += ["## The committed studies replayed under today's dataset key", "",
              "Machine time and builds as recorded; *saved*: builds whose key (the bloom filter chance left out "
              "on big SSTables) an earlier trial of the study already had. *Share after* counts a restage per "
              f"restaged trial at the {f(restage_s, '.1f')} s measured below.", "",
              "| store/study | trials | machine h | builds | build share | builds saved | build h saved | "
              "restaged trials | build share after |", "|---|---|---|---|---|---|---|---|---|"]
    for name, s in studies.items():
        share = "-" if s["build_share"] is None else f"{s['build_share'] * 100:.0f}%"
        after = "-" if s["build_share_after"] is None else f"{s['build_share_after'] * 100:.0f}%"
        lines.append(f"| {name} | {s['trials']} | {s['machine_s'] / 3600:.2f} | {s['builds']} | {share} | "
                     f"{s['builds_saved']} | {s['build_s_saved'] / 3600:.2f} | {s['restaged_trials']} | {after} |")
    lines += ["", "## Restaged against built, interleaved cold runs (disk-bound)", "",
              f"Configuration `{CONFIG.relative_to(ROOT)}`; per arm the mean over its runs.", "",
              "| arm | runs | ops/s | read p99 ms | filter bytes | false ratio | disk KB read per op | restage s | load s | "
              "trial s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for arm, s in arms.items():
        m = s["means"]
        lines.append(f"| {arm} | {s['runs']} | {f(m['throughput'])} | {f(m['read_p99_ms'], '.1f')} | "
                     f"{f(m['filter_bytes'])} | {f(m['false_ratio'], '.4f')} | {f(m['read_kb_per_op'], '.1f')} | "
                     f"{f(m['restage_s'], '.1f')} | {f(m['load_s'], '.1f')} | {f(m['total_s'])} |")
    for what, stats in (("throughput", pair), ("read p99", p99)):
        if stats["mean_ratio"] is not None:
            lines.append(f"\n{what}, restaged against built over {stats['rounds']} paired rounds: "
                         f"x{stats['mean_ratio']:.3f} (> 1: restaged better), Wilcoxon p = {stats['p']:.3f}")
    lines += _study_lines()
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


def _study_lines() -> list[str]:
    """The paced SMAC study against the one before, and the comparison of their bests."""
    costs = {"before (impact_tuning.md)": _search_cost(*BEFORE),
             "--build-share, told the projection": _search_cost(*PACED["projection"]),
             "--build-share, told what ran": _search_cost(*PACED["ran"])}
    if costs["--build-share, told the projection"] is None:
        return ["", "## A paced SMAC study (`study`): not run yet"]
    lines = ["", "## SMAC on disk-bound, 60 trials, before and with --build-share (`study`, its --share)", "",
             "The search's trials only (tagged tune: the confirmation's and the comparisons' rounds apart). *Build h*: the dataset builds; "
             "*other h*: everything else of the trials (restore, boot, warm-up, measuring, stop), which moves with "
             "the machine's speed on the day: the build share, not the wall time, is what compares across days. "
             "*With its confirmation*: the search's machine hours and its confirmation's rounds, like for like. "
             "*Wall h*: the search's first trial to its last, pauses included (the study before pacing had about "
             "1.3 h of them): not a cost to compare.", "",
             "| study | trials | machine h | build h | other h | build share | builds | run on data built before "
             "| with its confirmation, machine h | wall h |", "|---|---|---|---|---|---|---|---|---|---|"]
    for label, c in costs.items():
        if c is None:
            continue
        share = "-" if c["shares"]["build"] is None else f"{c['shares']['build'] * 100:.0f}%"
        wall = "-" if not c.get("wall_s") else f"{c['wall_s'] / 3600:.2f}"
        build = c["seconds"]["build"]
        confirmed = "-" if c["confirmation_s"] is None else f"{(c['machine_s'] + c['confirmation_s']) / 3600:.2f}"
        lines.append(f"| {label} | {c['trials']} | {c['machine_s'] / 3600:.2f} | {build / 3600:.2f} | "
                     f"{(c['machine_s'] - build) / 3600:.2f} | {share} | {c['builds']} | {c.get('replaced', 0)} | "
                     f"{confirmed} | {wall} |")
    check = machines({"before": BEFORE, "told the projection": PACED["projection"], "told what ran": PACED["ran"]})
    lines += ["", f"**Machines** (the CPU probe stored with each run, the default's node CPU per operation): "
              f"{check.line()}. Machine hours of studies on machines of different speeds differ by the machines "
              "as well as by the pacing: the build share compares across them, the hours only roughly."]
    for told, path in COMPARISONS.items():
        if path.exists() and path.read_text().strip():
            lines += _comparison_lines(told, json.loads(path.read_text()), *PACED[told])
    return lines


def _sessions(db: Path, study: str, group: str, gap_s: float = 3600.0) -> list[list[int]]:
    """The rounds of one comparison (`group` of study `study`) by the session that ran them: a round on another
    machine (the trials' stored environment: a session may get a new machine) or begun more than `gap_s` after the
    round before starts a new session, compared apart too."""
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT t.meta, t.started_at, t.environment_id FROM trials t JOIN studies s ON "
                            "s.id = t.study_id WHERE s.name = ? AND t.tag = 'compare' AND t.state = 'COMPLETE'",
                            (study,)).fetchall()
    finally:
        conn.close()
    began: dict[int, tuple[float, int]] = {}
    for meta, started, environment in rows:
        meta = json.loads(meta or "{}")
        if meta.get("group") == group and (meta["round"] not in began or started < began[meta["round"]][0]):
            began[meta["round"]] = (started, environment)
    sessions: list[list[int]] = []
    for r in sorted(began, key=began.get):
        last = began[sessions[-1][-1]] if sessions else None
        if last is None or began[r][1] != last[1] or began[r][0] - last[0] > gap_s:
            sessions.append([])
        sessions[-1].append(r)
    return sessions


def _comparison_lines(told: str, comparison: dict, db: Path, study: str) -> list[str]:
    """One paced study's comparison: its best and the best before, against the default and each other; when its
    rounds ran in more than one session, each session's rounds apart as well."""
    from common import ratio_text

    (workload,) = comparison["workloads"].values()
    values, stats = workload["values"], workload["stats"]
    before = next(k for k in values if k not in ("default", "best"))
    vs = paired(values["best"], values[before], True)
    if not vs["mean_ratio"]:
        return []
    lines = ["", f"Told {told}: interleaved cold rounds ({len(values['default'])}), throughput against the default: "
                 f"paced best {ratio_text(stats['best'])} (p = {stats['best'].get('p_value')}), the best before "
                 f"{ratio_text(stats[before])} (p = {stats[before].get('p_value')}); paced best against the best "
                 f"before x{vs['mean_ratio']:.3f} (p = {vs['p']})."]
    sessions = _sessions(db, study, workload["group"])
    for rounds in sessions if len(sessions) > 1 else []:
        def part(label):
            return [values[label][r] for r in rounds if r < len(values[label])]

        figures = {k: paired(part(a), part(b), True) for k, (a, b) in
                   {"paced best / default": ("best", "default"), "best before / default": (before, "default"),
                    "paced best / best before": ("best", before)}.items()}
        said = "; ".join(f"{k} x{v['mean_ratio']:.3f} (p = {v['p']:.3g})" for k, v in figures.items()
                         if v["mean_ratio"])
        if not said:   # fewer than 2 paired rounds in this session
            continue
        means = ", ".join(f"{label} {statistics.mean(xs):,.0f}" for label in ("default", "best", before)
                          if (xs := [x for x in part(label) if x is not None]))
        which = (f"{rounds[0] + 1}-{rounds[-1] + 1}" if rounds == list(range(rounds[0], rounds[-1] + 1))
                 else ", ".join(str(r + 1) for r in rounds))
        lines.append(f"- rounds {which} ({len(rounds)}, one session; mean ops/s {means}): {said}")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["replay", "restage", "study", "write"])
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--share", type=float, default=0.2)
    p.add_argument("--compare-rounds", type=int, default=10)
    a = p.parse_args()
    if a.rounds < 2 or a.compare_rounds < 2 or not 0 < a.share < 1:
        print("study_cost: give 2 rounds or more and a share between 0 and 1", file=sys.stderr)
        return 2
    if a.part == "restage":
        run_restage(a.rounds)
    elif a.part == "study":
        run_study(a.share, a.compare_rounds)
    else:
        write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
