"""Surrogate models of performance = f(workload, knobs): data collection, models, search (seeds 002 and 004)."""
