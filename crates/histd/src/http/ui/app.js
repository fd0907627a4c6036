// histd web UI. Everything it shows comes from the public /api/v1 endpoints.
// State lives in the URL (?series=&type=&range=&from=&to=&q=&slo=&refresh=&filter=&show=) so
// links can be shared.
"use strict";

const RANGES = { "15m": 900, "1h": 3600, "6h": 21600, "24h": 86400, "7d": 604800 };
const STEPS = [10, 30, 60, 300, 900, 3600, 21600, 86400];
const DEFAULT_QUANTILES = [0.5, 0.9, 0.99, 0.999];
const LINE_COLORS = ["#2563eb", "#16a34a", "#dc2626", "#9333ea", "#ea580c", "#0891b2"];

const $ = (id) => document.getElementById(id);
const state = readState();
let refreshTimer = null;

// ---------- state and URL ----------

function readState() {
  const p = new URLSearchParams(location.search);
  const numbers = (text) => (text || "").split(",").map(Number).filter((q) => q >= 0 && q <= 1 && text !== "");
  return {
    series: p.get("series"),
    type: p.get("type"),
    range: p.get("range") || (p.get("from") ? "custom" : "1h"),
    from: p.get("from") ? Number(p.get("from")) : null,
    to: p.get("to") ? Number(p.get("to")) : null,
    step: p.get("step") ? Number(p.get("step")) : null,
    quantiles: p.has("q") ? numbers(p.get("q")) : DEFAULT_QUANTILES.slice(),
    slo: p.get("slo"),
    refresh: Number(p.get("refresh") || 0),
    filter: p.get("filter") || "",
    show: (p.get("show") || "").split(",").filter(Boolean),
  };
}

function writeState() {
  const p = new URLSearchParams();
  if (state.series) p.set("series", state.series);
  if (state.type) p.set("type", state.type);
  p.set("range", state.range);
  if (state.range === "custom" && state.from && state.to) {
    p.set("from", state.from);
    p.set("to", state.to);
  }
  if (state.step) p.set("step", state.step);
  if (state.quantiles.join(",") !== DEFAULT_QUANTILES.join(",")) p.set("q", state.quantiles.join(","));
  if (state.slo) p.set("slo", state.slo);
  if (state.refresh) p.set("refresh", state.refresh);
  if (state.filter) p.set("filter", state.filter);
  if (state.show.length) p.set("show", state.show.join(","));
  history.replaceState(null, "", "?" + p.toString());
}

/** The time window in unix seconds, and a step that gives at most `points` steps. */
function timeWindow(points) {
  let from, to;
  if (state.range === "custom" && state.from && state.to) {
    from = state.from;
    to = state.to;
  } else {
    to = Math.floor(Date.now() / 1000) + 1;
    from = to - (RANGES[state.range] || 3600);
  }
  const step = state.step || STEPS.find((s) => (to - from) / s <= points) || 86400;
  return { from, to, step };
}

// ---------- API ----------

/** GET an API path; with `signal`, a call whose render was superseded throws an AbortError. */
async function api(path, params, signal) {
  const response = await fetch(`/api/v1/${path}?` + new URLSearchParams(params), { signal });
  const body = await response.json().catch(() => ({}));
  signal?.throwIfAborted();
  if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
  if (Array.isArray(body.members)) notePartial(body.members);
  return body;
}

/** Members of this global's group (global.peers) whose last answer did not come: URL → why. */
const missingMembers = new Map();

/**
 * A group's answer names its members and whether each answered: the page says when what it
 * shows is partial (a member down), above the view, until every member answers again.
 */
function notePartial(members) {
  for (const member of members) {
    if (member.answered) missingMembers.delete(member.url);
    else missingMembers.set(member.url, member.error || "no answer");
  }
  const banner = $("partial");
  banner.hidden = missingMembers.size === 0;
  const missing = [...missingMembers].map(([url, why]) => `${url} (${why})`).join("; ");
  banner.textContent = `Partial: ${missingMembers.size} of ${members.length} members of this group did not answer, so what is shown lacks their series: ${missing}`;
}

/**
 * One render's requests: starting a new one aborts the one before (its pending requests
 * fail with an AbortError, and `live()` turns false before it touches the page again).
 */
function renderRun(previous) {
  previous?.abort();
  const controller = new AbortController();
  return {
    abort: () => controller.abort(),
    live: () => !controller.signal.aborted,
    get: (path, params) => api(path, params, controller.signal),
  };
}

const superseded = (error) => error.name === "AbortError";
let viewRun = null;
let sparkRun = null;
let filterTimer = null;
/** Keystrokes in the filter box re-render the list once typing pauses this long. */
const FILTER_DEBOUNCE_MS = 250;

const sum = (points) => points.reduce((total, p) => total + p[1], 0);

// ---------- formatting ----------

function formatNumber(value) {
  if (value === null || value === undefined || !isFinite(value)) return "–";
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude >= 1e6 || magnitude < 1e-3)) return value.toExponential(2);
  return Number(value.toPrecision(4)).toLocaleString("en-US");
}

function formatTime(unix, withDate) {
  const d = new Date(unix * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withDate ? `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}` : time;
}

function element(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of [].concat(children)) node.append(child);
  return node;
}

// ---------- axes: ticks chosen so that labels never meet, written as page text ----------

/** The axes' font: the label elements' (app.css) and the one their widths are measured in. */
const AXIS_FONT = "11px system-ui, sans-serif";
/** A label's height, and the least room between two labels side by side, in CSS pixels. */
const LABEL_HEIGHT = 14;
const LABEL_GAP = 12;
/** Round time steps for ticks, in seconds; past the last, whole days. */
const TIME_TICK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

let measurer = null;
/** A text's width in the axes' font, in CSS pixels. */
function textWidth(text) {
  measurer ||= document.createElement("canvas").getContext("2d");
  measurer.font = AXIS_FONT;
  return measurer.measureText(text).width;
}

/** The middle of a step's part inside [from, to] (the first and last steps may be clipped). */
const stepMiddle = (t, step, from, to) => (Math.max(t, from) + Math.min(t + step, to)) / 2;

/** How a time axis over [from, to] writes a time: with the date when it spans over a day. */
const timeLabel = (from, to) => (t) => formatTime(t, to - from > 86400);

/**
 * Tick times for a time axis `pixels` wide: the multiples (of local time) of the smallest round
 * step whose labels do not meet. Given `every`, the step is a whole multiple of it, so that a
 * narrower chart's ticks are among a wider one's (the SLO charts share the heatmap's axis).
 */
