// nosqltune dashboard: polls /api/study/<name>?after=<cursor> and redraws what changed; no reload, no network
// beyond this server.
"use strict";

const state = {
  study: null, cursor: null, trials: new Map(), summary: null, pollMs: 2000, polls: 0, timer: null,
  sort: { key: "number", dir: -1 }, page: 0, pageSize: 100, lastOk: 0, drawnAt: null, timings: {}, plotly: null, pollError: "", pageError: "",
};
const $ = (id) => document.getElementById(id);
const PLOT_CONFIG = { displaylogo: false, responsive: true };
const PARCOORDS_KNOBS = 8;
const PARCOORDS_LINES = 1000;   // more lines than this draw for seconds in a browser without a GPU, and read no better
const GL_POINTS = 2000;         // above this many points a scatter is drawn with WebGL
const COLUMNS = [
  ["number", "#", "num"], ["tag", "tag"], ["state", "state"], ["workload", "workload"], ["kind", "kind"],
  ["value", "value", "num"], ["seconds", "s", "num"], ["cpu_cores", "CPU cores", "num"],
  ["disk_busy", "disk busy", "num"], ["limit", "limited by"], ["reason", "failure / phase"], ["knobs", "knobs"],
];

function esc(text) {
  return String(text == null ? "" : text).replace(/[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function fmt(value, unit) {
  if (value == null || Number.isNaN(value)) return "–";
  const text = Math.abs(value) >= 100 ? value.toLocaleString("en-US", { maximumFractionDigits: 0 })
    : value.toLocaleString("en-US", { maximumFractionDigits: 3 });
  return unit ? `${text} ${unit}` : text;
}
function pct(ratio) {
  if (ratio == null) return "–";
  const p = (ratio - 1) * 100;
  return `${p >= 0 ? "+" : ""}${p.toFixed(1)}%`;
}
function clock(seconds) {
  if (seconds == null) return "–";
  const s = Math.round(seconds), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return h ? `${h} h ${String(m).padStart(2, "0")} min` : m ? `${m} min ${String(r).padStart(2, "0")} s` : `${r} s`;
}
function reasonOf(t) {
  if (t.state === "FAIL") return `${t.failure_kind || "failed"}: ${t.error || ""}`;
  if (t.state === "RUNNING" || t.state === "WAITING") return t.phase || "";
  return "";
}

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  return body;
}

// Plotly, run once: the page asks for the study first, so the script's evaluation overlaps the server's answer
let plotlyReady = null;
function loadPlotly() {
  if (!plotlyReady) {
    plotlyReady = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = "/static/plotly.min.js";
      script.onload = () => { state.timings.plotly_at = Math.round(performance.now()); resolve(window.Plotly); };
      script.onerror = () => reject(new Error("could not load /static/plotly.min.js"));
      document.head.appendChild(script);
    });
  }
  return plotlyReady;
}

async function start() {
  state.timings.start_at = Math.round(performance.now());
  const info = await getJSON("/api/studies");
  state.timings.studies_at = Math.round(performance.now());
  state.pollMs = info.poll_ms || 2000;
  $("source").textContent = info.source;
  const wanted = new URLSearchParams(location.search).get("study") || info.preselect;
  fillStudies(info.studies, wanted);
  $("study-select").addEventListener("change", () => selectStudy($("study-select").value));
  for (const id of ["filter", "state-filter", "tag-filter"]) {
    $(id).addEventListener("input", () => { state.page = 0; drawTable(); });
  }
  $("prev").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); drawTable(); });
  $("next").addEventListener("click", () => { state.page += 1; drawTable(); });
  if (state.study) await selectStudy(state.study); else schedule();
}

function fillStudies(studies, wanted) {
  const select = $("study-select");
  const have = new Set([...select.options].map((o) => o.value));
  for (const s of studies) {
    if (have.has(s.name)) continue;
    const option = document.createElement("option");
    option.value = s.name;
    option.textContent = `${s.name} (${s.system}, ${s.optimizer})`;
    select.appendChild(option);
  }
  $("empty").hidden = studies.length > 0;
  if (!state.study && studies.length) {
    state.study = studies.some((s) => s.name === wanted) ? wanted : studies[0].name;
    select.value = state.study;
  }
}

