"""Splitting a recommended configuration into what changes live, what needs a restart and what needs a rewrite.

The route of each changed knob is decided from the knob space's own metadata (knobs/<system>.yaml: `applies`,
`live`, `reload`, `key`), never from a list of names, apart from the knobs `PlanSettings.first_start_only` names:

- live: a node setting with a `live` path (a nodetool or JMX operation, e.g. concurrent_reads by `nodetool
  setconcurrency ReadStage`, compaction_throughput by `nodetool setcompactionthroughput`), and a table option
  that takes effect for the table as it stands once ALTER TABLE changes the schema (caching, memtable). A change
  made over JMX lasts only until the node restarts, so the caller also writes it into cassandra.yaml for the
  next start.
- rewrite: a table option that shapes the SSTables on disk. That is the knob's `reload` mark ("the data is loaded
  with it": compression, its chunk length and level, the bloom filter's chance) or an option of `compaction` or
  `compression`. ALTER TABLE sets it at once, but it reaches only SSTables written afterwards. Compaction
  options lay the data out again only as compaction rewrites it. The gain comes after a rewrite
  (`nodetool upgradesstables -a`, or the compactions a new strategy starts), and it costs like one.
- restart+rewrite: a node setting without a live path that shapes the SSTables (sstable_format): the node
  restarts with it, and the existing data keeps the old form until it is rewritten.
- restart: any other node setting without a live path (cassandra.yaml keys, JVM flags: the heap, the
  collector). Nodes restart one at a time.
- fixed: what re-tuning a running cluster cannot change. A `design` knob (the number of nodes, the replication
  factor: adding nodes or replicas streams data and needs a repair), a `volume` knob (the node's disk is not
  ours to change), a keyspace option without a live path, and a setting read at a node's first start only
  (`first_start_only`: num_tokens, whose notes say that changing it later fails startup).

A changed knob that has no effect under the recommended configuration (its `condition` does not hold, e.g. a
leveled-compaction option while the strategy stays size-tiered) is listed as inert and not applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import UsageError
from ..knobs import Knob, KnobSpace

ROUTES = ("live", "rewrite", "restart+rewrite", "restart", "fixed", "inert")
_SHAPING_OPTIONS = ("compaction", "compression")   # table options whose effect comes from the SSTables' layout


@dataclass(frozen=True)
class PlanSettings:
    """Knobs a node reads at its first start only: a running cluster cannot take a new value by restarting."""

    first_start_only: tuple[str, ...] = ("num_tokens",)

    def __post_init__(self) -> None:
        if isinstance(self.first_start_only, str) or not all(isinstance(n, str) for n in self.first_start_only):
            raise UsageError(f"first_start_only must be a tuple of knob names, got {self.first_start_only!r}")


@dataclass(frozen=True)
class Change:
    """One knob to change: its value running and recommended, its route (ROUTES), how it is made, and why."""

    knob: str
    applies: str
    before: Any
    after: Any
    route: str
    how: str
    reason: str

    def as_dict(self) -> dict:
        return {"knob": self.knob, "applies": self.applies, "before": self.before, "after": self.after,
                "route": self.route, "how": self.how, "reason": self.reason}


@dataclass(frozen=True)
class Plan:
    """The changes of a recommendation against the running configuration, each with its route."""

    changes: tuple[Change, ...]

    def _route(self, *routes: str) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.route in routes)

    @property
    def live(self) -> tuple[Change, ...]:
        return self._route("live")

    @property
    def restart(self) -> tuple[Change, ...]:
        """Changes that need the nodes restarted (with or without a rewrite after)."""
        return self._route("restart", "restart+rewrite")

    @property
    def rewrite(self) -> tuple[Change, ...]:
        """Changes that reach the existing data only once its SSTables are rewritten."""
        return self._route("rewrite", "restart+rewrite")

    @property
    def fixed(self) -> tuple[Change, ...]:
        return self._route("fixed")

    @property
    def inert(self) -> tuple[Change, ...]:
        return self._route("inert")

    @property
    def needs_restart(self) -> bool:
        return bool(self.restart)

    @property
    def needs_rewrite(self) -> bool:
        return bool(self.rewrite)

    def routes(self) -> dict[str, str]:
        """knob -> route, for printing and tests."""
        return {c.knob: c.route for c in self.changes}

    def as_dict(self) -> dict:
        return {"changes": [c.as_dict() for c in self.changes], "needs_restart": self.needs_restart,
                "needs_rewrite": self.needs_rewrite}


def _shapes_sstables(knob: Knob) -> bool:
    return knob.reload or (knob.applies == "table" and knob.key.split(".")[0] in _SHAPING_OPTIONS)


def route_of(knob: Knob, settings: PlanSettings = PlanSettings()) -> tuple[str, str, str]:
    """(route, how, reason) of a change of `knob`, from its metadata (the module docstring's rules)."""
    if knob.name in settings.first_start_only:
        return "fixed", "-", "read at a node's first start only: a new value needs the data loaded again"
    if knob.applies == "design":
        return "fixed", "-", "physical design: more nodes or replicas stream data and need a repair"
    if knob.applies == "volume":
        return "fixed", "-", "a setting of the node's own volume, which re-tuning does not own"
    if knob.applies == "table":
        how = knob.live or f"ALTER TABLE <ks>.<table> WITH {knob.key.split('.')[0]} = ..."
        if _shapes_sstables(knob):
            return "rewrite", how, "shapes the SSTables: ALTER TABLE reaches only SSTables written afterwards"
        return "live", how, "a table option that takes effect with ALTER TABLE"
    if knob.applies == "keyspace":
        if knob.live:
            return "live", knob.live, "a keyspace option with a live path"
        return "fixed", "-", "a keyspace option without a live path"
    # node settings: yaml, jvm, config
    if knob.live and not knob.reload:
        return "live", knob.live, f"a {knob.applies} setting with a live path"
    if knob.live:   # live for new SSTables only
        return "rewrite", knob.live, "set live, but it shapes the SSTables: the existing data needs a rewrite"
    if knob.reload:
        return "restart+rewrite", "rolling restart", \
            "read at start and shapes the SSTables: restart, then rewrite the existing data"
    return "restart", "rolling restart", f"a {knob.applies} setting read at start (no live path)"


def _full(space: KnobSpace, config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with every knob it leaves out at its default, values typed."""
    full = {k.name: k.default for k in space}
    full.update({space[name].name: space[name].coerce(value, allow_outside_range=True)
                 for name, value in config.items()})
    return full


def plan_changes(space: KnobSpace, running: Mapping[str, Any], recommended: Mapping[str, Any],
                 settings: PlanSettings = PlanSettings()) -> Plan:
    """The changes that take `running` (knob -> value; knobs left out hold their defaults) to `recommended`, in
    the space's knob order, each routed by `route_of`. Unknown knobs and bad values raise KnobError."""
    before = _full(space, running)
    after = {**before, **{space[name].name: space[name].coerce(value, allow_outside_range=True)
                          for name, value in recommended.items()}}
    changes = []
    for knob in space:
        old, new = before[knob.name], after[knob.name]
        if old == new:
            continue
        if not knob.is_active(after):
            changes.append(Change(knob.name, knob.applies, old, new, "inert", "-",
                                  f"no effect under the recommended configuration ({knob.condition})"))
            continue
        route, how, reason = route_of(knob, settings)
        changes.append(Change(knob.name, knob.applies, old, new, route, how, reason))
    return Plan(tuple(changes))
