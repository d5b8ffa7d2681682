"""docs/architecture.md names real places: every module path it gives (`a/b.py`, `a/b/`) exists under src/nosqltune,
loadgen or the repository, and every function it names in a path's parentheses is defined there."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _exists(path: str) -> bool:
    return any((base / path).exists() for base in (ROOT / "src" / "nosqltune", ROOT, ROOT / "src"))


def test_every_path_the_architecture_names_exists():
    named = set(re.findall(r"`((?:[a-z_]+/)+(?:[a-z_0-9]+\.(?:py|yaml))?)`", DOC))
    assert len(named) > 20, named   # the walk through one trial and the places to add things name many
    missing = sorted(p for p in named if not _exists(p))
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_the_functions_of_the_trials_path_are_where_it_says():
    pairs = re.findall(r"`((?:[a-z_]+/)+[a-z_0-9]+\.py)` \(`([A-Za-z_.]+)`", DOC)
    assert len(pairs) >= 4, pairs
    for path, name in pairs:
        text = next(base / path for base in (ROOT / "src" / "nosqltune", ROOT) if (base / path).exists()).read_text()
        last = name.split(".")[-1]
        assert re.search(rf"^\s*(def|class) {last}\b", text, re.M), f"{path} defines no {name}"
