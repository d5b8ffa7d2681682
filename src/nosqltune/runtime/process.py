"""Child processes that must never outlive nosqltune: spawn, track, and reap them on any exit."""

from __future__ import annotations

import atexit
import ctypes
import os
import resource
import signal
import socket
import subprocess
import threading
from contextlib import contextmanager
from typing import IO, Callable, Iterator, Sequence

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_CAP_IPC_LOCK = 14
_live: set[subprocess.Popen] = set()
_lock = threading.Lock()


def _child_setup(no_mlock: bool, detached: bool = False, preexec: Callable[[], None] | None = None,
                 parent: int | None = None) -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if not detached:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if parent is not None and os.getppid() != parent:
                os._exit(1)   # the parent died between fork and prctl: the signal will never come
        if no_mlock:
            # root ignores RLIMIT_MEMLOCK through CAP_IPC_LOCK: drop it from the bounding set so the
            # exec'd program runs without it, then the zero limit makes mlockall fail
            libc.prctl(_PR_CAPBSET_DROP, _CAP_IPC_LOCK)
            resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    except OSError:
        pass
    os.setpgid(0, 0)  # own process group: a terminal's Ctrl-C reaches only us; we stop children ourselves
    if preexec is not None:
        preexec()


# environment variables nosqltune set for itself that its children do not inherit (the trial store's password,
# when a PostgreSQL URL's password was moved into PGPASSWORD as a command started): hide_from_children adds one
_own_secrets: set[str] = set()


def hide_from_children(name: str) -> None:
    _own_secrets.add(name)


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a child: ours without what we set for ourselves, plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if k not in _own_secrets}, **extra}


def spawn(cmd: Sequence[str], *, stdout: IO | int | None = None, stderr: IO | int | None = None,
          env: dict | None = None, cwd: str | None = None,
          no_mlock: bool = False, detached: bool = False,
          preexec: Callable[[], None] | None = None) -> subprocess.Popen:
    """Start a tracked child that the kernel kills if we die (PR_SET_PDEATHSIG) and we kill at exit.
    `detached`: neither; the child outlives us (a local cluster started by `nosqltune cluster up`), and whoever
    stops it later finds it by its pid.
    `preexec`: called in the child after our own setup, just before exec (e.g. `MemoryGroup.preexec()` to start
    the child inside a memory cgroup); it may use only fork-safe calls (os.open, os.write), and if it raises,
    Popen raises subprocess.SubprocessError and no child runs."""
    parent = os.getpid()
    if env is None:   # our own secrets stay ours: a datastore, a client or a target's command needs none of them
        env = child_env()
    proc = subprocess.Popen(list(cmd), stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd,
                            preexec_fn=lambda: _child_setup(no_mlock, detached, preexec, parent))
    if not detached:
        with _lock:
            _live.add(proc)
    return proc


def terminate(proc: subprocess.Popen, timeout: float = 20.0) -> int | None:
    """SIGTERM, then SIGKILL after `timeout`; always reaps and untracks the child."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
    finally:
        with _lock:
            _live.discard(proc)
    return proc.returncode


def death_cause(proc: subprocess.Popen | None, oom_kills: int | None = None) -> str | None:
    """How an ended child ended when a signal ended it ("killed by SIGKILL ..."), else None (it exited itself).
    `oom_kills`, the out-of-memory kills its memory group counted (None: it ran in none), tells the kernel's
    killer from another process."""
    code = None if proc is None else proc.poll()
    if code is None or code >= 0:
        return None
    name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
    if oom_kills:
        return f"killed by {name}: the kernel's out-of-memory killer, its memory group was full"
    if -code != signal.SIGKILL:
        return f"killed by {name}"
    if oom_kills == 0:
        return f"killed by {name} (by another process: its memory group counted no out-of-memory kill)"
    return f"killed by {name} (by another process, or the kernel's out-of-memory killer)"


def startup_failure_kind(proc: subprocess.Popen, oom_kills: int | None = None) -> str:
    """The failure kind of a datastore that ended while it started: `refused` when it exited by itself (it
    rejected its configuration) or its memory group ran out (the configuration does not fit), `crashed` when
    a signal ended it otherwise (another process killed it, or it crashed)."""
    code = proc.poll()
    return "crashed" if code is not None and code < 0 and not oom_kills else "refused"


def reap_all() -> None:
    with _lock:
        procs = list(_live)
    for proc in procs:
        terminate(proc, timeout=5)


atexit.register(reap_all)


def install_signal_handlers() -> None:
    """Turn SIGTERM/SIGHUP into SystemExit so `finally` blocks stop nodes (Ctrl-C is KeyboardInterrupt)."""
    def _exit(signum, _frame):
        raise SystemExit(128 + signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _exit)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """Ports nothing listens on right now, asked of the kernel (held open together so they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) and SIGTERM back while the block runs, and act on them after it: for a trial's own
    cleanup (stop the datastore, unmount its volume, remove its groups), which a second Ctrl-C would otherwise cut
    short and leave a mount or a group behind. Python runs signal handlers in the main thread whichever thread the
    kernel delivers to, so the main thread's handlers are swapped for ones that only note the signal; in another
    thread (a local executor's worker) nothing is held back: its interruption reaches it through the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    held = {sig: signal.signal(sig, lambda signum, _frame: noted.append(signum))
            for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(noted):   # each signal once, to its own handler now
            signal.raise_signal(sig)
