"""The report's figures (matplotlib, Agg): each function returns a Figure, or None when the study holds
nothing to draw it from (the page then says why)."""

from __future__ import annotations

from typing import Any

from .data import TuningView, best_so_far, internals_runs, knob_matrix

MIN_FOR_MODEL = 10   # configurations needed before a model-based plot (importance, predicted vs measured)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def convergence(views: list[TuningView]):
    plt = _plt()
    metrics = list(dict.fromkeys(v.objective.metric for v in views))
    fig, axes = plt.subplots(1, len(metrics), figsize=(7.5 * len(metrics), 4.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for view in (v for v in views if v.objective.metric == metric):
            values = view.values()
            xs = range(1, len(values) + 1)
            line, = ax.plot(xs, best_so_far(values, view.objective.maximize), label=view.label, linewidth=2)
            ax.scatter([x for x, v in zip(xs, values) if v is not None], [v for v in values if v is not None],
                       s=12, alpha=0.35, color=line.get_color())
            if view.default and view.default["value"]:
                ax.axhline(view.default["value"], color=line.get_color(), linestyle=":", linewidth=1)
        ax.set_xlabel("configurations measured")
        ax.set_ylabel(f"{metric} ({views[0].objective.unit if views[0].objective.metric == metric else ''})")
        ax.set_title("best so far (line), each configuration (dots), default (dotted)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def speedup_boxes(view: TuningView):
    """One box per (candidate, workload, scale): per-round speedups over the default, with the p-value."""
    from ..evaluation.stats import speedups

    boxes, labels = [], []
    for scale, result in sorted(view.comparisons.items()):
        for workload, w in result.get("workloads", {}).items():
            for candidate, stats in w["stats"].items():
                values = speedups(w["values"][candidate], w["values"]["default"], maximize=view.objective.maximize)
                if not values:
                    continue
                p = stats.get("p_value")
                boxes.append(values)
                labels.append(f"{candidate}\n{workload} {scale}\np = {p:.3g}" if p is not None
                              else f"{candidate}\n{workload} {scale}\np = -")
    if not boxes:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.9 * len(boxes) + 1.5), 4.2))
    ax.boxplot(boxes, showmeans=True)
    for i, values in enumerate(boxes, start=1):
        ax.scatter([i] * len(values), values, s=10, alpha=0.5, color="black", zorder=3)
    ax.set_xticks(range(1, len(boxes) + 1), labels, fontsize=8)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_ylabel("speedup over the default (same round)")
    ax.set_title(f"{view.name}: interleaved cold rounds (> 1 is better; Wilcoxon signed-rank p)", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def growth(view: TuningView):
    """Each candidate's speedup over the default against the data size (compare --data-growth), with its 95%
    interval; None without comparisons at two sizes or more."""
    from ..evaluation.compare import growth_table

    table = growth_table(view.comparisons)
    if not table:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (workload, candidate, variant) in dict.fromkeys((r["workload"], r["candidate"], r["variant"]) for r in table):
        rows = [r for r in table if (r["workload"], r["candidate"], r["variant"]) == (workload, candidate, variant)
                and r["mean_speedup"] is not None]
        xs = [r["multiple"] for r in rows]
        ys = [r["mean_speedup"] for r in rows]
        low = [y - (r["ci_low"] if r["ci_low"] is not None else y) for y, r in zip(ys, rows)]
        high = [(r["ci_high"] if r["ci_high"] is not None else y) - y for y, r in zip(ys, rows)]
        rounds = f", {variant}" if variant else ""   # rounds run another way than the study's (another JIT)
        ax.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=f"{candidate} ({workload}{rounds})")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("data: multiple of the study's records (operations held)")
    ax.set_ylabel("speedup over the default (mean of rounds)")
    ax.set_title(f"{view.name}: the gain as the data grows (95% bootstrap intervals)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def knob_values(view: TuningView):
    names, rows, values = knob_matrix(view)
    if not names or len(rows) < 2:
        return None
    plt = _plt()
    cols = min(4, len(names))
    nrows = (len(names) + cols - 1) // cols
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 1.0 + 2.3 * nrows), squeeze=False,
                             layout="constrained")
    best_i = max(range(len(values)), key=lambda i: values[i] if view.objective.maximize else -values[i])
    xs = list(range(1, len(rows) + 1))
    for i, ax in enumerate(axes.flat):
        if i >= len(names):
            ax.axis("off")
            continue
        ys = [r[i] for r in rows]
        sc = ax.scatter(xs, ys, c=values, cmap="viridis", s=14)
        ax.scatter([xs[best_i]], [ys[best_i]], marker="*", s=110, color="red", zorder=3)
        knob = view.space.by_name[names[i]]
        if knob.type == "enum":
            ax.set_yticks(range(len(knob.choices)), [str(c)[:10] for c in knob.choices], fontsize=7)
        if knob.log:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(ScalarFormatter())
            ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(names[i], fontsize=8)
        ax.tick_params(labelsize=7)
    fig.colorbar(sc, ax=axes, shrink=0.6, label=view.objective.metric)
    fig.suptitle(f"{view.name}: knob values per configuration measured (colour: {view.objective.metric}; "
                 "star: best)", fontsize=10)
    return fig


