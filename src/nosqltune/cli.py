"""The nosqltune command line: thin argument parsing over the harness (argparse: no extra dependency)."""

from __future__ import annotations

import argparse
import json
import statistics
import os
import re
import sys
from typing import Any

from . import __version__
from .errors import NosqltuneError, UsageError

DEFAULT_STUDY = ".nosqltune/study.db"
DEFAULT_JIT = "c1"


def _common(parser: argparse.ArgumentParser, *, repeat: int = 1, surrogate: bool = False) -> None:
    """The flags every trial-running command spells the same way."""
    w = parser.add_argument_group("workload")
    w.add_argument("--workload", metavar="NAME", default=None,
                   help="ycsb-a .. ycsb-f, readNN (e.g. read95: NN%% reads, rest updates), or a YCSB properties "
                        "file (default: ycsb-a)")
    w.add_argument("--read-ratio", type=float, metavar="R", help="custom mix: share of reads 0..1, rest updates")
    w.add_argument("--distribution", choices=["zipfian", "uniform", "latest"],
                   help="request distribution of the keys (default: the workload's, zipfian)")
    w.add_argument("--records", type=int, metavar="N", default=None, help="records loaded (default 100000)")
    w.add_argument("--operations", type=int, metavar="N", default=None,
                   help="measured operations (default 100000)")
    w.add_argument("--threads", type=int, metavar="N", default=None, help="client threads (default 16)")
    w.add_argument("--target", type=int, metavar="OPS", help="throttle the client to OPS operations/s")
    w.add_argument("--max-seconds", type=int, metavar="S",
                   help="end the measured phase after S seconds even if operations remain (YCSB's "
                        "maxexecutiontime): bounds the cost of a very slow configuration (default: no cap)")
    w.add_argument("--warmup-ops", type=int, metavar="N", default=None,
                   help="operations run and discarded before measuring, in the same client (default 20000)")
    w.add_argument("--warmup-max-seconds", type=int, metavar="S", default=60,
                   help="upper bound of the warm-up (default 60)")
    w.add_argument("--steady-window", type=int, metavar="S", default=0,
                   help="after --warmup-ops, keep warming until the last S one-second throughputs vary by at "
                        "most --steady-cv (default 0: off)")
    w.add_argument("--steady-cv", type=float, default=0.05, metavar="CV", help="steady-state threshold (0.05)")
    c = parser.add_argument_group("configuration")
    c.add_argument("--config", metavar="FILE", help="YAML file of knob overrides (knob: value)")
    c.add_argument("--set", metavar="KNOB=VALUE", action="append", default=[], dest="assignments",
                   help="override one knob (repeatable); wins over --config")
    c.add_argument("--force", action="store_true",
                   help="accept values outside the knob's tuning range (Cassandra still validates them)")
    h = parser.add_argument_group("harness")
    h.add_argument("--system", default=None, metavar="SYSTEM",
                   help="datastore: cassandra (default), redis (a local redis-server), or external (any datastore, "
                        "driven by the commands of --target-file)"
                        + ("; or surrogate:DATASET[:KIND] to answer trials from a model of a recorded dataset "
                           "(e.g. surrogate:wide24) with its measured noise: compare optimizers in seconds"
                           if surrogate else ""))
    h.add_argument("--target-file", metavar="YAML", help="--system external: how to configure, start, stop, check "
                   "and reset the datastore, one command per step (see README)")
    h.add_argument("--repeat", type=int, metavar="N", default=repeat, help=f"cold trials per configuration "
                                                                           f"(default {repeat})")
    h.add_argument("--study", metavar="PATH_OR_URL", default=DEFAULT_STUDY,
                   help=f"trial store: SQLite path or sqlite:///path (default {DEFAULT_STUDY})")
    h.add_argument("--study-name", default=None, help="study within the store (default: the command's name)")
    h.add_argument("--cassandra-version", default=None, help="Cassandra release from Maven (default 5.0.6)")
    h.add_argument("--heap", default=None, metavar="SIZE",
                   help="Cassandra heap per node, e.g. 2G or 1536M (default 2G; for a cluster whose nodes would not "
                        "all fit in memory with 2G each, the largest multiple of 256M that fits, at least 512M)")
    h.add_argument("--server-cpus", metavar="LIST", help="pin the datastore to these CPUs (taskset list, e.g. 0)")
    h.add_argument("--client-cpus", metavar="LIST", help="pin the YCSB client to these CPUs (e.g. 1)")
    h.add_argument("--restore", choices=["link", "copy", "reload"], default="link",
                   help="how each cold trial gets its data: link (default; hard-link immutable SSTable files, "
                        "copy the rest), copy, or reload (load afresh every trial)")
    h.add_argument("--jit", choices=["c1", "tiered"], default=DEFAULT_JIT,
                   help="JIT of both JVMs: c1 (compiled steady state within seconds; repeatable short trials) or "
                        f"tiered (the JVM default; about a minute of warm-up on 2 cores) (default {DEFAULT_JIT})")
    h.add_argument("--keep-nodes", action="store_true", help="keep each trial's node directory for inspection")
    h.add_argument("--nodes", type=int, default=1, metavar="N",
                   help="Cassandra: run each trial on a local cluster of N nodes (127.0.0.1..N) (default 1)")
    h.add_argument("--rf", type=int, default=None, metavar="N",
                   help="Cassandra: replication factor of the YCSB keyspace, set when the data is loaded (default 1)")
    h.add_argument("--consistency", default=None, metavar="CL",
                   help="Cassandra: consistency level of the client's reads and writes: ONE, TWO, THREE, QUORUM, "
                        "ALL (default ONE)")
    h.add_argument("--read-consistency", default=None, metavar="CL", help="Cassandra: reads only (wins over "
                   "--consistency)")
    h.add_argument("--write-consistency", default=None, metavar="CL", help="Cassandra: writes only")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")