async function selectStudy(name) {
  state.study = name; state.cursor = null; state.trials = new Map(); state.summary = null; state.page = 0;
  state.drawnAt = null;
  clearTimeout(state.timer);
  await poll();
}

function schedule() {
  clearTimeout(state.timer);
  state.timer = setTimeout(poll, state.pollMs);
}

async function poll() {
  try {
    if (!state.study) {
      const info = await getJSON("/api/studies");
      fillStudies(info.studies, info.preselect);
      if (state.study) { schedule(); return selectStudy(state.study); }
    } else {
      const after = state.cursor ? `?after=${encodeURIComponent(state.cursor)}` : "";
      const asked = performance.now();
      const answer = getJSON(`/api/study/${encodeURIComponent(state.study)}${after}`);
      loadPlotly().catch(() => {});   // the first time: evaluated while the server reads the study
      const data = await answer;
      state.timings.fetch = Math.round(performance.now() - asked);
      if (state.timings.answer_at == null) state.timings.answer_at = Math.round(performance.now());
      if (data.study === state.study) await merge(data);
    }
    state.lastOk = Date.now();
    state.pollError = "";
  } catch (err) {
    state.pollError = String(err.message || err);
  }
  $("status").dataset.error = state.pollError || state.pageError || "";
  state.polls += 1;
  $("status").dataset.polls = String(state.polls);
  showLive();
  schedule();
}

// The poll's own error (the page is not updated) and the page's (a plot library that did not load, a script error)
// are kept apart: a poll that works again must not hide that the plots are missing.
function pageFailed(err) {
  state.pageError = String(err.message || err);
  $("status").dataset.error = state.pollError || state.pageError;
  showLive();
}

function showLive() {
  const live = $("live");
  if (state.pollError) { live.className = "live stale"; live.textContent = `not updated: ${state.pollError}`; return; }
  live.className = state.pageError ? "live stale" : "live ok";
  live.textContent = `live · every ${state.pollMs / 1000} s · ${state.trials.size} trials` +
    (state.pageError ? ` · plots: ${state.pageError}` : "");
}

async function merge(data) {
  for (const t of data.trials) state.trials.set(t.id, t);
  state.cursor = data.cursor;
  state.summary = data.summary;
  state.defaults = Object.fromEntries(data.summary.knobs.map((k) => [k.name, k.default]));
  const status = $("status");
  status.dataset.trials = String(state.trials.size);
  status.dataset.failed = String([...state.trials.values()].filter((t) => t.state === "FAIL").length);
  if (state.drawnAt !== data.read_at) {          // the study changed: every part again
    state.drawnAt = data.read_at;
    await drawAll();
  } else if (data.trials.length) {                 // only the open trials came again: their card and the table
    drawRunning([...state.trials.values()].sort((a, b) => a.id - b.id));
    drawTable();
  }
}

// milliseconds each part took to draw the last time, kept on the status element for whoever measures the page
function timed(name, work) {
  const began = performance.now();
  try { return work(); } finally {
    state.timings[name] = Math.round(performance.now() - began);
    $("status").dataset.timings = JSON.stringify(state.timings);
  }
}

// The text first (best, running, time, comparisons, table), then the history; the plots further down are drawn when
// they come near the screen (each is WebGL in Plotly: a second or more in a browser without a GPU), each in a task
// of its own so the page answers meanwhile. Kept on the status element, in milliseconds since the page was asked
// for: `ready` once the first study's text and history are drawn and painted (the history as a still picture when
// Plotly.js is not evaluated yet), `drawn` once every plot is, the history as Plotly's interactive plot included.
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
const LAZY = ["parcoords-plot", "importance-plot", "node-plot"];
const near = new Set();      // the lazy plots within reach of the screen
const pending = new Map();   // plot id -> [name, its draw for the newest answer]
let drawing = false;
const observer = "IntersectionObserver" in window ? new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (e.isIntersecting) near.add(e.target.dataset.plot); else near.delete(e.target.dataset.plot);
  }
  drawPending();
}, { rootMargin: "300px 0px" }) : null;

