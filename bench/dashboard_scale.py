#!/usr/bin/env python3
"""The dashboard on a study of 10,000 trials (goal: the first answer under 2 s): the page's first answer (the
whole study, every trial and the summary, encoded as the server sends it), a poll after one new trial and a poll
that finds nothing new, each in a fresh Python process as `nosqltune dashboard` would start, modules imported
before the clock starts (the server has them loaded before the page asks).

With --browser, also the page itself: `nosqltune dashboard` started on the store (this tree's code, a fresh server
each run, which reads the study as it starts), the page opened in headless chromium (Playwright, Debian's chromium)
once chromium has started, timed from the request until the page is ready (every trial loaded, the cards, the table
and the history drawn and painted: the page's own `ready` mark), then scrolled to the end and timed until every plot
is drawn (the plots further down are drawn as they near the screen).

With --page-plotly FILE (and --browser) the page is also timed with that Plotly.js bundle in place of the shipped
one (a copy of this tree's source with the file swapped), the two interleaved run by run: the shipped partial
bundle against the full one, for example. With --page-base REV instead, the page is also timed with the code of
that git revision (page and server, from a worktree under /tmp), interleaved the same way.

With --base REV the same store is read by the code of a git revision too (a worktree under /tmp), the two
interleaved run by run, so the ratio is measured side by side on the same machine state. The store: an 8-trial
study on the recorded surrogate (`wide24`), then 10,000 tuning trials written directly with random
configurations of its space (one in 97 failed), as tests/unit/test_dashboard.py makes it. Writes
bench/results/dashboard_scale.{md,json}. Nothing else may run: it times CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, ROOT, kept_notes, log  # bench/common.py

TRIALS = 10_000
GOAL_S = 2.0
TUNE = ["tune", "--system", "surrogate:wide24", "--knobs", "rafiki5", "--workload", "read90", "--optimizer",
        "random", "--budget", "8"]

# run in a fresh process with the code under test on sys.path: prints one JSON line of timings
READER = r"""
import json, sys, time
store_path = sys.argv[1]
from nosqltune.dashboard import data
from nosqltune.store import open_reader, open_store
from nosqltune.store.base import TrialState
import nosqltune.evaluation.study, nosqltune.tuning.results, nosqltune.tuning.cost, nosqltune.report.data, numpy
encode = getattr(data, "encode", None) or (lambda answer: json.dumps(answer).encode())

def timed(work):
    wall, cpu = time.perf_counter(), time.process_time()
    out = work()
    return out, time.perf_counter() - wall, time.process_time() - cpu

with open_reader(store_path) as reader:
    feed = data.StudyFeed(reader)
    first, wall, cpu = timed(lambda: encode(feed.study("tune")))
    cursor = json.loads(first)["cursor"]
    _, unchanged, _ = timed(lambda: feed.study("tune", cursor))
    with open_store(store_path) as writer:   # one more trial, as tune writes it
        study_id = writer.find_study("tune")["id"]
        trial = writer.start_trial(study_id, {}, {"name": "read90"}, tag="tune", meta={"instance": "read90"})
        writer.finish_trial(trial, TrialState.FAIL, failure_kind="crash", error="the node exited with 137")
    _, changed, _ = timed(lambda: feed.study("tune", cursor))
print(json.dumps({"first_s": wall, "first_cpu_s": cpu, "bytes": len(first), "poll_unchanged_s": unchanged,
                  "poll_changed_s": changed}))
