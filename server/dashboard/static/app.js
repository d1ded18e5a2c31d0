// bosun dashboard: draws /dashboard/api/stats, refreshes on /dashboard/events (SSE), polls as a fallback.
// Every value from the daemon is set with textContent (task objectives are agent-written text).
"use strict";

const fmt = (n) => (n === null || n === undefined ? "–" : Math.round(n).toLocaleString("en-US"));
const pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%");
const ms = (x) => (x ? (x < 10 ? x.toFixed(2) : x.toFixed(0)) + " ms" : "–");
const ago = (t) => {
  if (!t) return "–";
  const s = Math.max(0, Date.now() / 1000 - t);
  if (s < 90) return Math.round(s) + " s ago";
  if (s < 5400) return Math.round(s / 60) + " min ago";
  return Math.round(s / 3600) + " h ago";
};
const dur = (s) => (s < 90 ? Math.round(s) + " s" : s < 5400 ? Math.round(s / 60) + " min" : (s / 3600).toFixed(1) + " h");

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "title") node.title = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else if (k === "style") node.style.cssText = v; // CSSOM: allowed under the page's CSP (style attributes are not)
    else node[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}
const $ = (id) => document.getElementById(id);
function fill(id, nodes) { const n = $(id); n.replaceChildren(...nodes); return n; }

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const n = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
  return n;
}

// a small line chart: series = [{key, label, color}], points = [{t, key: value}]
function lineChart(container, points, series, unit) {
  container.replaceChildren();
  const W = container.clientWidth || 600, H = container.clientHeight || 200, L = 64, R = 12, T = 10, B = 22;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  if (!points.length) {
    const t = svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" });
    t.textContent = "no data yet";
    root.append(t); container.append(root); return;
  }
  const t0 = points[0].t, t1 = Math.max(points[points.length - 1].t, t0 + 1);
  let lo = 0, hi = 1;
  for (const p of points) for (const s of series) { lo = Math.min(lo, p[s.key]); hi = Math.max(hi, p[s.key]); }
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = lo + ((hi - lo) * i) / 4;
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "gridline" }));
    const lab = svg("text", { x: L - 6, y: y(v) + 3, "text-anchor": "end", class: "axis" });
    lab.textContent = fmt(v) + (unit ? " " + unit : "");
    root.append(lab);
  }
  for (const [t, anchor] of [[t0, "start"], [t1, "end"]]) {
    const lab = svg("text", { x: x(t), y: H - 6, "text-anchor": anchor, class: "axis" });
    lab.textContent = new Date(t * 1000).toLocaleTimeString();
    root.append(lab);
  }
  for (const s of series) {
    const d = points.map((p, i) => (i ? "L" : "M") + x(p.t).toFixed(1) + "," + y(p[s.key]).toFixed(1)).join(" ");
    root.append(svg("path", { d, fill: "none", stroke: s.color, "stroke-width": s.width || 2 }));
    if (points.length === 1) root.append(svg("circle", { cx: x(points[0].t), cy: y(points[0][s.key]), r: 3, fill: s.color }));
  }
  container.append(root);
}

function shareBar(barId, legendId, parts) {
  const total = parts.reduce((a, p) => a + p.value, 0);
  fill(barId, parts.filter((p) => p.value > 0).map((p) =>
    el("span", { style: `width:${(100 * p.value) / total}%;background:${p.color}`, title: `${p.label}: ${p.value}` })));
  fill(legendId, total ? parts.map((p) => el("span", {}, el("i", { style: `background:${p.color}` }),
    `${p.label} ${fmt(p.value)} (${pct(p.value / total)})`)) : [el("span", {}, "nothing recorded yet")]);
}

function counted(id, rows, label, empty) {
  fill(id, rows.length ? rows.map((r) => el("li", {}, `${label(r)} `, el("span", { class: "tag" }, fmt(r.count))))
    : [el("li", { class: "empty" }, empty)]);
}

const VERDICT_CLASS = { ok: "v-ok", normal_growth: "v-ok", minor_drift: "v-warn", critical_drift: "v-bad" };

