"""Workload specifications: YCSB core workloads A-F, read-ratio mixes, or a user's YCSB properties file."""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import NosqltuneError
from ..shapes import YCSB_ROW_BYTES   # a YCSB row's values: what a scenario's records are counted in

# property names that hold a credential (loadgen's redis.password, another binding's password or secret)
_CREDENTIAL = re.compile(r"passw(or)?d|secret|credential", re.IGNORECASE)
# the request distributions of the keys YCSB 0.17's CoreWorkload takes (`requestdistribution`): a properties file
# and --distribution accept these, and no other
DISTRIBUTIONS = ("zipfian", "uniform", "latest", "hotspot", "sequential", "exponential")


PROFILE_WORKLOAD = "nosqltune.loadgen.ProfileWorkload"


class WorkloadError(NosqltuneError):
    exit_code = 2


@functools.lru_cache(maxsize=None)
def _catalog() -> dict[str, Any]:
    return yaml.safe_load((resources.files(__package__) / "ycsb.yaml").read_text())


def standard_workloads() -> dict[str, str]:
    """name -> description of the built-in workloads."""
    return {name: w["description"] for name, w in _catalog()["workloads"].items()}


def _read_properties(path: Path) -> dict[str, str]:
    props: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = re.split(r"\s*([=:])\s*", line, maxsplit=1) if re.search(r"[=:]", line) else (line, "", "")
        props[key.strip()] = value.strip()
    return props


@dataclass
class Workload:
    """What the client does: the operation mix (YCSB properties) plus sizes and client settings.

    The defaults are the setup that met CV <= 3% over 10 cold repeats on the reference machine (2 cores,
    bench/results/cold_trials.md): 100K records, 100K measured operations after a 20K-operation
    warm-up, 16 client threads."""

    name: str
    mix: dict[str, Any]
    records: int = 100_000
    operations: int = 100_000
    threads: int = 16
    target: int | None = None           # ops/s cap; None = unthrottled
    fieldcount: int = 10
    fieldlength: int = 100
    warmup_operations: int = 20_000
    warmup_max_seconds: int = 60
    warmup_steady_window: int = 0       # seconds; 0 = no steady-state detection
    warmup_steady_cv: float = 0.05
    warmup_steady_drift: float | None = None   # the last window's mean within this share of the one before; None: off
    warmup_min_seconds: int | None = None      # the warm-up lasts at least this long; None: no floor
    max_seconds: int | None = None      # cap of the measured phase
    extra: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] | None = None   # a cassandra-stress user profile, as workloads/profile.py read it
    replay: dict[str, Any] | None = None    # a captured workload replayed on the data (workloads/replay.py)
    snapshot: dict[str, Any] | None = None  # a table's `nodetool snapshot` as the data (workloads/snapshot.py)

    @property
    def keyspace(self) -> str:
        if self.snapshot:
            return self.snapshot["keyspace"]
        return self.profile["keyspace"] if self.profile else "ycsb"

    @property
    def table(self) -> str:
        if self.snapshot:
            return self.snapshot["table"]
        return self.profile["table"]["name"] if self.profile else "usertable"

    def dataset_properties(self) -> dict[str, Any]:
        """What determines the loaded data (the snapshot key)."""
        if self.snapshot:   # its files and schema, as they were when the study read them
            return {"snapshot": self.snapshot["digest"]}
        if self.profile:
            from .profile import data_digest

            # "sstables": how the writer lays the rows out (one SSTable per time window, sizes compaction leaves)
            return {"records": self.records, "profile": data_digest(self.profile), "sstables": "sorted"}
        return {"records": self.records, "fieldcount": self.fieldcount, "fieldlength": self.fieldlength,
                "insertorder": self.mix.get("insertorder", _catalog()["common"]["insertorder"])}

    def properties(self, phase: str) -> dict[str, Any]:
        """The YCSB properties of the `load` or `run` phase."""
        props = dict(_catalog()["common"])
        props.update(self.mix)
        if self.profile:   # loadgen's ProfileWorkload, on the profile's keyspace
            from .profile import loadgen_properties

            props.update(loadgen_properties(self.profile, self.records))
            props["workload"] = PROFILE_WORKLOAD
        if self.snapshot:   # the client's session and the node's internals on the snapshot's table
            props.update({"cassandra.keyspace": self.keyspace, "internals.keyspace": self.keyspace,
                          "internals.table": self.table})
        if self.replay and phase == "run":   # the capture's statements instead of the profile's mix
            from .replay import REPLAY_WORKLOAD, plan_file

            props.update({"workload": REPLAY_WORKLOAD, "replay.plan": str(plan_file(self.replay)),
                          "replay.start": self.replay.get("start", 0), "replay.pace": self.replay["pace"]})
        props.update(self.extra)
        props.update({"recordcount": self.records, "fieldcount": self.fieldcount,
                      "fieldlength": self.fieldlength, "threadcount": self.threads})
        if phase == "load":
            props["operationcount"] = self.records
        else:
            props["operationcount"] = self.operations
            props["warmup.operations"] = self.warmup_operations
            props["warmup.maxseconds"] = self.warmup_max_seconds
            props["warmup.steady.window"] = self.warmup_steady_window
            props["warmup.steady.cv"] = self.warmup_steady_cv
            if self.warmup_steady_drift is not None:
                props["warmup.steady.drift"] = self.warmup_steady_drift
            if self.warmup_min_seconds:
                props["warmup.minseconds"] = self.warmup_min_seconds
            if self.max_seconds:
                props["maxexecutiontime"] = self.max_seconds
            if self.target:
                props["target"] = self.target
        props.setdefault("hdrhistogram.percentiles", "50,95,99,99.9")
        return props

    def to_dict(self) -> dict[str, Any]:
        """As stored with every trial; a YCSB workload without the `profile` field, so that its stored form (and the
        keys made from it, e.g. a scenario's measured rate) stay what they were before profiles."""
        data = asdict(self)
        for optional in ("profile", "replay", "snapshot", "warmup_steady_drift", "warmup_min_seconds"):
            if data[optional] is None:
                del data[optional]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Workload":
        return cls(**data)


