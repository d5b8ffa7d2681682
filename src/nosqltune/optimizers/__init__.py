"""Optimizers behind one ask/tell interface (base.Optimizer). Each is imported only when chosen, so the
heavy libraries (scikit-learn, SMAC3, R) are loaded by the runs that use them."""

from __future__ import annotations

import importlib
from typing import Any

OPTIMIZERS = {
    "random": ("random_search", "RandomSearch", "uniform random sampling: the baseline"),
    "gp": ("gp", "GaussianProcessBO",
           "Bayesian optimization, Gaussian process + expected improvement (Vorstella's BO tuner)"),
    "smac": ("smac_bo", "SMACOptimizer", "SMAC3, random-forest surrogate (the MLOS / LlamaTune report)"),
    "irace": ("irace", "IraceOptimizer", "iterated racing with the R irace package (the irace paper)"),
    "rafiki": ("surrogate_search", "Rafiki", "neural-net ensemble surrogate searched by a genetic algorithm (RAFIKI)"),
    "surrogate-sa": ("surrogate_search", "SurrogateAnnealing",
                     "random-forest surrogate searched by simulated annealing (the RF/GBDT paper)"),
}


def make_optimizer(name: str, *args: Any, **kwargs: Any):
    from ..errors import NosqltuneError

    if name not in OPTIMIZERS:
        raise NosqltuneError(f"unknown optimizer '{name}'; choose from {', '.join(OPTIMIZERS)}")
    adapter = (kwargs.get("options") or {}).get("space_adapter")
    if adapter == "llamatune":  # the optimizer searches LlamaTune's synthetic space
        from .llamatune import LlamaTune

        return LlamaTune(name, *args, **kwargs)
    if adapter not in (None, "none"):
        raise NosqltuneError(f"unknown space adapter '{adapter}'; choose none or llamatune")
    module, cls, _ = OPTIMIZERS[name]
    return getattr(importlib.import_module(f".{module}", __name__), cls)(*args, **kwargs)
