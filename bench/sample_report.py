#!/usr/bin/env python3
"""A sample report from a small real study, kept for review with its screenshot.

On real Cassandra (workload A, 100K records, 30K measured operations per cold trial): `nosqltune tune` with
SMAC on the `wide24` knobs for --budget trials, then `nosqltune compare` of best and best-practice against
the default (--repeat interleaved rounds), then `nosqltune report` into bench/results/report/ and a screenshot
of the page in headless chromium: bench/results/report-screenshot.png.

Study: bench/results/report/sample.db. Resumable: run it again after an interruption. About 15 minutes of an
otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from common import RESULTS, log, nosqltune  # bench/common.py

OUT = RESULTS / "report"
STUDY = OUT / "sample.db"




def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=int, default=12)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if STUDY.exists():
        nosqltune("tune", "--study", str(STUDY), "--resume", "--json")
    else:
        nosqltune("tune", "--study", str(STUDY), "--workload", "ycsb-a", "--knobs", "wide24", "--optimizer", "smac",
                  "--budget", str(a.budget), "--operations", "30000", "--seed", "3", "--json")
    nosqltune("compare", "--study", str(STUDY), "--candidates", "best,best-practice", "--repeat", str(a.repeat),
              "--json")
    written = json.loads(nosqltune("report", "--study", str(STUDY), "--out", str(OUT), "--json"))
    browser = shutil.which("chromium")
    if browser:
        shot = RESULTS / "report-screenshot.png"
        subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1280,5200", f"--screenshot={shot}", Path(written["report"]).as_uri()],
                       check=True, capture_output=True, timeout=180)
        log(f"screenshot: {shot}")
    log(f"report: {written['report']} ({len(written['figures'])} figures)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
