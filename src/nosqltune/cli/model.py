"""`nosqltune model fit|report`: surrogate models of a study's trials, and their accuracy."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import UsageError
from .collect import _say
from .options import domain_flags, domain_of


# ---------------------------------------------------------------------------------------------- models
def _default_model_dir(study: str, metric: str, kind: str):
    from .options import study_path as _store_path

    path = _store_path(study)
    return path.parent / f"{path.stem}.{metric}.{kind}.model"


def cmd_model_fit(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..objective import check_metric
    from ..surrogate.features import load_table
    from ..surrogate.models import save
    from ..surrogate.pipeline import fit


    metric = check_metric(args.target, "target")
    table = load_table(args.study, args.study_name, **domain_of(args))
    model, meta = fit(table, args.kind, metric, seed=args.seed)
    meta["study"] = args.study
    out = Path(args.out) if args.out else _default_model_dir(args.study, metric, args.kind)
    save(out, model, meta)
    if args.json:
        print(json.dumps({"model": str(out), **meta}, default=str))
    else:
        t = meta["training"]
        print(f"{args.kind} model of {metric} ({describe_domain(table.spec)}) fitted on {meta['trials']} trials "
              f"in {meta['fit_seconds']:.1f} s "
              f"(training error: MAPE {t['mape']:.2f}%, R2 {t['r2']:.3f}); saved to {out}")
        if meta["noise"]["cv"] is not None:
            print(f"measurement noise of the data: CV {meta['noise']['cv'] * 100:.1f}% "
                  f"({meta['noise']['groups']} repeated configurations)")
        print(f"accuracy on unseen configurations and workloads: nosqltune model report --study {args.study}")
    return 0


def _parse_sizes(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--sizes expects a list of training-set sizes like 25,50,100,200, got {text!r}") from None
    if any(s < 5 for s in sizes):
        raise UsageError("--sizes: every training-set size must be at least 5")
    return sizes


def cmd_model_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..objective import check_metric
    from ..surrogate.accuracy import evaluate, learning_curve
    from ..surrogate.features import load_table
    from ..surrogate.models import KINDS
    from ..surrogate.pipeline import noise

    metric = check_metric(args.target, "target")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise UsageError(f"--kinds: unknown model kind {', '.join(unknown) or '(none)'}; use {', '.join(KINDS)}")
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    sizes = _parse_sizes(args.sizes)

    table = load_table(args.study, args.study_name, **domain_of(args))
    say = _say(args)
    rows = []
    for kind in kinds:
        for split in ("configs", "workloads"):
            if split == "workloads" and len(set(table.workloads)) < 2:
                continue
            say(f"{kind}: unseen {split}")
            rows.append(evaluate(table, kind, metric, split, repeats=args.repeats, seed=args.seed))
    curve = []
    for kind in kinds:
        usable = [s for s in sizes if s < 0.8 * len(table.X)]
        if usable:
            say(f"{kind}: error versus training-set size {usable}")
            curve += learning_curve(table, kind, metric, usable, repeats=args.repeats, seed=args.seed)
    result = {"study": args.study, "metric": metric, "domain": table.spec.domain, "scope": table.spec.scope,
              "features": len(table.spec.names()), "trials": len(table.X), "noise": noise(table, metric),
              "accuracy": rows, "learning_curve": curve}
    text = format_accuracy(result)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "accuracy.json").write_text(json.dumps(result, indent=2) + "\n")
        (out / "accuracy.md").write_text(text + "\n")
        if curve:
            learning_chart(curve, out / "learning_curve.png", metric)
    print(json.dumps(result) if args.json else text)
    return 0


def format_accuracy(result: dict[str, Any]) -> str:
    lines = [f"Surrogate accuracy for {result['metric']} ({result['trials']} trials, tuning domain "
             f"{result.get('domain', 'TD1')}{_scope_text(result.get('scope'))}; measurement noise CV "
             + (f"{result['noise']['cv'] * 100:.1f}%" if result["noise"]["cv"] is not None else "unknown") + ")", "",
             "| model | unseen | MAPE % | R2 | RMSE | train / test | splits |", "|---|---|---|---|---|---|---|"]
    for r in result["accuracy"]:
        lines.append(f"| {r['kind']} | {r['split']} | {r['mape']:.2f} ± {r['mape_sd']:.2f} | {r['r2']:.3f} | "
                     f"{r['rmse']:.4g} | {r['train']:.0f} / {r['test']:.0f} | {r['splits']} |")
    if result["learning_curve"]:
        lines += ["", "Error on unseen configurations versus training-set size:", "",
                  "| model | training trials | MAPE % | R2 |", "|---|---|---|---|"]
        for r in result["learning_curve"]:
            lines.append(f"| {r['kind']} | {r['train']:.0f} | {r['mape']:.2f} ± {r['mape_sd']:.2f} | {r['r2']:.3f} |")
    return "\n".join(lines)


def _scope_text(scope: dict[str, Any] | None) -> str:
    parts = []
    if scope and "workload" in scope:
        parts.append(f"workload {scope['workload']}")
    if scope and "design" in scope:
        parts.append(f"{scope['design']['nodes']} node(s), RF {scope['design']['replication_factor']}")
    return f" ({', '.join(parts)})" if parts else ""


def describe_domain(spec) -> str:
    return f"tuning domain {spec.domain}{_scope_text(spec.scope)}, {len(spec.names())} features"


def learning_chart(curve: list[dict], path, metric: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for kind in dict.fromkeys(r["kind"] for r in curve):
        pts = [r for r in curve if r["kind"] == kind]
        ax.errorbar([r["train"] for r in pts], [r["mape"] for r in pts], yerr=[r["mape_sd"] for r in pts],
                    marker="o", capsize=3, label=kind)
    ax.set_xlabel("training trials")
    ax.set_ylabel(f"MAPE of {metric} on unseen configurations (%)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _no_action(args: argparse.Namespace) -> int:
    raise UsageError("model needs an action: fit or report (`nosqltune model --help` says what each does)")


def add_parsers(sub) -> None:
    p = sub.add_parser("model", help="surrogate models: fit one to a study, report accuracy",
                       description="Surrogate models of performance = f(workload, knobs) learned from stored trials.")
    p.set_defaults(func=_no_action)
    msub = p.add_subparsers(dest="model_command", metavar="ACTION")
    m = msub.add_parser("fit", help="fit a model to a study's trials and save it",
                        description="Fit a surrogate (nn-ensemble: RAFIKI's ensemble of small neural nets; rf / gbdt: "
                                    "random forest / gradient-boosted trees tuned by grouped cross-validation) to "
                                    "the complete trials of a collection or tuning study, and save it.")
    m.add_argument("--study", required=True, metavar="PATH", help="trial store with a collection or tuning study")
    m.add_argument("--study-name", help="study within the store (default: the collection)")
    m.add_argument("--kind", choices=["nn-ensemble", "rf", "gbdt"], default="nn-ensemble", help="model (nn-ensemble)")
    m.add_argument("--target", default="throughput", metavar="METRIC",
                   help="throughput or a latency such as p99-read, avg-all (default throughput)")
    m.add_argument("--out", metavar="DIR", help="model directory (default <study>.<target>.<kind>.model next to it)")
    m.add_argument("--seed", type=int, default=0)
    domain_flags(m)
    m.add_argument("--json", action="store_true", help="print JSON")
    m.set_defaults(func=cmd_model_fit)
    m = msub.add_parser("report", help="accuracy on unseen configurations and workloads, error vs training size",
                        description="Grouped splits (no configuration, or no workload, of the test side in "
                                    "training), repeated: MAPE, R2 and RMSE per model kind, and the error on "
                                    "unseen configurations versus the number of training trials.")
    m.add_argument("--study", required=True, metavar="PATH")
    m.add_argument("--study-name")
    m.add_argument("--kinds", default="nn-ensemble,rf,gbdt", metavar="LIST", help="models to compare (all three)")
    m.add_argument("--target", default="throughput", metavar="METRIC", help="metric (default throughput)")
    m.add_argument("--repeats", type=int, default=5, metavar="N", help="random splits per figure (default 5)")
    m.add_argument("--sizes", default="", metavar="LIST", help="training-set sizes for the learning curve, "
                   "e.g. 25,50,100,200 (default: none)")
    m.add_argument("--out", metavar="DIR", help="also write accuracy.md/.json and learning_curve.png here")
    m.add_argument("--seed", type=int, default=0)
    domain_flags(m)
    m.add_argument("--json", action="store_true", help="print JSON")
    m.set_defaults(func=cmd_model_report)
