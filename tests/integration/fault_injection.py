"""Faults injected into a real study at a chosen phase of a chosen trial, and what is checked afterwards (issue 22).

`run_with_fault` starts `nosqltune tune` as its own process (so the tuner itself can be killed), follows the
trials by the tuner's progress lines and the client's phase lines in the trial folder, and at the wanted phase of
the wanted trial does the fault: a signal to the datastore, the YCSB client or the tuner. When the tuner stopped
(killed or interrupted) the study is resumed. Then `Outcome` holds what an operator would ask: the faulted trial's
stored state and reason, trials lost or counted twice, processes and files left behind, whether the study finished
on resume, and how long a hang took to be detected.

Phases of a trial, as seen from outside:
  restore  the tuner announced the trial ("[  2/3] ...") and restores its data (no datastore process yet)
  boot     the datastore process is up, the client not yet in its warm-up (not started, or its JVM starting: a
           Redis server answers within milliseconds, and the client is started right after, so a window that
           ended at the client's start was missed by a 50 ms poll now and then)
  warm-up  the client printed its warm-up line and not yet the end of warm-up
  measure  the client printed the end of its warm-up (the measured phase runs)
  stop     the client printed its final line (the trial stops the datastore and stores its result)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from nosqltune.store import open_store
from nosqltune.tuning.results import counted

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("restore", "boot", "warm-up", "measure", "stop")
# a Redis trial short enough for a campaign and long enough to hit each phase: the client throttled to 2,000 ops/s
REDIS_TRIAL = ["--system", "redis", "--records", "2000", "--operations", "8000", "--threads", "4",
               "--warmup-ops", "4000", "--warmup-max-seconds", "10", "--max-seconds", "8", "--target", "2000"]


def processes_under(*markers: str) -> dict[int, str]:
    """Live processes (not zombies) whose command line mentions one of `markers` or whose working directory is
    under one (redis-server rewrites its command line, its working directory is the trial's folder)."""
    found = {}
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                cwd = ""
        except (OSError, IndexError):
            continue
        if any(m in cmdline or cwd.startswith(m) for m in markers):
            found[int(entry.name)] = cmdline
    return found


def datastore_pid(home: Path) -> int | None:
    """The datastore of the trial running now under NOSQLTUNE_HOME `home` (Cassandra's JVM or redis-server)."""
    for pid, cmdline in processes_under(str(home / "nodes")).items():
        if "CassandraDaemon" in cmdline or cmdline.startswith("redis-server") or "redis-server" in cmdline.split(" ")[0]:
            return pid
    return None


def client_pid(home: Path) -> int | None:
    for pid, cmdline in processes_under(str(home / "nodes")).items():
        if "PhasedClient" in cmdline:
            return pid
    return None


def outside_snapshot(extra: list[Path] = ()) -> set[str]:
    """Names in the places a stray write would land: /tmp's top level, the JVMs' perf-data folders, $HOME's top
    level, the working directory, and `extra` folders."""
    names: set[str] = set()
    places = [Path("/tmp"), Path.home(), Path.cwd(), *extra, *Path("/tmp").glob("hsperfdata_*")]
    for place in places:
        try:
            names |= {str(p) for p in place.iterdir()}
        except OSError:
            pass
    return names


def stray_files(before: set[str], after: set[str]) -> list[str]:
    """What appeared outside our folders: new names, less those of other programs' live processes (a JVM's perf
    data file is named by its pid, and another test run's pytest folders are not ours)."""
    new = sorted(after - before)
    out = []
    for name in new:
        path = Path(name)
        if path.parent.name.startswith("hsperfdata_") and path.name.isdigit() and Path(f"/proc/{path.name}").exists():
            continue
        if path.name.startswith(("pytest-of-", "tmp", "Rtmp")) and path.parent == Path("/tmp"):
            continue   # Python's and R's own temporary folders (of this test run, or of other programs)
        out.append(name)
    return out


@dataclass
class Outcome:
    fault: str
    phase: str
    system: str
    exit_code: int | None = None          # the tuner's, on the faulted run
    resume_code: int | None = None        # the resumed run's, when the tuner was stopped by the fault
    user_sees: str = ""                   # the tuner's last line on stderr
    state: str | None = None              # the faulted trial's stored state and reason
    failure_kind: str | None = None
    error: str | None = None
    lost: int = 0
    counted_twice: int = 0
    orphans: list[str] = field(default_factory=list)
    files_outside: list[str] = field(default_factory=list)
    left_in_work_dir: list[str] = field(default_factory=list)   # trial folders still there at the end
    resumed: bool = False
    detect_s: float | None = None         # from the fault to the faulted trial's end
    injected: bool = False
    rows: list[dict] = field(default_factory=list)

    def row(self) -> dict:
        """The fields of faults.md's table."""
        return {"fault": self.fault, "phase": self.phase, "system": self.system,
                "outcome": f"{self.state} ({self.failure_kind}): {self.error}" if self.state else self.user_sees,
                "user_sees": self.user_sees, "exit_code": self.exit_code, "resume_code": self.resume_code,
                "state": self.state, "reason": self.failure_kind, "lost": self.lost,
                "counted_twice": self.counted_twice, "orphans": len(self.orphans),
                "files_outside": len(self.files_outside), "left_in_work_dir": len(self.left_in_work_dir),
                "resumed": self.resumed,
                "detect_s": None if self.detect_s is None else round(self.detect_s, 1)}


class _Watcher:
    """Reads the tuner's progress lines (stderr, --json) and counts trial starts."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.trials_started = 0
        self.trials_ended = 0
        self.on_end = None   # called with the count of ended trials as each ends, before the next line is read
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            try:
                progress = json.loads(line).get("progress", "")
            except (ValueError, AttributeError):
                continue
            if re.match(r"\[\s*\d+/\d+\]", progress):   # "[  2/3] ycsb-a: knob=value ...": a trial starts
                self.trials_started += 1
            elif progress.startswith("->"):   # "-> 1,999 ops/s | best ..." or "-> FAIL ...": a trial ended
                self.trials_ended += 1
                if self.on_end is not None:
                    self.on_end(self.trials_ended)

    def last_line(self) -> str:
        """What the user saw last: the tuner's last message (a progress line's text)."""
        for line in reversed(self.lines):
            try:
                return json.loads(line).get("progress") or line
            except (ValueError, AttributeError):
                if line.strip():
                    return line.strip()
        return "(nothing: the tuner was killed)"


def _client_phase(home: Path, since: float) -> str | None:
    """The newest trial's client phase from its stderr file (loadgen's own lines), None before it started."""
    files = [p for p in (home / "nodes").glob("*/run/run.err") if p.stat().st_mtime >= since - 1]
    if not files:
        return None
    text = max(files, key=lambda p: p.stat().st_mtime).read_text(errors="replace")
    if "[loadgen] done:" in text:
        return "stop"
    if "warm-up done" in text:
        return "measure"
    if "[loadgen] warm-up" in text:
        return "warm-up"
    return None


def _reached(phase: str, home: Path, watcher: _Watcher, trial_started_at: float) -> bool:
    if phase == "restore":
        return True
    if phase == "boot":
        return datastore_pid(home) is not None and _client_phase(home, trial_started_at) is None
    return _client_phase(home, trial_started_at) == phase


def tune_command(study: Path, *extra: str, budget: int = 3) -> list[str]:
    return [sys.executable, "-m", "nosqltune", "tune", "--study", str(study), "--optimizer", "random",
            "--budget", str(budget), "--confirm-top", "0", "--json", *extra]


def _env(home: Path, extra_env: dict | None) -> dict:
    return {**os.environ, "NOSQLTUNE_HOME": str(home), "PYTHONPATH": str(ROOT / "src"), **(extra_env or {})}


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the filesystem holding `folder` (a small tmpfs of the test's) to the last byte, or to `leave` bytes
    (allocated at once); returns the filler."""
    filler = folder / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if leave:
        try:
            st = os.statvfs(folder)
            os.posix_fallocate(fd, 0, max(1, st.f_bavail * st.f_frsize - leave))
        finally:
            os.close(fd)
        return filler
    try:
        for size in (1 << 20, 4096, 1):   # whole megabytes, then the last blocks and bytes
            block = b"\0" * size
            try:
                while True:
                    os.write(fd, block)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


