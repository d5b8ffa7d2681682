"""LlamaTune (Kanellis et al., VLDB 2022; the MLOS / LlamaTune report of Dhawan et al. tuned Cassandra and
Redis with it through MLOS): the optimizer searches a small synthetic space that is mapped onto all the knobs.

Any optimizer of the ask/tell interface is wrapped: it sees `dims` real knobs y_1..y_d in [-1, 1] and the
adapter turns each point into a full configuration with three techniques:

1. Random linear projection (HeSBO, the hashing-enhanced subspace Bayesian optimization of Nayebi et al., ICML
   2019, which LlamaTune uses): every knob i is given one synthetic dimension h(i) and a sign s(i), drawn once
   from the seed; its position in [0, 1] is (s(i) * y_h(i) + 1) / 2. Knobs that share a dimension
   move together, so d dimensions steer all the knobs. Categorical and boolean knobs are projected the same
   way, their position split into equal shares, one per choice (as the paper does).
2. Special-value biasing: a numeric knob with special values in the knob space (0 = disabled, ...) takes one
   of them whenever its position falls in the first `special_bias` share of [0, 1]; the rest is stretched
   over its range. Sampled uniformly, the special value comes up with probability `special_bias`.
3. Bucketization: a numeric knob takes at most `max_unique` distinct values (bucket centres of its
   position, on its log scale where it has one).

The mapping depends only on the seed and the knob space, and the loop stores it with the study (seed and
options in the study settings), so a resumed run maps the same points to the same configurations. Each
trial's meta holds the synthetic point (`low`) beside the full configuration.

The default configuration cannot be told to the inner optimizer (it is generally not the image of any
synthetic point); it is still measured by the loop, as the reference for speedups.

Knob rules are checked after the projection: a synthetic point whose configuration breaks one is told back to the
inner optimizer at once with the penalty of a failed trial (the worst cost seen so far, the default's included),
and the inner optimizer is asked again. The rules cannot be stated in the synthetic space itself: a knob's value
depends on a synthetic dimension shared with other knobs, bucketized, with special values.
"""

from __future__ import annotations

import random
from typing import Any

from ..knobs import Knob, KnobError, KnobSpace
from .base import LATER, Later, Optimizer, Refusals, Suggestion
from ..knobs.space import MAX_DRAWS, TuningSpace, categorical, choices_of, from_unit

DEFAULT_DIMS = 16
DEFAULT_SPECIAL_BIAS = 0.2
DEFAULT_MAX_UNIQUE = 10000


