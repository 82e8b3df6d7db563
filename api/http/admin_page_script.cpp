// The console's script: snapshots from /admin/stream (WebSocket; polling
// /admin/snapshot when it cannot connect) into charts drawn on canvases with
// labelled axes and units, the request table with its actions, the config
// panel built from /admin/config (every live knob with its range, applied
// one at a time with the server's answer shown beside it) and the audit log.
// The admin token, when the server has one, is kept in the tab's sessionStorage.

#include "api/http/admin.hpp"

namespace troupe::api {

std::string_view admin_page_script() {
  return R"JS("use strict";
const $ = (id) => document.getElementById(id);
const tokenInput = $("token");
tokenInput.value = sessionStorage.getItem("troupe-admin-token") || "";
tokenInput.addEventListener("change", () => { sessionStorage.setItem("troupe-admin-token", tokenInput.value); connect(); });
function headers() {
  const h = {"Content-Type": "application/json"};
  if (tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
  return h;
}
async function call(method, path, body) {
  const response = await fetch(path, {method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body)});
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((data.error && data.error.message) || response.statusText);
  return data;
}
function say(el, text, ok) { el.textContent = text; el.className = ok ? "ok" : "bad"; }
const fmt = (v, digits) => v === null || v === undefined ? "–" : Number(v).toFixed(digits);

// ---- charts ------------------------------------------------------------
const WINDOW_S = 300, COLORS = ["#1a73e8", "#e8710a", "#188038", "#a142f4"];
const charts = [
  {id: "throughput", title: "Throughput", unit: "tokens/s", series: [["input", (s) => s.rates.prompt_tokens_per_s], ["output", (s) => s.rates.generation_tokens_per_s]]},
  {id: "queue", title: "Requests", unit: "requests", series: [["running", (s) => s.gauges.running], ["waiting", (s) => s.gauges.waiting], ["swapped", (s) => s.gauges.swapped]]},
  {id: "kv", title: "KV cache used", unit: "%", max: 100, series: [["device", (s) => 100 * s.gauges.kv_device_usage], ["host", (s) => 100 * s.gauges.kv_host_usage]]},
  {id: "prefix", title: "Prefix-cache hit rate", unit: "% of prompt tokens", max: 100, series: [["hits", (s) => s.rates.prefix_hit_rate === null ? null : 100 * s.rates.prefix_hit_rate]]},
  {id: "step", title: "Step size", unit: "tokens / sequences per step", series: [["tokens per step", (s) => s.rates.tokens_per_step], ["batch size", (s) => s.rates.batch_size]]},
  {id: "ttft", title: "Time to first token", unit: "ms", series: [["p50", (s) => ms(s.latency.ttft_p50_s)], ["p99", (s) => ms(s.latency.ttft_p99_s)]]},
  {id: "itl", title: "Inter-token latency", unit: "ms", series: [["p50", (s) => ms(s.latency.itl_p50_s)], ["p99", (s) => ms(s.latency.itl_p99_s)]]},
  {id: "preemptions", title: "Preemptions", unit: "per s", series: [["preemptions", (s) => s.rates.preemptions_per_s]]},
  {id: "spec", title: "Speculation acceptance", unit: "% of drafts", max: 100, optional: true, series: [["accepted", (s) => s.rates.spec_acceptance === null ? null : 100 * s.rates.spec_acceptance]]},
];
function ms(v) { return v === null || v === undefined ? null : 1000 * v; }
for (const chart of charts) {
  chart.points = [];
  chart.canvas = document.createElement("canvas");
  chart.canvas.id = "chart-" + chart.id;
  chart.canvas.dataset.points = "0";
  if (chart.optional) chart.canvas.style.display = "none";
  $("charts").appendChild(chart.canvas);
}
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}
function draw(chart) {
  const c = chart.canvas, ratio = window.devicePixelRatio || 1;
  const w = c.clientWidth || 330, h = c.clientHeight || 170;
  c.width = w * ratio; c.height = h * ratio;
  const g = c.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, w, h);
  const left = 48, right = 8, top = 22, bottom = 30, pw = w - left - right, ph = h - top - bottom;
  const now = Date.now() / 1000;
  // The time axis grows with the data, from half a minute up to WINDOW_S.
  const span = Math.max(30, Math.min(WINDOW_S, chart.points.length ? now - chart.points[0].t : 0));
  const tick = span <= 60 ? 10 : span <= 150 ? 30 : 60;
  let ymax = chart.max || 0;
  if (!chart.max) for (const p of chart.points) for (const v of p.values) if (v !== null && v > ymax) ymax = v;
  ymax = chart.max || niceMax(ymax * 1.1);
  g.font = "11px system-ui, sans-serif"; g.fillStyle = "#1d2330"; g.textBaseline = "middle";
  g.fillText(chart.title + " [" + chart.unit + "]", left, 10);
  g.strokeStyle = "#d9dde5"; g.fillStyle = "#667085"; g.lineWidth = 1;
  for (let i = 0; i <= 4; ++i) {
    const y = top + ph - ph * i / 4;
    g.beginPath(); g.moveTo(left, y); g.lineTo(left + pw, y); g.stroke();
    g.textAlign = "right"; g.fillText(+(ymax * i / 4).toPrecision(3), left - 4, y);
  }
  g.textAlign = "center";
  for (let s = 0; s <= span; s += tick) {
    const label = s === 0 ? "now" : tick < 60 ? "-" + s + " s" : "-" + s / 60 + " min";
    g.fillText(label, left + pw - pw * s / span, top + ph + 10);
  }
  g.fillText("time", left + pw / 2, top + ph + 22);
  chart.series.forEach(([name], k) => {
    g.strokeStyle = COLORS[k]; g.lineWidth = 1.6; g.beginPath();
    let pen = false;
    for (const p of chart.points) {
      const v = p.values[k];
      if (v === null) { pen = false; continue; }
      const x = left + pw - pw * (now - p.t) / span, y = top + ph - ph * Math.min(v, ymax) / ymax;
      pen ? g.lineTo(x, y) : g.moveTo(x, y); pen = true;
    }
    g.stroke();
    g.fillStyle = COLORS[k]; g.textAlign = "right";
    g.fillText(name, left + pw - 4, top + 8 + 13 * k);
  });
}
function addSnapshot(s) {
  const t = s.time;
  for (const chart of charts) {
    const values = chart.series.map(([, f]) => { const v = f(s); return v === null || v === undefined || isNaN(v) ? null : v; });
    chart.points.push({t, values});
    while (chart.points.length && chart.points[0].t < t - WINDOW_S) chart.points.shift();
    if (chart.optional && values.some((v) => v !== null)) chart.canvas.style.display = "";
    chart.canvas.dataset.points = String(chart.points.length);
    chart.canvas.dataset.last = JSON.stringify(values);
    draw(chart);
  }
  const gs = s.gauges;
  $("health").textContent = gs.healthy ? "healthy" : "UNHEALTHY: " + gs.health_detail;
  $("health").className = gs.healthy ? "ok" : "bad";
  $("card-running").textContent = gs.running; $("card-waiting").textContent = gs.waiting;
  $("card-swapped").textContent = gs.swapped;
  $("card-kv").textContent = fmt(100 * gs.kv_device_usage, 1) + "%";
  $("card-kvhost").textContent = fmt(100 * gs.kv_host_usage, 1) + "%";
  $("card-out").textContent = fmt(s.rates.generation_tokens_per_s, 0);
  $("card-policy").textContent = s.settings.policy;
  $("card-budget").textContent = s.settings.max_num_batched_tokens;
  showRequests(s.requests);
}
)JS"
         R"JS(
