// The NanoKafka console: one page, hash routes, the JSON API of docs/console.md. Plain JS,
// no build step. Names and data only ever reach the DOM as text (`el` below sets
// textContent and properties, never innerHTML). Live parts poll once a second while the tab
// is visible and stop while it is hidden, so a console nobody looks at asks nothing.
"use strict";

// ---- small helpers -------------------------------------------------------------------------

/** An element: `attrs` become properties (`dataset` entries for `data`), children text. */
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null) continue;
    if (name === "data") Object.assign(node.dataset, value);
    else if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node[name] = value;
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const byId = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function duration(ms) {
  const s = Math.floor(ms / 1000), d = Math.floor(s / 86400), h = Math.floor(s / 3600) % 24;
  const m = Math.floor(s / 60) % 60;
  return d ? `${d}d ${h}h` : h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s}s`;
}

const time = (ms) => (ms === null || ms === undefined ? "–"
  : new Date(ms).toISOString().replace("T", " "));

/** GET (or `init`) an API path; the parsed JSON, or an Error with the API's message. */
async function api(path, init) {
  const response = await fetch(path, init);
  let body = null;
  try { body = await response.json(); } catch (_) { /* an empty or non-JSON body */ }
  if (!response.ok) {
    const error = new Error((body && body.error) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

const post = (path, body, method = "POST") => api(path, {
  method, headers: { "content-type": "application/json" }, body: JSON.stringify(body),
});

function showError(error) {
  const banner = byId("banner");
  banner.textContent = error ? String(error.message || error) : "";
  banner.hidden = !error;
}
window.addEventListener("error", (e) => showError(e.error || e.message));
window.addEventListener("unhandledrejection", (e) => showError(e.reason));

// ---- the page's lifetime: pollers and charts, dropped on every route change ----------------

let page = { token: 0, pollers: [], charts: [] };

/** Runs `fn` now and every `ms` while this page is shown and the tab visible. */
function poll(fn, ms = 1000) {
  const poller = { fn, ms, timer: null, running: false, token: page.token };
  page.pollers.push(poller);
  schedule(poller, 0);
}

function schedule(poller, delay) {
  if (poller.timer || poller.running || document.visibilityState !== "visible") return;
  poller.timer = setTimeout(async () => {
    poller.timer = null;
    if (poller.token !== page.token) return;
    poller.running = true;
    try { await poller.fn(); showError(null); } catch (e) { showError(e); }
    poller.running = false;
    if (poller.token === page.token) schedule(poller, poller.ms);
  }, delay);
}

document.addEventListener("visibilitychange", () => {
  for (const poller of page.pollers) {
    if (document.visibilityState === "visible") schedule(poller, 0);
    else { clearTimeout(poller.timer); poller.timer = null; }
  }
});

/** Asks every poller of this page again now (after a write changed what it shows). */
function refreshPage() {
  for (const poller of page.pollers) {
    clearTimeout(poller.timer);
    poller.timer = null;
    schedule(poller, 0);
  }
}

function leavePage() {
  for (const poller of page.pollers) clearTimeout(poller.timer);
  for (const chart of page.charts) chart.destroy();
  page = { token: page.token + 1, pollers: [], charts: [] };
}

/** A uPlot line chart of `[t_ms, value]` points in `box`; `update(points)` redraws it and
 *  keeps `data-points` and `data-last` on the box current (the tests read them). */
function lineChart(box, label, color) {
  const width = () => Math.max(300, box.clientWidth - 4);
  const opts = {
    width: width(), height: 180, legend: { show: false },
    // At least the last minute on the time axis, so that a chart of few or no samples still
    // reads as seconds rather than as years or milliseconds.
    scales: {
      x: { time: true, range: (u, min, max) => {
        const end = max === null || max === undefined ? Date.now() / 1000 : max;
        return [Math.min(min ?? end, end - 60), end];
      } },
      y: { range: (u, min, max) => [0, Math.max(1, (max || 0) * 1.1)] },
    },
    series: [{}, { label, stroke: color, fill: color + "22", width: 2, points: { show: false } }],
    axes: [{ stroke: "#6b7280", values: (u, splits) => splits.map((s) => new Date(s * 1000).toISOString().slice(11, 19)) },
      { stroke: "#6b7280", size: 60 }],
  };
  const plot = new uPlot(opts, [[], []], box);
  plot.root.hidden = true;
  // A line needs two samples (uPlot stretches the time axis of one over years): until
  // then, a line of text.
  const waiting = el("p", { class: "muted chart-empty" }, "Collecting samples…");
  box.append(waiting);
  const chart = {
    update(points) {
      plot.root.hidden = points.length < 2;
      waiting.hidden = points.length >= 2;
      plot.setData([points.map((p) => p[0] / 1000), points.map((p) => p[1])]);
      box.dataset.points = String(points.length);
      box.dataset.last = points.length ? String(points[points.length - 1][1]) : "";
    },
    destroy: () => plot.destroy(),
  };
  page.charts.push(chart);
  return chart;
}

function chartCard(title, id) {
  const box = el("div", { id, class: "chart", data: { test: id } });
  return [el("section", { class: "card" }, el("h3", {}, title), box), box];
}

/** Rebuilds a table's body from `rows` (arrays of cells, or elements). */
function table(id, headers, rows, empty) {
  const body = el("tbody");
  for (const row of rows) body.append(row instanceof Node ? row : el("tr", {}, row.map((c) => el("td", {}, c))));
  if (!rows.length) body.append(el("tr", {}, el("td", { class: "muted", colSpan: headers.length }, empty)));
  // A column of numbers is right-aligned, its header too.
  const first = body.firstElementChild ? [...body.firstElementChild.children] : [];
  const th = headers.map((h, i) => el("th", { class: first[i] && first[i].classList.contains("num") ? "num" : "" }, h));
  return el("table", { id, data: { test: id } }, el("thead", {}, el("tr", {}, th)), body);
}

const link = (href, text, attrs) => el("a", { href, ...attrs }, text);
const topicLink = (name) => link(`#/topics/${enc(name)}`, name, { class: "mono" });
const groupLink = (name) => link(`#/groups/${enc(name)}`, name, { class: "mono" });
const mono = (text) => el("span", { class: "mono" }, text);