class HeldLock:
    """Another program holding the SQLite study store's write lock (an exclusive transaction) for `seconds`."""

    def __init__(self, study: Path, seconds: float) -> None:
        code = ("import sqlite3, sys, time\n"
                "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                "db.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(float(sys.argv[2]))\n")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(study), str(seconds)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        self.proc.kill()
        self.proc.wait()


def run_with_fault(*, fault: str, phase: str, home: Path, study: Path, trial_args: list[str], budget: int = 3,
                   trial: int = 2, system: str = "redis", extra_env: dict | None = None,
                   timeout: float = 900, outside: list[Path] = (), full: Path | None = None,
                   lock_s: float = 45) -> Outcome:
    """A study of `budget` trials with `fault` done at `phase` of trial number `trial` (1-based), then a resume
    when the tuner did not finish on its own, then the checks. fault: datastore-kill, datastore-hang,
    client-kill, client-hang, tuner-kill, tuner-interrupt; data-full (the filesystem of `full`, where the trials'
    data lives, filled until the faulted trial ended), store-full (the study's filesystem `full` filled until the
    tuner stops), store-locked (another program holds the store's write lock for `lock_s` seconds)."""
    outcome = Outcome(fault=fault, phase=phase, system=system)
    before = outside_snapshot(list(outside))
    cmd = tune_command(study, *trial_args, budget=budget)
    proc = subprocess.Popen(cmd, env=_env(home, extra_env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_sigint_default, cwd=str(study.parent))
    watcher = _Watcher(proc)
    injected_at = None
    trial_started_at = None
    stopped: list[int] = []
    filler: Path | None = None
    held: HeldLock | None = None
    before_restore: dict[str, Any] = {}
    if fault == "data-full" and phase == "restore":
        # full before the trial writes anything, whatever its restore costs (a copy of milliseconds when an earlier
        # test built the dataset, a build of seconds when none did): the tuner held still from the end of the
        # trial before it while the disk fills, 64 KiB left for the trial's folder, so the restore meets the
        # full disk (a fill raced against the restore lost when the restore was quick, and the study ran on)
        def fill_between(ended: int) -> None:
            if ended == trial - 1 and not before_restore:
                os.kill(proc.pid, signal.SIGSTOP)
                try:
                    before_restore["filler"] = fill(full, leave=64 << 10)
                finally:
                    os.kill(proc.pid, signal.SIGCONT)
                before_restore["at"], outcome.injected = time.time(), True
        watcher.on_end = fill_between
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
            if filler is not None and fault == "data-full" and watcher.trials_ended >= trial:
                filler.unlink()   # the operator frees space: the next trials run again
                filler = None
            if injected_at is not None:
                continue
            if watcher.trials_started < trial:
                continue
            if trial_started_at is None:
                trial_started_at = time.time()
            if not _reached(phase, home, watcher, trial_started_at):
                continue
            if phase == "measure":
                time.sleep(0.5)   # well inside the measured phase
            if fault == "data-full" and phase == "restore":
                if "at" not in before_restore:
                    continue
                filler, injected_at = before_restore["filler"], before_restore["at"]
                continue
            if fault in ("data-full", "store-full"):
                filler = fill(full)
                injected_at, outcome.injected = time.time(), True
                continue
            if fault == "store-locked":
                held = HeldLock(study, lock_s)
                injected_at, outcome.injected = time.time(), True
                continue
            target = {"datastore": datastore_pid, "client": client_pid}.get(fault.split("-")[0])
            if target is None:
                pid = proc.pid
            else:
                pid = target(home)
                if pid is None:
                    continue
            sig = {"kill": signal.SIGKILL, "hang": signal.SIGSTOP, "interrupt": signal.SIGINT}[fault.split("-")[1]]
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                continue
            if sig == signal.SIGSTOP:
                stopped.append(pid)
            injected_at = time.time()
            outcome.injected = True
        if proc.poll() is None:
            proc.kill()
            raise AssertionError(f"the tuner did not finish within {timeout:.0f} s after {fault} at {phase}")
        proc.wait()
        watcher.thread.join(timeout=10)
        outcome.exit_code = proc.returncode
        outcome.user_sees = watcher.last_line()
    finally:
        for made in {filler, before_restore.get("filler")} - {None}:   # space freed (and a held lock let go)
            made.unlink(missing_ok=True)                                # before the resume
        if held is not None:
            held.release()
        for pid in stopped:   # a hung process the trial could not end is continued, to be killed below
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
    if outcome.exit_code != 0:   # the tuner stopped: the study resumes
        done = subprocess.run(cmd + ["--resume"], env=_env(home, extra_env), capture_output=True, text=True,
                              timeout=timeout, cwd=str(study.parent))
        outcome.resume_code = done.returncode
        if done.returncode != 0:
            outcome.user_sees += f" | resume: {done.stderr.strip().splitlines()[-1:]}"
    rows = open_store(str(study)).trials()
    outcome.rows = rows
    faulted = [r for r in rows if (r.get("meta") or {}).get("suggestion") == trial - 1]
    if faulted:   # the faulted trial's first row, as stored after the resume (a killed tuner's trial: interrupted)
        first = faulted[0]
        outcome.state, outcome.failure_kind, outcome.error = first["state"], first["failure_kind"], first["error"]
        if injected_at and first.get("finished_at") and outcome.exit_code == 0:
            outcome.detect_s = first["finished_at"] - injected_at
    suggestions = [(r.get("meta") or {}).get("suggestion") for r in counted(rows)]
    outcome.lost = len(set(range(budget)) - set(suggestions))
    outcome.counted_twice = len(suggestions) - len(set(suggestions))
    outcome.resumed = outcome.exit_code == 0 or outcome.resume_code == 0
    time.sleep(0.5)
    deadline = time.monotonic() + 15   # a killed JVM can take a moment to exit on a loaded machine
    while time.monotonic() < deadline:
        outcome.orphans = list(processes_under(str(home)).values())
        if not outcome.orphans:
            break
        time.sleep(0.5)
    outcome.files_outside = stray_files(before, outside_snapshot(list(outside)))
    outcome.left_in_work_dir = sorted(p.name for p in (home / "nodes").glob("*")) if (home / "nodes").exists() else []
    return outcome