def correlations(view: TuningView) -> tuple[Any, dict[str, dict[str, float]]] | None:
    """Spearman rank correlation of each knob with the objective and the main metrics."""
    import numpy as np
    from scipy.stats import spearmanr

    names, rows, values = knob_matrix(view)
    if not names or len(rows) < 5:
        return None
    columns = {view.objective.metric: values}
    for metric in ("throughput_ops_s", "read_p99_ms", "update_p99_ms", "node_cpu_us_per_op"):
        series = [_first_summary(view, e).get(metric) for e in view.entries if e["value"] is not None]
        if all(isinstance(v, (int, float)) for v in series) and metric != _summary_key(view.objective.metric):
            columns[metric] = series
    X = np.array(rows, dtype=float)
    table = {}
    M = np.zeros((len(names), len(columns)))
    for j, (metric, ys) in enumerate(columns.items()):
        for i, name in enumerate(names):
            rho = spearmanr(X[:, i], ys).statistic
            M[i, j] = 0.0 if np.isnan(rho) else rho
            table.setdefault(name, {})[metric] = float(M[i, j])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(2.0 + 1.5 * len(columns), 1.0 + 0.32 * len(names)))
    im = ax.imshow(M, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    ax.set_xticks(range(len(columns)), list(columns), fontsize=8, rotation=20)
    ax.set_yticks(range(len(names)), names, fontsize=8)
    for i in range(len(names)):
        for j in range(len(columns)):
            ax.text(j, i, f"{M[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="Spearman rank correlation")
    ax.set_title(f"{view.name}: knob / metric correlation over {len(rows)} configurations", fontsize=10)
    fig.tight_layout()
    return fig, table


def _summary_key(metric: str) -> str:
    from ..objective import COST_METRICS

    return "throughput_ops_s" if metric == "throughput" else COST_METRICS.get(metric, metric)


def _first_summary(view: TuningView, entry: dict) -> dict:
    per = entry.get("per_workload") or {}
    return next(iter(per.values()), {}) if per else {}


def _forest(view: TuningView):
    import numpy as np
    from sklearn.ensemble import RandomForestRegressor

    names, rows, values = knob_matrix(view)
    if len(rows) < MIN_FOR_MODEL or not names:
        return None
    X, y = np.array(rows, dtype=float), np.log(np.array(values, dtype=float))
    return names, X, y, RandomForestRegressor(n_estimators=200, min_samples_leaf=2, random_state=0)


def importance(view: TuningView):
    """Permutation importance of each knob in a random forest fitted to the study's configurations."""
    from sklearn.inspection import permutation_importance

    fitted = _forest(view)
    if fitted is None:
        return None
    names, X, y, model = fitted
    model.fit(X, y)
    result = permutation_importance(model, X, y, n_repeats=10, random_state=0)
    order = sorted(range(len(names)), key=lambda i: result.importances_mean[i])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 1.0 + 0.3 * len(names)))
    ax.barh([names[i] for i in order], [result.importances_mean[i] for i in order],
            xerr=[result.importances_std[i] for i in order], color="#4c72b0")
    ax.set_xlabel(f"drop in R² of log({view.objective.metric}) when the knob is shuffled")
    ax.set_title(f"{view.name}: knob importance (random forest on {len(y)} configurations)", fontsize=10)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return fig


