"""A throwaway PostgreSQL server for the tests: Debian's postgresql-15 binaries (`make setup` installs them),
`initdb` into a temporary folder, `postgres` on a free loopback port as a child process, stopped and removed at
the end. Password authentication over TCP (a planted password must never show in output or the store).
PostgreSQL refuses to run as root: as root, the server runs as the unprivileged user `nobody`."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "nosqltune"
PASSWORD = "planted-Secret-7f3c"      # tests search every output for it


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self) -> None:
        bindir = binaries()
        if bindir is None:
            raise RuntimeError("PostgreSQL binaries not found under /usr/lib/postgresql (run make setup)")
        self.folder = Path(tempfile.mkdtemp(prefix="nosqltune-pg-"))
        self.port = _free_port()
        as_root = os.geteuid() == 0
        user = pwd.getpwnam("nobody") if as_root else None

        def drop() -> None:
            import ctypes

            # the server dies with the test process, even when that is killed (no orphan postgres)
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
            if user:
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)

        if user:
            os.chown(self.folder, user.pw_uid, user.pw_gid)
        (self.folder / "pw").write_text(PASSWORD + "\n")
        if user:
            os.chown(self.folder / "pw", user.pw_uid, user.pw_gid)
        data = self.folder / "data"
        subprocess.run([str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--pwfile", str(self.folder / "pw"),
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"],
                       check=True, capture_output=True, preexec_fn=drop, cwd=self.folder)
        (self.folder / "pw").unlink()
        self.process = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(self.port), "-k", str(self.folder),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200", "-c", "shared_buffers=32MB"],
            stdout=subprocess.DEVNULL, stderr=open(self.folder / "server.log", "wb"), preexec_fn=drop,
            cwd=self.folder)
        self._wait_ready()
        self._databases = 0

    def url(self, database: str = "postgres", password: bool = True) -> str:
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql://{SUPERUSER}{secret}@127.0.0.1:{self.port}/{database}"

    def _wait_ready(self, timeout_s: float = 60) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {(self.folder / 'server.log').read_text()[-2000:]}")
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def new_database(self) -> str:
        """A fresh, empty database; its URL (with the password)."""
        import psycopg

        self._databases += 1
        name = f"t{os.getpid()}_{self._databases}"
        with psycopg.connect(self.url(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGQUIT)   # immediate shutdown
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
