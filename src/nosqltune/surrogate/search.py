"""Search a surrogate instead of the datastore: a genetic algorithm (RAFIKI 3.7) and simulated annealing
(the RF/GBDT tuning paper's search), both over the knob space's types, ranges and conditions.

A candidate is a genome with one real gene per knob: a number in the knob's own scale (its logarithm for
log-scaled knobs), a category as a real in [0, n) whose integer part picks the choice. `Codec` turns a whole
population into model rows at once (numpy, no per-candidate Python), with integers rounded, conditions
applied (an inactive knob holds its default) and the same encoding as `TuningSpace.encode`.

The GA follows RAFIKI's description of MATLAB's `ga`: a random initial population within the bounds,
interpolating (intermediate) crossover that may step a little past its parents, Gaussian mutation, elites,
and a penalty instead of a hard constraint for infeasible genomes (non-integers, out of bounds, and a knob rule
broken: a penalty that puts such a genome below every feasible one), and only a genome that keeps the rules is
returned. Both start from random genomes that keep the rules. Simulated annealing runs several Metropolis chains side by side with a geometric cooling schedule, the
moves shrinking with the temperature; a move to a configuration that breaks a knob rule is refused (a chain that
starts on one leaves it at its first allowed move).

SciPy's `dual_annealing` was tried for the annealing and left: it evaluates one point per call, and a
forest's per-call overhead (about 10 ms) made a recommendation take seconds; pymoo or DEAP would add a
dependency for a few dozen lines. Both searches here evaluate a population per model call.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable

import numpy as np

from ..knobs.space import TuningSpace, categorical, choices_of, round_float

Score = Callable[[np.ndarray], np.ndarray]   # model rows -> values to MAXIMIZE
METHODS = ("ga", "anneal")


class Codec:
    def __init__(self, space: TuningSpace, prefix: list[float] | None = None) -> None:
        """`prefix`: columns put before the knob encoding in every row (the workload features)."""
        self.space = space
        self.prefix = np.asarray(prefix or [], dtype=float)
        self.knobs = space.knobs
        self.index = {k.name: i for i, k in enumerate(self.knobs)}
        lo, hi = [], []
        for knob in self.knobs:
            if categorical(knob):
                lo.append(0.0)
                hi.append(float(len(choices_of(knob))))
            elif knob.log and knob.range[0] > 0:
                lo.append(math.log(knob.range[0]))
                hi.append(math.log(knob.range[1] + (1 if knob.type == "int" else 0)))
            else:
                lo.append(float(knob.range[0]))
                hi.append(float(knob.range[1]) + (1 if knob.type == "int" else 0))
        self.lo, self.hi = np.array(lo), np.array(hi)
        # the default is consistent with the conditions, so its values need no condition pass
        self.default_values = self._values(self.genome(space.default())[None, :])[0]

    def around(self, center: np.ndarray, radius: float) -> "Codec":
        """The same codec with the numeric genes limited to `radius` (a share of each range) around
        `center`: a trust region for model-guided steps that should not leave what the data covers."""
        import copy

        local = copy.copy(self)
        width = self.hi - self.lo
        cat = np.array([categorical(k) for k in self.knobs])
        local.lo = np.where(cat, self.lo, np.maximum(self.lo, center - radius * width))
        local.hi = np.where(cat, self.hi, np.minimum(self.hi, center + radius * width))
        return local

    @property
    def dims(self) -> int:
        return len(self.knobs)

    def genome(self, config: dict[str, Any]) -> np.ndarray:
        """A configuration's genome (at the centre of an integer's cell)."""
        config = self.space.canonical(config)
        out = []
        for knob in self.knobs:
            value = config[knob.name]
            if categorical(knob):
                out.append(choices_of(knob).index(value) + 0.5)
            elif knob.log and knob.range[0] > 0:
                out.append(math.log(value + (0.5 if knob.type == "int" else 0)))
            else:
                out.append(value + (0.5 if knob.type == "int" else 0))
        return np.array(out, dtype=float)

    def random(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n genomes uniform within the bounds, drawn again (up to 100 times) where one breaks a knob rule."""
        G = self.lo + rng.random((n, self.dims)) * (self.hi - self.lo)
        for _ in range(100):
            broken = ~self.feasible(G)
            if not broken.any():
                break
            G[broken] = self.lo + rng.random((int(broken.sum()), self.dims)) * (self.hi - self.lo)
        return G

    def clip(self, G: np.ndarray) -> np.ndarray:
        return np.clip(G, self.lo, np.nextafter(self.hi, self.lo))

    def natural(self, G: np.ndarray) -> np.ndarray:
        """Knob values (choice index for categories), integers floored to their cell, within bounds; a knob
        whose condition is off holds its default."""
        return self._conditions(self._values(G))

    def _values(self, G: np.ndarray) -> np.ndarray:
        G = self.clip(G)
        V = np.empty_like(G)
        for j, knob in enumerate(self.knobs):
            g = G[:, j]
            if categorical(knob):
                V[:, j] = np.floor(g)
            else:
                v = np.exp(g) if knob.log and knob.range[0] > 0 else g
                if knob.type == "int":
                    v = np.floor(v)
                else:
                    v = np.vectorize(partial(round_float, knob))(v)
                V[:, j] = np.clip(v, knob.range[0], knob.range[1])
        return V

    def _conditions(self, V: np.ndarray) -> np.ndarray:
        active = np.ones_like(V, dtype=bool)
        for _ in range(len(self.knobs)):   # parents first: repeat until nothing changes (chains are short)
            changed = False
            for j, knob in enumerate(self.knobs):
                mask = np.ones(len(V), dtype=bool)
                for ref, op, literal in self.space.clauses[knob.name]:
                    if ref not in self.index:
                        continue
                    r = self.index[ref]
                    mask &= self._clause(self.knobs[r], V[:, r], op, literal) & active[:, r]
                if not np.array_equal(mask, active[:, j]):
                    active[:, j] = mask
                    changed = True
            if not changed:
                break
        return np.where(active, V, self.default_values)

    @staticmethod
    def _clause(knob, values: np.ndarray, op: str, literal: Any) -> np.ndarray:
        from ..knobs.knob import _same

        if categorical(knob):
            choices = choices_of(knob)
            wanted = literal if op in ("in", "not in") else (literal,)
            hits = [i for i, c in enumerate(choices) if any(_same(c, w) for w in wanted)]
            inside = np.isin(values, hits)
            return ~inside if op in ("!=", "not in") else inside
        if op in ("in", "not in", "==", "!="):
            wanted = literal if op in ("in", "not in") else (literal,)
            inside = np.isin(values, [float(w) for w in wanted])
            return ~inside if op in ("!=", "not in") else inside
        return {">": values > literal, ">=": values >= literal, "<": values < literal, "<=": values <= literal}[op]

    def feasible(self, G: np.ndarray) -> np.ndarray:
        """Which genomes decode to configurations that keep the space's knob rules (numpy, no per-genome Python)."""
        if not self.space.rules:
            return np.ones(len(G), dtype=bool)
        V = self.natural(G)
        columns = {}
        for j, knob in enumerate(self.knobs):
            if categorical(knob):
                columns[knob.name] = np.array(choices_of(knob), dtype=object)[V[:, j].astype(int)]
            else:
                columns[knob.name] = V[:, j]
        return self.space.allowed_columns(columns, len(G))

    def rows(self, G: np.ndarray) -> np.ndarray:
        """Model rows (prefix + knob encoding) of a population."""
        V = self.natural(G)
        cols = []
        for j, knob in enumerate(self.knobs):
            v = V[:, j]
            if categorical(knob):
                cols.extend((v == i).astype(float) for i in range(len(choices_of(knob))))
                continue
            lo, hi = knob.range
            if hi == lo:
                cols.append(np.full(len(v), 0.5))
            elif knob.type == "int" and knob.log and lo > 0:
                cols.append((np.log(v + 0.5) - math.log(lo)) / (math.log(hi + 1) - math.log(lo)))
            elif knob.type == "int":
                cols.append((v - lo + 0.5) / (hi - lo + 1))
            elif knob.log and lo > 0:
                cols.append((np.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo)))
            else:
                cols.append((v - lo) / (hi - lo))
        knobs = np.column_stack(cols)
        return np.hstack([np.tile(self.prefix, (len(G), 1)), knobs]) if self.prefix.size else knobs

    def penalty(self, G: np.ndarray) -> np.ndarray:
        """How infeasible each genome is: distance outside the bounds plus distance from an integer (both
        relative to the knob's range)."""
        width = self.hi - self.lo
        outside = (np.maximum(self.lo - G, 0) + np.maximum(G - self.hi, 0)) / width
        frac = np.zeros_like(G)
        for j, knob in enumerate(self.knobs):
            if knob.type == "int" and not categorical(knob):
                v = np.exp(G[:, j]) if knob.log and knob.range[0] > 0 else G[:, j]
                cell = v - np.floor(v)          # the centre of an integer's cell (x.5) is the feasible point
                frac[:, j] = np.abs(cell - 0.5) * 2 / max(knob.range[1] - knob.range[0] + 1, 1)
        return outside.sum(axis=1) + frac.sum(axis=1)

    def config(self, g: np.ndarray) -> dict[str, Any]:
        V = self.natural(np.atleast_2d(g))[0]
        out = {}
        for j, knob in enumerate(self.knobs):
            if categorical(knob):
                out[knob.name] = choices_of(knob)[int(V[j])]
            elif knob.type == "int":
                out[knob.name] = int(V[j])
            else:
                out[knob.name] = float(V[j])
        return self.space.canonical(out)


