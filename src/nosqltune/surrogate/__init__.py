"""Surrogate models of performance = f(workload, knobs): data collection, models, search (after RAFIKI and
the RF/GBDT tuning paper of Eppinger & Stoerl)."""
