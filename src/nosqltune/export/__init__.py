"""From a tuned configuration to the files an operator applies: `nosqltune export-config`.

A reader of the trial store, as the report is. It takes a configuration (a study's confirmed best, a comparison's
candidate, or a YAML of knob values) with the evidence the store holds for it, and writes:

- cassandra.yaml.patch: the changed keys only; a unified diff against the operator's own cassandra.yaml when one
  is given (`patch -p0 < cassandra.yaml.patch`), else the keys as a YAML fragment;
- jvm-server.options: the JVM lines to add and the lines to remove (another collector than G1 takes the G1 lines
  of 5.0's jvm17-server.options with it, as the trials do: the JVM refuses two collectors);
- schema.cql: the ALTER TABLE statements for the operator's tables (`--table KS.T`), not the benchmark's;
- volume.txt: the read-ahead as `blockdev --setra` (512-byte sectors) and as a udev rule that survives a reboot;
- cass-operator.yaml: the `spec.config` block of a CassandraDatacenter for Cassandra 5.0 (CASS_OPERATOR_SOURCE);
- PLAN.md: the evidence, every setting with how it is applied, in the order to apply them;
- plan.json: the same for a program (`nosqltune rollout --plan DIR`): the datastore and version it was tuned on,
  every tagged setting, the cassandra.yaml keys, the JVM lines, the ALTER statements, the read-ahead.

How each setting is applied comes from the knob file and online/plan.py's routes, in one place (`settings_of`):
live (with its nodetool or JMX call), restart, rewrite (what rewrites the data, its I/O and the throttle),
cluster-wide in steps (storage_compatibility_mode, which the BTI format needs), irreversible, and tuned on the rig
(memory sizes and thread counts: they were found on the benchmark's node, not the operator's).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import UsageError
from ..online.plan import Change

FILES = ("cassandra.yaml.patch", "jvm-server.options", "schema.cql", "volume.txt", "cass-operator.yaml", "PLAN.md",
         "plan.json")
PLAN_FORMAT = 1   # plan.json's format: what `nosqltune rollout` reads
CASS_OPERATOR_SOURCE = (
    "key names as the k8ssandra config builder that cass-operator runs for Cassandra 4.1 and 5.0 reads them "
    "(k8ssandra/k8ssandra-client, pkg/config: cassandra-yaml, jvm-server-options initial_heap_size and "
    "max_heap_size, jvm17-server-options additional-jvm-opts), read 2026-11-28")
DEFAULT_THROTTLE_MIB_S = 64      # 5.0's compaction_throughput default, which upgradesstables obeys
BENCHMARK_TABLE = "ycsb.usertable"
# the steps 5.0's StorageCompatibilityMode documents for leaving 4.x compatibility: every node on 5.0 first, then
# UPGRADING on every node, then NONE; NONE gives up the way back to 4.x (deletion times past 2038, the BTI format)
COMPATIBILITY_STEPS = (
    "every node of the cluster runs Cassandra 5.0 (the upgrade from 4.x finished), storage_compatibility_mode "
    "CASSANDRA_4 as shipped",
    "storage_compatibility_mode: UPGRADING in cassandra.yaml, rolling restart, one node at a time",
    "storage_compatibility_mode: NONE in cassandra.yaml, rolling restart, one node at a time: from here the cluster "
    "cannot go back to 4.x",
    "only then sstable.selected_format: bti (rolling restart); new SSTables are written as BTI, the existing ones as "
    "they are until a rewrite (nodetool upgradesstables -a)")


@dataclass(frozen=True)
class Evidence:
    """What the store says about the configuration against the default: the comparison with the most pairs."""

    source: str                                  # where the configuration comes from, in words
    speedup: float | None = None                 # mean of the per-round ratios (> 1: better)
    interval: tuple[float, float] | None = None
    p_value: float | None = None
    pairs: int = 0
    where: str | None = None                     # which comparison (store, study, key)
    metric: str | None = None

    @property
    def confirmed(self) -> bool:
        """Better than the default in interleaved rounds with p < 0.05."""
        return self.p_value is not None and self.p_value < 0.05 and (self.speedup or 0) > 1

    def line(self) -> str:
        if self.speedup is None:
            return f"{self.source}: no comparison against the default in the store"
        interval = f" [{self.interval[0]:.3f}, {self.interval[1]:.3f}]" if self.interval else ""
        p = "-" if self.p_value is None else f"{self.p_value:.3g}"
        return (f"{self.source}: x{self.speedup:.3f}{interval} against the default on {self.metric or 'its objective'}"
                f" in {self.pairs} interleaved cold rounds, Wilcoxon p = {p} ({self.where})")


@dataclass(frozen=True)
class ExportSettings:
    """What the operator tells the export about their cluster."""

    tables: tuple[str, ...] = ()                 # KS.T: the tables the ALTERs name (none: the benchmark's, said so)
    base_yaml: str | None = None                 # the operator's cassandra.yaml (text): the patch is a diff of it
    base_name: str = "cassandra.yaml"
    data_bytes_per_node: float | None = None     # live data per node, for a rewrite's I/O
    data_source: str | None = None               # where that figure comes from
    device: str = "DEVICE"                       # the data volume's block device (blockdev, udev)
    optional: tuple[str, ...] = ()               # settings whose reversal cost nothing measurable (the ablation)
    rig: str | None = None                       # the node the configuration was tuned on, in words
    version: str = ""                            # the Cassandra version it was tuned on (default: this tool's)

    def __post_init__(self) -> None:
        if not self.version:
            from ..systems.base import CASSANDRA_VERSION

            object.__setattr__(self, "version", CASSANDRA_VERSION)
        self._check()

    def _check(self) -> None:
        for table in self.tables:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*", table):
                raise UsageError(f"--table takes KEYSPACE.TABLE, got {table!r}")
        if not re.fullmatch(r"[A-Za-z0-9._/-]+", self.device):
            raise UsageError(f"--device takes a block device name such as nvme1n1, got {self.device!r}")


@dataclass(frozen=True)
class Setting(Change):
    """One changed setting (online/plan.py's Change: its route, how it is made and why) and how it reaches a running
    cluster: its tags (live, restart, rewrite, cluster-wide in steps, irreversible, tuned on the rig, ...) and notes."""

    tags: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "tags": list(self.tags), "notes": list(self.notes)}


def _rig_dependent(knob) -> bool:
    """A memory size or a thread count: what fits the benchmark's node, not necessarily the operator's."""
    name = knob.name
    return (knob.unit == "MiB" and knob.applies in ("yaml", "jvm")) or name == "heap_size" or any(
        word in name for word in ("concurrent_", "threads", "writers"))


def settings_of(space, config: Mapping[str, Any], optional: Sequence[str] = ()) -> list[Setting]:
    """Every setting `config` changes against the defaults, tagged with how it is applied (the module docstring)."""
    from ..online.plan import plan_changes

    out = []
    for change in plan_changes(space, {}, config).changes:
        knob = space[change.knob]
        tags: list[str] = []
        notes: list[str] = []
        if change.route == "live":
            tags.append("live")
            notes.append(f"live: {change.how}; also written into cassandra.yaml for the next start"
                         if knob.applies in ("yaml", "config") else f"live: {change.how}")
        if change.route in ("restart", "restart+rewrite"):
            tags.append("restart")
        if change.route in ("rewrite", "restart+rewrite"):
            tags.append("rewrite")
            notes.append("reaches the existing data only when its SSTables are rewritten (nodetool upgradesstables -a"
                         ", one node at a time, throttled by compaction_throughput)")
        implied = (knob.implies or {}).get(change.after) or {}
        if implied:
            tags += ["cluster-wide, in steps", "irreversible"]
            said = ", ".join(f"{k}: {v}" for k, v in implied.items())
            notes.append(f"needs {said} on every node first, in steps (PLAN.md); no way back to Cassandra 4.x after")
        elif "rewrite" in tags:
            tags.append("irreversible")
            notes.append("the rewritten SSTables stay as written: going back means another rewrite")
        if change.route == "fixed":
            tags.append("volume" if knob.applies == "volume" else "not a configuration change")
            notes.append(change.reason)
        if change.route == "inert":
            tags.append("no effect")
            notes.append(change.reason)
        if _rig_dependent(knob):
            tags.append("tuned on the rig")
        if change.knob in optional:
            tags.append("optional")
        out.append(Setting(**{**change.as_dict(), "tags": tuple(tags), "notes": tuple(notes)}))
    return out


# ------------------------------------------------------------------------------------------------ the files
def yaml_keys(space, config: Mapping[str, Any]) -> dict[str, Any]:
    """The cassandra.yaml keys (dotted) the configuration sets, with the keys its values need beside them."""
    from ..systems.cassandra.config import place

    return dict(place(space, dict(config)).yaml)


def _yaml_value(value: Any) -> str:
    import yaml

    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def patched_yaml(base: str, keys: Mapping[str, Any]) -> str:
    """`base` (a cassandra.yaml's text) with each dotted key set: a top-level key's line replaced where it is set
    (comments and order kept), a key under a parent (sstable.selected_format) set inside that parent's block, and a
    key the file does not set appended at its end."""
    lines = base.splitlines()
    appended: list[str] = []
    for dotted, value in keys.items():
        parent, _, child = dotted.rpartition(".")
        rendered = _yaml_value(value)
        if not parent:
            found = [i for i, line in enumerate(lines) if re.match(rf"{re.escape(dotted)}\s*:", line)]
            if found:
                lines[found[-1]] = f"{dotted}: {rendered}"
            else:
                appended.append(f"{dotted}: {rendered}")
            continue
        start = next((i for i, line in enumerate(lines) if re.match(rf"{re.escape(parent)}\s*:\s*(#.*)?$", line)),
                     None)
        if start is None:
            appended += [f"{parent}:", f"  {child}: {rendered}"]
            continue
        end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()
                    and not lines[i].startswith("#")), len(lines))
        inner = [i for i in range(start + 1, end) if re.match(rf"\s+{re.escape(child)}\s*:", lines[i])]
        if inner:
            indent = re.match(r"\s+", lines[inner[-1]]).group(0)
            lines[inner[-1]] = f"{indent}{child}: {rendered}"
        else:
            lines.insert(start + 1, f"  {child}: {rendered}")
    if appended:
        lines += ["", "# set by nosqltune export-config"] + appended
    return "\n".join(lines) + "\n"


def yaml_patch(keys: Mapping[str, Any], settings: ExportSettings) -> str:
    if not keys:
        return "# no cassandra.yaml key changes\n"
    if settings.base_yaml is None:
        import yaml

        nested: dict[str, Any] = {}
        for dotted, value in keys.items():
            parent, _, child = dotted.rpartition(".")
            (nested.setdefault(parent, {}) if parent else nested)[child] = value
        return ("# the cassandra.yaml keys this configuration changes (give --base YOUR/cassandra.yaml for a patch of "
                "your own file)\n" + yaml.safe_dump(nested, sort_keys=False))
    after = patched_yaml(settings.base_yaml, keys)
    diff = difflib.unified_diff(settings.base_yaml.splitlines(keepends=True), after.splitlines(keepends=True),
                                fromfile=settings.base_name, tofile=settings.base_name)
    return "".join(diff) or "# your cassandra.yaml already sets these values\n"


def jvm_edits(space, config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(lines to add, lines of 5.0's shipped jvm files to remove)."""
    from ..systems.cassandra.config import place
    from ..systems.cassandra.node import G1_ONLY, jvm_options

    add = list(place(space, dict(config)).jvm)
    shipped = jvm_options()   # 5.0's jvm-server.options and jvm17-server.options as the trials start them
    names = {flag.split("=")[0] for flag in add}
    remove = [line for line in shipped if line.split("=")[0] in names and line not in add]
    if any(f.startswith("-XX:+Use") and f.endswith("GC") and f != "-XX:+UseG1GC" for f in add):
        remove += [line for line in shipped if line.startswith(G1_ONLY) and line not in remove]
    if any(f.startswith(("-Xms", "-Xmx")) for f in add):
        remove.append("any -Xms, -Xmx or -Xmn line, and MAX_HEAP_SIZE / HEAP_NEWSIZE in cassandra-env.sh")
    return add, remove


def jvm_file(add: list[str], remove: list[str]) -> str:
    if not add:
        return "# no JVM option changes\n"
    heap = [f for f in add if f.startswith(("-Xms", "-Xmx"))]
    gc = [f for f in add if f not in heap]
    lines = ["# JVM options: the heap in conf/jvm-server.options, the collector's flags in conf/jvm17-server.options",
             "# (Cassandra 5.0 on Java 17). Remove the lines listed first: the JVM refuses two collectors.", ""]
    lines += ["# remove:"] + [f"#   {line}" for line in remove] + [""] if remove else []
    if heap:
        lines += ["# add to jvm-server.options:"] + heap + [""]
    if gc:
        lines += ["# add to jvm17-server.options:"] + gc
    return "\n".join(lines).rstrip() + "\n"


def schema_file(space, config: Mapping[str, Any], settings: ExportSettings, rewrites: list[Setting]) -> str:
    from ..systems.cassandra.config import place

    placed = place(space, dict(config))
    if not placed.table:
        return "-- no table option changes\n"
    tables = settings.tables or (BENCHMARK_TABLE,)
    lines = ["-- ALTER TABLE for each table given (--table KS.T): run once, on any node; the schema reaches every node."]
    if not settings.tables:
        lines.append(f"-- No --table given: the benchmark's own table {BENCHMARK_TABLE} is named. Give your tables: the "
                     "gain was measured on the benchmark's table and data, not yours.")
    for table in tables:
        ks, t = table.split(".")
        lines += [f"{statement};" for statement in placed.table_statements(ks, t)]
    if rewrites:
        lines += ["", f"-- {', '.join(s.knob for s in rewrites)}: reaches the existing data only once rewritten. Then, "
                  "on one node at a time (PLAN.md says the I/O):"]
        lines += [f"--   nodetool upgradesstables -a -j 1 {t.replace('.', ' ')}" for t in tables]
    return "\n".join(lines) + "\n"


def volume_file(config: Mapping[str, Any], space, settings: ExportSettings) -> str:
    from ..systems.cassandra.config import place

    volume = place(space, dict(config)).volume
    if "read_ahead_kb" not in volume:
        return "# no volume setting changes\n"
    kb = int(volume["read_ahead_kb"])
    device = settings.device
    return "\n".join([
        f"# read-ahead of the data volume: {kb} KiB. blockdev counts 512-byte sectors ({kb} KiB = {kb * 2} sectors).",
        "# Now, on each node (root; no restart; takes effect for reads from now on):",
        f"blockdev --setra {kb * 2} /dev/{device}",
        "# Kept across reboots: a udev rule, e.g. /etc/udev/rules.d/60-cassandra-read-ahead.rules:",
        f'ACTION=="add|change", KERNEL=="{device.split("/")[-1]}", ATTR{{bdi/read_ahead_kb}}="{kb}"',
        "# then: udevadm control --reload && udevadm trigger --subsystem-match=block",
        f"# Check: blockdev --getra /dev/{device} says {kb * 2}." + (
            "" if device != "DEVICE" else " DEVICE: your data volume's device (lsblk; --device names it)."),
    ]) + "\n"


def cass_operator_file(space, config: Mapping[str, Any], add: list[str]) -> str:
    import yaml

    keys = yaml_keys(space, config)
    block: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for dotted, value in keys.items():
        parent, _, child = dotted.rpartition(".")
        (nested.setdefault(parent, {}) if parent else nested)[child] = value
    if nested:
        block["cassandra-yaml"] = nested
    heap = {f[:4]: f[4:] for f in add if f.startswith(("-Xms", "-Xmx"))}
    if heap:
        block["jvm-server-options"] = {"initial_heap_size": heap.get("-Xms"), "max_heap_size": heap.get("-Xmx")}
    others = [f for f in add if not f.startswith(("-Xms", "-Xmx"))]
    if others:
        block["jvm17-server-options"] = {"additional-jvm-opts": others}
    head = [f"# spec.config of a CassandraDatacenter (cass-operator, serverVersion 5.0.x): {CASS_OPERATOR_SOURCE}.",
            "# Merge into your CassandraDatacenter; cass-operator rolls its pods one at a time when spec.config changes.",
            "# Table options (schema.cql) and the volume's read-ahead (volume.txt) are not part of spec.config."]
    if "storage_compatibility_mode" in keys:
        head.append("# storage_compatibility_mode goes in steps: UPGRADING first (one roll of the pods), then NONE (a "
                    "second roll), then the rest of this block; NONE cannot be undone (PLAN.md).")
    if not block:
        return "\n".join(head + ["# nothing of this configuration goes into spec.config"]) + "\n"
    return "\n".join(head) + "\n" + yaml.safe_dump({"spec": {"config": block}}, sort_keys=False)


def _value(v: Any) -> str:
    return "-" if v is None else str(v)


def plan_file(settings_list: list[Setting], evidence: Evidence, settings: ExportSettings) -> str:
    def rows(items: list[Setting]) -> list[str]:
        return [f"| {s.knob} | {_value(s.before)} | {_value(s.after)} | {', '.join(s.tags)} | "
                f"{'; '.join(s.notes) or '-'} |" for s in items]

    applied = [s for s in settings_list if s.route != "inert" and "optional" not in s.tags]
    optional = [s for s in settings_list if s.route != "inert" and "optional" in s.tags]
    inert = [s for s in settings_list if s.route == "inert"]
    out = ["# The plan", "", f"**Evidence.** {evidence.line()}.", ""]
    if not evidence.confirmed:
        out += ["**NOT CONFIRMED against the default at p < 0.05** (exported with --force): measure it with "
                "`nosqltune compare --repeat 10` before any of it reaches a production node.", ""]
    if settings.rig:
        out += [f"**Tuned on.** {settings.rig}. Settings tagged *tuned on the rig* (memory sizes, thread counts) fit "
                "that node: scale them to yours (a heap that left the page cache room on a 2 GiB node is not the heap "
                "of a 64 GiB one) and measure again.", ""]
    out += ["| setting | default | tuned | how it is applied | notes |", "|---|---|---|---|---|", *rows(applied), ""]
    if optional:
        out += ["## Optional: reverting them cost nothing measurable (the ablation)", "",
                "| setting | default | tuned | how it is applied | notes |", "|---|---|---|---|---|", *rows(optional), ""]
    if inert:
        out += ["## Without effect under this configuration (not applied)", ""]
        out += [f"- {s.knob} = {_value(s.after)}: {'; '.join(s.notes)}" for s in inert] + [""]
    out += ["## In this order", ""]
    steps = _steps(applied, settings)
    out += [f"{i}. {step}" for i, step in enumerate(steps, 1)] or ["Nothing to apply."]
    return "\n".join(out).rstrip() + "\n"


def _steps(applied: list[Setting], settings: ExportSettings) -> list[str]:
    steps = []
    live = [s for s in applied if "live" in s.tags]
    if live:
        steps.append("Live settings, one node at a time, watching the node's latencies after each: "
                     + "; ".join(f"{s.knob} -> {s.after} ({s.how})" for s in live)
                     + ". Write the node settings among them into cassandra.yaml too (cassandra.yaml.patch): a "
                       "live change lasts until the node restarts.")
    if any("cluster-wide, in steps" in s.tags for s in applied):
        steps += [f"Cluster-wide, in steps (irreversible): {step}." for step in COMPATIBILITY_STEPS]
    restart = [s for s in applied if "restart" in s.tags and "cluster-wide, in steps" not in s.tags]
    if restart:
        steps.append("Restart settings: " + ", ".join(s.knob for s in restart) + " (cassandra.yaml.patch, "
                     "jvm-server.options). A rolling restart, one node at a time: drain, restart, wait until "
                     "`nodetool status` shows it UN and its hints are replayed before the next.")
    if any(s.applies == "table" for s in applied):
        steps.append("Table options: schema.cql, once, on any node.")
    rewrite = [s for s in applied if "rewrite" in s.tags]
    if rewrite:
        if settings.data_bytes_per_node:
            gib = settings.data_bytes_per_node / 2 ** 30
            hours = 2 * settings.data_bytes_per_node / (DEFAULT_THROTTLE_MIB_S * 2 ** 20) / 3600
            cost = (f"about {gib:,.1f} GiB read and as much written per node ({settings.data_source}), about "
                    f"{hours:,.1f} h per node at {DEFAULT_THROTTLE_MIB_S} MiB/s")
        else:
            cost = "its I/O is the table's live data, read and written once per node (give --tablestats to count it)"
        steps.append(f"Rewrite for {', '.join(s.knob for s in rewrite)}: `nodetool upgradesstables -a -j 1` on one "
                     f"node at a time, throttled by `nodetool setcompactionthroughput {DEFAULT_THROTTLE_MIB_S}` "
                     f"(lower it if requests slow down): {cost}; free disk for the largest table's rewrite first.")
    if any(s.applies == "volume" for s in applied):
        steps.append("The volume's read-ahead: volume.txt, on each node, any time (no restart).")
    design = [s for s in applied if s.applies == "design"]
    if design:
        steps.append("Physical design (" + ", ".join(f"{s.knob} {s.after}" for s in design) + "): not a configuration "
                     "change; adding nodes or replicas streams data and needs a repair.")
    return steps


def tablestats_bytes(text: str, tables: Sequence[str] = ()) -> float | None:
    """Live bytes of the tables `tables` (all when empty) in `nodetool tablestats` output: the sum of their "Space
    used (live)" lines, None when the output names none of them."""
    total, keyspace, found = 0.0, None, False
    table = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Keyspace :") or stripped.startswith("Keyspace:"):
            keyspace = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("Table:") or stripped.startswith("Table (index):"):
            table = stripped.split(":", 1)[1].strip()
        elif stripped.startswith("Space used (live):") and table is not None:
            if not tables or f"{keyspace}.{table}" in tables:
                total += float(stripped.split(":", 1)[1].split()[0])
                found = True
    return total if found else None


@dataclass
class Export:
    """The files of one export (name -> text) and the settings they came from."""

    files: dict[str, str] = field(default_factory=dict)
    settings: list[Setting] = field(default_factory=list)
    evidence: Evidence | None = None


def export_config(space, config: Mapping[str, Any], evidence: Evidence, settings: ExportSettings) -> Export:
    """Every file of the module docstring for `config` (knob values of the Cassandra knob space `space`)."""
    tagged = settings_of(space, config, settings.optional)
    applied = {s.knob: s.after for s in tagged if s.route != "inert" and s.applies != "design"}
    rewrites = [s for s in tagged if "rewrite" in s.tags]
    add, remove = jvm_edits(space, applied)
    files = {
        "cassandra.yaml.patch": yaml_patch(yaml_keys(space, applied), settings),
        "jvm-server.options": jvm_file(add, remove),
        "schema.cql": schema_file(space, applied, settings, rewrites),
        "volume.txt": volume_file(applied, space, settings),
        "cass-operator.yaml": cass_operator_file(space, applied, add),
        "PLAN.md": plan_file(tagged, evidence, settings),
    }
    files["plan.json"] = plan_json(space, applied, tagged, evidence, settings, add, remove)
    return Export(files=files, settings=tagged, evidence=evidence)


def plan_json(space, applied: Mapping[str, Any], tagged: list[Setting], evidence: Evidence,
              settings: ExportSettings, add: list[str], remove: list[str]) -> str:
    """PLAN.md's content as data: what `nosqltune rollout` applies (only the settings not marked optional)."""
    import json

    from ..systems.cassandra.config import place

    chosen = {s.knob for s in tagged if s.route != "inert" and "optional" not in s.tags}
    values = {k: v for k, v in applied.items() if k in chosen}
    placed = place(space, dict(values))
    tables = list(settings.tables)
    rewrite = [s.knob for s in tagged if "rewrite" in s.tags and s.knob in chosen]
    plan = {"plan": "nosqltune", "format": PLAN_FORMAT, "system": "cassandra", "version": settings.version,
            "knob_set": getattr(space, "label", None),
            "evidence": {"line": evidence.line(), "confirmed": evidence.confirmed, "speedup": evidence.speedup,
                         "p_value": evidence.p_value, "pairs": evidence.pairs},
            "config": values, "settings": [s.as_dict() for s in tagged],
            "live": {s.knob: s.after for s in tagged if "live" in s.tags and s.knob in chosen
                     and s.applies not in ("table", "keyspace")},   # node settings over JMX; tables: "schema"
            "yaml": dict(placed.yaml), "jvm": {"add": list(placed.jvm), "remove": remove if placed.jvm else []},
            "tables": tables,
            "schema": [st for t in tables for st in placed.table_statements(*t.split("."))],
            "table_options": sorted(placed.table),
            "rewrite": {"knobs": rewrite, "tables": tables if rewrite else [],
                        "throttle_mib_s": DEFAULT_THROTTLE_MIB_S},
            "volume": dict(placed.volume)}
    return json.dumps(plan, indent=1, default=str) + "\n"