function timeTicks(from, to, pixels, every = null) {
  const label = timeLabel(from, to);
  const room = Math.max(textWidth(label(from)), textWidth(label(to))) + LABEL_GAP;
  const perSecond = pixels / Math.max(1, to - from);
  const candidates = every ? Array.from({ length: 1000 }, (_, k) => every * (k + 1)) : TIME_TICK_STEPS;
  const step = candidates.find((s) => s * perSecond >= room) || 86400 * Math.ceil(room / perSecond / 86400);
  const offset = -new Date(from * 1000).getTimezoneOffset() * 60;
  const ticks = [];
  for (let t = Math.ceil((from + offset) / step) * step - offset; t <= to; t += step) ticks.push(t);
  return { step, ticks };
}

/** Candidate label values for a log axis over [low, high], densest first: 1, 2 and 5 of each
 * power of ten, then 1 of each, then every 2nd, 3rd, 5th… power. */
function logTickSets(low, high) {
  const first = Math.floor(Math.log10(low)), last = Math.ceil(Math.log10(high));
  const within = (values) => values.filter((v) => v >= low && v <= high);
  const dense = [];
  for (let e = first; e <= last; e++) for (const m of [1, 2, 5]) dense.push(Number(`${m}e${e}`));
  const sets = [within(dense)];
  for (const k of [1, 2, 3, 5, 10, 20, 50, 100]) {
    const powers = [];
    for (let e = Math.ceil(first / k) * k; e <= last; e += k) powers.push(Number(`1e${e}`));
    sets.push(within(powers));
  }
  return sets;
}

/** The densest of `sets` whose labels (centred at `position(v)`, `extent(v)` long) keep `gap` apart. */
function spacedTicks(sets, position, extent, gap) {
  const fits = (values) => {
    const spans = values.map((v) => [position(v) - extent(v) / 2, position(v) + extent(v) / 2]).sort((a, b) => a[0] - b[0]);
    return spans.every((span, i) => i === 0 || span[0] - spans[i - 1][1] >= gap);
  };
  return sets.find(fits) || sets[sets.length - 1];
}

/** Round values for a linear axis over [min, max], about one per `LABEL_HEIGHT + 16` pixels. */
function linearTicks(min, max, pixels) {
  if (!(max > min)) return [min];
  const raw = (max - min) / Math.max(1, Math.floor(pixels / (LABEL_HEIGHT + 16)));
  const magnitude = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw);
  const ticks = [];
  for (let k = Math.ceil(min / step); k * step <= max; k++) ticks.push(Number((k * step).toPrecision(12)));
  return ticks;
}

/**
 * The layer of a chart's axis labels: text elements over `holder` (so a reader can select them
 * and a test can measure them), emptied for a new drawing.
 */
function axisLayer(holder) {
  let layer = holder.querySelector(":scope > .axis-layer");
  if (!layer) layer = holder.appendChild(element("div", { class: "axis-layer" }));
  layer.replaceChildren();
  return layer;
}

/**
 * Writes labels on a layer: each `{ text, x, y, align }` in CSS pixels from the layer's corner,
 * `align` "below" (centred under x, y), "before" (ending at x, centred on y) or "after"
 * (starting at x); `value` is what it stands for. A label that would leave the layer or meet one already written is left out:
 * labels are never cut and never overlap.
 */
function placeLabels(layer, axis, labels) {
  const width = layer.clientWidth, height = layer.clientHeight;
  const placed = [...layer.children].map((child) => JSON.parse(child.dataset.box));
  for (const { text, x, y, align, value = "" } of labels) {
    const w = textWidth(text), h = LABEL_HEIGHT;
    const box = align === "below" ? [x - w / 2, y, x + w / 2, y + h] : align === "before" ? [x - w, y - h / 2, x, y + h / 2] : [x, y - h / 2, x + w, y + h / 2];
    if (box[0] < 0 || box[1] < 0 || box[2] > width || box[3] > height) continue;
    if (placed.some((p) => box[0] < p[2] + 2 && p[0] < box[2] + 2 && box[1] < p[3] && p[1] < box[3])) continue;
    placed.push(box);
    layer.append(element("span", { class: "axis-label", "data-axis": axis, "data-value": value, "data-box": JSON.stringify(box), style: `left:${box[0]}px;top:${box[1]}px`, text }));
  }
}

/** Writes down on a layer the time axis it draws: the range, its ticks and the plot's span. */
function describeTimeAxis(layer, { from, to }, ticks, plotLeft, plotRight) {
  Object.assign(layer.dataset, { from, to, ticks: JSON.stringify(ticks), plot: JSON.stringify([plotLeft, plotRight]) });
}

function setStatus(text, kind) {
  const status = $("status");
  status.textContent = text;
  status.className = kind || "muted";
}

// ---------- metric browser ----------
//
// One row per name and type (the merged series of all its tag sets); a name with several tag
// sets expands into one row per tag set. The list is virtual: only the rows in view are in
// the page, so 100k series scroll as smoothly as ten. histd's own series (prefixStats) and
// histd bench's are folded away at the bottom, with their counts.

const TYPE_TITLES = { timer: "Timers", counter: "Counters", gauge: "Gauges", set: "Sets" };
const TYPE_HINTS = { timer: "Timers and histograms (ms, h, d lines)", counter: "Counters (c lines)", gauge: "Gauges (g lines)", set: "Sets (s lines)" };
const SPARK_EXPR = { timer: "count", counter: "rate", gauge: "value", set: "cardinality" };
const FOLDED = { histd: "histd's own series", bench: "histd bench series" };
/** Every row of the list is this tall (px): the list places rows by arithmetic. */
const ROW_HEIGHT = 26;
/** Rows drawn above and below the visible ones, so a short scroll shows no blank. */
const OVERSCAN = 12;
/** The most names one answer lists. */
const NAMES_LIMIT = 100000;

/** Names per origin as the server answered (`origins` counts series before the origin filter). */
let listing = { user: [], histd: [], bench: [], origins: {}, truncated: false };
/** Tag sets of expanded names: key `type|name` → list of tag arrays (or "loading"). */
const expanded = new Map();
/** Sparkline points per `type|selector` for the current range. */
let sparkCache = new Map();
let rows = [];
let firstLoad = true;

function selectorOf(name, tags) {
  return tags && tags.length ? `${name}{${tags.join(",")}}` : name;
}

