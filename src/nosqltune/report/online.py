"""The report's part for `online` runs: each run's timeline (throughput, p99 and the observed mix per
window, with the shifts declared, the live changes kept or rolled back and the restart decisions marked, and the
trace's phases when one was driven) and a table of what was decided in which window.

The windows' times are on the run's clock, counted from its first window's start; a driven trace's phases are on
the wall clock, counted from the run's start as stored. The two origins lie well under a second apart (the study is
opened, then the loop reads its first snapshot), which is far below a window."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..online.record import SETTINGS_KEY, WINDOW_TAG
from .data import TuningView, tuning_views
from .plots import _plt

MIX_COLOURS = {"read": "#4c78a8", "write": "#f58518", "scan": "#54a24b"}


@dataclass
class OnlineView:
    name: str
    settings: dict[str, Any]                               # the study's "online" settings, summary included
    windows: list[dict[str, Any]] = field(default_factory=list)   # one per window, in order

    @property
    def summary(self) -> dict[str, Any]:
        return self.settings.get("summary") or {}

    @property
    def trace(self) -> dict[str, Any] | None:
        return self.settings.get("trace")

    def minutes(self) -> list[float]:
        """Each window's middle, in minutes since the first window started."""
        if not self.windows:
            return []
        origin = self.windows[0]["start"]
        return [((w["start"] + w["end"]) / 2 - origin) / 60 for w in self.windows]

    def events(self) -> list[tuple[float, str, str]]:
        """(minute, kind, text) of every decision: shift, live (applied), kept, rollback, restart-act/hold."""
        if not self.windows:
            return []
        origin, out = self.windows[0]["start"], []
        for w in self.windows:
            at, record = (w["end"] - origin) / 60, w["record"]
            if (record.get("shift") or {}).get("state") == "shift":
                out.append((at, "shift", f"window {w['number']}: the mix shifted"))
            live = record.get("live") or {}
            if live.get("applied"):
                knobs = ", ".join(f"{c['knob']} = {c['after']}" for c in live.get("changes", []))
                out.append((at, "live", f"window {w['number']}: live change {knobs}"))
            guard = record.get("guard") or {}
            if guard:
                verdict = (guard.get("verdict") or {}).get("verdict")
                if "rollback" in guard:
                    out.append((at, "rollback", f"window {w['number']}: rolled back ({guard['rollback']['reason']})"))
                elif verdict == "keep":
                    out.append((at, "kept", f"window {w['number']}: live change kept"))
            restart = record.get("restart")
            if restart and restart.get("verdict"):
                decision = restart.get("decision") or {}
                gain, cost = decision.get("expected_gain_operations"), decision.get("cost_operations")
                numbers = f" (expected gain {gain:,.0f} ops against a cost of {cost:,.0f})" \
                    if gain is not None and cost is not None else ""
                out.append((at, f"restart-{restart['verdict']}",
                            f"window {w['number']}: {decision.get('action', 'restart')} {restart['verdict']}{numbers}"
                            + ("; not performed" if restart["verdict"] == "act" else "")))
        return out

    def phases(self) -> list[tuple[float, float, str]]:
        """(first minute, last minute, name) of each phase the trace's client ran, on the windows' axis."""
        rows = self.summary.get("trace") or []
        started = self.settings.get("started_at")
        if not rows or started is None:
            return []
        return [((r["started_at"] - started) / 60, (r["ended_at"] - started) / 60, r["phase"]) for r in rows]


def load_report(path: str, study_name: str | None = None) -> tuple[list[TuningView], list[OnlineView]]:
    """What a report shows of the store at `path`: its tuning studies and its online runs, `study_name` only when
    given; UsageError when there is neither."""
    from ..store import open_for_reading

    store = open_for_reading(path)
    try:
        views, runs = tuning_views(store, study_name), load_online_views(store, study_name)
    finally:
        store.close()
    if not views and not runs:
        raise UsageError(f"no tuning study or online run{' named ' + repr(study_name) if study_name else ''} in "
                         f"{path} (a report needs a study made by `nosqltune tune` or `nosqltune online`)")
    return views, runs


