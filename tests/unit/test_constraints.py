"""Installs are reproducible: scripts/constraints.txt pins every package pyproject.toml asks for (extras included)
at one version that satisfies its range, and scripts/setup.sh installs with it."""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version.strip() and " " not in line, f"not name==version: {line!r}"
        assert _norm(name) not in pins, f"{name} pinned twice"
        pins[_norm(name)] = version.strip()
    return pins


def test_every_declared_dependency_is_pinned_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"]) + [r for extra in project["optional-dependencies"].values() for r in extra]
    pins = _pins()
    for text in declared:
        req = Requirement(text)
        name = _norm(req.name)
        assert name in pins, f"{req.name} is a dependency and scripts/constraints.txt does not pin it"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} is outside {req}"
        for extra in req.extras:   # psycopg[binary]: the extra's package is pinned too
            assert _norm(f"{req.name}-{extra}") in pins or extra != "binary", f"{req.name}[{extra}] not pinned"


def test_setup_installs_with_the_constraints():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert re.search(r"pip install .*-c scripts/constraints\.txt .*-e '\.\[test\]'", setup)
