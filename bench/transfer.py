#!/usr/bin/env python3
"""What tuning finds on your own workload, and whether a YCSB-tuned best carries over: on cloud-disk (limited by
its volume's IOPS cap) and disk-bound (limited by the node's cores), a 60-trial search, then its confirmation, for
each shipped profile (time series, messaging, key-value) and for YCSB B uniform; then every best measured on every
workload against the default in interleaved cold rounds (`compare`): 10 rounds for a workload's own best and for
YCSB's best on it (run as soon as the profile's search is confirmed), 3 rounds for the other profiles' bests.
bench/results/workloads.md.

The strategy is the one bench/results/strategies_v5.md ranks first: GP with LlamaTune (8 synthetic dimensions,
x2.025 of the default on the recorded landscape, GP alone x2.015 beside it). On real cold trials GP alone found
more (strategies_real.md: x3.62 against x2.48); the ranking asked for is the recorded one. Every search of a
scenario searches the same knobs, the scenario's set (cloud on cloud-disk; on disk-bound v5 less the compaction
strategy, bench/transfer_v5.yaml: v5's compaction choices leave out the time-series table's own TimeWindow), so that
a cell tells workloads apart, not knob sets; a profile's table options stay its knobs' defaults, and neither set
changes a table's compaction. A best is exported as the
settings its confirmation changed from the default (not every searched knob), so it carries no table's own
options onto another table. The searches ran at C1; their confirmations and every comparison run tiered, as a node
in production does, each run warmed up to the JIT's plateau (`compare --jit tiered`: at least 120 s). The first
confirmations showed why: on the time-series profile the default is limited by the node's cores at C1 and by the
volume's IOPS cap at tiered, and its bests' gains were x2-x2.8 at tiered against +30% in the C1 search.

A best **transfers** to a workload when it reaches at least x0.95 of that workload's own best there and the two
are not significantly different (Wilcoxon signed-rank over the 10 rounds they share, p >= 0.05), or significantly
better; a best measured in the 3 rounds of the other profiles' bests is judged by its ratio alone to the workload's
own best, run beside it in the same 3 rounds (3 pairs cannot be significant: their smallest p is 0.25). The own best
runs in those rounds again because its 10 rounds may have run on another day: cloud-disk's time-series and messaging
rows ran on a machine whose CPU probe was 1.7 times slower than the one that ran their 3-round cells, and where the
node's cores bind a best, such a ratio across comparisons would measure the machines. Goal, on cloud-disk: on the time-series profile its own best at least x1.5 over the default and
at least x1.2 over the YCSB-tuned best, both p < 0.05.

Machine time, said before anything runs (`--plan` prints it alone), from the trial times stored by the same
scenarios' SMAC studies, counting only the trials whose left-out knobs hold their defaults (disk-bound's Leveled
trials built for 363 s, its others for 32-36 s), and, once this bench has stored trials of a scenario, from its own:
480 search trials, 96 confirmation runs and 298 comparison runs, the last two tiered (150-230 s a run with its
warm-up). On 2026-11-30, with cloud-disk's first two searches stored (66 s a trial, 175 s a tiered run): about 37
machine hours, three times the 10-12 first guessed; the tiered comparisons add about 13 of them to what C1's would
take. write-heavy's trials are a third as long, but it is no core-bound case here: a study's workloads replace a scenario's mix
(write90), so none would write heavily, and what is left of it is 100K rows in memory, in-memory's case, where no
study found more than x1.10 and every best would "transfer" for want of a gain. One store per scenario
(bench/results/transfer/SCENARIO.db), one study per workload, so `nosqltune report` draws each. Needs root
(memory cgroups, capped volumes); nothing else may run beside it. Resumable: a study resumes (tune --resume), a
comparison continues its rounds, and each phase skips what is stored. `--stop-at HH:MM` ends it when the first
trial finishes past that time (a session's end; noticed within 5 s, the trial begun in them runs again on resume),
the store checkpointed and the page written.

    python3 bench/transfer.py --plan
    python3 bench/transfer.py [--scenarios cloud-disk,disk-bound] [--budget 60] [--rounds 10] [--few 3]
                              [--stop-at HH:MM]
    python3 bench/transfer.py --write-only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from common import (RESULTS, ROOT, compare, export_best, kept_notes, log, machines, nosqltune, paired, ratio_text,  # bench/
                    stop_at_option, study_rows, study_settings, until)

SCENARIOS = ("cloud-disk", "disk-bound")
YCSB = "ycsb-b"
# a profile's statements are smaller than YCSB's 1 KB rows and run faster: more operations keep its measured phase
# near the scenario's 20 s (bench/profile_study.py measured the time-series profile at this size on cloud-disk)
PROFILE_SIZES = ["--operations", "100000", "--warmup-ops", "30000"]
WORKLOADS = {YCSB: ["--workload", "ycsb-b", "--distribution", "uniform"],
             "timeseries": ["--workload", "profile:timeseries", *PROFILE_SIZES],
             "messaging": ["--workload", "profile:messaging", *PROFILE_SIZES],
             "keyvalue": ["--workload", "profile:keyvalue", *PROFILE_SIZES]}
STRATEGY = ["--optimizer", "gp", "--space-adapter", "llamatune", "--llamatune-dims", "8"]
METRICS = "throughput,cpu-per-op,io-per-op,bytes-per-op"   # I/Os where the node has a volume of its own
KNOBS = {"cloud-disk": "cloud", "disk-bound": str(Path(__file__).with_name("transfer_v5.yaml"))}   # one per scenario
FOLDER = RESULTS / "transfer"
TRANSFER_RATIO, ALPHA = 0.95, 0.05
GOAL_OVER_DEFAULT, GOAL_OVER_YCSB = 1.5, 1.2
# every comparison at the JIT a node in production runs, as the searches' confirmations: the C1 searches' ranking, the
# tiered JIT's verdict (the default's bottleneck itself moves between them: cores at C1, the IOPS cap at tiered)
JIT = ["--jit", "tiered"]
TIERED_WARMUP_S = 150.0   # a tiered run's warm-up beside its C1 time: cloud-disk's first confirmations, 120-241 s
# trial seconds measured before on each scenario (a search trial with its share of dataset builds; a comparison
# run), from the stored studies named here: what the plan's hours rest on
MEASURED = {"cloud-disk": (RESULTS / "impact" / "cloud-disk.db", "smac"),
            "disk-bound": (RESULTS / "impact" / "disk-bound.db", "smac")}


def db_of(scenario: str) -> Path:
    return FOLDER / f"{scenario}.db"


def best_file(scenario: str, workload: str) -> Path:
    return FOLDER / scenario / f"{workload}-best.yaml"   # compare labels it by its name: WORKLOAD-best


def label(workload: str) -> str:
    return f"{workload}-best"


def tune_budget(search: int) -> int:
    """tune's --budget for a search of `search` trials: tune's budget counts its confirmation's runs too (the top
    configurations and the default, each in every round), so a budget of 60 would search 48 trials."""
    from nosqltune.evaluation.confirmation import CONFIRM_ROUNDS, CONFIRM_TOP

    return search + (CONFIRM_TOP + 1) * CONFIRM_ROUNDS


def matrix_runs(budget: int, rounds: int, few: int) -> tuple[int, int]:
    """(search trials, comparison runs) per scenario, counted from its steps: a comparison runs the default and each
    of its bests in every round."""
    todo = steps(SCENARIOS[0], rounds, few)
    return (budget * sum(s[0] == "search" for s in todo),
            sum(s[3] * (1 + len(s[2])) for s in todo if s[0] == "compare"))


def left_out(scenario: str) -> list[str]:
    """The knobs a scenario's searches leave out of their knob set (a knob file's `leave_out`; none for a set)."""
    path = Path(KNOBS[scenario])
    return list(_yaml(path).get("leave_out") or []) if path.is_file() else []


def reachable(rows: list[dict], knobs: list[str]) -> list[dict]:
    """The measured trials whose left-out knobs hold the values of the study's first trial (the default): the
    others' times belong to settings these searches never try (disk-bound's Leveled builds took 363 s against the
    others' 32-36 s)."""
    if not rows or not knobs:
        return rows
    first = rows[0]["config"]
    return [r for r in rows if all(r["config"].get(k) == first.get(k) for k in knobs)]


