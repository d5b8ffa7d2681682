"""Knob values -> scylla.yaml entries.

ScyllaDB 6.2 has only the old-style keys whose name carries the unit (`commitlog_segment_size_in_mb`), with bare
numbers as values. `Knob.rendered` (used by the Cassandra target's `place`) appends the unit for yaml knobs
('32MiB'), which ScyllaDB fails to convert: it logs an error and starts with the option's default. So numbers are
written here as plain numbers in the knob's unit.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...knobs import KnobError, KnobSpace


def render_scylla_yaml(space: KnobSpace, overrides: Mapping[str, Any], *,
                       allow_outside_range: bool = True) -> dict[str, Any]:
    """The scylla.yaml entries of the overridden knobs: {key: value}, values typed and in ScyllaDB's units.

    Like the Cassandra target's `place`: a knob whose condition is off under the configuration (defaults filled
    in) is left out, and values outside the tuning range are accepted unless `allow_outside_range` is false
    (what ScyllaDB accepts, the knob's bounds, is always checked). KnobError for an unknown knob, a wrong type
    or a knob that does not apply to scylla.yaml."""
    typed = space.validate(overrides or {}, allow_outside_range=allow_outside_range)
    full = space.with_defaults(typed, allow_outside_range=True)
    out: dict[str, Any] = {}
    for name, value in typed.items():
        knob = space[name]
        if knob.applies != "yaml":
            raise KnobError(f"knob {name} applies to {knob.applies}, not to scylla.yaml")
        if not knob.is_active(full):
            continue
        if knob.type == "enum" and knob.value_map:
            value = knob.value_map.get(value, value)
        node = out
        *parents, leaf = knob.key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
