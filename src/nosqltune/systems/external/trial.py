"""One trial on an external target: render the configuration -> reset the data -> start -> health -> run the
workload -> stop, every step a command of the target file (see target.py). A step that fails or times out
makes a failed trial with the command's output attached; the start step's process group is killed on every
way out, so a study never hangs on, or leaves behind, a datastore."""

from __future__ import annotations

import json
import os
import shutil
import signal
import string
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from ...errors import TrialError, UsageError
from ...knobs import KnobError, KnobSpace
from ...runtime.paths import claim_trial_dir, work_dir
from ..base import Progress, TrialResult, TrialSettings, failures_recorded, judge_errors, quiet, record_run
from ...workloads.spec import Workload
from ...workloads.ycsb import client_timeout, parse_output, run_client
from ...runtime import process
from ..cassandra.node import flatten_dotted, set_dotted
from ..dataset import Dataset, dataset_for, dataset_key
from ..dataset_cache import create_dataset
from .target import Step, Target, load_target

HEALTH_ATTEMPT_S = 5.0


def _target(settings: TrialSettings) -> Target:
    if not settings.external.target_file:
        raise UsageError("--system external needs --target-file YAML")
    return load_target(settings.external.target_file)


def knob_space(settings: TrialSettings) -> KnobSpace:
    return _target(settings).knob_space()


def default_knobs(settings: TrialSettings) -> str | None:
    """The target file's default_knobs; None: `tune` searches every knob."""
    return _target(settings).default_knobs


def fingerprint(settings: TrialSettings) -> dict[str, Any]:
    from ...runtime.environment import fingerprint as machine

    target = _target(settings)
    version = "unknown"
    step = target.steps.get("version")
    if step:
        try:
            out = subprocess.run(["bash", "-c", step.run], capture_output=True, text=True, timeout=step.timeout,
                                 cwd=target.directory)
            version = (out.stdout.strip().splitlines() or ["unknown"])[0][:120]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return machine(f"external:{target.name}", version)


def config_fragment(settings: TrialSettings, overrides: dict[str, Any]) -> list[str]:
    """The knob values as the target's configuration file would hold them (format none: knob: value)."""
    target = _target(settings)
    text = render_config(target, target.knob_space(), overrides, {"workdir": "${workdir}"})
    if text is None:
        return yaml.safe_dump(overrides, sort_keys=False).rstrip().splitlines() if overrides else []
    return text.rstrip("\n").splitlines()


def preflight(workload: Workload, settings: TrialSettings) -> None:
    """The target file is readable, its default configuration renders and its password variable is set."""
    target = _target(settings)
    render_config(target, target.knob_space(), {}, {"workdir": "/nonexistent"})
    client_secrets(target)


def client_secrets(target: Target) -> dict[str, str]:
    """The YCSB client's password, from the environment variable the target names (endpoint: password_env): for
    the client alone, never in the stored workload or a kept file."""
    if not target.password_env:
        return {}
    value = os.environ.get(target.password_env)
    if not value:
        raise UsageError(f"target file {target.path}: endpoint password_env names {target.password_env}, which is "
                         f"not set: export {target.password_env}=... (the datastore's password) first")
    return {"redis.password": value}


# ------------------------------------------------------------------------------------------------ rendering

def _text(knob, value: Any, fmt: str) -> str:
    if knob.type == "bool":
        return ("yes" if value else "no") if fmt == "lines" else ("true" if value else "false")
    return str(value)


