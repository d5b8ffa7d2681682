"""The SQLite trial store: trials are recorded RUNNING before they run and finished after."""

import pytest

from nosqltune.errors import NosqltuneError
from nosqltune.store import TrialState, open_store


def test_trial_lifecycle(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    study = store.study("bench", "cassandra", {"heap_mb": 2048})
    assert store.study("bench") == study
    env = store.environment({"cores": 2, "java": "17"})
    assert store.environment({"java": "17", "cores": 2}) == env
    t1 = store.start_trial(study, {"concurrent_writes": 64}, {"name": "ycsb-a"}, tag="bench", environment_id=env)
    assert store.trial(t1)["state"] == "RUNNING"
    store.finish_trial(t1, TrialState.COMPLETE, metrics={"summary": {"throughput_ops_s": 1000.0}},
                       timings={"boot_s": 4.2})
    t2 = store.start_trial(study, {"num_tokens": 0}, {"name": "ycsb-a"})
    store.finish_trial(t2, TrialState.FAIL, failure_kind="refused", error="bad num_tokens", log_excerpt="ERROR x")
    store.close()

    reopened = open_store(str(tmp_path / "s.db"))  # plain path works too
    rows = reopened.trials(study)
    assert [r["number"] for r in rows] == [0, 1]
    assert rows[0]["config"] == {"concurrent_writes": 64}
    assert rows[0]["metrics"]["summary"]["throughput_ops_s"] == 1000.0
    assert rows[1]["state"] == "FAIL" and rows[1]["failure_kind"] == "refused" and rows[1]["log_excerpt"] == "ERROR x"
    assert [r["id"] for r in reopened.trials(study, TrialState.FAIL)] == [t2]
    (only,) = reopened.studies()
    assert (only["name"], only["system"], only["settings"]) == ("bench", "cassandra", {"heap_mb": 2048})


def test_unsupported_urls_are_clear():
    with pytest.raises(NosqltuneError, match="PostgreSQL"):
        open_store("postgresql://db/x")
    with pytest.raises(NosqltuneError, match="unsupported"):
        open_store("mysql://x")
