"""Flags shared by the commands, and their conversion into the typed settings the library takes (the only place that knows argparse besides the command modules)."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import TYPE_CHECKING, Any

from ..errors import UsageError

if TYPE_CHECKING:
    from ..systems.base import TrialSettings


DEFAULT_STUDY = ".nosqltune/study.db"


DEFAULT_JIT = "c1"


PER_NODE = "per_node"   # the --config entry of per-node knob values (cli/harness.py reads it)


def scenario_names() -> str:
    """The scenarios as --scenario's help lists them, from scenarios.yaml: 'in-memory (default), disk-bound, ...'."""
    from ..scenarios import DEFAULT, scenarios

    return ", ".join(name + (" (default)" if name == DEFAULT else "") for name in scenarios())


def scenario_default(size: str, none: str = "none") -> str:
    """The default of a size flag as its help states it, from the shipped scenarios (scenarios.yaml; Workload's own
    where a scenario sets none): 'default N' when every scenario has the same, else 'default: the scenario's,
    in-memory N, disk-bound M, ...'. `none` is said for a size nothing sets (max_seconds: no cap)."""
    import dataclasses

    from ..scenarios import scenarios
    from ..workloads.spec import Workload

    field = {"warmup_ops": "warmup_operations"}.get(size, size)
    own = {f.name: f.default for f in dataclasses.fields(Workload)}[field]
    values = {name: s.sizes.get(size, own) for name, s in scenarios().items()}
    shown = {name: none if value is None else str(value) for name, value in values.items()}
    if len(set(shown.values())) == 1:
        return f"default {next(iter(shown.values()))}"
    return "default: the scenario's, " + ", ".join(f"{name} {value}" for name, value in shown.items())


def distribution_default() -> str:
    """--distribution's default as its help states it, from scenarios.yaml and the workload catalog (ycsb.yaml)."""
    from ..scenarios import scenarios
    from ..workloads.spec import _catalog

    chosen = ", ".join(f"{name} {s.distribution}" for name, s in scenarios().items() if s.distribution)
    mixes = {name: w["properties"].get("requestdistribution", "zipfian") for name, w in _catalog()["workloads"].items()}
    other = ", ".join(f"{name} {d}" for name, d in mixes.items() if d != "zipfian")
    return (f"default: the scenario's where it sets one ({chosen}), else the workload's: zipfian"
            + (f", but {other}" if other else ""))


