"""A phase-changing trace: a workload whose mix shifts over time, for measuring `online`.

A trace is a list of phases, each a YCSB mix (any workload name `--workload` takes: ycsb-a to ycsb-f, write90,
read90, ...), a duration and either full speed (closed loop: the client's threads as fast as the node answers) or a
fixed rate. It is data: a YAML file of the user's, or one that ships (`traces/*.yaml`, listed by `shipped_traces`).
RAFIKI (Mahgoub et al., Middleware 2017) re-tuned against the MG-RAST trace, whose read/write mix shifts every few minutes; the shipped
`shifting` trace is in that spirit: read-heavy, write-heavy and scan-heavy phases of a few minutes.

`drive` runs the phases one after the other with the YCSB client against a running node or cluster, each phase one
client run without a warm-up (the node stays up across phases: a shift of mix meets a warm node, as in production),
and returns what each phase did. The mix each phase shows the node (`Phase.node_mix`) is what `online` should see
in its windows (ClientRequest Read, Write and RangeSlice), so a test can hold the shift detector to the trace.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import yaml

from .spec import Workload, WorkloadError, make_workload
from .ycsb import not_ok_returns

MAX_THREADS = 256            # client threads per phase: more would starve the node of the machine's cores
MAX_PHASE_S = 24 * 3600.0
# A phase ends by its time, so its operation count only has to be out of reach; but not far out of it: YCSB sizes
# the key space its inserts may reach as twice the expected new keys (operationcount x insertproportion), and a read
# of a scrambled-zipfian workload draws keys until one exists, so a count of 2e9 over 1,000 records made each read
# draw about a million keys (write90 ran at 6 ops/s against 400 asked). The count is the phase's rate (or
# FULL_SPEED_OPS_S at full speed) over its length, with a margin.
FULL_SPEED_OPS_S = 50_000
MAX_OPERATIONS = 2**31 - 1   # YCSB reads operationcount as a Java int
PHASE_KEYS = {"name", "workload", "seconds", "rate", "threads"}
TRACE_KEYS = {"name", "summary", "phases", "sources"}
# what a YCSB operation is to the node's ClientRequest scopes (a read-modify-write is a read and a write)
NODE_KINDS = {"readproportion": ("read",), "updateproportion": ("write",), "insertproportion": ("write",),
              "scanproportion": ("scan",), "readmodifywriteproportion": ("read", "write")}


class TraceError(WorkloadError):
    """A trace that cannot be run as written: one line, exit 2."""


@dataclass(frozen=True)
class Phase:
    name: str
    workload: str              # a workload name as --workload takes it
    seconds: float
    rate: float | None = None  # operations per second; None: full speed (closed loop)
    threads: int = 16

    def node_mix(self) -> dict[str, float]:
        """The share of reads, writes and range scans the node's ClientRequest metrics see in this phase."""
        mix = make_workload(self.workload).mix
        counts = {"read": 0.0, "write": 0.0, "scan": 0.0}
        for prop, kinds in NODE_KINDS.items():
            for kind in kinds:
                counts[kind] += float(mix.get(prop, 0) or 0)
        total = sum(counts.values())
        return {kind: value / total for kind, value in counts.items()}

    def client_workload(self, records: int, **sizes: Any) -> Workload:
        """The YCSB client's workload for this phase: no warm-up, stopped after `seconds` (the operation count out
        of reach, see FULL_SPEED_OPS_S), at `rate` when one is set. `records`: the loaded dataset's size."""
        operations = min(MAX_OPERATIONS, math.ceil((self.rate * 1.5 if self.rate else FULL_SPEED_OPS_S) * self.seconds))
        return make_workload(self.workload, records=records, operations=operations, threads=self.threads,
                             warmup_operations=0, max_seconds=max(1, round(self.seconds)),
                             target=round(self.rate) if self.rate else None, **sizes)


@dataclass(frozen=True)
class Trace:
    name: str
    phases: tuple[Phase, ...]
    summary: str = ""
    sources: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(p.seconds for p in self.phases)

    def phase_at(self, elapsed_s: float) -> Phase | None:
        """The phase running `elapsed_s` seconds after the trace started; None before it or after its end."""
        if elapsed_s < 0:
            return None
        for phase in self.phases:
            if elapsed_s < phase.seconds:
                return phase
            elapsed_s -= phase.seconds
        return None

    def average_node_mix(self) -> dict[str, float]:
        """The phases' node mixes weighted by their durations: what a static configuration for the whole trace
        is chosen for (the benchmark's "best for the average mix")."""
        total = self.seconds
        out = {"read": 0.0, "write": 0.0, "scan": 0.0}
        for phase in self.phases:
            for kind, share in phase.node_mix().items():
                out[kind] += share * phase.seconds / total
        return out


def _traces_folder():
    return resources.files(__package__) / "traces"


@functools.lru_cache(maxsize=None)
def shipped_traces() -> dict[str, str]:
    """name -> summary of the traces that ship with nosqltune."""
    out = {}
    for entry in sorted(_traces_folder().iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            out[entry.name[:-5]] = (yaml.safe_load(entry.read_text()) or {}).get("summary", "")
    return out


def load_trace(spec: str) -> Trace:
    """A shipped trace by name, or a trace file (YAML). TraceError (one line) for anything that cannot run."""
    if spec in shipped_traces():
        text, where = (_traces_folder() / f"{spec}.yaml").read_text(), f"trace {spec!r}"
    else:
        path = Path(spec)
        if not path.is_file():
            raise TraceError(f"--trace {spec!r} is neither a trace that ships ({', '.join(shipped_traces())}) nor a "
                             "file")
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"cannot read trace file {path} ({getattr(exc, 'strerror', None) or exc})") from None
        where = f"trace file {path}"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise TraceError(f"{where} is not valid YAML" + (f" (line {mark.line + 1})" if mark else "")) from None
    return parse_trace(data, where, default_name=Path(spec).stem)