const entryKey = (entry) => `${entry.type}|${entry.name}`;
/** A glob that matches exactly `name` (the store's GLOB: `*`, `?`, `[` are escaped as sets). */
const exactGlob = (name) => name.replace(/[*?[]/g, (c) => `[${c}]`);

function shownOrigins() {
  return ["user", ...state.show.filter((o) => FOLDED[o])];
}

async function loadSeries() {
  try {
    const base = { group: "name", limit: NAMES_LIMIT };
    if (state.filter) base.contains = state.filter;
    const answers = await Promise.all(shownOrigins().map((origin) => api("series", { ...base, origin })));
    listing = { user: [], histd: [], bench: [], origins: answers[0].origins, truncated: answers.some((a) => a.truncated) };
    shownOrigins().forEach((origin, i) => (listing[origin] = answers[i].series));
    for (const key of expanded.keys()) expanded.set(key, null); // tag sets are read again
    await Promise.all([...expanded.keys()].map((key) => loadTagSets(key)));
    renderBrowser();
    if (firstLoad) openFirstTimer();
    firstLoad = false;
    listed = true;
    showState();
  } catch (error) {
    $("series-list").replaceChildren(element("p", { class: "error", text: `Cannot list metrics: ${error.message}` }));
    showState("error");
  }
}

/** With no series picked, the first timer opens: the page starts with a histogram. */
function openFirstTimer() {
  if (state.series) return;
  const timer = listing.user.find((entry) => entry.type === "timer");
  if (timer) pick(timer.name, timer.type);
}

async function loadTagSets(key) {
  const [type, name] = [key.slice(0, key.indexOf("|")), key.slice(key.indexOf("|") + 1)];
  const params = { match: exactGlob(name), type, limit: NAMES_LIMIT };
  if (state.filter) params.contains = state.filter;
  try {
    expanded.set(key, (await api("series", params)).series.map((s) => s.tags));
  } catch (error) {
    expanded.set(key, []);
  }
}

/** The list as rows: a title per type, names (and the tag sets of expanded ones), then the folds. */
function buildRows() {
  const out = [];
  const user = listing.user;
  for (const type of Object.keys(TYPE_TITLES)) {
    const members = user.filter((entry) => entry.type === type);
    if (!members.length) continue;
    const series = members.reduce((n, entry) => n + entry.tag_sets, 0);
    const count = series === members.length ? `${members.length}` : `${members.length} names, ${series} series`;
    out.push({ kind: "title", text: `${TYPE_TITLES[type]} (${count})`, hint: TYPE_HINTS[type] });
    for (const entry of members) pushEntry(out, entry);
  }
  for (const origin of Object.keys(FOLDED)) {
    const count = listing.origins[origin] || 0;
    if (!count) continue;
    const shown = state.show.includes(origin);
    out.push({ kind: "fold", origin, count, shown });
    if (shown) for (const entry of listing[origin]) pushEntry(out, entry);
  }
  return out;
}

function pushEntry(out, entry) {
  const key = entryKey(entry);
  const open = expanded.has(key);
  out.push({ kind: "name", entry, open });
  if (!open) return;
  const tagSets = expanded.get(key);
  if (!tagSets) out.push({ kind: "note", text: "Loading tag sets…" });
  else for (const tags of tagSets) out.push({ kind: "tags", entry, tags });
}

function renderBrowser() {
  const list = $("series-list");
  rows = buildRows();
  const anything = listing.user.length || Object.values(listing.origins).some((n) => n > 0);
  if (!anything) {
    list.replaceChildren(element("p", { class: "muted", text: state.filter ? "Nothing matches the filter." : "No metrics stored yet. Send some to UDP 8125." }));
    return;
  }
  if (!list.querySelector(".rows")) {
    list.replaceChildren(element("div", { class: "rows" }));
  }
  const notice = listing.truncated ? `More than ${NAMES_LIMIT.toLocaleString("en-US")} names: narrow them with the filter.` : "";
  list.dataset.rows = rows.length;
  list.title = notice;
  list.querySelector(".rows").style.height = `${rows.length * ROW_HEIGHT}px`;
  renderVisibleRows();
}

/** Puts the rows in view (and a few around them) into the page; the rest are not there. */
function renderVisibleRows() {
  const list = $("series-list");
  const holder = list.querySelector(".rows");
  if (!holder) return;
  const first = Math.max(0, Math.floor(list.scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((list.scrollTop + list.clientHeight) / ROW_HEIGHT) + OVERSCAN);
  const nodes = [];
  for (let i = first; i < last; i++) {
    const node = rowElement(rows[i]);
    node.style.top = `${i * ROW_HEIGHT}px`;
    nodes.push(node);
  }
  holder.replaceChildren(...nodes);
  scheduleSparklines();
}

function rowElement(row) {
  switch (row.kind) {
    case "title": return element("h2", { class: "row", text: row.text, title: row.hint });
    case "note": return element("p", { class: "row muted", text: row.text });
    case "fold": return foldRow(row);
    case "name": return nameRow(row);
    default: return tagRow(row);
  }
}

function nameRow({ entry, open }) {
  const many = entry.tag_sets > 1;
  const toggle = many
    ? element("button", { class: "toggle", "aria-label": `${open ? "hide" : "show"} the tag sets of ${entry.name}`, "aria-expanded": String(open), text: open ? "▾" : "▸", onclick: () => toggleTagSets(entry) })
    : element("span", { class: "toggle" });
  const badge = many ? element("span", { class: "count", text: `${entry.tag_sets}` , title: `${entry.tag_sets} tag sets, merged in this row` }) : "";
  const button = seriesButton(entry.name, [], entry.type, [element("span", { class: "name", text: entry.name }), badge]);
  if (many) button.dataset.tagSets = entry.tag_sets;
  return element("div", { class: "row entry" }, [toggle, button]);
}

function tagRow({ entry, tags }) {
  const text = tags.length ? tags.join(", ") : "(no tags)";
  const label = element("span", { class: "tags", text });
  const button = seriesButton(entry.name, tags, entry.type, [label]);
  button.title = selectorOf(entry.name, tags);
  return element("div", { class: "row entry tagset" }, [element("span", { class: "toggle" }), button]);
}

function foldRow({ origin, count, shown }) {
  const children = [
    element("button", { class: "fold-toggle", "aria-expanded": String(shown), text: `${shown ? "▾" : "▸"} ${FOLDED[origin]} (${count.toLocaleString("en-US")})`, onclick: () => toggleOrigin(origin) }),
  ];
  if (origin === "bench") {
    children.push(element("button", { class: "forget-all", text: "Forget all", onclick: () => forgetSeries({ origin: "bench" }, `all ${count.toLocaleString("en-US")} series sent by histd bench`) }));
  }
  return element("div", { class: "row fold", "data-origin": origin }, children);
}

function seriesButton(name, tags, type, children) {
  const selector = selectorOf(name, tags);
  const spark = element("canvas", { width: 60, height: 18, "data-selector": selector, "data-type": type });
  const selected = state.series === selector && state.type === type;
  return element("button", {
    class: "series" + (selected ? " selected" : ""),
    "data-series": selector,
    "data-type": type,
    onclick: () => pick(selector, type),
  }, [...children, spark]);
}

function pick(selector, type) {
  if (state.series === selector && state.type === type) return; // already shown
  state.series = selector;
  state.type = type;
  writeState();
  renderVisibleRows();
  renderView();
}

async function toggleTagSets(entry) {
  const key = entryKey(entry);
  if (expanded.has(key)) {
    expanded.delete(key);
    renderBrowser();
    return;
  }
  expanded.set(key, null);
  renderBrowser();
  await loadTagSets(key);
  renderBrowser();
}

function toggleOrigin(origin) {
  state.show = state.show.includes(origin) ? state.show.filter((o) => o !== origin) : [...state.show, origin];
  writeState();
  loadSeries();
}

let sparkTimer = null;
/** Sparklines of the rows in view, once scrolling pauses; each is fetched once per range. */
function scheduleSparklines() {
  clearTimeout(sparkTimer);
  const list = $("series-list");
  for (const canvas of list.querySelectorAll("canvas[data-selector]")) {
    const cached = sparkCache.get(`${canvas.dataset.type}|${canvas.dataset.selector}`);
    if (cached) drawSparkline(canvas, cached.points, cached.from, cached.to);
  }
  sparkTimer = setTimeout(() => drawSparklines(list), 150);
}

async function drawSparklines(list) {
  const run = sparkRun = renderRun(sparkRun);
  const { from, to } = timeWindow(30);
  const step = Math.max(10, Math.ceil((to - from) / 30));
  const canvases = [...list.querySelectorAll("canvas[data-selector]")]
    .filter((c) => !sparkCache.has(`${c.dataset.type}|${c.dataset.selector}`))
    .slice(0, 60);
  await Promise.all(canvases.map(async (canvas) => {
    const expr = `${SPARK_EXPR[canvas.dataset.type]}(${canvas.dataset.selector})`;
    try {
      const { points } = await run.get("query", { expr, from, to, step });
      sparkCache.set(`${canvas.dataset.type}|${canvas.dataset.selector}`, { points, from, to });
      if (canvas.isConnected) drawSparkline(canvas, points, from, to);
    } catch (_) { /* a sparkline is decoration (or superseded); the view shows errors */ }
  }));
}

function drawSparkline(canvas, points, from, to) {
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  if (!points.length) return;
  const values = points.map((p) => p[1]);
  const low = Math.min(...values), high = Math.max(...values);
  context.strokeStyle = context.fillStyle = "#2563eb";
  const place = ([t, v]) => [
    ((t - from) / (to - from)) * canvas.width,
    canvas.height - 2 - (high > low ? ((v - low) / (high - low)) * (canvas.height - 4) : (canvas.height - 4) / 2),
  ];
  if (points.length === 1) {
    const [x, y] = place(points[0]); // one point is a dot, not an invisible line
    context.fillRect(Math.min(x, canvas.width - 3) - 1, y - 1, 3, 3);
    return;
  }
  context.beginPath();
  points.forEach((point, i) => {
    const [x, y] = place(point);
    i ? context.lineTo(x, y) : context.moveTo(x, y);
  });
  context.stroke();
}

// ---------- forgetting series ----------

/** The request that forgets what the view shows: a tag set exactly, or a name with all of its. */
function forgetParamsOf(selector, type) {
  const tagged = selector.includes("{");
  return { name: selector, type, exact: tagged ? "1" : "0" };
}

/** Asks, then deletes the series `params` pick (in histd and in the store) and says what went. */
async function forgetSeries(params, description) {
  const question = `Forget ${description}?\n\nEvery stored point of it is deleted, at every resolution, and histd stops reporting it. ` +
    "This cannot be undone. If a client still sends it, it comes back from then on.";
  if (!window.confirm(question)) return;
  try {
    const response = await fetch("/api/v1/series?" + new URLSearchParams(params), { method: "DELETE" });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.error || `${response.status} ${response.statusText}`);
    sparkCache = new Map();
    if (params.origin || (state.series && params.name === state.series)) {
      state.series = null;
      state.type = null;
      writeState();
      renderView();
    }
    await loadSeries();
    loadStoreUsage();
    setStatus(`Forgot ${body.forgotten.toLocaleString("en-US")} series (${body.points.toLocaleString("en-US")} stored points).`);
    $("status").dataset.forgotten = body.forgotten;
  } catch (error) {
    setStatus(`Cannot forget: ${error.message}`, "error");
  }
}

/** The view's action: forget the series shown. */
function renderViewActions() {
  const actions = $("view-actions");
  if (!state.series) {
    actions.replaceChildren();
    return;
  }
  const tagged = state.series.includes("{");
  const entry = listing.user.concat(listing.histd, listing.bench).find((e) => e.name === state.series && e.type === state.type);
  const what = !tagged && entry && entry.tag_sets > 1 ? `${state.series} (${state.type}, all ${entry.tag_sets} tag sets)` : `${state.series} (${state.type})`;
  actions.replaceChildren(element("button", {
    id: "forget",
    class: "forget",
    text: "Forget this series…",
    title: "Delete it from histd and its store",
    onclick: () => forgetSeries(forgetParamsOf(state.series, state.type), what),
  }));
}

// ---------- views ----------

// ---------- the page's state ----------
//
// `<html data-state>` says when the first screen is drawn, for a screenshot tool or a test to
// wait for: `loading` until the metric list and the view it opens are drawn, then `ready`
// (`error` when the view could not be drawn; its status says why).

let listed = false;
let viewPending = true;

function showState(kind) {
  if (kind === "error") document.documentElement.dataset.state = "error";
  else if (listed && !viewPending) document.documentElement.dataset.state = "ready";
}

async function renderView() {
  const content = $("content");
  renderViewActions();
  if (!state.series) {
    content.replaceChildren();
    setStatus("Pick a metric on the left.");
    viewPending = false;
    showState();
    return;
  }
  const run = viewRun = renderRun(viewRun);
  viewPending = true;
  setStatus(`Loading ${state.series}…`);
  try {
    const type = state.type || (await guessType(state.series, run));
    if (type === "timer") await renderTimer(content, state.series, run);
    else await renderLines(content, state.series, type, run);
    if (run === viewRun) {
      viewPending = false;
      showState();
    }
  } catch (error) {
    if (!superseded(error)) {
      setStatus(`Error: ${error.message}`, "error");
      showState("error");
    }
  }
}

async function guessType(selector, run) {
  const name = selector.split("{")[0];
  const found = (await run.get("series", { match: name })).series;
  return found.length ? found[0].type : "timer";
}

const LINE_EXPR = { counter: ["rate", "per second"], gauge: ["value", "value"], set: ["cardinality", "distinct members"] };

async function renderLines(content, selector, type, run) {
  const [fn, unit] = LINE_EXPR[type] || LINE_EXPR.counter;
  const { from, to, step } = timeWindow(240);
  const { points } = await run.get("query", { expr: `${fn}(${selector})`, from, to, step });
  const panel = element("div", { class: "panel" }, [element("h3", { text: `${selector}: ${unit}` })]);
  content.replaceChildren(panel);
  if (!points.length) {
    setStatus(`No data for ${selector} in this range.`);
    return;
  }
  lineChart(panel, [{ label: `${fn}`, points }], { from, to, step });
  setStatus(`${selector}, ${points.length} steps of ${step} s.`);
}

/**
 * A line chart over the time range [from, to] (its x axis is the range, not the data's span),
 * its ticks a multiple of `every` seconds when given; labels written by `placeLabels`.
 */
function lineChart(container, lines, { from, to, step, every = null }, height = 220) {
  const times = [...new Set(lines.flatMap((l) => l.points.map((p) => p[0])))].sort((a, b) => a - b);
  const data = [times.map((t) => stepMiddle(t, step, from, to))];
  for (const line of lines) {
    const byTime = new Map(line.points.map((p) => [p[0], p[1]]));
    data.push(times.map((t) => (byTime.has(t) ? byTime.get(t) : null)));
  }
  const width = Math.max(260, container.clientWidth - 8);
  const label = timeLabel(from, to);
  const ratio = globalThis.devicePixelRatio || 1;
  const ticks = { x: [], y: [] };
  // uPlot lays out the plot and draws grid lines at these ticks; its own labels are drawn
  // transparent (they size the axes) and the page writes them as text.
  const options = {
    width, height,
    scales: { x: { time: false, range: () => [from, to] } },
    series: [
      { value: (u, t) => (t === null ? "--" : formatTime(t, true)) },
      ...lines.map((l, i) => ({ label: l.label, stroke: LINE_COLORS[i % LINE_COLORS.length], width: 1.5, spanGaps: false })),
    ],
    axes: [
      { stroke: "transparent", size: LABEL_HEIGHT + 10, splits: (u) => (ticks.x = timeTicks(from, to, u.bbox.width / ratio, every).ticks), values: (u, values) => values.map(label) },
      {
        stroke: "transparent",
        size: (u, values) => (values ? Math.ceil(Math.max(...values.map(textWidth))) + 18 : 40),
        splits: (u, axis, min, max) => (ticks.y = linearTicks(min, max, u.bbox.height / ratio)),
        values: (u, values) => values.map(formatNumber),
      },
    ],
    hooks: { draw: [(u) => labelLineChart(u, ticks, label, { from, to })] },
  };
  const holder = element("div");
  container.append(holder);
  return new uPlot(options, data, holder);
}

/** Writes a line chart's axis labels beside its plot. */
function labelLineChart(u, ticks, label, range) {
  const layer = axisLayer(u.over.parentNode);
  const left = u.over.offsetLeft, top = u.over.offsetTop, bottom = top + u.over.offsetHeight;
  placeLabels(layer, "x", ticks.x.map((t) => ({ text: label(t), value: t, x: left + u.valToPos(t, "x"), y: bottom + 4, align: "below" })));
  placeLabels(layer, "y", ticks.y.map((v) => ({ text: formatNumber(v), x: left - 6, y: top + u.valToPos(v, "y"), align: "before" })));
  describeTimeAxis(layer, range, ticks.x, left, left + u.over.offsetWidth);
}

// ---------- timers: heatmap, quantiles, histogram, SLO ----------

async function renderTimer(content, selector, run) {
  const { from, to, step } = timeWindow(120);
  const heat = await run.get("heatmap", { name: selector, from, to, step });
  content.replaceChildren();
  if (!heat.steps.length) {
    setStatus(`No data for ${selector} in this range.`);
    return;
  }
  const quantilePanel = element("div", { class: "panel" });
  content.append(quantilePanel, element("div", { class: "panel", id: "slo-panel" }), element("div", { class: "panel", id: "histogram-panel" }));
  const sloPanel = $("slo-panel"), histogramPanel = $("histogram-panel");
  const drawn = await renderHeatmapPanel(quantilePanel, selector, heat, { from, to, step }, run);
  if (!run.live()) return;
  // The SLO charts share the heatmap's time axis: its range, and ticks among its own.
  await renderSlo(sloPanel, selector, { from, to, step, every: drawn.tickStep }, run);
  if (!run.live()) return;
  await renderHistogram(histogramPanel, selector, { from, to }, run);
  setStatus(`${selector}: ${heat.steps.length} steps of ${step} s, ${formatTime(from, true)} to ${formatTime(to, true)}.`);
}

async function renderHeatmapPanel(panel, selector, heat, window, run) {
  const toolbar = element("div", { class: "toolbar" });
  for (const q of DEFAULT_QUANTILES) {
    const box = element("input", { type: "checkbox", "data-q": q });
    box.checked = state.quantiles.includes(q);
    box.addEventListener("change", () => toggleQuantile(q, box.checked));
    toolbar.append(element("label", {}, [box, `p${q * 100}`]));
  }
  const custom = element("input", { type: "text", id: "quantile-input", placeholder: "q, e.g. 0.75", "aria-label": "add a quantile" });
  custom.addEventListener("keydown", (event) => {
    const q = Number(custom.value);
    if (event.key === "Enter" && q >= 0 && q <= 1 && custom.value !== "") toggleQuantile(q, true);
  });
  toolbar.append(custom);
  const canvas = element("canvas", { class: "heatmap", id: "heatmap", height: 320 });
  const readout = element("div", { class: "readout", id: "heatmap-readout", text: "Hover the heatmap for a bin's count." });
  const legend = element("div", { class: "legend" });
  panel.replaceChildren(element("h3", { text: `${selector}: distribution over time` }), toolbar, element("div", { class: "heatmap-wrap" }, canvas), legend, readout);
  const lines = await Promise.all(state.quantiles.map(async (q) => ({ q, points: (await run.get("query", { expr: `quantile(${selector}, ${q})`, ...window })).points })));
  lines.forEach((line) => legend.append(element("span", {}, [element("i", { style: `background:${quantileColor(line.q)}` }), `p${+(line.q * 100).toPrecision(4)}`])));
  const drawn = drawHeatmap(canvas, heat, lines, window);
  panel.insertBefore(heatLegend(drawn.maxDensity), readout);
  canvas.addEventListener("mousemove", (event) => describeBin(event, canvas, drawn, readout));
  return drawn;
}

/** A quantile's colour, the same whichever others are shown: the default quantiles keep theirs,
 * others follow in order of value. */
function quantileColor(q) {
  const extra = state.quantiles.filter((x) => !DEFAULT_QUANTILES.includes(x));
  const index = DEFAULT_QUANTILES.includes(q) ? DEFAULT_QUANTILES.indexOf(q) : DEFAULT_QUANTILES.length + extra.indexOf(q);
  return LINE_COLORS[index % LINE_COLORS.length];
}

function toggleQuantile(q, on) {
  state.quantiles = on ? [...new Set([...state.quantiles, q])].sort((a, b) => a - b) : state.quantiles.filter((x) => x !== q);
  writeState();
  renderView();
}

const MARGIN = { left: 64, right: 8, top: 8, bottom: 22 };

/** Sizes a canvas for the screen's pixel ratio; returns its 2D context and CSS size. */
function prepareCanvas(canvas, height) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 800;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.height = height + "px";
  const context = canvas.getContext("2d");
  context.scale(ratio, ratio);
  return { context, width, height };
}

