#!/usr/bin/env python3
"""Every strategy ranked on a recorded surrogate with a real landscape.

Target: `surrogate:DATASET` (default cloud13: real cold trials on cloud-disk, bench/surrogate_collect.py), a model
of the recorded trials answering with the noise measured in the dataset, and with the machine time a real trial
took there (surrogate/trial_time.py: a trial's time at its throughput, a build the first time a data shape is asked
for). Each strategy runs `nosqltune tune` with --budget trials, its confirmation included (3 candidates x 3 rounds
beside the default), over --seeds seeds, at read ratio --read. Quality after t trials: the noise-free model value
of the incumbent (the best single run so far) over the default's; the result of a run: the noise-free value of its
*confirmed* best. Machine time: the recorded machine's seconds per trial plus the optimizer's own time between
trials, measured here. Reported: curves against trials and against machine hours (mean and 95% interval over the
seeds), the confirmed bests' quality with its interval, and the trials SMAC + LlamaTune and GP + LlamaTune need
for their mean incumbent to reach plain SMAC's confirmed quality at --budget (goal <= 20), with and without
`--denoise`.

Studies go to bench/results/strategies_v5/<dataset>-read<R>-budget<B>.db (one per strategy and seed; resumable:
run it again); writes bench/results/strategies_v5.{md,json,png}. CPU only, but its optimizer times are timings:
nothing else may run beside it.

    python3 bench/strategies_v5.py                                  # cloud13, read 0.95, 10 seeds, 60 trials
    python3 bench/strategies_v5.py --dataset wide24 --read 0.9 --seeds 2 --budget 24 --strategies random,smac
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

from common import RESULTS, ROOT, kept_notes, log, nosqltune, study_settings  # bench/common.py

sys.path.insert(0, str(ROOT / "src"))
FOLDER = RESULTS / "strategies_v5"
LLAMATUNE = ("--space-adapter", "llamatune")
STRATEGIES = {   # name -> tune flags
    "random": ("--optimizer", "random"),
    "irace": ("--optimizer", "irace"),
    "gp": ("--optimizer", "gp"),
    "smac": ("--optimizer", "smac"),
    "rafiki": ("--optimizer", "rafiki"),
    "surrogate-sa": ("--optimizer", "surrogate-sa"),
    "smac+llamatune": ("--optimizer", "smac", *LLAMATUNE),
    "gp+llamatune": ("--optimizer", "gp", *LLAMATUNE),
}
DENOISED = ("smac", "smac+llamatune", "gp+llamatune")   # --denoise's question: does LlamaTune reach SMAC sooner


def study_name(strategy: str, seed: int, denoise: bool, dims: int) -> str:
    dimensions = f"-d{dims}" if "llamatune" in strategy else ""
    return f"{strategy}{dimensions}{'+denoise' if denoise else ''}-s{seed}"


def recorded_distribution(dataset: str) -> str:
    """The request distribution the dataset's trials ran (cloud13: uniform, as cloud-disk); the surrogate refuses
    another."""
    from nosqltune.surrogate.datafile import resolve
    from nosqltune.surrogate.features import load_table

    return load_table(str(resolve(dataset))).spec.distributions[0]


def run(db: Path, strategy: str, seed: int, denoise: bool, a: argparse.Namespace) -> None:
    name = study_name(strategy, seed, denoise, a.llamatune_dims)
    settings = study_settings(db, name)
    if settings and settings.get("confirm"):
        return
    common = ["--study", str(db), "--study-name", name, "--json"]
    if settings is not None:
        nosqltune("tune", "--resume", *common)
        return
    dims = ["--llamatune-dims", str(a.llamatune_dims)] if "llamatune" in strategy else []
    nosqltune("tune", "--system", f"surrogate:{a.dataset}", "--read-ratio", f"{a.read:g}", "--distribution",
              a.distribution, *STRATEGIES[strategy],
              *dims, *(["--denoise"] if denoise else []), "--budget", str(a.budget), "--seed", str(seed), *common)


def analyse(db: Path, strategy: str, seed: int, denoise: bool, a: argparse.Namespace, targets: dict) -> dict | None:
    """One run: the incumbent's noise-free quality per search trial, the machine hours at each trial (None
    without a trial clock), and the confirmed best's quality (the incumbent's, labelled `unconfirmed`, where the
    confirmation ranked nothing)."""
    from nosqltune.store import open_store
    from nosqltune.surrogate.dataset import SurrogateTarget
    from nosqltune.workloads.spec import make_workload

    name = study_name(strategy, seed, denoise, a.llamatune_dims)
    settings = study_settings(db, name)
    if not settings or not settings.get("confirm"):
        return None
    if seed not in targets:   # the model the run answered from: the tune's seed seeds the target
        targets[seed] = SurrogateTarget(a.dataset, seed=seed)
    target, workload = targets[seed], make_workload(read_ratio=a.read, distribution=a.distribution).to_dict()
    default = target.predict("throughput", target.space.default(), workload)
    store = open_store(str(db))
    try:
        study = store.find_study(name)
        rows = [r for r in store.trials(study["id"]) if r["state"] == "COMPLETE"]
    finally:
        store.close()
    timed = target.clock() is not None
    curve, hours, machine, best, quality, incumbent, built = [], [], 0.0, None, None, None, set()
    for row in rows:
        timings, shape = row.get("timings") or {}, repr(target.space.dataset_shape(row["config"]))
        # the recorded machine's seconds, a build charged once per study (a resumed process charges again), and
        # the optimizer's own time for the suggestion (ask_s, measured here)
        again = (timings.get("dataset_build_s") or 0.0) if shape in built else 0.0
        built.add(shape)
        machine += (timings.get("total_s") or 0.0) - again + (((row.get("meta") or {}).get("opt") or {}).get("ask_s")
                                                               or 0.0)
        if row["tag"] != "tune":
            continue
        measured = row["metrics"]["summary"]["throughput_ops_s"]
        if best is None or measured > best:
            best, incumbent = measured, row["config"]
            quality = target.predict("throughput", incumbent, workload) / default
        curve.append(quality)
        hours.append(machine / 3600 if timed else None)
    confirm = settings["confirm"]
    label = confirm.get("best")
    config = (confirm.get("candidates") or {}).get(label, {}).get("config") if label else incumbent
    return {"curve": curve, "hours": hours, "machine_h": machine / 3600 if timed else None,
            "confirmed": target.predict("throughput", config or {}, workload) / default,
            "confirmed_label": label or "unconfirmed", "search_trials": len(curve)}


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and a 95% t interval over the seeds."""
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, m, m
    from scipy import stats

    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return m, m - half, m + half