def _common(parser: argparse.ArgumentParser, *, repeat: int = 1, surrogate: bool = False) -> None:
    """The flags every trial-running command spells the same way."""
    from ..workloads.spec import DISTRIBUTIONS

    parser.add_argument("--scenario", metavar="NAME", default=None,
                        help="benchmark scenario whose workload, sizes, memory cap, knobs and objective are the "
                             f"defaults: {scenario_names()}; every flag given wins over it (`nosqltune scenarios` "
                             "lists what each sets; `nosqltune calibrate --scenario NAME` on this machine replaces "
                             "its sizes here)")
    w = parser.add_argument_group("workload")
    w.add_argument("--workload", metavar="NAME", default=None,
                   help="ycsb-a .. ycsb-f, readNN (e.g. read95: NN%% reads, rest updates), a YCSB properties "
                        "file, profile:FILE (a cassandra-stress user profile), or replay:FILE[:PACE] (a capture "
                        "made by `nosqltune capture`, at its recorded pace, xF times it, or max) (default: ycsb-a)")
    w.add_argument("--data", metavar="SOURCE", default=None,
                   help="what a replay runs on: profile:NAME (that profile's generated data and table) or "
                        "snapshot:DIR (a table's `nodetool snapshot` folder: its schema.cql and SSTables, imported "
                        "once into the dataset cache; or a folder of such folders, one per node)")
    w.add_argument("--read-ratio", type=float, metavar="R", help="custom mix: share of reads 0..1, rest updates")
    w.add_argument("--distribution", choices=DISTRIBUTIONS,
                   help="request distribution of the keys, any a YCSB properties file's requestdistribution takes "
                        f"({distribution_default()})")
    w.add_argument("--records", type=int, metavar="N", default=None,
                   help=f"records loaded ({scenario_default('records')})")
    w.add_argument("--operations", type=int, metavar="N", default=None,
                   help=f"measured operations ({scenario_default('operations')})")
    w.add_argument("--threads", type=int, metavar="N", default=None,
                   help=f"client threads ({scenario_default('threads')})")
    w.add_argument("--target", type=int, metavar="OPS", help="throttle the client to OPS operations/s")
    w.add_argument("--rate-fraction", type=float, metavar="F",
                   help="throttle the client to F x the default configuration's maximum throughput for the workload "
                        "on this machine (measured once with 3 cold trials, then kept); latency-slo's is 0.6")
    w.add_argument("--max-seconds", type=int, metavar="S",
                   help="end the measured phase after S seconds even if operations remain (YCSB's "
                        "maxexecutiontime): bounds the cost of a very slow configuration "
                        f"({scenario_default('max_seconds', none='no cap')})")
    w.add_argument("--warmup-ops", type=int, metavar="N", default=None,
                   help="operations run and discarded before measuring, in the same client "
                        f"({scenario_default('warmup_ops')})")
    w.add_argument("--warmup-max-seconds", type=int, metavar="S", default=60,
                   help="upper bound of the warm-up (default 60)")
    w.add_argument("--steady-window", type=int, metavar="S", default=0,
                   help="after --warmup-ops, keep warming until the last S one-second throughputs vary by at "
                        "most --steady-cv (default 0: off)")
    w.add_argument("--steady-cv", type=float, default=0.05, metavar="CV", help="steady-state threshold (0.05)")
    c = parser.add_argument_group("configuration")
    c.add_argument("--config", metavar="FILE", help="YAML file of knob overrides (knob: value), or a named "
                   "configuration: latest (Cassandra 5.0's cassandra_latest.yaml settings)")
    c.add_argument("--set", metavar="KNOB=VALUE", action="append", default=[], dest="assignments",
                   help="override one knob (repeatable); wins over --config")
    c.add_argument("--force", action="store_true",
                   help="accept values outside the knob's tuning range, and (bench) a configuration that breaks a knob "
                        "rule, say a best stored before the rule, with a warning (Cassandra still validates them)")
    h = parser.add_argument_group("harness")
    h.add_argument("--system", default=None, metavar="SYSTEM",
                   help="datastore: cassandra (default), redis (a local redis-server), or external (any datastore, "
                        "driven by the commands of --target-file)"
                        + ("; or surrogate:DATASET[:KIND] to answer trials from a model of a recorded dataset "
                           "(e.g. surrogate:wide24) with its measured noise: compare optimizers in seconds"
                           if surrogate else ""))
    h.add_argument("--target-file", metavar="YAML", help="--system external: how to configure, start, stop, check "
                   "and reset the datastore, one command per step (see docs/datastores.md)")
    h.add_argument("--repeat", type=int, metavar="N", default=repeat, help=f"cold trials per configuration "
                                                                           f"(default {repeat})")
    h.add_argument("--study", metavar="PATH_OR_URL", default=DEFAULT_STUDY,
                   help=f"trial store: a SQLite path, sqlite:///path or postgresql://user@host:port/db (default "
                        f"{DEFAULT_STUDY})")
    h.add_argument("--study-name", default=None, help="study within the store (default: the command's name)")
    h.add_argument("--cassandra-version", default=None, help="Cassandra release from Maven (default 5.0.6)")
    h.add_argument("--heap", default=None, metavar="SIZE",
                   help="Cassandra heap per node, e.g. 2G or 1536M (default 2G; for a cluster whose nodes would not "
                        "all fit in memory with 2G each, the largest multiple of 256M that fits, at least 512M)")
    h.add_argument("--page-cache", default=None, metavar="SIZE",
                   help="Cassandra: run each node in a memory cgroup capped at its heap + the scenario's off-heap "
                        "allowance + SIZE of page cache (e.g. 256M), the restored data evicted from the page cache "
                        "before each trial (default: the scenario's; disk-bound 256M, others no cap)")
    h.add_argument("--page-cache-start", choices=("cold", "warm"), default=None,
                   help="with a page cache cap: 'cold' starts each node with none of its data in memory; 'warm' "
                        "reads its data files once into its memory group after boot (index files last), so its page "
                        "cache starts as full as the cap allows, as a node long in service (default: the "
                        "scenario's; cloud-disk and cloud-slo warm, disk-bound cold)")
    v = parser.add_argument_group("volume (Cassandra: each node's data on a volume of its own, as on a cloud "
                                  "block volume; needs root, loop devices and the block I/O cgroup controller)")
    v.add_argument("--volume", metavar="NAME", default=None,
                   help="a cloud volume's caps and read-ahead by name: aws-gp3 (3,000 IOPS, 125 MiB/s), "
                        "gcp-pd-standard-500g (`nosqltune volumes` lists them with their sources; default: the "
                        "scenario's, cloud-disk and cloud-slo aws-gp3, others none)")
    v.add_argument("--disk-iops", type=int, metavar="N", default=None,
                   help="cap each node's volume at N reads/s and N writes/s (wins over --volume's)")
    v.add_argument("--disk-mbps", type=int, metavar="M", default=None,
                   help="cap each node's volume at M MiB/s of reads and M MiB/s of writes (wins over --volume's)")
    v.add_argument("--disk-latency-ms", type=float, metavar="L", default=None,
                   help="make every read and write of each node's volume wait L ms first, as a network volume's "
                        "round trip (through FUSE: delayfs; about 0.3-0.5 ms more per I/O is FUSE's own; default: "
                        "the scenario's, 1 in cloud-slo, none elsewhere, none with --volume unless given; 0 for none)")
    h.add_argument("--server-cpus", metavar="LIST", help="pin the datastore to these CPUs (taskset list, e.g. 0)")
    h.add_argument("--client-cpus", metavar="LIST", help="pin the YCSB client to these CPUs (e.g. 1)")
    h.add_argument("--restore", choices=["link", "copy", "reload"], default="link",
                   help="how each cold trial gets its data: link (default; hard-link immutable SSTable files, "
                        "copy the rest), copy, or reload (load afresh every trial)")
    h.add_argument("--jit", choices=["c1", "tiered"], default=DEFAULT_JIT,
                   help="JIT of both JVMs: c1 (compiled steady state within seconds; repeatable short trials) or "
                        f"tiered (the JVM default; one to two minutes of warm-up on 2 cores) (default {DEFAULT_JIT})")
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


