"""Live progress of a tuning run on a terminal: trial n/N, configuration, result, best so far, time.

Quiet when stderr is not a terminal (scripts read the final result on stdout instead)."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from .loop import Display


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f} {unit}" if unit == "ops/s" else f"{value:.2f} {unit}"


def format_config(config: dict[str, Any], limit: int = 6) -> str:
    items = [f"{k}={v}" for k, v in config.items()]
    return " ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def progress_json(text: str) -> str:
    import json

    return json.dumps({"progress": text.strip(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})


class TerminalDisplay(Display):
    """Progress on stderr: one line per trial start and end (plus a live phase line on a terminal); with
    `json_lines`, each line is a JSON object {"progress": TEXT, "time": ISO-8601} for scripts."""

    def __init__(self, stream: TextIO | None = None, json_lines: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.enabled = True
        self.json_lines = json_lines
        self.live = self.stream.isatty() and not json_lines
        self._phase_shown = False
        self._trial_began = 0.0
        self._base = 0  # trials the study had before this session (replayed, not run now)

    def _line(self, text: str) -> None:
        if not self.enabled:
            return
        if self._phase_shown:
            self.stream.write("\r\033[K")
            self._phase_shown = False
        if self.json_lines:
            text = progress_json(text)
        self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, loop) -> None:
        self._base = loop.trials_used
        spec = loop.spec
        self._line(f"tuning with {spec.optimizer}: {len(loop.space.knobs)} knobs, {', '.join(spec.workloads)}, "
                   f"{loop.objective.describe()}, budget {spec.budget} trials"
                   + (f" / {_clock(spec.max_seconds)}" if spec.max_seconds else ""))
        if loop.space.inert:
            self._line(f"  left out (their condition cannot hold with the other knobs): {', '.join(loop.space.inert)}")

    def trial_started(self, loop, suggestion, workload, kind) -> None:
        self._trial_began = time.monotonic()
        label = "default" if kind == "default" else format_config(
            {k: v for k, v in suggestion.config.items()})
        self._line(f"[{loop.trials_used + 1:>3}/{loop.spec.budget}] {workload}: {label}")

    def trial_phase(self, message: str) -> None:
        if not (self.enabled and self.live):
            return
        self.stream.write("\r\033[K      " + message.strip()[:100])
        self.stream.flush()
        self._phase_shown = True

    def trial_finished(self, loop, row, evaluation) -> None:
        unit = loop.objective.unit
        if row["state"] == "COMPLETE":
            from ..objective import metric_value

            from .machine_reference import FACTOR_KEY, home_summary

            result = _value(metric_value(loop.objective.metric, row["metrics"]["summary"]), unit)
            if (row.get("meta") or {}).get(FACTOR_KEY):
                home = metric_value(loop.objective.metric, home_summary(row, loop.objective.metric))
                result += f" ({_value(home, unit)} on the study's first machine)"
            if evaluation is not None and not evaluation.feasible and evaluation.value is not None:
                result += " (breaks a constraint)"
        else:
            result = f"FAILED ({row['failure_kind']}): {(row['error'] or '')[:80]}"
        best = loop.best.evaluation.value if loop.best else None
        extra = ""
        if best is not None and loop.default_point is not None and loop.default_point.evaluation.value:
            from .results import speedup

            ratio = speedup(loop.objective, best, loop.default_point.evaluation.value)
            extra = f" ({(ratio - 1) * 100:+.1f}% vs default)"
        elapsed = time.monotonic() - loop.started
        done_here = max(loop.trials_used - self._base, 1)
        left = (loop.spec.budget - loop.trials_used) * elapsed / done_here
        self._line(f"      -> {result} | best {_value(best, unit)}{extra} | "
                   f"{time.monotonic() - self._trial_began:.0f} s | elapsed {_clock(elapsed)}, ~{_clock(left)} left")

    def replayed(self, loop, count: int) -> None:
        self._line(f"resumed: {count} stored suggestions replayed from the study, {loop.trials_used} trials so far")

    def note(self, message: str) -> None:
        self._line(f"note: {message}")

    def finish(self, loop, reason: str) -> None:
        self._line(f"stopped: {reason} after {loop.trials_used} trials")
