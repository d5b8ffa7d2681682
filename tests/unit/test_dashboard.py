"""`nosqltune dashboard` on a real study store (a tuning run on the recorded-dataset surrogate): its JSON endpoints,
that it never writes the store, its warnings and one-line errors, a store of 10,000 trials, the running trial's
phase stored as it changes, and the page in a real headless browser (Debian's chromium driven by Playwright)
while `tune` writes to the store."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUNE = ["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90", "--optimizer", "random"]


@pytest.fixture(scope="module")
def cache(surrogate_cache):
    """The session's surrogate model cache (tests/conftest.py): the model is fitted once (the slow part), then each
    trial is a prediction."""
    return surrogate_cache


@pytest.fixture(scope="module")
def study(tmp_path_factory, cache):
    """A tuning study of 8 trials on surrogate:wide24 (the store is copied by tests that change it)."""
    from nosqltune.cli import main

    path = tmp_path_factory.mktemp("dashboard") / "s.db"
    old = os.environ.get("NOSQLTUNE_CACHE")
    os.environ["NOSQLTUNE_CACHE"] = str(cache)
    try:
        assert main([*TUNE, "--budget", "8", "--study", str(path), "--json"]) == 0
    finally:
        if old is None:
            os.environ.pop("NOSQLTUNE_CACHE", None)
        else:
            os.environ["NOSQLTUNE_CACHE"] = old
    from nosqltune.store import open_store

    with open_store(str(path)) as store:
        store.checkpoint()    # everything in the file itself: the read-only test compares the file's bytes
    return path


def copy_of(path: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy.db"
    shutil.copy(path, out)
    return out


def client_of(path: Path):
    from nosqltune.dashboard.data import StudyFeed
    from nosqltune.dashboard.server import make_app
    from nosqltune.store import open_reader

    store = open_reader(str(path))
    return store, make_app(StudyFeed(store), source=str(path)).test_client()


def fail_row(store, study_id: int, error: str, kind: str = "config-rejected") -> int:
    """A failed tuning trial as tune stores one, of a configuration the study measured already (its last)."""
    from nosqltune.store import TrialState

    config = store.trials(study_id)[-1]["config"]
    trial = store.start_trial(study_id, config, {"name": "read90"}, tag="tune",
                              meta={"suggestion": 999, "kind": "suggested", "instance": "read90"})
    store.finish_trial(trial, TrialState.FAIL, failure_kind=kind, error=error)
    return trial


# ----------------------------------------------------------------------------------------------- JSON endpoints
def test_endpoints_give_the_study_then_only_what_changed(study, tmp_path):
    from nosqltune.store import open_store

    path = copy_of(study, tmp_path)
    reader, client = client_of(path)
    try:
        studies = client.get("/api/studies").get_json()
        assert [s["name"] for s in studies["studies"]] == ["tune"] and studies["poll_ms"] == 2000
        first = client.get("/api/study/tune").get_json()
        assert first["full"] and len(first["trials"]) == 8
        summary = first["summary"]
        assert summary["objective"]["metric"] == "throughput" and summary["trials"] == {
            "tune": 8, "all": 8, "failed": 0, "running": 0, "waiting": 0}
        assert summary["best"]["value"] > 0 and summary["default"]["value"] > 0
        assert summary["best"]["confirmed"] is False and summary["confirmation"]["state"] in ("asked", "none")
        assert {k["name"] for k in summary["knobs"]} >= {"concurrent_writes", "compaction_method"} and summary["importance"]["knobs"]
        assert all(0 <= k["score"] <= 1 for k in summary["importance"]["knobs"])
        assert summary["time"]["trials"] == 0 and summary["comparisons"] == []   # a surrogate stores no timings
        trial = first["trials"][0]
        assert trial["state"] == "COMPLETE" and trial["value"] > 0 and trial["kind"] == "default"
        assert set(trial["config"]) == {k["name"] for k in summary["knobs"]}

        again = client.get(f"/api/study/tune?after={first['cursor']}")
        assert again.headers["Cache-Control"] == "no-store"
        assert again.get_json()["trials"] == [] and again.get_json()["cursor"] == first["cursor"]

        with open_store(str(path)) as writer:     # tune writes a failed trial: only it comes next
            study_id = writer.find_study("tune")["id"]
            trial_id = fail_row(writer, study_id, "cassandra.yaml: concurrent_reads 4096 is over the limit")
        later = client.get(f"/api/study/tune?after={first['cursor']}").get_json()
        assert [t["id"] for t in later["trials"]] == [trial_id]
        failed = later["trials"][0]
        assert failed["state"] == "FAIL" and failed["failure_kind"] == "config-rejected" and "value" not in failed
        assert "over the limit" in failed["error"] and later["summary"]["trials"]["failed"] == 1

        missing = client.get("/api/study/nope")
        assert missing.status_code == 404 and "no tuning study 'nope'" in missing.get_json()["error"]
        assert client.get("/api/study/tune?after=x:y").status_code == 404
        page = client.get("/")
        assert page.status_code == 200 and b"plotly.min.js" in page.data
        assert client.get("/static/plotly.min.js").status_code == 200
    finally:
        reader.close()


def test_the_shipped_plotly_bundle_holds_every_trace_type_the_page_draws():
    """static/plotly.min.js is a partial bundle (scripts/plotly/): a trace type the page draws but the bundle lacks
    would draw nothing, with only a console warning. The types are read from the page's script and the bundle."""
    from nosqltune.dashboard import server

    static = Path(server.__file__).parent / "static"
    script = (static / "dashboard.js").read_text()
    drawn = set(re.findall(r'type: *"([a-z0-9]+)"', script))
    for choice in re.findall(r'type *[:=] *[^,";]*\? *"([a-z0-9]+)" *: *"([a-z0-9]+)"', script):   # many ? "scattergl" : ...
        drawn.update(choice)
    bundled = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', (static / "plotly.min.js").read_text()))
    assert {"scatter", "scattergl", "bar", "parcoords"} <= drawn    # the reading of the script still finds them
    assert drawn <= bundled, f"the page draws {sorted(drawn - bundled)}: add them to scripts/plotly/entry.js"