/** Replaces the children of `node` (a section a poller keeps current). */
const fill = (node, ...children) => node.replaceChildren(...children.flat());

// ---- the broker's state shared by every page (the nav bar, whether writes are on) ----------

let broker = null;
let notice = null; // a line for the next page to show (after a write that left its page)

function showBroker(b) {
  broker = b;
  byId("nav-version").textContent = `v${b.version}`;
  const writes = byId("nav-writes");
  writes.textContent = b.console_writes ? "writes enabled" : "read-only";
  writes.className = "badge " + (b.console_writes ? "badge-warn" : "badge-ok");
  // Only a broker with the schema registry reports `schema_registry`.
  byId("nav-schemas").hidden = !b.schema_registry;
}

async function knowBroker() {
  if (!broker) showBroker((await api("/api/overview")).broker);
  return broker;
}

// ---- routes ---------------------------------------------------------------------------------

const routes = [
  [/^\/?$/, overviewPage],
  [/^\/topics\/([^/]+)$/, topicPage],
  [/^\/topics\/([^/]+)\/messages$/, messagesPage],
  [/^\/groups\/?$/, groupsPage],
  [/^\/groups\/([^/]+)$/, groupPage],
  [/^\/schemas\/?$/, schemasPage],
  [/^\/schemas\/([^/]+)$/, subjectPage],
];

function route() {
  leavePage();
  showError(null);
  const hash = location.hash.replace(/^#/, "");
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query || "");
  const app = byId("app");
  app.replaceChildren();
  for (const link of document.querySelectorAll("#nav a[data-test]")) link.classList.remove("active");
  knowBroker().catch(showError);
  if (notice) app.append(el("p", { id: "notice", class: "card notice", data: { test: "notice" } }, notice));
  notice = null;
  for (const [pattern, render] of routes) {
    const match = pattern.exec(path || "/");
    if (match) {
      const nav = path.startsWith("/groups") ? "nav-groups" : path.startsWith("/schemas") ? "nav-schemas" : "nav-overview";
      byId(nav).classList.add("active");
      render(app, ...match.slice(1).map(decodeURIComponent), params).catch(showError);
      return;
    }
  }
  app.append(el("h2", {}, "Not found"), el("p", {}, "No page at ", mono(hash)));
}

window.addEventListener("hashchange", route);

// ---- Overview -------------------------------------------------------------------------------

async function overviewPage(app) {
  const health = el("section", { id: "broker", class: "card", data: { test: "broker" } });
  const [rateCard, rateBox] = chartCard("Records/s (all topics)", "rate-chart");
  const topics = el("section", { class: "card" });
  const groups = el("section", { class: "card" });
  app.append(el("h2", {}, "Overview"), el("div", { class: "row" }, health, rateCard), topics, groups);
  const rate = lineChart(rateBox, "records/s", "#2563eb");
  const history = []; // the overview gives the current rate; the chart keeps the last 5 min
  let writesShown = false;
  poll(async () => {
    const o = await api("/api/overview");
    showBroker(o.broker);
    const b = o.broker;
    if (b.console_writes && !writesShown) {
      writesShown = true;
      topics.after(createTopicForm());
    }
    fill(health, el("h3", {}, "Broker"), dl([["Uptime", duration(b.uptime_ms)],
      ["Data dir", mono(b.data_dir)], ["Fsync", b.fsync], ["Listener", b.listener ? mono(b.listener) : "off"],
      ["Connections", num(b.connections)], ["Writes", b.console_writes ? "enabled" : "disabled"]]));
    const rates = o.topics.map((t) => t.records_per_sec).filter((r) => r !== null);
    if (rates.length) {
      history.push([Date.now(), rates.reduce((a, r) => a + r, 0)]);
      if (history.length > 300) history.shift();
      rate.update(history);
    }
    fill(topics, el("h3", {}, `Topics (${o.topics.length})`), table("topics",
      ["Topic", "Partitions", "Records", "Size", "Records/s"],
      o.topics.map((t) => el("tr", { data: { test: "topic-row", topic: t.name } },
        el("td", {}, topicLink(t.name)), el("td", { class: "num" }, num(t.partitions)),
        el("td", { class: "num" }, num(t.records)), el("td", { class: "num" }, bytes(t.size_bytes)),
        el("td", { class: "num" }, t.records_per_sec === null ? "–" : t.records_per_sec.toFixed(1)))),
      "No topics yet."));
    fill(groups, el("h3", {}, `Consumer groups (${o.groups.length})`), groupsTable(o.groups));
  });
}