def workload_names(text: str) -> list[str]:
    """A --workload list: its commas split it, except those inside a profile's ops(...); profiles and YCSB
    workloads are not mixed in one list (a study compares configurations on one kind of data)."""
    from ..workloads.profile import PREFIX, split_workloads

    names = split_workloads(text)
    profiles = [n for n in names if n.startswith((PREFIX, "replay:"))]
    if profiles and len(profiles) != len(names):
        raise UsageError(f"--workload mixes a profile ({profiles[0]}) with YCSB workloads: give profiles or YCSB "
                         "workloads, not both")
    return names


def multiples(text: str, flag: str) -> tuple[float, ...]:
    """'1,2,4' -> (1.0, 2.0, 4.0), for --data-growth and --data-sizes."""
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise UsageError(f"{flag} takes multiples of the data such as 1,2,4, got {text!r}") from None


def _positive(name: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise UsageError(f"--{name} must be a positive integer, got {value}")


def _scenario(args: argparse.Namespace):
    """The scenario of --scenario (in-memory when not given)."""
    from ..scenarios import scenario

    return scenario(getattr(args, "scenario", None), getattr(args, "system", None) or "cassandra")


THREADS_PER_CORE = 256   # YCSB client threads per core the client may ask for: beyond, they only wait and take memory


def max_client_threads() -> int:
    """The most client threads a trial may ask for on this machine (each is a JVM thread with its own stack, and the
    node's request threads are bounded far below: native_transport_max_threads is 128 by default)."""
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def _build_workload(args: argparse.Namespace, *, name: Any = ..., read_ratio: Any = ..., **overrides: Any):
    """The workload of the flags over the scenario's; `name`, `read_ratio` and sizes given here win over both."""
    from ..workloads.spec import make_workload

    scenario = _scenario(args)
    defaults = {"records": "records", "operations": "operations", "threads": "threads",
                "warmup_operations": "warmup_ops", "max_seconds": "max_seconds"}
    defaults = {key: scenario.sizes.get(name) for key, name in defaults.items()}
    sizes = {"records": args.records, "operations": args.operations, "threads": args.threads,
             "target": args.target, "warmup_operations": args.warmup_ops,
             "warmup_max_seconds": args.warmup_max_seconds, "warmup_steady_window": args.steady_window,
             "warmup_steady_cv": args.steady_cv, "max_seconds": args.max_seconds}
    _positive("max-seconds", args.max_seconds)
    if args.threads is not None and args.threads > max_client_threads():
        raise UsageError(f"--threads {args.threads}: this machine has {os.cpu_count()} cores, and at most "
                         f"{max_client_threads()} client threads ({THREADS_PER_CORE} per core) run beside the node "
                         "without starving the machine's other processes; give fewer")
    sizes.update(overrides)
    name = args.workload if name is ... else name
    read_ratio = args.read_ratio if read_ratio is ... else read_ratio
    distribution = args.distribution
    if name is None and read_ratio is None:   # the scenario's mix, with its key choice
        name, distribution = scenario.workload, distribution or scenario.distribution
    elif name is None:   # a mix of reads and updates on the scenario's data keeps its key choice (cloud-disk's
        distribution = distribution or scenario.distribution   # uniform keys, which its memory cap is sized for)
    # flags win over the scenario, over sizes in a properties file, over Workload's (calibrated) defaults
    return make_workload(name, read_ratio=read_ratio, distribution=distribution, defaults=defaults,
                         data=getattr(args, "data", None), **{k: v for k, v in sizes.items() if v is not None})


def scenario_rate(args: argparse.Namespace, settings, workload, progress=None):
    """The workload at the scenario's fixed rate (latency-slo: a share of the default configuration's maximum
    throughput, measured once on this machine and kept), unless --target sets one; and the constraint that keeps
    a configuration which cannot sustain the rate from being ranked on its latency (None without a rate)."""
    from dataclasses import replace

    scenario = _scenario(args)
    fraction = getattr(args, "rate_fraction", None)
    if fraction is not None and not 0 < fraction <= 1:
        raise UsageError(f"--rate-fraction must be within (0, 1], got {fraction:g}")
    fraction = fraction if fraction is not None else scenario.rate_fraction
    if workload.target is None and fraction is not None:
        from ..evaluation.rates import fixed_rate

        workload = replace(workload, target=fixed_rate(settings, workload, fraction,
                                                       progress=progress or _progress(args)))
    from ..evaluation.rates import SUSTAINED

    if workload.replay and workload.replay.get("rate_ops_s"):   # a replay at a pace: the pace is its rate
        from ..evaluation.rates import check_replay_pace

        rate = check_replay_pace(settings, workload, progress=progress or _progress(args))
        return workload, f"throughput>={SUSTAINED * rate:g}"
    if workload.target is None:
        return workload, None
    return workload, f"throughput>={SUSTAINED * workload.target:g}"


def _overrides(args: argparse.Namespace, space, searched: Any = (), *, rules_warn: bool = False) -> dict[str, Any]:
    """--config and --set over the scenario's knob values (those of the scenario's datastore), checked against the
    knob rules on the configuration the trial runs with (every other knob at its default, the heap the trial
    settings'); rules over a knob of `searched` are the search's to keep. `rules_warn` (bench's --force: a stored
    best run as it was found) makes a broken rule a warning; a search's fixed values always keep the rules."""
    from ..knobs import KnobError

    scenario = {k: v for k, v in _scenario(args).knobs.items() if k in space}
    # the scenario's values are part of its environment (e.g. write-heavy's small memtable space)
    overrides = {**space.validate(scenario, allow_outside_range=True), **_given(args, space)}
    try:
        space.check_rules(overrides, searched=searched)
    except KnobError as e:
        if not rules_warn:
            raise
        print(f"nosqltune: warning: {e} (run anyway: --force)", file=sys.stderr)
    return overrides


def _given(args: argparse.Namespace, space) -> dict[str, Any]:
    """The knob values of --config and --set (--set wins), checked."""
    from ..knobs import is_named_config, load_config, parse_assignments

    typed: dict[str, Any] = {}
    if args.config:   # a file or a named configuration (latest); per_node: the harness's (_per_node)
        config = {k: v for k, v in load_config(args.config, space.system).items() if k != PER_NODE}
        # a named configuration is the project's own (latest: a column index below the tuning range)
        named = is_named_config(args.config, space.system)
        typed.update(space.validate(config, allow_outside_range=args.force or named))
    typed.update(space.validate(parse_assignments(args.assignments), allow_outside_range=args.force))
    on_volume = [k for k in typed if space[k].applies == "volume"]
    if on_volume and not (getattr(args, "volume", None) or getattr(args, "disk_iops", None)
                          or getattr(args, "disk_mbps", None) or _scenario(args).volume):
        raise UsageError(f"{on_volume[0]} sets the node's own volume: give --volume, --disk-iops or --disk-mbps "
                         "(the machine's own disk is not a trial's to change)")
    return typed


def _searched_space(args: argparse.Namespace, full_space, verb: str, knobs: Any = None,
                    settings: TrialSettings | None = None):
    """--knobs (the searched subset) and --set/--config (fixed values) checked together: (fixed, subset, space).
    With the trial `settings` of a memory-capped node, the heap's range ends where the cap leaves no room."""
    from ..knobs.space import TuningSpace
    from ..surrogate.datafile import is_surrogate

    subset = full_space.subset(args.knobs if knobs is None else knobs)
    # a recorded surrogate's knobs are searched as its trials ran them (their volume, their heap cap):
    # SurrogateTarget.check_searched holds the search to them
    if settings is not None and not is_surrogate(getattr(args, "system", None)):
        cassandra = settings.cassandra if settings.system == "cassandra" else None   # its heap's cap, its volume
        if cassandra is not None:
            subset = _heap_within_cap(subset, full_space, cassandra)
        # a volume's own settings (read_ahead_kb) need a volume: without one they are left out, and said so
        on_volume = [k.name for k in subset if k.applies == "volume"]
        if on_volume and (cassandra is None or cassandra.volume is None):
            if len(on_volume) == len(subset.knobs):
                raise UsageError(f"{', '.join(on_volume)} sets the node's own volume, and this run has none: give "
                                 "--volume, --disk-iops or --disk-mbps, or other --knobs")
            subset = leave_out(subset, full_space, on_volume)
            print(f"note: {', '.join(on_volume)} left out of the search: it sets the node's own volume, and this run "
                  "has none (--volume, --disk-iops, --disk-mbps)", file=sys.stderr)
    # a scenario's knob values are its situation (write-heavy's 32 MiB of memtable space is what makes it flush
    # and compact): held, never searched, or the study's default would be another scenario's
    # (a knob also given by --set/--config is not held: that clash is the user's, and said below)
    scenario, given = _scenario(args), _given(args, full_space)
    held = [name for name in scenario.knobs if name in subset.knobs and name not in given]
    if held and len(held) == len(subset.knobs):
        raise UsageError(f"scenario {scenario.name} holds {', '.join(held)}: nothing is left to search; "
                         "give --knobs other knobs, or another --scenario")
    if held:
        subset = leave_out(subset, full_space, held)
        print(f"note: {', '.join(held)} left out of the search: scenario {scenario.name} holds "
              + ", ".join(f"{k}={scenario.knobs[k]}" for k in held), file=sys.stderr)
    fixed = _overrides(args, full_space, searched=subset.knobs)
    clash = sorted(set(fixed) & set(subset.knobs))
    if clash:
        raise UsageError(f"{', '.join(clash)} is {verb}; it cannot also be fixed with --set/--config")
    try:
        return fixed, subset, TuningSpace(subset, fixed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _heap_within_cap(subset, full_space, cassandra):
    """The subset with `heap_size`'s range ending at the largest heap the node's memory cap allows (a larger one
    is killed at boot: a wasted trial), stored in the study's recipe so a resume searches the same range.
    `cassandra`: the trial settings' Cassandra part (systems.settings.CassandraSettings)."""
    largest = cassandra.largest_heap_mb()
    knob = subset.knobs.get("heap_size")
    if largest is None or knob is None or knob.range is None or knob.range[1] <= largest:
        return subset
    low = knob.range[0]
    if low >= largest:
        raise UsageError(f"heap_size's range starts at {low} MiB, and the node's memory cap "
                         f"({cassandra.memory_limit_mb()} MiB, {cassandra.offheap_mb or 0} MiB of it kept beside the "
                         f"heap) allows at most {largest} MiB: give a larger --page-cache or --heap, or leave "
                         "heap_size out of --knobs")
    result = leave_out(subset, full_space, [], {"heap_size": {"range": [low, largest]}})
    print(f"note: heap_size searched over [{low}, {largest}] MiB, not up to {knob.range[1]}: the node's memory cap "
          f"is {cassandra.memory_limit_mb()} MiB and keeps {cassandra.offheap_mb or 0} MiB beside the heap",
          file=sys.stderr)
    return result


def leave_out(subset, full_space, names: list[str], added: dict[str, Any] | None = None):
    """The knob subset without `names` (and with the knobs of `added`, name -> {range: ...}), stored as a recipe
    (the knob set or the written-out subset, what is added, what is left out), so a resumed study rebuilds it."""
    from ..tuning.results import stored_subset

    added = added or {}
    base = stored_subset(subset, full_space)
    base = {"set": base} if isinstance(base, str) else dict(base)
    knobs = base.get("knobs") or {}
    if isinstance(knobs, (list, tuple)):   # a user's file may list names
        knobs = {name: None for name in knobs}
    recipe = {**base, "knobs": {**knobs, **added}, "leave_out": [*(base.get("leave_out") or []), *names]}
    if not recipe["leave_out"]:
        del recipe["leave_out"]
    if not recipe["knobs"] and "set" in recipe:   # a knob set needs no `knobs` of its own
        del recipe["knobs"]
    try:
        result = full_space.subset(recipe)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    result.recipe = recipe
    result.label = f"{subset.label} without {', '.join(names)}" if names else subset.label
    return result


def trial_target(settings, system: str | None = None, *, seed: int = 0, metrics: tuple[str, ...] = ("throughput",)):
    """The target that runs the trials (tuning.workers.trial_target: the datastore or the surrogate)."""
    from ..tuning.workers import trial_target as target_of

    return target_of(settings, system, seed=seed, metrics=metrics)


def _progress(args: argparse.Namespace):
    """Progress lines on stderr (stdout carries the result); with --json, one JSON object per line."""
    as_json = getattr(args, "json", False)

    def say(message: str) -> None:
        if as_json:
            from ..tuning.progress import progress_json

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


def domain_flags(parser: argparse.ArgumentParser) -> None:
    """model fit/report: the RF/GBDT tuning paper's tuning domains (its Table 3)."""
    parser.add_argument("--domain", choices=["TD1", "TD2", "TD3", "TD4"], default="TD1",
                        help="the features the model sees (the tuning domains of the RF/GBDT tuning paper): TD1 workload, physical design "
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


def study_path(study: str):
    """Where a study's side files go (irace's folder, models): beside its SQLite file, or a folder of this machine
    for an in-memory or a PostgreSQL study."""
    from ..store import side_folder

    return side_folder(study)
