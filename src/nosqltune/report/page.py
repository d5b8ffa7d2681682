"""The report page: sections of tables and figures, every figure also a PNG file beside the page."""

from __future__ import annotations

import base64
import html
import io
import json
import time
from pathlib import Path
from typing import Any, Callable

from . import online, plots
from .data import TuningView
from .online import OnlineView

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px; padding: 0 18px 40px; color: #222; }
h1 { font-size: 24px; margin: 22px 0 4px; } h2 { font-size: 19px; margin-top: 30px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin-top: 22px; } .muted { color: #777; } .warn { color: #a40; font-weight: bold; } figure { margin: 10px 0; }
img { max-width: 100%; border: 1px solid #eee; } figcaption { color: #666; font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; } td, th { border: 1px solid #ddd; padding: 3px 8px; }
th { background: #f5f5f5; text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 10px; overflow-x: auto; font-size: 12px; }
.better { color: #1a7f37; font-weight: 600; } .worse { color: #b42318; font-weight: 600; } .none { color: #666; }
#report-status { font-size: 11px; color: #999; margin-top: 30px; }
"""

# Counts what the browser did with the page: script errors and images that did not decode. Headless tests
# read it from the DOM; a reader sees it at the bottom.
SCRIPT = """
window.reportErrors = [];
window.addEventListener('error', function (e) { window.reportErrors.push(String(e.message || e)); });
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  var broken = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  var s = document.getElementById('report-status');
  s.setAttribute('data-images', imgs.length);
  s.setAttribute('data-broken', broken.length);
  s.setAttribute('data-errors', window.reportErrors.length);
  s.setAttribute('data-loaded', 'yes');
  s.textContent = 'page check: ' + imgs.length + ' figures, ' + broken.length + ' not rendered, ' +
    window.reportErrors.length + ' script errors';
});
"""


def esc(value: Any) -> str:
    return html.escape(str(value))


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return esc(value)


def table(head: list[str], rows: list[list[Any]], numeric: set[int] = frozenset()) -> str:
    out = ["<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in numeric else f"<td>{c}</td>"
                                     for i, c in enumerate(row)) + "</tr>")
    return "\n".join(out) + "</table>"


class Figures:
    """Saves each figure as a PNG file in the output folder and returns the <figure> embedding it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.files: list[Path] = []

    def add(self, name: str, make: Callable[[], Any], caption: str, missing: str) -> str:
        try:
            fig = make()
        except Exception as exc:   # one figure that cannot be drawn must not lose the whole report
            return f"<p class='muted'>{esc(name)}: could not be drawn ({esc(type(exc).__name__)}: {esc(exc)})</p>"
        if isinstance(fig, tuple):
            fig = fig[0]
        if fig is None:
            return f"<p class='muted'>{esc(missing)}</p>"
        import matplotlib.pyplot as plt

        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        data = buffer.getvalue()
        path = self.out / f"{name}.png"
        path.write_bytes(data)
        self.files.append(path)
        encoded = base64.b64encode(data).decode("ascii")
        return (f"<figure><img alt='{esc(name)}' src='data:image/png;base64,{encoded}'>"
                f"<figcaption>{esc(caption)} ({esc(path.name)})</figcaption></figure>")


def verdict_class(verdict: str) -> str:
    return "better" if verdict == "better" else "worse" if verdict == "worse" else "none"


def summary_rows(views: list[TuningView]) -> list[list[Any]]:
    rows = []
    for v in views:
        spec = v.tune["spec"]
        failed = sum(1 for r in v.rows if r["state"] != "COMPLETE")
        best = v.best["value"] if v.best else None
        default = v.default["value"] if v.default else None
        if v.best and v.best.get("confirmed"):   # both means of the same confirmation rounds
            default = v.settings["confirm"]["candidates"]["default"]["mean"]
        ratio = None
        if best and default:
            ratio = best / default if v.objective.maximize else default / best
        rows.append([esc(v.name), esc(v.tune.get("system", "cassandra")), esc(v.label.split("(", 1)[1][:-1]),
                     f"{esc(v.tune.get('knob_label') or '')} ({len(v.space.knobs)} knobs)",
                     esc(", ".join(spec["workloads"])), esc(v.objective.describe()),
                     f"{len(v.rows) - failed} / {failed}", fmt(default), fmt(best),
                     f"x{ratio:.3f}" if ratio else "-"])
    return rows


def comparison_section(view: TuningView, figures: Figures) -> str:
    if not view.comparisons:
        return (f"<p class='muted'>No repeated comparison in this study yet: a single run's best is not "
                f"evidence. Run <code>nosqltune compare --study ... --study-name {esc(view.name)} --repeat 10"
                f"</code>.</p>")
    rows = []
    for scale, result in sorted(view.comparisons.items()):
        for workload, w in result.get("workloads", {}).items():
            for candidate, s in w["stats"].items():
                interval = (f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s.get("ci_low") is not None else "-")
                rows.append([esc(candidate), esc(workload), esc(scale), s["pairs"],
                             fmt(s.get("mean_speedup")), fmt(s.get("median_speedup")), interval,
                             fmt(s.get("p_value"), 3), esc(s.get("test", "")),
                             f"<span class='{verdict_class(s['verdict'])}'>{esc(s['verdict'])}</span>"])
    parts = [table(["candidate", "workload", "comparison", "pairs", "mean speedup", "median", "95% interval",
                    "p", "test", "verdict"], rows, numeric={3, 4, 5, 7}),
             figures.add(f"{view.name}-speedups", lambda: plots.speedup_boxes(view),
                         "per-round speedup over the default; box: quartiles, triangle: mean, dots: rounds",
                         "no complete pairs to draw")]
    from ..evaluation.compare import growth_table

    if growth_table(view.comparisons):
        parts.append(figures.add(f"{view.name}-growth", lambda: plots.growth(view),
                                 "the gain against the data size (compare --data-growth)", "nothing to draw"))
    for scale, result in sorted(view.comparisons.items()):
        practice = result.get("best_practice")
        if practice:
            facts = practice["machine"]
            parts.append(f"<h3>Best-practice baseline ({esc(scale)})</h3><p>Machine: {facts['cores']} cores, "
                         f"{facts['drives']} data drive(s), disk {esc(facts['disk'])}, heap {facts['heap_mib']} "
                         "MiB.</p>")
            parts.append(table(["knob", "rule", "value", "source"],
                               [[esc(k), f"<code>{esc(r['rule'])}</code>", esc(r["value"]), esc(r["source"])]
                                for k, r in practice["rules"].items()]))
            break
    return "\n".join(parts)


def best_section(view: TuningView) -> str:
    if not view.best:
        return "<p class='muted'>No completed configuration yet.</p>"
    from ..systems.base import TrialSettings
    from ..tuning.results import yaml_fragment

    if view.best.get("confirmed"):   # re-measured beside the default (tune's end, or `best --confirm`)
        confirmation, interval = view.settings["confirm"], view.best["interval"]
        header = (f"confirmed best of study {view.name}: {view.objective.metric} {fmt(view.best['value'])} (mean "
                  f"of {confirmation['rounds']} interleaved cold rounds"
                  + (f", 95% interval {fmt(interval[0])} .. {fmt(interval[1])}" if interval else "")
                  + f"; the top {confirmation['top']} by single runs re-measured beside the default)")
    else:
        from ..tuning.results import UNCONFIRMED

        header = (f"best of study {view.name}: {view.objective.metric} {fmt(view.best['value'])} over "
                  f"{view.best['trials']} trial(s)\n{UNCONFIRMED}")
    settings = TrialSettings.from_dict(view.tune["harness"])
    return f"<pre>{esc(yaml_fragment(view.space, view.best['config'], view.fixed, header, settings))}</pre>"


def environment_section(views: list[TuningView]) -> str:
    seen, parts = [], []
    for view in views:
        for env in view.environments:
            if env in seen:
                continue
            seen.append(env)
            flat = {k: json.dumps(v, default=str) if isinstance(v, (dict, list)) else v for k, v in env.items()}
            parts.append(table(["field", "value"], [[esc(k), esc(v)] for k, v in flat.items()]))
    return "\n".join(parts) or "<p class='muted'>No environment recorded.</p>"


def machines_section(views: list[TuningView]) -> str:
    """The machines the studies' runs came from, one row per study and day, and a warning when their speeds are
    apart by more than the tolerance (evaluation/machines.py): then the studies' figures are not comparable."""
    from ..evaluation.machines import by_day, check_machines

    rows = [dict(r, _study=view.name) for view in views for r in view.all_rows]
    check = check_machines(rows, group=lambda r: f"{r['_study']}, {by_day(r)}")
    body = table(["study, day (environment)", "runs", "with a probe", "CPU probe MB/s (median)",
                  "default's node CPU us/op (median)", "default's runs"],
                 [[esc(g.label), g.runs, g.probed, fmt(g.cpu_mb_s), fmt(g.default_cpu_us_per_op), g.default_runs]
                  for g in check.groups], numeric={1, 2, 3, 4, 5})
    return f"<p class='{'warn' if check.apart else 'muted'}' id='machines-verdict'>{esc(check.verdict())}</p>" + body


def build(views: list[TuningView], out: Path, source: str, runs: list[OnlineView] = ()) -> tuple[Path, list[Path]]:
    """The page of `views` (tuning studies) and `runs` (online runs)."""
    out.mkdir(parents=True, exist_ok=True)
    figures = Figures(out)
    counts = [f"{len(views)} tuning stud{'y' if len(views) == 1 else 'ies'}"] + \
        ([f"{len(runs)} online run{'' if len(runs) == 1 else 's'}"] if runs else [])
    body = [f"<h1>nosqltune report</h1><p class='muted'>{esc(source)} &middot; generated "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} &middot; {' &middot; '.join(counts)}</p>"]
    if views:
        body += _tuning_overview(views, figures)
    for view in views:
        body += _tuning_study(view, figures)
    if runs:
        body.append("<h2>Online runs</h2>")
        for run in runs:
            body += [f"<h3>{esc(run.name)}</h3>", online_section(run, figures)]
    body.append("<div id='report-status' data-loaded='no'>page check did not run (scripts off?)</div>")
    page = ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>nosqltune report</title>"
            f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    index = out / "index.html"
    index.write_text(page, encoding="utf-8")
    return index, figures.files


def _tuning_overview(views: list[TuningView], figures: Figures) -> list[str]:
    return ["<h2>Summary</h2>",
            table(["study", "system", "optimizer", "knobs", "workloads", "objective", "trials ok / failed",
                   "default", "best (one run, or confirmed mean)", "best / default"], summary_rows(views), numeric={7, 8, 9}),
            "<p class='muted'>Best and default here are single cold runs as measured during tuning; the "
            "comparisons below are the evidence.</p>",
            "<h2>Environment</h2>", environment_section(views),
            "<h2>Machines</h2>", machines_section(views),
            "<h2>Convergence</h2>",
            figures.add("convergence", lambda: plots.convergence(views),
                        "objective per configuration in the order measured, and the best so far", "no trials")]


def _tuning_study(view: TuningView, figures: Figures) -> list[str]:
    slug = view.name
    return [f"<h2>Study {esc(view.name)}: {esc(view.label)}</h2>",
                 "<h3>Tuned vs default: repeated interleaved cold runs</h3>", comparison_section(view, figures),
                 "<h3>Knob values per iteration</h3>",
                 figures.add(f"{slug}-knobs", lambda v=view: plots.knob_values(v),
                             "value of each knob that changed, per configuration measured",
                             "fewer than two complete configurations"),
                 "<h3>Knob / objective correlation</h3>",
                 figures.add(f"{slug}-correlation", lambda v=view: plots.correlations(v),
                             "Spearman rank correlation (categorical knobs by choice index)",
                             "fewer than five complete configurations"),
                 "<h3>Knob importance</h3>",
                 figures.add(f"{slug}-importance", lambda v=view: plots.importance(v),
                             "permutation importance in a random forest of log(objective)",
                             f"fewer than {plots.MIN_FOR_MODEL} complete configurations: no model fitted"),
                 "<h3>The node's own cost per operation</h3>",
                 figures.add(f"{slug}-node-cost", lambda v=view: plots.node_cost(v),
                             "CPU time (user + system) of the datastore's processes and of the YCSB client over "
                             "each trial's measured phase, divided by its operations",
                             "no trial with the node's CPU time (recorded surrogate, external target, or trials "
                             "made before it was measured)"),
                 "<h3>What limited each trial</h3>",
                 figures.add(f"{slug}-bottleneck", lambda v=view: plots.bottlenecks(v),
                             "each trial's verdict (the node's cores, the client's, the volume's IOPS or bandwidth "
                             "cap, memory, a fixed rate, or the client's threads) and the utilisation that decided "
                             "it; thresholds in nosqltune/bottleneck",
                             "no complete trial"),
                 "<h3>Where the machine's time went</h3>",
                 figures.add(f"{slug}-time", lambda v=view: plots.study_time(v),
                             "every trial's time split into building its dataset, restoring it, booting, warming "
                             "up and measuring (tuning/cost.py), and the best found against the hours spent (a "
                             "confirmed best where its confirmation ended)",
                             "no trial with stored timings"),
                 "<h3>Node internals over the measured phase: default vs best</h3>",
                 figures.add(f"{slug}-internals", lambda v=view: plots.internals(v),
                             "one cold run each (from the comparison when there is one); throughput and p99 "
                             "from the client, SSTables per read and data on disk from the node over JMX",
                             "no run of the default and the best with per-second data"),
                 "<h3>Predicted vs measured</h3>",
                 figures.add(f"{slug}-predicted", lambda v=view: plots.predicted_vs_measured(v),
                             "each point one configuration; the dashed line is a perfect prediction",
                             f"fewer than {plots.MIN_FOR_MODEL} complete configurations and no recorded "
                             "predictions"),
                 "<h3>Best configuration</h3>", best_section(view)]


def online_section(view: OnlineView, figures: Figures) -> str:
    """One online run: its summary line, the timeline and the decisions, as HTML."""
    s = view.summary
    head = (f"<p>{len(view.windows)} window(s) of {fmt(view.settings.get('window_seconds'))} s on "
            f"{esc(', '.join(view.settings.get('hosts') or []))}, model {esc(view.settings.get('model'))}"
            + (", dry run" if view.settings.get("dry_run") else "")
            + (f"; stopped by {esc(s.get('stopped'))}: {s.get('shifts', 0)} shift(s), {s.get('recommendations', 0)} "
               f"recommendation(s), {s.get('live_applied', 0)} live change(s) applied, {s.get('live_kept', 0)} "
               f"kept, {s.get('rollbacks', 0)} rolled back, {len(s.get('restart_decisions') or [])} restart "
               "decision(s)" if s else "; still running or stopped without a summary") + "</p>")
    body = [head, figures.add(f"{view.name}-timeline", lambda: online.timeline(view),
                              "throughput, p99 and the observed mix per window; vertical lines: shifts declared "
                              "(dashed), live changes applied (solid green) and kept (dotted), rollbacks (red), "
                              "restart decisions (dash-dot: orange act, grey hold); bands: the trace's phases",
                              "no window stored")]
    if view.summary.get("trace"):
        body.append(table(["phase", "workload", "seconds", "throughput (ops/s)", "read p99 (ms)", "failed"],
                          [[esc(r["phase"]), esc(r["workload"]), fmt(r["seconds"]), fmt(r["throughput_ops_s"]),
                            fmt(r["read_p99_ms"]), fmt(r["errors"])] for r in view.summary["trace"]],
                          numeric={2, 3, 4, 5}))
    events = view.events()
    body.append(table(["minute", "decision"], [[f"{at:.1f}", esc(text)] for at, _, text in events], numeric={0})
                if events else "<p class='muted'>no decision: the mix never shifted from the first one seen</p>")
    return "\n".join(body)