def trials_to_reach(curve: list[float], level: float) -> int | None:
    return next((i + 1 for i, v in enumerate(curve) if v is not None and v >= level - 1e-12), None)


def summarize(runs: dict) -> dict:
    out = {}
    for key, by_seed in runs.items():
        done = [r for r in by_seed.values() if r]
        if not done:
            continue
        length = max(len(r["curve"]) for r in done)   # a run that stopped early keeps its incumbent
        held = lambda values, t: values[min(t, len(values) - 1)]  # noqa: E731
        curve = [interval([held(r["curve"], t) or 1.0 for r in done]) for t in range(length)]
        timed = all(r["machine_h"] is not None for r in done)
        out[key] = {"seeds": len(done), "confirmed": interval([r["confirmed"] for r in done]),
                    "machine_h": interval([r["machine_h"] for r in done]) if timed else None, "curve": curve,
                    "hours": [statistics.fmean(held(r["hours"], t) for r in done) for t in range(length)] if timed
                    else None,
                    "default_confirmed": sum(1 for r in done if r["confirmed_label"] == "default"),
                    "unconfirmed": sum(1 for r in done if r["confirmed_label"] == "unconfirmed")}
    for suffix in ("", "+denoise"):
        smac = out.get(f"smac{suffix}")
        if not smac:
            continue
        for key in (f"smac+llamatune{suffix}", f"gp+llamatune{suffix}", f"smac{suffix}"):
            if key in out:
                out[key]["trials_to_smac"] = trials_to_reach([c[0] for c in out[key]["curve"]], smac["confirmed"][0])
    return out