def test_the_study_read_ahead_and_kept_views_answer_as_a_fresh_read(study, tmp_path):
    """The server reads the study the page opens on as it starts; the trials' views it keeps are made again for a
    trial that changed (a running one that finishes), so every full answer is what a fresh reader gives."""
    from nosqltune.dashboard.data import StudyFeed
    from nosqltune.store import TrialState, open_reader, open_store

    path = copy_of(study, tmp_path)
    with open_reader(str(path)) as reader:
        feed = StudyFeed(reader)
        assert feed.first_study("nope") == "tune" and feed.first_study(None) == "tune"
        feed.read_ahead(None).join(timeout=60)
        assert "tune" in feed._cache and len(feed._cache["tune"].views) == 8
        with open_store(str(path)) as writer:
            study_id = writer.find_study("tune")["id"]
            config = writer.trials(study_id)[0]["config"]
            running = writer.start_trial(study_id, config, {"name": "read90"}, tag="tune",
                                         meta={"suggestion": 998, "kind": "suggested", "instance": "read90"})
            writer.phase_recorder(running)("booting the node")
            seen = {t["id"]: t for t in feed.study("tune")["trials"]}
            assert seen[running]["state"] == "RUNNING" and seen[running]["phase"] == "booting the node"
            writer.finish_trial(running, TrialState.FAIL, failure_kind="crash", error="the node exited with 137")
        kept = feed.study("tune")
        with open_reader(str(path)) as other:
            fresh = StudyFeed(other).study("tune")
    assert kept["trials"] == fresh["trials"] and kept["summary"] == fresh["summary"]
    last = {t["id"]: t for t in kept["trials"]}[running]
    assert last["state"] == "FAIL" and last["error"] == "the node exited with 137"


def test_serving_leaves_the_store_as_it_was(study, tmp_path):
    path = copy_of(study, tmp_path)
    before = (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest())
    reader, client = client_of(path)
    try:
        cursor = None
        for _ in range(3):
            client.get("/api/studies")
            data = client.get("/api/study/tune" + (f"?after={cursor}" if cursor else "")).get_json()
            cursor = data["cursor"]
        with pytest.raises(Exception, match="readonly|read-only"):    # SQLite refuses a write on this connection
            reader.update_meta(1, {"phase": "x"})
    finally:
        reader.close()
    assert (path.stat().st_mtime_ns, hashlib.sha256(path.read_bytes()).hexdigest()) == before


