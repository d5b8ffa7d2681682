"""Where nosqltune keeps its files: a per-user cache and a per-project work directory."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Per-user cache shared by all projects: Maven artifacts, resolved classpaths, CDS archives, datasets."""
    root = os.environ.get("NOSQLTUNE_CACHE")
    if root:
        return Path(root).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nosqltune"


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


def maven_repo() -> Path:
    return cache_dir() / "maven"


def repo_root() -> Path:
    """The source checkout (for the loadgen Maven module)."""
    return Path(__file__).resolve().parents[3]