def render_config(target: Target, space: KnobSpace, overrides: dict[str, Any], places: dict[str, str]) -> str | None:
    """The configuration file's text for the knob values (None for format none). lines: the base file, then
    `directive value` per set knob (redis.conf style); yaml: the base mapping with each set knob's (dotted) key
    replaced; template: the base with ${knob} (every knob, defaults included) and ${place} substituted."""
    fmt = target.config_format
    if fmt == "none":
        return None
    base = target.config_base.read_text() if target.config_base else ""
    if fmt == "template":
        values = {name: _text(space.knobs[name], value, fmt) for name, value in space.with_defaults(overrides).items()}
        return string.Template(base).safe_substitute({**places, **values})
    if fmt == "lines":
        from ..redis.server import render_directives

        try:
            lines = render_directives(space, overrides)
        except ValueError as exc:
            raise UsageError(f"target file {target.path}: config format lines: {exc}") from None
        return base.rstrip("\n") + ("\n" if base.strip() else "") + "\n".join(lines) + "\n"
    mapping = yaml.safe_load(base) if base.strip() else {}
    if not isinstance(mapping, dict):
        raise UsageError(f"target file {target.path}: config base {target.config_base} is not a YAML mapping")
    not_yaml = [n for n in overrides if space.knobs[n].applies != "yaml"]
    if not_yaml:
        raise UsageError(f"target file {target.path}: config format yaml takes knobs that apply to yaml; "
                         f"{not_yaml[0]} applies to {space.knobs[not_yaml[0]].applies}")
    try:
        entries = _yaml_entries(space, overrides)
    except KnobError as exc:
        raise UsageError(f"target file {target.path}: {exc}") from None
    for dotted, value in entries.items():
        set_dotted(mapping, dotted, value)
    return yaml.safe_dump(mapping, sort_keys=False)


def _yaml_entries(space: KnobSpace, overrides: dict[str, Any]) -> dict[str, Any]:
    """Dotted yaml key -> value of the set knobs whose conditions hold: Cassandra's with the units its 5.0
    keys take ('64MiB'), any other space (ScyllaDB's, a user's knob file) with bare values in the knob's unit,
    as ScyllaDB's old-style keys take them."""
    if space.system == "cassandra":
        from ..cassandra.config import place

        return place(space, overrides).yaml
    from ..scylla.config import render_scylla_yaml

    return flatten_dotted(render_scylla_yaml(space, overrides))


# ------------------------------------------------------------------------------------------------ commands