def test_a_reader_sees_what_is_written_and_can_write_nothing(store_url):
    """On both backends: the reader follows the writer (signature, changed trials) and every write is refused."""
    from nosqltune.store import TrialState, open_reader, open_store

    with open_store(store_url) as writer, open_reader(store_url) as reader:
        study_id = writer.study("s", settings={"tune": {}})
        first = writer.start_trial(study_id, {"a": 1}, {"name": "w"})
        before = reader.trials_signature(study_id)
        assert [r["id"] for r in reader.trials_changed(study_id, 0, 0.0)] == [first]
        writer.phase_recorder(first)("measuring")
        assert reader.trials_signature(study_id) != before                     # a new phase is a change
        writer.finish_trial(first, TrialState.COMPLETE, metrics={"summary": {}})
        second = writer.start_trial(study_id, {"a": 2}, {"name": "w"})
        end = reader.trial(first)["finished_at"]
        assert [r["id"] for r in reader.trials_changed(study_id, first, end + 1)] == [second]   # open, newer
        for write in (lambda: reader.study("t"), lambda: reader.update_meta(first, {"x": 1}),
                      lambda: reader.start_trial(study_id, {}, {})):
            with pytest.raises(Exception, match="(?i)read-?only"):
                write()
        assert [s["name"] for s in reader.studies()] == ["s"]


def test_a_store_of_10000_trials_is_ready_in_time(study, tmp_path):
    """10,000 tuning trials written directly (as many surrogate trials would take about 18 minutes): the page's
    first answer (the whole study) and a poll that finds nothing new, timed."""
    from nosqltune.dashboard.data import StudyFeed, encode
    from nosqltune.evaluation.study import study_of
    from nosqltune.store import open_reader, open_store
    from tests.synthetic import add_trials

    path = copy_of(study, tmp_path)
    with open_store(str(path)) as store:
        opened = study_of(store, store.find_study("tune"))
    add_trials(path, "tune", 10_000)
    with open_reader(str(path)) as reader:
        feed = StudyFeed(reader)
        first, cold = timed(lambda: encode(feed.study("tune")))   # as the server sends it
        data = json.loads(first)
        poll, unchanged = timed(lambda: feed.study("tune", data["cursor"]))
        assert poll["trials"] == []
        with open_store(str(path)) as writer:     # one more trial, as tune writes it
            fail_row(writer, opened.id, "the node exited with 137", kind="crash")
        poll, changed = timed(lambda: feed.study("tune", data["cursor"]))
        assert [t["number"] for t in poll["trials"]] == [10_008]
    assert len(data["trials"]) == 10_008 and data["summary"]["trials"]["failed"] == 104
    assert data["summary"]["time"]["trials"] == 10_000 and data["summary"]["bottlenecks"] == {"cores": 9896}
    print(f"10,008 trials ({len(first) / 1e6:.1f} MB of JSON): first answer {cold[0]:.2f} s ({cold[1]:.2f} s CPU), "
          f"a poll after a new trial {changed[0]:.2f} s ({changed[1]:.2f} s CPU), a poll that finds nothing new "
          f"{unchanged[0]:.3f} s")
    # bench/dashboard_scale.py times it (idle, median 1.56 s: the 2 s goal is met); these bounds catch a change of
    # scale and leave room for a loaded machine
    assert cold[0] < 8.0 and changed[0] < 4.0 and unchanged[0] < 0.5


