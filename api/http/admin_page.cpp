// The /admin page: polls GET /admin/config once a second, charts the queue
// and KV usage of the last five minutes, builds its settings form from the
// live knobs the config lists (with the registry's choices and ranges), and
// sends changed settings with PATCH /admin/config. The API key (when the server has one) is typed into
// the page and kept in the tab's sessionStorage.

#include "api/http/admin.hpp"

namespace troupe::api {

std::string_view admin_page_html() {
  return R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Troupe admin</title>
<style>
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .8em; }
.cards { display: flex; flex-wrap: wrap; gap: .8em; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: .6em 1em; min-width: 8em; }
.card b { display: block; font-size: 1.5em; }
canvas { border: 1px solid #ccc; border-radius: 6px; margin: 1em 1em 0 0; }
form { margin-top: 1em; display: grid; grid-template-columns: minmax(14em, 28em) 10em; gap: .4em; }
#message { margin-top: .8em; min-height: 1.2em; }
.error { color: #b00; } .ok { color: #070; }
</style>
</head>
<body>
<h1>Troupe admin <span id="health"></span></h1>
<div class="cards">
  <div class="card">running<b id="num_requests_running">-</b></div>
  <div class="card">waiting<b id="num_requests_waiting">-</b></div>
  <div class="card">swapped<b id="num_requests_swapped">-</b></div>
  <div class="card">KV cache used<b id="kv">-</b></div>
  <div class="card">generated tok/s<b id="tps">-</b></div>
  <div class="card">steps/s<b id="sps">-</b></div>
</div>
<canvas id="queue" width="480" height="160" title="running (blue) and waiting (orange) requests"></canvas>
<canvas id="kvchart" width="480" height="160" title="KV cache used, percent"></canvas>
<form id="settings">
  <label for="key" id="key-label">API key (if the server has one)</label><input id="key" type="password" autocomplete="off">
  <span></span><button type="submit">Apply</button>
</form>
<div id="message"></div>
<script>
"use strict";
let fields = [];
const history = [];
let previous = null, edited = false;
const key = document.getElementById("key");
key.value = sessionStorage.getItem("troupe-key") || "";
function headers() {
  sessionStorage.setItem("troupe-key", key.value);
  const h = {"Content-Type": "application/json"};
  if (key.value) h["Authorization"] = "Bearer " + key.value;
  return h;
}
function say(text, ok) {
  const m = document.getElementById("message");
  m.textContent = text;
  m.className = ok ? "ok" : "error";
}
// One input per live knob, as the registry describes it (choices, range, unit).
function build_form(knobs, names) {
  const form = document.getElementById("settings"), before = document.getElementById("key-label");
  for (const name of names) {
    const knob = knobs[name], label = document.createElement("label");
    label.htmlFor = name;
    label.textContent = knob.help + (knob.unit ? " [" + knob.unit + "]" : "");
    let input;
    if (knob.choices) {
      input = document.createElement("select");
      for (const choice of knob.choices) input.add(new Option(choice));
    } else {
      input = document.createElement("input");
      input.type = "number";
      if ("min" in knob) input.min = knob.min;
      if ("max" in knob) input.max = knob.max;
    }
    input.id = name;
    input.addEventListener("input", () => { edited = true; });
    form.insertBefore(label, before);
    form.insertBefore(input, before);
  }
  fields = names;
}
function chart(id, series, colours, top) {
  const c = document.getElementById(id), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const max = Math.max(top, ...series.flat(), 1);
  series.forEach((values, i) => {
    g.strokeStyle = colours[i];
    g.beginPath();
    values.forEach((v, x) => {
      const px = c.width - (values.length - 1 - x) * (c.width / 300), py = c.height - 4 - v / max * (c.height - 8);
      x ? g.lineTo(px, py) : g.moveTo(px, py);
    });
    g.stroke();
  });
  g.fillStyle = "#555";
  g.fillText(String(Math.round(max)), 4, 12);
}
async function poll() {
  try {
    const response = await fetch("/admin/config", {headers: headers()});
    const body = await response.json();
    if (!response.ok) { say(body.error ? body.error.message : response.statusText, false); return; }
    const s = body.stats, now = performance.now() / 1000;
    for (const name of ["num_requests_running", "num_requests_waiting", "num_requests_swapped"])
      document.getElementById(name).textContent = s[name];
    document.getElementById("kv").textContent = (100 * s.kv_cache_usage).toFixed(1) + "%";
    document.getElementById("health").textContent = s.healthy ? "" : "(unhealthy: " + s.health_detail + ")";
    if (previous) {
      const dt = now - previous.t;
      document.getElementById("tps").textContent = ((s.generation_tokens - previous.g) / dt).toFixed(0);
      document.getElementById("sps").textContent = ((s.steps - previous.steps) / dt).toFixed(1);
    }
    previous = {t: now, g: s.generation_tokens, steps: s.steps};
    history.push([s.num_requests_running, s.num_requests_waiting, 100 * s.kv_cache_usage]);
    if (history.length > 300) history.shift();
    chart("queue", [history.map(h => h[0]), history.map(h => h[1])], ["#1f77b4", "#ff7f0e"], 1);
    chart("kvchart", [history.map(h => h[2])], ["#2ca02c"], 100);
    if (!fields.length) build_form(body.knobs, body.live_settings);
    if (!edited) for (const f of fields) document.getElementById(f).value = body.settings[f];
  } catch (e) {
    say("the server did not answer: " + e, false);
  }
}
document.getElementById("settings").addEventListener("submit", async (event) => {
  event.preventDefault();
  const change = {};
  for (const f of fields) {
    const input = document.getElementById(f);
    change[f] = input.type === "number" ? Number(input.value) : input.value;
  }
  const response = await fetch("/admin/config", {method: "PATCH", headers: headers(), body: JSON.stringify(change)});
  const body = await response.json();
  if (response.ok) { edited = false; say("applied", true); } else { say(body.error.message, false); }
});
poll();
setInterval(poll, 1000);
</script>
</body>
</html>
)HTML";
}

}  // namespace troupe::api