/** A definition list from `[term, value]` pairs. */
function dl(pairs) {
  return el("dl", {}, pairs.map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]));
}

function groupsTable(groups) {
  return table("groups", ["Group", "Topics", "Members", "Lag"],
    groups.map((g) => el("tr", { data: { test: "group-row", group: g.group } },
      el("td", {}, groupLink(g.group)), el("td", {}, g.topics.map((t, i) => [i ? ", " : "", topicLink(t)])),
      el("td", { class: "num" }, num(g.members)), el("td", { class: "num" }, num(g.lag)))),
    "No consumer groups.");
}

// ---- Write forms (shown with writes enabled only; the server refuses otherwise anyway) ------

/** `key=value` lines (blank lines skipped) as an object; an Error naming a line without `=`. */
function keyValues(text, what) {
  const pairs = {};
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim()) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new Error(`${what}, line ${i + 1}: expected key=value, got ${JSON.stringify(line)}`);
    pairs[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return pairs;
}

const describePairs = (pairs) => Object.entries(pairs).map(([k, v]) => `${k}=${v}`).join(", ");

/** A write's form: `fields` in a card and a button. Submitting calls `prepare()`, which
 *  checks the fields and returns `[question, send]` (or throws what is wrong); the question
 *  goes to the confirmation dialog, and only Confirm calls `send()`, whose answer (text or
 *  elements) or error the form shows; `done()` follows a success. */
function writeForm(id, title, fields, button, prepare, done) {
  const result = el("p", { id: `${id}-result`, class: "mono result", data: { test: `${id}-result` } });
  const submit = el("button", { id: `${id}-submit`, type: "submit", class: "danger", data: { test: `${id}-submit` } }, button);
  const form = el("form", { id, class: "card form", data: { test: id } }, el("h3", {}, title), fields,
    el("div", {}, submit), result);
  const fail = (error) => { result.className = "mono result error"; result.textContent = error.message; };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    result.className = "mono result";
    result.replaceChildren();
    let question, send;
    try { [question, send] = prepare(); } catch (error) { fail(error); return; }
    if (!(await confirmDialog(title, question))) return;
    try {
      fill(result, await send());
      if (done) done();
    } catch (error) { fail(error); }
  });
  form.submitButton = submit;
  return form;
}

const field = (label, input) => el("label", { class: input.tagName === "TEXTAREA" ? "area" : "" }, label, " ", input);
const textarea = (id, placeholder) => el("textarea", { id, data: { test: id }, rows: 3, placeholder, spellcheck: false });

function createTopicForm() {
  const name = el("input", { id: "create-topic-name", data: { test: "create-topic-name" }, placeholder: "orders" });
  const partitions = el("input", { id: "create-topic-partitions", type: "number", min: 1, value: 1, class: "narrow" });
  const config = textarea("create-topic-config", "optional, one per line: retention.ms=86400000");
  return writeForm("create-topic", "Create topic",
    [field("Name", name), field("Partitions", partitions), field("Config", config)], "Create topic…", () => {
      const topic = name.value.trim();
      if (!topic) throw new Error("a topic needs a name");
      const count = Number(partitions.value);
      const pairs = keyValues(config.value, "config");
      const extra = Object.keys(pairs).length ? ` and config ${describePairs(pairs)}` : "";
      return [`Create topic ${topic} with ${count} partition${count === 1 ? "" : "s"}${extra}?`, async () => {
        await post("/api/topics", { name: topic, partitions: count, config: pairs, confirm: true });
        return `Created topic ${topic} (${count} partition${count === 1 ? "" : "s"}).`;
      }];
    }, () => {
      name.value = config.value = "";
      refreshPage();
    });
}

const partitionSelect = (id, partitions, any) => el("select", { id, data: { test: id } },
  any ? el("option", { value: "" }, any) : null, partitions.map((p) => el("option", { value: p.partition }, `partition ${p.partition}`)));

/** The topic page's writes: produce a test record, alter its config, delete records before
 *  an offset, delete the topic (its name typed out first). */