def load_online_views(store, study_name: str | None = None) -> list[OnlineView]:
    """The online runs of an open store (studies with "online" settings), `study_name` only when given."""
    views = []
    for study in store.studies():
        settings = (study["settings"] or {}).get(SETTINGS_KEY)
        if settings is None or (study_name and study["name"] != study_name):
            continue
        windows = []
        for row in store.trials(study["id"]):
            if row["tag"] != WINDOW_TAG or row["state"] != "COMPLETE":
                continue
            timings, metrics = row["timings"] or {}, row["metrics"] or {}
            windows.append({"number": (row["workload"] or {}).get("window"), "start": timings.get("window_start"),
                            "end": timings.get("window_end"), "summary": metrics.get("summary") or {},
                            "window": metrics.get("window") or {},
                            "mix": (row["workload"] or {}).get("observed_mix") or {},
                            "record": (row["meta"] or {}).get(SETTINGS_KEY) or {}, "config": row["config"]})
        windows = [w for w in windows if w["start"] is not None and w["end"] is not None]
        windows.sort(key=lambda w: w["start"])
        views.append(OnlineView(name=study["name"], settings=settings, windows=windows))
    return views


def timeline(view: OnlineView):
    """Three panels over the run's minutes: throughput, the p99 of reads, writes and scans (log scale), and the
    observed mix; decisions as vertical lines, the trace's phases as bands with their names."""
    if not view.windows:
        return None
    plt = _plt()
    xs = view.minutes()
    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True, gridspec_kw={"height_ratios": [3, 3, 2]})
    throughput = [w["summary"].get("throughput_ops_s") for w in view.windows]
    axes[0].plot(xs, throughput, marker="o", markersize=3, color="#333", linewidth=1.2)
    axes[0].set_ylabel("throughput (ops/s)")
    for kind, colour in MIX_COLOURS.items():
        values = [w["summary"].get(f"{kind}_p99_ms") for w in view.windows]
        if any(v is not None for v in values):
            axes[1].plot(xs, [float("nan") if v is None else v for v in values], marker="o", markersize=3,
                         color=colour, label=f"{kind} p99", linewidth=1.2)
    if axes[1].lines:
        axes[1].set_yscale("log")
        axes[1].legend(fontsize=8, loc="upper left")
    axes[1].set_ylabel("p99 (ms)")
    bottom = [0.0] * len(xs)
    width = (xs[1] - xs[0]) * 0.9 if len(xs) > 1 else 0.5
    for kind, colour in MIX_COLOURS.items():
        shares = [w["mix"].get(kind) or 0.0 for w in view.windows]
        axes[2].bar(xs, shares, bottom=bottom, width=width, color=colour, label=kind, linewidth=0)
        bottom = [b + s for b, s in zip(bottom, shares)]
    axes[2].set_ylim(0, 1)
    axes[2].set_ylabel("observed mix")
    axes[2].legend(fontsize=8, loc="upper left", ncol=3)
    axes[2].set_xlabel("minutes since the first window")
    styles = {"shift": ("#7b3294", "--"), "live": ("#1a7f37", "-"), "kept": ("#1a7f37", ":"),
              "rollback": ("#b42318", "-"), "restart-act": ("#b35806", "-."), "restart-hold": ("#999999", "-.")}
    seen = set()
    for at, kind, _ in view.events():
        colour, style = styles.get(kind, ("#666", ":"))
        for ax in axes:
            ax.axvline(at, color=colour, linestyle=style, linewidth=1,
                       label=kind if ax is axes[0] and kind not in seen else None)
        seen.add(kind)
    for i, (first, last, name) in enumerate(view.phases()):
        for ax in axes:
            ax.axvspan(first, last, color="#000", alpha=0.04 if i % 2 else 0.0, linewidth=0)
        axes[0].annotate(name, ((first + last) / 2, 1.0), xycoords=("data", "axes fraction"), ha="center",
                         va="bottom", fontsize=8, color="#555")
    if seen:
        axes[0].legend(fontsize=8, loc="lower left", ncol=len(seen))
    for ax in axes:
        ax.grid(alpha=0.3)
    dry = " (dry run: nothing applied)" if view.settings.get("dry_run") else ""
    fig.suptitle(f"{view.name}: {len(view.windows)} windows of {view.settings.get('window_seconds', 0):g} s"
                 + (f", trace {view.trace['name']}" if view.trace else "") + dry, fontsize=10)
    fig.tight_layout()
    return fig
