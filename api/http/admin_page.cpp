// The /admin page: markup and style. It charts the snapshots /admin/stream
// pushes, lists the requests with abort and priority controls, draws the
// config panel from /admin/config and shows the audit log. The script is
// admin_page_script.cpp; nothing is fetched from anywhere else.

#include <string>

#include "api/http/admin.hpp"

namespace troupe::api {

namespace {

constexpr std::string_view page_head = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Troupe console</title>
<style>
:root { --fg: #1d2330; --muted: #667085; --line: #d9dde5; --bg: #f6f7f9; --ok: #137333; --bad: #b3261e; }
* { box-sizing: border-box; }
body { font: 13px system-ui, sans-serif; margin: 0; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 1em; padding: .6em 1.2em; background: #fff;
         border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 1; }
header h1 { font-size: 1.15em; margin: 0; }
header .grow { flex: 1; }
main { padding: .8em 1.2em; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: .6em .9em; margin-bottom: .9em; }
h2 { font-size: 1em; margin: .1em 0 .6em; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(9em, 1fr)); gap: .6em; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .4em .7em; background: #fff; }
.card span { color: var(--muted); } .card b { display: block; font-size: 1.4em; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: .6em; }
canvas { width: 100%; height: 170px; border: 1px solid var(--line); border-radius: 6px; background: #fff; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25em .5em; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { max-height: 22em; overflow: auto; }
input, select, button { font: inherit; padding: .15em .4em; }
input[type=number] { width: 7em; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .muted { color: var(--muted); }
.help { color: var(--muted); white-space: normal; max-width: 34em; }
#health.bad { font-weight: 700; }
</style>
</head>
<body>
<header>
  <h1>Troupe console</h1><span id="health" class="muted">connecting…</span><span class="grow"></span>
  <label>admin token <input id="token" type="password" autocomplete="off" size="18"></label>
  <span id="link" class="muted"></span>
</header>
<main>
<section><div class="cards">
  <div class="card"><span>running</span><b id="card-running">–</b></div>
  <div class="card"><span>waiting</span><b id="card-waiting">–</b></div>
  <div class="card"><span>swapped</span><b id="card-swapped">–</b></div>
  <div class="card"><span>KV device</span><b id="card-kv">–</b></div>
  <div class="card"><span>KV host</span><b id="card-kvhost">–</b></div>
  <div class="card"><span>output tok/s</span><b id="card-out">–</b></div>
  <div class="card"><span>policy</span><b id="card-policy">–</b></div>
  <div class="card"><span>token budget</span><b id="card-budget">–</b></div>
</div></section>
<section><h2>Last minutes</h2><div class="charts" id="charts"></div></section>
<section><h2>Requests <span id="request-count" class="muted"></span></h2><div class="scroll">
<table id="requests"><thead><tr><th>id</th><th>state</th><th>priority</th><th>tenant</th><th>deadline s</th>
<th>MLFQ level</th><th>prompt tok</th><th>generated tok</th><th>blocks dev / host</th><th>age s</th>
<th>TTFT ms</th><th>actions</th></tr></thead><tbody></tbody></table></div>
<div id="request-message"></div></section>
<section><h2>Live knobs</h2><table id="knobs"><thead><tr><th>knob</th><th>value</th><th>range</th><th></th>
<th>what it does</th></tr></thead><tbody></tbody></table>
<details><summary>Restart-only knobs</summary><table id="fixed-knobs"><tbody></tbody></table></details>
<p><button id="save">Save live settings to the config file</button> <span id="save-message"></span></p></section>
<section><h2>Audit log</h2><div class="scroll"><table id="audit"><thead><tr><th>#</th><th>when</th><th>who</th>
<th>action</th><th>target</th><th>from</th><th>to</th></tr></thead><tbody></tbody></table></div></section>
</main>
<script>
)HTML";

constexpr std::string_view page_tail = R"HTML(
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view admin_page_html() {
  static const std::string page = std::string(page_head) + std::string(admin_page_script()) + std::string(page_tail);
  return page;
}

}  // namespace troupe::api
