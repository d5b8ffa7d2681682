"""`nosqltune report` on a real study store (a tuning run and a comparison on the recorded-dataset surrogate),
opened in a real headless browser (Debian's chromium): the page loads without script errors, every figure
decodes and is not blank, nothing is fetched from the network, and a screenshot is kept for a reviewer in
test-artifacts/ (or $NOSQLTUNE_TEST_ARTIFACTS)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


def headless(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    cmd = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def open_report(index: Path, screenshot: Path) -> dict[str, str]:
    """The page as the browser left it after load: the status attributes the page's own check wrote."""
    dom = headless("--virtual-time-budget=10000", "--dump-dom", index.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    status = re.search(r"<div id=\"report-status\"([^>]*)>", dom.stdout)
    assert status, "the report's status element is missing from the rendered page"
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', status.group(1)))
    shot = headless("--window-size=1280,2600", f"--screenshot={screenshot}", index.as_uri())
    assert shot.returncode == 0 and screenshot.exists(), shot.stderr[-2000:]
    return attrs


def not_blank(png: Path) -> bool:
    import matplotlib.image as mpimg

    pixels = mpimg.imread(png)[..., :3]
    return pixels.std() > 0.02 and (pixels < 0.9).mean() > 0.01   # some ink on the white


@pytest.fixture(scope="module")
def surrogate_study(tmp_path_factory, surrogate_cache):
    """A tuning study on surrogate:wide24 with enough configurations for every model-based figure, and a
    comparison of best and best-practice against the default."""
    from nosqltune.cli import main

    tmp = tmp_path_factory.mktemp("report")
    os.environ["NOSQLTUNE_CACHE"] = str(surrogate_cache)
    study = tmp / "s.db"
    try:
        assert main(["tune", "--system", "surrogate:wide24", "--knobs", "wide24", "--workload", "read90",
                     "--optimizer", "random", "--budget", "16", "--study", str(study), "--json"]) == 0
        assert main(["compare", "--study", str(study), "--candidates", "best,best-practice", "--repeat", "4",
                     "--json"]) == 0
    finally:
        os.environ.pop("NOSQLTUNE_CACHE", None)
    return study


@pytest.mark.slow   # 34 s with its study: make test-all (make test keeps the dashboard in chromium, tests/unit/test_dashboard.py, and the page check below)
def test_report_is_self_contained_and_renders_in_chromium(surrogate_study, tmp_path, capsys):
    from nosqltune.cli import main

    capsys.readouterr()
    out = tmp_path / "report"
    assert main(["report", "--study", str(surrogate_study), "--out", str(out), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    index = Path(written["report"])
    page = index.read_text()
    figures = [Path(f) for f in written["figures"]]
    names = {f.stem for f in figures}
    assert {"convergence", "tune-speedups", "tune-knobs", "tune-correlation", "tune-importance",
            "tune-predicted"} <= names
    assert all(f.parent == out and not_blank(f) for f in figures)
    assert page.count("data:image/png;base64,") == len(figures)
    assert not re.search(r"(src|href)=['\"]?https?:", page)          # opens offline
    for text in ("best-practice", "concurrent_writes", "8 * cores", "wilcoxon signed-rank", "verdict", "surrogate:wide24"):
        assert text in page, text

    if chromium() is None:
        pytest.fail("chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)")
    artifacts = Path(os.environ.get("NOSQLTUNE_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    screenshot = artifacts / "report-screenshot.png"
    screenshot.unlink(missing_ok=True)
    status = open_report(index, screenshot)
    assert status.get("data-loaded") == "yes", status
    assert status["data-errors"] == "0" and status["data-broken"] == "0", status
    assert int(status["data-images"]) == len(figures)
    assert not_blank(screenshot)


def test_the_page_check_catches_a_broken_figure(tmp_path):
    """The browser check must be able to fail: a page with one undecodable image and one script error."""
    if chromium() is None:
        pytest.fail("chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)")
    from nosqltune.report.page import SCRIPT

    page = tmp_path / "index.html"
    page.write_text(f"<!DOCTYPE html><html><head><script>{SCRIPT}</script></head><body>"
                    "<img src='data:image/png;base64,AAAA'><script>undefinedFunction();</script>"
                    "<div id='report-status' data-loaded='no'></div></body></html>")
    status = open_report(page, tmp_path / "shot.png")
    assert status["data-broken"] == "1" and status["data-errors"] == "1"


def test_report_bad_input(tmp_path, capsys):
    from nosqltune.cli import main

    assert main(["report", "--study", str(tmp_path / "missing.db"), "--out", str(tmp_path / "r")]) == 2
    assert "no study store" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() and not (tmp_path / "missing.db").exists()
    empty = tmp_path / "empty.db"
    from nosqltune.store import open_store

    store = open_store(str(empty))
    store.study("collect-only")
    store.close()
    assert main(["report", "--study", str(empty), "--out", str(tmp_path / "r")]) == 2
    assert "no tuning study" in capsys.readouterr().err and not (tmp_path / "r").exists()