/** Draws bins as cells (time × log value, colour = count) and quantile lines over them. */
/**
 * Samples per decade of value: a bin's count over its width on the log axis. circllhist bins
 * just above a power of ten are ten times wider on that axis than those just below it, so raw
 * counts would draw a false cliff at every power of ten; densities draw the distribution.
 */
function density(lower, upper, count) {
  const decades = lower > 0 && upper > lower ? Math.log10(upper / lower) : 1;
  return count / decades;
}

function drawHeatmap(canvas, heat, lines, { from, to, step }) {
  const { context, width, height } = prepareCanvas(canvas, 320);
  const bins = heat.steps.flatMap((s) => s.bins);
  const positive = bins.filter((b) => b[1] > 0);
  const low = Math.max(Math.min(...positive.map((b) => Math.max(b[0], b[1] / 10))), 1e-12);
  const high = Math.max(...positive.map((b) => b[1]));
  const maxDensity = Math.max(...bins.map((b) => density(...b)));
  const top = MARGIN.top, bottom = height - MARGIN.bottom;
  const y = (v) => bottom - ((Math.log10(Math.max(v, low)) - Math.log10(low)) / (Math.log10(high) - Math.log10(low) || 1)) * (bottom - top);
  const values = spacedTicks(logTickSets(low, high), y, () => LABEL_HEIGHT, 2);
  // The left margin holds the widest value label.
  const left = Math.max(MARGIN.left, Math.ceil(Math.max(0, ...values.map((v) => textWidth(formatNumber(v))))) + 12);
  const plot = { x0: left, x1: width - MARGIN.right, y0: top, y1: bottom };
  const x = (t) => plot.x0 + ((t - from) / (to - from)) * (plot.x1 - plot.x0);
  let total = 0;
  const cells = [];
  // Everything drawn stays inside the plot: a step that starts before `from` or ends after
  // `to` (steps sit on a grid) is drawn over its part inside the range only.
  context.save();
  context.beginPath();
  context.rect(plot.x0, plot.y0, plot.x1 - plot.x0, plot.y1 - plot.y0);
  context.clip();
  for (const s of heat.steps) {
    for (const [lower, upper, count] of s.bins) {
      total += count;
      const perDecade = density(lower, upper, count);
      const cell = { t: s.t, lower, upper, count, perDecade, x0: x(Math.max(s.t, from)), x1: x(Math.min(s.t + step, to)), y0: y(upper), y1: y(Math.max(lower, low)) };
      cells.push(cell);
      context.fillStyle = heatColor(Math.log1p(perDecade) / Math.log1p(maxDensity));
      context.fillRect(cell.x0, cell.y0, Math.max(1, cell.x1 - cell.x0), Math.max(1, cell.y1 - cell.y0));
    }
  }
  drawGrid(context, plot, values.map(y));
  lines.forEach((line) => {
    context.strokeStyle = quantileColor(line.q);
    context.lineWidth = 1.5;
    context.beginPath();
    // A step with no samples has no point: the line breaks there rather than bridging it.
    line.points.forEach(([t, v], j) => {
      const joined = j > 0 && t - line.points[j - 1][0] <= step * 1.5;
      const middle = stepMiddle(t, step, from, to);
      joined ? context.lineTo(x(middle), y(v)) : context.moveTo(x(middle), y(v));
    });
    context.stroke();
  });
  context.restore();
  const time = timeTicks(from, to, plot.x1 - plot.x0);
  labelHeatmap(axisLayer(canvas.parentNode), plot, { from, to }, time.ticks, values, x, y);
  canvas.dataset.total = total;
  canvas.dataset.steps = heat.steps.length;
  canvas.dataset.cells = cells.length;
  canvas.dataset.maxDensity = maxDensity;
  return { cells, maxDensity, tickStep: time.step };
}

