"""A redis-server process living in its own directory: config file rendered from knob values, a free port,
started in the foreground, checked ready (PING answered, dataset loaded), stopped with SIGKILL or SHUTDOWN."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import SetupError, TrialError
from ...knobs import KnobSpace
from ...runtime import process
from .resp import Connection, RedisError

RDB_FILE = "dump.rdb"
# settings of every trial's server, before the knobs (a directive given twice: the last one wins)
BASE_DIRECTIVES = ["bind 127.0.0.1", "protected-mode yes", "daemonize no", "supervised no",
                   f"dbfilename {RDB_FILE}", "loglevel notice", "always-show-logo no"]


def redis_server() -> str:
    path = shutil.which("redis-server")
    if not path:
        raise SetupError("redis-server is not installed: run scripts/setup.sh (it installs Debian's redis-server)")
    return path


def redis_version() -> str:
    """The installed server's version, e.g. 7.0.15."""
    out = subprocess.run([redis_server(), "--version"], capture_output=True, text=True, timeout=10).stdout
    match = re.search(r"v=(\d+(?:\.\d+)*)", out)
    return match.group(1) if match else out.strip()


def directive_value(knob, value: Any) -> str:
    """A knob value as redis.conf and CONFIG SET write it."""
    if knob.type == "bool":
        return "yes" if value else "no"
    if knob.unit == "MiB":
        return f"{value}mb"   # Redis reads "mb" as 1024*1024 bytes
    return str(value)


def render_directives(space: KnobSpace, overrides: dict[str, Any]) -> list[str]:
    """redis.conf lines for the knob values (knobs `applies: config`; `key` is the directive or a line template
    with {value})."""
    lines = []
    for name, value in overrides.items():
        knob = space.knobs[name]
        if knob.applies != "config":
            raise ValueError(f"knob {name} applies to {knob.applies}, not to redis.conf")
        text = directive_value(knob, value)
        lines.append(knob.key.replace("{value}", text) if "{value}" in knob.key else f"{knob.key} {text}")
    return lines


@dataclass
class RedisServer:
    """A server in `home` (data in home/data, config and log in home). Use as a context manager: it always
    stops."""

    home: Path
    directives: list[str] = field(default_factory=list)
    cpus: str | None = None
    address: str = "127.0.0.1"
    port: int | None = None
    proc: subprocess.Popen | None = None

    @property
    def log_path(self) -> Path:
        return self.home / "redis.log"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def config_text(self) -> str:
        lines = [*BASE_DIRECTIVES, f"port {self.port}", f"dir {self.data_dir}", f"logfile {self.log_path}",
                 "# knobs", *self.directives]
        return "\n".join(lines) + "\n"

    def start(self, timeout: float = 60.0, port_attempts: int = 3) -> float:
        """Launch and wait until PING answers and the dataset is loaded; returns the seconds that took.
        TrialError('refused') when the server rejects its configuration."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, port_attempts + 1):
            self.port = process.free_ports(1)[0]
            try:
                return self._launch(timeout)
            except TrialError as exc:
                if attempt == port_attempts or "Address already in use" not in (exc.log_excerpt or ""):
                    raise
        raise AssertionError("unreachable")

    def _launch(self, timeout: float) -> float:
        conf = self.home / "redis.conf"
        conf.write_text(self.config_text())
        cmd = [redis_server(), str(conf)]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus, *cmd]
        started = time.monotonic()
        with open(self.home / "stdout.log", "ab") as out:
            self.proc = process.spawn(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.home))
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - started

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                how = process.death_cause(self.proc) or self.failure_cause()
                raise TrialError(process.startup_failure_kind(self.proc), f"redis-server exited at startup: {how}",
                                 self.log_excerpt())
            try:
                with self.connect(timeout=2) as conn:
                    if conn.call("PING") == "PONG" and conn.info("persistence").get("loading") == "0":
                        return
            except (OSError, RedisError):
                pass   # not listening yet, or still loading (LOADING error reply)
            time.sleep(0.05)
        raise TrialError("timeout", f"redis-server was not ready within {timeout:.0f} s", self.log_excerpt())

    def connect(self, timeout: float = 10.0) -> Connection:
        return Connection(self.address, self.port, timeout)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_excerpt(self, lines: int = 30) -> str:
        texts = [p.read_text(errors="replace") for p in (self.home / "stdout.log", self.log_path) if p.exists()]
        return "\n".join("\n".join(texts).splitlines()[-lines:])

    def failure_cause(self) -> str:
        """Redis's own words for why it stopped: the config error block, else the last log line."""
        text = self.log_excerpt(60).splitlines()
        for i, line in enumerate(text):
            if "FATAL CONFIG FILE ERROR" in line:
                detail = [ln.strip() for ln in text[i + 1:i + 4] if ln.strip() and not ln.startswith(">>>")]
                return ": ".join(detail)[:300] or line.strip()
        meaningful = [ln.strip() for ln in text if ln.strip()]
        return meaningful[-1][:300] if meaningful else f"exit code {self.proc.returncode if self.proc else '?'}"

    def save_and_stop(self) -> None:
        """SAVE the dataset to dump.rdb, then SHUTDOWN NOSAVE (the dataset build)."""
        with self.connect(timeout=600) as conn:
            conn.call("SAVE")
            try:
                conn.call("SHUTDOWN", "NOSAVE")
            except (ConnectionError, OSError):
                pass   # the server closes the connection as it exits
        self.proc.wait(timeout=60)
        process.terminate(self.proc, timeout=5)

    def stop(self) -> None:
        """SIGKILL: a trial's data is thrown away (SIGTERM would make Redis save first)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        process.terminate(self.proc, timeout=5)

    def __enter__(self) -> "RedisServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
