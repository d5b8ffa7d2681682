"""Trial store: studies, trials and environment fingerprints behind one interface (`base.Store`), addressed by
URL. SQLite is the backend today (a path or sqlite:///path)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError
from .base import LEASE_TTL_S, SCHEMA_VERSION, Lease, Store, StudyBusy, TrialState
from .sqlite import SqliteStore

__all__ = ["LEASE_TTL_S", "SCHEMA_VERSION", "Lease", "SqliteStore", "Store", "StudyBusy", "TrialState",
           "open_existing_store", "open_store", "store_path"]


def store_path(url_or_path: str) -> Path | None:
    """The file behind a SQLite study URL or path (None for an in-memory store); UsageError for another scheme."""
    text = str(url_or_path)
    if text.startswith(("postgresql:", "postgres:")):
        raise UsageError(f"PostgreSQL studies are not supported yet ({text.split(':')[0]}://...): use a SQLite path "
                         "or sqlite:///path")
    if "://" in text and not text.startswith("sqlite://"):
        raise UsageError(f"unsupported study URL {text!r}: a study store is a SQLite file, given as a path or "
                         "sqlite:///path")
    path = text[len("sqlite:///"):] if text.startswith("sqlite:///") else text
    return None if path == ":memory:" else Path(path)


def open_store(url_or_path: str) -> Store:
    """`sqlite:///path/to.db`, `sqlite:///:memory:` or a plain file path; the file and its folder are created
    when missing. Bad input (another scheme, a directory, a place that cannot be written, a file that is not a
    store) is a one-line UsageError and leaves nothing behind."""
    path = store_path(url_or_path)
    if path is None:
        return SqliteStore(":memory:")
    if path.is_dir():
        raise UsageError(f"study store {path} is a directory: give a file in it, e.g. {path / 'study.db'}")
    created = _make_parents(path)
    existed = path.exists()
    try:
        if existed and not os.access(path, os.R_OK | os.W_OK):
            raise UsageError(f"study store {path} cannot be read and written by this user")
        try:
            return SqliteStore(path)
        except UsageError:
            raise
        except Exception as exc:   # sqlite3.OperationalError and the like: say where, in one line
            raise UsageError(f"cannot open the study store {path}: {str(exc).splitlines()[0]}") from None
    except BaseException:
        if not existed:
            for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
                leftover.unlink(missing_ok=True)
        for folder in reversed(created):
            folder.rmdir()
        raise


def open_existing_store(url_or_path: str) -> Store:
    """A store that must exist already (reading commands never create one)."""
    path = store_path(url_or_path)
    if path is not None and not path.exists():
        raise UsageError(f"no study store at {url_or_path}")
    return open_store(url_or_path)


def _make_parents(path: Path) -> list[Path]:
    """Create the missing folders above `path`; returns those created (outermost first), so a failure can
    take them away again."""
    missing = []
    parent = path.absolute().parent
    while not parent.exists():
        missing.append(parent)
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"cannot create the study store {path}: {parent} is not a directory")
    created: list[Path] = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            created.append(folder)
    except OSError as exc:
        for folder in reversed(created):
            folder.rmdir()
        raise UsageError(f"cannot create the study store {path}: {exc.strerror} ({exc.filename})") from None
    return created