function topicWriteForms(name, partitions) {
  const topicPath = `/api/topics/${enc(name)}`;
  const partition = partitionSelect("produce-partition", partitions, "any (the broker picks)");
  const key = el("input", { id: "produce-key", data: { test: "produce-key" }, placeholder: "none" });
  const value = textarea("produce-value", "the record's value (text)");
  const headers = textarea("produce-headers", "optional, one per line: source=console");
  const produce = writeForm("produce", "Produce a test record",
    [field("Partition", partition), field("Key", key), field("Value", value), field("Headers", headers)],
    "Produce…", () => {
      const body = { value: value.value, headers: keyValues(headers.value, "headers"), confirm: true };
      if (partition.value !== "") body.partition = Number(partition.value);
      if (key.value !== "") body.key = key.value;
      const where = partition.value === "" ? "" : ` partition ${partition.value}`;
      return [`Produce a record to ${name}${where} (key ${key.value === "" ? "none" : JSON.stringify(key.value)}, ` +
        `${value.value.length} characters of value${Object.keys(body.headers).length ? ", headers " + describePairs(body.headers) : ""})?`, async () => {
        const d = await post(`${topicPath}/records`, body);
        return [`Produced to partition ${d.partition} at offset ${d.offset}. `,
          link(`#/topics/${enc(name)}/messages?partition=${d.partition}&offset=${d.offset}&limit=1`, "Show it")];
      }];
    }, refreshPage);

  const config = textarea("alter-config", "one per line: retention.ms=86400000");
  const alter = writeForm("alter", "Alter config", [field("Set", config)], "Alter config…", () => {
    const pairs = keyValues(config.value, "config");
    if (!Object.keys(pairs).length) throw new Error("no config to set: write key=value lines");
    return [`Set on topic ${name}: ${describePairs(pairs)}?`, async () => {
      await post(topicPath, { config: pairs, confirm: true }, "PATCH");
      return `Set ${describePairs(pairs)}.`;
    }];
  }, refreshPage);

  const deletePartition = partitionSelect("delete-records-partition", partitions);
  const before = el("input", { id: "delete-records-before", data: { test: "delete-records-before" }, type: "number", min: 0, class: "narrow" });
  const deleteRecords = writeForm("delete-records", "Delete records",
    [field("Partition", deletePartition), field("Before offset", before)], "Delete records…", () => {
      if (!/^\d+$/.test(before.value)) throw new Error("the offset to delete before is a number");
      const p = deletePartition.value;
      return [`Delete the records of ${name} partition ${p} before offset ${before.value}? Consumers can no longer read them.`, async () => {
        const r = await post(`${topicPath}/partitions/${p}/delete-records`, { before: Number(before.value), confirm: true });
        return `Partition ${p} now starts at offset ${r.log_start}.`;
      }];
    }, refreshPage);

  const typed = el("input", { id: "delete-topic-confirm-name", data: { test: "delete-topic-confirm-name" }, autocomplete: "off" });
  const deleteTopic = writeForm("delete-topic", "Delete topic",
    [el("p", { class: "muted" }, "Deletes every partition and record. Type the topic's name to delete it."), field("Topic name", typed)],
    "Delete topic…", () => [`Delete topic ${name} and all its records? This cannot be undone.`, async () => {
      await post(topicPath, { confirm: true }, "DELETE");
      return `Deleted topic ${name}.`;
    }], () => { notice = `Deleted topic ${name}.`; location.hash = "#/"; });
  const matches = () => { deleteTopic.submitButton.disabled = typed.value !== name; };
  typed.addEventListener("input", matches);
  matches();
  return el("div", { id: "topic-writes", class: "writes" }, produce, alter, deleteRecords, deleteTopic);
}

// ---- Topic ----------------------------------------------------------------------------------

async function topicPage(app, name) {
  const partitions = el("section", { class: "card" });
  const [rateCard, rateBox] = chartCard("Records/s", "throughput-chart");
  const groups = el("section", { class: "card" });
  const config = el("section", { class: "card" });
  app.append(el("h2", {}, "Topic ", el("span", { id: "topic-name", class: "mono", data: { test: "topic-name" } }, name),
    " ", link(`#/topics/${enc(name)}/messages?partition=0&newest=true`, "Browse messages", { id: "browse", class: "button", data: { test: "browse" } })),
  partitions, el("div", { class: "row" }, rateCard, groups), config);
  const rate = lineChart(rateBox, "records/s", "#2563eb");
  let writesShown = false;
  poll(async () => {
    const t = await api(`/api/topics/${enc(name)}`);
    if ((await knowBroker()).console_writes && !writesShown) {
      writesShown = true;
      config.after(topicWriteForms(name, t.partitions));
    }
    rate.update(t.throughput);
    fill(partitions, el("h3", {}, `Partitions (${t.partitions.length})`), table("partitions",
      ["Partition", "Log start", "Log end", "Records", "Size", "Segments", ""],
      t.partitions.map((p) => el("tr", { data: { test: "partition-row", partition: p.partition } },
        el("td", { class: "num" }, p.partition), el("td", { class: "num mono" }, num(p.log_start)),
        el("td", { class: "num mono" }, num(p.log_end)), el("td", { class: "num" }, num(p.log_end - p.log_start)),
        el("td", { class: "num" }, bytes(p.size_bytes)), el("td", { class: "num" }, num(p.segments)),
        el("td", {}, link(`#/topics/${enc(name)}/messages?partition=${p.partition}&newest=true`, "messages"))))));
    fill(groups, el("h3", {}, "Groups reading it"), table("topic-groups", ["Group", "Lag per partition", "Total lag"],
      t.groups.map((g) => {
        const lags = Object.entries(g.lag);
        return [groupLink(g.group), mono(lags.map(([p, l]) => `${p}: ${num(l)}`).join("  ")),
          num(lags.reduce((a, [, l]) => a + l, 0))];
      }), "No group has committed offsets here."));
    fill(config, el("h3", {}, "Config"), table("config", ["Name", "Value"],
      Object.entries(t.config).sort().map(([k, v]) => [mono(k), mono(String(v))]), "Defaults."));
  });
}