@dataclass
class SearchResult:
    config: dict[str, Any]
    value: float                 # the score of the configuration (the caller's objective, maximized)
    evaluations: int
    seconds: float
    history: list[float] = field(default_factory=list)   # best score per generation / step


def genetic(codec: Codec, score: Score, *, seed: int = 0, population: int = 60, generations: int = 60,
            elites: int = 2, crossover: float = 0.8, mutation: float = 0.1, penalty: float = 1.0,
            start: list[np.ndarray] | None = None) -> SearchResult:
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    width = codec.hi - codec.lo
    P = codec.random(rng, population)
    for i, g in enumerate(start or []):
        P[i % population] = g
    evaluations, history = 0, []

    def fitness(G: np.ndarray) -> np.ndarray:
        # the penalty is relative to the spread of the scores, so it matters whatever the objective's scale; a
        # genome that breaks a knob rule scores below every one that keeps them
        raw = score(codec.rows(G))
        spread = float(np.ptp(raw)) or 1.0
        return raw - penalty * spread * codec.penalty(G) - 2 * spread * ~codec.feasible(G)

    F = fitness(P)
    evaluations += len(P)
    for gen in range(generations):
        order = np.argsort(-F)
        history.append(float(F[order[0]]))
        children = [P[order[:elites]]]
        need = population - elites
        # tournament selection of two parents per child
        a = rng.integers(0, population, (need, 2))
        b = rng.integers(0, population, (need, 2))
        p1 = P[np.where(F[a[:, 0]] >= F[a[:, 1]], a[:, 0], a[:, 1])]
        p2 = P[np.where(F[b[:, 0]] >= F[b[:, 1]], b[:, 0], b[:, 1])]
        alpha = rng.uniform(-0.25, 1.25, p1.shape)             # intermediate crossover, a little past parents
        cross = rng.random(need) < crossover
        kids = np.where(cross[:, None], p1 + alpha * (p2 - p1), p1)
        scale = mutation * (1 - gen / max(generations, 1)) + 0.01
        mutate = rng.random(kids.shape) < (1.0 / codec.dims + 0.05)
        kids = kids + mutate * rng.normal(0, 1, kids.shape) * width * scale
        children.append(kids)
        P = np.vstack(children)
        F = fitness(P)
        evaluations += len(P)
    # the answer is feasible: the best genomes snapped to their decoded (integral, in-bounds) values, among those
    # that keep the knob rules (the whole population, then the start, when the best few do not)
    order = np.argsort(-F)
    for pool in (P[order[: max(elites, 5)]], P[order], np.array(start or [], dtype=float).reshape(-1, codec.dims)):
        snapped = np.array([codec.genome(codec.config(g)) for g in pool]).reshape(-1, codec.dims)
        snapped = snapped[codec.feasible(snapped)] if len(snapped) else snapped
        if len(snapped):
            break
    else:
        raise ValueError("the genetic search found no configuration that keeps the knob rules")
    values = score(codec.rows(snapped))
    evaluations += len(snapped)
    best = int(np.argmax(values))
    return SearchResult(codec.config(snapped[best]), float(values[best]), evaluations,
                        time.perf_counter() - started, history)


