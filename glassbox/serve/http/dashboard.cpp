// The page of GET /dashboard (see dashboard.h). Tested by serve_dashboard_browser (headless
// Chromium: no console message, every panel drawn, the values shown equal /metrics).
#include "glassbox/serve/http/dashboard.h"

namespace glassbox::serve {

namespace {

constexpr const char* kPage = R"PAGE(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>glassbox serve</title>
<style>
  :root { --fg: #1d2330; --muted: #6b7280; --line: #e5e7eb; --bg: #f8fafc; --card: #fff; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
  header { display: flex; gap: 16px; align-items: baseline; padding: 14px 20px; background: #111827; color: #f9fafb; }
  header h1 { font-size: 18px; margin: 0; }
  header span { color: #cbd5e1; }
  main { padding: 16px 20px; }
  section.model { margin-bottom: 28px; }
  section.model h2 { font-size: 16px; margin: 4px 0 10px; }
  .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(380px, 1fr)); gap: 12px; }
  .panel { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
  .panel h3 { font-size: 13px; margin: 0 0 6px; color: var(--muted); font-weight: 600; }
  .panel svg { display: block; width: 100%; height: 150px; }
  .values { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-top: 6px; font-size: 12px; color: var(--muted); }
  .values b { color: var(--fg); font-weight: 600; font-variant-numeric: tabular-nums; }
  table.alarms { width: 100%; border-collapse: collapse; font-size: 12px; margin-top: 6px; }
  table.alarms td { padding: 2px 6px; border-top: 1px solid var(--line); }
  .on { color: #b91c1c; font-weight: 700; }
  .off { color: #15803d; }
  .empty { color: var(--muted); font-style: italic; }
</style>
</head>
<body>
<header><h1>glassbox serve</h1><span id="status">connecting...</span></header>
<main id="models"></main>
<script>
"use strict";
const REFRESH_MS = 2000, KEEP = 150;
const COLORS = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d", "#9333ea", "#ea580c"];
const history = new Map();   // series key -> [{t, v}]
let previous = null;         // the last scrape: {t, series: Map}

// Prometheus text -> Map(series key -> {name, labels, value, raw}); the key is the line up to its value.
function parse(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const cut = line.lastIndexOf(" ");
    const key = line.slice(0, cut), raw = line.slice(cut + 1);
    const brace = key.indexOf("{");
    const name = brace < 0 ? key : key.slice(0, brace);
    const labels = {};
    if (brace >= 0) {
      const re = /(\w+)="((?:[^"\\]|\\.)*)"/g;
      let m;
      while ((m = re.exec(key.slice(brace))) !== null) labels[m[1]] = m[2].replace(/\\(.)/g, (_, c) => c === "n" ? "\n" : c);
    }
    out.set(key, {key, name, labels, raw, value: raw === "+Inf" ? Infinity : raw === "-Inf" ? -Infinity : Number(raw)});
  }
  return out;
}

function pick(series, name, want) {
  const found = [];
  for (const s of series.values()) {
    if (s.name !== name) continue;
    if (Object.entries(want).every(([k, v]) => s.labels[k] === v)) found.push(s);
  }
  return found;
}

function remember(key, t, v) {
  if (!Number.isFinite(v)) return;
  const h = history.get(key) || [];
  h.push({t, v});
  while (h.length > KEEP) h.shift();
  history.set(key, h);
}

function svgEl(tag, attrs, parent) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}

function frame(svg, lo, hi) {
  svg.innerHTML = "";
  svg.setAttribute("viewBox", "0 0 400 150");
  svgEl("rect", {x: 0, y: 0, width: 400, height: 150, fill: "#ffffff"}, svg);
  for (let i = 0; i <= 4; i++) {
    const y = 10 + i * 30;
    svgEl("line", {x1: 40, x2: 395, y1: y, y2: y, stroke: "#e5e7eb"}, svg);
    const label = svgEl("text", {x: 36, y: y + 4, "text-anchor": "end", "font-size": 10, fill: "#6b7280"}, svg);
    label.textContent = axis(hi - (hi - lo) * i / 4);
  }
  svgEl("line", {x1: 40, x2: 40, y1: 10, y2: 130, stroke: "#9ca3af"}, svg);
  svgEl("line", {x1: 40, x2: 395, y1: 130, y2: 130, stroke: "#9ca3af"}, svg);
}

function lineChart(svg, lines) {
  const all = lines.flatMap(l => l.points.map(p => p.v));
  let hi = Math.max(0, ...all), lo = Math.min(0, ...all);
  if (hi <= lo) hi = lo + 1;
  frame(svg, lo, hi);
  const t1 = Math.max(...lines.flatMap(l => l.points.map(p => p.t)), 1);
  const t0 = Math.min(...lines.flatMap(l => l.points.map(p => p.t)), t1 - 1);
  const x = t => 40 + 355 * (t - t0) / Math.max(1e-9, t1 - t0);
  const y = v => 130 - 120 * (v - lo) / (hi - lo);
  lines.forEach((l, i) => {
    const color = l.color || COLORS[i % COLORS.length];
    const pts = l.points.length === 1 ? [{t: t0, v: l.points[0].v}, {t: t1, v: l.points[0].v}] : l.points;
    if (!pts.length) return;
    const d = pts.map((p, j) => (j ? "L" : "M") + x(p.t).toFixed(1) + " " + y(p.v).toFixed(1)).join(" ");
    svgEl("path", {d: d + ` L ${x(pts[pts.length - 1].t).toFixed(1)} 130 L ${x(pts[0].t).toFixed(1)} 130 Z`,
                   fill: color, "fill-opacity": 0.12, class: "series"}, svg);
    svgEl("path", {d, fill: "none", stroke: color, "stroke-width": 2.5, class: "series"}, svg);
    const legend = svgEl("text", {x: 48 + 110 * i, y: 146, "font-size": 10, fill: color}, svg);
    legend.textContent = l.name;
  });
}

function barChart(svg, bars, threshold, top) {
  const peak = Math.max(0, threshold || 0, ...bars.map(b => b.v));
  const hi = top || (peak > 0 ? peak * 1.1 : 1);
  frame(svg, 0, hi);
  const w = 355 / Math.max(1, bars.length);
  bars.forEach((b, i) => {
    const h = 120 * Math.max(0, b.v) / hi;
    svgEl("rect", {x: 40 + i * w + w * 0.15, y: 130 - Math.max(h, 1.5), width: w * 0.7, height: Math.max(h, 1.5),
                   fill: b.color || COLORS[i % COLORS.length], class: "series"}, svg);
    const label = svgEl("text", {x: 40 + i * w + w / 2, y: 142, "text-anchor": "middle", "font-size": 9, fill: "#374151"}, svg);
    const room = Math.max(4, Math.floor(w / 6));
    label.textContent = b.label.length > room ? b.label.slice(0, room - 1) + "." : b.label;
  });
  if (threshold) {
    const ty = 130 - 120 * threshold / hi;
    svgEl("line", {x1: 40, x2: 395, y1: ty, y2: ty, stroke: "#dc2626", "stroke-dasharray": "4 3"}, svg);
  }
}

function axis(v) {
  const a = Math.abs(v);
  return a !== 0 && (a < 0.01 || a >= 1e5) ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

function format(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 0.001 || a >= 1e6) ? v.toExponential(3) : String(Number(v.toPrecision(6)));
}

// A shown number tied to its series of /metrics.
function value(container, label, s) {
  const span = document.createElement("span");
  span.textContent = label + " ";
  const b = document.createElement("b");
  b.textContent = s ? format(s.value) : "-";
  if (s) { b.dataset.series = s.key; b.dataset.value = s.raw; }
  span.appendChild(b);
  container.appendChild(span);
}

function panel(grid, id, title) {
  let p = grid.querySelector(`[data-panel="${id}"]`);
  if (!p) {
    p = document.createElement("div");
    p.className = "panel";
    p.dataset.panel = id;
    p.innerHTML = `<h3></h3><svg role="img"></svg><div class="values"></div>`;
    p.querySelector("h3").textContent = title;
    grid.appendChild(p);
  }
  p.querySelector(".values").innerHTML = "";
  return {svg: p.querySelector("svg"), values: p.querySelector(".values"), el: p};
}

// Increase of a counter since the previous scrape, per second.
function rate(s, now) {
  if (!s || !previous) return NaN;
  const before = previous.series.get(s.key);
  if (!before) return NaN;
  const dt = (now - previous.t) / 1000;
  return dt > 0 ? Math.max(0, s.value - before.value) / dt : NaN;
}

// histogram_quantile over the buckets' increase since the previous scrape (all of them when nothing new).
function quantile(series, name, sel, q) {
  const buckets = pick(series, name + "_bucket", sel).map(s => {
    const before = previous && previous.series.get(s.key);
    return {le: s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), c: s.value, d: before ? s.value - before.value : s.value};
  }).sort((a, b) => a.le - b.le);
  if (!buckets.length) return NaN;
  const useDelta = buckets[buckets.length - 1].d > 0;
  const count = b => useDelta ? b.d : b.c;
  const total = count(buckets[buckets.length - 1]);
  if (total <= 0) return NaN;
  const rank = q * total;
  let prevLe = 0, prevC = 0;
  for (const b of buckets) {
    if (count(b) >= rank) {
      if (b.le === Infinity) return prevLe;
      return prevLe + (b.le - prevLe) * (rank - prevC) / Math.max(1e-12, count(b) - prevC);
    }
    prevLe = b.le; prevC = count(b);
  }
  return prevLe;
}

