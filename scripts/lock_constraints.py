#!/usr/bin/env python3
"""Write scripts/constraints.txt: every package nosqltune and its extras need, at the version installed now.

`make setup` (scripts/setup.sh) installs with `pip install -c scripts/constraints.txt`, so a fresh machine gets the
SMAC, ConfigSpace, scikit-learn and Ray that the figures in bench/results were made with, not whatever is newest
that day. To move to newer versions on purpose: install them (`pip install -U smac ...`), run `make test-all`, then
run this script and commit the new file with the test run's result in the message.

The closure is read from the installed packages' own metadata (importlib.metadata), following the requirements of
nosqltune with every extra it declares; markers are evaluated for this machine (Linux, this Python)."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

OUT = Path(__file__).resolve().parent / "constraints.txt"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "nosqltune") -> dict[str, str]:
    """name -> installed version of every package `root` needs with all its extras (root itself left out)."""
    top = metadata.distribution(root)
    extras = set(top.metadata.get_all("Provides-Extra") or [])
    seen: dict[str, str] = {}
    todo: list[tuple[str, set[str]]] = [(root, extras)]
    while todo:
        name, wanted = todo.pop()
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            sys.exit(f"lock_constraints: {name} is needed but not installed: run `make setup` first")
        if _norm(name) != _norm(root):
            seen[_norm(dist.metadata["Name"])] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            envs = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is not None and not any(req.marker.evaluate(env) for env in envs):
                continue
            key = _norm(req.name)
            if key not in seen:
                todo.append((req.name, set(req.extras)))
    return seen


def main() -> int:
    pins = closure()
    header = ("# nosqltune's Python dependencies as installed when the figures in bench/results were made; written by\n"
              "# scripts/lock_constraints.py (its docstring says how to refresh it), used by scripts/setup.sh.\n")
    OUT.write_text(header + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items())))
    print(f"{OUT}: {len(pins)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