def earlier_times(scenario: str) -> tuple[float, float, str]:
    """A search trial's and a tiered run's seconds on a scenario, from its stored SMAC study (the trials whose
    left-out knobs hold their defaults), and where they come from."""
    db, name = MEASURED[scenario]
    rows = [r for r in study_rows(db, name) if r["state"] == "COMPLETE"]
    searched = [r["timings"].get("total_s", 0.0) for r in reachable(rows, left_out(scenario)) if r["tag"] != "compare"]
    compared_s = [r["timings"].get("total_s", 0.0) for r in rows if r["tag"] == "compare"]
    trial = statistics.mean(searched) if searched else 120.0
    # the confirmations and the comparisons run tiered, warmed up to the JIT's plateau (120 s or more) before each run
    tiered = (statistics.mean(compared_s) if compared_s else trial) + TIERED_WARMUP_S
    return trial, tiered, f"{db.name}'s {name} study: {len(searched)} trials of the knobs searched here"


def plan(scenarios: list[str], budget: int, rounds: int, few: int) -> None:
    """The machine time, before anything runs: from the same scenario's stored SMAC study, or, once this bench has
    stored trials of its own, from those (search trials and tiered runs), with the hours already spent."""
    total = left = 0.0
    for scenario in scenarios:
        own = [r for w in WORKLOADS for r in study_rows(db_of(scenario), w)]
        own_searched = [r["timings"]["total_s"] for r in own if r["tag"] != "compare" and r["state"] == "COMPLETE"]
        own_tiered = [r["timings"]["total_s"] for r in own if r["tag"] == "compare" and r["state"] == "COMPLETE"]
        # the earlier study is read only for what this bench has not measured yet
        trial, tiered, source = earlier_times(scenario) if not (own_searched and own_tiered) else (0.0, 0.0, "")
        if own_searched:
            trial = statistics.mean(own_searched)
            source = (f"this bench's own: {len(own_searched)} search trials, {len(own_tiered)} tiered runs of "
                      f"{db_of(scenario).name}")
        if own_tiered:
            tiered = statistics.mean(own_tiered)
        spent = sum(r["timings"].get("total_s", 0.0) for r in own) / 3600
        searches, compared = matrix_runs(budget, rounds, few)
        confirms = (tune_budget(budget) - budget) * len(WORKLOADS)
        # profiles run 100,000 operations against YCSB's 30,000 at about three times the rate: about the same time;
        # a best on another workload's data may need a dataset build of its own (a fifth more on the comparisons)
        hours = (searches * trial + (confirms + compared * 1.2) * tiered) / 3600
        total += hours
        left += max(hours - spent, 0.0)
        log(f"{scenario}: {searches} search trials at about {trial:.0f} s (builds included), {confirms} confirmation "
            f"runs and {compared} comparison runs, tiered, at about {tiered:.0f} s ({source}): about {hours:.1f} "
            f"machine hours, {spent:.1f} spent")
    log(f"in all: about {total:.1f} machine hours, about {left:.1f} left, nothing else running beside")