"""


def make_store(folder: Path) -> Path:
    """The 10,008-trial store (made once, then copied for each run: a run adds a trial)."""
    sys.path.insert(0, str(ROOT / "src"))
    from nosqltune.cli import main

    path = folder / "study.db"
    os.environ["NOSQLTUNE_CACHE"] = str(folder / "cache")
    log("an 8-trial study on the surrogate (its model is fitted first)")
    if main([*TUNE, "--study", str(path), "--json"]) != 0:
        raise SystemExit("the surrogate study failed")
    sys.path.insert(0, str(ROOT))
    from tests.synthetic import add_trials   # the rows the dashboard's scale test writes

    add_trials(path, "tune", TRIALS)
    log(f"wrote {TRIALS:,} trials into {path}")
    return path


def read_once(src: Path, store: Path, scratch: Path) -> dict:
    copy = scratch / "run.db"
    shutil.copy(store, copy)
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0"}
    out = subprocess.run([sys.executable, "-c", READER, str(copy)], env=env, capture_output=True, text=True,
                         cwd=scratch)
    if out.returncode != 0:
        raise SystemExit(f"the reader failed ({src}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def page_once(store: Path, scratch: Path, src: Path = ROOT / "src") -> dict:
    """Seconds from the request until the page is ready and, scrolled to the end at once, until every plot is
    drawn; the seconds between the server's first line and the request (chromium starting); the page's own marks."""
    import re

    from playwright.sync_api import sync_playwright

    copy = scratch / "page.db"
    shutil.copy(store, copy)
    import socket

    with socket.socket() as probe:   # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen([sys.executable, "-m", "nosqltune", "dashboard", "--study", str(copy), "--port",
                               str(port)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=scratch)
    try:
        line = server.stdout.readline()
        found = re.search(r"http://localhost:(\d+)/", line)
        if not found:
            raise SystemExit(f"the dashboard did not start: {line}{server.stdout.read()[-2000:]}")
        listening = time.perf_counter()
        browser_path = shutil.which("chromium") or shutil.which("chromium-browser")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            began = time.perf_counter()
            page.goto(f"http://127.0.0.1:{found.group(1)}/")
            page.wait_for_function("document.getElementById('status').dataset.ready", timeout=120_000)
            ready = time.perf_counter() - began
            status = "document.getElementById('status').dataset"
            assert page.evaluate(f"Number({status}.trials)") == TRIALS + 8
            assert page.locator("#history-plot canvas, #history-plot .main-svg").count() > 0
            page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
            page.wait_for_function(f"{status}.drawn", timeout=120_000)
            drawn = time.perf_counter() - began
            assert page.locator("#history-plot .main-svg").count() > 0   # Plotly's plot in place of the picture
            marks = page.evaluate(f"({{timings: JSON.parse({status}.timings), ready: Number({status}.ready), "
                                  f"drawn: Number({status}.drawn)}})")
            browser.close()
        return {"ready_s": ready, "drawn_s": drawn, "request_after_s": began - listening, "marks": marks}
    finally:
        server.terminate()
        server.wait(timeout=30)


def describe(runs: list[dict], key: str) -> dict:
    values = [r[key] for r in runs]
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "values": values}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=7, help="fresh processes per code version (interleaved)")
    p.add_argument("--base", metavar="REV", help="also time the code of this git revision, side by side")
    p.add_argument("--browser", action="store_true", help="also time the page in headless chromium (this tree)")
    p.add_argument("--page-plotly", metavar="FILE", type=Path,
                   help="with --browser: also time the page with this Plotly.js bundle instead of the shipped one, "
                        "interleaved")
    p.add_argument("--page-base", metavar="REV",
                   help="with --browser: also time the page with the code of this git revision, interleaved")
    a = p.parse_args()
    if a.page_plotly and not (a.browser and a.page_plotly.is_file()):
        p.error("--page-plotly needs --browser and an existing file")
    if a.page_base and (not a.browser or a.page_plotly):
        p.error("--page-base needs --browser, and not --page-plotly")
    with tempfile.TemporaryDirectory(prefix="nosqltune-dashboard-") as tmp:
        scratch = Path(tmp)
        store = make_store(scratch)
        versions = {"this tree": ROOT / "src"}
        worktrees = []
        if a.base:
            worktree = scratch / "base"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(worktree), a.base],
                           check=True)
            worktrees.append(worktree)
            versions[f"base {a.base}"] = worktree / "src"
        try:
            runs: dict[str, list[dict]] = {name: [] for name in versions}
            for i in range(a.runs):
                for name, src in versions.items():
                    runs[name].append(read_once(src, store, scratch))
                    log(f"run {i + 1}/{a.runs} {name}: first answer {runs[name][-1]['first_s']:.2f} s")
            pages, other_pages, other_src, other_name = [], [], None, None
            if a.page_plotly:   # this tree's source with the other bundle in place of the shipped one
                other_src, other_name = scratch / "other-plotly-src", a.page_plotly.name
                shutil.copytree(ROOT / "src", other_src, ignore=shutil.ignore_patterns("__pycache__"))
                shutil.copy(a.page_plotly, other_src / "nosqltune" / "dashboard" / "static" / "plotly.min.js")
            if a.page_base:     # the code of another revision
                page_tree, other_name = scratch / "page-base", f"base {a.page_base}"
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(page_tree),
                                a.page_base], check=True)
                worktrees.append(page_tree)
                other_src = page_tree / "src"
            if other_src is not None:
                other_bytes = (other_src / "nosqltune/dashboard/static/plotly.min.js").stat().st_size
            for i in range(a.runs if a.browser else 0):
                pages.append(page_once(store, scratch))
                log(f"run {i + 1}/{a.runs}: the page ready in {pages[-1]['ready_s']:.2f} s, every plot drawn in "
                    f"{pages[-1]['drawn_s']:.2f} s ({pages[-1]['marks']['timings']} ms)")
                if other_src is not None:
                    other_pages.append(page_once(store, scratch, other_src))
                    log(f"run {i + 1}/{a.runs} with {other_name}: the page ready in "
                        f"{other_pages[-1]['ready_s']:.2f} s, every plot drawn in {other_pages[-1]['drawn_s']:.2f} s")
        finally:
            for worktree in worktrees:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(worktree)], check=False)
    results = {"trials": TRIALS + 8, "goal_s": GOAL_S, "runs": a.runs, "base": a.base,
               "at": time.strftime("%Y-%m-%d %H:%M"),
               "versions": {name: {k: describe(r, k) for k in ("first_s", "first_cpu_s", "poll_changed_s",
                                                                "poll_unchanged_s")}
                            | {"megabytes": r[0]["bytes"] / 1e6} for name, r in runs.items()}}
    if pages:
        results["page"] = {k: describe(pages, k) for k in ("ready_s", "drawn_s", "request_after_s")}
        results["page"]["marks"] = [r["marks"] for r in pages]
        results["page"]["plotly_bytes"] = (ROOT / "src/nosqltune/dashboard/static/plotly.min.js").stat().st_size
    if other_pages:
        results["page_other_plotly"] = {k: describe(other_pages, k) for k in ("ready_s", "drawn_s")}
        results["page_other_plotly"] |= {"file": other_name, "plotly_bytes": other_bytes,
                                         "marks": [r["marks"] for r in other_pages]}
        ratios = [o["ready_s"] / t["ready_s"] for t, o in zip(pages, other_pages)]
        results["page_other_plotly"]["ready_ratio"] = {"median": statistics.median(ratios), "min": min(ratios),
                                                      "max": max(ratios)}
    if a.base:
        this, base = runs["this tree"], runs[f"base {a.base}"]
        ratios = [b["first_s"] / t["first_s"] for t, b in zip(this, base)]
        results["first_answer_speedup"] = {"median": statistics.median(ratios), "min": min(ratios),
                                           "max": max(ratios)}
    write(results)
    return 0


def _marks(page: dict, key: str) -> str:
    """A page mark (ms since the navigation started) over the runs: median [min, max], in seconds."""
    values = [m[key] / 1000 for m in page["marks"]]
    return f"{statistics.median(values):.2f} s [{min(values):.2f}, {max(values):.2f}]"


def write(results: dict) -> None:
    (RESULTS / "dashboard_scale.json").write_text(json.dumps(results, indent=1) + "\n")
    path = RESULTS / "dashboard_scale.md"
    lines = ["# The dashboard on a study of 10,000 trials", "",
             f"Generated by `bench/dashboard_scale.py` ({results['at']}): {results['trials']:,} trials, "
             f"{results['runs']} fresh processes per code version, interleaved; the goals: the first answer and the page "
             f"ready under {results['goal_s']:.0f} s.", ""]
    lines += kept_notes(path, Path(__file__).name)
    lines += ["| code | first answer, median [min, max] | its CPU | JSON | poll after a new trial | poll, nothing new |"
              " goal |", "|---|---|---|---|---|---|---|"]
    for name, v in results["versions"].items():
        first = v["first_s"]
        lines.append(f"| {name} | {first['median']:.2f} s [{first['min']:.2f}, {first['max']:.2f}] | "
                     f"{v['first_cpu_s']['median']:.2f} s | {v['megabytes']:.1f} MB | "
                     f"{v['poll_changed_s']['median']:.2f} s | {v['poll_unchanged_s']['median']:.3f} s | "
                     f"{'yes' if first['max'] < results['goal_s'] else 'no'} |")
    if results.get("page"):
        r = results["page"]
        ready, drawn, gap = r["ready_s"], r["drawn_s"], r["request_after_s"]
        parts = sorted({k for m in r["marks"] for k in m["timings"]})
        lines += ["", f"The page in headless chromium (this tree), {len(ready['values'])} runs, each a fresh server "
                      f"(it reads the study as it starts; the page asked {gap['median']:.1f} s after the server's "
                      f"first line, as chromium started):", "",
                  "| from the request until | median [min, max] | goal |", "|---|---|---|",
                  f"| ready: all {results['trials']:,} trials, the cards, the table and the history drawn | "
                  f"{ready['median']:.2f} s [{ready['min']:.2f}, {ready['max']:.2f}] | "
                  f"{'yes' if ready['max'] < results['goal_s'] else 'no'} |",
                  f"| ready by the page's own mark (from the navigation's start, as the browser counts it) | "
                  f"{_marks(r, 'ready')} | "
                  f"{'yes' if max(m['ready'] for m in r['marks']) < results['goal_s'] * 1000 else 'no'} |",
                  f"| every plot drawn (scrolled to the end once ready) | {drawn['median']:.2f} s "
                  f"[{drawn['min']:.2f}, {drawn['max']:.2f}] | - |", "",
                  "In the page, median over the runs, milliseconds since the page was asked for: "
                  + ", ".join(f"{k[:-3]} {statistics.median(m['timings'].get(k, 0) for m in r['marks']):.0f}"
                              for k in parts if k.endswith("_at"))
                  + f", ready {statistics.median(m['ready'] for m in r['marks']):.0f} (start: the page's script runs; "
                  "studies: the list answered; answer: the study's answer in hand; plotly: Plotly.js evaluated). "
                  "Milliseconds each part took (fetch: from asking for the study to its answer in hand; the rest: "
                  "drawing): " + ", ".join(f"{k} {statistics.median(m['timings'].get(k, 0) for m in r['marks']):.0f}"
                                          for k in parts if not k.endswith("_at")) + "."]
    if results.get("page_other_plotly"):
        o, r = results["page_other_plotly"], results["page"]
        ratio = o["ready_ratio"]

        def plotly_at(page: dict) -> float:
            return statistics.median(m["timings"].get("plotly_at", 0) for m in page["marks"])
        lines += ["", f"The same page with {Path(o['file']).name} (its Plotly.js "
                      f"{o['plotly_bytes'] / 1e6:.1f} MB, against this tree's {r['plotly_bytes'] / 1e6:.1f} MB), "
                      "interleaved run by run:", "",
                  "| page | ready, median [min, max] | ready by the page's mark | every plot drawn | "
                  "Plotly evaluated at (median) |",
                  "|---|---|---|---|---|",
                  f"| this tree ({r['plotly_bytes'] / 1e6:.1f} MB) | {r['ready_s']['median']:.2f} s "
                  f"[{r['ready_s']['min']:.2f}, {r['ready_s']['max']:.2f}] | {_marks(r, 'ready')} | "
                  f"{r['drawn_s']['median']:.2f} s | {plotly_at(r):.0f} ms |",
                  f"| {Path(o['file']).name} ({o['plotly_bytes'] / 1e6:.1f} MB) | {o['ready_s']['median']:.2f} s "
                  f"[{o['ready_s']['min']:.2f}, {o['ready_s']['max']:.2f}] | {_marks(o, 'ready')} | "
                  f"{o['drawn_s']['median']:.2f} s | {plotly_at(o):.0f} ms |", "",
                  f"Ready, the other over this tree, run by run: x{ratio['median']:.2f} "
                  f"[{ratio['min']:.2f}, {ratio['max']:.2f}]."]
    if results.get("first_answer_speedup"):
        s = results["first_answer_speedup"]
        lines += ["", f"The first answer, base over this tree, run by run: x{s['median']:.2f} "
                      f"[{s['min']:.2f}, {s['max']:.2f}]."]
    path.write_text("\n".join(lines) + "\n")
    log(f"wrote {path}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-only"]:   # the tables again from dashboard_scale.json (after editing the notes)
        write(json.loads((RESULTS / "dashboard_scale.json").read_text()))
        sys.exit(0)
    sys.exit(main())