def figure(summary: dict, a: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = all(s["hours"] for s in summary.values())
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(12 if timed else 7, 4.5), sharey=True, squeeze=False)
    axes = axes[0]
    for key, s in summary.items():
        if "+denoise" in key:
            continue
        mean = [c[0] for c in s["curve"]]
        lo, hi = [c[1] for c in s["curve"]], [c[2] for c in s["curve"]]
        x = range(1, len(mean) + 1)
        line, = axes[0].plot(x, mean, label=key)
        axes[0].fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
        if timed:
            axes[1].plot(s["hours"], mean, color=line.get_color(), label=key)
    axes[0].set_xlabel("search trials")
    if timed:
        axes[1].set_xlabel("machine hours on the recording machine (optimizer time included)")
    axes[0].set_ylabel("incumbent throughput / default (noise-free)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"surrogate:{a.dataset}, read ratio {a.read:g}: mean and 95% interval over the seeds", fontsize=10)
    fig.tight_layout()
    fig.savefig(RESULTS / "strategies_v5.png", dpi=110)
    plt.close(fig)


def write(report: dict, a: argparse.Namespace) -> None:
    summary = report["summary"]
    figure(summary, a)
    path = RESULTS / "strategies_v5.md"
    clock = report.get("clock")
    lines = ["# Every strategy on a recorded real landscape", "",
             f"Generated by `python3 bench/strategies_v5.py --dataset {a.dataset} --read {a.read:g} --seeds {a.seeds} "
             f"--budget {a.budget}`. Target `surrogate:{a.dataset}` (a random forest of the recorded real cold "
             "trials, answering with the dataset's measured noise). Each run: `nosqltune tune --budget "
             f"{a.budget}`, its confirmation (3 candidates x 3 rounds beside the default) included. Quality: the "
             "noise-free model value over the default's; 95% t intervals over the seeds.", ""]
    lines += kept_notes(path, Path(__file__).name)
    if clock:
        lines += [f"Machine time per trial, fitted to the dataset's recorded timings: {clock['fixed_s']:.0f} s + "
                  f"{clock['per_op_s']:,.0f} operations / throughput (at most {clock['longest_s']:.0f} s), plus a "
                  f"build of {clock['build_s']:.0f} s (median; {clock['shapes_recorded']} data shapes recorded) the "
                  "first time a data shape is asked for.", ""]
    if report.get("ceiling"):
        lines += [f"What there is to find: a large search of the models finds x{report['ceiling']:.3f} of the "
                  "default (mean over the seeds' models).", ""]
    lines += ["| strategy | seeds | after 10 | after 20 | after 30 | confirmed best (mean, 95% CI) | default kept "
              "| machine h per run | trials to SMAC's confirmed |", "|---|---|---|---|---|---|---|---|---|"]
    for key, s in summary.items():
        at = lambda t: f"{s['curve'][t - 1][0]:.3f}" if len(s["curve"]) >= t else "-"  # noqa: E731
        m, lo, hi = s["confirmed"]
        reach = s.get("trials_to_smac", "-") if "llamatune" in key or key.startswith("smac") else "-"
        lines.append(f"| {key} | {s['seeds']} | {at(10)} | {at(20)} | {at(30)} | x{m:.3f} [{lo:.3f}, {hi:.3f}] | "
                     f"{s['default_confirmed']} | {'-' if s['machine_h'] is None else '%.2f' % s['machine_h'][0]} | "
                     f"{'not reached' if reach is None else reach} |")
    lines += ["", "![curves](strategies_v5.png)", ""]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cloud13")
    p.add_argument("--read", type=float, default=0.95, help="read ratio of the runs (one of the dataset's)")
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--budget", type=int, default=60)
    p.add_argument("--llamatune-dims", type=int, default=8,
                   help="LlamaTune's synthetic dimensions (default 8: about two thirds of cloud13's 13 knobs)")
    p.add_argument("--no-denoise", action="store_true", help="skip the --denoise runs")
    p.add_argument("--write-only", action="store_true")
    a = p.parse_args()
    strategies = [s for s in a.strategies.split(",") if s]
    unknown = [s for s in strategies if s not in STRATEGIES]
    if unknown:
        p.error(f"unknown strategies {', '.join(unknown)}: use {', '.join(STRATEGIES)}")
    if a.budget < 24:   # below it tune confirms nothing (confirmation.py: 2 x (3 + 1) x 3 trials)
        p.error("--budget must be at least 24: the confirmation's 12 trials are at most half of it")
    a.distribution = recorded_distribution(a.dataset)
    FOLDER.mkdir(parents=True, exist_ok=True)
    db = FOLDER / f"{a.dataset}-read{a.read:g}-budget{a.budget}.db"
    plan = [(s, seed, False) for seed in range(a.seeds) for s in strategies]
    if not a.no_denoise:
        plan += [(s, seed, True) for seed in range(a.seeds) for s in strategies if s in DENOISED]
    out_json = RESULTS / "strategies_v5.json"
    everything = json.loads(out_json.read_text()) if out_json.exists() else {}
    report = everything.setdefault(f"{a.dataset}-read{a.read:g}-budget{a.budget}", {})
    targets: dict = {}
    for strategy, seed, denoise in plan:
        if not a.write_only:
            run(db, strategy, seed, denoise, a)
        key = strategy + ("+denoise" if denoise else "")
        report.setdefault("runs", {}).setdefault(key, {})[str(seed)] = analyse(db, strategy, seed, denoise, a, targets)
        report["summary"] = summarize(report["runs"])
        out_json.write_text(json.dumps(everything, indent=1) + "\n")
    if targets:
        from llamatune_surrogate import ceiling   # bench/llamatune_surrogate.py: the GA over the model

        clock = next(iter(targets.values())).clock()
        report["clock"] = clock.describe() if clock else None
        if "ceiling" not in report:
            report["ceiling"] = statistics.fmean(ceiling(t, a.read) for t in targets.values())
    out_json.write_text(json.dumps(everything, indent=1) + "\n")
    write(report, a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
