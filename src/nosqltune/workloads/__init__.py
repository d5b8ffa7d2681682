"""Workloads: YCSB core workloads A-F and custom mixes as data, the YCSB runner, and its output parser."""