def _mix_for(name: str) -> tuple[str, dict[str, Any]]:
    catalog = _catalog()["workloads"]
    key = name.lower()
    if key in catalog:
        return key, dict(catalog[key]["properties"])
    short = re.fullmatch(r"(?:ycsb-?)?([a-f])", key)
    if short:
        return f"ycsb-{short.group(1)}", dict(catalog[f"ycsb-{short.group(1)}"]["properties"])
    ratio = re.fullmatch(r"read(?:=|-)?(\d+(?:\.\d+)?)", key)
    if ratio:  # read90 / read=0.9: that share of reads, the rest updates (RAFIKI's workload axis)
        value = float(ratio.group(1))
        value = value / 100 if value > 1 else value
        if not 0 <= value <= 1:
            raise WorkloadError(f"read ratio in {name!r} must be within 0..1 (or 0..100%)")
        return f"read{round(value * 100):g}", read_ratio_mix(value, "zipfian")
    path = Path(name)
    if path.is_dir():
        raise WorkloadError(f"workload {name!r} is a folder: give a YCSB properties file (key=value lines)")
    if path.exists():
        try:
            props = _read_properties(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkloadError(f"cannot read workload file {name} ({getattr(exc, 'strerror', None) or exc}): give a "
                                "readable YCSB properties file") from None
        secret = [k for k in props if _CREDENTIAL.search(k)]
        if secret:   # the workload is stored with every trial, printed and exported
            raise WorkloadError(f"workload file {path} holds {secret[0]}: a credential there would be stored with "
                                f"every trial; name the environment variable holding it in the target file "
                                f"instead (endpoint: password_env: VARIABLE)")
        chosen = props.get("requestdistribution")
        if chosen is not None and chosen not in DISTRIBUTIONS:   # YCSB would stop at its start with this
            raise WorkloadError(f"workload file {path}: requestdistribution must be one of {', '.join(DISTRIBUTIONS)}, "
                                f"got {chosen!r}")
        return path.stem, props
    raise WorkloadError(f"unknown workload {name!r}: use ycsb-a..ycsb-f, readNN (e.g. read95), "
                        f"or the path of a YCSB properties file")


def _number(workload: str, prop: str, text: Any, kind: type) -> Any:
    """A number of a properties file, or a one-line error naming the property."""
    try:
        return kind(text)
    except (TypeError, ValueError):
        what = "an integer" if kind is int else "a number"
        raise WorkloadError(f"workload {workload!r}: {prop} must be {what}, got {text!r}; fix the properties "
                            "file") from None


def read_ratio_mix(read_ratio: float, distribution: str) -> dict[str, Any]:
    if not 0 <= read_ratio <= 1:
        raise WorkloadError(f"--read-ratio must be within 0..1, got {read_ratio}")
    if distribution not in DISTRIBUTIONS:
        raise WorkloadError(f"--distribution must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
    return {"readproportion": round(read_ratio, 6), "updateproportion": round(1 - read_ratio, 6),
            "scanproportion": 0, "insertproportion": 0, "requestdistribution": distribution}


def make_workload(name: str | None = None, *, read_ratio: float | None = None, distribution: str | None = None,
                  defaults: dict[str, Any] | None = None, data: str | None = None, **sizes: Any) -> Workload:
    """A workload from a name (or properties file), or from --read-ratio/--distribution; `sizes` override the
    file's sizes, which override `defaults` (a scenario's), which override Workload's calibrated ones. `data`: what
    a replay (replay:FILE) runs on, profile:NAME."""
    if read_ratio is not None:
        if name and name not in ("custom",):
            raise WorkloadError("give either --workload or --read-ratio, not both")
        label = f"read{round(read_ratio * 100):g}-{distribution or 'zipfian'}"
        resolved, mix = label, read_ratio_mix(read_ratio, distribution or "zipfian")
    elif name and name.startswith("replay:"):
        return _replay_workload(name, data, distribution, defaults, sizes)
    elif data:
        raise WorkloadError("--data goes with --workload replay:FILE (the data a capture is replayed on)")
    elif name and name.startswith("profile:"):
        return _profile_workload(name, distribution, defaults, sizes)
    else:
        resolved, mix = _mix_for(name or "ycsb-a")
        if distribution:
            if distribution not in DISTRIBUTIONS:
                raise WorkloadError(f"--distribution must be one of {', '.join(DISTRIBUTIONS)}, got {distribution!r}")
            mix["requestdistribution"] = distribution
            resolved = f"{resolved}-{distribution}"
    # sizes given in a properties file are defaults that command-line flags override
    for key, prop in (("records", "recordcount"), ("operations", "operationcount"), ("threads", "threadcount"),
                      ("fieldcount", "fieldcount"), ("fieldlength", "fieldlength")):
        if prop in mix:
            sizes.setdefault(key, _number(resolved, prop, mix.pop(prop), int))
    for key, value in (defaults or {}).items():
        if value is not None:
            sizes.setdefault(key, value)
    for key in ("workload", "table"):
        if key in mix and key == "table" and mix[key] != "usertable":
            raise WorkloadError("only table=usertable is supported")
    for key, value in sizes.items():
        if value is not None and key in ("records", "operations", "threads", "fieldcount", "fieldlength") \
                and int(value) <= 0:
            raise WorkloadError(f"--{key} must be a positive integer, got {value}")
        if value is not None and key in ("target", "warmup_operations", "warmup_max_seconds", "warmup_steady_window") \
                and value < 0:
            flag = {"warmup_operations": "warmup-ops", "warmup_steady_window": "steady-window"}.get(key, key)
            raise WorkloadError(f"--{flag.replace('_', '-')} must be 0 or more, got {value}")
    proportions = [p for p in ("readproportion", "updateproportion", "scanproportion", "insertproportion",
                               "readmodifywriteproportion") if p in mix]
    for p in proportions:
        if _number(resolved, p, mix[p], float) < 0:
            raise WorkloadError(f"workload {resolved!r}: {p} must be 0 or more, got {mix[p]}; fix the properties file")
    if proportions and sum(float(mix[p]) for p in proportions) <= 0:
        raise WorkloadError(f"workload {resolved!r} has no operations (all proportions are 0): give one of them a "
                            "share above 0")
    return Workload(name=resolved, mix=mix, **{k: v for k, v in sizes.items() if v is not None})


def at_data_sizes(workloads: list["Workload"], multiples: tuple[float, ...]) -> list["Workload"]:
    """Each workload at each multiple of its records, the operations and everything else held (tune --data-sizes):
    named NAME at x1 and NAME-dataM at M, so that a search can rank a configuration by its worst size."""
    from dataclasses import replace

    if not multiples or any(m <= 0 for m in multiples) or len(set(multiples)) != len(multiples):
        raise WorkloadError("data sizes are distinct positive multiples of the records, e.g. 1,2")
    return [w if m == 1 else replace(w, name=f"{w.name}-data{m:g}", records=int(w.records * m))
            for w in workloads for m in sorted(multiples)]


SHIPPED_PROFILES = Path(__file__).parent / "profiles"


def shipped_profiles() -> list[str]:
    """The profiles that come with the tool, by name (`--workload profile:NAME`)."""
    return sorted(p.stem for p in SHIPPED_PROFILES.glob("*.yaml"))


def _profile_workload(name: str, distribution: str | None, defaults: dict[str, Any] | None,
                      sizes: dict[str, Any]) -> Workload:
    """`profile:FILE[:ops(...)]` (or a shipped profile's name) -> a Workload that carries the profile."""
    from .profile import load_profile, split_spec

    if distribution:
        raise WorkloadError("--distribution chooses YCSB's keys; a profile's columns say how its partitions are "
                            "picked: leave it out")
    path, ops = split_spec(name)
    if not Path(path).exists() and (SHIPPED_PROFILES / f"{path}.yaml").exists():
        path = str(SHIPPED_PROFILES / f"{path}.yaml")
    if not Path(path).is_file():
        shipped = ", ".join(shipped_profiles())
        raise WorkloadError(f"no profile {path!r}: give a cassandra-stress user profile (YAML) or one of {shipped}")
    from .profile import row_bytes

    profile = load_profile(path, ops)
    label = f"profile-{profile.name}" + (f"-{hashlib.sha256(ops.encode()).hexdigest()[:6]}" if ops else "")
    defaults = dict(defaults or {})
    if sizes.get("records") is None and defaults.get("records"):
        # a scenario sizes its data against the node's memory in YCSB rows of 1 KB: a profile gets the rows that
        # come to the same bytes
        defaults["records"] = max(1, round(defaults["records"] * YCSB_ROW_BYTES / row_bytes(profile.to_dict())))
    for key, value in defaults.items():
        if value is not None:
            sizes.setdefault(key, value)
    for key in ("records", "operations", "threads"):
        if sizes.get(key) is not None and int(sizes[key]) <= 0:
            raise WorkloadError(f"--{key} must be a positive integer, got {sizes[key]}")
    sizes = {k: v for k, v in sizes.items() if k not in ("fieldcount", "fieldlength")}
    return Workload(name=label, mix={}, profile=profile.to_dict(), **sizes)



def _replay_workload(name: str, data: str | None, distribution: str | None, defaults: dict[str, Any] | None,
                     sizes: dict[str, Any]) -> Workload:
    """`replay:FILE[:PACE]` (or a shipped capture's name) on `data` (profile:NAME: that profile's generated data;
    snapshot:DIR: a table's nodetool snapshot) -> a Workload with the replay: the data, schema and baseline are the
    profile's or the snapshot's, the run phase the capture's statements. Without --records, a capture made on the same profile gets the records it was made on
    (its statements' keys); without --operations, the capture's statements after the warm-up (a tenth of them
    unless --warmup-ops says), so that one trial replays the capture once."""
    from .capture import SHIPPED_CAPTURES, read_capture
    from .replay import asked_rate, replay_of, split_spec

    path, pace = split_spec(name)
    if not path.exists():   # a name: the user's captures (nosqltune capture's default place), then the shipped
        from ..runtime.paths import datasets_dir

        for named in (datasets_dir() / "captures" / f"{path}.json", SHIPPED_CAPTURES / f"{path}.json.gz"):
            if named.exists():
                path = named
                break
    if not data:
        raise WorkloadError("--workload replay:FILE needs the data it runs on: --data profile:NAME (the profile's "
                            "generated data) or --data snapshot:DIR (a table's nodetool snapshot)")
    capture = read_capture(path)
    if data.startswith("snapshot:"):
        base = _snapshot_workload(data[len("snapshot:"):], sizes)
    elif data.startswith("profile:"):
        made_on = capture.get("data") or {}
        if sizes.get("records") is None and made_on.get("profile") == data[len("profile:"):].split(":")[0]:
            sizes["records"] = made_on["records"]
        # the capture's length is the run's, not a scenario's operations
        defaults = {k: v for k, v in (defaults or {}).items() if k not in ("operations", "warmup_operations")}
        base = _profile_workload(data, distribution, defaults, sizes)
    else:
        raise WorkloadError(f"--data {data!r}: give profile:NAME or snapshot:DIR")
    from .profile import table_columns

    columns = (table_columns(base.snapshot["schema"]) if base.snapshot else list(base.profile["table"]["columns"]))
    replay = replay_of(path, pace, {f"{base.keyspace}.{base.table}"}, capture, columns=columns or None)
    if base.snapshot:   # one node's log against one node's data, every node's against every node's
        replay["nodes"] = {"logs": len(capture.get("sources") or []),
                           "snapshots": len(base.snapshot.get("nodes") or [base.snapshot["dir"]])}
    if sizes.get("operations") is None:
        warmup = sizes.get("warmup_operations")
        warmup = replay["statements"] // 10 if warmup is None else warmup
        if warmup >= replay["statements"]:
            raise WorkloadError(f"--warmup-ops {warmup}: the capture holds {replay['statements']} statements to "
                                "replay; warm up on fewer")
        base = Workload.from_dict({**base.to_dict(), "warmup_operations": warmup,
                                   "operations": replay["statements"] - warmup})
    replay["rate_ops_s"] = asked_rate(capture, replay, base.warmup_operations, base.operations)
    label = f"replay-{path.name.split('.')[0]}" + ("" if pace == "recorded" else f"-{pace}")
    return Workload.from_dict({**base.to_dict(), "name": label, "replay": replay})


def _snapshot_workload(folder: str, sizes: dict[str, Any]) -> Workload:
    """The data of a table's `nodetool snapshot` at `folder` (no rows of it are generated: `records` is 0)."""
    import shutil

    from ..runtime.paths import datasets_dir
    from .snapshot import read_snapshot

    if sizes.get("records") is not None:
        raise WorkloadError("--records sizes generated data; a snapshot's data is what it holds: leave it out")
    where = datasets_dir()
    while not where.exists():
        where = where.parent
    snapshot = read_snapshot(Path(folder), shutil.disk_usage(where).free)
    given = {k: v for k, v in sizes.items() if k not in ("fieldcount", "fieldlength") and v is not None}
    return Workload(name=f"snapshot-{snapshot['table']}", mix={}, **{**given, "records": 0}, snapshot=snapshot)
