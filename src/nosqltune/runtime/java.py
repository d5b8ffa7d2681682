"""Finding Java and running Maven: the two tools every JVM-based target needs."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from ..errors import SetupError
from .paths import maven_repo


@functools.lru_cache(maxsize=None)
def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise SetupError("Java not found: install a JDK 17 (apt-get install openjdk-17-jdk-headless) or set JAVA_HOME")
    return candidate


@functools.lru_cache(maxsize=None)
def java_version() -> int:
    out = subprocess.run([java_executable(), "-version"], capture_output=True, text=True).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise SetupError(f"cannot read the Java version from: {out.strip().splitlines()[0] if out else '(nothing)'}")
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 else major


def require_java(minimum: int = 17) -> str:
    if java_version() < minimum:
        raise SetupError(f"Java {minimum}+ is needed, found Java {java_version()} at {java_executable()}")
    return java_executable()


def run_maven(pom: Path, goals: list[str], *, offline: bool = False) -> None:
    """Run Maven on `pom` with the per-user nosqltune repository; SetupError with Maven's own error line."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("Maven not found: install it (apt-get install maven)")
    cmd = [mvn, "-B", "-q", f"-Dmaven.repo.local={maven_repo()}", "-f", str(pom)]
    if offline:
        cmd.append("-o")
    proc = subprocess.run(cmd + goals, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "[ERROR]" in ln] or (proc.stdout + proc.stderr).splitlines()
        first = lines[0].replace("[ERROR]", "").strip() if lines else f"exit {proc.returncode}"
        raise SetupError(f"Maven failed on {pom}: {first}")


def read_classpath(path: Path) -> list[str] | None:
    """A classpath file written by maven-dependency-plugin, or None when absent or stale: a jar is missing, or
    damaged (not a readable zip: a download cut short, a disk fault); damaged jars are removed from the Maven
    cache, so that resolving again fetches them afresh."""
    if not path.exists():
        return None
    entries = [e for e in path.read_text().strip().split(os.pathsep) if e]
    if not entries or not all(Path(e).exists() for e in entries):
        return None
    damaged = [e for e in entries if e.endswith(".jar") and not _readable_jar(e, *_identity(e))]
    for entry in damaged:
        Path(entry).unlink(missing_ok=True)
    return None if damaged else entries


def _identity(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


@functools.lru_cache(maxsize=None)
def _readable_jar(path: str, *_identity: int) -> bool:
    """Whether a jar's central directory reads (checked once per process and file version: ~1 ms a jar)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as jar:
            return bool(jar.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
