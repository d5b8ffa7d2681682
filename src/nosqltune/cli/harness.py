"""The harness flags (--system, --heap, the design, consistency, CPUs, the page-cache cap, the volume) turned
into the TrialSettings every trial is run with (the common part, and the datastore's: Cassandra's flags are
refused for another datastore), each checked before anything starts: one line and exit 2 for a bad value, exit
3 for a machine that cannot do what is asked."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from ..errors import SetupError, UsageError
from .options import PER_NODE, _positive, _scenario


def heap_mb(text: str) -> int:
    mb = _size_mb(text, "--heap")
    if mb < 16:  # below what a JVM can start with at all; above it, Cassandra itself says if it is enough
        raise UsageError(f"--heap {text} is too small for a JVM (2G recommended)")
    return mb


def trial_heap(args: argparse.Namespace, nodes: int, default: str | None = None) -> int:
    """The heap per node in MiB: --heap (or the scenario's `default`), checked against the memory of `nodes`
    nodes (the largest cluster of the run; one line and nothing started when they do not fit), or without
    either 2G, or for a cluster that would not fit with 2G the largest heap that does (refused below 512M)."""
    from ..systems.cassandra.cluster import DEFAULT_HEAP_MB, check_fits, fitting_heap

    given = args.heap or default
    if given is None:
        return fitting_heap(nodes, DEFAULT_HEAP_MB) if nodes > 1 else DEFAULT_HEAP_MB
    heap = heap_mb(given)
    check_fits(nodes, heap)   # one node too: a heap beyond the machine's memory is refused before anything starts
    return heap


def per_node(args: argparse.Namespace, system: str, nodes: int) -> dict[str, dict[str, Any]]:
    """The `per_node` entry of --config: {node number: {knob: value}}, cassandra.yaml knobs set on that node only
    (on top of the configuration all nodes get), checked against the knob space."""
    from ..knobs import load_config, load_space

    if not getattr(args, "config", None):
        return {}
    entry = load_config(args.config, system).get(PER_NODE)
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


def trial_settings(args: argparse.Namespace, *, surrogate: bool = False):
    """The harness settings of the flags, the datastore (--system, --target-file) checked."""
    from ..surrogate.datafile import is_surrogate
    from ..systems import TARGETS
    from ..systems.settings import ExternalSettings, RedisSettings, TrialSettings

    _positive("repeat", args.repeat)
    system = args.system or "cassandra"
    if is_surrogate(system) and surrogate:
        system = "cassandra"   # tune's surrogate answers trials itself; its harness settings are the default
    if system not in TARGETS:
        raise UsageError(f"unknown --system {system!r}: use " + ", ".join(TARGETS)
                         + (" or surrogate:DATASET" if surrogate else ""))
    target_file = getattr(args, "target_file", None)
    if (system == "external") != bool(target_file):
        raise UsageError("--system external needs --target-file YAML" if system == "external"
                         else "--target-file goes with --system external")
    if target_file:
        from ..systems.external.target import load_target

        target_file = str(load_target(target_file).path)   # checked now, stored absolute
    if system != "cassandra":
        given = [flag for flag, value in (("--heap", args.heap), ("--cassandra-version", args.cassandra_version))
                 if value is not None]
        if given:
            raise UsageError(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} for Cassandra "
                             f"(--system cassandra), not {system}")
    design = _design(args, system)
    most = parse_design(getattr(args, "design", None)).get("nodes", (0, design["nodes"]))[1]
    scenario = _scenario(args)
    page_cache = scenario.page_cache_mb
    if getattr(args, "page_cache", None) is not None:
        page_cache = _size_mb(args.page_cache, "--page-cache")
    if page_cache is not None and system != "cassandra":
        raise UsageError(f"--scenario {scenario.name} or --page-cache caps the node's memory and page cache to make "
                         f"it read from disk: for Cassandra (--system cassandra), not {system}")
    if page_cache is not None:
        from ..runtime.cgroup import usable

        why = usable()
        if why:
            raise SetupError(f"a memory cgroup per node is needed to cap the page cache, and none can be made here: "
                             f"{why}")
    warm = scenario.warm_page_cache
    if getattr(args, "page_cache_start", None) is not None:
        warm = args.page_cache_start == "warm"
        if page_cache is None:
            raise UsageError("--page-cache-start goes with a page cache cap: --page-cache SIZE or a scenario that "
                             "has one (disk-bound, cloud-disk, cloud-slo)")
    volume = trial_volume(args, scenario, system)
    for flag in ("server_cpus", "client_cpus"):
        cpu_list(getattr(args, flag), "--" + flag.replace("_", "-"))
    if system == "cassandra" and args.server_cpus and most > 1:   # before any trial: a design's 1-node trials too
        raise UsageError(f"--server-cpus pins a single node; clusters (here up to {most} nodes, from --nodes or "
                         "--design) do not honour it yet: leave it out")
    if system == "cassandra":
        datastore = cassandra_settings(args, scenario, most, design, page_cache, warm, volume)
    else:
        per_node(args, system, most)   # refused: per-node knobs are for Cassandra clusters
        datastore = ExternalSettings(target_file=target_file) if system == "external" else RedisSettings()
    from ..runtime.paths import check_writable

    check_writable("cache", "work", "datasets")   # an unusable NOSQLTUNE_* folder is refused before anything runs
    return TrialSettings(system=system, scenario=scenario.name, server_cpus=args.server_cpus,
                         client_cpus=args.client_cpus, restore_mode=args.restore, keep_node=args.keep_nodes,
                         jit=args.jit, datastore=datastore)


def cassandra_settings(args: argparse.Namespace, scenario, most: int, design: dict[str, Any],
                       page_cache: int | None, warm: bool, volume):
    """Cassandra's part of the settings: its release and heap (--cassandra-version, --heap or the scenario's for
    `most` nodes), the design (`design`: nodes, rf, consistency), the per-node knobs of --config, the memory cap
    and the volume."""
    from ..systems.cassandra.provision import DEFAULT_VERSION
    from ..systems.settings import CassandraSettings

    return CassandraSettings(cassandra_version=cassandra_version(args.cassandra_version) or DEFAULT_VERSION,
                             heap_mb=trial_heap(args, most, default=scenario.heap),
                             per_node=per_node(args, "cassandra", most), page_cache_mb=page_cache,
                             offheap_mb=None if page_cache is None else scenario.offheap_mb or DEFAULT_OFFHEAP_MB,
                             warm_page_cache=warm and page_cache is not None,
                             volume=None if volume is None else volume.to_dict(), **design)


def trial_volume(args: argparse.Namespace, scenario, system: str):
    """The volume of --volume, --disk-iops and --disk-mbps over the scenario's (volumes.Volume), or None; checked
    (one line, exit 2 for a bad value, exit 3 for a machine that cannot make one) before anything starts."""
    from ..volumes import resolve

    given = getattr(args, "volume", None)
    own = {} if given else scenario.volume_caps   # a volume named on the command line comes with its own caps
    iops, mbps = getattr(args, "disk_iops", None), getattr(args, "disk_mbps", None)
    latency = getattr(args, "disk_latency_ms", None)
    volume = resolve(given or scenario.volume, own.get("iops") if iops is None else iops,
                     own.get("mbps") if mbps is None else mbps,
                     latency_ms=own.get("latency_ms") if latency is None else latency)
    if volume is None:
        return None
    if system != "cassandra":
        raise UsageError(f"a volume per node (--volume, --disk-iops, --disk-mbps) is for Cassandra's nodes "
                         f"(--system cassandra), not {system}")
    if getattr(args, "restore", "link") == "reload":
        raise UsageError("--restore reload with a volume: the volume keeps a copy of the dataset made once and "
                         "restores from it; use --restore link (default) or copy")
    from ..runtime import blkio, delayfs, volume as loop

    why = loop.usable() or (blkio.usable() if volume.capped else None) or (delayfs.usable() if volume.latency_ms
                                                                           else None)
    if why:
        raise SetupError(f"a volume per node cannot be made here: {why}")
    return volume


def cassandra_version(text: str | None) -> str | None:
    """--cassandra-version checked (a release such as 5.0.6, as Maven names it); None when not given."""
    if text is not None and not re.fullmatch(r"\d+\.\d+(\.\d+)?(-[A-Za-z0-9.]+)?", text):
        from ..systems.base import CASSANDRA_VERSION

        raise UsageError(f"--cassandra-version {text!r} is not a Cassandra release: give one such as "
                         f"{CASSANDRA_VERSION}")
    return text


def cpu_list(text: str | None, flag: str) -> None:
    """A taskset CPU list (0, 0-1, 0,2-3) of CPUs this machine has."""
    if text is None:
        return
    if not re.fullmatch(r"\s*\d+(-\d+)?(\s*,\s*\d+(-\d+)?)*\s*", text):
        raise UsageError(f"{flag} expects a CPU list like 0, 0-1 or 0,2, got {text!r}")
    usable = range(os.cpu_count() or 1)
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus = range(int(lo), int(hi or lo) + 1)
        if not cpus or any(cpu not in usable for cpu in cpus):
            raise UsageError(f"{flag} {text}: use CPUs of this machine ({_ranges(list(usable))})")


def _ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    groups: list[list[int]] = []
    for cpu in cpus:
        if groups and groups[-1][1] == cpu - 1:
            groups[-1][1] = cpu
        else:
            groups.append([cpu, cpu])
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in groups)


DEFAULT_OFFHEAP_MB = 768   # a capped node's memory beyond its heap when the scenario does not say (see disk-bound)


def _size_mb(text: str, flag: str) -> int:
    """'2G', '1.5g', '256M' or a number of MiB -> MiB."""
    value = text.strip().upper()
    try:
        mb = int(float(value[:-1]) * 1024) if value.endswith("G") else int(value[:-1] if value.endswith("M") else value)
    except ValueError:
        raise UsageError(f"{flag} expects a size like 2G or 256M, got {text!r}") from None
    if mb <= 0:
        raise UsageError(f"{flag} must be positive, got {text!r}")
    return mb


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
        from ..systems.cassandra.cluster import MAX_NODES

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
