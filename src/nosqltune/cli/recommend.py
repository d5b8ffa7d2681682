"""`nosqltune recommend`: a configuration for a workload from a fitted model, without a trial."""

from __future__ import annotations

import argparse
import json

from ..errors import UsageError
from ..objective import metric_unit
from ..tuning.results import yaml_fragment


# ---------------------------------------------------------------------------------------------- recommend
def cmd_recommend(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from ..workloads.spec import make_workload
    from ..surrogate.features import workload_features
    from ..surrogate.models import load
    from ..surrogate.pipeline import Surrogate
    from ..surrogate.search import METHODS

    started = time.perf_counter()
    if args.search not in METHODS:
        raise UsageError(f"--search must be one of {', '.join(METHODS)}")
    model, meta = load(Path(args.model))
    surrogate = Surrogate(model, meta)
    scope = surrogate.spec.scope
    if not surrogate.spec.has_workload:   # TD2/TD4: the model knows one workload, which it does not see as input
        if args.workload is not None:
            asked = workload_features(make_workload(args.workload, distribution=args.distribution).to_dict())
            if abs(asked["read_ratio"] - scope["read_ratio"]) > 1e-9:
                raise UsageError(f"the model ({surrogate.spec.domain}) was fitted on workload {scope['workload']} "
                                 f"(read ratio {scope['read_ratio']:g}) only; leave out --workload")
        workload = make_workload(read_ratio=scope["read_ratio"], distribution=scope.get("distribution"))
        workload.name = scope["workload"]
    else:
        workload = make_workload(args.workload or "ycsb-a", distribution=args.distribution)
    features = workload_features(workload.to_dict())
    if features["distribution"] not in surrogate.spec.distributions:
        raise UsageError(f"the model knows the distributions {', '.join(surrogate.spec.distributions)}, "
                         f"not {features['distribution']}")
    rec = surrogate.recommend(features, args.search, seed=args.seed)
    seconds = time.perf_counter() - started
    changed = {k: v for k, v in rec.config.items() if v != surrogate.space.default()[k]}
    result = {"model": args.model, "kind": meta["kind"], "metric": meta["metric"], "workload": workload.name,
              "read_ratio": features["read_ratio"], "search": rec.search, "config": rec.config, "changed": changed,
              "predicted": rec.predicted, "predicted_default": rec.predicted_default,
              "predicted_gain": rec.predicted_gain, "evaluations": rec.evaluations,
              "search_seconds": rec.search_seconds, "seconds": seconds}
    if args.format == "json":
        print(json.dumps(result, default=str))
    elif args.format == "yaml":
        print(yaml_fragment(surrogate.space, rec.config, surrogate.spec.fixed,
                            f"nosqltune recommend: {meta['kind']} model of {meta['metric']}, {workload.name}, "
                            f"predicted {rec.predicted:.4g} vs default {rec.predicted_default:.4g}"), end="")
    else:
        unit = metric_unit(meta["metric"])
        print(f"{workload.name} (read ratio {features['read_ratio']:g}): {meta['kind']} model of {meta['metric']}, "
              f"{rec.search} search ({rec.evaluations} evaluations, {rec.search_seconds:.3f} s; {seconds:.2f} s in all)")
        print(f"predicted {rec.predicted:.4g} {unit} vs default {rec.predicted_default:.4g} {unit} "
              f"(x{rec.predicted_gain:.3f})")
        for name, value in changed.items():
            print(f"  {name} = {value}   (default {surrogate.space.default()[name]})")
        if not changed:
            print("  the default is the best the model knows")
    return 0


def add_parsers(sub) -> None:
    from ..workloads.spec import DISTRIBUTIONS

    p = sub.add_parser("recommend", help="a configuration for a workload, from a fitted model (no trial)",
                       description="Search a fitted surrogate (genetic algorithm or simulated annealing) for the "
                                   "best configuration on a workload. Example: nosqltune recommend --model "
                                   "runs/train.throughput.nn-ensemble.model --workload read=0.7")
    p.add_argument("--model", required=True, metavar="DIR", help="directory written by `nosqltune model fit`")
    p.add_argument("--workload", default=None, metavar="NAME",
                   help="read=0.7, read70, ycsb-a..f or a properties file (default ycsb-a; for a model of tuning "
                        "domain TD2 or TD4, the one workload it was fitted on)")
    p.add_argument("--distribution", choices=DISTRIBUTIONS,
                   help="request distribution of the keys (the model must know it: those its collection ran)")
    p.add_argument("--search", default="ga", help="ga (genetic algorithm, RAFIKI) or anneal (simulated annealing, "
                   "as in the RF/GBDT tuning paper) (default ga)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=["table", "yaml", "json"], default="table", help="output format (table)")
    p.set_defaults(func=cmd_recommend)
