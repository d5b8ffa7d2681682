"""The generated results files under bench/results keep the reading written by hand when written again."""

from __future__ import annotations

import pytest


@pytest.fixture()
def faults(bench_script):
    return bench_script("faults")


ROWS = [{"kind": "fault", "fault": "datastore-kill", "phase": "measure", "system": "redis", "time": 1.0e9,
         "state": "FAIL", "reason": "crashed", "outcome": "died", "lost": 0, "counted_twice": 0, "orphans": 0,
         "files_outside": 0, "resumed": True},
        {"kind": "bad_input", "command": "bench", "input": "zero threads", "exit_code": 2, "message": "no", "time": 1.0e9}]


def test_a_new_faults_file_gets_empty_notes_markers_under_the_table(faults, tmp_path):
    out = tmp_path / "faults.md"
    text = faults.write(ROWS, out)
    start, end = "<!-- notes: hand-written, kept by bench/faults.py -->", "<!-- /notes -->"
    assert text.index("| datastore-kill |") < text.index(start) < text.index(end) < text.index("## Bad inputs")
    assert text[text.index(start) + len(start):text.index(end)].strip() == ""


def test_rewriting_the_faults_file_keeps_its_reading_and_renews_the_table(faults, tmp_path):
    out = tmp_path / "faults.md"
    first = faults.write(ROWS, out)
    reading = "## What the campaign found\n\n- the kill was seen at once"
    out.write_text(first.replace("<!-- /notes -->", reading + "\n<!-- /notes -->"))
    rows = ROWS + [{**ROWS[0], "fault": "client-kill"}]
    second = faults.write(rows, out)
    assert reading in second
    assert "| client-kill |" in second and "**Totals**: 2 faults" in second
    assert second.count("<!-- /notes -->") == 1
