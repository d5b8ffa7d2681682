"""Random search: every knob drawn independently, uniform (log-uniform where the knob says so)."""

from __future__ import annotations

import random

from .base import Optimizer, Suggestion


class RandomSearch(Optimizer):
    name = "random"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._rng = random.Random(self.seed)

    def ask(self) -> Suggestion:
        return Suggestion(self.space.sample(self._rng))

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        pass
