"""The ask/tell interface every optimizer implements; the tuning loop (nosqltune.tuning.loop) drives it.

Costs are minimized: the loop turns the user's objective into a cost (throughput -> its negative, latency as
is) and a failed or infeasible trial into a penalty, so optimizers never see the datastore's metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..knobs.space import TuningSpace


class Later:
    """What `ask` returns when the optimizer has nothing to suggest until some pending suggestions are told
    (irace, whose race waits for the results of its batch); None still means finished."""

    def __repr__(self) -> str:
        return "LATER"


LATER = Later()


@dataclass
class Suggestion:
    config: dict[str, Any]                     # canonical values of every tunable knob
    instance: str | None = None                # the workload to run it on, when the optimizer picks (irace)
    meta: dict[str, Any] = field(default_factory=dict)  # optimizer's own bookkeeping, stored with the trial


class Optimizer:
    """Suggests configurations (`ask`) and learns their costs (`tell`).

    Batches: a parallel study asks again before the costs of earlier suggestions come back (up to
    `max_pending` suggestions outstanding; None: no limit). An optimizer that can be asked so keeps its pending
    suggestions apart from one another (GP: a constant liar; SMAC: its own intensifier; random: independent
    draws)."""

    name = "?"
    picks_instances = False  # True: each suggestion names one workload (irace's instances)
    max_pending: int | None = None
    replay_keys: tuple[str, ...] = ()   # meta entries that name a suggestion on replay (else: its position)

    def __init__(self, space: TuningSpace, *, seed: int, budget: int, workloads: list[str], workdir: Path,
                 include_default: bool = True, options: dict[str, Any] | None = None) -> None:
        self.space = space
        self.seed = seed
        self.budget = budget              # trials the loop will run at most (a hint for initial designs)
        self.workloads = list(workloads)
        self.workdir = Path(workdir)
        self.include_default = include_default
        self.options = dict(options or {})

    def ask(self) -> "Suggestion | Later | None":
        """The next configuration to evaluate, or None when the optimizer has nothing more to try (or LATER,
        in a parallel study, when the next one waits for the results of those pending)."""
        raise NotImplementedError

    def tell(self, suggestion: Suggestion, cost: float) -> None:
        """The cost of a suggestion returned by `ask` (lower is better)."""
        raise NotImplementedError

    def observe(self, config: dict[str, Any], cost: float) -> None:
        """The cost of a configuration this optimizer did not suggest (the measured default)."""

    def tell_ran(self, suggestion: Suggestion, config: dict[str, Any], cost: float) -> None:
        """The cost of a suggestion that ran as another configuration: tune --build-share put its dataset-shaping
        knobs to data the study had built (tuning.cost.BuildPacer). Here it is told as the suggestion's cost, a
        projection of the point onto the built data: what random search (which learns nothing), irace (its race
        holds its own candidates) and LlamaTune (its inner optimizer sees only synthetic points) can take. An
        optimizer whose model takes any point (SMAC, GP, RAFIKI's and the annealing surrogate search) learns the
        configuration that ran instead, and never asks for the suggestion again: on disk-bound the data's shape
        is the largest effect, and its projected cost told the model that shapes never measured ran as the
        default's data did."""
        self.tell(suggestion, cost)

    def spent(self, config: dict[str, Any], seconds: float, built: bool) -> None:
        """The machine time a configuration's trials took, told after its cost, and whether one of them built a
        dataset: what a cost-aware optimizer learns a suggestion's price from (gp with `cost_aware`)."""

    def close(self) -> None:
        """Release processes and files; the loop calls it on every way out."""


class Refusals:
    """Suggestions of an inner search that break a knob rule (SMAC's, or LlamaTune's inner optimizer's), told back
    to it as the penalty the loop gives a failed trial: the worst cost seen so far. Before any cost is known, they
    wait and are told with the first one; `tell(item, cost)` is the inner search's own way of hearing a cost."""

    def __init__(self, tell: Callable[[Any, float], None]) -> None:
        self._tell = tell
        self.worst: float | None = None
        self.waiting: list[Any] = []
        self.count = 0

    def refuse(self, item: Any) -> None:
        self.count += 1
        if self.worst is None:
            self.waiting.append(item)
        else:
            self._tell(item, self.worst)

    def seen(self, cost: float) -> None:
        """A cost told to the optimizer: the penalty follows the worst, and waiting refusals get it."""
        self.worst = cost if self.worst is None else max(self.worst, cost)
        waiting, self.waiting = self.waiting, []
        for item in waiting:
            self._tell(item, self.worst)