def timed(work):
    """(result, (wall seconds, CPU seconds of this process))."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = work()
    return out, (time.perf_counter() - wall, time.process_time() - cpu)


# ----------------------------------------------------------------------------------------------- the command
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_once(path: Path, host: str, port: int = 0) -> list[str]:
    """Start serve(), stop it as soon as it listens; what it said."""
    from nosqltune.dashboard.server import serve
    from nosqltune.store import open_reader

    said: list[str] = []
    with open_reader(str(path)) as store:
        serve(store, source=str(path), host=host, port=port, say=said.append,
              ready=lambda server: threading.Thread(target=server.shutdown).start())
    return said


def test_loopback_by_default_and_a_warning_for_another_address(study):
    said = serve_once(study, "127.0.0.1")
    assert len(said) == 1 and "http://localhost:" in said[0] and "warning" not in said[0]
    said = serve_once(study, "0.0.0.0")
    assert said[0].startswith("warning:") and "no authentication" in said[0] and "0.0.0.0" in said[0]


def test_a_taken_port_and_bad_input_are_one_line(study, tmp_path, capsys):
    from nosqltune.cli import main

    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        code = main(["dashboard", "--study", str(study), "--port", str(port)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"port {port}" in err and "taken" in err

    assert main(["dashboard", "--study", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no study store" in err
    assert not (tmp_path / "none.db").exists()                   # nothing created
    (tmp_path / "text.db").write_text("not a database")
    assert main(["dashboard", "--study", str(tmp_path / "text.db")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["dashboard", "--study", str(study), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------- the running phase
def test_a_running_trial_stores_its_phase_as_it_changes(tmp_path):
    from nosqltune.store import TrialState, open_store

    with open_store(str(tmp_path / "p.db")) as store:
        study_id = store.study("s")
        trial = store.start_trial(study_id, {}, {"name": "read90"}, meta={"instance": "read90"})
        writes, shown = [], []
        real = store.update_meta
        store.update_meta = lambda *a, **k: (writes.append(a), real(*a, **k))
        phase = store.phase_recorder(trial, shown.append)
        for message in ("booting the node", "booting the node", "  warm-up 30 s\n", "measuring 60 s"):
            phase(message)
        assert len(shown) == 4 and len(writes) == 3                 # one write per change of phase
        assert store.trial(trial)["meta"] == {"instance": "read90", "phase": "measuring 60 s",
                                              "phase_at": pytest.approx(time.time(), abs=60)}
        store.finish_trial(trial, TrialState.COMPLETE)
        store.update_meta = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("store busy"))
        phase("after the end")                                      # a store busy for a moment: the trial goes on


def test_a_store_locked_by_another_program_drops_the_phase_without_holding_up_the_trial(tmp_path):
    """The phase waits PHASE_WAIT_S for another program's lock, not the store's full wait (a trial whose every
    phase waited 30 s would stall the datastore, and a lock held for longer than that would be waited out
    phase by phase instead of stopping the study when the trial's result cannot be written)."""
    import sqlite3

    from nosqltune.store import open_store
    from nosqltune.store.base import PHASE_WAIT_S
    from nosqltune.store.sqlite import BUSY_WAIT_S

    path = tmp_path / "p.db"
    with open_store(str(path)) as store:
        trial = store.start_trial(store.study("s"), {}, {"name": "read90"}, meta={"instance": "read90"})
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        started = time.monotonic()
        store.phase_recorder(trial)("measuring 60 s")
        waited = time.monotonic() - started
        other.execute("ROLLBACK")
        other.close()
        assert PHASE_WAIT_S * 0.8 <= waited < PHASE_WAIT_S + 2, waited
        assert "phase" not in store.trial(trial)["meta"]          # dropped, not queued
        store.phase_recorder(trial)("stopping")                   # the store's usual wait is back for what follows
        assert store.trial(trial)["meta"]["phase"] == "stopping"
        assert store._db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_WAIT_S * 1000


def test_tune_stores_the_phase_its_target_reports(study, tmp_path, cache, monkeypatch):
    """The runner's progress reaches the running trial's row (what the dashboard shows), not only the terminal."""
    from nosqltune.cli import main
    from nosqltune.store import open_store
    from nosqltune.surrogate.dataset import SurrogateTarget

    monkeypatch.setenv("NOSQLTUNE_CACHE", str(cache))
    seen = []
    real = SurrogateTarget.run_trial

    def reporting(self, space, overrides, workload, settings=None, progress=None):
        progress("booting the node")
        progress("measuring 60 s")
        with open_store(str(path)) as peek:   # what a reader sees while the trial runs
            seen.append([r["meta"].get("phase") for r in peek.trials() if r["state"] == "RUNNING"])
        return real(self, space, overrides, workload, settings, progress)

    monkeypatch.setattr(SurrogateTarget, "run_trial", reporting)
    path = tmp_path / "phase.db"
    assert main([*TUNE, "--budget", "2", "--study", str(path), "--json"]) == 0
    assert seen == [["measuring 60 s"], ["measuring 60 s"]]
    rows = open_store(str(path)).trials()
    assert [r["meta"]["phase"] for r in rows] == ["measuring 60 s"] * 2


# ----------------------------------------------------------------------------------------------- a real browser
def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


# `nosqltune tune ...` that first loads what a trial on the surrogate needs, then waits for a file to appear
GATED = """
import os, sys, time
from nosqltune.cli import main
import nosqltune.surrogate.dataset, nosqltune.tuning.loop, sklearn.ensemble  # noqa: F401
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
sys.exit(main(sys.argv[2:]))
"""


def test_the_page_follows_a_running_study_in_chromium(study, tmp_path, cache):
    """The page open in headless chromium while `tune --resume` adds trials: they appear without a reload, a
    failed trial shows its reason, a running trial its phase, and the console stays free of errors. The
    screenshot goes to test-artifacts/dashboard.png (or $NOSQLTUNE_TEST_ARTIFACTS)."""
    if chromium() is None:
        pytest.fail("chromium is not installed: scripts/setup.sh installs it (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (make setup does)")
    from nosqltune.dashboard.server import serve
    from nosqltune.store import open_reader, open_store

    path = copy_of(study, tmp_path)
    servers = []
    reader = open_reader(str(path))
    thread = threading.Thread(target=serve, kwargs=dict(store=reader, source=str(path), port=0, say=lambda _: None,
                                                        ready=servers.append, poll_ms=500), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not servers and time.monotonic() < deadline:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{servers[0].server_port}/"
    artifacts = Path(os.environ.get("NOSQLTUNE_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    # tune goes on in another process, writing to the store the page reads; it starts now (Python and the model's
    # modules take seconds to load) and waits at a gate until the page is open
    gate = tmp_path / "go"
    env = {**os.environ, "NOSQLTUNE_CACHE": str(cache), "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": "0"}
    tune = subprocess.Popen([sys.executable, "-c", GATED, str(gate), *TUNE, "--budget", "14", "--resume",
                             "--study", str(path), "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(),
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
            began = time.monotonic()
            page.goto(url)
            trials = "Number(document.getElementById('status').dataset.trials)"
            page.wait_for_function(f"{trials} === 8", timeout=30_000)
            print(f"page ready: {time.monotonic() - began:.1f} s")
            page.evaluate("window.sameDocument = true")     # gone if the page were reloaded
            assert "8 of 8 trials" in page.inner_text("#table-count")

            gate.touch()
            page.wait_for_function(f"{trials} > 8", timeout=60_000)
            page.wait_for_function(f"{trials} === 14", timeout=60_000)
            print(f"14 trials shown: {time.monotonic() - began:.1f} s")
            out, err = tune.communicate(timeout=60)
            assert tune.returncode == 0, err[-2000:]
            assert page.evaluate("window.sameDocument") is True
            assert "14 of 14 trials" in page.inner_text("#table-count")

            with open_store(str(path)) as writer:          # a failed trial and a running one, as tune stores them
                study_id = writer.find_study("tune")["id"]
                fail_row(writer, study_id, "Invalid yaml: concurrent_reads must be at most 1024", kind="config-rejected")
                running = writer.start_trial(study_id, writer.trials(study_id)[2]["config"], {"name": "read90"}, tag="tune",
                                             meta={"suggestion": 1000, "kind": "suggested", "instance": "read90"})
                writer.phase_recorder(running)("booting the node (heap 1024 MB)")
            page.wait_for_function(f"{trials} === 16", timeout=30_000)
            page.select_option("#state-filter", "FAIL")
            assert "config-rejected: Invalid yaml: concurrent_reads must be at most 1024" in page.inner_text("#trials")
            page.select_option("#state-filter", "")
            assert "booting the node (heap 1024 MB)" in page.inner_text("#running")
            best = page.inner_text("#best")
            assert "single cold runs" in best and re.search(r"against the default: [+-]\d+\.\d%", best), best
            assert page.evaluate("Number(document.getElementById('status').dataset.ready)") > 0
            page.evaluate("window.scrollTo(0, document.body.scrollHeight)")   # the plots further down are drawn
            page.wait_for_function("document.getElementById('status').dataset.drawn", timeout=30_000)  # as they near
            for plot in ("history-plot", "parcoords-plot", "importance-plot"):
                assert page.locator(f"#{plot} .main-svg").count() > 0, f"{plot} was not drawn"
            assert page.evaluate("document.getElementById('status').dataset.error") == ""
            page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)

            # before Plotly.js is there (here: never), the history is a still picture and the page is ready
            still = browser.new_page(viewport={"width": 1400, "height": 1000})
            still.route("**/plotly.min.js", lambda route: route.abort())
            still.goto(url)
            still.wait_for_function("document.getElementById('status').dataset.error", timeout=30_000)
            assert "plotly.min.js" in still.evaluate("document.getElementById('status').dataset.error")
            assert still.evaluate("Number(document.getElementById('status').dataset.ready)") > 0
            assert still.locator("#history-plot canvas.sketch").count() == 1
            assert not still.evaluate("document.getElementById('status').dataset.drawn")   # Plotly's plots never came
            browser.close()
    finally:
        if tune.poll() is None:
            tune.kill()
            tune.wait()
        if servers:
            servers[0].shutdown()
        thread.join(timeout=10)
        reader.close()
    assert problems == []