def _heap_mb(text: str) -> int:
    value = text.strip().upper()
    try:
        if value.endswith("G"):
            mb = int(float(value[:-1]) * 1024)
        elif value.endswith("M"):
            mb = int(value[:-1])
        else:
            mb = int(value)
    except ValueError:
        raise UsageError(f"--heap expects a size like 2G or 1536M, got {text!r}") from None
    if mb < 16:  # below what a JVM can start with at all; above it, Cassandra itself says if it is enough
        raise UsageError(f"--heap {text} is too small for a JVM (2G recommended)")
    return mb


def trial_heap(args: argparse.Namespace, nodes: int) -> int:
    """The heap per node in MiB: --heap, checked against the memory of `nodes` nodes (the largest cluster of
    the run; one line and nothing started when they do not fit), or without --heap 2G, or for a cluster
    that would not fit with 2G the largest heap that does (refused below 512M)."""
    from .systems.cassandra.cluster import DEFAULT_HEAP_MB, check_fits, fitting_heap

    if args.heap is None:
        return fitting_heap(nodes, DEFAULT_HEAP_MB) if nodes > 1 else DEFAULT_HEAP_MB
    heap = _heap_mb(args.heap)
    if nodes > 1:
        check_fits(nodes, heap)
    return heap


def _positive(name: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise UsageError(f"--{name} must be a positive integer, got {value}")


def _build_workload(args: argparse.Namespace, **overrides: Any):
    from .workloads.spec import make_workload

    sizes = {"records": args.records, "operations": args.operations, "threads": args.threads,
             "target": args.target, "warmup_operations": args.warmup_ops,
             "warmup_max_seconds": args.warmup_max_seconds, "warmup_steady_window": args.steady_window,
             "warmup_steady_cv": args.steady_cv, "max_seconds": args.max_seconds}
    _positive("max-seconds", args.max_seconds)
    sizes.update(overrides)
    # flags win over sizes in a properties file, which win over Workload's (calibrated) defaults
    return make_workload(args.workload, read_ratio=args.read_ratio, distribution=args.distribution,
                         **{k: v for k, v in sizes.items() if v is not None})


def _overrides(args: argparse.Namespace, space) -> dict[str, Any]:
    from .knobs import load_overrides_file, parse_assignments

    raw: dict[str, Any] = {}
    if args.config:   # per_node: the harness's (_per_node)
        raw.update({k: v for k, v in load_overrides_file(args.config).items() if k != PER_NODE})
    raw.update(parse_assignments(args.assignments))
    return space.validate(raw, allow_outside_range=args.force)


PER_NODE = "per_node"


def _per_node(args: argparse.Namespace, system: str, nodes: int) -> dict[str, dict[str, Any]]:
    """The `per_node` entry of --config: {node number: {knob: value}}, cassandra.yaml knobs set on that node only
    (on top of the configuration all nodes get), checked against the knob space."""
    from .knobs import load_overrides_file, load_space

    if not getattr(args, "config", None):
        return {}
    entry = load_overrides_file(args.config).get(PER_NODE)
    if entry is None:
        return {}
    where = f"--config {args.config}: {PER_NODE}"
    if system != "cassandra":
        raise UsageError(f"{where} is for Cassandra clusters (--system cassandra --nodes N)")
    if not isinstance(entry, dict) or not entry:
        raise UsageError(f"{where} must map node numbers to knob values, e.g. {{2: {{concurrent_reads: 16}}}}")
    space = load_space("cassandra")
    out: dict[str, dict[str, Any]] = {}
    for number, knobs in entry.items():
        text = str(number).removeprefix("node")
        if not text.isdigit() or not 1 <= int(text) <= nodes:
            raise UsageError(f"{where}: node {number!r} is not one of the cluster's nodes 1..{nodes}")
        if not isinstance(knobs, dict) or not knobs:
            raise UsageError(f"{where}: node {number} needs a mapping of knob: value")
        typed = space.validate(knobs, allow_outside_range=args.force)
        for name in typed:
            knob = space[name]
            if knob.applies != "yaml" or knob.reload:
                raise UsageError(f"{where}: {name} applies to {'the loaded data' if knob.reload else knob.applies} "
                                 "(the whole cluster); per node only cassandra.yaml knobs")
        out[text] = typed
    return out


def _searched_space(args: argparse.Namespace, full_space, verb: str):
    """--knobs (the searched subset) and --set/--config (fixed values) checked together: (fixed, subset, space)."""
    from .optimizers.space import TuningSpace

    fixed = _overrides(args, full_space)
    subset = full_space.subset(args.knobs)
    clash = sorted(set(fixed) & set(subset.knobs))
    if clash:
        raise UsageError(f"{', '.join(clash)} is {verb}; it cannot also be fixed with --set/--config")
    try:
        return fixed, subset, TuningSpace(subset, fixed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _settings(args: argparse.Namespace):
    """The harness settings of the flags, the datastore (--system, --target-file) checked."""
    from .systems import TARGETS
    from .systems.cassandra.provision import DEFAULT_VERSION
    from .trial import TrialSettings

    _positive("repeat", args.repeat)
    system = args.system or "cassandra"
    if system.startswith("surrogate:") and args.command == "tune":
        system = "cassandra"   # tune's surrogate answers trials itself; its harness settings are the default
    if system not in TARGETS:
        raise UsageError(f"unknown --system {system!r}: use " + ", ".join(TARGETS)
                         + (" or surrogate:DATASET" if args.command == "tune" else ""))
    target_file = getattr(args, "target_file", None)
    if (system == "external") != bool(target_file):
        raise UsageError("--system external needs --target-file YAML" if system == "external"
                         else "--target-file goes with --system external")
    if target_file:
        from .systems.external.target import load_target

        target_file = str(load_target(target_file).path)   # checked now, stored absolute
    design = _design(args, system)
    most = parse_design(getattr(args, "design", None)).get("nodes", (0, design["nodes"]))[1]
    return TrialSettings(system=system, target_file=target_file,
                         cassandra_version=args.cassandra_version or DEFAULT_VERSION, heap_mb=trial_heap(args, most),
                         server_cpus=args.server_cpus, client_cpus=args.client_cpus, restore_mode=args.restore,
                         keep_node=args.keep_nodes, jit=args.jit, per_node=_per_node(args, system, most), **design)


CONSISTENCY_LEVELS = {"ONE": 1, "TWO": 2, "THREE": 3, "QUORUM": None, "ALL": None}


DESIGN_NAMES = {"nodes": "nodes", "rf": "replication_factor", "replication_factor": "replication_factor"}


def parse_design(text: str | None) -> dict[str, tuple[int, int]]:
    """--design 'nodes=2..4,rf=1..3' -> {'nodes': (2, 4), 'replication_factor': (1, 3)} (knob names)."""
    out: dict[str, tuple[int, int]] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, span = part.partition("=")
        match = re.fullmatch(r"\s*([0-9]+)\s*\.\.\s*([0-9]+)\s*", span)
        knob = DESIGN_NAMES.get(name.strip().lower())
        if not sep or knob is None or not match:
            raise UsageError(f"--design expects nodes=LO..HI and/or rf=LO..HI, comma-separated, got {part.strip()!r}")
        lo, hi = int(match.group(1)), int(match.group(2))
        if not 1 <= lo < hi:
            raise UsageError(f"--design {name.strip()}={lo}..{hi}: need 1 <= LO < HI (a single value: --nodes or --rf)")
        if knob in out:
            raise UsageError(f"--design names {name.strip()} twice")
        from .systems.cassandra.cluster import MAX_NODES

        if knob == "nodes" and hi > MAX_NODES:
            raise UsageError(f"--design nodes={lo}..{hi}: a local cluster has at most {MAX_NODES} nodes")
        out[knob] = (lo, hi)
    if text is not None and not out:
        raise UsageError("--design expects nodes=LO..HI and/or rf=LO..HI")
    return out


def _design(args: argparse.Namespace, system: str) -> dict[str, Any]:
    """--nodes, --rf, --design (tune) and the consistency levels, checked against each other. With --design,
    the harness's design is the range's smallest (the default design of the search)."""
    searched = parse_design(getattr(args, "design", None))
    if "nodes" in searched and args.nodes != 1:
        raise UsageError("--design searches nodes; --nodes cannot also set it")
    if "replication_factor" in searched and args.rf is not None:
        raise UsageError("--design searches rf; --rf cannot also set it")
    nodes = searched.get("nodes", (args.nodes,))[0]
    rf = searched.get("replication_factor", (args.rf if args.rf is not None else 1,))[0]
    read = (args.read_consistency or args.consistency or "ONE").upper()
    write = (args.write_consistency or args.consistency or "ONE").upper()
    given = (nodes != 1 or args.rf is not None or searched or args.consistency or args.read_consistency
             or args.write_consistency)
    if given and system != "cassandra":
        raise UsageError("--nodes, --rf, --design and the consistency levels are Cassandra's (--system cassandra)")
    if nodes < 1:
        raise UsageError(f"--nodes must be at least 1, got {nodes}")
    most = searched.get("nodes", (nodes, nodes))[1]
    if "replication_factor" not in searched and not 1 <= rf <= most:
        raise UsageError(f"--rf must be within 1..{most} (the number of nodes), got {rf}")
    for flag, level in (("read", read), ("write", write)):
        if level not in CONSISTENCY_LEVELS:
            raise UsageError(f"unknown {flag} consistency {level!r}: use {', '.join(CONSISTENCY_LEVELS)}")
        needed = CONSISTENCY_LEVELS[level]
        if needed and needed > min(rf, nodes):
            raise UsageError(f"{flag} consistency {level} needs {needed} replicas; the design has "
                             f"{min(rf, nodes)} (nodes {nodes}, replication factor {rf})")
    return {"nodes": nodes, "replication_factor": rf, "read_consistency": read, "write_consistency": write}


def trial_target(settings):
    """The target module of the settings' datastore (systems/<name>/trial.py)."""
    from .systems import target

    return target(settings.system)


def _progress(args: argparse.Namespace):
    """Progress lines on stderr (stdout carries the result); with --json, one JSON object per line."""
    as_json = getattr(args, "json", False)

    def say(message: str) -> None:
        if as_json:
            from .tuning.progress import progress_json

            print(progress_json(message), file=sys.stderr, flush=True)
        else:
            print(f"  {message}", file=sys.stderr, flush=True)
    return say


def _stats(values: list[float]) -> dict[str, float | None]:
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "sd": None, "cv": None, "n": 0}
    mean = statistics.mean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": mean, "sd": sd, "cv": sd / mean if mean else None, "n": len(values)}


def run_trials(args, space, overrides, workload, settings, *, tag: str, study_name: str) -> list[dict]:
    """Run `args.repeat` cold trials of one configuration, storing each; returns the stored rows."""
    from .store import TrialState, open_store
    from .trial import run_trial

    say = _progress(args)
    store = open_store(args.study)
    study_id = store.study(study_name, settings.system, {"harness": settings.to_dict()})
    env_id = store.environment(trial_target(settings).fingerprint(settings))
    rows = []
    try:
        for i in range(args.repeat):
            trial_id = store.start_trial(study_id, overrides, {**workload.to_dict(), "harness": settings.to_dict()},
                                         tag=tag, environment_id=env_id)
            say(f"[{tag}] trial {i + 1}/{args.repeat} (id {trial_id})")
            row = store.record(trial_id, lambda: run_trial(space, overrides, workload, settings, progress=say))
            rows.append(row)
            if row["state"] == TrialState.COMPLETE.value:
                say(f"  -> {row['metrics']['summary']['throughput_ops_s']:.0f} ops/s, {row['timings']['total_s']:.1f} s")
            else:
                say(f"  -> FAILED ({row['failure_kind']}): {row['error']}")
    finally:
        store.close()
    return rows


_TIMING_ROWS = [("data load s (once)", "dataset_build_s"), ("restore s", "restore_s"), ("boot s", "boot_s"), ("warm-up s", "warmup_s"),
                ("measure s", "measure_s"), ("stop s", "stop_s"), ("trial s", "total_s")]


def format_table(rows: list[dict]) -> str:
    """Metrics down, runs across, then mean / sd / CV: readable whatever the operation types are."""
    ok = [r for r in rows if r["state"] == "COMPLETE"]
    ops: list[str] = []
    for r in ok:
        for op in r["metrics"]["operations"]:
            if op not in ops and op != "CLEANUP":
                ops.append(op)
    lines: list[tuple[str, list[float | None]]] = [
        ("throughput ops/s", [r["metrics"]["summary"]["throughput_ops_s"] if r["state"] == "COMPLETE" else None for r in rows])]
    for op in ops:
        for stat in ("avg", "p95", "p99"):
            lines.append((f"{op.lower()} {stat} ms",
                          [r["metrics"]["summary"].get(f"{op.lower()}_{stat}_ms") if r["state"] == "COMPLETE" else None for r in rows]))
    lines.append(("errors", [r["metrics"]["errors"] if r["state"] == "COMPLETE" else None for r in rows]))
    for label, key in _TIMING_ROWS:
        values = [(r["timings"] or {}).get(key) for r in rows]
        if any(v is not None for v in values):
            lines.append((label, values))
    header = ["metric"] + [f"run {i + 1}" for i in range(len(rows))] + (["mean", "sd", "cv %"] if len(rows) > 1 else [])
    table = [header]
    for label, values in lines:
        cells = [label] + ["FAIL" if rows[i]["state"] != "COMPLETE" and v is None and not label.endswith(" s")
                           else _fmt(v) for i, v in enumerate(values)]
        if len(rows) > 1:
            st = _stats([v for v in values if v is not None])
            cells += [_fmt(st["mean"]), _fmt(st["sd"]), _fmt(st["cv"] * 100 if st["cv"] is not None else None)]
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    out = ["  ".join(cell.rjust(w) if j else cell.ljust(w) for j, (cell, w) in enumerate(zip(row, widths)))
           for row in table]
    for r in rows:
        if r["state"] != "COMPLETE":
            out.append(f"trial {r['id']} failed ({r['failure_kind']}): {r['error']}")
    return "\n".join(out)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, int):
        return str(value)
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}"


