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


@pytest.fixture()
def bench_script(monkeypatch):
    """A script of bench/, imported by name for the test and forgotten after it, with bench/common.py (bench/ is
    no package): `bench_script("faults")`."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    loaded: list[str] = []

    def load(name: str):
        import importlib

        for module in (name, "common"):
            if module in sys.modules:
                monkeypatch.delitem(sys.modules, module)
            loaded.append(module)
        return importlib.import_module(name)

    yield load
    for module in loaded:
        sys.modules.pop(module, None)


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


@pytest.fixture(scope="session")
def surrogate_cache(tmp_path_factory) -> Path:
    """One NOSQLTUNE_CACHE for the tests that tune a recorded surrogate: each model is fitted once a session (about
    15 s for wide24's throughput model), then read from the cache as `tune` reads it on a user's machine. Under
    pytest-xdist the workers of one run share it (their temporary folders have one parent): the first to need a
    model fits it, and a worker that needs it meanwhile waits for that fit (surrogate.dataset) instead of making
    its own on the other core."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "surrogate-cache"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("surrogate-cache")


@pytest.fixture(scope="session")
def wide24_model(surrogate_cache, tmp_path_factory) -> Path:
    """The recorded wide24 dataset's throughput model (random forest), fitted once a session into the shared
    surrogate cache, written as `nosqltune model fit` writes a model directory: the model `online` is tested with."""
    from nosqltune.surrogate.dataset import SurrogateTarget
    from nosqltune.surrogate.models import save
    from nosqltune.surrogate.pipeline import best_measured, noise

    old = os.environ.get("NOSQLTUNE_CACHE")
    os.environ["NOSQLTUNE_CACHE"] = str(surrogate_cache)
    try:
        target = SurrogateTarget("wide24", kind="rf", seed=0)
        model = target._model("throughput")
    finally:
        if old is None:
            os.environ.pop("NOSQLTUNE_CACHE", None)
        else:
            os.environ["NOSQLTUNE_CACHE"] = old
    table = target.table
    meta = {"kind": "rf", "metric": "throughput", "maximize": True, "spec": table.spec.to_dict(),
            "trials": len(table.trial_ids), "seed": 0, "noise": noise(table, "throughput"),
            "best_measured": best_measured(table, "throughput"), "workloads": sorted(set(table.workloads))}
    out = tmp_path_factory.mktemp("online-model") / "wide24.throughput.rf.model"
    save(out, model, meta)
    return out


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the session (tests/pgserver.py), stopped and removed at its end."""
    from tests.pgserver import PostgresServer

    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A new, empty trial store on each backend: the store conformance suite runs once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'study.db'}"
    return request.getfixturevalue("postgres_server").new_database()