/** Horizontal grid lines at the value labels' heights. */
function drawGrid(context, plot, heights) {
  context.strokeStyle = "#e3e5e8";
  for (const h of heights) {
    context.beginPath();
    context.moveTo(plot.x0, h);
    context.lineTo(plot.x1, h);
    context.stroke();
  }
}

/** The heatmap's labels: values (log) on the left, times below. */
function labelHeatmap(layer, plot, range, times, values, x, y) {
  const label = timeLabel(range.from, range.to);
  placeLabels(layer, "y", values.map((v) => ({ text: formatNumber(v), x: plot.x0 - 6, y: y(v), align: "before" })));
  placeLabels(layer, "x", times.map((t) => ({ text: label(t), value: t, x: x(t), y: plot.y1 + 4, align: "below" })));
  describeTimeAxis(layer, range, times, plot.x0, plot.x1);
}

/** The heatmap's colour scale, with its unit. */
function heatLegend(maxDensity) {
  const stops = [0, 0.25, 0.5, 0.75, 1].map((share) => `${heatColor(share)} ${share * 100}%`).join(", ");
  return element("div", { class: "legend heat-legend" }, [
    element("span", { text: "0" }),
    element("span", { class: "scale", style: `background: linear-gradient(to right, ${stops})` }),
    element("span", { text: `${formatNumber(maxDensity)} samples per decade of value, per step (log colour scale)` }),
  ]);
}

