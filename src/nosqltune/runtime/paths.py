"""Where nosqltune keeps its files: a per-user cache and a per-project work directory."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from ..errors import SetupError, UsageError


def cache_dir() -> Path:
    """Per-user cache shared by all projects: Maven artifacts, resolved classpaths, CDS archives, datasets."""
    root = os.environ.get("NOSQLTUNE_CACHE")
    if root:   # absolute: child processes run in folders of their own
        return Path(root).expanduser().resolve()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).resolve() / "nosqltune"


def work_dir() -> Path:
    """Per-project work directory (trial nodes, logs, the default study): ./.nosqltune by default."""
    return Path(os.environ.get("NOSQLTUNE_HOME", ".nosqltune")).expanduser().resolve()


def datasets_dir() -> Path:
    """The loaded datasets every trial restores, kept per user so another working directory reuses them:
    cache_dir()/datasets, or NOSQLTUNE_DATASETS."""
    root = os.environ.get("NOSQLTUNE_DATASETS")
    if root:
        return Path(root).expanduser().resolve()
    return cache_dir() / "datasets"


def check_writable(*which: str) -> None:
    """Refuse, in one line (UsageError) and before anything is written, a folder nosqltune will write that cannot
    be: `which` among "cache" (NOSQLTUNE_CACHE), "work" (NOSQLTUNE_HOME) and "datasets" (NOSQLTUNE_DATASETS).
    A folder that does not exist yet is made and taken away again, so the check leaves nothing behind."""
    places = {"cache": ("NOSQLTUNE_CACHE", cache_dir), "work": ("NOSQLTUNE_HOME", work_dir),
              "datasets": ("NOSQLTUNE_DATASETS", datasets_dir)}
    for name in which:
        variable, where = places[name]
        folder = where()
        given = f"{variable}={os.environ[variable]}" if os.environ.get(variable) else f"the {name} folder {folder}"
        fix = f"point {variable} at a folder you can write"
        existing, missing = nearest_existing(folder)
        if not existing.is_dir():
            raise UsageError(f"{given}: {existing} is a file, not a folder: {fix}")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UsageError(f"{given}: {existing} cannot be written by this user: {fix}")
        try:
            made = make_folders(missing)
        except OSError as exc:
            raise UsageError(f"{given}: cannot create {exc.filename or folder} ({exc.strerror}): {fix}") from None
        remove_folders(made)


def nearest_existing(path: Path) -> tuple[Path, list[Path]]:
    """The nearest path at or above `path` that exists, and the missing folders below it down to `path`
    (outermost first)."""
    missing = []
    existing = path.absolute()
    while not existing.exists() and existing != existing.parent:
        missing.append(existing)
        existing = existing.parent
    return existing, missing[::-1]


def make_folders(missing: list[Path]) -> list[Path]:
    """Create `missing` (outermost first) and return them; if one cannot be made, those made are taken away
    again and the OSError raised."""
    made: list[Path] = []
    try:
        for folder in missing:
            folder.mkdir()
            made.append(folder)
    except OSError:
        remove_folders(made)
        raise
    return made


def remove_folders(made: list[Path]) -> None:
    """Take away folders `make_folders` made, innermost first; one another process began to use meanwhile
    stays."""
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()


def maven_repo() -> Path:
    return cache_dir() / "maven"


def repo_root() -> Path:
    """The source checkout (for the loadgen Maven module)."""
    return Path(__file__).resolve().parents[3]


def loadgen_dir() -> Path:
    """The loadgen Maven module: the checkout's loadgen/, or NOSQLTUNE_LOADGEN."""
    path = Path(os.environ.get("NOSQLTUNE_LOADGEN", repo_root() / "loadgen"))
    if not (path / "pom.xml").exists():
        raise SetupError(f"loadgen module not found at {path} (set NOSQLTUNE_LOADGEN to the checkout's loadgen/)")
    return path


def loadgen_sources(root: Path) -> list[Path]:
    """What loadgen's jar is built from (its pom.xml and src/main), in a stable order."""
    return sorted(p for p in [root / "pom.xml", *(root / "src" / "main").rglob("*")] if p.is_file())


OWNER_FILE = ".owner"   # in a trial's folder: the process that made it (this machine's name, pid, start time)


def claim_trial_dir(home: Path) -> None:
    """Make a trial's folder (under the work directory's nodes/), marked with the process that owns it. Sibling
    folders whose owner on this machine is gone are removed first: a process killed by SIGKILL cannot remove its
    own."""
    import json

    home.parent.mkdir(parents=True, exist_ok=True)
    remove_orphaned_trial_dirs(home.parent)
    home.mkdir(exist_ok=True)
    (home / OWNER_FILE).write_text(json.dumps(_process_identity(os.getpid())))


def keep_trial_dir(home: Path) -> None:
    """A trial folder kept on purpose (--keep-nodes): no longer anyone's to sweep."""
    (home / OWNER_FILE).unlink(missing_ok=True)


def remove_orphaned_trial_dirs(nodes: Path) -> list[Path]:
    """Remove the trial folders under `nodes` whose owner process (on this machine) no longer runs, with what the
    killed owner left behind them: volumes still mounted under the folder (their loop devices detach) and the
    empty cgroups named after it. Folders without an owner (kept ones, those of older versions) and those of other
    machines are left alone."""
    import json
    import shutil

    removed = []
    for owner_file in nodes.glob(f"*/{OWNER_FILE}"):
        try:
            owner = json.loads(owner_file.read_text())
        except (OSError, ValueError):
            continue
        if owner.get("host") != _process_identity(os.getpid())["host"]:
            continue
        if _process_identity(int(owner.get("pid", 0))) == owner:
            continue   # its owner still runs
        if not release_leftovers(owner_file.parent):
            continue   # still mounted: removing the folder would delete the volume's files through the mount
        shutil.rmtree(owner_file.parent, ignore_errors=True)
        removed.append(owner_file.parent)
    return removed


def release_leftovers(trial: Path) -> bool:
    """What a trial folder's processes may hold outside it: mounts under it (unmounted first: removing the folder
    through a mount would delete the volume's files) and the empty cgroups named after it. Never raises: False, with
    the reason on stderr, when a mount stays (busy, or not ours to unmount): then the folder must stay too."""
    import sys

    from ..errors import SetupError
    from .blkio import remove_empty_groups
    from .mounts import release_mounts_under

    try:
        release_mounts_under(trial)
    except (SetupError, OSError) as exc:
        print(f"warning: {trial} keeps a mount: {exc}", file=sys.stderr)
        return False
    try:
        remove_empty_groups(trial.name)
    except OSError:
        pass   # a group we cannot remove holds no mount: the folder may go
    return True


def _process_identity(pid: int) -> dict:
    """This machine's name, the pid and the process's start time (a pid used again by another process differs)."""
    import socket

    try:
        started = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = None
    return {"host": socket.gethostname(), "pid": pid, "started": started}