def anneal(codec: Codec, score: Score, *, seed: int = 0, chains: int = 32, steps: int = 200,
           t_start: float = 0.05, t_end: float = 1e-5, step_size: float = 0.15,
           start: list[np.ndarray] | None = None) -> SearchResult:
    """Maximize `score` by simulated annealing; temperatures are in the score's units relative to the
    spread of the first evaluations (so t_start=0.05 accepts a loss of 5% of that spread often at first)."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    width = codec.hi - codec.lo
    X = codec.random(rng, chains)
    for i, g in enumerate(start or []):
        X[i % chains] = g

    def scores(G: np.ndarray) -> np.ndarray:   # a configuration that breaks a knob rule: never accepted
        return np.where(codec.feasible(G), score(codec.rows(G)), -np.inf)

    F = scores(X)
    finite = F[np.isfinite(F)]
    scale = (float(np.ptp(finite)) or float(np.abs(finite).mean()) or 1.0) if finite.size else 1.0
    best_i = int(np.argmax(F))
    best_x, best_f = X[best_i].copy(), float(F[best_i])
    evaluations, history = chains, []
    cat = np.array([categorical(k) for k in codec.knobs])
    for step in range(steps):
        progress = step / max(steps - 1, 1)
        T = t_start * (t_end / t_start) ** progress * scale
        size = step_size * 0.05 ** progress        # moves shrink with the temperature: coarse, then fine
        Y = X.copy()
        moves = rng.random(X.shape) < (1.5 / codec.dims)
        moves[np.arange(chains), rng.integers(0, codec.dims, chains)] = True   # at least one knob moves
        numeric = moves & ~cat
        Y = np.where(numeric, Y + rng.normal(0, 1, Y.shape) * width * size, Y)
        Y = np.where(moves & cat, codec.lo + rng.random(Y.shape) * width, Y)
        Y = codec.clip(Y)
        G = scores(Y)
        evaluations += chains
        with np.errstate(invalid="ignore"):   # -inf - -inf: both break a rule; the move is refused
            accept = np.isfinite(G) & ((G >= F) | (rng.random(chains) < np.exp(np.minimum((G - F) / T, 0))))
        X = np.where(accept[:, None], Y, X)
        F = np.where(accept, G, F)
        i = int(np.argmax(F))
        if F[i] > best_f:
            best_x, best_f = X[i].copy(), float(F[i])
        history.append(best_f)
    if not np.isfinite(best_f):
        raise ValueError("the annealing found no configuration that keeps the knob rules")
    return SearchResult(codec.config(best_x), best_f, evaluations, time.perf_counter() - started, history)


def search(codec: Codec, score: Score, method: str = "ga", seed: int = 0, **options: Any) -> SearchResult:
    if method == "ga":
        return genetic(codec, score, seed=seed, **options)
    if method == "anneal":
        return anneal(codec, score, seed=seed, **options)
    raise ValueError(f"unknown search {method!r}: use ga or anneal")
