import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def pytest_collection_modifyitems(items):
    """Tests marked slow (minutes of machine time, or claims about an optimizer's quality over many seeds) run
    only with NOSQLTUNE_SLOW=1 (`make test-all`)."""
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("slow") and os.environ.get("NOSQLTUNE_SLOW") != "1":
            item.add_marker(pytest.mark.skip(reason="slow test: run it with NOSQLTUNE_SLOW=1 (make test-all)"))


@pytest.fixture(autouse=True, scope="session")
def shipped_scenario_sizes(tmp_path_factory):
    """The tests see the scenarios' shipped sizes, not a calibration this machine's user stored in their cache
    (`calibrate --scenario`); a test that calibrates writes into this session's own file."""
    path = tmp_path_factory.mktemp("calibration") / "calibrated-scenarios.json"
    old = os.environ.get("NOSQLTUNE_CALIBRATION")
    os.environ["NOSQLTUNE_CALIBRATION"] = str(path)
    yield path
    if old is None:
        os.environ.pop("NOSQLTUNE_CALIBRATION", None)
    else:
        os.environ["NOSQLTUNE_CALIBRATION"] = old
