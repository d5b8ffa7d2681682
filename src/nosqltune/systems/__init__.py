"""Targets: the datastores nosqltune can run trials against.

A target is a module `systems/<name>/trial.py` with six functions, all taking the harness settings
(`trial.TrialSettings`, stored with every trial):

- `knob_space(settings) -> KnobSpace`: the knobs a configuration may set;
- `default_knobs(settings) -> str | None`: the knob set `tune` searches unless told (None: every knob);
- `preflight(workload, settings)`: refuse bad input before any trial runs (UsageError), e.g. a dataset
  that cannot fit in memory;
- `fingerprint(settings) -> dict`: the environment a figure was measured in;
- `config_fragment(settings, overrides) -> list[str]`: knob values in the datastore's own configuration
  language (what `nosqltune best --format yaml` prints);
- `run_trial(space, overrides, workload, settings, progress) -> TrialResult`: one cold trial, never raising
  for a failure of the configuration (the result says FAIL and why).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .base import Progress, TrialResult, TrialSettings, quiet, with_design

if TYPE_CHECKING:
    from ..knobs import KnobSpace
    from ..workloads.spec import Workload

__all__ = ["TARGETS", "TrialResult", "TrialSettings", "run_trial", "target"]

TARGETS = {
    "cassandra": "Apache Cassandra, a local node started per trial from the project's jars",
    "redis": "Redis, a local redis-server (Debian's package) started per trial",
    "external": "any datastore, driven by the commands of a target file (--target-file)",
}


def target(name: str) -> ModuleType:
    if name not in TARGETS:
        raise ValueError(f"unknown system {name!r}: use one of {', '.join(TARGETS)}")
    return importlib.import_module(f"{__name__}.{name}.trial")


def run_trial(space: "KnobSpace", overrides: dict[str, Any], workload: "Workload", settings: TrialSettings,
              progress: Progress = quiet) -> TrialResult:
    """Run one cold trial on the settings' datastore; never raises for a trial failure (the result says FAIL
    and why). Raises SetupError when the tooling itself is broken."""
    settings, overrides = with_design(space, settings, overrides)
    return target(settings.system).run_trial(space, overrides, workload, settings, progress)
