"""Targets: what nosqltune runs trials against, behind one interface (`Target`).

The datastores are modules `systems/<name>/trial.py` with the six functions of `Target`, all taking the
harness settings (`settings.TrialSettings`: a common part and the datastore's, stored with every trial), found
by name in `TARGETS`. The recorded surrogate (`surrogate.dataset.SurrogateTarget`, `--system surrogate:NAME`)
implements the same interface."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from .base import Progress, TrialResult, quiet, with_design
from .settings import CassandraSettings, ExternalSettings, RedisSettings, TrialSettings

if TYPE_CHECKING:
    from ..knobs import KnobSpace
    from ..workloads.spec import Workload

__all__ = ["TARGETS", "CassandraSettings", "ExternalSettings", "RedisSettings", "Target", "TrialResult",
           "TrialSettings", "run_trial", "target"]


class Target(Protocol):
    def knob_space(self, settings: TrialSettings) -> "KnobSpace":
        """The knobs a configuration may set."""

    def default_knobs(self, settings: TrialSettings) -> Any:
        """The knob set `tune` searches unless told (None: every knob)."""

    def preflight(self, workload: "Workload", settings: TrialSettings) -> None:
        """Refuse bad input before any trial runs (UsageError), e.g. a dataset that cannot fit in memory."""

    def fingerprint(self, settings: TrialSettings) -> dict:
        """The environment a figure was measured in."""

    def config_fragment(self, settings: TrialSettings, overrides: dict[str, Any]) -> list[str]:
        """Knob values in the datastore's own configuration language (`nosqltune best --format yaml`)."""

    def run_trial(self, space: "KnobSpace", overrides: dict[str, Any], workload: "Workload",
                  settings: TrialSettings, progress: Progress = quiet) -> TrialResult:
        """One cold trial, never raising for a failure of the configuration (the result says FAIL and why)."""


TARGETS = {
    "cassandra": "Apache Cassandra, a local node started per trial from the project's jars",
    "redis": "Redis, a local redis-server (Debian's package) started per trial",
    "external": "any datastore, driven by the commands of a target file (--target-file)",
}


class Datastore:
    """A datastore's trial module as a Target; its trials run on the physical design their configuration
    names (the design knobs, e.g. nodes, replication_factor, become the trial's settings)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def knob_space(self, settings: TrialSettings) -> "KnobSpace":
        return self.module.knob_space(settings)

    def default_knobs(self, settings: TrialSettings) -> Any:
        return self.module.default_knobs(settings)

    def preflight(self, workload: "Workload", settings: TrialSettings) -> None:
        from .dataset_cache import budget_setting

        budget_setting()   # a bad NOSQLTUNE_DATASET_BUDGET is refused before anything runs
        self.module.preflight(workload, settings)
        if settings.system in ("cassandra", "redis"):
            from ..runtime.java import java_executable

            java_executable()   # the YCSB client (and Cassandra) run on Java: no JDK is said before a study is written

    def fingerprint(self, settings: TrialSettings) -> dict:
        return self.module.fingerprint(settings)

    def config_fragment(self, settings: TrialSettings, overrides: dict[str, Any]) -> list[str]:
        return self.module.config_fragment(settings, overrides)

    def run_trial(self, space: "KnobSpace", overrides: dict[str, Any], workload: "Workload",
                  settings: TrialSettings, progress: Progress = quiet) -> TrialResult:
        from ..runtime.paths import work_dir
        from ..runtime.probe import machine_record

        settings, overrides = with_design(space, settings, overrides)
        # the machine's speed before the datastore starts: its core, and the disk under the trials' folder
        probe = machine_record(work_dir())
        result = self.module.run_trial(space, overrides, workload, settings, progress)
        result.internals.setdefault("machine_probe", probe)
        if result.state == "COMPLETE":   # what limited it, stored with it (bottleneck/__init__.py says how)
            from ..bottleneck import diagnose

            verdict = diagnose(result.summary, settings.flat(), result.internals)
            if verdict is not None:
                result.internals["bottleneck"] = verdict.to_dict()
                progress(verdict.line())
        return result


def target(name: str) -> Datastore:
    """The datastore target of this name (see TARGETS)."""
    if name not in TARGETS:
        raise ValueError(f"unknown system {name!r}: use one of {', '.join(TARGETS)}")
    return Datastore(importlib.import_module(f"{__name__}.{name}.trial"))


def run_trial(space: "KnobSpace", overrides: dict[str, Any], workload: "Workload", settings: TrialSettings,
              progress: Progress = quiet) -> TrialResult:
    """Run one cold trial on the settings' datastore; never raises for a trial failure (the result says FAIL
    and why). Raises SetupError when the tooling itself is broken."""
    return target(settings.system).run_trial(space, overrides, workload, settings, progress)
