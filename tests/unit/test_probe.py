"""The machine's speed probe taken before every trial (runtime/probe.py) and stored with it."""

import resource
import signal
from types import SimpleNamespace

from nosqltune.runtime.probe import DISK_FILE, disk_probe, machine_probe
from nosqltune.systems import Datastore
from nosqltune.systems.base import TrialResult, TrialSettings


def test_the_probe_is_short_and_says_the_cores_speed_and_its_spread():
    probe = machine_probe()
    assert probe["cpu_mb_s"] > 50 and probe["cpu_spread"] >= 1.0 and probe["seconds"] < 2.0
    slower = machine_probe(passes=2, size=1 << 20)
    assert slower["method"] == "sha256 1 MiB, best of 2"


def test_the_disk_probe_reads_past_the_page_cache_and_keeps_its_file(tmp_path):
    """O_DIRECT reads of a probe file written once in the trials' folder: their median and 90th percentile; a
    second probe reads the same file (not written again); a probe that cannot run is said, not raised."""
    probe = disk_probe(tmp_path / "home", reads=50, size=4 << 20)
    assert "disk_error" not in probe, probe
    assert 0 < probe["disk_read_ms"] <= probe["disk_read_ms_p90"] < 1000
    assert probe["disk_method"] == "50 random 4 KiB O_DIRECT reads of 4 MiB" and probe["disk_seconds"] < 5
    written = (tmp_path / "home" / DISK_FILE).stat()
    again = disk_probe(tmp_path / "home", reads=50, size=4 << 20)
    assert (tmp_path / "home" / DISK_FILE).stat().st_mtime_ns == written.st_mtime_ns and again["disk_read_ms"] > 0
    assert [p.name for p in (tmp_path / "home").iterdir()] == [DISK_FILE]   # no scratch file left
    small = tmp_path / "small"   # a disk that fills while the file is written: no part of it is left
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    old = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, hard))
    try:
        full = disk_probe(small, reads=5, size=4 << 20)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old)
    assert set(full) == {"disk_error"} and list(small.iterdir()) == []
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    refused = disk_probe(blocked / "home", reads=5, size=1 << 20)   # a folder that cannot be made
    assert set(refused) == {"disk_error"} and refused["disk_error"].startswith("NotADirectoryError")


def test_every_trial_of_a_datastore_carries_the_probe_taken_before_it(tmp_path, monkeypatch):
    """The probe is taken before the datastore's trial starts, so the datastore's own load does not enter it."""
    monkeypatch.setenv("NOSQLTUNE_HOME", str(tmp_path / "home"))
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
    assert result.internals["machine_probe"]["disk_read_ms"] > 0   # the disk under the trials' folder too