class Projection:
    """The map from the synthetic space [-1, 1]^d to configurations of `space`."""

    def __init__(self, space: TuningSpace, *, dims: int = DEFAULT_DIMS, special_bias: float = DEFAULT_SPECIAL_BIAS,
                 max_unique: int = DEFAULT_MAX_UNIQUE, seed: int = 1) -> None:
        if dims < 1:
            raise ValueError(f"LlamaTune needs at least 1 synthetic dimension, got {dims}")
        if not 0.0 <= special_bias < 1.0:
            raise ValueError(f"special-value bias must be in [0, 1), got {special_bias}")
        if max_unique < 2:
            raise ValueError(f"max unique values per knob must be at least 2, got {max_unique}")
        self.space = space
        self.dims = min(dims, len(space.knobs))  # more synthetic than real dimensions would only add redundancy
        self.special_bias = special_bias
        self.max_unique = max_unique
        rng = random.Random(f"llamatune-{seed}")
        # HeSBO: every synthetic dimension gets at least one knob when there are enough knobs
        order = [i % self.dims for i in range(len(space.knobs))]
        rng.shuffle(order)
        self.assignment = {k.name: (order[i], rng.choice((-1, 1))) for i, k in enumerate(space.knobs)}
        self.low_space = TuningSpace(KnobSpace("llamatune", "1", {
            f"y{i}": Knob(name=f"y{i}", type="float", default=0.0, range=(-1.0, 1.0), applies="yaml", key=f"y{i}",
                          description=f"synthetic dimension {i} of the LlamaTune projection")
            for i in range(self.dims)}))

    def specials(self, knob: Knob) -> tuple:
        if categorical(knob) or not self.special_bias:
            return ()
        return tuple(v for v in knob.special if knob.range[0] <= v <= knob.range[1])

    def buckets(self, knob: Knob) -> int:
        if knob.type == "int":
            return min(self.max_unique, int(knob.range[1] - knob.range[0] + 1))
        return self.max_unique

    def knob_value(self, knob: Knob, position: float) -> Any:
        """A knob's value from its position in [0, 1]."""
        position = min(max(position, 0.0), 1.0)
        if categorical(knob):
            choices = choices_of(knob)
            return choices[min(int(position * len(choices)), len(choices) - 1)]
        specials = self.specials(knob)
        if specials:
            if position < self.special_bias:
                return specials[min(int(position / self.special_bias * len(specials)), len(specials) - 1)]
            position = (position - self.special_bias) / (1.0 - self.special_bias)
        k = self.buckets(knob)
        return from_unit(knob, (min(int(position * k), k - 1) + 0.5) / k)  # the centre of its bucket

    def config(self, low: dict[str, float]) -> dict[str, Any]:
        values = {}
        for knob in self.space.knobs:
            dim, sign = self.assignment[knob.name]
            y = float(low[f"y{dim}"])
            values[knob.name] = self.knob_value(knob, (sign * y + 1.0) / 2.0)
        return self.space.canonical(values)


class LlamaTune(Optimizer):
    """Wraps the optimizer `inner` (random, gp, smac, irace) around the synthetic space."""

    name = "llamatune"

    def __init__(self, inner: str, space: TuningSpace, **kwargs) -> None:
        super().__init__(space, **kwargs)
        from . import make_optimizer

        self.projection = Projection(space, dims=int(self.options.get("llamatune_dims", DEFAULT_DIMS)),
                                     special_bias=float(self.options.get("special_bias", DEFAULT_SPECIAL_BIAS)),
                                     max_unique=int(self.options.get("max_unique", DEFAULT_MAX_UNIQUE)),
                                     seed=self.seed)
        inner_options = {k: v for k, v in self.options.items() if k != "space_adapter"}
        self.inner = make_optimizer(inner, self.projection.low_space, seed=self.seed, budget=self.budget,
                                    workloads=self.workloads, workdir=self.workdir,
                                    include_default=False, options=inner_options)
        self.picks_instances = self.inner.picks_instances
        self.max_pending = self.inner.max_pending
        self.replay_keys = self.inner.replay_keys
        self._pending: dict[int, Suggestion] = {}
        self._refusals = Refusals(self.inner.tell)

    def ask(self) -> Suggestion | Later | None:
        for _ in range(MAX_DRAWS):
            low = self.inner.ask()
            if low is None or low is LATER:
                return low
            config = self.projection.config(low.config)
            if self.space.allowed(config):
                break
            self._refusals.refuse(low)   # mapped back, it breaks a knob rule: the inner optimizer hears a failure
        else:
            raise KnobError(f"LlamaTune's projection gave {MAX_DRAWS} configurations in a row that break the knob rules")
        meta = {**low.meta, "low": [low.config[f"y{i}"] for i in range(self.projection.dims)]}
        if self._refusals.count:
            meta["refused"] = self._refusals.count   # synthetic points refused so far for a knob rule
        suggestion = Suggestion(config, instance=low.instance, meta=meta)
        self._pending[id(suggestion)] = low
        return suggestion

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        self.inner.tell(self._pending.pop(id(suggestion)), cost)
        self._refusals.seen(cost)

    def observe(self, config: dict[str, Any], cost: float) -> None:
        # the inner optimizer cannot take it (no synthetic point maps to it); its cost still sets the penalty
        self._refusals.seen(cost)

    def close(self) -> None:
        self.inner.close()