function kpi(id, label, value, sub) {
  return el("div", { class: "kpi", id }, el("div", { class: "value" }, value), el("div", { class: "label" }, label),
    el("div", { class: "sub" }, sub || ""));
}

// the task table: the 20 most recently updated, or those matching the search (objective, id, agents, status)
const TASK_ROWS = 20;
let lastTasks = [];
function drawTasks() {
  const words = $("task-search").value.toLowerCase().split(/\s+/).filter(Boolean);
  const match = (t) => words.every((w) => [t.objective, t.task_id, t.status, ...t.agents].join(" ").toLowerCase().includes(w));
  const found = lastTasks.filter(match);
  $("tasks").querySelector("tbody").replaceChildren(...found.slice(0, TASK_ROWS).map(taskRow));
  $("tasks-count").textContent = found.length > TASK_ROWS ? `${TASK_ROWS} of ${found.length}${words.length ? " matching" : ""}`
    : words.length ? `${found.length} matching` : "";
  $("tasks-none").hidden = !(lastTasks.length && !found.length);
}

function taskRow(t) {
  const dots = el("span", { class: "dots", title: "seal checks, oldest first" },
    ...t.drift.slice(-16).map((x) => el("span", { class: "dot " + (VERDICT_CLASS[x.verdict] || "v-none"), title: `${x.tool}: ${x.verdict}` })));
  const share = t.budget.share;
  const meter = share === null ? el("span", { class: "muted" }, `${fmt(t.budget.consumed_tokens)} tok`)
    : el("span", { title: `${fmt(t.budget.consumed_tokens)} of ${fmt(t.budget.limit_tokens)} tokens` },
      el("span", { class: "meter" }, el("span", { class: share > 0.9 ? "hot" : "", style: `width:${Math.min(100, 100 * share)}%` })),
      " " + pct(share));
  const guard = el("span", {}, t.guard.block ? el("span", { class: "tag block" }, `${t.guard.block} blocked`) : null,
    t.guard.warn ? el("span", { class: "tag warn" }, `${t.guard.warn} warned`) : null,
    !t.guard.block && !t.guard.warn ? el("span", { class: "muted" }, "–") : null);
  const hand = t.handoffs.length ? t.handoffs.map((h) => el("span", { class: "tag" }, `${h.status}${h.agent ? " · " + h.agent : ""}`)) : ["–"];
  return el("tr", { "data-task": t.task_id },
    el("td", {}, el("div", { class: "objective" }, t.objective), el("div", { class: "tid" }, t.task_id)),
    el("td", {}, t.status), el("td", { class: "num" }, t.version), el("td", {}, t.agents.join(", ") || "–"),
    el("td", {}, el("span", { class: "tid", title: t.seal }, t.seal ? t.seal.slice(0, 10) : "–"),
      el("span", { class: "muted" }, ` ${t.seal_versions.length} seal(s)`), dots),
    el("td", {}, meter), el("td", {}, guard), el("td", {}, ...hand),
    el("td", { class: "num" }, fmt(t.ledger.offloaded_tokens)), el("td", { class: "num net" }, fmt(t.ledger.net_tokens)));
}