// ---- Schemas (a broker with the schema registry) ---------------------------------------------

async function schemasPage(app) {
  const list = el("section", { class: "card" });
  app.append(el("h2", {}, "Schemas"), list);
  const s = await api("/api/schemas");
  fill(list, el("h3", {}, `Subjects (${s.subjects.length})`), table("subjects", ["Subject", "Versions", "Latest id", "Type"],
    s.subjects.map((sub) => {
      const latest = sub.versions[sub.versions.length - 1];
      return el("tr", { data: { test: "subject-row", subject: sub.subject } },
        el("td", {}, link(`#/schemas/${enc(sub.subject)}`, sub.subject, { class: "mono" })),
        el("td", { class: "num" }, sub.versions.map((v) => v.version).join(", ")),
        el("td", { class: "num mono" }, latest.id), el("td", {}, latest.type));
    }), "No subjects yet."));
}

async function subjectPage(app, subject) {
  const s = await api(`/api/schemas/${enc(subject)}`);
  app.append(el("h2", {}, "Subject ", el("span", { class: "mono", data: { test: "subject-name" } }, subject)),
    ...s.versions.slice().reverse().map((v) => {
      let text = v.schema;
      try { text = pretty(JSON.parse(v.schema)); } catch (_) { /* not JSON: shown as written */ }
      return el("section", { class: "card", data: { test: "schema-version", version: v.version } },
        el("h3", {}, `Version ${v.version}`),
        dl([["Id", mono(String(v.id))], ["Type", v.type],
          ["References", v.references.length ? mono(v.references.map((r) => `${r.name} → ${r.subject} v${r.version}`).join(", ")) : "none"]]),
        el("pre", { class: "payload", data: { test: "schema-text" } }, text));
    }));
}

// ---- Groups ---------------------------------------------------------------------------------

async function groupsPage(app) {
  const list = el("section", { class: "card" });
  app.append(el("h2", {}, "Consumer groups"), list);
  poll(async () => {
    const groups = await api("/api/groups");
    fill(list, table("groups", ["Group", "Topics", "Members", "Generation", "Lag"],
      groups.map((g) => el("tr", { data: { test: "group-row", group: g.group } },
        el("td", {}, groupLink(g.group)), el("td", {}, g.topics.map((t, i) => [i ? ", " : "", topicLink(t)])),
        el("td", { class: "num" }, num(g.members)), el("td", { class: "num" }, num(g.generation)),
        el("td", { class: "num" }, num(g.lag)))), "No consumer groups."));
  });
}