async function drawPending() {
  if (drawing || !state.plotly) return;
  drawing = true;
  try {
    for (;;) {
      const id = [...pending.keys()].find((key) => !observer || near.has(key));
      if (!id) break;
      const [name, draw] = pending.get(id);
      pending.delete(id);
      await nextFrame();
      timed(name, draw);
    }
  } finally { drawing = false; }
  const status = $("status");
  if (!pending.size && status.dataset.ready && !status.dataset.drawn && !$("history-plot").querySelector("canvas.sketch")) {
    await nextFrame();
    status.dataset.drawn = String(Math.round(performance.now()));
  }
}

async function drawAll() {
  const trials = [...state.trials.values()].sort((a, b) => a.id - b.id);
  const s = state.summary;
  timed("best", () => drawBest(s));
  timed("running", () => drawRunning(trials));
  timed("time", () => drawTime(s));
  timed("comparisons", () => drawComparisons(s));
  const tags = $("tag-filter"), have = new Set([...tags.options].map((o) => o.value));
  for (const tag of new Set(trials.map((t) => t.tag || ""))) {
    if (tag && !have.has(tag)) { const o = document.createElement("option"); o.textContent = tag; tags.appendChild(o); }
  }
  timed("table", drawTable);
  pending.set("parcoords-plot", ["parcoords", () => drawParcoords(trials, s)]);
  pending.set("importance-plot", ["importance", () => drawImportance(s)]);
  pending.set("node-plot", ["node", () => drawNode(trials, s)]);
  const status = $("status");
  if (!state.plotly && !status.dataset.ready) {   // the first answer, before Plotly is there: the history as a picture
    timed("history_sketch", () => drawHistorySketch(trials, s));
    await nextFrame();
    status.dataset.ready = String(Math.round(performance.now()));
  }
  try {
    state.plotly = await loadPlotly();
  } catch (err) {
    pageFailed(err);
    return;
  }
  await nextFrame();
  if (state.summary !== s) return;   // a newer answer came meanwhile: it draws
  timed("history", () => drawHistory(trials, s));
  if (!status.dataset.ready) {
    await nextFrame();
    status.dataset.ready = String(Math.round(performance.now()));
  }
  drawPending();
}

// each plot's card is watched (a plot with nothing to show is hidden, and has no size)
for (const id of LAZY) {
  const card = $(id).parentElement;
  card.dataset.plot = id;
  if (observer) observer.observe(card);
}

function drawBest(s) {
  const unit = s.objective.unit, best = s.best, def = s.default, c = s.confirmation;
  let html = `<div class="muted">${esc(s.objective.text)} · ${esc(s.optimizer)} on ${esc(s.workloads.join(", "))}</div>`;
  if (best) {
    const mark = best.confirmed ? `<span class="tag confirmed">confirmed (${esc(best.label)})</span>`
      : `<span class="tag unconfirmed">single cold runs, not confirmed</span>`;
    const interval = best.interval ? ` <span class="muted">95% interval ${fmt(best.interval[0])} … ${fmt(best.interval[1])}</span>` : "";
    const ratio = s.versus_default;
    const cls = ratio == null ? "" : ratio > 1 ? "good" : ratio < 1 ? "bad" : "";
    html += `<div><span class="big" id="best-value">${fmt(best.value, unit)}</span> ${mark}${interval}</div>`;
    html += `<div>against the default: <b class="${cls}">${pct(ratio)}</b>` +
      ` (default ${fmt(def ? def.value : null, unit)}${def ? `, ${def.trials} trial(s)` : ", not measured"})</div>`;
  } else {
    html += `<div class="big">–</div><div class="muted">no trial completed within the constraints yet</div>`;
  }
  const changed = Object.entries(s.changed || {});
  if (changed.length) {
    html += `<ul class="changed">${changed.slice(0, 12).map(([k, v]) => `<li>${esc(k)}: ${esc(v[0])} → ${esc(v[1])}</li>`).join("")}` +
      `${changed.length > 12 ? `<li>… ${changed.length - 12} more</li>` : ""}</ul>`;
  }
  const confirmText = { done: `confirmation: done, ${c.rounds} interleaved rounds of the top ${c.top} beside the default`,
    asked: `confirmation: asked for (top ${c.top} × ${c.rounds} rounds), not run: tune runs it at the end of a ` +
      "budget of at least twice its trials; best --confirm runs it any time",
    none: "confirmation: none (best --confirm runs one)" }[c.state];
  html += `<div class="muted">${esc(confirmText)}</div>`;
  html += `<div class="muted">${s.trials.tune} tuning trials of ${s.budget} · ${s.trials.failed} failed · ` +
    `${s.configurations} configurations · ${s.trials.all} trials in all</div>`;
  $("best").innerHTML = html;
}

