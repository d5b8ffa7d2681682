"""The external target's description: a YAML file saying how to configure, start, check, stop and reset any
datastore, each step a shell command with a timeout (irace's target-runner idea, made general).

    name: my-redis
    knobs: redis                  # a built-in knob space (cassandra, redis, scylla) or a knob file's path
    default_knobs: mlos6          # optional: the set `tune` searches unless --knobs says otherwise
    binding: redis                # loadgen's YCSB binding: cassandra (any CQL endpoint, ScyllaDB too) | redis
    endpoint: {host: 127.0.0.1, port: auto}   # auto: a free port per trial
                                  # password_env: NAME (binding redis): the YCSB client's password is read from
                                  # this environment variable, never from a file nosqltune stores or keeps
    config:                       # how a configuration reaches the datastore
      format: lines               # lines (directive value) | yaml (keys over a base) | template | none
      base: base.conf             # lines/yaml: written first; template: the template (${knob} placeholders)
      file: ${workdir}/redis.conf # where the rendered configuration is written
      command: ...                # optional: run after rendering (e.g. push the file, call an API)
    steps:
      reset:    {run: "...", timeout: 60}     # per trial, before start: restore the loaded data
      start:    {run: "redis-server ${config_file}", timeout: 30, background: true}
      health:   {run: "redis-cli -p ${port} ping | grep -q PONG", timeout: 30}   # retried until it passes
      stop:     {run: "redis-cli -p ${port} shutdown nosave", timeout: 30}
      load:     {run: "...", timeout: 600}    # optional: load the data (default: YCSB's load phase)
      snapshot: {run: "...", timeout: 600}    # optional: after load and stop, keep the data in ${dataset}
      run:      {run: "...", timeout: 600}    # optional: the workload, printing YCSB's text output
      version:  {run: "redis-server --version", timeout: 10}   # optional: for the environment fingerprint

Commands run under bash in the trial's directory. Placeholders ${workdir}, ${host}, ${port}, ${config_file},
${config_json}, ${dataset}, ${records}, ${target_dir} and ${<knob>} stand for values that are in the environment
as NOSQLTUNE_WORKDIR, ..., NOSQLTUNE_TARGET_DIR and KNOB_<NAME>: each placeholder is turned into a reference to
its variable, so bash expands the value without ever parsing it as code (unknown placeholders are left to the
shell). Quote a placeholder ("${config_file}") where a value may hold spaces. The log shows each command with
the values written in. A datastore's password is for the user's environment: a step reads it as any other
variable ("$MY_PASSWORD", left to the shell, so the log shows the reference, not the value), and the YCSB client
gets it through `endpoint: password_env`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...errors import UsageError

FORMATS = ("lines", "yaml", "template", "none")
STEPS = ("reset", "start", "health", "stop", "load", "snapshot", "run", "version")
REQUIRED = ("start", "health", "stop")
BINDINGS = ("cassandra", "redis")


@dataclass(frozen=True)
class Step:
    run: str
    timeout: float
    background: bool = False


@dataclass
class Target:
    path: Path
    name: str
    knobs: str
    binding: str
    host: str
    port: int | None                 # None: a free port per trial
    config_format: str
    config_file: str | None
    config_base: Path | None
    config_command: Step | None
    steps: dict[str, Step] = field(default_factory=dict)
    default_knobs: str | None = None
    digest: str = ""
    password_env: str | None = None   # the environment variable holding the YCSB client's password

    @property
    def directory(self) -> Path:
        return self.path.parent

    def knob_space(self):
        from ...knobs import load_space, load_space_file

        if "/" in self.knobs or self.knobs.endswith((".yaml", ".yml")):
            return load_space_file(self.directory / self.knobs)
        return load_space(self.knobs)


def _fail(path: Path, message: str) -> UsageError:
    return UsageError(f"target file {path}: {message}")


def _step(path: Path, name: str, raw: Any) -> Step:
    if isinstance(raw, str):
        raw = {"run": raw}
    if not isinstance(raw, dict) or not isinstance(raw.get("run"), str) or not raw["run"].strip():
        raise _fail(path, f"step {name} needs `run: COMMAND` (and optionally timeout, background)")
    unknown = set(raw) - {"run", "timeout", "background"}
    if unknown:
        raise _fail(path, f"step {name}: unknown entry {', '.join(sorted(unknown))}")
    timeout = raw.get("timeout", 60)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise _fail(path, f"step {name}: timeout must be a positive number of seconds, got {timeout!r}")
    background = raw.get("background", False)
    if not isinstance(background, bool) or (background and name != "start"):
        raise _fail(path, f"step {name}: background: true is for the start step only")
    return Step(run=raw["run"], timeout=float(timeout), background=background)


def load_target(path: str | Path) -> Target:
    """Read and check a target file; UsageError (one line) on anything wrong."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"target file not found: {path}")
    text = path.read_text()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _fail(path, f"not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise _fail(path, "expected a mapping with name, knobs, binding, endpoint, config and steps")
    unknown = set(data) - {"name", "knobs", "default_knobs", "binding", "endpoint", "config", "steps"}
    if unknown:
        raise _fail(path, f"unknown entry {', '.join(sorted(map(str, unknown)))}")
    name = str(data.get("name") or path.stem)
    knobs = data.get("knobs")
    if not isinstance(knobs, str) or not knobs:
        raise _fail(path, "`knobs` must name a knob space (cassandra, redis, scylla) or a knob file")
    binding = data.get("binding", "cassandra")
    if binding not in BINDINGS:
        raise _fail(path, f"binding must be one of {', '.join(BINDINGS)}, got {binding!r}")
    endpoint = data.get("endpoint") or {}
    if not isinstance(endpoint, dict) or set(endpoint) - {"host", "port", "password_env"}:
        raise _fail(path, "endpoint takes host, port and password_env")
    password_env = endpoint.get("password_env")
    if password_env is not None and not (isinstance(password_env, str)
                                         and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", password_env)):
        raise _fail(path, f"endpoint password_env must name an environment variable, got {password_env!r}")
    if password_env and binding != "redis":
        raise _fail(path, "endpoint password_env needs binding redis (loadgen's CQL binding does not authenticate)")
    port = endpoint.get("port", "auto")
    if port != "auto" and not (isinstance(port, int) and 0 < port < 65536):
        raise _fail(path, f"endpoint port must be a port number or auto, got {port!r}")
    config = data.get("config") or {"format": "none"}
    if not isinstance(config, dict) or set(config) - {"format", "file", "base", "command"}:
        raise _fail(path, "config takes format, file, base and command")
    fmt = config.get("format", "none")
    if fmt not in FORMATS:
        raise _fail(path, f"config format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt != "none" and not config.get("file"):
        raise _fail(path, f"config format {fmt} needs `file:` (where the rendered configuration goes)")
    base = None
    if config.get("base"):
        base = (path.parent / str(config["base"])).resolve()
        if not base.is_file():
            raise _fail(path, f"config base/template not found: {base}")
    if fmt == "template" and base is None:
        raise _fail(path, "config format template needs `base:` (the template file)")
    steps_raw = data.get("steps")
    if not isinstance(steps_raw, dict):
        raise _fail(path, "`steps` must be a mapping of step name -> {run, timeout}")
    unknown = set(steps_raw) - set(STEPS)
    if unknown:
        raise _fail(path, f"unknown step {', '.join(sorted(map(str, unknown)))}; steps are {', '.join(STEPS)}")
    missing = [s for s in REQUIRED if s not in steps_raw]
    if missing:
        raise _fail(path, f"missing step {', '.join(missing)} (start, health and stop are required)")
    target = Target(path=path, name=name, knobs=knobs, binding=binding, host=str(endpoint.get("host", "127.0.0.1")),
                    port=None if port == "auto" else port, config_format=fmt,
                    config_file=str(config["file"]) if config.get("file") else None, config_base=base,
                    config_command=_step(path, "config command", config["command"]) if config.get("command")
                    else None,
                    steps={name_: _step(path, name_, raw) for name_, raw in steps_raw.items()},
                    default_knobs=data.get("default_knobs"), password_env=password_env,
                    digest=hashlib.sha256(text.encode() + (base.read_bytes() if base else b"")).hexdigest()[:12])
    try:
        space = target.knob_space()
    except Exception as exc:  # a knob file with errors: its own message
        raise _fail(path, str(exc)) from None
    if target.default_knobs:
        try:
            space.subset(target.default_knobs)
        except Exception as exc:
            raise _fail(path, f"default_knobs: {exc}") from None
    return target