def cmd_bench(args: argparse.Namespace) -> int:
    settings = _settings(args)
    target = trial_target(settings)
    space = target.knob_space(settings)
    overrides = _overrides(args, space)
    workload = _build_workload(args)
    target.preflight(workload, settings)
    rows = run_trials(args, space, overrides, workload, settings, tag="bench",
                      study_name=args.study_name or "bench")
    throughputs = [r["metrics"]["summary"]["throughput_ops_s"] for r in rows if r["state"] == "COMPLETE"]
    if args.json:
        print(json.dumps({"study": args.study, "workload": workload.to_dict(), "config": overrides,
                          "throughput": _stats(throughputs), "trials": rows}, default=str))
    else:
        print(f"workload {workload.name}: {workload.records} records, {workload.operations} operations, "
              f"{workload.threads} threads; config: {overrides or 'default'}; study {args.study}")
        print(format_table(rows))
    return 0 if all(r["state"] == "COMPLETE" for r in rows) else 1


def cmd_node(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from .systems.cassandra.node import flatten_dotted, serve
    from .systems.cassandra.provision import DEFAULT_VERSION

    overrides: dict[str, Any] = {}
    if args.yaml:
        try:
            data = yaml.safe_load(Path(args.yaml).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise UsageError(f"--yaml {args.yaml}: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise UsageError(f"--yaml {args.yaml}: expected a mapping of cassandra.yaml settings")
        overrides = flatten_dotted(data)
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port must be a port number, got {args.port}")
    home = Path(args.home).expanduser().resolve()
    return serve(home, args.port, overrides, _heap_mb(args.heap), args.cassandra_version or DEFAULT_VERSION,
                 say=lambda line: print(line, flush=True))


def cmd_cluster(args: argparse.Namespace) -> int:
    from .runtime.paths import work_dir
    from .systems.cassandra import cluster

    home = cluster.cluster_home(work_dir(), args.name)
    if args.action == "up":
        from .knobs import load_space, parse_assignments
        from .systems.cassandra.config import place
        from .systems.cassandra.provision import DEFAULT_VERSION

        existing = cluster.read_state(home)
        if existing and any(cluster.pid_alive(m["pid"], m["home"]) for m in existing["members"]):
            raise UsageError(f"cluster '{args.name}' is already running (nosqltune cluster down --name {args.name})")
        space = load_space("cassandra")
        overrides = space.validate(parse_assignments(args.assignments))
        placed = place(space, overrides)
        elsewhere = [n for n in overrides if space.knobs[n].applies != "yaml"]
        if elsewhere:
            raise UsageError(f"cluster up sets cassandra.yaml knobs only; {elsewhere[0]} applies to "
                             f"{space.knobs[elsewhere[0]].applies}")
        heap = _heap_mb(args.heap)
        cluster.check_fits(args.nodes, heap)
        local = cluster.LocalCluster(home=home, nodes=args.nodes, heap_mb=heap, detached=True,
                                     version=args.cassandra_version or DEFAULT_VERSION, yaml_overrides=placed.yaml)
        if home.exists():
            import shutil

            shutil.rmtree(home)
        print(f"  starting {args.nodes} node(s) in {home}", file=sys.stderr, flush=True)
        seconds = local.start()
        (home / cluster.STATE_FILE).write_text(json.dumps(local.state(), indent=1))
        result = {**cluster.status(home), "start_seconds": seconds}
    elif args.action == "status":
        result = cluster.status(home)
    else:
        result = {"stopped": cluster.down(home), "home": str(home)}
    if args.json:
        print(json.dumps(result, default=str))
    elif args.action == "down":
        print(f"stopped {len(result['stopped'])} node(s): {', '.join(result['stopped']) or 'none were running'}")
    else:
        print(f"cluster {args.name}: {result['nodes']} node(s), {'up' if result['up'] else 'NOT up'}; CQL port "
              f"{result['native_port']}; contact points {','.join(m['address'] for m in result['members'])}")
        for m in result["members"]:
            print(f"  {m['address']}  {'running' if m['running'] else 'stopped'}  pid {m['pid']}  jmx {m['jmx_port']}"
                  f"  sees {', '.join(m['peers']) or 'no peers'}")
    return 0 if args.action == "down" or result["up"] else 1


def cmd_knobs(args: argparse.Namespace) -> int:
    from .knobs import load_space

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
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]) - 1)]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from .calibrate import calibrate

    return calibrate(args)