function heatColor(share) {
  // From pale yellow (few) to dark red (many).
  const hue = 55 - 55 * share, light = 88 - 52 * share;
  return `hsl(${hue}, 90%, ${light}%)`;
}

function describeBin(event, canvas, drawn, readout) {
  const box = canvas.getBoundingClientRect();
  const px = event.clientX - box.left, py = event.clientY - box.top;
  const cell = drawn.cells.find((c) => px >= c.x0 && px < c.x1 && py >= c.y0 && py <= c.y1);
  readout.textContent = cell
    ? `${formatTime(cell.t, true)}   [${formatNumber(cell.lower)}, ${formatNumber(cell.upper)})   ${cell.count.toLocaleString("en-US")} samples (${formatNumber(cell.perDecade)} per decade)`
    : "Hover the heatmap for a bin's count.";
}

async function renderHistogram(panel, selector, { from, to }, run) {
  const histogram = await run.get("histogram", { name: selector, from, to });
  const canvas = element("canvas", { class: "bars", id: "histogram", height: 200 });
  const mean = histogram.count ? histogram.sum / histogram.count : null;
  const summary = element("div", { class: "summary" }, [
    element("span", {}, ["count ", element("b", { text: formatNumber(histogram.count) })]),
    element("span", {}, ["min ", element("b", { text: formatNumber(histogram.min) })]),
    element("span", {}, ["max ", element("b", { text: formatNumber(histogram.max) })]),
    element("span", {}, ["mean ", element("b", { text: formatNumber(mean) })]),
    element("span", {}, ["sum ", element("b", { text: formatNumber(histogram.sum) })]),
  ]);
  panel.replaceChildren(element("h3", { text: `${selector}: merged histogram of the range` }), summary, element("div", { class: "chart-wrap" }, canvas));
  drawBars(canvas, histogram.bins);
  canvas.dataset.total = histogram.bins.reduce((t, b) => t + b[2], 0);
}