def steps(scenario: str, rounds: int, few: int) -> list[tuple]:
    """The order of a scenario's work: ("search", workload) or ("compare", target, best files, rounds). Each
    profile's search is followed at once by the comparison its row is judged by (its own best and YCSB's, beside the
    default, in `rounds` rounds), so the goal's cell is measured as soon as the time-series search is confirmed, not
    after every search; then YCSB's own best on YCSB, then the other profiles' bests on each workload in `few`, each
    beside the workload's own best in the same rounds (its ratio to it is the cell's verdict)."""
    out: list[tuple] = []
    for workload in WORKLOADS:
        out.append(("search", workload))
        if workload != YCSB:
            out.append(("compare", workload, [best_file(scenario, workload), best_file(scenario, YCSB)], rounds))
    out.append(("compare", YCSB, [best_file(scenario, YCSB)], rounds))
    for target in [*(w for w in WORKLOADS if w != YCSB), YCSB]:   # YCSB's last: its own row ran just before
        others = [best_file(scenario, w) for w in WORKLOADS if w not in (target, YCSB)]
        if others:
            out.append(("compare", target, [best_file(scenario, target), *others], few))
    return out


def run(scenarios: list[str], budget: int, rounds: int, few: int) -> None:
    for scenario in scenarios:
        db = db_of(scenario)
        db.parent.mkdir(parents=True, exist_ok=True)
        (FOLDER / scenario).mkdir(parents=True, exist_ok=True)
        try:
            for step in steps(scenario, rounds, few):
                if step[0] == "search":
                    search(scenario, step[1], budget)
                else:
                    # a failed run (stored with its reason, its round's pair left out; a resumed compare does not run
                    # it again) does not stop the matrix: the cell is drawn from the pairs that completed, the page
                    # counts the misses
                    _, target, files, repeat = step
                    compare("--study", str(db), "--study-name", target, "--candidates",
                            ",".join(str(f) for f in files), "--repeat", str(repeat), "--metrics", METRICS, *JIT)
        finally:   # a stop too leaves the store as one file, as it is committed; the first error stays the one told
            if db.exists():
                try:
                    checkpoint(db)
                except Exception as exc:  # noqa: BLE001
                    log(f"the checkpoint of {db} failed: {exc}")