async function groupPage(app, name) {
  const summary = el("section", { class: "card", id: "group-summary", data: { test: "group-summary" } });
  const [lagCard, lagBox] = chartCard("Total lag", "lag-chart");
  const members = el("section", { class: "card" });
  const offsets = el("section", { class: "card" });
  app.append(el("h2", {}, "Group ", el("span", { id: "group-name", class: "mono", data: { test: "group-name" } }, name)),
    el("div", { class: "row" }, summary, lagCard), offsets, members);
  const lag = lineChart(lagBox, "lag", "#dc2626");
  let resetShown = false;
  const writes = (await knowBroker()).console_writes;
  if (!writes) {
    app.append(el("p", { id: "reset-disabled", class: "muted", data: { test: "reset-disabled" } },
      "Offsets are read-only here: start the console with --console-writes to reset them."));
  }
  poll(async () => {
    const g = await api(`/api/groups/${enc(name)}`);
    lag.update(g.lag_history);
    lagBox.dataset.lastLag = g.lag_history.length ? String(g.lag_history[g.lag_history.length - 1][1]) : "";
    fill(summary, el("h3", {}, "Summary"), dl([["State", g.state], ["Protocol", g.protocol || "–"],
      ["Generation", num(g.generation)], ["Members", num(g.members.length)],
      ["Total lag", num(g.offsets.reduce((a, o) => a + (o.lag || 0), 0))]]));
    fill(offsets, el("h3", {}, "Committed offsets"), table("offsets", ["Topic", "Partition", "Committed", "Log end", "Lag"],
      g.offsets.map((o) => el("tr", { data: { test: "offset-row", topic: o.topic, partition: o.partition } },
        el("td", {}, topicLink(o.topic)), el("td", { class: "num" }, o.partition),
        el("td", { class: "num mono", data: { test: "committed" } }, o.committed === null ? "–" : num(o.committed)),
        el("td", { class: "num mono" }, num(o.log_end)), el("td", { class: "num", data: { test: "lag" } }, num(o.lag)))),
      "No committed offsets."));
    // A Kafka client's member has a client id and host, a static one an instance id; the
    // broker's own members have none: a column is shown only when some member has it.
    const extra = [["client_id", "Client id"], ["host", "Host"], ["group_instance_id", "Instance id"]]
      .filter(([key]) => g.members.some((m) => m[key]));
    fill(members, el("h3", {}, `Members (${g.members.length})`),
      table("members", ["Member", ...extra.map(([, h]) => h), "Assigned partitions"],
        g.members.map((m) => [mono(m.member_id), ...extra.map(([key]) => mono(m[key] || "–")),
          mono(m.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ") || "–")]),
        "No live members."));
    if (writes && !resetShown) {
      resetShown = true;
      app.append(resetForm(name, [...new Set(g.offsets.map((o) => o.topic))]));
    }
  });
}

/** The offset reset form (writes enabled only; the server refuses otherwise anyway). */
function resetForm(group, topics) {
  const to = el("select", { id: "reset-to", data: { test: "reset-to" } },
    ["earliest", "latest", "timestamp", "offset"].map((v) => el("option", { value: v }, v)));
  const value = el("input", { id: "reset-value", data: { test: "reset-value" }, placeholder: "offset or time (ms / ISO)", disabled: true });
  to.addEventListener("change", () => { value.disabled = to.value === "earliest" || to.value === "latest"; });
  const topic = el("select", { id: "reset-topic", data: { test: "reset-topic" } }, topics.map((t) => el("option", { value: t }, t)));
  const partitions = el("input", { id: "reset-partitions", data: { test: "reset-partitions" }, placeholder: "all, or 0,1,…" });
  const result = el("p", { id: "reset-result", class: "mono", data: { test: "reset-result" } });
  const submit = el("button", { id: "reset-submit", type: "submit", class: "danger", data: { test: "reset-submit" } }, "Reset offsets…");
  const form = el("form", { id: "reset-form", class: "card form", data: { test: "reset-form" } },
    el("h3", {}, "Reset committed offsets"),
    el("p", { class: "muted" }, "Refused while the group has live members."),
    el("label", {}, "Topic ", topic), el("label", {}, "To ", to), el("label", {}, "Value ", value),
    el("label", {}, "Partitions ", partitions), submit, result);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const body = { topic: topic.value, to: to.value, confirm: true };
    if (!value.disabled) body.value = to.value === "timestamp" && !/^\d+$/.test(value.value) ? Date.parse(value.value) : Number(value.value);
    if (partitions.value.trim()) body.partitions = partitions.value.split(",").map((p) => Number(p.trim()));
    const what = `Reset group ${group} on ${body.topic} to ${body.to}${"value" in body ? " " + body.value : ""}` +
      `${body.partitions ? " (partitions " + body.partitions.join(", ") + ")" : " (every partition)"}?`;
    if (!(await confirmDialog("Reset offsets", what))) return;
    result.className = "mono";
    try {
      const reply = await post(`/api/groups/${enc(group)}/reset`, body);
      result.textContent = "Reset: " + reply.offsets.map((o) => `partition ${o.partition} → offset ${o.offset}`).join(", ");
    } catch (error) {
      result.className = "mono error";
      result.textContent = error.message;
    }
  });
  return form;
}

/** Asks in the page's modal dialog; resolves true on Confirm. */
function confirmDialog(title, text) {
  const dialog = byId("confirm-dialog");
  byId("confirm-title").textContent = title;
  byId("confirm-text").textContent = text;
  dialog.returnValue = "";
  dialog.showModal();
  return new Promise((resolve) => dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true }));
}

// ---- Message browser ------------------------------------------------------------------------

const RENDERINGS = ["auto", "text", "json", "msgpack", "hex"];
const MAX_ROWS = 500; // rows kept while following: the oldest go first
const MAX_MATCHES = 100;

/** Hex as bytes, 8 to a line (a line fits the narrowest column). */
const hexDump = (hex) => (hex.match(/.{1,16}/g) || []).map((line) => line.match(/../g).join(" ")).join("\n");
const pretty = (value) => JSON.stringify(value, null, 2);

/**
 * A field `{size, truncated, utf8, json, msgpack, hex, schema?}` as `mode` asks, or as it best
 * reads: a value in Confluent's framing whose id the registry knows (`schema`) reads first as
 * its schema decodes it (Avro, JSON), else as "schema id N" and its bytes.
 */
function renderField(f, mode) {
  if (f === null) return el("span", { class: "muted" }, "null");
  let kind = mode, text;
  if (mode === "auto") {
    if (f.schema && f.schema.json !== undefined) [kind, text] = [`${f.schema.type.toLowerCase()} · schema id ${f.schema.id}`, pretty(f.schema.json)];
    else if (f.schema) [kind, text] = [`schema id ${f.schema.id} (${f.schema.type}${f.schema.error ? `: ${f.schema.error}` : ""}), hex`, hexDump(f.hex)];
    else if (f.json !== null) [kind, text] = ["json", pretty(f.json)];
    else if (f.utf8 !== null) [kind, text] = ["text", f.utf8];
    else if (f.msgpack !== null) [kind, text] = ["msgpack", pretty(f.msgpack)];
    else [kind, text] = ["hex", hexDump(f.hex)];
  } else if (mode === "text") text = f.utf8;
  else if (mode === "json") text = f.json === null ? null : pretty(f.json);
  else if (mode === "msgpack") text = f.msgpack === null ? null : pretty(f.msgpack);
  if (text === null || text === undefined) [kind, text] = [mode === "hex" ? "hex" : `not ${mode}, hex`, hexDump(f.hex)];
  return el("div", { class: "field" }, el("pre", { class: "payload" }, text),
    el("div", { class: "meta" }, `${kind} · ${bytes(f.size)}`, f.truncated
      ? el("span", { class: "badge badge-warn", data: { test: "truncated" } },
        `truncated: first ${bytes(f.hex.length / 2)} of ${bytes(f.size)} shown`) : null));
}