/** Bars over a log axis, each as tall as its bin's density (samples per decade of value). */
function drawBars(canvas, bins) {
  const { context, width, height } = prepareCanvas(canvas, 200);
  const layer = axisLayer(canvas.parentNode);
  const positive = bins.filter((b) => b[0] > 0);
  if (!positive.length) return;
  const low = Math.min(...positive.map((b) => b[0])), high = Math.max(...positive.map((b) => b[1]));
  const heights = positive.map((b) => [b[0], density(...b)]);
  const maxDensity = Math.max(...heights.map((h) => h[1]));
  const scale = formatNumber(maxDensity);
  const plot = { x0: Math.max(MARGIN.left, Math.ceil(textWidth(scale)) + 12), x1: width - MARGIN.right, y0: MARGIN.top, y1: height - MARGIN.bottom };
  const x = (v) => plot.x0 + ((Math.log10(v) - Math.log10(low)) / (Math.log10(high) - Math.log10(low) || 1)) * (plot.x1 - plot.x0);
  context.fillStyle = "#2563eb";
  positive.forEach(([lower, upper], i) => {
    const h = (heights[i][1] / maxDensity) * (plot.y1 - plot.y0);
    context.fillRect(x(lower), plot.y1 - h, Math.max(1, x(upper) - x(lower) - 0.5), h);
  });
  canvas.dataset.heights = JSON.stringify(heights);
  const powers = logTickSets(low, high).slice(1);
  const values = spacedTicks(powers, x, (v) => textWidth(formatNumber(v)), LABEL_GAP);
  placeLabels(layer, "x", values.map((v) => ({ text: formatNumber(v), x: x(v), y: plot.y1 + 4, align: "below" })));
  placeLabels(layer, "y", [
    { text: scale, x: plot.x0 - 6, y: plot.y0 + LABEL_HEIGHT / 2, align: "before" },
    { text: "samples per decade of value", x: plot.x0 + 4, y: plot.y0 + LABEL_HEIGHT / 2, align: "after" },
  ]);
}

async function renderSlo(panel, selector, window, run) {
  const input = element("input", { type: "text", id: "slo-input", placeholder: "e.g. 1500", "aria-label": "SLO threshold", value: state.slo || "" });
  const apply = () => {
    state.slo = input.value.trim() || null;
    writeState();
    renderSlo(panel, selector, window, run).catch((error) => {
      if (!superseded(error)) panel.append(element("p", { class: "error", text: `Error: ${error.message}` }));
    });
  };
  input.addEventListener("keydown", (event) => event.key === "Enter" && apply());
  const total = element("div", { class: "summary", id: "slo-total" });
  const charts = element("div", { class: "charts" });
  panel.replaceChildren(
    element("h3", { text: "Percentages aren't people: samples above a threshold" }),
    element("div", { class: "toolbar" }, [element("label", {}, ["Threshold ", input]), element("button", { type: "button", onclick: apply, text: "Show" })]),
    total,
    charts,
  );
  const threshold = Number(state.slo);
  if (!state.slo || !isFinite(threshold)) {
    total.append(element("span", { class: "muted", text: "Type a threshold (same unit as the metric) to count the samples above it." }));
    return;
  }
  const query = (expr) => run.get("query", { expr, ...window }).then((r) => r.points);
  const [above, share, cumulative, p99, all] = await Promise.all([
    query(`count_above(${selector}, ${threshold})`),
    query(`inverse_quantile(${selector}, ${threshold})`),
    query(`cumulative(count_above(${selector}, ${threshold}))`),
    query(`quantile(${selector}, 0.99)`),
    query(`count(${selector})`),
  ]);
  const aboveTotal = sum(above), samples = sum(all);
  total.dataset.count = aboveTotal;
  total.dataset.samples = samples;
  total.append(
    element("span", {}, [element("b", { text: aboveTotal.toLocaleString("en-US") }), ` samples at or above ${formatNumber(threshold)}`]),
    element("span", {}, [element("b", { text: samples ? `${((100 * aboveTotal) / samples).toPrecision(3)}%` : "–" }), ` of ${samples.toLocaleString("en-US")}`]),
  );
  // An alert rule on these samples: its threshold (people per window) drawn per step.
  const rules = alertRulesOn(selector, threshold);
  const countLines = [{ label: "count above", points: above }];
  for (const rule of rules) {
    const perStep = (rule.threshold * window.step) / rule.over_s;
    countLines.push({ label: `alert "${rule.name}" (${formatNumber(rule.threshold)} per ${rule.over_s} s)`, points: above.map(([t]) => [t, perStep]) });
    total.append(element("span", { class: "alert-rule", "data-alert": rule.name }, [
      "Alert ", element("b", { text: rule.name }), `: more than ${formatNumber(rule.threshold)} in ${rule.over_s} s, now ${rule.state}${rule.value === null ? "" : ` (${formatNumber(rule.value)})`}`,
    ]));
  }
  const panels = [
    ["Share above the threshold, per step", "share above", share.map(([t, v]) => [t, 1 - v])],
    ["Samples above the threshold, per step", "count above", above, countLines],
    ["Samples above the threshold, so far", "cumulative", cumulative],
    ["p99 (for comparison)", "p99", p99],
  ];
  // Lay out every box first, so each chart is sized to its final grid cell.
  const boxes = panels.map(([title]) => element("div", {}, element("h4", { text: title })));
  charts.append(...boxes);
  panels.forEach(([, label, points, lines], i) => lineChart(boxes[i], lines || [{ label, points }], window, 160));
}

// ---------- controls ----------