// ---- requests ------------------------------------------------------------
function showRequests(requests) {
  const body = $("requests").tBodies[0];
  $("request-count").textContent = "(" + requests.length + " live)";
  const typing = document.activeElement && document.activeElement.tagName === "INPUT" && body.contains(document.activeElement);
  if (typing) return;  // do not redraw under an operator typing a priority
  body.replaceChildren();
  for (const r of requests) {
    const row = body.insertRow();
    row.dataset.id = r.id;
    const cells = [r.id, r.state, r.priority, r.user || "–", r.deadline_s === null ? "–" : fmt(r.deadline_s, 1), r.mlfq_level,
      r.prompt_tokens, r.generated_tokens, r.device_blocks + " / " + r.host_blocks, fmt(r.age_s, 1), r.ttft_s === null ? "–" : fmt(1000 * r.ttft_s, 0)];
    cells.forEach((v, i) => { const td = row.insertCell(); td.textContent = v; if (i >= 5 && i != 8) td.className = "num"; });
    const actions = row.insertCell();
    const abort = document.createElement("button");
    abort.textContent = "abort"; abort.className = "abort";
    abort.onclick = () => act("POST", "/admin/requests/" + encodeURIComponent(r.id) + "/abort", undefined, "aborted " + r.id);
    const priority = document.createElement("input");
    priority.type = "number"; priority.className = "priority"; priority.value = r.priority; priority.style.width = "5em";
    const set = document.createElement("button");
    set.textContent = "set priority"; set.className = "set-priority";
    set.onclick = () => act("POST", "/admin/requests/" + encodeURIComponent(r.id) + "/priority", {priority: Number(priority.value)}, r.id + " priority " + priority.value);
    actions.append(abort, " ", priority, set);
  }
}
async function act(method, path, body, done) {
  try { await call(method, path, body); say($("request-message"), done, true); refreshAudit(); }
  catch (e) { say($("request-message"), e.message, false); }
}

