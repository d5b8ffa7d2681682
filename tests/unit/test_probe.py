"""The machine's speed probe taken before every trial (runtime/probe.py) and stored with it."""

from types import SimpleNamespace

from nosqltune.runtime.probe import machine_probe
from nosqltune.systems import Datastore
from nosqltune.systems.base import TrialResult, TrialSettings


def test_the_probe_is_short_and_says_the_cores_speed_and_its_spread():
    probe = machine_probe()
    assert probe["cpu_mb_s"] > 50 and probe["cpu_spread"] >= 1.0 and probe["seconds"] < 2.0
    slower = machine_probe(passes=2, size=1 << 20)
    assert slower["method"] == "sha256 1 MiB, best of 2"


def test_every_trial_of_a_datastore_carries_the_probe_taken_before_it():
    """The probe is taken before the datastore's trial starts, so the datastore's own load does not enter it."""
    order = []

    def run_trial(space, overrides, workload, settings, progress):
        order.append("trial")
        return TrialResult(state="FAIL", failure_kind="crashed", error="x")

    import nosqltune.runtime.probe as probe_module
    real = probe_module.machine_probe
    probe_module.machine_probe = lambda: order.append("probe") or real(passes=1, size=1 << 16)
    try:
        result = Datastore(SimpleNamespace(run_trial=run_trial)).run_trial(
            SimpleNamespace(), {}, SimpleNamespace(), TrialSettings())
    finally:
        probe_module.machine_probe = real
    assert order == ["probe", "trial"] and result.internals["machine_probe"]["cpu_mb_s"] > 0