function recordRow(topic, partition, r, mode) {
  const permalink = `#/topics/${enc(topic)}/messages?partition=${partition}&offset=${r.offset}&limit=1`;
  return el("tr", { data: { test: "record", offset: r.offset } },
    el("td", { class: "mono num" }, link(permalink, String(r.offset), { title: "this record alone" })),
    el("td", { class: "mono nowrap" }, time(r.timestamp)),
    el("td", { class: "key", data: { test: "record-key" } }, renderField(r.key, mode)),
    el("td", { class: "value", data: { test: "record-value" } }, renderField(r.value, mode)),
    el("td", { class: "headers" }, r.headers.length ? el("ul", { class: "headers" }, r.headers.map((h) => el("li", { data: { test: "header" } },
      el("span", { class: "mono header-key", data: { test: "header-key" } }, h.key),
      el("span", { class: "header-value", data: { test: "header-value" } }, renderField(h.value, mode))))) : el("span", { class: "muted" }, "–")),
    el("td", {}, r.trace ? el("div", { data: { test: "trace" } }, "span ",
      link(permalink, r.trace.span_id, { class: "mono", title: `trace ${r.trace.trace_id}`, data: { test: "span-id" } }),
      el("div", { class: "mono muted small" }, "trace " + r.trace.trace_id)) : el("span", { class: "muted" }, "–")));
}

const RECORD_HEADERS = ["Offset", "Timestamp", "Key", "Value", "Headers", "Trace"];

async function messagesPage(app, name, params) {
  const t = await api(`/api/topics/${enc(name)}`);
  const partition = Number(params.get("partition") || 0);
  const limit = Number(params.get("limit") || 50);
  const mode = params.has("timestamp") ? "timestamp" : params.has("offset") ? "offset" : "newest";
  let render = RENDERINGS.includes(params.get("render")) ? params.get("render") : "auto";
  const newestFirst = mode === "newest";
  const base = `#/topics/${enc(name)}/messages`;
  const go = (query) => { location.hash = `${base}?${new URLSearchParams({ partition, limit, render, ...query })}`; };

  // The query form: where to start reading.
  const partitionSelect = el("select", { id: "partition", data: { test: "partition" } },
    t.partitions.map((p) => el("option", { value: p.partition, selected: p.partition === partition }, `partition ${p.partition}`)));
  const modeSelect = el("select", { id: "mode", data: { test: "mode" } },
    [["newest", "newest first"], ["offset", "from offset"], ["timestamp", "from time"]].map(([v, label]) => el("option", { value: v, selected: v === mode }, label)));
  const at = el("input", { id: "at", data: { test: "at" }, value: params.get(mode) === "true" ? "" : params.get(mode) || "", placeholder: "offset, or time (ms / ISO)" });
  const limitInput = el("input", { id: "limit", type: "number", min: 1, max: 500, value: limit, class: "narrow" });
  const form = el("form", { id: "browse-form", class: "toolbar", data: { test: "browse-form" } },
    partitionSelect, modeSelect, at, el("label", {}, "limit ", limitInput), el("button", { type: "submit", id: "go", data: { test: "go" } }, "Go"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const v = at.value.trim();
    const query = { partition: partitionSelect.value, limit: limitInput.value };
    if (modeSelect.value === "newest") query.newest = "true";
    else if (modeSelect.value === "offset") query.offset = v || "0";
    else query.timestamp = /^\d+$/.test(v) ? v : String(Date.parse(v) || 0);
    location.hash = `${base}?${new URLSearchParams({ ...query, render })}`;
  });

  // How payloads are shown, and following live.
  const toggle = el("div", { id: "render", class: "segmented", data: { test: "render" } });
  const follow = el("input", { type: "checkbox", id: "follow", data: { test: "follow" }, checked: params.get("follow") === "true" });
  const bounds = el("p", { id: "bounds", class: "muted mono", data: { test: "bounds" } });
  const rows = el("tbody");
  const pager = el("div", { class: "toolbar" });
  app.append(el("h2", {}, "Messages in ", topicLink(name)), el("section", { class: "card" }, form,
    el("div", { class: "toolbar" }, el("span", { class: "muted" }, "Show as"), toggle,
      el("label", { class: "follow" }, follow, " follow live")), bounds),
  el("section", { class: "card" }, el("table", { id: "records", data: { test: "records" } },
    el("thead", {}, el("tr", {}, RECORD_HEADERS.map((h) => el("th", {}, h)))), rows), pager),
  searchPanel(name, partition, () => render));

  let records = [], logStart = 0, logEnd = 0, next = null;
  const draw = () => {
    records.sort((a, b) => (newestFirst ? b.offset - a.offset : a.offset - b.offset));
    if (records.length > MAX_ROWS) records = newestFirst ? records.slice(0, MAX_ROWS) : records.slice(-MAX_ROWS);
    rows.replaceChildren(...records.map((r) => recordRow(name, partition, r, render)));
    if (!records.length) rows.append(el("tr", {}, el("td", { colSpan: 6, class: "muted" }, "No records here.")));
    const offsets = records.map((r) => r.offset);
    bounds.textContent = `partition ${partition} · log start ${num(logStart)} · log end ${num(logEnd)}` +
      (records.length ? ` · showing ${num(Math.min(...offsets))}–${num(Math.max(...offsets))}` : "");
    const lowest = offsets.length ? Math.min(...offsets) : logEnd;
    fill(pager, el("button", { id: "older", data: { test: "older" }, disabled: lowest <= logStart,
      onclick: () => go({ offset: Math.max(logStart, lowest - limit) }) }, "← Older"),
    el("button", { id: "newer", data: { test: "newer" }, disabled: next === null || next >= logEnd,
      onclick: () => go({ offset: next }) }, "Newer →"),
    el("button", { id: "newest", data: { test: "newest" }, onclick: () => go({ newest: "true" }) }, "Newest"));
  };
  for (const r of RENDERINGS) {
    toggle.append(el("button", { type: "button", class: r === render ? "on" : "", data: { test: `render-${r}` },
      onclick: (e) => {
        render = r;
        for (const b of toggle.children) b.classList.toggle("on", b === e.target);
        const hash = location.hash.includes("render=") ? location.hash.replace(/render=[a-z]+/, `render=${r}`)
          : `${location.hash}${location.hash.includes("?") ? "&" : "?"}render=${r}`;
        history.replaceState(null, "", hash);
        draw();
      } }, r));
  }
  const first = new URLSearchParams({ limit });
  if (mode === "newest") first.set("newest", "true");
  else first.set(mode, params.get(mode));
  const page0 = await api(`/api/topics/${enc(name)}/partitions/${partition}/records?${first}`);
  ({ log_start: logStart, log_end: logEnd, next_offset: next } = page0);
  records = page0.records;
  draw();
  poll(async () => {
    if (!follow.checked || next === null) return;
    const more = await api(`/api/topics/${enc(name)}/partitions/${partition}/records?offset=${next}&limit=${limit}`);
    ({ log_start: logStart, log_end: logEnd } = more);
    if (more.next_offset !== null) next = more.next_offset;
    const seen = new Set(records.map((r) => r.offset));
    records.push(...more.records.filter((r) => !seen.has(r.offset)));
    draw();
  });
}

