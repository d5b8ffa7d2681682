"""What every target shares about a trial: one cold run of one configuration on one workload, against the datastore the settings name.

The datastore-specific work lives in `systems/<name>/trial.py`; this module holds what every target shares:
the harness settings stored with each trial (systems/settings.py), the result, and the rule that too many
failed operations make a failed trial."""

from __future__ import annotations

import errno
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import SetupError, TrialError, UsageError
from .settings import (CASSANDRA_VERSION, CassandraSettings, ExternalSettings, RedisSettings,  # noqa: F401
                       TrialSettings)

if TYPE_CHECKING:
    from pathlib import Path

    from ..knobs import KnobSpace

Progress = Callable[[str], None]
MAX_ERROR_SHARE = 0.01  # a trial with more failed operations than this is a failed trial


def quiet(_: str) -> None:
    pass


def with_design(space: "KnobSpace", settings: TrialSettings,
                overrides: dict[str, Any]) -> tuple[TrialSettings, dict[str, Any]]:
    """Split the physical-design knobs (`applies: design`, e.g. nodes, replication_factor) off a configuration:
    the settings of the trial's design and the remaining knobs. A design knob in the configuration wins over
    the harness's --nodes/--rf, so a design searched by `tune --design` is the design each trial runs on."""
    design = {name: value for name, value in overrides.items() if name in space and space[name].applies == "design"}
    if not design:
        return settings, overrides
    designed = replace(settings.cassandra, **{space[name].key: int(value) for name, value in design.items()})
    return (replace(settings, datastore=designed),
            {name: value for name, value in overrides.items() if name not in design})


@dataclass
class TrialResult:
    state: str                                    # COMPLETE or FAIL
    summary: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    internals: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    failure_kind: str | None = None
    error: str | None = None
    log_excerpt: str | None = None


@contextmanager
def failures_recorded(result: TrialResult, log_excerpt: Callable[[], str]) -> Iterator[None]:
    """What goes wrong inside a trial becomes its FAIL result with the reason and `log_excerpt()` (the
    datastore's log), except an interruption (stored as interrupted, then raised on) and a SetupError: the
    tooling is broken (a client that does not build, missing jars), not the configuration, so the command
    stops (exit 3) and the store marks the trial interrupted, for a rerun to measure it again."""
    try:
        yield
    except TrialError as exc:
        result.state, result.failure_kind, result.error = "FAIL", exc.kind, str(exc)
        result.log_excerpt = exc.log_excerpt or log_excerpt()
    except UsageError as exc:   # e.g. an external target file that broke between trials
        result.state, result.failure_kind, result.error = "FAIL", "refused", str(exc)
    except (KeyboardInterrupt, SystemExit):
        result.state, result.failure_kind, result.error = "FAIL", "interrupted", "interrupted by the user"
        raise
    except SetupError:
        raise
    except TimeoutError as exc:   # a call to the datastore that got no answer in its time: hung or overloaded
        result.state, result.failure_kind = "FAIL", "timeout"
        result.error = f"the datastore stopped answering ({exc or 'no reply in time'}): hung, or too slow to answer"
        result.log_excerpt = log_excerpt()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:   # a full disk fails every trial after it too: the study stops, resumable
            raise no_space(exc.filename2 or exc.filename or "the work directory") from None
        _unforeseen(result, exc, log_excerpt)
    except Exception as exc:
        _unforeseen(result, exc, log_excerpt)


def no_space(where: str) -> SetupError:
    """A full disk: not the configuration's fault, and every trial after it would fail too, so the study stops
    (exit 3) with the fix; `tune --resume` runs the trial again."""
    return SetupError(f"no space left on the disk of {where}: free space (`nosqltune datasets` shows and prunes the "
                      "dataset cache), then go on with `tune --resume`")


def _unforeseen(result: TrialResult, exc: Exception, log_excerpt: Callable[[], str]) -> None:
    """A bug or an unforeseen fault: the trial still ends as FAIL with the reason."""
    result.state, result.failure_kind, result.error = "FAIL", "error", f"{type(exc).__name__}: {exc}"
    result.log_excerpt = log_excerpt()


def record_run(result: TrialResult, timings: dict[str, float], metrics: dict[str, Any]) -> None:
    """Store a measured run's metrics, headline summary and client phase timings in the result."""
    from ..workloads.ycsb import summary

    timings["client_s"] = metrics.pop("wall_seconds")
    timings["warmup_s"] = metrics["warmup"].get("runtime_ms", 0) / 1000.0
    timings["measure_s"] = (metrics["runtime_ms"] or 0) / 1000.0
    result.metrics = metrics
    result.summary = summary(metrics)


def end_trial(result: TrialResult, timings: dict[str, float], started: float, stop: Callable[[], None],
              home: "Path", settings: TrialSettings) -> None:
    """The end of every local trial, whatever happened: stop the datastore (`stop`), record the stop and total
    times, remove the trial's folder (unless kept) and a per-trial reloaded dataset."""
    import shutil
    import time

    from .dataset import dataset_for

    from ..runtime.paths import release_leftovers
    from ..runtime.process import interrupts_deferred

    with interrupts_deferred():   # a Ctrl-C now waits for the cleanup: no mount, group or node left half-undone
        t0 = time.monotonic()
        try:
            stop()
        finally:   # a volume left mounted in the folder is unmounted before anything is removed
            released = release_leftovers(home)
        timings["stop_s"] = time.monotonic() - t0
        timings["total_s"] = time.monotonic() - started
        result.timings = timings
        if not settings.keep_node and released:
            shutil.rmtree(home, ignore_errors=True)
        elif home.exists():
            from ..runtime.paths import keep_trial_dir

            keep_trial_dir(home)
        if settings.restore_mode == "reload":
            shutil.rmtree(dataset_for("reload-" + home.name).root, ignore_errors=True)


def judge_errors(result: TrialResult, metrics: dict[str, Any]) -> None:
    """Mark a measured run COMPLETE, or FAIL when more than MAX_ERROR_SHARE of its operations failed."""
    result.state = "COMPLETE"
    measured = sum(op.get("count", 0) for op in metrics["operations"].values()) + metrics["errors"]
    if metrics["errors"]:
        first = (metrics.get("error_samples") or [None])[0]
        result.error = f"{metrics['errors']} of {measured} operations failed" + (f"; the first: {first}" if first else "")
        if metrics["errors"] > MAX_ERROR_SHARE * measured:
            # failed operations return fast and inflate throughput: such a figure is not a result
            result.state, result.failure_kind = "FAIL", "workload"
