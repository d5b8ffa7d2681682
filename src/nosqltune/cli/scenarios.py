"""`nosqltune scenarios`: the benchmark scenarios, what each sets and why."""

from __future__ import annotations

import argparse
import json
import textwrap


def cmd_scenarios(args: argparse.Namespace) -> int:
    from ..errors import UsageError
    from ..scenarios import scenario, scenarios
    from ..systems import TARGETS

    if args.system not in TARGETS:
        raise UsageError(f"unknown --system {args.system!r}: use {', '.join(TARGETS)}")
    chosen = [scenario(name, args.system) for name in ([args.name] if args.name else scenarios())]
    described = [s.describe() for s in chosen]
    if args.json:
        print(json.dumps(described))
        return 0
    for entry in described:
        sets = ", ".join(f"{k} {_text(v)}" for k, v in entry["sets"].items())
        print(f"{entry['name']}: {entry['summary']}")
        print(textwrap.fill(f"sets: {sets}", width=110, initial_indent="  ", subsequent_indent="    "))
        print(textwrap.fill(f"why: {entry['why']}", width=110, initial_indent="  ", subsequent_indent="    "))
        cal = entry["calibration"]
        goal = (f"  calibration goal: {cal['metric']} CV <= {cal['max_cv'] * 100:g}% over cold repeats of the "
                f"default, <= {cal['max_trial_s']:g} s per cold trial")
        print(textwrap.fill(goal + (f"; {cal['measured']}" if cal["measured"] else ""), width=110,
                            subsequent_indent="    "))
        here = cal.get("calibrated_here")
        if here:
            sizes = ", ".join(f"{k} {v}" for k, v in here["sizes"].items())
            figures = here.get("figures") or {}
            cv = f", {figures['metric']} CV {figures['cv'] * 100:.1f}%" if figures.get("cv") is not None else ""
            print(textwrap.fill(f"  calibrated on this machine {here.get('measured_at', '?')}: {sizes}{cv} "
                                f"(in {here['file']}; these sizes are the defaults here)", width=110,
                                subsequent_indent="    "))
        if entry["sources"]:
            print(f"  sources: {', '.join(entry['sources'])}")
    return 0


def _text(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def add_parsers(sub) -> None:
    p = sub.add_parser("scenarios", help="list the benchmark scenarios (--scenario NAME) and what each sets",
                       description="The benchmark scenarios a trial-running command takes with --scenario NAME: "
                                   "workload, data size, memory cap, measured-phase length, knob values and "
                                   "objective, each a default that the command's own flags override.")
    p.add_argument("name", nargs="?", help="one scenario (default: all)")
    p.add_argument("--system", default="cassandra", metavar="SYSTEM",
                   help="show the sizes calibrated on this machine for this datastore (default cassandra)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_scenarios)