/** Search one partition by key or substring, a window at a time, with progress and Stop. */
function searchPanel(topic, partition, render) {
  const kind = el("select", { id: "search-kind", data: { test: "search-kind" } },
    el("option", { value: "contains" }, "key or value contains"), el("option", { value: "key" }, "key is"));
  const text = el("input", { id: "search-text", data: { test: "search-text" }, placeholder: "text" });
  const windowInput = el("input", { id: "search-window", type: "number", min: 1, max: 100000, value: 10000, class: "narrow" });
  const progress = el("progress", { id: "search-progress", max: 1, value: 0, data: { test: "search-progress" } });
  const status = el("span", { id: "search-status", class: "muted", data: { test: "search-status" } });
  const stop = el("button", { type: "button", id: "search-stop", data: { test: "search-stop" }, disabled: true }, "Stop");
  const rows = el("tbody");
  const form = el("form", { id: "search-form", class: "toolbar", data: { test: "search-form" } },
    kind, text, el("label", {}, "window ", windowInput), el("button", { type: "submit", id: "search-go", data: { test: "search-go" } }, "Search"),
    stop, progress, status);
  let run = 0; // the search running now; a new search or Stop ends the one before
  stop.addEventListener("click", () => { run++; stop.disabled = true; status.textContent += " (stopped)"; });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const mine = ++run, token = page.token;
    const matches = [];
    let from = null, logStart = null;
    rows.replaceChildren();
    stop.disabled = false;
    try {
      while (mine === run && token === page.token) {
        const q = new URLSearchParams({ partition, window: windowInput.value, [kind.value]: text.value });
        if (from !== null) q.set("from", from);
        const r = await api(`/api/topics/${enc(topic)}/search?${q}`);
        if (mine !== run) break;
        if (logStart === null) logStart = r.scanned_from;
        matches.push(...r.matches.slice(0, MAX_MATCHES - matches.length));
        rows.replaceChildren(...matches.map((m) => recordRow(topic, partition, m, render())));
        const total = Math.max(1, r.log_end - logStart);
        progress.value = Math.min(1, (r.scanned_to - logStart) / total);
        status.textContent = `scanned ${num(r.scanned_to - logStart)} of ${num(r.log_end - logStart)} records · ${matches.length} match${matches.length === 1 ? "" : "es"}`;
        if (r.done || matches.length >= MAX_MATCHES) { status.textContent += r.done ? " · done" : " · first 100 shown"; break; }
        from = r.scanned_to;
      }
    } catch (error) {
      status.textContent = error.message;
    }
    if (mine === run) stop.disabled = true;
  });
  return el("section", { class: "card", id: "search", data: { test: "search" } }, el("h3", {}, `Search partition ${partition}`), form,
    el("table", { id: "search-matches", data: { test: "search-matches" } }, el("thead", {}, el("tr", {}, RECORD_HEADERS.map((h) => el("th", {}, h)))), rows));
}

route();
