"""Split a Cassandra configuration into where each knob applies: cassandra.yaml, CQL table/keyspace, JVM."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...knobs import KnobSpace

# Cassandra's own defaults of the option maps a knob may set one key of; CQL replaces a whole map.
MAP_DEFAULTS: dict[str, dict[str, str]] = {
    "compaction": {"class": "SizeTieredCompactionStrategy"},
    "compression": {"class": "LZ4Compressor"},
    "caching": {"keys": "ALL", "rows_per_partition": "NONE"},
    "replication": {"class": "SimpleStrategy", "replication_factor": "1"},
}


@dataclass
class PlacedConfig:
    yaml: dict[str, Any] = field(default_factory=dict)            # dotted yaml key -> rendered value
    table: dict[str, dict[str, Any]] = field(default_factory=dict)  # option -> map (or scalar under "")
    keyspace: dict[str, dict[str, Any]] = field(default_factory=dict)
    jvm: list[str] = field(default_factory=list)
    reload: dict[str, Any] = field(default_factory=dict)          # knobs that shape the loaded data
    reload_yaml: dict[str, Any] = field(default_factory=dict)     # their yaml part, set when loading
    reload_table: dict[str, dict[str, Any]] = field(default_factory=dict)   # their table part, set before loading
    volume: dict[str, Any] = field(default_factory=dict)          # settings of the node's own volume (read-ahead)
    restaged: dict[str, str] = field(default_factory=dict)        # reload knobs brought on restored data -> the
    # SSTable component the node rebuilds with their value (Knob.restaged): set after the boot, not when loading

    def table_statements(self, keyspace: str, table: str) -> list[str]:
        return [alter_table(keyspace, table, self.table)] if self.table else []

    def reload_table_statements(self, keyspace: str, table: str) -> list[str]:
        """The table options that shape the SSTables on disk (compression, ...), set before the data is loaded."""
        return [alter_table(keyspace, table, self.reload_table)] if self.reload_table else []

    def reload_table_options(self) -> str | None:
        """Those table options as the body of a CQL WITH clause (for a CREATE TABLE), or None."""
        return _cql_options(self.reload_table) if self.reload_table else None

    def keyspace_statements(self, keyspace: str) -> list[str]:
        return [f"ALTER KEYSPACE {keyspace} WITH {_cql_options(self.keyspace)}"] if self.keyspace else []


def _cql_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _cql_options(options: dict[str, Any]) -> str:
    parts = []
    for name, value in options.items():
        if isinstance(value, dict):
            inner = ", ".join(f"'{k}': {_cql_value(str(v) if not isinstance(v, bool) else v)}" for k, v in value.items())
            parts.append(f"{name} = {{{inner}}}")
        else:
            parts.append(f"{name} = {_cql_value(value)}")
    return " AND ".join(parts)


def alter_table(keyspace: str, table: str, options: dict[str, Any]) -> str:
    """The CQL statement that sets these table options (a map option is replaced whole)."""
    return f"ALTER TABLE {keyspace}.{table} WITH {_cql_options(options)}"


def place(space: KnobSpace, overrides: dict[str, Any], restage: bool = False) -> PlacedConfig:
    """Put each overridden knob (validated) where it applies; knobs whose condition is off are left out.
    `restage`: the trial can bring restored data to a reload knob's value where the knob says so (`restaged`),
    so such a knob does not shape the dataset (it is set after the boot like any table option).

    `overrides` were validated by the caller, who decided whether values outside the tuning range are
    allowed; Cassandra's own bounds still hold here."""
    full = space.with_defaults(overrides, allow_outside_range=True)
    placed = PlacedConfig()
    for name, value in overrides.items():
        knob = space[name]
        if not knob.is_active(full) or knob.applies == "design":   # the design is the trial's (trial.with_design)
            continue
        rendered = knob.rendered(value)
        if restage and knob.reload and knob.is_restaged(full):
            placed.restaged[name] = knob.restaged["component"]
        elif knob.reload:
            placed.reload[name] = value
        if knob.applies == "yaml":
            # with the settings the value needs beside it (e.g. bti: storage_compatibility_mode NONE)
            for key, written in {knob.key: rendered, **(knob.implies or {}).get(value, {})}.items():
                placed.yaml[key] = written
                if name in placed.reload:
                    placed.reload_yaml[key] = written
        elif knob.applies == "jvm":   # a template may hold several flags (the heap: -Xms and -Xmx)
            placed.jvm.extend(knob.key.format(value=rendered).split())
        elif knob.applies == "volume":
            placed.volume[knob.key] = value
        else:
            target = placed.table if knob.applies == "table" else placed.keyspace
            option, _, sub = knob.key.partition(".")
            if sub:
                target.setdefault(option, dict(MAP_DEFAULTS.get(option, {})))[sub] = rendered
            else:
                target[option] = rendered
    # a map option set by one knob must carry the other knobs' values of the same map, default or not
    for target, kind in ((placed.table, "table"), (placed.keyspace, "keyspace")):
        for knob in space:
            if knob.applies != kind or not knob.is_active(full):
                continue
            option, _, sub = knob.key.partition(".")
            if sub and option in target and sub not in target[option]:
                target[option][sub] = knob.rendered(full[knob.name])
    for option in _shaping_options(space, placed.reload):
        value = placed.table[option]
        if isinstance(value, dict):   # only the parts of the map that shape the data (the dataset is keyed by
            # them): the compaction strategy without its sizes, which ALTER TABLE sets after the restore
            others = {k.key.partition(".")[2] for k in space
                      if not k.reload and k.applies == "table" and k.key.startswith(option + ".")}
            value = {k: v for k, v in value.items() if k not in others}
        placed.reload_table[option] = value
    for options in (placed.table, placed.reload_table):
        if (options.get("compression") or {}).get("class") == "none":
            options["compression"] = {"enabled": "false"}   # uncompressed: Cassandra takes no other option
    return placed


def _shaping_options(space: KnobSpace, reload: dict[str, Any]) -> list[str]:
    """The table options that a knob with `reload` sets: the data is loaded with them."""
    return list(dict.fromkeys(space[name].key.partition(".")[0] for name in reload
                              if space[name].applies == "table"))
