"""A study's machine time split into phases (tuning/cost.py): the phases add up to the trials' own totals, what no
phase names is `other`, trials without timings (running, or stored before timings were kept) are left out, and the
best found is followed against the machine hours spent."""

import pytest

from nosqltune.tuning.cost import PHASES, best_by_machine_time, format_split, time_split, trial_phases


def _row(number, total, value=None, tag="tune", **timings):
    return {"number": number, "tag": tag, "state": "COMPLETE" if value is not None else "FAIL",
            "started_at": 1000.0 + 100 * number, "finished_at": 1000.0 + 100 * number + total,
            "timings": {"total_s": total, **timings}, "value": value}


ROWS = [
    _row(0, 100.0, 5.0, dataset_build_s=60.0, restore_s=1.0, boot_s=9.0, apply_s=1.0, warmup_s=8.0, measure_s=20.0),
    _row(1, 40.0, 7.0, restore_s=0.5, volume_s=0.5, boot_s=9.0, warm_cache_s=2.0, warmup_s=8.0, measure_s=19.0),
    _row(2, 70.0, None, dataset_build_s=65.0),                       # a build, then the node failed to boot
    _row(3, 45.0, 6.0, tag="confirm", boot_s=10.0, warmup_s=8.0, measure_s=20.0),
    {"number": 4, "tag": "tune", "state": "RUNNING", "started_at": 1400.0, "finished_at": None, "timings": None},
]


def test_the_phases_add_up_to_the_trials_totals_and_other_takes_the_rest():
    split = time_split(ROWS)
    assert split["trials"] == 4 and split["builds"] == 2
    assert split["machine_s"] == pytest.approx(100 + 40 + 70 + 45)
    assert sum(split["seconds"].values()) == pytest.approx(split["machine_s"])
    assert split["seconds"]["build"] == pytest.approx(125.0)
    assert split["seconds"]["restore"] == pytest.approx(2.0)
    assert split["seconds"]["boot"] == pytest.approx(29.0)
    assert split["seconds"]["warm-up"] == pytest.approx(26.0)
    assert split["seconds"]["measure"] == pytest.approx(59.0)
    assert split["seconds"]["other"] == pytest.approx(255 - 125 - 2 - 29 - 26 - 59)
    assert sum(split["shares"].values()) == pytest.approx(1.0)
    assert split["wall_s"] == pytest.approx(1345.0 - 1000.0)
    line = format_split(split)
    assert "4 trials (2 dataset builds)" in line and "build 49%" in line and "measure 23%" in line


def test_every_timing_a_trial_writes_falls_in_one_phase_or_other():
    named = [k for _, keys in PHASES for k in keys]
    assert len(named) == len(set(named))
    phases = trial_phases({"total_s": 10.0, "client_s": 7.0, "stop_s": 1.0, "measure_s": 5.0})
    assert phases["measure"] == 5.0 and phases["other"] == pytest.approx(5.0)   # client_s overlaps the phases
    assert trial_phases({"dataset_build_s": 3.0}) is None                        # no total: not counted
    assert time_split([])["trials"] == 0 and format_split(time_split([])).endswith("no trial with timings")


def test_the_best_against_machine_hours_counts_failed_and_confirmation_trials_time():
    curve = best_by_machine_time(ROWS, lambda r: r.get("value") if r["tag"] == "tune" else None, maximize=True)
    hours = [round(h * 3600) for h, _ in curve]
    assert hours == [100, 140, 210, 255, 255]   # the running trial adds nothing
    assert [v for _, v in curve] == [5.0, 7.0, 7.0, 7.0, 7.0]
    low = best_by_machine_time(ROWS, lambda r: r.get("value"), maximize=False)
    assert [v for _, v in low] == [5.0, 5.0, 5.0, 5.0, 5.0]
