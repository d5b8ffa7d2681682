"""A cassandra-stress profile's schema on the rig's node: its keyspace with the replication rewritten for the rig,
and its table with the profile's options under the knobs' (the profile's options, or a snapshot's table's, are the
study's baseline)."""

from __future__ import annotations

from typing import Any

from ...workloads.profile import replication_for
from .config import _cql_options


def create_keyspace(profile: dict[str, Any], nodes: int) -> tuple[str, str | None]:
    """(CREATE KEYSPACE for the rig, the replication's rewrite in words or None)."""
    replication, said = replication_for(profile["replication"], nodes)
    options = {"replication": replication, **profile.get("keyspace_options", {})}
    return f"CREATE KEYSPACE IF NOT EXISTS {profile['keyspace']} WITH {_cql_options(options)}", said


def create_table(profile: dict[str, Any], knob_options: dict[str, Any]) -> str:
    """The profile's CREATE TABLE, keyspace-qualified, its options under `knob_options` (a knob's option replaces
    the profile's: its baseline)."""
    table = profile["table"]
    columns = ", ".join(f'"{n}" {t}' + (" static" if n in table["static"] else "") for n, t in table["columns"].items())
    key = "(" + ", ".join(f'"{c}"' for c in table["partition_key"]) + ")"
    key += "".join(f', "{c}"' for c in table["clustering"])
    clauses = []
    if table["order"]:
        clauses.append("CLUSTERING ORDER BY (" + ", ".join(f'"{c}" {d}' for c, d in table["order"].items()) + ")")
    options = {**table["options"], **knob_options}
    if options:
        clauses.append(_cql_options(options))
    return (f"CREATE TABLE {profile['keyspace']}.{table['name']} ({columns}, PRIMARY KEY ({key}))"
            + (" WITH " + " AND ".join(clauses) if clauses else ""))


def table_knob_defaults(space, options: dict[str, Any]) -> dict[str, Any]:
    """The knob values a table's options amount to (its compaction strategy, window, compression, gc grace, TTL
    ...; a profile's or a snapshot's schema.cql's, as CQL literals' values): the defaults of a study on that table,
    so that its default configuration is Cassandra's defaults plus the table's own options, and a knob that moves
    one replaces the table's value."""
    out: dict[str, Any] = {}
    for knob in space:
        if knob.applies != "table":
            continue
        option, _, sub = knob.key.partition(".")
        value = (options.get(option) or {}).get(sub) if sub and isinstance(options.get(option), dict) else \
            (options.get(option) if not sub else None)
        if (knob.key == "compression.class" and isinstance(options.get("compression"), dict)
                and str(options["compression"].get("enabled", "true")).lower() == "false" and "none" in knob.choices):
            value = "none"   # an uncompressed table: {'enabled': 'false'}, no class
        if value is None:
            continue
        text = str(value).rsplit(".", 1)[-1] if sub == "class" else str(value)
        if knob.type == "enum":
            match = next((c for c in knob.choices if str(knob.rendered(c)).rsplit(".", 1)[-1] == text
                          or str(c) == text), None)
            if match is not None:
                out[knob.name] = match
        else:
            try:
                out[knob.name] = knob._typed(float(text) if knob.type == "float" else int(float(text)))
            except (ValueError, Exception):   # a value the knob cannot hold stays the table's, unsearched
                continue
    return out