// ---- knobs ---------------------------------------------------------------
function rangeText(k) {
  if (k.choices) return k.choices.join(" | ");
  const lo = "min" in k ? k.min : "−∞", hi = "max" in k ? k.max : "∞";
  return "[" + lo + ", " + hi + "]" + (k.unit ? " " + k.unit : "");
}
async function loadKnobs() {
  const config = await call("GET", "/admin/config");
  const live = $("knobs").tBodies[0], fixed = $("fixed-knobs").tBodies[0];
  live.replaceChildren(); fixed.replaceChildren();
  for (const [name, k] of Object.entries(config.knobs)) {
    if (!k.live) {
      const row = fixed.insertRow();
      for (const v of [name, k.secret ? (k.set ? "(set)" : "(unset)") : JSON.stringify(k.value), rangeText(k), k.source, k.help]) row.insertCell().textContent = v;
      row.cells[4].className = "help";
      continue;
    }
    const row = live.insertRow();
    row.insertCell().textContent = name;
    let input;
    if (k.choices) {
      input = document.createElement("select");
      for (const choice of k.choices) input.add(new Option(choice));
    } else {
      input = document.createElement("input");
      input.type = "number";
      if ("min" in k) input.min = k.min;
      if ("max" in k) input.max = k.max;
      input.step = k.kind === "integer" ? "1" : "any";
    }
    input.id = "knob-" + name;
    input.value = String(k.value);
    row.insertCell().appendChild(input);
    row.insertCell().textContent = rangeText(k);
    const apply = document.createElement("button");
    apply.textContent = "apply"; apply.id = "set-" + name;
    const status = document.createElement("span");
    status.id = "status-" + name;
    apply.onclick = () => setKnob(name, k, input, status);
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") setKnob(name, k, input, status); });
    const cell = row.insertCell(); cell.append(apply, " ", status);
    const help = row.insertCell(); help.textContent = k.help + " (default " + k.default + ")"; help.className = "help";
  }
}
async function setKnob(name, k, input, status) {
  let value = input.value;
  if (k.kind === "integer" || k.kind === "real") value = Number(value);
  if (k.kind === "boolean") value = value === "true";
  try {
    const config = await call("PATCH", "/admin/config", {[name]: value});
    input.value = String(config.knobs[name].value);
    say(status, "✓ now " + input.value, true);
    refreshAudit();
  } catch (e) { say(status, "✗ " + e.message, false); }
}
$("save").onclick = async () => {
  try { const r = await call("POST", "/admin/config/save"); say($("save-message"), "saved to " + r.saved, true); refreshAudit(); }
  catch (e) { say($("save-message"), e.message, false); }
};

// ---- audit ---------------------------------------------------------------
async function refreshAudit() {
  try {
    const audit = await call("GET", "/admin/audit");
    const body = $("audit").tBodies[0];
    body.replaceChildren();
    for (const e of audit.entries.slice().reverse()) {
      const row = body.insertRow();
      for (const v of [e.seq, new Date(e.time * 1000).toLocaleTimeString(), e.who, e.action, e.target, e.from, e.to]) row.insertCell().textContent = v;
    }
  } catch (e) { /* shown by the link status */ }
}

// ---- the feed ------------------------------------------------------------
let socket = null, pollTimer = null;
function connect() {
  if (socket) socket.close();
  clearInterval(pollTimer);
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const query = "?interval=1" + (tokenInput.value ? "&token=" + encodeURIComponent(tokenInput.value) : "");
  socket = new WebSocket(scheme + location.host + "/admin/stream" + query);
  socket.onopen = () => { say($("link"), "live", true); };
  socket.onmessage = (m) => addSnapshot(JSON.parse(m.data));
  socket.onerror = () => { say($("link"), "stream unavailable: polling", false); poll(); };
  loadKnobs().catch((e) => say($("link"), e.message, false));
  refreshAudit();
}
function poll() {
  clearInterval(pollTimer);
  pollTimer = setInterval(() => call("GET", "/admin/snapshot").then(addSnapshot).catch((e) => say($("link"), e.message, false)), 1000);
}
setInterval(refreshAudit, 5000);
window.addEventListener("resize", () => charts.forEach(draw));
connect();
)JS";
}

}  // namespace troupe::api
