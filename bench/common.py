"""What the benchmark scripts share: a timestamped log line, running `nosqltune` from this checkout, a stop at a
trial boundary past a deadline (`--stop-at`), and the hand-written notes a generated results file keeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


# set when a Deadline's stop is due (a trial finished past it): nosqltune() then starts no command and ends the bench
# when the running one returns; RUNNING holds the command nosqltune() runs, if any; HANDOVER makes one thread alone
# signal it (the watcher, or nosqltune() when the stop came while it started the command)
STOPPED = threading.Event()
RUNNING: list[subprocess.Popen | None] = [None]
HANDOVER = threading.Lock()


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def nosqltune(*args: str, capture: bool = True, ok: tuple[int, ...] = (0,)) -> str:
    """Run one nosqltune command of this checkout; its stdout when `capture` (progress stays on stderr). A
    command that exits with a code outside `ok` ends the benchmark with the code in the message (the run can
    be resumed). Once a Deadline's stop is due, it starts no command, and a command it ran ends the benchmark
    whatever its exit code."""
    cmd = [sys.executable, "-m", "nosqltune", *args]
    log(" ".join(cmd[2:]))
    # the command in a session of its own, and every stop (kill, Ctrl-C, a closed terminal) passed on to it, so that
    # it ends its trial and stops its nodes as it does on its own (a second Ctrl-C is its own to escalate): a bench
    # killed alone would otherwise leave it running unwatched, or, under subprocess.run's Ctrl-C, kill it hard and
    # orphan its datastore. A stop that comes before it started ends the bench at once.
    started: list[subprocess.Popen] = []

    def stop(signum, _frame):
        if not started:
            raise SystemExit(f"stopped by signal {signum} before {cmd[3]} started")
        started[0].send_signal(signum)

    if STOPPED.is_set():
        raise SystemExit(f"stopped at the deadline before {cmd[3]} started; the same command resumes")
    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        started.append(subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                                        start_new_session=True, stdout=subprocess.PIPE if capture else None,
                                        text=True))
        proc = started[0]
        with HANDOVER:
            RUNNING[0] = proc
            if STOPPED.is_set():   # the deadline's stop came while it started: the watcher found nothing to signal
                proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate()
    finally:
        with HANDOVER:
            RUNNING[0] = None
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if STOPPED.is_set():   # the deadline's stop, not a failure: the same command resumes
        raise SystemExit(f"stopped at the deadline after a finished trial ({cmd[3]} exited {proc.returncode}); "
                         "the same command resumes")
    if proc.returncode not in ok:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return out or ""


def deadline_time(text: str, now: float | None = None) -> float:
    """`HH:MM` as the epoch seconds of its next occurrence (today, or tomorrow once past); ValueError otherwise."""
    import datetime

    clock = datetime.datetime.strptime(text, "%H:%M").time()
    today = datetime.datetime.fromtimestamp(time.time() if now is None else now)
    at = datetime.datetime.combine(today.date(), clock)
    if at <= today:
        at += datetime.timedelta(days=1)
    return at.timestamp()


def finished_trials(stores) -> int:
    """How many trials the SQLite stores `stores` (paths; missing ones count none) hold finished, read-only; a trial
    a resumed command marks interrupted (one a hard stop left running) is no trial that finished."""
    import sqlite3

    total = 0
    for db in stores:
        if not Path(db).exists():
            continue
        with sqlite3.connect(f"{Path(db).absolute().as_uri()}?mode=ro", uri=True, timeout=30) as conn:
            total += conn.execute("SELECT count(*) FROM trials WHERE finished_at IS NOT NULL AND "
                                  "(failure_kind IS NULL OR failure_kind != 'interrupted')").fetchone()[0]
    return total


class Deadline:
    """A long benchmark's stop at a trial boundary: once `at` (epoch seconds) has passed, the first trial that
    finishes in `stores()` (the stores the bench writes) stops the command nosqltune() runs as a stop from outside
    does (SIGTERM: the command ends its trial and stops its nodes), and the bench ends at its next nosqltune() call
    or when that command returns. A resumed run loses only the trial begun since, which it runs again; a comparison
    continues its rounds. `stop` replaces the signal and `armed` is set once the count at the deadline is read
    (tests)."""

    def __init__(self, at: float, stores, poll_s: float = 5.0, stop=None):
        self.at, self.stores, self.poll_s = at, stores, poll_s
        self.stop = stop or _stop_running
        self.armed = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="deadline", daemon=True)

    def start(self) -> "Deadline":
        log(f"stopping after the first trial that finishes past {time.strftime('%a %H:%M', time.localtime(self.at))}")
        self.thread.start()
        return self

    def _count(self) -> int:
        """The finished trials now; a store that cannot be read yet (a new one without its tables, a lock held
        past the timeout) is read again, never the end of the watch."""
        while True:
            try:
                return finished_trials(self.stores())
            except Exception as exc:  # noqa: BLE001 - any failed read: try again rather than never stop
                log(f"deadline: the stores could not be read ({exc}); reading them again")
                time.sleep(self.poll_s)

    def _watch(self) -> None:
        while time.time() < self.at:
            time.sleep(min(self.poll_s, max(self.at - time.time(), 0.0)))
        before = self._count()
        self.armed.set()
        log(f"deadline passed with {before} finished trials: stopping after the next one")
        while self._count() <= before:
            time.sleep(self.poll_s)
        with HANDOVER:
            STOPPED.set()
            self.stop()


def _stop_running() -> None:
    proc = RUNNING[0]
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)


def stop_at_option(parser, then: str = "") -> None:
    """A bench's `--stop-at HH:MM` (None when not given): see until()."""
    import argparse

    def clock(text: str) -> float:
        try:
            return deadline_time(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a time of day as HH:MM (24 hours)") from None

    parser.add_argument("--stop-at", metavar="HH:MM", type=clock,
                        help=f"past this time, stop after the next trial that finishes{' ' + then if then else ''} "
                             "(the same command resumes; only the trial begun since runs again)")


def until(at: float | None, stores, work) -> None:
    """work(), stopped by a Deadline at `at` (if given) over the stores `stores()`: a stop at the deadline returns
    (logged), any other end of work() is its own."""
    if at is not None:
        Deadline(at, stores).start()
    try:
        work()
    except SystemExit as stop:
        if not STOPPED.is_set():
            raise
        log(str(stop))


def compare(*args: str) -> dict:
    """`nosqltune compare ARGS --json`: its result; runs that failed (exit 1, stored with their reasons, their
    rounds' pairs left out) do not end the benchmark, anything else that ends it without a result does."""
    import json

    out = nosqltune("compare", *args, "--json", ok=(0, 1))
    try:
        return json.loads(out)
    except ValueError:
        raise SystemExit(f"compare {' '.join(args)} ended without a result (its error is above)") from None


def export_best(db: Path, study_name: str, path: Path) -> dict:
    """A study's best as a knob file that `compare --candidates` measures on another study: the settings the best
    changes from the default, in nosqltune's knob names (the confirmed best's when it has a confirmation; `best
    --format yaml` gives Cassandra's own file keys instead, which are not knobs). Returns `best --format json`."""
    import json

    import yaml

    best = json.loads(nosqltune("best", "--study", str(db), "--study-name", study_name, "--format", "json"))
    changed = {knob: values[1] for knob, values in (best.get("changed") or {}).items()}
    path.write_text(f"# the settings the best of study {study_name} in {db.name} changes from the default\n"
                    + yaml.safe_dump(changed, sort_keys=True))
    return best


def mechanism_table(rows: list[dict]) -> list[str]:
    """Markdown lines: per data size (records) and candidate, the means over its complete comparison runs `rows` of
    what decides a ratio: ops/s, the volume's I/Os and KB read per operation, the node's CPU per operation, the share
    of the data in the page cache, and what limited most of the runs."""
    import statistics

    groups: dict = {}
    for row in rows:
        groups.setdefault((row["workload"].get("records"), row["meta"]["candidate"]), []).append(row)

    def mean(runs, get):
        values = [v for v in (get(r) for r in runs) if v is not None]
        return statistics.mean(values) if values else float("nan")

    def summary(key):
        return lambda r: r["metrics"]["summary"].get(key)

    def held(r):   # the share of the data in the page cache, as the trial's bottleneck check read it
        return (((r["internals"] or {}).get("bottleneck") or {}).get("utilisation") or {}).get("data_in_memory")

    def shown(value, spec, scale=1):   # a figure no run measured (I/Os: only a volume of the node's own counts them)
        return "-" if value != value else format(value / scale, spec)

    lines = ["| records | candidate | runs | ops/s | I/Os per op | KB read per op | node CPU us/op | data in memory | "
             "limited by |", "|---|---|---|---|---|---|---|---|---|"]
    for (records, candidate), runs in sorted(groups.items()):
        in_memory = mean(runs, held)
        limits = [((r["internals"] or {}).get("bottleneck") or {}).get("limit") for r in runs]
        limits = [x for x in limits if x]
        lines.append(f"| {records:,} | {candidate} | {len(runs)} | "
                     f"{shown(mean(runs, summary('throughput_ops_s')), ',.0f')} | "
                     f"{shown(mean(runs, summary('node_io_per_op')), '.2f')} | "
                     f"{shown(mean(runs, summary('node_bytes_per_op')), '.1f', 1000)} | "
                     f"{shown(mean(runs, summary('node_cpu_us_per_op')), '.0f')} | {shown(in_memory, '.0%')} | "
                     f"{max(set(limits), key=limits.count) if limits else '-'} |")
    return lines


def study_rows(db: Path, study_name: str) -> list[dict]:
    """The trials of one study of a SQLite trial store, oldest first, as dicts with their JSON columns decoded
    (state, tag, config, meta, metrics, timings, internals, failure_kind, error, started_at, environment_id,
    workload); []
    when the store does not exist yet."""
    import json
    import sqlite3

    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        found = conn.execute("SELECT t.state, t.metrics, t.timings, t.internals, t.failure_kind, t.error, t.tag, "
                             "t.config, t.meta, t.started_at, t.environment_id, t.workload FROM trials t "
                             "JOIN studies s ON s.id = t.study_id WHERE s.name = ? ORDER BY t.id",
                             (study_name,)).fetchall()
    return [{"state": r[0], "metrics": json.loads(r[1] or "{}"), "timings": json.loads(r[2] or "{}"),
             "internals": json.loads(r[3] or "{}"), "failure_kind": r[4], "error": r[5], "tag": r[6],
             "config": json.loads(r[7] or "{}"), "meta": json.loads(r[8] or "{}"), "started_at": r[9],
             "environment_id": r[10], "workload": json.loads(r[11] or "{}")} for r in found]


def machines(studies: dict[str, tuple[Path, str]], tolerance: float | None = None):
    """Whether studies set side by side on a page ran on machines of one speed (nosqltune's evaluation/machines.py:
    the CPU probe stored with every run, and the default's node CPU per operation): one group per label (a store's
    study) and day. Its `line()` goes on the page; `apart` says the figures come from machines more than 20% apart
    in speed."""
    from nosqltune.evaluation.machines import TOLERANCE, by_day, check_machines

    rows = [{**r, "label": label} for label, (db, name) in studies.items() for r in study_rows(db, name)]
    return check_machines(rows, group=lambda r: f"{r['label']}, {by_day(r)}",
                          tolerance=TOLERANCE if tolerance is None else tolerance)


def counted_rows(db: Path, study_name: str) -> list[dict]:
    """study_rows without the runs a stop cut short (failure kind "interrupted"): a resumed benchmark runs them
    again, so they count neither as a round done nor as a result."""
    return [r for r in study_rows(db, study_name) if r["failure_kind"] != "interrupted"]


def study_settings(db: Path, study_name: str) -> dict | None:
    """The stored settings of one study of a SQLite trial store; None when the store or the study does not exist."""
    import json
    import sqlite3

    if not db.exists():
        return None
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT settings FROM studies WHERE name = ?", (study_name,)).fetchone()
    return None if row is None else json.loads(row[0] or "{}")


def tune_or_resume(db: Path, study_name: str, *begin: str) -> dict:
    """`tune --json` of one study of a store: resumed when the study exists (tune refuses to begin it again),
    otherwise begun with the arguments `begin` (scenario, knobs, optimizer, budget...)."""
    import json

    args = ["--resume"] if study_settings(db, study_name) is not None else list(begin)
    return json.loads(nosqltune("tune", *args, "--study", str(db), "--study-name", study_name, "--json"))


def best_as_yaml(db: Path, study_name: str, path: Path) -> Path:
    """The study's (confirmed) best as a YAML file of knob values at `path`, for compare's candidates (compare
    labels a candidate by its file's name)."""
    import json

    import yaml

    best = json.loads(nosqltune("best", "--study", str(db), "--study-name", study_name, "--format", "json"))
    path.write_text(yaml.safe_dump(best["best"]["config"], sort_keys=True))
    return path


def operation_kinds(row: dict) -> list[str]:
    """A trial's operation kinds as its summary names them (lower case), YCSB's CLEANUP left out."""
    return [op.lower() for op in row["metrics"].get("operations", {}) if op != "CLEANUP"]


def latency_table(row: dict, header: str) -> list[str]:
    """A trial's latencies per operation kind as a markdown table: count, p50, p95, p99 and p99.9 in ms."""
    summary = row["metrics"]["summary"]
    lines = [f"| {header} | count | p50 ms | p95 ms | p99 ms | p99.9 ms |", "|---|---|---|---|---|---|"]
    for name in operation_kinds(row):
        lines.append(f"| {name} | {summary.get(f'{name}_count', 0):,} | " + " | ".join(
            f"{summary.get(f'{name}_{s}_ms') or float('nan'):.2f}" for s in ("p50", "p95", "p99", "p999")) + " |")
    return lines


def kept_notes(path: Path, script: str) -> list[str]:
    """The hand-written notes of a generated results file (status, readings), between the markers written by
    `script` (the bench/ file that generates it), markers included; empty markers when the file has none yet."""
    markers = (f"<!-- notes: hand-written, kept by bench/{script} -->", "<!-- /notes -->")
    text = path.read_text() if path.exists() else ""
    if markers[0] in text and markers[1] in text:
        return [text[text.index(markers[0]):text.index(markers[1]) + len(markers[1])], ""]
    return [markers[0], "", markers[1], ""]


def most_common(values: list):
    """The most frequent of the values that are set (a verdict per trial, say), None when none is."""
    values = [v for v in values if v]
    return max(set(values), key=values.count) if values else None


def paired(a: list, b: list, maximize: bool) -> dict:
    """a against b from the same rounds: the mean of the per-round ratios (> 1: a better) and the Wilcoxon p-value."""
    from scipy.stats import wilcoxon

    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if len(pairs) < 2:
        return {"rounds": len(pairs), "mean_ratio": None, "p": None}
    ratios = [(x / y) if maximize else (y / x) for x, y in pairs]
    return {"rounds": len(pairs), "mean_ratio": sum(ratios) / len(ratios),
            "p": float(wilcoxon([x for x, _ in pairs], [y for _, y in pairs]).pvalue)}


def ratio_text(stats: dict | None) -> str:
    """A comparison's mean speedup with its 95% interval, e.g. 'x1.139 [1.110, 1.173]'; '-' without one."""
    if not stats or stats.get("mean_speedup") is None:
        return "-"
    ci = f" [{stats['ci_low']:.3f}, {stats['ci_high']:.3f}]" if stats.get("ci_low") is not None else ""
    return f"x{stats['mean_speedup']:.3f}{ci}"