function render(s) {
  const d = s.daemon, sav = s.savings.overall, r = s.routing, a = s.audits, g = s.guard;
  const status = $("status");
  status.textContent = d.status;
  status.className = "pill " + d.status;
  $("daemon").textContent = `v${d.version} · up ${dur(d.uptime_s)} · model ${d.model.state}`;
  const blocks = g.verdicts.block || 0, warns = g.verdicts.warn || 0;
  fill("kpis", [
    kpi("kpi-net", "net tokens saved", fmt(sav.net_tokens), `≈ $${sav.cost_usd.net_savings.toFixed(4)}`),
    kpi("kpi-offloaded", "tokens offloaded", fmt(sav.offloaded_tokens), `${fmt(sav.offloaded_count)} results · ${fmt(sav.pending_drop_tokens)} awaiting a drop`),
    kpi("kpi-credited", "credited (dropped)", fmt(sav.credited_tokens), `${fmt(sav.dropped_count)} drop receipts`),
    kpi("kpi-routed", "prompts routed", r.attempts ? pct(r.shares.routed) : "–", `${fmt(r.attempts)} route calls · p50 ${ms(r.latency_ms.delivered_p50)}`),
    kpi("kpi-blocked", "actions blocked", fmt(blocks), `${fmt(warns)} warnings · ${fmt(g.prechecks)} prechecks`),
    kpi("kpi-audits", "audits passed", a.count ? `${a.passed}/${a.count}` : "–", a.failed ? `${a.failed} failed` : "no failure"),
  ]);

  lineChart($("savings-chart"), s.savings.series, [
    { key: "offloaded", color: "var(--offloaded)" }, { key: "credited", color: "var(--credited)" },
    { key: "overhead", color: "var(--overhead)" }, { key: "net", color: "var(--net)", width: 2.5 }], "tok");
  fill("savings-legend", [["offloaded", "--offloaded"], ["credited by drops", "--credited"],
    ["bosun's overhead", "--overhead"], ["net saved", "--net"]].map(([l, c]) =>
    el("span", {}, el("i", { style: `background:var(${c})` }), l)));

  lastTasks = s.tasks;
  drawTasks();
  $("tasks-empty").hidden = s.tasks.length > 0;

  const refs = $("refs").querySelector("tbody");
  refs.replaceChildren(...s.savings.largest_refs.map((x) => {
    const row = el("tr", { class: "clickable", title: x.ref, "data-ref": x.ref },
      el("td", { class: "num" }, fmt(x.tokens)), el("td", {}, x.tool || "–"), el("td", {}, x.kind || "–"),
      el("td", { class: "tid" }, x.task_id));
    row.addEventListener("click", () => showOutline(x.ref));
    return row;
  }));
  $("refs-empty").hidden = s.savings.largest_refs.length > 0;

  shareBar("route-share", "route-legend", [
    { label: "routed", value: r.counts.routed, color: "var(--ok)" },
    { label: "abstained", value: r.counts.abstained, color: "var(--neutral)" },
    { label: "failed", value: r.counts.failed, color: "var(--bad)" }]);
  lineChart($("latency-chart"), r.latency_series, [{ key: "p99", color: "var(--overhead)" }, { key: "p50", color: "var(--offloaded)" }], "ms"); // p50 drawn on top
  fill("latency-legend", [["delivered p50", "--offloaded"], ["delivered p99", "--overhead"]].map(([l, c]) =>
    el("span", {}, el("i", { style: `background:var(${c})` }), l)));
  counted("top-policies", r.top_policies, (p) => p.name, "no route yet");
  fill("never-routed", r.never_routed === null ? [el("li", { class: "empty" }, "index not loaded")]
    : r.never_routed.length ? r.never_routed.map((n) => el("li", {}, n)) : [el("li", { class: "empty" }, "every policy routed at least once")]);
  $("calibration").textContent = `${r.corpus_size === null ? "?" : r.corpus_size} policies${r.demo_corpus ? " (demo corpus)" : ""}; index ${r.index.state}`
    + (r.calibration ? `; ${r.calibration}` : "") + (Object.keys(r.failure_classes).length ? `; failures: ${JSON.stringify(r.failure_classes)}` : "");

  shareBar("audit-share", "audit-legend", [
    { label: "passed", value: a.passed, color: "var(--ok)" }, { label: "failed", value: a.failed, color: "var(--bad)" }]);
  counted("audit-reasons", a.top_failure_reasons, (x) => x.reason.replaceAll("_", " "), "no failed audit");

  shareBar("guard-share", "guard-legend", ["allow", "warn", "suggest_alternative", "block"].map((v) => ({
    label: v.replace("_", " "), value: g.verdicts[v] || 0,
    color: { allow: "var(--ok)", warn: "var(--warn)", suggest_alternative: "var(--offloaded)", block: "var(--bad)" }[v] })));
  counted("guard-rules", g.top_rules, (x) => x.rule, "no rule fired");

  const facts = [
    ["status", d.status], ["version", d.version], ["uptime", dur(d.uptime_s)],
    ["model", `${d.model.id || "–"} (${d.model.state}${d.model.load_seconds ? `, loaded in ${d.model.load_seconds.toFixed(2)} s` : ""})`],
    ["route index", `${d.route_index.state}${d.route_index.documents ? `, ${d.route_index.documents} documents` : ""}`],
    ["clients (10 min)", `${fmt(d.clients_recent)} (${fmt(d.sessions_recent)} sessions)`], ["store", `${d.store.backend || "sqlite"}${d.store.bytes == null ? "" : `, ${(d.store.bytes / 1048576).toFixed(2)} MiB`}, schema v${d.store.schema_version}`],
  ];
  if (d.model.error) facts.push(["model error", d.model.error]);
  fill("daemon-facts", facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const fl = s.fleet || { members: [], daemons: 0, hosts: 0 };
  $("fleet-count").textContent = fl.error ? `(unknown: ${fl.error})` : `(${fmt(fl.daemons)} daemon(s) on ${fmt(fl.hosts)} host(s) alive)`;
  $("fleet").querySelector("tbody").replaceChildren(...fl.members.map((m) => el("tr", { class: m.alive ? "" : "muted" },
    el("td", {}, m.host), el("td", { class: "num" }, String(m.pid)), el("td", { class: "num" }, m.worker == null ? "-" : String(m.worker)),
    el("td", { class: "num" }, fmt(m.calls)), el("td", { class: "num" }, fmt(m.errors)), el("td", { class: "num" }, fmt(m.sessions)),
    el("td", { class: "num" }, (m.rss_kb / 1024).toFixed(0)))));
  $("tools").querySelector("tbody").replaceChildren(...s.tools.map((t) => el("tr", {}, el("td", {}, t.tool),
    el("td", { class: "num" }, fmt(t.calls)), el("td", { class: "num" }, fmt(t.errors)), el("td", { class: "num" }, ms(t.p50_ms)))));
  $("telemetry").textContent = s.telemetry.enabled ? `on, ${fmt(s.telemetry.events)} events` : "off (BOSUN_TELEMETRY=off)";
  document.body.dataset.generatedAt = String(s.generated_at);
}

async function showOutline(ref) {
  const box = $("outline");
  box.hidden = false;
  box.textContent = "loading " + ref + " …";
  const res = await fetch("/dashboard/api/ref?ref=" + encodeURIComponent(ref), { credentials: "same-origin" });
  const body = await res.json();
  box.textContent = res.ok ? `${body.ref} · ${fmt(body.total_lines)} lines · ${fmt(body.total_bytes)} bytes\n\n${body.text}` : body.error;
}

// at most one request in flight and one refresh per second: a busy fleet sends many change notices
const MIN_GAP_MS = 1000;
let inFlight = false, again = false, last = 0;
async function refresh() {
  if (inFlight) { again = true; return; }
  const wait = last + MIN_GAP_MS - Date.now();
  if (wait > 0) { again = true; setTimeout(() => { if (again && !inFlight) { again = false; refresh(); } }, wait); return; }
  inFlight = true;
  last = Date.now();
  try {
    const res = await fetch("/dashboard/api/stats", { credentials: "same-origin" });
    if (res.ok) render(await res.json());
  } catch (e) {
    $("live").textContent = "○ offline";
  } finally {
    inFlight = false;
    if (again) { again = false; setTimeout(refresh, MIN_GAP_MS); }
  }
}

function connect() {
  const live = $("live");
  if (!window.EventSource) { setInterval(refresh, 3000); live.textContent = "● polling"; return; }
  const source = new EventSource("/dashboard/events");
  source.addEventListener("hello", () => { live.textContent = "● live"; live.className = "live on"; refresh(); });
  source.addEventListener("change", () => refresh());
  source.onerror = () => { live.textContent = "○ reconnecting"; live.className = "live"; };
  setInterval(refresh, 15000); // figures that change without a notice (uptime, the model loading)
}

window.addEventListener("DOMContentLoaded", () => { $("task-search").addEventListener("input", drawTasks); refresh(); connect(); });
