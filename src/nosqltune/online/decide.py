"""SOPHIA's cost-benefit: make a change that needs a restart or an SSTable rewrite only when it pays.

SOPHIA (Mahgoub et al., USENIX ATC 2019) reconfigures a running cluster only when the benefit predicted over a
coming window exceeds the cost of the reconfiguration, and restarts its nodes one at a time so that the data stays
available. `decide_restart` weighs the two in operations, with every figure kept in the `Decision`:

Benefit. The model predicts the throughput of the running configuration and of the recommended one for the
current mix. Both come from the model, and only their ratio is used: the gain is the relative gain
`predicted_new / predicted_now - 1` times the throughput measured now, in operations per second. The model was
fitted on trials of some cluster on some day, and the cluster watched may run at another pace (other machines,
another load beside it, a slower day: on 2026-11-28 this machine ran the trace at a tenth of the pace the model
was collected at). A bias the model has for both configurations alike, and a pace of the cluster other than the
model's, cancel in the ratio, and the gain is then in the same operations as the cost, which is measured on the
cluster. A difference of the two predictions would promise the model's absolute ops/s to a cluster that serves
a tenth of them. It is earned only once the change has taken effect, after the whole rolling restart (N
nodes one after another) and, for a rewrite, after the SSTables are rewritten. It is also earned only while the
mix lasts. The mix is taken to end at a constant rate, so it still holds at time t with probability exp(-t / tau),
where tau is the mean dwell time of the mixes seen so far (`ShiftDetector.mean_dwell_seconds`). The expected
gain over the horizon H (default 30 min) is therefore

    gain x integral from T to H of exp(-t / tau) dt  =  gain x tau x (exp(-T / tau) - exp(-H / tau)),

where T is when the change takes effect, and it is 0 when T >= H. Without a dwell estimate it is gain x (H - T).
A mix that shifts every few minutes earns little of a 30-minute horizon, and a restart cannot pay for it.

Cost of a rolling restart. Each node is drained, restarted and rejoins in turn, taking `restart_seconds`: the mean
of the restarts measured on this cluster before, or else `default_restart_seconds` (120 s, a stated default and
not a measurement). While a node is out, the cluster loses the larger of two shares. One is its share of the
capacity, 1/N (the clients retry on the other replicas). The other applies when the remaining replicas cannot
satisfy the consistency level (RF - 1 < the replicas a request needs, e.g. RF 1, or QUORUM with RF 2): the
requests on the ranges the node replicates fail, min(1, RF/N) of them. On one node that is everything. The
operations lost are N x restart_seconds x lost share x the throughput measured now. This is the cost at full speed:
a cluster with headroom loses less.

Cost of a rewrite. Each node rewrites its own SSTables (`nodetool upgradesstables -a`, or the compactions a new
strategy starts), all nodes at once, in bytes per node / rewrite rate seconds. Meanwhile it takes
`rewrite_slowdown` (default 25%, a stated default) of the throughput measured now.

Verdict: act when the expected gain exceeds the cost by the margin, gain > (1 + margin) x cost (default margin
0.5). The gain is a model's prediction for a configuration never run on this cluster, while the cost is measured,
so a restart has to promise clearly more than it costs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Sequence

from ..errors import UsageError


@dataclass(frozen=True)
class CostSettings:
    """The horizon, the margin and the stated defaults of the rule above."""

    horizon_seconds: float = 1800.0
    margin: float = 0.5
    default_restart_seconds: float = 120.0
    rewrite_slowdown: float = 0.25

    def __post_init__(self) -> None:
        for name in ("horizon_seconds", "default_restart_seconds"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UsageError(f"{name} must be a number of seconds > 0, got {value!r}")
        if not (isinstance(self.margin, (int, float)) and math.isfinite(self.margin) and self.margin >= 0):
            raise UsageError(f"margin must be >= 0, got {self.margin!r}")
        if not (isinstance(self.rewrite_slowdown, (int, float)) and 0 <= self.rewrite_slowdown <= 1):
            raise UsageError(f"rewrite_slowdown must be a share in [0, 1], got {self.rewrite_slowdown!r}")


@dataclass(frozen=True)
class Decision:
    """Every number of one cost-benefit decision, in operations and seconds, and its verdict ("act" or "hold")."""

    verdict: str
    action: str                         # "rolling restart", "rewrite" or "rolling restart and rewrite"
    reason: str
    predicted_now: float                # ops/s the model predicts for the running configuration
    predicted_new: float                # ops/s for the recommended one
    gain_ops_per_second: float          # (predicted_new / predicted_now - 1) x current_ops_per_second
    horizon_seconds: float
    dwell_seconds: float | None         # tau; None: no estimate, no discount
    takes_effect_seconds: float         # T: rollout plus rewrite
    expected_gain_operations: float
    current_ops_per_second: float
    nodes: int
    replication_factor: int
    replicas_needed: int
    restart_seconds_per_node: float
    restart_seconds_source: str         # "measured (n)" or "default"
    lost_share: float                   # of the throughput while one node is out
    unavailable: bool                   # requests on the restarting node's ranges fail meanwhile
    restart_cost_operations: float
    rewrite_seconds: float
    rewrite_cost_operations: float
    cost_operations: float
    margin: float

    @property
    def act(self) -> bool:
        return self.verdict == "act"

    def as_dict(self) -> dict:
        return {**asdict(self), "act": self.act}


def _number(name: str, value: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
            or (positive and value == 0):
        raise UsageError(f"{name} must be a number {'> 0' if positive else '>= 0'}, got {value!r}")
    return float(value)


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a whole number >= 1, got {value!r}")
    return value


def expected_gain(gain: float, takes_effect: float, horizon: float, dwell: float | None) -> float:
    """gain x integral from takes_effect to horizon of exp(-t / dwell) dt (no discount when dwell is None)."""
    if takes_effect >= horizon:
        return 0.0
    if dwell is None or math.isinf(dwell):
        return gain * (horizon - takes_effect)
    return gain * dwell * (math.exp(-takes_effect / dwell) - math.exp(-horizon / dwell))


def lost_share(nodes: int, replication_factor: int, replicas_needed: int) -> tuple[float, bool]:
    """The share of the throughput lost while one of `nodes` is out, and whether requests fail meanwhile."""
    rf = min(replication_factor, nodes)
    capacity = 1.0 / nodes
    if rf - 1 < replicas_needed:
        return max(capacity, min(1.0, rf / nodes)), True
    return capacity, False


def decide_restart(*, predicted_now: float, predicted_new: float, current_ops_per_second: float, nodes: int,
                   replication_factor: int, dwell_seconds: float | None, restart: bool = True,
                   replicas_needed: int = 1, measured_restart_seconds: Sequence[float] = (),
                   rewrite_bytes_per_node: float = 0.0, rewrite_bytes_per_second: float | None = None,
                   settings: CostSettings = CostSettings()) -> Decision:
    """Weigh a rolling restart and/or an SSTable rewrite against the gain the model predicts (module docstring).

    `replicas_needed`: replicas a request needs at the clients' consistency level (ONE: 1, QUORUM: RF // 2 + 1).
    `measured_restart_seconds`: earlier restarts of one node on this cluster (drain to rejoined).
    `rewrite_bytes_per_node` > 0 asks for a rewrite, at `rewrite_bytes_per_second` per node (e.g. the compaction
    throughput cap)."""
    now = _number("predicted_now", predicted_now)
    new = _number("predicted_new", predicted_new)
    current = _number("current_ops_per_second", current_ops_per_second)
    n = _count("nodes", nodes)
    rf = _count("replication_factor", replication_factor)
    needed = _count("replicas_needed", replicas_needed)
    if needed > rf:
        raise UsageError(f"a request cannot need {needed} replicas with replication factor {rf}")
    dwell = None if dwell_seconds is None else _number("dwell_seconds", dwell_seconds, positive=True)
    measured = [_number("a measured restart", s, positive=True) for s in measured_restart_seconds]
    rewrite_bytes = _number("rewrite_bytes_per_node", rewrite_bytes_per_node)
    rewrite = rewrite_bytes > 0
    if not restart and not rewrite:
        raise UsageError("nothing to decide: neither a restart nor a rewrite is asked for")
    if rewrite and rewrite_bytes_per_second is None:
        raise UsageError("a rewrite needs its rate in bytes per second per node")
    rate = _number("rewrite_bytes_per_second", rewrite_bytes_per_second, positive=True) if rewrite else 0.0

    if measured:
        per_node, source = sum(measured) / len(measured), f"measured ({len(measured)})"
    else:
        per_node, source = settings.default_restart_seconds, "default"
    share, unavailable = lost_share(n, rf, needed)
    rollout = n * per_node if restart else 0.0
    restart_cost = rollout * share * current if restart else 0.0
    rewrite_seconds = rewrite_bytes / rate if rewrite else 0.0
    rewrite_cost = rewrite_seconds * settings.rewrite_slowdown * current
    cost = restart_cost + rewrite_cost
    takes_effect = rollout + rewrite_seconds
    relative = new / now - 1.0 if now > 0 else 0.0   # nothing predicted for the running one: no gain
    gain = relative * current   # the model's relative gain at the pace measured now
    horizon = settings.horizon_seconds
    earned = expected_gain(gain, takes_effect, horizon, dwell) if gain > 0 else 0.0
    action = " and ".join(a for a, on in (("rolling restart", restart), ("rewrite", rewrite)) if on)

    dwell_text = "no dwell estimate" if dwell is None else f"mean dwell {dwell:.0f} s"
    if gain <= 0:
        verdict, why = "hold", f"the model predicts no gain ({now:.0f} -> {new:.0f} ops/s)"
    elif takes_effect >= horizon:
        verdict, why = "hold", f"the change takes effect after {takes_effect:.0f} s, beyond the {horizon:.0f} s horizon"
    elif earned > (1.0 + settings.margin) * cost:
        verdict, why = "act", (f"expected gain {earned:.0f} ops > (1 + {settings.margin:g}) x cost {cost:.0f} ops")
    else:
        verdict, why = "hold", (f"expected gain {earned:.0f} ops <= (1 + {settings.margin:g}) x cost {cost:.0f} ops")
    parts = [f"{action}: {why}", f"gain {gain:+.0f} ops/s ({relative:+.1%} of {current:.0f} ops/s measured; "
                                 f"the model: {now:.0f} -> {new:.0f}) over {horizon:.0f} s from {takes_effect:.0f} s, "
                                 f"{dwell_text}"]
    if restart:
        parts.append(f"restart {per_node:.0f} s/node ({source}) x {n} node(s), {share:.0%} of {current:.0f} ops/s "
                     f"lost meanwhile" + (" (requests on its ranges fail)" if unavailable else ""))
    if rewrite:
        parts.append(f"rewrite {rewrite_seconds:.0f} s at {settings.rewrite_slowdown:.0%} of the throughput")
    return Decision(verdict=verdict, action=action, reason="; ".join(parts), predicted_now=now, predicted_new=new,
                    gain_ops_per_second=gain, horizon_seconds=horizon, dwell_seconds=dwell,
                    takes_effect_seconds=takes_effect, expected_gain_operations=earned,
                    current_ops_per_second=current, nodes=n, replication_factor=rf, replicas_needed=needed,
                    restart_seconds_per_node=per_node if restart else 0.0, restart_seconds_source=source if restart
                    else "-", lost_share=share if restart else 0.0, unavailable=unavailable and restart,
                    restart_cost_operations=restart_cost, rewrite_seconds=rewrite_seconds,
                    rewrite_cost_operations=rewrite_cost, cost_operations=cost, margin=settings.margin)