class Runner:
    """Runs a target's steps with the placeholders of one trial, logging every command's output."""

    def __init__(self, target: Target, places: dict[str, str], knob_values: dict[str, Any], log: Path) -> None:
        self.target, self.places, self.log = target, places, log
        self.env = process.child_env(**{f"NOSQLTUNE_{k.upper()}": v for k, v in places.items()},
                                     **{f"KNOB_{k.upper()}": str(v) for k, v in knob_values.items()})
        self.knob_values = {k: str(v) for k, v in knob_values.items()}
        self.server: subprocess.Popen | None = None
        self.server_log = log.with_name("server.log")   # the output of a background start step

    def command(self, step: Step) -> str:
        """The step's command with the values written in, as the log shows it (not what runs: see `script`)."""
        return string.Template(step.run).safe_substitute({**self.knob_values, **self.places})

    def script(self, step: Step) -> str:
        """What bash runs: each placeholder becomes a reference to the environment variable holding its value, so
        a value is expanded by the shell but never parsed as shell code (a knob value with `;` or `$(...)` runs
        nothing)."""
        refs = {**{k: "${KNOB_%s}" % k.upper() for k in self.knob_values},
                **{k: "${NOSQLTUNE_%s}" % k.upper() for k in self.places}}
        return string.Template(step.run).safe_substitute(refs)

    def _spawn(self, name: str, step: Step, stdout) -> subprocess.Popen:
        with open(self.log, "a") as fh:
            fh.write(f"\n$ [{name}] {self.command(step)}\n")
        return process.spawn(["bash", "-c", self.script(step)], stdout=stdout, stderr=subprocess.STDOUT,
                             env=self.env, cwd=self.places["workdir"])

    def run(self, name: str, step: Step | None = None, kind: str = "refused", capture: Path | None = None) -> None:
        """Run a step to its end; TrialError(kind) when it fails, TrialError('timeout') when it overruns."""
        step = step or self.target.steps[name]
        with open(capture or self.log, "ab") as out:
            proc = self._spawn(name, step, out)
            try:
                proc.wait(timeout=step.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise TrialError("timeout", f"step {name} did not finish within {step.timeout:.0f} s",
                                 self.tail(capture)) from None
            finally:
                _kill_group(proc)
        if proc.returncode != 0:
            raise TrialError(kind, f"step {name} failed (exit {proc.returncode}): {self.last_line(capture)}",
                             self.tail(capture))

    def start(self) -> float:
        """The start step (kept running when background), then health until it passes; returns seconds."""
        started = time.monotonic()
        step = self.target.steps["start"]
        if step.background:
            with open(self.server_log, "ab") as out:
                self.server = self._spawn("start", step, out)
            # reap it the moment it exits: a stop step that waits for the pid to vanish must not wait on a zombie
            threading.Thread(target=self.server.wait, daemon=True).start()
        else:
            self.run("start")
        health = self.target.steps["health"]
        deadline = time.monotonic() + health.timeout
        while True:
            if self.server is not None and self.server.poll() is not None:
                raise TrialError("refused", f"step start: the process exited (code {self.server.returncode}): "
                                 f"{self.last_line(self.server_log)}", self.tail(self.server_log))
            attempt = Step(health.run, max(0.5, min(HEALTH_ATTEMPT_S, deadline - time.monotonic())))
            try:
                self.run("health", attempt, kind="refused")
                return time.monotonic() - started
            except TrialError:
                if time.monotonic() >= deadline:
                    raise TrialError("timeout", f"step health did not pass within {health.timeout:.0f} s: "
                                     f"{self.last_line()}", self.tail()) from None
            time.sleep(0.2)

    def stop(self) -> str | None:
        """The stop step, then the start step's process group killed; returns an error message or None."""
        error = None
        try:
            self.run("stop")
        except TrialError as exc:
            error = str(exc)
        if self.server is not None:
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(self.server)
            self.server = None
        return error

    def tail(self, path: Path | None = None, lines: int = 30) -> str:
        path = path or self.log
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def last_line(self, path: Path | None = None) -> str:
        lines = [ln.strip() for ln in self.tail(path, 20).splitlines() if ln.strip() and not ln.startswith("$ [")]
        return lines[-1][:300] if lines else "no output"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the command and everything it started (its own process group), then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.terminate(proc, timeout=5)


# ------------------------------------------------------------------------------------------------ trials

def _places(target: Target, workdir: Path, port: int, dataset_dir: Path, workload: Workload) -> dict[str, str]:
    places = {"workdir": str(workdir), "host": target.host, "port": str(port), "dataset": str(dataset_dir),
              "records": str(workload.records), "target_dir": str(target.directory),
              "config_json": str(workdir / "config.json")}
    if target.config_file:
        places["config_file"] = string.Template(target.config_file).safe_substitute(places)
    return places


def _configure(target: Target, space: KnobSpace, overrides: dict[str, Any], runner: Runner) -> None:
    places = runner.places
    Path(places["config_json"]).write_text(json.dumps(overrides, sort_keys=True))
    text = render_config(target, space, overrides, places)
    if text is not None:
        path = Path(places["config_file"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if target.config_command:
        runner.run("config command", target.config_command)


def ensure_dataset(target: Target, space: KnobSpace, workload: Workload, settings: TrialSettings,
                   progress: Progress = quiet) -> tuple[Dataset, float]:
    """Load the data once per (target file, data shape): start with the default configuration, run the load
    step (default: YCSB's load phase through the binding), stop, then the snapshot step (keep the data, now at
    rest, in ${dataset})."""
    dataset = dataset_for(dataset_key({"external": target.digest, "data": workload.dataset_properties()}))
    if dataset.hold():   # held for the whole trial: its steps read ${dataset}
        return dataset, 0.0
    started = time.monotonic()

    def build(home: Path) -> dict[str, Any]:
        (home / "data").mkdir(parents=True, exist_ok=True)
        port = target.port or process.free_ports(1)[0]
        runner = Runner(target, _places(target, home, port, home / "data", workload), {}, home / "steps.log")
        try:
            _configure(target, space, {}, runner)
            progress(f"loading {workload.records} records into {target.name} (dataset {dataset.key})")
            boot = runner.start()
            if "load" in target.steps:
                runner.run("load", kind="workload")
            else:
                if target.binding == "cassandra":
                    from ..cassandra.trial import _create_schema

                    _create_schema(target.host, port, workload)
                loader = Workload.from_dict({**workload.to_dict(), "threads": settings.load_threads})
                load = run_client("load", loader, host=target.host, port=port, trial_dir=home / "load",
                                  timeout=client_timeout(workload, "load"), cpus=settings.client_cpus,
                                  binding=target.binding, secrets=client_secrets(target))
                if load["errors"]:
                    raise TrialError("workload", f"loading the dataset had {load['errors']} failed inserts")
        finally:
            stop_error = runner.stop()
        if stop_error:
            raise TrialError("refused", stop_error, runner.tail())
        if "snapshot" in target.steps:
            runner.run("snapshot")
        return {"key": dataset.key, "system": f"external:{target.name}", "target_file": str(target.path),
                "digest": target.digest, "data": workload.dataset_properties(), "boot_s": boot,
                "created_at": time.time()}

    create_dataset(dataset, build)
    return dataset, time.monotonic() - started


def run_trial(space: KnobSpace, overrides: dict[str, Any], workload: Workload, settings: TrialSettings,
              progress: Progress = quiet) -> TrialResult:
    """Run one trial through the target's commands; never raises for a trial failure."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    home = work_dir() / "nodes" / ("external-" + uuid.uuid4().hex[:12])
    runner: Runner | None = None
    result = TrialResult(state="FAIL")
    try:
        with failures_recorded(result, lambda: runner.tail() if runner else ""):
            claim_trial_dir(home)   # marked as ours: removed by a later trial if we are killed
            target = _target(settings)
            dataset, built = ensure_dataset(target, space, workload, settings, progress)
            if built:
                timings["dataset_build_s"] = built
            home.mkdir(parents=True, exist_ok=True)
            port = target.port or process.free_ports(1)[0]
            runner = Runner(target, _places(target, home, port, dataset.data_dir, workload), overrides,
                            home / "steps.log")
            t0 = time.monotonic()
            _configure(target, space, overrides, runner)
            if "reset" in target.steps:
                progress(f"{target.name}: reset")
                runner.run("reset")
            timings["restore_s"] = time.monotonic() - t0
            progress(f"{target.name}: start")
            timings["boot_s"] = runner.start()
            progress(f"running {workload.name}: warm-up then {workload.operations} operations, "
                     f"{workload.threads} threads")
            t0 = time.monotonic()
            if "run" in target.steps:
                out = home / "run.out"
                runner.run("run", kind="workload", capture=out)
                try:
                    metrics = parse_output(out.read_text(errors="replace"))
                except ValueError as exc:
                    raise TrialError("workload", f"step run printed no YCSB result: {exc}", runner.tail(out)) from None
                metrics["wall_seconds"] = time.monotonic() - t0
            else:
                metrics = run_client("run", workload, host=target.host, port=port, trial_dir=home / "run",
                                     timeout=client_timeout(workload, "run"), cpus=settings.client_cpus,
                                     jvm_flags=settings.jvm_flags(), binding=target.binding,
                                     secrets=client_secrets(target))
            if runner.server is not None and runner.server.poll() is not None:
                raise TrialError("crashed", f"the datastore's process exited during the run (code "
                                 f"{runner.server.returncode}): {runner.last_line(runner.server_log)}",
                                 runner.tail(runner.server_log))
            record_run(result, timings, metrics)
            result.internals = {"target": target.name, "target_digest": target.digest}
            judge_errors(result, metrics)
    finally:
        t0 = time.monotonic()
        if runner is not None:
            error = runner.stop()
            if error and result.state == "COMPLETE":
                result.state, result.failure_kind, result.error = "FAIL", "refused", error
                result.log_excerpt = runner.tail()
        timings["stop_s"] = time.monotonic() - t0
        timings["total_s"] = time.monotonic() - started
        result.timings = timings
        if not settings.keep_node:
            shutil.rmtree(home, ignore_errors=True)
    return result