def search(scenario: str, workload: str, budget: int) -> None:
    """A workload's search and its confirmation (resumed if stored in part, skipped if confirmed), its best exported."""
    db = db_of(scenario)
    if not (study_settings(db, workload) or {}).get("confirm"):   # a confirmed search is done: not replayed
        resume = ["--resume"] if study_rows(db, workload) else []
        begin = [] if resume else ["--scenario", scenario, *WORKLOADS[workload], "--knobs", KNOBS[scenario],
                                   *STRATEGY, "--objective", "throughput"]
        nosqltune("tune", *begin, *resume, "--budget", str(tune_budget(budget)), "--study", str(db),
                  "--study-name", workload, capture=False)
        checkpoint(db)   # a commit between sessions holds every finished search
    best = export_best(db, workload, best_file(scenario, workload))
    if best.get("best_status") != "confirmed":
        raise SystemExit(f"{scenario}/{workload}: the best is {best.get('best_status')!r}, not confirmed. If "
                         "the search stopped early, this command again resumes it; if its confirmation's runs "
                         "failed (`nosqltune export --study-name WORKLOAD`: they are not run again), confirm "
                         "it anew with `nosqltune best --confirm`")


def checkpoint(db: Path) -> None:
    """The store as one file (its write-ahead log folded in), as it is committed."""
    from nosqltune.store import open_store

    store = open_store(str(db))
    try:
        store.checkpoint()
    finally:
        store.close()