def cmd_tune(args: argparse.Namespace) -> int:
    from .tuning.commands import cmd_tune as run

    return run(args)


def cmd_best(args: argparse.Namespace) -> int:
    from .tuning.commands import cmd_best as run

    return run(args)


def cmd_collect(args: argparse.Namespace) -> int:
    from .surrogate.commands import cmd_collect as run

    return run(args)


def cmd_importance(args: argparse.Namespace) -> int:
    from .surrogate.commands import cmd_importance as run

    return run(args)


def cmd_model_fit(args: argparse.Namespace) -> int:
    from .surrogate.commands import cmd_model_fit as run

    return run(args)


def cmd_model_report(args: argparse.Namespace) -> int:
    from .surrogate.commands import cmd_model_report as run

    return run(args)


def cmd_recommend(args: argparse.Namespace) -> int:
    from .surrogate.commands import cmd_recommend as run

    return run(args)


def cmd_compare(args: argparse.Namespace) -> int:
    from .evaluation.commands import cmd_compare as run

    return run(args)


def cmd_report(args: argparse.Namespace) -> int:
    from .report.commands import cmd_report as run

    return run(args)


def cmd_export(args: argparse.Namespace) -> int:
    from .evaluation.commands import cmd_export as run

    return run(args)


def cmd_setup(args: argparse.Namespace) -> int:
    from .systems.cassandra.provision import DEFAULT_VERSION, cassandra_classpath
    from .workloads.loadgen import loadgen_classpath

    version = args.cassandra_version or DEFAULT_VERSION
    print(f"Cassandra {version}: {len(cassandra_classpath(version))} jars", file=sys.stderr)
    print(f"loadgen: {loadgen_classpath()[0]}", file=sys.stderr)
    return 0


