"""Trial store: studies, trials and environment fingerprints, addressed by URL (SQLite by default)."""

from __future__ import annotations

from .sqlite import SqliteStore, TrialState

__all__ = ["SqliteStore", "TrialState", "open_store"]


def open_store(url_or_path: str) -> SqliteStore:
    """`sqlite:///path/to.db`, `sqlite:///:memory:` or a plain file path."""
    from ..errors import NosqltuneError

    url_or_path = str(url_or_path)
    if url_or_path.startswith(("postgresql:", "postgres:")):
        raise NosqltuneError("PostgreSQL studies are not supported yet; use a SQLite path or sqlite:///path")
    if "://" in url_or_path and not url_or_path.startswith("sqlite://"):
        raise NosqltuneError(f"unsupported study URL {url_or_path!r}: use a path or sqlite:///path")
    path = url_or_path[len("sqlite:///"):] if url_or_path.startswith("sqlite:///") else url_or_path
    return SqliteStore(path)