def cells(scenario: str) -> dict[str, dict[str, dict]]:
    """target workload -> best's workload -> what its comparison on the target stored: vs the default, its runs'
    values, its bottleneck line, CPU and I/Os per operation; and vs the target's own best where they shared rounds."""
    out: dict[str, dict[str, dict]] = {}
    for target in WORKLOADS:
        settings = (study_settings(db_of(scenario), target) or {}).get("compare") or {}
        found: dict[str, dict] = {}
        for result in settings.values():
            for measured in (result.get("workloads") or {}).values():
                for source in WORKLOADS:
                    name = label(source)
                    if name not in measured.get("stats", {}):
                        continue
                    rounds, own_values = len(measured["values"][name]), measured["values"].get(label(target))
                    if source in found and (found[source]["rounds"] > rounds or (
                            found[source]["rounds"] == rounds and found[source]["own"] is not None
                            and own_values is None)):
                        continue   # measured in more rounds elsewhere, or as often beside the own best: that decides
                    also = measured.get("also") or {}
                    found[source] = {
                        "vs_default": measured["stats"][name], "values": measured["values"][name],
                        "rounds": len(measured["values"][name]), "bottleneck": (measured.get("bottlenecks") or {})
                        .get(name), "cpu_us_per_op": _mean((also.get("cpu-per-op") or {}).get("values", {}).get(name)),
                        "io_per_op": _mean((also.get("io-per-op") or {}).get("values", {}).get(name)),
                        "bytes_per_op": _mean((also.get("bytes-per-op") or {}).get("values", {}).get(name)),
                        "own": own_values, "unsettled": (measured.get("unsettled") or {}).get(name),
                        "machines_apart": bool((measured.get("machines") or {}).get("apart"))}
        own = found.get(target)
        for source, cell in found.items():
            if source == target or not own:
                continue
            if cell["own"] is not None and len(cell["values"]) == len(cell["own"]):   # the same rounds
                cell["vs_own"] = paired(cell["values"], cell["own"], maximize=True)
            else:   # another comparison's rounds: the ratio of the means against the default only
                mine, theirs = cell["vs_default"].get("mean_speedup"), own["vs_default"].get("mean_speedup")
                cell["vs_own"] = {"rounds": None, "mean_ratio": mine / theirs if mine and theirs else None, "p": None}
            # with 3 rounds no difference can be significant (the smallest p of 3 pairs is 0.25): the ratio decides
            ratio, p = cell["vs_own"]["mean_ratio"], cell["vs_own"]["p"]
            cell["transfers"] = (None if ratio is None else
                                 ratio >= TRANSFER_RATIO and (p is None or p >= ALPHA or ratio > 1.0))
        out[target] = found
    return out


def _mean(values) -> float | None:
    values = [v for v in values or () if v is not None]
    return statistics.mean(values) if values else None


def _cell_text(cell: dict | None, own: bool) -> str:
    if not cell:
        return "-"
    text = ratio_text(cell["vs_default"])
    if cell.get("machines_apart"):   # rounds resumed on a day of another machine speed
        text += " (its rounds ran on machines of different speeds)"
    failed = sum(v is None for v in cell["values"])
    if failed:   # a failed run leaves its round's pair out
        text += f" ({failed} of {len(cell['values'])} runs failed)"
    if cell.get("unsettled"):   # warm-ups that ended at their time cap: more work behind those runs' measurement
        text += f" ({cell['unsettled']} of {len(cell['values'])} warm-ups reached no plateau)"
    if cell["vs_default"].get("p_value") is not None:
        text += f", p {cell['vs_default']['p_value']:.3f}"
    if not own and cell.get("vs_own", {}).get("mean_ratio") is not None:
        vs = cell["vs_own"]
        text += f"; x{vs['mean_ratio']:.3f} of own" + (f" (p {vs['p']:.3f})" if vs.get("p") is not None else "")
        text += {True: ": transfers", False: ": does not transfer", None: ""}[cell.get("transfers")]
        if cell.get("transfers") is not None and vs.get("p") is None:
            text += " (by its ratio: the own best ran in other rounds)"
    costs = [f"{cell['cpu_us_per_op']:.0f} us CPU/op" if cell.get("cpu_us_per_op") is not None else None,
             f"{cell['io_per_op']:.2f} I/Os/op" if cell.get("io_per_op") is not None else
             f"{cell['bytes_per_op'] / 1e3:.1f} KB read/op" if cell.get("bytes_per_op") is not None else None]
    costs = ", ".join(c for c in costs if c)
    limit = cell.get("bottleneck") or {}
    limit = (f"; {limit['line']} ({limit.get('of')} of {limit.get('trials')} runs)" if isinstance(limit, dict)
             and limit.get("line") else "")
    return text + (f" ({costs})" if costs else "") + limit


