"""`nosqltune knobs`: a datastore's knob space."""

from __future__ import annotations

import argparse
import json
from .text import text_table


def cmd_knobs(args: argparse.Namespace) -> int:
    from ..knobs import load_space

    space = load_space(args.system)
    if args.set:
        space = space.subset(args.set)
    knobs = list(space)
    if args.json:
        print(json.dumps([{"name": k.name, "type": k.type, "range": k.range, "choices": k.choices,
                           "default": k.default, "default_rule": k.default_rule, "unit": k.unit, "log": k.log,
                           "applies": k.applies, "key": k.key, "reload": k.reload, "live": k.live,
                           "condition": k.condition, "special": list(k.special), "best_practice": k.best_practice,
                           "description": k.description} for k in knobs]))
        return 0
    print(f"{space.system} {space.version} knob space: {len(knobs)} knobs"
          + (f" (set {args.set})" if args.set else f"; sets: {', '.join(space.knob_sets)}"))
    table = [["knob", "type", "range / choices", "default", "applies", "live", "meaning"]]
    for k in knobs:
        if k.type == "bool":
            rng = "{true, false}"
        elif k.range:
            rng = f"[{k.range[0]}, {k.range[1]}]"
        else:
            rng = "{" + ", ".join(map(str, k.choices or ())) + "}"
        unit = f" {k.unit}" if k.unit else ""
        table.append([k.name, k.type + (" log" if k.log else ""), rng + unit, str(k.default) + unit,
                      k.applies + (" reload" if k.reload else ""), "yes" if k.live else "-", k.description])
    print(text_table(table, free_last=True))
    rules = [rule for rule in space.rules if set(rule.knobs) & set(space.knobs)]
    if rules:
        print("rules every configuration keeps (docs/knob_rules.md):")
        for rule in rules:
            when = f" (when {', '.join(rule.when_set)} is set)" if rule.when_set else ""
            print(f"  {rule.name}: {rule.text}{when}")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("knobs", help="list a datastore's knob space", description="List the knob space: name, "
                       "type, range, default of the version in use, where it applies, meaning.")
    p.add_argument("system", nargs="?", default="cassandra", help="datastore (default cassandra)")
    p.add_argument("--set", help="only the knobs of a named set (e.g. irace23) or a YAML file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_knobs)