def domain_flags(parser: argparse.ArgumentParser) -> None:
    """model fit/report: seed 004's tuning domains (its Table 3)."""
    parser.add_argument("--domain", choices=["TD1", "TD2", "TD3", "TD4"], default="TD1",
                        help="the features the model sees (seed 004's tuning domains): TD1 workload, physical design "
                             "and knobs; TD2 no workload (the trials of one workload); TD3 no design (the trials of "
                             "one design); TD4 knobs only (default TD1)")
    parser.add_argument("--workload", metavar="NAME", help="TD2/TD4: the workload whose trials are kept, as stored "
                        "(e.g. ycsb-a, read90-zipfian) (default: the only one)")
    parser.add_argument("--nodes", type=int, metavar="N", help="TD3/TD4: the node count whose trials are kept")
    parser.add_argument("--rf", type=int, metavar="N", help="TD3/TD4: the replication factor whose trials are kept")


def domain_of(args: argparse.Namespace) -> dict[str, Any]:
    """load_table's tuning-domain arguments from the flags."""
    design = {k: v for k, v in (("nodes", args.nodes), ("replication_factor", args.rf)) if v is not None}
    return {"domain": args.domain, "workload": args.workload, "design": design or None}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nosqltune",
        description="Tune NoSQL datastores with real benchmark trials. Every trial is cold: the node boots "
                    "on a restored copy of the loaded data, the client warms up, then the workload is measured.")
    parser.add_argument("--version", action="version", version=f"nosqltune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("bench", help="benchmark one configuration with repeated cold trials",
                       description="Start the datastore on restored data, warm up, run a YCSB workload, and store "
                                   "each trial. Examples: nosqltune bench --workload ycsb-a --repeat 5; "
                                   "nosqltune bench --system redis --workload ycsb-c --repeat 5")
    _common(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser(
        "tune", help="search for a faster configuration: random, irace, gp, smac, rafiki or surrogate-sa",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run cold trials of the configurations an optimizer suggests, store every trial, and report "
                    "the best configuration found.\n\nExamples:\n"
                    "  nosqltune tune --workload ycsb-a --knobs irace23 --optimizer irace --budget 200 --study runs/a.db\n"
                    "  nosqltune tune --workload read95 --knobs vorstella5 --optimizer gp --objective p99-read --budget 25\n"
                    "  nosqltune tune --workload ycsb-a,ycsb-b --optimizer smac --constraint p99-read<=5\n"
                    "  nosqltune tune --nodes 3 --rf 3 --knobs eppinger   # knobs for a fixed design (a local cluster)\n"
                    "  nosqltune tune --design nodes=2..4,rf=1..3 --knobs eppinger   # the design searched too\n"
                    "  nosqltune tune --study runs/a.db --resume        # continue after Ctrl-C or a crash\n\n"
                    "--workload takes a comma-separated list: the objective is then the geometric mean over the "
                    "workloads (irace races them as instances).")
    _common(p, surrogate=True)
    t = p.add_argument_group("tuning")
    t.add_argument("--optimizer", default="smac", choices=["random", "irace", "gp", "smac", "rafiki", "surrogate-sa"],
                   help="random: uniform sampling; irace: iterated racing (R package); gp: Gaussian-process "
                        "Bayesian optimization; smac: SMAC3; rafiki: neural-net ensemble + genetic algorithm; "
                        "surrogate-sa: random forest + simulated annealing (default smac)")
    t.add_argument("--knobs", default=None, metavar="SET|FILE",
                   help="knob set (Cassandra: irace23, rafiki5, vorstella5, mlos10, eppinger; Redis: mlos6, operator) "
                        "or a YAML file of knob names or narrowed ranges (default: irace23 for Cassandra, mlos6 for "
                        "Redis, every knob of an external target); see `nosqltune knobs SYSTEM`")
    t.add_argument("--budget", type=int, default=None, metavar="N",
                   help="cold trials at most, the default included (default 40)")
    t.add_argument("--max-time", metavar="DURATION", help="stop after this much trial time, e.g. 90m or 2h")
    t.add_argument("--objective", default="throughput", metavar="METRIC",
                   help="throughput (maximized) or <avg|p95|p99>-<read|update|insert|scan|all> (minimized), "
                        "e.g. p99-read (default throughput)")
    t.add_argument("--constraint", action="append", default=[], dest="constraints", metavar="METRIC<=X",
                   help="keep only configurations with METRIC<=X or METRIC>=X, e.g. p99-read<=5 (repeatable)")
    d = t.add_mutually_exclusive_group()
    d.add_argument("--include-default", dest="include_default", action="store_true", default=True,
                   help="measure the default configuration first, so gains are against a default of the same "
                        "study (default; for irace it is its initial configuration)")
    d.add_argument("--no-default", dest="include_default", action="store_false",
                   help="do not measure the default")
    t.add_argument("--design", metavar="nodes=LO..HI,rf=LO..HI",
                   help="Cassandra: search the physical design with the knobs (seed 004): the number of nodes of the "
                        "local cluster and/or the replication factor, e.g. nodes=2..4,rf=1..3; the default "
                        "configuration runs on the smallest design (instead of --nodes/--rf for what is searched)")
    t.add_argument("--seed", type=int, default=1, help="seed of the optimizer (default 1)")
    t.add_argument("--patience", type=int, metavar="N",
                   help="stop early when the best configuration has not changed for N suggestions")
    t.add_argument("--initial", type=int, metavar="N",
                   help="gp/smac/rafiki/surrogate-sa: random (gp), Sobol (smac) or extremes-covering (rafiki, "
                        "surrogate-sa) configurations before the model is used")
    t.add_argument("--space-adapter", choices=["none", "llamatune"], default="none",
                   help="llamatune: the optimizer searches a small synthetic space (random projection, special-value "
                        "biasing, bucketization) mapped onto all the knobs (default none)")
    t.add_argument("--llamatune-dims", type=int, default=16, metavar="D",
                   help="llamatune: synthetic dimensions (default 16, at most the number of knobs)")
    t.add_argument("--special-bias", type=float, default=0.2, metavar="P",
                   help="llamatune: probability of a knob's special value (0 = disabled, ...) (default 0.2)")
    t.add_argument("--max-unique", type=int, default=10000, metavar="K",
                   help="llamatune: distinct values a numeric knob may take (default 10000)")
    t.add_argument("--resume", action="store_true",
                   help="continue the study (--study, --study-name) with its stored settings; --budget and "
                        "--max-time may be raised")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser(
        "collect", help="training data for surrogate models: every configuration on every read ratio, cold",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run one cold trial for every (read ratio, configuration) pair and store it (RAFIKI's "
                    "workload-aware training data). The configurations are the default plus random ones in which "
                    "every knob's minimum and maximum (and every choice) appears at least once. Resumable: run "
                    "the same command again; extend it with a larger --configs or more --read-ratios.\n\n"
                    "Example:\n  nosqltune collect --knobs rafiki5 --read-ratios 0:1:0.1 --configs 20 "
                    "--study runs/train.db")
    _common(p)
    g = p.add_argument_group("collection")
    g.add_argument("--knobs", default="rafiki5", metavar="SET|FILE", help="knob set or YAML file (default rafiki5)")
    g.add_argument("--read-ratios", default="0:1:0.1", metavar="START:STOP:STEP|LIST",
                   help="read ratios of the workloads (rest updates), e.g. 0:1:0.1 or 0.1,0.5,0.9 (default 0:1:0.1)")
    g.add_argument("--configs", type=int, default=20, metavar="N",
                   help="configurations, the default included (default 20)")
    g.add_argument("--noise-repeats", type=int, default=2, metavar="N",
                   help="extra runs of the default per workload, to measure the noise (default 2)")
    g.add_argument("--seed", type=int, default=1, help="seed of the random configurations and order (default 1)")
    g.add_argument("--limit", type=int, metavar="N", help="run at most N of the missing trials this time")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser(
        "importance", help="which knobs matter: one knob at a time (measured), or from an existing study",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="RAFIKI's key-knob selection: measure every knob at each of --levels values (every choice "
                    "of a categorical knob) with the others at their defaults, score each knob by the standard "
                    "deviation of the objective over its levels, rank, and mark the top k at the largest drop "
                    "between consecutive scores. Resumable. With --from-study, no trial is run: the ranking is "
                    "the permutation importance of a model fitted to that study's trials.\n\nExamples:\n"
                    "  nosqltune importance --workload read90 --knobs irace23\n"
                    "  nosqltune importance --from-study runs/train.db --objective throughput")
    _common(p)
    g = p.add_argument_group("importance")
    g.add_argument("--knobs", default="irace23", metavar="SET|FILE", help="knob set or YAML file (default irace23)")
    g.add_argument("--levels", type=int, default=4, metavar="N", help="values per numeric knob (default 4)")
    g.add_argument("--objective", default="throughput", metavar="METRIC",
                   help="throughput or a latency such as p99-read (default throughput)")
    g.add_argument("--chart", metavar="PNG", help="bar chart path (default next to the study)")
    g.add_argument("--from-study", metavar="PATH", help="rank by permutation importance on this study's trials")
    g.add_argument("--model", choices=["rf", "gbdt", "nn-ensemble"], default="rf",
                   help="--from-study: the model whose error is measured (default rf)")
    g.add_argument("--seed", type=int, default=0, help="--from-study: seed of the model and permutations")
    p.set_defaults(func=cmd_importance)

    p = sub.add_parser("model", help="surrogate models: fit one to a study, report accuracy",
                       description="Surrogate models of performance = f(workload, knobs) learned from stored trials.")
    p.set_defaults(func=lambda _args, _p=p: (_p.print_help(sys.stderr), 2)[1])
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

    p = sub.add_parser("recommend", help="a configuration for a workload, from a fitted model (no trial)",
                       description="Search a fitted surrogate (genetic algorithm or simulated annealing) for the "
                                   "best configuration on a workload. Example: nosqltune recommend --model "
                                   "runs/train.throughput.nn-ensemble.model --workload read=0.7")
    p.add_argument("--model", required=True, metavar="DIR", help="directory written by `nosqltune model fit`")
    p.add_argument("--workload", default=None, metavar="NAME",
                   help="read=0.7, read70, ycsb-a..f or a properties file (default ycsb-a; for a model of tuning "
                        "domain TD2 or TD4, the one workload it was fitted on)")
    p.add_argument("--distribution", choices=["zipfian", "uniform", "latest"], help="request distribution")
    p.add_argument("--search", default="ga", help="ga (genetic algorithm, RAFIKI) or anneal (simulated annealing, "
                   "seed 004) (default ga)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=["table", "yaml", "json"], default="table", help="output format (table)")
    p.set_defaults(func=cmd_recommend)

    p = sub.add_parser("best", help="the best configuration of a tuning study, as a table, YAML or JSON",
                       description="Print the best configuration found by `nosqltune tune`: as a cassandra.yaml "
                                   "fragment with the diff against the default (--format yaml), as JSON, or as a "
                                   "table.")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="study within the store (default tune)")
    p.add_argument("--format", choices=["table", "yaml", "json"], default="table", help="output format (table)")
    p.set_defaults(func=cmd_best)

    p = sub.add_parser(
        "compare", help="a tuning study's best configuration (and others) against the default, with statistics",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the candidates and the default in interleaved cold rounds (ABC CBA ...) on the study's "
                    "workloads and harness, then per candidate: speedup over the default of the same round (mean, "
                    "median, 95%% bootstrap interval), Wilcoxon signed-rank p-value, and a verdict (better / no "
                    "significant difference / worse). Runs are stored in the study; an interrupted comparison "
                    "continues where it stopped.\n\nExamples:\n"
                    "  nosqltune compare --study runs/a.db --repeat 10\n"
                    "  nosqltune compare --study runs/a.db --candidates best,mine.yaml --repeat 10 --scale 10")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="tuning study within the store (default tune)")
    p.add_argument("--candidates", default="best", metavar="LIST",
                   help="comma-separated: best (the study's best), default, best-practice (Cassandra's documented "
                        "rules of thumb for this machine: concurrent_writes = 8 x cores, concurrent_reads = 16 x "
                        "drives, ...; see `nosqltune knobs`), design-default (the default knobs on the best "
                        "configuration's design, for a study of tune --design), or YAML files of knob values (default "
                        "best; the default configuration is always run as the reference)")
    p.add_argument("--repeat", type=int, default=10, metavar="N", help="interleaved rounds (default 10)")
    p.add_argument("--scale", type=float, default=1.0, metavar="X",
                   help="multiply records and operations by X, e.g. 10 to validate at 10x the tuning load (seed 001's "
                        "TS2; a new dataset is loaded once) (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "report", help="a self-contained HTML report (plots also as PNG) of a store's tuning studies",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write OUT/index.html, one page that opens offline (figures embedded), and every figure as a "
                    "PNG file in OUT: study summary and environment fingerprint, best-so-far convergence per "
                    "optimizer, speedup boxplots with p-values from `nosqltune compare`, knob values per "
                    "iteration, knob/objective correlations, knob importance, node internals over the measured "
                    "phase for default vs best, predicted vs measured, and the best configuration as a "
                    "cassandra.yaml fragment with its diff against the default.\n\nExamples:\n"
                    "  nosqltune report --study runs/a.db --out report/\n"
                    "  nosqltune report --study runs/a.db --study-name tune-gp --out report-gp/ --json")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="only this tuning study (default: every tuning study)")
    p.add_argument("--out", default="report", metavar="DIR", help="output folder (default report/)")
    p.add_argument("--json", action="store_true", help="print the written files as JSON")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("export", help="every trial of a store as CSV or JSON",
                       description="Write the trials (all studies, or --study-name) as CSV (one flat row per trial: "
                                   "knob.*, metric.*, timing.* columns) or JSON (the stored records).")
    p.add_argument("--study", default=DEFAULT_STUDY, metavar="PATH_OR_URL", help=f"trial store (default {DEFAULT_STUDY})")
    p.add_argument("--study-name", default=None, help="only this study")
    p.add_argument("--format", choices=["csv", "json"], default="csv", help="output format (csv)")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of stdout")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("node", help="run one Cassandra node in the foreground (for external targets, or your own use)",
                       description="Start a Cassandra node from the project's jars with its data in --home, serve "
                                   "CQL on --port until SIGTERM or Ctrl-C, then drain and stop (the data is left at "
                                   "rest, ready to copy). HOME/ready exists while the node serves CQL. Example: "
                                   "nosqltune node --home /tmp/n1 --port 9042 --yaml overrides.yaml")
    p.add_argument("--home", required=True, metavar="DIR", help="the node's directory (data, commitlog, logs)")
    p.add_argument("--port", type=int, metavar="N", help="CQL port (default: a free one)")
    p.add_argument("--yaml", metavar="FILE", help="cassandra.yaml settings over the defaults (nested or dotted keys)")
    p.add_argument("--heap", default="1G", metavar="SIZE", help="heap, e.g. 1G or 1536M (default 1G)")
    p.add_argument("--cassandra-version", default=None, help="Cassandra release from Maven (default 5.0.6)")
    p.set_defaults(func=cmd_node)

    p = sub.add_parser("cluster", help="a local Cassandra cluster for your own use: up, status, down",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Run N Cassandra nodes on this machine, each on its own loopback address "
                                   "(127.0.0.1, 127.0.0.2, ...) with the same ports, as ccm does. The nodes keep "
                                   "running after `up` returns; `down` drains and stops them.\n\nExamples:\n"
                                   "  nosqltune cluster up --nodes 3 --heap 1G\n  nosqltune cluster status\n"
                                   "  nosqltune cluster down")
    p.add_argument("action", choices=["up", "status", "down"])
    p.add_argument("--nodes", type=int, default=3, metavar="N", help="up: number of nodes (default 3)")
    p.add_argument("--heap", default="1G", metavar="SIZE", help="up: heap per node (default 1G)")
    p.add_argument("--set", metavar="KNOB=VALUE", action="append", default=[], dest="assignments",
                   help="up: a cassandra.yaml knob for every node (repeatable)")
    p.add_argument("--name", default="local", help="the cluster's name (its folder under .nosqltune/clusters)")
    p.add_argument("--cassandra-version", default=None, help="Cassandra release from Maven (default 5.0.6)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("knobs", help="list a datastore's knob space", description="List the knob space: name, "
                       "type, range, default of the version in use, where it applies, meaning.")
    p.add_argument("system", nargs="?", default="cassandra", help="datastore (default cassandra)")
    p.add_argument("--set", help="only the knobs of a named set (e.g. irace23) or a YAML file")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_knobs)

    p = sub.add_parser("calibrate", help="how reliable is one measurement: CV per setup, and the cheapest "
                       "setup under a CV threshold",
                       description="Run the default configuration --repeat times for each combination of the "
                                   "given operation counts, record counts and thread counts; report mean, sd, "
                                   "CV and time per run, and recommend the cheapest setup whose CV is under "
                                   "--max-cv.")
    _common(p, repeat=10)
    p.add_argument("--grid-operations", default="30000,60000,100000", metavar="LIST",
                   help="comma-separated operation counts (default 30000,60000,100000)")
    p.add_argument("--grid-records", default=None, metavar="LIST", help="comma-separated record counts "
                   "(default: --records)")
    p.add_argument("--grid-threads", default=None, metavar="LIST", help="comma-separated thread counts "
                   "(default: --threads)")
    p.add_argument("--max-cv", type=float, default=0.03, help="CV threshold of throughput (default 0.03)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("setup", help="resolve Cassandra with Maven and build the YCSB client (done on first use "
                       "anyway)")
    p.add_argument("--cassandra-version", default=None)
    p.set_defaults(func=cmd_setup)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .runtime.process import install_signal_handlers, reap_all

    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is None and getattr(args, "command", None) == "tune" and os.environ.get("PYTHONHASHSEED") != "0":
        # SMAC (through ConfigSpace) iterates over sets of configurations, whose order follows Python's
        # per-process string hashing: fixed hashing makes a tuning run repeatable, and a resumed run (a new
        # process) replays exactly the suggestions of the interrupted one
        os.execve(sys.executable, [sys.executable, "-m", "nosqltune", *sys.argv[1:]],
                  {**os.environ, "PYTHONHASHSEED": "0"})
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    install_signal_handlers()
    try:
        return args.func(args)
    except NosqltuneError as exc:
        print(f"nosqltune: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)
    except KeyboardInterrupt:
        print("nosqltune: interrupted; nodes stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `nosqltune knobs | head`
        sys.stderr.close()
        return 0
    finally:
        reap_all()


if __name__ == "__main__":
    sys.exit(main())