def picture(scenario: str, found: dict[str, dict[str, dict]]) -> Path | None:
    """The matrix as a heat map of the verdict's figure: each best's throughput over the workload's own best (in the
    rounds they shared), coloured around the x0.95 the rule asks; each cell also says its gain over the default,
    which moves with the machine where the node's cores bind a best (its rows may have run on different days)."""
    names = list(WORKLOADS)
    def cell(target: str, source: str) -> dict:
        return found.get(target, {}).get(source) or {}

    over_default = [[cell(t, s).get("vs_default", {}).get("mean_speedup") for s in names] for t in names]
    over_own = [[1.0 if s == t and over_default[i][j] is not None else (cell(t, s).get("vs_own") or {}).get("mean_ratio")
                 for j, s in enumerate(names)] for i, t in enumerate(names)]
    if not any(v is not None for row in over_default for v in row):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import TwoSlopeNorm

    fig, ax = plt.subplots(figsize=(7.2, 5.6))
    shown = [[min(max(v, 0.5), 1.5) if v is not None else float("nan") for v in row] for row in over_own]
    image = ax.imshow(shown, cmap="RdYlGn", norm=TwoSlopeNorm(vmin=0.5, vcenter=TRANSFER_RATIO, vmax=1.5))
    ax.set_xticks(range(len(names)), [f"best of {n}" for n in names], rotation=30, ha="right")
    ax.set_yticks(range(len(names)), [f"on {n}" for n in names])
    for i in range(len(names)):
        for j in range(len(names)):
            own, gain = over_own[i][j], over_default[i][j]
            if gain is None:
                continue
            text = ("own best" if i == j else f"x{own:.2f} of own" if own is not None else "-") + f"\nx{gain:.2f} default"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label=f"throughput over the workload's own best (x{TRANSFER_RATIO}: the rule's edge)")
    ax.set_title(f"{scenario}: every best on every workload")
    fig.tight_layout()
    path = FOLDER / f"matrix-{scenario}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write(scenarios: list[str], budget: int, rounds: int, few: int) -> None:
    path = RESULTS / "workloads.md"
    lines = ["# What tuning finds on your workload, and whether a YCSB-tuned best carries over", "",
             "Generated by `python3 bench/transfer.py`: per scenario and workload, `nosqltune tune --scenario "
             f"SCENARIO WORKLOAD --knobs KNOBS {' '.join(STRATEGY)} --budget {tune_budget(budget)} --objective "
             f"throughput --study bench/results/transfer/SCENARIO.db --study-name WORKLOAD` ({budget} trials of "
             "search, then its confirmation's runs; the workloads: "
             + "; ".join(f"{w}: `{' '.join(a)}`" for w, a in WORKLOADS.items())
             + f"), then on each workload's study `nosqltune compare --candidates OWN-best.yaml,{YCSB}-best.yaml "
             f"--repeat {rounds} --metrics {METRICS} {' '.join(JIT)}` and `nosqltune compare --candidates OWN-best.yaml,OTHERS "
             f"--repeat {few} --metrics {METRICS} {' '.join(JIT)}`; `nosqltune report --study bench/results/transfer/SCENARIO.db` draws every study of a "
             "scenario. The strategy: GP with LlamaTune (8 dimensions), the first of "
             "strategies_v5.md's ranking; each scenario's searches search its knob set ("
             + ", ".join(f"{s}: {Path(k).name if '/' in k else k}" for s, k in KNOBS.items())
             + "). A best is the settings its confirmation "
             f"changed. A best transfers when it reaches x{TRANSFER_RATIO} of the workload's own best there and the "
             f"two are not significantly different over the rounds they share (p >= {ALPHA}), or it is better; in "
             f"the {few}-round cells, where the own best runs beside the other bests in the same rounds, the ratio alone "
             "decides. The searches ran at the studies' C1 JIT; their "
             "confirmations and every comparison ran tiered (`--jit tiered`), each run warmed up to the JIT's plateau "
             "(at least 120 s), as a node in production runs.", ""]
    lines += kept_notes(path, Path(__file__).name)
    ran = [s for s in scenarios if db_of(s).exists()]
    if not ran:
        path.write_text("\n".join(lines + ["Not run yet: `python3 bench/transfer.py --plan` says the machine time."])
                        + "\n")
        return
    studies = {f"{s}/{w}": (db_of(s), w) for s in ran for w in WORKLOADS if study_rows(db_of(s), w)}
    lines += [f"**Machines**: {machines(studies).line()}.", ""]
    out = {}
    for scenario in ran:
        found = cells(scenario)
        out[scenario] = found
        lines += [f"## {scenario}", "", "| on \\ best of | " + " | ".join(WORKLOADS) + " |",
                  "|---|" + "---|" * len(WORKLOADS)]
        for target in WORKLOADS:
            lines.append(f"| {target} | " + " | ".join(_cell_text(found.get(target, {}).get(s), s == target)
                                                        for s in WORKLOADS) + " |")
        drawn = picture(scenario, found)
        if drawn:
            lines += ["", f"![{scenario}](transfer/{drawn.name})"]
        bests = {w: _yaml(best_file(scenario, w)) for w in WORKLOADS if best_file(scenario, w).exists()}
        knobs = sorted({k for b in bests.values() for k in b})
        if knobs:   # each best's changed settings beside YCSB's ("-": the default)
            lines += ["", "What each best changed from the default:", "", "| setting | " + " | ".join(bests) + " |",
                      "|---|" + "---|" * len(bests)]
            lines += [f"| {k} | " + " | ".join(str(b.get(k, "-")) for b in bests.values()) + " |" for k in knobs]
        lines.append("")
        if scenario == "cloud-disk":
            own = found.get("timeseries", {}).get("timeseries")
            ycsb = found.get("timeseries", {}).get(YCSB)
            if not (own and ycsb):
                lines += ["**Goal** (time series on cloud-disk): not measured yet.", ""]
            else:   # from the 10 rounds both ran in, beside the default
                over_default = own["vs_default"]
                over_ycsb = paired(own["values"], ycsb["values"], maximize=True)
                met = ((over_default.get("mean_speedup") or 0) >= GOAL_OVER_DEFAULT
                       and (over_default.get("p_value") or 1) < ALPHA
                       and (over_ycsb["mean_ratio"] or 0) >= GOAL_OVER_YCSB and (over_ycsb["p"] or 1) < ALPHA)
                lines += [f"**Goal** (time series on cloud-disk: own best x{GOAL_OVER_DEFAULT} over the default and "
                          f"x{GOAL_OVER_YCSB} over YCSB's best, both p < {ALPHA}): "
                          f"{'met' if met else 'missed'}: own best {ratio_text(over_default)}"
                          + (f" (p {over_default['p_value']:.3f})" if over_default.get("p_value") is not None else "")
                          + (f", x{over_ycsb['mean_ratio']:.3f} over YCSB's best (p {over_ycsb['p']:.3f})"
                             if over_ycsb["mean_ratio"] and over_ycsb["p"] is not None else ""), ""]
    path.write_text("\n".join(lines) + "\n")
    (FOLDER / "matrix.json").write_text(json.dumps(out, indent=1, default=str) + "\n")
    log(f"wrote {path}")


