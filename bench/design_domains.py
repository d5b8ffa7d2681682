#!/usr/bin/env python3
"""Surrogate accuracy per tuning domain (the RF/GBDT tuning paper's Table 3 and Figure 3): does a model that sees
the physical design and the workload (TD1) predict worse than one that holds them fixed (TD2-TD4)?

1. `nosqltune collect` over bench/design_domains.yaml: the RF/GBDT paper's seven knobs plus node count (1-2) and
   replication factor (1-2) as knobs, so every configuration runs on its own design; read ratios 0.1, 0.5,
   0.9; 20K records, 20K measured operations, 16 threads, 1 GiB heap per node; the default repeated per
   read ratio (the noise). Resumable.
2. `nosqltune model report --domain TD1..TD4` for rf and gbdt: error (MAPE) on unseen configurations with all
   the trials of the domain, and with the same number of training trials in every domain (--size), the
   comparison the RF/GBDT paper's Figure 3 makes. TD2/TD4 keep the trials of --workload, TD3/TD4 those of --design.

Writes bench/results/design_domains.{md,json}; the study is bench/results/surrogate/design-domains.db.
All nodes and the client share the machine's 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import RESULTS, ROOT, log, nosqltune  # bench/common.py

STUDY = RESULTS / "surrogate" / "design-domains.db"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", type=int, default=60)
    p.add_argument("--read-ratios", default="0.1,0.5,0.9")
    p.add_argument("--noise-repeats", type=int, default=2)
    p.add_argument("--workload", default="read50-zipfian", help="the workload TD2 and TD4 keep")
    p.add_argument("--design", default="2x1", help="the design (NODESxRF) TD3 and TD4 keep")
    p.add_argument("--size", type=int, default=10, help="training trials in every domain for the like-for-like row")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--skip-collect", action="store_true", help="report on the trials stored so far")
    a = p.parse_args()
    STUDY.parent.mkdir(parents=True, exist_ok=True)
    if not a.skip_collect:
        nosqltune("collect", "--knobs", str(ROOT / "bench" / "design_domains.yaml"), "--read-ratios", a.read_ratios,
                  "--configs", str(a.configs), "--noise-repeats", str(a.noise_repeats), "--records", "20000",
                  "--operations", "20000", "--threads", "16", "--heap", "1G", "--study", str(STUDY), "--json",
                  ok=(0, 1))   # 1: some trials failed (stored as failed); the others count
    nodes, _, rf = a.design.partition("x")
    scope = {"TD1": [], "TD2": ["--workload", a.workload], "TD3": ["--nodes", nodes, "--rf", rf],
             "TD4": ["--workload", a.workload, "--nodes", nodes, "--rf", rf]}
    reports = {}
    for domain, flags in scope.items():
        log(f"{domain}: model report")
        reports[domain] = json.loads(nosqltune("model", "report", "--study", str(STUDY), "--kinds", "rf,gbdt",
                                               "--repeats", str(a.repeats), "--sizes", str(a.size),
                                               "--domain", domain, *flags, "--json"))
    write(reports, a)
    return 0


def write(reports: dict, a) -> None:
    (RESULTS / "design_domains.json").write_text(json.dumps({"settings": vars(a), "reports": reports}, indent=1)
                                                 + "\n")
    first = next(iter(reports.values()))
    noise = first["noise"]["cv"]
    lines = ["# Surrogate accuracy per tuning domain (the RF/GBDT tuning paper's Table 3, Figure 3)", "",
             f"Real cold trials: the RF/GBDT paper's seven knobs plus node count 1-2 and replication factor 1-2 as knobs, "
             f"read ratios {a.read_ratios}, 20K records, 20K operations, 16 threads, 1 GiB heap per node "
             f"(study bench/results/surrogate/design-domains.db). Measurement noise (repeated default): CV "
             + (f"{noise * 100:.1f}%" if noise is not None else "unknown") + ". "
             f"Error of throughput predictions on unseen configurations (MAPE, {a.repeats} grouped splits); "
             f"'at {a.size}' trains every domain on {a.size} trials, as the RF/GBDT paper's Figure 3 compares domains. "
             "TD2/TD4 keep the trials of one workload, TD3/TD4 those of one design.", "",
             "| domain | kept | trials | features | model | MAPE % (all trials) | MAPE % at "
             f"{a.size} trials |", "|---|---|---|---|---|---|---|"]
    for domain, r in reports.items():
        scope = r.get("scope") or {}
        kept = ", ".join(([scope["workload"]] if "workload" in scope else [])
                         + ([f"{scope['design']['nodes']} node(s) RF {scope['design']['replication_factor']}"]
                            if "design" in scope else [])) or "all"
        for acc in (x for x in r["accuracy"] if x["split"] == "configs"):
            at = next((c for c in r["learning_curve"] if c["kind"] == acc["kind"]), None)
            lines.append(f"| {domain} | {kept} | {r['trials']} | {r['features']} | {acc['kind']} | "
                         f"{acc['mape']:.1f} ± {acc['mape_sd']:.1f} | "
                         + (f"{at['mape']:.1f} ± {at['mape_sd']:.1f}" if at else "-") + " |")
    (RESULTS / "design_domains.md").write_text("\n".join(lines) + "\n")
    log("written bench/results/design_domains.md")


if __name__ == "__main__":
    sys.exit(main())
