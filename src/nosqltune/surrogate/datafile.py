"""Dataset files: a recorded collection study as one compressed JSON file, found by path or by the name of one
shipped in `surrogate/datasets/` (e.g. `wide24`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from ..errors import UsageError


def is_surrogate(system: str | None) -> bool:
    """Whether a --system names the model of a recorded dataset (surrogate:NAME[:KIND]) rather than a datastore."""
    return bool(system) and system.startswith("surrogate:")

DATASETS = Path(__file__).parent / "datasets"


def resolve(name: str) -> Path:
    path = Path(name)
    if path.exists():
        return path
    packaged = DATASETS / f"{name}.json.gz"
    if packaged.exists():
        return packaged
    known = sorted(p.name.split(".")[0] for p in DATASETS.glob("*.json.gz"))
    raise UsageError(f"unknown surrogate dataset {name!r}: use a dataset file or one of {', '.join(known) or 'none shipped'}")


def read_dataset(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt") as fh:
            return json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the dataset {path}: {exc}") from None