async function refresh() {
  const now = Date.now();
  let text;
  try {
    const r = await fetch("dashboard/metrics".replace(/^/, location.pathname.endsWith("/") ? "../" : ""), {cache: "no-store"});
    text = await r.text();
  } catch (e) {
    document.getElementById("status").textContent = "server unreachable; retrying";
    return;
  }
  const series = parse(text);
  const names = new Set([...series.values()].map(s => s.name));
  const triton = names.has("nv_inference_request_success");
  const N = triton
    ? {success: "nv_inference_request_success", failure: "nv_inference_request_failure", count: "nv_inference_count", exec: "nv_inference_exec_count", pending: "nv_inference_pending_request_count"}
    : {success: "nv_inference_request_success_total", failure: "nv_inference_request_failure_total", count: "nv_inference_count_total", exec: "nv_inference_exec_total", pending: "nv_inference_pending_requests"};
  const main = document.getElementById("models");
  const versions = pick(series, N.success, {}).map(s => [s.labels.model, s.labels.version])
      .sort((a, b) => (a[0] + "/" + a[1]).localeCompare(b[0] + "/" + b[1]));
  if (!versions.length && !main.querySelector(".empty")) main.innerHTML = `<p class="empty">no model is loaded</p>`;
  for (const [model, version] of versions) {
    const id = model + "/" + version;
    let sec = [...main.querySelectorAll("section.model")].find(s => s.dataset.key === id);
    if (!sec) {
      main.querySelector(".empty")?.remove();
      sec = document.createElement("section");
      sec.className = "model";
      sec.dataset.key = id;
      sec.dataset.model = model;
      sec.dataset.version = version;
      sec.innerHTML = `<h2></h2><div class="grid"></div>`;
      sec.querySelector("h2").textContent = `${model} version ${version}`;
      main.appendChild(sec);
    }
    const grid = sec.querySelector(".grid");
    const sel = {model, version};
    const one = name => pick(series, name, sel)[0];
    const track = (key, v) => { remember(id + "|" + key, now, v); return history.get(id + "|" + key) || []; };

    const success = one(N.success);
    let p = panel(grid, "qps", "Requests per second");
    lineChart(p.svg, [{name: "req/s", points: track("qps", rate(success, now))}]);
    value(p.values, "requests", success);

    p = panel(grid, "latency", "Latency P50 / P99 (s)");
    lineChart(p.svg, [{name: "P50", points: track("p50", quantile(series, "nv_inference_request_seconds", sel, 0.5))},
                      {name: "P99", points: track("p99", quantile(series, "nv_inference_request_seconds", sel, 0.99)), color: COLORS[1]}]);
    value(p.values, "requests observed", one("nv_inference_request_seconds_count"));
    value(p.values, "seconds in all", one("nv_inference_request_seconds_sum"));

    p = panel(grid, "failures", "Failed requests by reason");
    const failures = pick(series, N.failure, sel);
    barChart(p.svg, failures.map(s => ({label: s.labels.reason, v: s.value, color: "#dc2626"})));
    failures.forEach(s => value(p.values, s.labels.reason, s));

    p = panel(grid, "queue", "Pending requests");
    const pending = one(N.pending);
    lineChart(p.svg, [{name: "pending", points: track("pending", pending ? pending.value : NaN)}]);
    value(p.values, "now", pending);

    p = panel(grid, "batch", "Batch size (elements per execution)");
    const count = one(N.count), exec = one(N.exec);
    const dc = rate(count, now), de = rate(exec, now);
    lineChart(p.svg, [{name: "batch", points: track("batch", de > 0 ? dc / de : (exec && exec.value > 0 ? count.value / exec.value : NaN))}]);
    value(p.values, "elements", count);
    value(p.values, "executions", exec);

    const monitored = pick(series, "glassbox_monitor_alarm", sel).length > 0;
    if (!monitored) continue;
    p = panel(grid, "out_of_range", "Inputs outside the training range (share)");
    const oor = one("glassbox_monitor_input_out_of_range_total"), nf = one("glassbox_monitor_input_non_finite_total"),
          vals = one("glassbox_monitor_input_values_total");
    const share = vals && vals.value > 0 ? (oor.value + nf.value) / vals.value : 0;
    lineChart(p.svg, [{name: "share (all time)", points: track("oor", share), color: COLORS[3]}]);
    value(p.values, "out of range", oor);
    value(p.values, "non-finite", nf);
    value(p.values, "values", vals);

    p = panel(grid, "drift", "Drift per feature (Wasserstein / reference std, latest window)");
    const drift = pick(series, "glassbox_monitor_feature_wasserstein_normed", sel);
    barChart(p.svg, drift.map(s => ({label: s.labels.feature, v: s.value})), 0.1);
    drift.forEach(s => value(p.values, s.labels.feature, s));
    if (!drift.length) p.values.innerHTML = `<span class="empty">no window closed yet</span>`;

    p = panel(grid, "confidence", "Confidence (latest window)");
    const cm = one("glassbox_monitor_confidence_mean"), cs = one("glassbox_monitor_confidence_std"),
          rm = one("glassbox_monitor_reference_confidence_mean");
    lineChart(p.svg, [{name: "mean", points: track("cmean", cm ? cm.value : NaN)},
                      {name: "std", points: track("cstd", cs ? cs.value : NaN), color: COLORS[4]},
                      {name: "validation mean", points: track("rmean", rm ? rm.value : NaN), color: COLORS[2]}]);
    value(p.values, "mean", cm);
    value(p.values, "std", cs);
    value(p.values, "validation mean", rm);

    p = panel(grid, "classes", "Predicted class share (latest window)");
    const classes = pick(series, "glassbox_monitor_class_share", sel);
    barChart(p.svg, classes.map(s => ({label: s.labels.class, v: s.value})));
    classes.forEach(s => value(p.values, s.labels.class, s));
    if (!classes.length) p.values.innerHTML = `<span class="empty">no window closed yet</span>`;

    p = panel(grid, "alarms", "Alarms");
    const alarms = pick(series, "glassbox_monitor_alarm", sel);
    barChart(p.svg, alarms.map(s => ({label: s.labels.kind.replace("confidence_", "conf. "), v: s.value > 0 ? 1 : 0.04,
                                      color: s.value > 0 ? "#dc2626" : "#16a34a"})), 0, 1);
    alarms.forEach(s => value(p.values, s.labels.kind, s));
    try {
      const r = await fetch(`v2/models/${encodeURIComponent(model)}/versions/${version}/monitor`.replace(/^/, location.pathname.endsWith("/") ? "../" : ""), {cache: "no-store"});
      const body = await r.json();
      const table = document.createElement("table");
      table.className = "alarms";
      for (const a of body.alarms || []) {
        const tr = table.insertRow();
        tr.insertCell().innerHTML = `<span class="on"></span>`;
        tr.cells[0].firstChild.textContent = a.kind;
        tr.insertCell().textContent = "since " + new Date(a.since * 1000).toLocaleTimeString();
        tr.insertCell().textContent = `value ${format(a.value)} (threshold ${format(a.threshold)})`;
      }
      if (!(body.alarms || []).length) {
        const tr = table.insertRow();
        tr.insertCell().innerHTML = `<span class="off">no alarm</span>`;
      }
      p.el.querySelector("table")?.remove();
      p.el.appendChild(table);
    } catch (e) { /* the next refresh tries again */ }
  }
  previous = {t: now, series};
  document.getElementById("status").textContent = "updated " + new Date(now).toLocaleTimeString() +
      " - every " + REFRESH_MS / 1000 + " s";
  document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
}

async function loop() {
  await refresh();
  setTimeout(loop, REFRESH_MS);
}
loop();
</script>
</body>
</html>
)PAGE";

}  // namespace

const std::string& dashboard_html() {
  static const std::string page = kPage;
  return page;
}

}  // namespace glassbox::serve