function setUpControls() {
  $("range").value = state.range;
  $("refresh").value = String(state.refresh);
  $("search").value = state.filter;
  showCustom();
  $("range").addEventListener("change", () => {
    state.range = $("range").value;
    if (state.range === "custom") {
      const { from, to } = timeWindow(240);
      state.from = from;
      state.to = to;
    }
    state.step = null;
    showCustom();
    writeState();
    renderView();
    sparkCache = new Map();
    scheduleSparklines();
  });
  $("range-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const from = parseTime($("from").value), to = parseTime($("to").value);
    if (from === null || to === null || from >= to) {
      viewRun?.abort(); // a render still loading must not write over the refusal
      setStatus("Write the range as YYYY-MM-DD HH:MM:SS (local time), the start before the end.", "error");
      return;
    }
    state.from = from;
    state.to = to;
    state.step = null;
    writeState();
    renderView();
    sparkCache = new Map();
    scheduleSparklines();
  });
  $("refresh").addEventListener("change", () => {
    state.refresh = Number($("refresh").value);
    writeState();
    scheduleRefresh();
  });
  $("search").addEventListener("input", () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => {
      state.filter = $("search").value;
      writeState();
      $("series-list").scrollTop = 0;
      loadSeries();
    }, FILTER_DEBOUNCE_MS);
  });
}

function showCustom() {
  const custom = state.range === "custom";
  $("custom").hidden = !custom;
  if (custom && state.from && state.to) {
    // The page's one time format (as the charts write times), not the browser's locale.
    $("from").value = formatTime(state.from, true);
    $("to").value = formatTime(state.to, true);
  }
}

/** Unix seconds of `YYYY-MM-DD HH:MM[:SS]` in local time (a `T` may stand for the space); null if it is not one. */
function parseTime(text) {
  const m = /^\s*(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d)(?::(\d\d))?\s*$/.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1).map((part) => Number(part || 0));
  const date = new Date(y, mo - 1, d, h, mi, s);
  const same = date.getFullYear() === y && date.getMonth() === mo - 1 && date.getDate() === d && date.getHours() === h;
  return same ? Math.floor(date.getTime() / 1000) : null;
}

/** Draws the view again at the window's new width (once the resizing pauses). */
function redrawOnResize() {
  let pending = null;
  let width = window.innerWidth;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(() => {
      renderVisibleRows(); // the list may be taller or shorter
      if (window.innerWidth !== width) {
        width = window.innerWidth;
        renderView();
      }
    }, 250);
  });
}

function scheduleRefresh() {
  clearInterval(refreshTimer);
  if (state.refresh > 0) {
    refreshTimer = setInterval(() => {
      sparkCache = new Map();
      loadSeries();
      renderView();
      loadStoreUsage();
      loadAlerts();
    }, state.refresh * 1000);
  }
}

function formatBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let unit = 0;
  while (bytes >= 1024 && unit < units.length - 1) {
    bytes /= 1024;
    unit += 1;
  }
  return `${bytes < 10 && unit > 0 ? bytes.toFixed(1) : Math.round(bytes)} ${units[unit]}`;
}

/** The cardinality budgets (from /health): series held against maxSeries, folds, the top offender. */
function showBudgets(budgets) {
  const line = $("budget-usage");
  if (!budgets) return;
  const types = Object.keys(budgets.series);
  const held = types.reduce((n, t) => n + budgets.series[t], 0);
  const fullest = types.reduce((a, b) => (budgets.series[a] / budgets.max_series[a] >= budgets.series[b] / budgets.max_series[b] ? a : b));
  const parts = [`${held.toLocaleString("en-US")} series; ${fullest} ${budgets.series[fullest].toLocaleString("en-US")} of ${budgets.max_series[fullest].toLocaleString("en-US")}`];
  const folded = Object.values(budgets.folded_series).reduce((n, v) => n + v, 0);
  if (folded > 0) parts.push(`${folded.toLocaleString("en-US")} new series folded into overflow`);
  const top = budgets.offenders[0];
  if (top && top.new_series_per_second >= 1) parts.push(`fastest new names: ${top.pattern} (${formatNumber(top.new_series_per_second)}/s)`);
  line.textContent = parts.join(" · ");
  line.title = "Cardinality budgets: maxSeries per type, maxSeriesPerName, maxTagValues (GET /api/v1/budgets)";
  line.classList.toggle("error", folded > 0);
}

// ---------- alerts ----------

let alertRules = [];

/** The alert rules (GET /api/v1/alerts): the firing and pending ones listed above the view,
 * each a link to its series with the rule's threshold. */
async function loadAlerts() {
  try {
    const response = await fetch("/api/v1/alerts");
    alertRules = (await response.json()).alerts || [];
  } catch (error) {
    alertRules = [];
  }
  const panel = $("alerts-panel");
  const active = alertRules.filter((rule) => rule.state !== "inactive");
  panel.hidden = active.length === 0;
  const items = active.map((rule) => {
    const since = rule.since ? ` since ${formatTime(rule.since, false)}` : "";
    const link = element("a", { href: new URL(rule.url, location.href).search || "?", text: rule.name });
    return element("li", { class: rule.state, "data-alert": rule.name }, [
      element("span", { class: "state", text: rule.state }),
      link,
      `: ${rule.summary}${since}`,
    ]);
  });
  panel.replaceChildren(element("ul", {}, items));
}

/** Rules of the form `count_above(<selector>, <threshold>)` on this series and threshold. */
function alertRulesOn(selector, threshold) {
  const pattern = /^\s*count_above\(\s*(.+?)\s*,\s*([-+0-9.eE]+)\s*\)\s*$/;
  return alertRules.filter((rule) => {
    const match = pattern.exec(rule.expr);
    return match && match[1] === selector && Number(match[2]) === threshold && rule.comparison === "above";
  });
}

/** The store's size against its budget, growth and drops (from /health), under the list. */
async function loadStoreUsage() {
  try {
    const response = await fetch("/health");
    const health = await response.json();
    showBudgets(health.budgets);
    const store = health.sinks?.store;
    if (!store) return;
    const parts = [`Store ${formatBytes(store.store_bytes)} of ${formatBytes(store.store_max_bytes)}`];
    if (store.store_growth_bytes_per_hour > 0) parts.push(`+${formatBytes(store.store_growth_bytes_per_hour)}/h`);
    if (store.store_points >= 100000) parts.push(`${store.store_bytes_per_point.toFixed(2)} B/point`);
    if (store.store_budget_dropped_points > 0) parts.push(`${formatNumber(store.store_budget_dropped_points)} points dropped for the budget`);
    $("store-usage").textContent = parts.join(" · ");
    $("store-usage").classList.toggle("error", store.store_budget_dropped_points > 0);
  } catch (error) {
    $("store-usage").textContent = "";
  }
}

setUpControls();
$("series-list").addEventListener("scroll", () => requestAnimationFrame(renderVisibleRows), { passive: true });
loadSeries();
loadStoreUsage();
loadAlerts().then(renderView);
setInterval(loadAlerts, 10000);
scheduleRefresh();
redrawOnResize();