function drawRunning(trials) {
  const open = trials.filter((t) => t.state === "RUNNING" || t.state === "WAITING");
  const now = Date.now() / 1000;
  if (!open.length) { $("running").innerHTML = `<span class="muted">no trial running</span>`; return; }
  $("running").innerHTML = open.slice(-8).map((t) =>
    `<div>trial ${t.number} <span class="tag">${esc(t.tag)}</span> ${esc(t.state)}${t.workload ? ` on ${esc(t.workload)}` : ""}` +
    ` · ${clock(now - t.started_at)}<div class="phase">${esc(t.phase || "(no phase stored yet)")}</div></div>`).join("");
}

function drawTime(s) {
  const split = s.time;
  if (!split.trials) { $("time").innerHTML = `<span class="muted">no trial stored its timings (a recorded surrogate has none)</span>`; return; }
  const rows = Object.entries(split.seconds).filter(([, v]) => v > 0)
    .map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${clock(v)}</td><td class="num">${((split.shares[k] || 0) * 100).toFixed(0)}%</td></tr>`);
  $("time").innerHTML = `<div><span class="big">${clock(split.machine_s)}</span> <span class="muted">over ${split.trials} trials` +
    `${split.wall_s ? `, wall ${clock(split.wall_s)}` : ""}, ${split.builds} dataset builds</span></div>` +
    (split.result_hours ? `<div class="muted">the confirmed best came after ${clock(split.result_hours * 3600)} ` +
      `of it (the search and its confirmation)</div>` : "") +
    `<table>${rows.join("")}</table>`;
}

// A run of the search itself: a tuning trial, not a machine's reference run (the default or best re-run on a new machine)
function isSearchRun(t) {
  return t.tag === "tune" && t.kind !== "reference";
}

// What the history shows: every tuning trial's value, the best so far, the failed ones (at the lowest value), the default
function historySeries(trials, s) {
  const tuned = trials.filter(isSearchRun).sort((a, b) => a.number - b.number);
  const done = tuned.filter((t) => t.value != null);
  const failed = tuned.filter((t) => t.state === "FAIL");
  const maximize = s.objective.maximize;
  let best = null;
  const bestX = [], bestY = [];
  for (const t of done) {
    if (best == null || (maximize ? t.value > best : t.value < best)) best = t.value;
    bestX.push(t.number); bestY.push(best);
  }
  const values = done.map((t) => t.value);
  let floor = 0;
  for (let i = 0; i < values.length; i++) if (i === 0 || values[i] < floor) floor = values[i];
  return { tuned, done, failed, bestX, bestY, values, floor };
}

// The history as a still picture on a canvas while Plotly.js is still being evaluated: a few milliseconds for 10,000
// trials, where Plotly's first WebGL drawing takes about 0.6 s without a GPU. Plotly's interactive plot replaces it.
function drawHistorySketch(trials, s) {
  const { tuned, done, failed, bestX, bestY, values, floor } = historySeries(trials, s);
  const box = $("history-plot");
  box.replaceChildren();
  if (!tuned.length) return;
  const width = box.clientWidth || 800, height = box.clientHeight || 300, ratio = window.devicePixelRatio || 1;
  const canvas = document.createElement("canvas");
  canvas.className = "sketch";
  canvas.width = width * ratio; canvas.height = height * ratio;
  canvas.style.width = `${width}px`; canvas.style.height = `${height}px`;
  box.appendChild(canvas);
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  const m = { l: 70, r: 10, t: 10, b: 40 };
  const xs = tuned.map((t) => t.number);
  const ys = values.concat(s.default && s.default.value != null ? [s.default.value] : []);
  let x0 = xs[0], x1 = xs[xs.length - 1], y0 = floor, y1 = floor;
  for (const y of ys) { if (y < y0) y0 = y; if (y > y1) y1 = y; }
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 1; y1 += 1; }
  const pad = (y1 - y0) * 0.05; y0 -= pad; y1 += pad;
  const X = (v) => m.l + (v - x0) / (x1 - x0) * (width - m.l - m.r);
  const Y = (v) => height - m.b - (v - y0) / (y1 - y0) * (height - m.t - m.b);
  g.font = "12px system-ui, sans-serif"; g.fillStyle = "#444"; g.strokeStyle = "#e5e5e5"; g.lineWidth = 1;
  g.textAlign = "right"; g.textBaseline = "middle";
  for (let i = 0; i <= 4; i++) {
    const v = y0 + (y1 - y0) * i / 4;
    g.beginPath(); g.moveTo(m.l, Y(v)); g.lineTo(width - m.r, Y(v)); g.stroke();
    g.fillText(fmt(v), m.l - 6, Y(v));
  }
  g.textAlign = "center"; g.textBaseline = "top";
  for (let i = 0; i <= 4; i++) {
    g.textAlign = i === 0 ? "left" : i === 4 ? "right" : "center";   // the ends inside the canvas
    g.fillText(String(Math.round(x0 + (x1 - x0) * i / 4)), X(x0 + (x1 - x0) * i / 4), height - m.b + 6);
  }
  g.textAlign = "center";
  g.fillText("trial (drawing the interactive plot…)", m.l + (width - m.l - m.r) / 2, height - 16);
  g.fillStyle = "#4c78a8";
  for (let i = 0; i < done.length; i++) g.fillRect(X(done[i].number) - 1.5, Y(values[i]) - 1.5, 3, 3);
  g.strokeStyle = "#1a7f37"; g.lineWidth = 2; g.beginPath();
  for (let i = 0; i < bestX.length; i++) {
    if (i === 0) g.moveTo(X(bestX[i]), Y(bestY[i])); else { g.lineTo(X(bestX[i]), Y(bestY[i - 1])); g.lineTo(X(bestX[i]), Y(bestY[i])); }
  }
  g.stroke();
  if (s.default && s.default.value != null) {
    g.strokeStyle = "#888"; g.lineWidth = 1; g.setLineDash([2, 3]); g.beginPath();
    g.moveTo(X(x0), Y(s.default.value)); g.lineTo(X(x1), Y(s.default.value)); g.stroke(); g.setLineDash([]);
  }
  g.strokeStyle = "#cf222e"; g.lineWidth = 1.5;
  for (const t of failed) {
    const x = X(t.number), y = Y(floor);
    g.beginPath(); g.moveTo(x - 4, y - 4); g.lineTo(x + 4, y + 4); g.moveTo(x + 4, y - 4); g.lineTo(x - 4, y + 4); g.stroke();
  }
}

function drawHistory(trials, s) {
  const { tuned, done, failed, bestX, bestY, values, floor } = historySeries(trials, s);
  const sketch = $("history-plot").querySelector("canvas.sketch");
  if (sketch) sketch.remove();
  const traces = [
    { x: done.map((t) => t.number), y: values, mode: "markers", type: done.length > GL_POINTS ? "scattergl" : "scatter", name: "trial",
      marker: { size: 6, color: "#4c78a8" }, text: done.map((t) => `trial ${t.number} ${t.workload || ""}`),
      hovertemplate: "%{text}<br>%{y}<extra></extra>" },
    { x: bestX, y: bestY, mode: "lines", type: "scatter", name: "best so far", line: { shape: "hv", color: "#1a7f37" } },
    { x: failed.map((t) => t.number), y: failed.map(() => floor), mode: "markers", type: "scatter", name: "failed",
      marker: { symbol: "x", size: 9, color: "#cf222e" },
      text: failed.map((t) => `trial ${t.number} failed (${esc(t.failure_kind)}): ${esc((t.error || "").slice(0, 120))}`),
      hovertemplate: "%{text}<extra></extra>" },
  ];
  if (s.default && s.default.value != null) {
    traces.push({ x: [tuned.length ? tuned[0].number : 0, tuned.length ? tuned[tuned.length - 1].number : 1],
      y: [s.default.value, s.default.value], mode: "lines", type: "scatter", name: "default",
      line: { dash: "dot", color: "#888" } });
  }
  Plotly.react("history-plot", traces, {
    margin: { t: 10, r: 10, b: 40, l: 70 }, xaxis: { title: { text: "trial" }, zeroline: false },
    yaxis: { title: { text: `${s.objective.metric} (${s.objective.unit})` } }, legend: { orientation: "h", y: 1.12 },
  }, PLOT_CONFIG);
}

// at most PARCOORDS_LINES trials: the best tenth of them and an even spread of the rest, in trial order
function parcoordsSample(done, maximize) {
  if (done.length <= PARCOORDS_LINES) return done;
  const ranked = [...done].sort((a, b) => (maximize ? b.value - a.value : a.value - b.value));
  const top = ranked.slice(0, PARCOORDS_LINES / 10), kept = new Set(top);
  const rest = done.filter((t) => !kept.has(t)), want = PARCOORDS_LINES - top.length;
  for (let i = 0; i < want; i += 1) kept.add(rest[Math.floor((i * rest.length) / want)]);
  return done.filter((t) => kept.has(t));
}

function drawParcoords(trials, s) {
  const measured = trials.filter((t) => isSearchRun(t) && t.value != null);
  const done = parcoordsSample(measured, s.objective.maximize);
  // the knobs that matter most (importance below) first; a few axes stay readable
  const rank = new Map(s.importance.knobs.map((k, i) => [k.knob, i]));
  const knobs = s.knobs.filter((k) => new Set(done.map((t) => String(t.config[k.name]))).size > 1)
    .sort((a, b) => (rank.has(a.name) ? rank.get(a.name) : 1e9) - (rank.has(b.name) ? rank.get(b.name) : 1e9))
    .slice(0, PARCOORDS_KNOBS);
  $("parcoords-plot").hidden = done.length < 2 || !knobs.length;
  if (done.length < 2 || !knobs.length) {
    Plotly.purge("parcoords-plot");
    $("parcoords-note").textContent = "shown once two configurations have been measured";
    return;
  }
  const drawn = done.length < measured.length ? `${done.length.toLocaleString("en-US")} of ` +
    `${measured.length.toLocaleString("en-US")} measured trials (the best ${PARCOORDS_LINES / 10} and an even spread ` +
    "of the rest)" : `${done.length} measured trials`;
  $("parcoords-note").textContent = `${drawn}; the ${knobs.length} knobs that explain most ` +
    "of the objective alone (knob importance); drag along an axis to select a range";
  const dims = knobs.map((k) => {
    if (k.choices || k.type === "bool") {
      const labels = k.choices || ["false", "true"];
      return { label: k.name, tickvals: labels.map((_, i) => i), ticktext: labels, range: [0, Math.max(1, labels.length - 1)],
        values: done.map((t) => Math.max(0, labels.indexOf(String(t.config[k.name])))) };
    }
    return { label: k.name, values: done.map((t) => Number(t.config[k.name])) };
  });
  dims.push({ label: `${s.objective.metric} (${s.objective.unit})`, values: done.map((t) => t.value) });
  Plotly.react("parcoords-plot", [{
    type: "parcoords", dimensions: dims,
    line: { color: done.map((t) => t.value), colorscale: "Viridis", reversescale: !s.objective.maximize, showscale: true },
  }], { margin: { t: 50, r: 60, b: 20, l: 60 } }, PLOT_CONFIG);
}

function drawImportance(s) {
  const imp = s.importance;
  $("importance-plot").hidden = !imp.knobs.length;
  if (!imp.knobs.length) {
    Plotly.purge("importance-plot");
    $("importance-note").textContent = `not yet: ${imp.note || "no knob varied"}`;
    return;
  }
  const top = imp.knobs.slice(0, 15).reverse();
  Plotly.react("importance-plot", [{ type: "bar", orientation: "h", x: top.map((k) => k.score), y: top.map((k) => k.knob),
    marker: { color: "#4c78a8" } }], { margin: { t: 10, r: 10, b: 40, l: 220 }, xaxis: { title: { text: "share of the variance explained alone" }, range: [0, 1] } },
  PLOT_CONFIG);
  $("importance-note").textContent = `over ${imp.configurations} configurations; each knob alone (correlation ratio ` +
    "η²): knobs that act together are not seen, and a few configurations make every score noisy";
}

function drawNode(trials, s) {
  const measured = trials.filter((t) => t.cpu_cores != null || t.disk_busy != null || t.limit);
  const counts = Object.entries(s.bottlenecks || {});
  $("node-plot").hidden = !measured.length;
  if (!measured.length) {
    Plotly.purge("node-plot");
    $("node-note").textContent = "no trial of this study stored the node's CPU or disk (a recorded surrogate " +
      "gives its objective only, and studies stored before these figures were read have none)";
    return;
  }
  const x = measured.map((t) => t.number);
  const type = measured.length > GL_POINTS ? "scattergl" : "scatter";
  Plotly.react("node-plot", [
    { x, y: measured.map((t) => t.cpu_cores), name: "CPU cores busy", mode: "markers", type,
      text: measured.map((t) => t.bottleneck || t.limit || ""), hovertemplate: "trial %{x}: %{y:.2f} cores<br>%{text}<extra></extra>" },
    { x, y: measured.map((t) => t.disk_busy), name: "disk busy (share)", mode: "markers", type, yaxis: "y2",
      marker: { symbol: "diamond" } },
  ], { margin: { t: 10, r: 60, b: 40, l: 60 }, xaxis: { title: { text: "trial" } },
    yaxis: { title: { text: "cores" } }, yaxis2: { title: { text: "disk busy" }, overlaying: "y", side: "right", range: [0, 1.05] },
    legend: { orientation: "h", y: 1.15 } }, PLOT_CONFIG);
  $("node-note").textContent = counts.length ? `limited by: ${counts.map(([k, n]) => `${k} ${n}`).join(", ")}` : "";
}

function drawComparisons(s) {
  const unit = s.objective.unit, c = s.confirmation;
  let html = "";
  if (c.state === "done") {
    html += `<h3>Confirmation (${c.rounds} interleaved cold rounds after ${c.after_tune_trials} tuning trials): best is ${esc(c.best)}</h3>`;
    html += `<table><tr><th>candidate</th><th>mean</th><th>95% interval</th><th>rounds within constraints</th><th>single run</th></tr>` +
      Object.entries(c.candidates).map(([k, v]) => `<tr><td>${esc(k)}</td><td class="num">${fmt(v.mean, unit)}</td>` +
        `<td class="num">${v.interval ? `${fmt(v.interval[0])} … ${fmt(v.interval[1])}` : "–"}</td>` +
        `<td class="num">${v.feasible_rounds}</td><td class="num">${fmt(v.single_run, unit)}</td></tr>`).join("") + "</table>";
    if (c.vs_default) {
      const v = c.vs_default;
      html += `<p>${esc(v.candidate)} against the default: <b>${esc(v.verdict)}</b>, mean speedup ${pct(v.mean_speedup)}` +
        ` (95% interval ${pct(v.ci_low)} … ${pct(v.ci_high)}, p ${v.p_value == null ? "–" : v.p_value.toPrecision(2)})</p>`;
    }
  }
  if (s.comparisons.length) {
    html += `<h3>Comparisons (nosqltune compare)</h3><table id="comparison-table"><tr><th>run</th><th>workload</th><th>candidate</th>` +
      `<th>verdict</th><th>mean speedup</th><th>95% interval</th><th>pairs</th><th>p</th></tr>` +
      s.comparisons.map((r) => `<tr><td>${esc(r.key)}</td><td>${esc(r.workload)}</td><td>${esc(r.candidate)}</td>` +
        `<td class="${r.verdict === "better" ? "good" : r.verdict === "worse" ? "bad" : ""}">${esc(r.verdict)}</td>` +
        `<td class="num">${pct(r.mean_speedup)}</td><td class="num">${pct(r.ci_low)} … ${pct(r.ci_high)}</td>` +
        `<td class="num">${r.pairs}</td><td class="num">${r.p_value == null ? "–" : r.p_value.toPrecision(2)}</td></tr>`).join("") + "</table>";
  }
  $("comparisons").innerHTML = html || `<span class="muted">none yet: <code>nosqltune compare</code> and ` +
    "the confirmation at the end of <code>tune</code> store theirs in the study</span>";
}

function cell(t, key) {
  if (key === "reason") return reasonOf(t);
  if (key === "knobs") {   // the knobs away from their default, the way `best` shows a diff
    const defaults = state.defaults || {};
    return Object.entries(t.config || {}).filter(([k, v]) => String(v) !== String(defaults[k]))
      .map(([k, v]) => `${k}=${v}`).join(" ") || (t.tag === "tune" ? "(default)" : "");
  }
  return t[key];
}

function drawTable() {
  const unit = state.summary ? state.summary.objective.unit : "";
  const head = $("trials").tHead;
  if (!head.rows.length) {
    head.innerHTML = `<tr>${COLUMNS.map(([k, label]) => `<th data-key="${k}">${esc(label)}</th>`).join("")}</tr>`;
    head.addEventListener("click", (event) => {
      const key = event.target.dataset.key;
      if (!key) return;
      state.sort = { key, dir: state.sort.key === key ? -state.sort.dir : 1 };
      drawTable();
    });
  }
  for (const th of head.rows[0].cells) {
    if (th.dataset.key === "value" && unit) th.textContent = `value (${unit})`;
    th.className = th.dataset.key === state.sort.key ? (state.sort.dir > 0 ? "sorted-asc" : "sorted-desc") : "";
  }
  const text = $("filter").value.trim().toLowerCase(), wantState = $("state-filter").value, wantTag = $("tag-filter").value;
  let rows = [...state.trials.values()].filter((t) => (!wantState || t.state === wantState) && (!wantTag || t.tag === wantTag));
  if (text) {
    rows = rows.filter((t) => COLUMNS.some(([k]) => String(cell(t, k) == null ? "" : cell(t, k)).toLowerCase().includes(text)));
  }
  const { key, dir } = state.sort;
  rows.sort((a, b) => {
    const x = cell(a, key), y = cell(b, key);
    if (x == null && y == null) return a.id - b.id;
    if (x == null) return 1;
    if (y == null) return -1;
    return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir || a.id - b.id;
  });
  const pages = Math.max(1, Math.ceil(rows.length / state.pageSize));
  state.page = Math.min(state.page, pages - 1);
  const shown = rows.slice(state.page * state.pageSize, (state.page + 1) * state.pageSize);
  $("table-count").textContent = `${rows.length} of ${state.trials.size} trials`;
  $("page").textContent = `page ${state.page + 1} / ${pages}`;
  $("trials").tBodies[0].innerHTML = shown.map((t) => `<tr class="${esc(t.state)}" data-id="${t.id}">` + COLUMNS.map(([k, , cls]) => {
    let v = cell(t, k);
    if (k === "value") {   // a run on another machine: valued as on the study's first, measured in brackets
      v = fmt(v);
      if (t.measured != null) {
        return `<td class="${cls}" title="measured on its own machine; valued as on the study's first">${esc(v)} (${esc(fmt(t.measured))})</td>`;
      }
    }
    else if (k === "seconds" || k === "cpu_cores") v = v == null ? "" : v.toFixed(k === "seconds" ? 1 : 2);
    else if (k === "disk_busy") v = v == null ? "" : `${(v * 100).toFixed(0)}%`;
    if (k === "knobs" && v && v.length > 110) {
      return `<td class="knobs" title="${esc(v)}">${esc(v.slice(0, 110))}…</td>`;
    }
    return `<td class="${cls || ""}${k === "reason" ? " reason" : ""}">${esc(v)}</td>`;
  }).join("") + "</tr>").join("");
}

window.addEventListener("error", (event) => pageFailed(event.message));
start().catch((err) => { state.pollError = String(err.message || err); $("status").dataset.error = state.pollError; showLive(); schedule(); });