def parse_trace(data: Any, where: str = "trace", default_name: str = "trace") -> Trace:
    """A trace from its YAML data (see load_trace); TraceError names the phase and the field at fault."""
    if not isinstance(data, dict):
        raise TraceError(f"{where} must be a mapping with 'phases:' (a list of phases)")
    unknown = sorted(set(data) - TRACE_KEYS)
    if unknown:
        raise TraceError(f"{where}: unknown key {unknown[0]!r} (a trace has {', '.join(sorted(TRACE_KEYS))})")
    raw = data.get("phases")
    if not isinstance(raw, list) or not raw:
        raise TraceError(f"{where} has no phases: give 'phases:' a list of phases (name, workload, seconds, and "
                         "rate or threads)")
    phases, names = [], set()
    for i, item in enumerate(raw, 1):
        phases.append(_phase(item, f"{where}, phase {i}"))
        if phases[-1].name in names:
            raise TraceError(f"{where}, phase {i}: the name {phases[-1].name!r} is taken by an earlier phase")
        names.add(phases[-1].name)
    sources = data.get("sources") or ()
    return Trace(name=str(data.get("name") or default_name), phases=tuple(phases),
                 summary=str(data.get("summary") or ""), sources=tuple(str(s) for s in sources))


def _phase(item: Any, where: str) -> Phase:
    if not isinstance(item, dict):
        raise TraceError(f"{where} must be a mapping (name, workload, seconds, rate, threads)")
    unknown = sorted(set(item) - PHASE_KEYS)
    if unknown:
        raise TraceError(f"{where}: unknown key {unknown[0]!r} (a phase has {', '.join(sorted(PHASE_KEYS))})")
    for key in ("workload", "seconds"):
        if item.get(key) is None:
            raise TraceError(f"{where} has no {key}")
    workload = str(item["workload"])
    try:
        make_workload(workload)
    except WorkloadError as exc:
        raise TraceError(f"{where}: {exc}") from None
    seconds = _number(item["seconds"], "seconds", where)
    if not 0 < seconds <= MAX_PHASE_S:
        raise TraceError(f"{where}: seconds must be above 0 and at most {MAX_PHASE_S:.0f}, got {item['seconds']}")
    rate = None if item.get("rate") is None else _number(item["rate"], "rate", where)
    if rate is not None and rate <= 0:
        raise TraceError(f"{where}: rate must be above 0 operations per second (leave it out for full speed), got "
                         f"{item['rate']}")
    threads = item.get("threads", 16)
    if isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= MAX_THREADS:
        raise TraceError(f"{where}: threads must be a whole number from 1 to {MAX_THREADS}, got {threads!r}")
    return Phase(name=str(item.get("name") or f"phase-{where.rsplit(' ', 1)[-1]}"), workload=workload,
                 seconds=seconds, rate=rate, threads=threads)


def _number(value: Any, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(f"{where}: {key} must be a number, got {value!r}")
    return float(value)


# ----------------------------------------------------------------------------------------------- driving it
RunPhase = Callable[[Phase, Workload, Path], dict[str, Any]]


def drive(trace: Trace, run_phase: RunPhase, *, records: int, folder: Path,
          stop: threading.Event | None = None, progress: Callable[[str], None] = lambda _: None,
          clock: Callable[[], float] = time.time, rows: list | None = None) -> list[dict[str, Any]]:
    """Run the trace's phases one after the other: `run_phase(phase, workload, folder)` runs one (the YCSB
    client against the node: `ycsb_phase_runner`) and returns its metrics. Returns one row per phase run: its
    name, mix, start and end (on `clock`) and the client's figures, appended to `rows` as each phase ends (the
    phases done so far stay there when a later one raises). `stop` set: no further phase starts."""
    rows = [] if rows is None else rows
    for i, phase in enumerate(trace.phases, 1):
        if stop is not None and stop.is_set():
            break
        rate = f"at {phase.rate:g} ops/s" if phase.rate else f"at full speed ({phase.threads} threads)"
        progress(f"trace {trace.name}: phase {i}/{len(trace.phases)} {phase.name} ({phase.workload}, "
                 f"{phase.seconds:g} s {rate})")
        started = clock()
        metrics = run_phase(phase, phase.client_workload(records), folder / f"{i:02d}-{phase.name}")
        reads = (metrics.get("operations") or {}).get("READ") or {}
        rows.append({"phase": phase.name, "workload": phase.workload, "node_mix": phase.node_mix(),
                     "started_at": started, "ended_at": clock(), "seconds": phase.seconds, "rate": phase.rate,
                     "throughput_ops_s": metrics.get("throughput_ops_s"), "errors": metrics.get("errors"),
                     "read_p99_ms": reads["p99_us"] / 1000 if reads.get("p99_us") is not None else None,
                     # the client's own words for its first failed operations (its folder may not outlive the run)
                     "error_samples": metrics.get("error_samples") or [],
                     "not_ok": not_ok_returns(metrics)})
    return rows


def ycsb_phase_runner(host: str, port: int, *, cpus: str | None = None,
                      extra: dict[str, Any] | None = None) -> RunPhase:
    """A `run_phase` for `drive`: the YCSB client (loadgen) against the node(s) at host:port (CQL)."""
    from .ycsb import client_timeout, run_client

    def run(phase: Phase, workload: Workload, folder: Path) -> dict[str, Any]:
        return run_client("run", workload, host=host, port=port, trial_dir=folder,
                          timeout=client_timeout(workload, "run"), cpus=cpus, extra=extra)
    return run