def own_predictions(view: TuningView) -> list[tuple[float, float]]:
    """(what the optimizer predicted, what it was then told) for each complete run it recorded a prediction for (the
    suggestion's meta, `opt.predicted`: rafiki, surrogate-sa):
    a run on another machine than the study's first is valued as on the first, as the optimizer's model was
    (tuning.machine_reference)."""
    from ..objective import metric_value
    from ..tuning.machine_reference import home_summary

    metric = view.objective.metric
    return [(float(r["meta"]["opt"]["predicted"]), metric_value(metric, home_summary(r, metric))) for r in view.rows
            if r["state"] == "COMPLETE" and ((r.get("meta") or {}).get("opt") or {}).get("predicted") is not None]


def predicted_vs_measured(view: TuningView):
    """The optimizer's own predictions where it recorded them (rafiki, surrogate-sa); otherwise out-of-fold
    predictions of a random forest fitted to the study (5-fold), i.e. how well a surrogate would do here."""
    import numpy as np

    own = own_predictions(view)
    if len(own) >= 3:
        predicted = np.array([p for p, _ in own], dtype=float)
        measured = np.array([m for _, m in own], dtype=float)
        source = f"{view.tune['spec']['optimizer']}'s model at suggestion time"
    else:
        from sklearn.model_selection import cross_val_predict

        fitted = _forest(view)
        if fitted is None:
            return None
        _, X, y, model = fitted
        predicted = np.exp(cross_val_predict(model, X, y, cv=min(5, len(y))))
        measured = np.exp(y)
        source = "random forest fitted to this study, out-of-fold (5-fold)"
    mape = float(np.mean(np.abs(predicted - measured) / measured) * 100)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 4.6))
    ax.scatter(measured, predicted, s=16, alpha=0.7)
    lo, hi = float(min(measured.min(), predicted.min())), float(max(measured.max(), predicted.max()))
    ax.plot([lo, hi], [lo, hi], color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel(f"measured {view.objective.metric}")
    ax.set_ylabel(f"predicted {view.objective.metric}")
    ax.set_title(f"{view.name}: {source}\nMAPE {mape:.1f}% over {len(measured)} configurations", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


INTERNAL_PANELS = (("throughput", "throughput (ops/s)"), ("p99_ms", "client p99 latency (ms)"),
                   ("sstables_per_read", "SSTables per read (node, recent mean)"),
                   ("disk_used_mb", "live data on disk (MiB)"))


def internals(view: TuningView):
    """Per-second series of the measured phase, default vs best (one cold run each)."""
    runs = internals_runs(view)
    if not runs:
        return None
    plt = _plt()
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, 2, figsize=(10, 6.2))
    drawn = 0
    for ax, (key, title) in zip(axes.flat, INTERNAL_PANELS):
        for label, metrics in runs.items():
            series = metrics.get("intervals_ops_s") if key == "throughput" else (metrics.get("intervals") or {}).get(key)
            if not series:
                continue
            xs = [i + 1 for i, v in enumerate(series) if v is not None]
            ax.plot(xs, [v for v in series if v is not None], label=label, linewidth=1.6,
                    color="#888888" if label == "default" else "#c44e52")
            drawn += 1
        ax.set_title(title, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("second of the measured phase", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not recorded for these runs\n(trials made before per-second sampling)",
                    ha="center", va="center", fontsize=8, transform=ax.transAxes, color="grey")
    if not drawn:
        plt.close(fig)
        return None
    fig.suptitle(f"{view.name}: node and client over the measured phase, default vs best", fontsize=10)
    fig.tight_layout()
    return fig


def node_cost(view: TuningView):
    """The node's own cost per operation for every trial in the order measured (the client's beside it), and
    against the throughput: on shared cores the throughput measures client and node together, the CPU per
    operation the node alone."""
    trials = [(i, r["metrics"]["summary"]) for i, r in enumerate(view.rows, start=1)
              if r["state"] == "COMPLETE" and r["metrics"]["summary"].get("node_cpu_us_per_op") is not None]
    if not trials:
        return None
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    xs = [i for i, _ in trials]
    node = [s["node_cpu_us_per_op"] for _, s in trials]
    client = [s.get("client_cpu_us_per_op") for _, s in trials]
    gc = [s.get("node_gc_us_per_op") for _, s in trials]
    defaults = {id(r) for r in view.rows if (r.get("meta") or {}).get("kind") == "default"}
    is_default = [id(view.rows[i - 1]) in defaults for i in xs]
    left.scatter(xs, node, s=22, color="#c44e52", label="node CPU")
    left.scatter([x for x, d in zip(xs, is_default) if d], [v for v, d in zip(node, is_default) if d], s=90,
                 facecolors="none", edgecolors="black", label="default")
    if any(v is not None for v in gc):
        left.scatter([x for x, v in zip(xs, gc) if v is not None], [v for v in gc if v is not None], s=12,
                     marker="x", color="#8172b2", label="node GC pauses")
    if any(v is not None for v in client):
        left.scatter([x for x, v in zip(xs, client) if v is not None], [v for v in client if v is not None], s=14,
                     color="#888888", alpha=0.6, label="client CPU")
    left.set_xlabel("trial (in the order measured)")
    left.set_ylabel("microseconds per operation")
    left.set_title("cost per operation of the measured phase", fontsize=10)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.scatter([s["throughput_ops_s"] for _, s in trials], node, s=22, color="#c44e52")
    right.set_xlabel("throughput (ops/s)")
    right.set_ylabel("node CPU per operation (us)")
    right.set_title("node CPU per operation against throughput, per trial", fontsize=10)
    right.grid(alpha=0.3)
    fig.suptitle(f"{view.name}: the node's own cost (CPU user + system over JMX or INFO, summed over its nodes)",
                 fontsize=10)
    fig.tight_layout()
    return fig


BOTTLENECK_COLOURS = {"volume-iops": "#c44e52", "volume-bandwidth": "#dd8452", "node-cores": "#4c72b0",
                      "client-cores": "#8172b2", "rate": "#55a868", "read-threads": "#da8bc3", "memory": "#937860",
                      "client-threads": "#888888"}


def bottlenecks(view: TuningView):
    """What limited each trial (bottleneck/__init__.py), in the order measured: its objective value coloured by the
    verdict, and beside it the utilisation that decided (cores busy, or the share of the volume's cap used)."""
    from ..bottleneck import LIMITS, of_trial
    from ..systems.settings import TrialSettings

    harness = TrialSettings.from_dict(view.tune.get("harness") or {}).flat()
    points = []
    for i, row in enumerate(view.rows, start=1):
        verdict = of_trial(row, harness) if row["state"] == "COMPLETE" else None
        if verdict is None:
            continue
        u = verdict.utilisation
        caps = [u[k] for k in u if k.startswith("volume_")]
        points.append((i, row["metrics"]["summary"], verdict, u.get("cores_busy"), max(caps) if caps else None))
    if not points:
        return None
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    key = _summary_key(view.objective.metric)
    for limit in LIMITS:
        mine = [(i, s.get(key)) for i, s, v, _, _ in points if v.limit == limit and s.get(key) is not None]
        if mine:
            left.scatter([i for i, _ in mine], [y for _, y in mine], s=24, color=BOTTLENECK_COLOURS[limit],
                         label=f"{limit} ({len(mine)})")
    left.set_xlabel("trial (in the order measured)")
    left.set_ylabel(view.objective.metric)
    left.set_title("each trial's objective, coloured by what limited it", fontsize=10)
    left.grid(alpha=0.3)
    left.legend(fontsize=7)
    cores = [(i, c) for i, _, _, c, _ in points if c is not None]
    caps = [(i, c) for i, _, _, _, c in points if c is not None]
    if cores:
        right.scatter([i for i, _ in cores], [c for _, c in cores], s=18, color="#4c72b0",
                      label="cores busy (node + client, of the machine's)")
    if caps:
        right.scatter([i for i, _ in caps], [c for _, c in caps], s=18, color="#c44e52",
                      label="the volume's cap used (the more used of IOPS and MiB/s)")
    right.axhline(0.9, color="black", linestyle="--", linewidth=0.8, label="threshold 0.9")
    right.set_xlabel("trial (in the order measured)")
    right.set_ylabel("share")
    right.set_title("the utilisation that decided", fontsize=10)
    right.grid(alpha=0.3)
    right.legend(fontsize=7)
    fig.suptitle(f"{view.name}: what limited each trial", fontsize=10)
    fig.tight_layout()
    return fig


PHASE_COLOURS = {"build": "#c44e52", "restore": "#937860", "boot": "#8172b2", "warm-up": "#dd8452",
                 "measure": "#55a868", "other": "#bbbbbb"}


def study_time(view: TuningView):
    """Where the study's machine time went (tuning/cost.py: building datasets, restoring, booting, warming up,
    measuring) and the best single run found against the machine hours spent, tuning trials and the
    confirmation's and comparison's alike; a confirmed best is marked where its search and confirmation ended."""
    from ..tuning.cost import best_by_machine_time, hours_at_result, time_split

    rows = view.all_rows or view.rows
    split = time_split(rows)
    if not split["trials"]:
        return None
    key = _summary_key(view.objective.metric)

    def value(row):
        if row.get("tag") != "tune" or row["state"] != "COMPLETE":
            return None
        return ((row.get("metrics") or {}).get("summary") or {}).get(key)

    curve = best_by_machine_time(rows, value, view.objective.maximize)
    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 1.4]})
    hours = {k: v / 3600 for k, v in split["seconds"].items()}
    start = 0.0
    for name, h in hours.items():
        left.barh([0], [h], left=[start], color=PHASE_COLOURS[name],
                  label=f"{name} {split['shares'][name] * 100:.0f}%")
        start += h
    left.set_yticks([])
    left.set_xlabel("machine hours (sum of the trials' times)")
    left.set_title(f"{split['trials']} trials, {split['builds']} dataset builds", fontsize=10)
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3)
    if curve:
        right.step([h for h, _ in curve], [v for _, v in curve], where="post", linewidth=2, color="#4c72b0")
    at = hours_at_result(rows)
    confirmed = bool(view.best and view.best.get("confirmed")) and at is not None
    if confirmed:   # the confirmed gain, where the machine's time reached it
        low, high = view.best.get("interval") or (view.best["value"], view.best["value"])
        right.errorbar([at], [view.best["value"]], yerr=[[view.best["value"] - low],
                       [high - view.best["value"]]], fmt="D", color="#c44e52", capsize=3,
                       label="confirmed best (mean, 95% interval)")
    if view.default and view.default["value"]:
        right.axhline(view.default["value"], color="black", linestyle=":", linewidth=1, label="default")
    if right.get_legend_handles_labels()[0]:
        right.legend(fontsize=7)
    right.set_xlabel("machine hours spent")
    right.set_ylabel(view.objective.metric)
    right.set_title("best single run so far" + (", and the confirmed best," if confirmed else "")
                    + " against the machine's time", fontsize=10)
    right.grid(alpha=0.3)
    fig.suptitle(f"{view.name}: the study's machine time", fontsize=10)
    fig.tight_layout()
    return fig