def _yaml(path: Path) -> dict:
    import yaml

    return yaml.safe_load(path.read_text()) or {}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--budget", type=int, default=60, help="trials of each search; its confirmation runs beside")
    p.add_argument("--rounds", type=int, default=10, help="rounds of a workload's own best and YCSB's best on it")
    p.add_argument("--few", type=int, default=3, help="rounds of the other profiles' bests")
    p.add_argument("--plan", action="store_true", help="print the machine time only")
    p.add_argument("--write-only", action="store_true")
    stop_at_option(p, "and write the page")
    a = p.parse_args()
    scenarios = [s for s in a.scenarios.split(",") if s]
    unknown = [s for s in scenarios if s not in MEASURED]
    if unknown:
        raise SystemExit(f"unknown scenario {unknown[0]!r}: {', '.join(SCENARIOS)}")
    sys.path.insert(0, str(ROOT / "src"))
    plan(scenarios, a.budget, a.rounds, a.few)
    if a.plan:
        return 0
    FOLDER.mkdir(parents=True, exist_ok=True)
    if not a.write_only:
        until(a.stop_at, lambda: [db_of(s) for s in scenarios], lambda: run(scenarios, a.budget, a.rounds, a.few))
    write(scenarios, a.budget, a.rounds, a.few)
    return 0


if __name__ == "__main__":
    sys.exit(main())
