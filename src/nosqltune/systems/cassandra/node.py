"""One local Cassandra node: render its yaml, launch CassandraDaemon on Java 17, wait for CQL, stop it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ...errors import TrialError
from ...runtime import process
from ...runtime.java import require_java
from .provision import DEFAULT_VERSION, cassandra_classpath, jar_named

DATA_SUBDIRS = ("data", "commitlog", "saved_caches", "hints", "cdc_raw")


def _port_conflict(log_text: str) -> bool:
    """Cassandra's words for a port someone else holds (its own check, or the bind failing)."""
    return "is in use by another process" in log_text or "Address already in use" in log_text


def _trim(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _package_file(name: str) -> Path:
    return Path(str(resources.files(__package__) / name))


def sstable_component(name: str) -> str | None:
    """The component of an SSTable file by its name (nb-1-big-Data.db: Data.db; da-3gx0_...-bti-Partitions.db:
    Partitions.db); None for any other file (a manifest, a snapshot's schema)."""
    stem, dash, component = name.rpartition("-")
    return component if dash and stem and component.endswith(".db") and component[:1].isupper() else None


def base_settings() -> dict[str, Any]:
    return yaml.safe_load(_package_file("base.yaml").read_text())


# the shipped options that belong to G1: left off when a knob selects another collector (the JVM refuses two)
G1_ONLY = ("-XX:+UseG1GC", "-XX:G1", "-XX:MaxGCPauseMillis", "-XX:InitiatingHeapOccupancyPercent")


def jvm_options(flags: list[str] = ()) -> list[str]:
    """Cassandra 5.0's jvm17 options, without the G1 ones when `flags` (the knobs' JVM flags) select another
    garbage collector."""
    lines = _package_file("jvm17.options").read_text().splitlines()
    options = [ln.strip() for ln in lines if ln.strip().startswith("-")]
    if any(f.startswith("-XX:+Use") and f.endswith("GC") and f != "-XX:+UseG1GC" for f in flags):
        options = [o for o in options if not o.startswith(G1_ONLY)]
    return options


def set_dotted(settings: dict[str, Any], dotted: str, value: Any) -> None:
    """settings['a']['b'] = value for 'a.b', creating the nested mappings."""
    parts = dotted.split(".")
    node = settings
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def flatten_dotted(mapping: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': 1}} -> {'a.b': 1}: the inverse of set_dotted (empty mappings stay values)."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        if isinstance(value, dict) and value:
            flat.update(flatten_dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


@dataclass
class NodePorts:
    native: int
    storage: int
    jmx: int

    @classmethod
    def allocate(cls) -> "NodePorts":
        native, storage, jmx = process.free_ports(3)
        return cls(native=native, storage=storage, jmx=jmx)


def render_yaml(home: Path, ports: NodePorts, yaml_overrides: dict[str, Any] | None = None,
                address: str = "127.0.0.1", storage: Path | None = None) -> dict[str, Any]:
    """The node's cassandra.yaml: 5.0 shipped defaults, the node's dirs/ports, then knob overrides. `storage`: where
    its data folders go (its own volume), when not in `home`."""
    settings = base_settings()
    storage = storage or home
    settings.update({
        "data_file_directories": [str(storage / "data")],
        "commitlog_directory": str(storage / "commitlog"),
        "saved_caches_directory": str(storage / "saved_caches"),
        "hints_directory": str(storage / "hints"),
        "cdc_raw_directory": str(storage / "cdc_raw"),
        "listen_address": address,
        "rpc_address": address,
        "storage_port": ports.storage,
        "native_transport_port": ports.native,
        "seed_provider": [{
            "class_name": "org.apache.cassandra.locator.SimpleSeedProvider",
            "parameters": [{"seeds": f"{address}:{ports.storage}"}],
        }],
    })
    for key, value in (yaml_overrides or {}).items():
        set_dotted(settings, key, value)
    return settings


@dataclass
class CassandraNode:
    """A node living in `home` (data, commitlog, conf, logs). Use as a context manager: it always stops."""

    home: Path
    version: str = DEFAULT_VERSION
    heap_mb: int = 2048
    yaml_overrides: dict[str, Any] = field(default_factory=dict)
    jvm_flags: list[str] = field(default_factory=list)
    cpus: str | None = None  # taskset CPU list, e.g. "0"
    address: str = "127.0.0.1"
    ports: NodePorts | None = None
    proc: subprocess.Popen | None = None
    boot_seconds: float | None = None
    detached: bool = False   # outlives this process (see process.spawn)
    memory_limit_mb: int | None = None   # run in a memory cgroup of this size, page cache included (disk-bound)
    volume: Any = None   # its own volume (systems.volume.NodeVolume): the data folders there, its I/O capped
    extra_classpath: list[str] = field(default_factory=list)   # jars after Cassandra's (e.g. loadgen's OffsetClock)
    _launched: float = field(default=0.0, repr=False)   # monotonic time of the last launch
    _group: Any = field(default=None, repr=False)       # its runtime.cgroup.MemoryGroup while it runs
    _io_group: Any = field(default=None, repr=False)    # its runtime.blkio.IOGroup while it runs (a capped volume)

    @property
    def log_path(self) -> Path:
        return self.home / "logs" / "system.log"

    @property
    def storage(self) -> Path:
        """Where the node's data folders are: its volume, or its home."""
        return self.volume.storage if self.volume is not None else self.home

    def prepare(self) -> None:
        for sub in ("conf", "logs", "tmp"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        for sub in DATA_SUBDIRS:
            (self.storage / sub).mkdir(parents=True, exist_ok=True)

    def command(self) -> list[str]:
        classpath = cassandra_classpath(self.version)
        java = require_java(17)
        conf = self.home / "conf"
        logback = conf / "logback.xml"
        shutil.copyfile(_package_file("logback.xml"), logback)
        cmd = [java, f"-Xms{self.heap_mb}M", f"-Xmx{self.heap_mb}M", *jvm_options(self.jvm_flags),
               f"-javaagent:{jar_named(classpath, 'jamm')}",
               f"-Dcassandra.config=file://{conf / 'cassandra.yaml'}",
               f"-Dcassandra.jmx.local.port={self.ports.jmx}",
               f"-Dcassandra.logdir={self.home / 'logs'}",
               f"-Dcassandra.storagedir={self.home}",
               # native libraries (lz4, snappy) unpack here, not into /tmp: a killed node cannot remove its copies
               f"-Djava.io.tmpdir={self.home / 'tmp'}",
               f"-Dlogback.configurationFile={logback}",
               "-Dcassandra-foreground=yes",
               f"-Dnosqltune.node={self.home}",  # marks our JVMs for leak checks
               *self.jvm_flags,
               "-cp", os.pathsep.join([*classpath, *self.extra_classpath]),
               "org.apache.cassandra.service.CassandraDaemon"]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus, *cmd]
        return cmd

    def start(self, timeout: float = 120.0, port_attempts: int = 3) -> float:
        """Launch and wait until a CQL query succeeds; returns seconds from launch to CQL-ready.

        Ports come from the kernel just before launch; if another program takes one in between,
        the node is relaunched on fresh ports (up to `port_attempts` launches)."""
        self.prepare()
        fixed_ports = self.ports is not None
        for attempt in range(1, port_attempts + 1):
            if not fixed_ports:
                self.ports = NodePorts.allocate()
            try:
                return self._launch(timeout)
            except TrialError as exc:
                if fixed_ports or attempt == port_attempts or not _port_conflict(exc.log_excerpt):
                    raise
        raise AssertionError("unreachable")

    def _launch(self, timeout: float) -> float:
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Write cassandra.yaml and spawn the JVM, without waiting (`wait_ready`); `prepare()` came first."""
        settings = render_yaml(self.home, self.ports, self.yaml_overrides, self.address, self.storage)
        (self.home / "conf" / "cassandra.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        cmd = self.command()
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        joins = []   # the JVM starts inside its groups: every page it touches, every I/O it makes is charged there
        self._close_group()
        name = f"{self.home.parent.name}-{self.home.name}-{self.ports.native}"
        try:
            if self.memory_limit_mb:
                from ...runtime.cgroup import MemoryGroup

                self._group = MemoryGroup.create(name, self.memory_limit_mb << 20)
                joins.append(self._group.preexec())
            if self.volume is not None and self.volume.caps():
                from ...runtime.blkio import IOGroup

                self._io_group = IOGroup.create(f"{name}-io", self.volume.loop.device, self.volume.caps(),
                                                shared=self._group.path if self._group else None)
                if self._io_group.owned:
                    joins.append(self._io_group.preexec())
        except BaseException:
            self._close_group()
            raise

        def preexec() -> None:
            for join in joins:
                join()
        out = open(self.home / "logs" / "stdout.log", "ab")
        self._launched = time.monotonic()
        try:
            # Cassandra's mlockall faults in the whole committed heap at boot (~6 s for 2 GiB here);
            # without it (it logs a warning and goes on) pages fault in during the warm-up instead.
            self.proc = process.spawn(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=str(self.home),
                                      no_mlock=True, detached=self.detached, preexec=preexec if joins else None)
        except BaseException:
            self._close_group()
            raise
        finally:
            out.close()

    def memory(self) -> dict[str, Any] | None:
        """The node's memory cgroup now: limit, usage and its page-cache part, in bytes (None when uncapped)."""
        if self._group is None:
            return None
        usage = self._group.usage()
        return {"limit_bytes": self._group.limit_bytes, **{k: v for k, v in vars(usage).items()}}

    def oom_kills(self) -> int | None:
        """Out-of-memory kills in the node's memory group (None when it runs in none)."""
        return None if self._group is None else self._group.usage().oom_kills

    def _close_group(self) -> None:
        try:
            if self._io_group is not None:
                self._io_group.close()
                self._io_group = None
        finally:
            if self._group is not None:
                self._group.close()
                self._group = None

    def warm_page_cache(self, data_dir: Path) -> int | None:
        """Read the node's data files once into its memory group's page cache, index files last, at the machine's
        speed (the volume's caps lifted meanwhile where the kernel would apply them to the reader); the group's page
        cache in bytes afterwards, None for a node without a memory group (its data is in memory already)."""
        if self._group is None:
            return None
        lift = self._io_group.lifted() if self._io_group is not None else contextlib.nullcontext()
        with lift:
            return self._group.fill_page_cache([data_dir], last=lambda name: not name.endswith("-Data.db"))

    def page_cache_by_component(self, folder: Path) -> dict[str, dict[str, float]] | None:
        """Per SSTable component under `folder` (Data.db, Index.db, Partitions.db, ...): its size in MiB and the share
        of it in the page cache now. None for a node without a memory group (its data is all in memory) or a kernel
        that cannot tell."""
        from ...runtime.page_cache import cached_by_kind

        if self._group is None:
            return None
        try:   # a figure for the bottleneck line: a folder gone or unreadable leaves it out, never fails the trial
            found = cached_by_kind([folder], sstable_component)
        except OSError:
            return None
        return None if found is None else {
            kind: {"mib": round(v["bytes"] / 2**20, 1), "cached": round(v["cached_bytes"] / v["bytes"], 3)}
            for kind, v in sorted(found.items()) if v["bytes"]}

    def io_caps(self) -> dict[str, int] | None:
        """The caps the kernel holds for the node's volume now (read back from its I/O group), None without."""
        return None if self._io_group is None else self._io_group.caps()

    def disk_spec(self) -> str | None:
        """The node's volume as loadgen's cost.disks reads it (device counters, and its I/O group's), or None."""
        return None if self.volume is None else self.volume.disk_spec(self._io_group)

    def wait_ready(self, timeout: float) -> float:
        """Wait until the launched node answers CQL (the node is killed if it does not); seconds since launch."""
        try:
            self._wait_ready(self._launched, timeout)
        except BaseException:
            self.stop(drain=False, timeout=0)
            raise
        self.boot_seconds = time.monotonic() - self._launched
        return self.boot_seconds

    def _wait_ready(self, started: float, timeout: float) -> None:
        from .cql import try_query

        while True:
            if self.proc.poll() is not None:
                oom_kills = self.oom_kills()
                how = process.death_cause(self.proc, oom_kills) or f"code {self.proc.returncode}"
                raise TrialError(process.startup_failure_kind(self.proc, oom_kills),
                                 f"Cassandra exited during startup ({how}): {self.failure_cause()}", self.log_excerpt())
            if try_query(self.address, self.ports.native):
                return
            if time.monotonic() - started > timeout:
                raise TrialError("timeout", f"Cassandra was not CQL-ready after {timeout:.0f} s", self.log_excerpt())
            time.sleep(0.25)

    def _run_log_lines(self) -> list[str]:
        """This launch's lines of the node log, then the tail of its stdout (JVM errors land there)."""
        text = ""
        if self.log_path.exists():
            with open(self.log_path, "rb") as fh:
                fh.seek(getattr(self, "_log_offset", 0))
                text = fh.read().decode(errors="replace")
        stdout_log = self.home / "logs" / "stdout.log"
        if stdout_log.exists():
            text += "\n" + stdout_log.read_text(errors="replace")[-8000:]
        return text.splitlines()

    def log_excerpt(self, lines: int = 40) -> str:
        """The ERROR/WARN lines and exceptions (or else the tail) of this launch's logs."""
        all_lines = self._run_log_lines()
        picked = [ln for ln in all_lines if ln.startswith(("ERROR", "WARN")) or "Exception" in ln
                  or "Error" in ln or "Invalid" in ln]
        return "\n".join((picked or all_lines)[-lines:])

    def failure_cause(self) -> str:
        """One line: the most telling error of this launch (config rejected, port in use, heap too small)."""
        lines = [ln for ln in self._run_log_lines() if ln.strip()]
        for k, line in enumerate(lines):
            if "Exception encountered during startup" in line:
                own = line.split("Exception encountered during startup", 1)[1].lstrip(": ").strip()
                if own:
                    return _trim(own)
                following = [ln for ln in lines[k + 1:] if not ln.lstrip().startswith("at ")]
                if following:
                    return _trim("Exception encountered during startup: " + following[0].strip())
        markers = ("Invalid yaml", "ConfigurationException", "in use by another process", "Address already in use",
                   "java.lang.OutOfMemoryError", "Error:", "Fatal", "Unrecognized", "Could not")
        candidates = [ln for ln in lines if not ln.startswith(("WARN", "INFO", "DEBUG"))]
        for marker in markers:
            for line in candidates:
                if marker in line:
                    return _trim(line.split(" - ", 1)[-1])
        for line in reversed(candidates):
            if line.startswith("ERROR"):
                return _trim(line.split(" - ", 1)[-1])
        return _trim(lines[-1]) if lines else "no log output"

    def crash_report(self) -> str | None:
        """The JVM's own words when it crashed (its hs_err_pid file: the signal and where), e.g. a SIGBUS when a
        memory-mapped commit log segment could not get disk space."""
        report = self.home / f"hs_err_pid{self.proc.pid}.log" if self.proc else None
        if report is None or not report.exists():
            return None
        lines = [ln[1:].strip() for ln in report.read_text(errors="replace").splitlines()[:12] if ln.startswith("#")]
        said = [ln for ln in lines if ln and not ln.startswith(("A fatal error", "JRE version", "Java VM"))]
        return f"the JVM crashed: {said[0]} ({report.name})" if said else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, drain: bool = True, timeout: float = 30.0) -> None:
        """Drain (flush memtables, stop accepting writes), then SIGTERM, SIGKILL after `timeout`.

        `timeout=0` kills at once: for a node whose data is thrown away (a trial's), Cassandra's
        shutdown hook (flushes, hints, ~5 s here) is wasted time."""
        if self.proc is None:
            return
        if drain and self.is_running():
            from .internals import drain as jmx_drain
            try:
                jmx_drain(self.ports.jmx, timeout=timeout)
            except Exception:  # a failed drain must not keep the JVM alive
                pass
        if timeout <= 0:
            self.proc.kill()
        try:
            process.terminate(self.proc, timeout=timeout)
        finally:
            self.proc = None
            self._close_group()

    def __enter__(self) -> "CassandraNode":
        return self

    def __exit__(self, *exc) -> None:
        self.stop(drain=False)


def serve(home: Path, native_port: int | None, yaml_overrides: dict[str, Any], heap_mb: int,
          version: str = DEFAULT_VERSION, boot_timeout: float = 180.0, say=print) -> int:
    """Run one node in the foreground until SIGTERM/SIGINT (then drain and stop, leaving its data at rest), for
    an external target's start step and for a user's own use. `home/ready` exists while it serves CQL; `home/pid`
    holds this process's id (the one to signal)."""
    import signal

    ports = NodePorts.allocate()
    if native_port:
        ports.native = native_port
    node = CassandraNode(home=home, version=version, heap_mb=heap_mb, yaml_overrides=yaml_overrides, ports=ports)
    ready = home / "ready"
    ready.unlink(missing_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    (home / "pid").write_text(f"{os.getpid()}\n")
    stopping = []

    def _stop(signum, _frame):
        stopping.append(signum)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    try:
        boot = node.start(boot_timeout)
        ready.write_text(f"{node.address}:{ports.native}\n")
        say(f"Cassandra {version} ready at {node.address}:{ports.native} after {boot:.1f} s (home {home})")
        while not stopping and node.is_running():
            time.sleep(0.2)
        if not node.is_running():
            say(f"Cassandra stopped by itself: {node.failure_cause()}")
            return 1
        return 0
    finally:
        ready.unlink(missing_ok=True)
        node.stop(drain=True)
        (home / "pid").unlink(missing_ok=True)
