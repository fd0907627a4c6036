// End-to-end test of the web UI in a real headless browser (Debian's chromium, driven by
// playwright-core): start histd with its store, send timers and counters over UDP, open the
// page, check that what it draws comes from the API's numbers, type an SLO threshold, compare
// with the API, and save screenshots. Every request must stay on 127.0.0.1 (no CDN).
//
// Run: node tests/e2e/ui.test.mjs   (HISTD_BIN picks the binary; default target/debug/histd)

import { spawn } from "node:child_process";
import dgram from "node:dgram";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const binary = process.env.HISTD_BIN || path.join(root, "target/debug/histd");
const browserPath = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = path.join(root, "target/ui-screenshots");
const results = [];

function check(name, condition, detail = "") {
  results.push({ name, ok: !!condition, detail });
  console.log(`${condition ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Starts histd (`extra`: more config keys); resolves with its addresses once it logs "ready". */
function startHistd(dataDir, extra = "") {
  const config = path.join(dataDir, "config.js");
  fs.writeFileSync(config, `{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 1000,
    backends: ['store'], store: { dataDir: '${dataDir}' }, ${extra}
    alerts: [ { name: 'slow api', expr: 'count_above(api.latency, 1000)', over: '10s', above: 5,
                summary: '{{value}} requests took longer than 1 s in the last {{over}}' } ] }`);
  const child = spawn(binary, ["run", "--config", config], { stdio: ["ignore", "ignore", "pipe"] });
  return new Promise((resolve, reject) => {
    const addresses = {};
    let log = "";
    child.stderr.on("data", (chunk) => {
      log += chunk;
      for (const match of log.matchAll(/listening proto=(\w+) addr=(\S+)/g)) addresses[match[1]] = match[2];
      if (log.includes(" ready ")) resolve({ child, addresses });
    });
    child.on("exit", (code) => reject(new Error(`histd exited (${code}) before it was ready:\n${log}`)));
    setTimeout(() => reject(new Error(`histd was not ready in 15 s:\n${log}`)), 15000);
  });
}

/** Latency-like milliseconds: mostly 20–400, a tail up to ~3000, slower as `phase` grows. */
function latency(i, phase) {
  const x = (i * 7919) % 1000;
  const base = x < 900 ? 20 + (x % 380) : 1000 + (x - 900) * 20;
  return Math.round(base * (1 + 1.5 * Math.sin(phase * Math.PI) ** 2));
}

async function sendTraffic(udpAddress, seconds) {
  const [host, port] = [udpAddress.slice(0, udpAddress.lastIndexOf(":")), Number(udpAddress.slice(udpAddress.lastIndexOf(":") + 1))];
  const socket = dgram.createSocket("udp4");
  let sent = 0;
  const start = Date.now(), end = start + seconds * 1000;
  while (Date.now() < end) {
    const lines = [];
    const phase = (Date.now() - start) / (seconds * 1000);
    for (let k = 0; k < 40; k++) lines.push(`api.latency:${latency(sent++, phase)}|ms`);
    lines.push("api.requests:40|c", "api.inflight:7|g", "api.users:u" + (sent % 13) + "|s");
    await new Promise((resolve) => socket.send(lines.join("\n"), port, host, resolve));
    await sleep(50);
  }
  socket.close();
  return sent;
}

/** 4000 values spread evenly in log from 10 to 1000: a log-uniform distribution, which a
 * density histogram draws flat across every power of ten. */
async function sendLogUniform(udpAddress) {
  const [host, port] = [udpAddress.slice(0, udpAddress.lastIndexOf(":")), Number(udpAddress.slice(udpAddress.lastIndexOf(":") + 1))];
  const socket = dgram.createSocket("udp4");
  const values = Array.from({ length: 4000 }, (_, i) => Math.pow(10, 1 + (2 * (i + 0.5)) / 4000));
  for (let i = 0; i < values.length; i += 40) {
    const lines = values.slice(i, i + 40).map((v) => `api.loguniform:${v.toFixed(6)}|ms`);
    await new Promise((resolve) => socket.send(lines.join("\n"), port, host, resolve));
    await sleep(5);
  }
  socket.close();
}

/** Sends `lines` over UDP, 40 to a datagram, paced so that none is dropped. */
async function sendLines(udpAddress, lines) {
  const [host, port] = [udpAddress.slice(0, udpAddress.lastIndexOf(":")), Number(udpAddress.slice(udpAddress.lastIndexOf(":") + 1))];
  const socket = dgram.createSocket("udp4");
  for (let i = 0; i < lines.length; i += 40) {
    await new Promise((resolve) => socket.send(lines.slice(i, i + 40).join("\n"), port, host, resolve));
    if (i % 2000 === 0) await sleep(5);
  }
  socket.close();
}

/** Polls `probe` every 100 ms until it is true, for at most `ms`. */
async function until(probe, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await probe()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Measures every chart's axis labels on a page (their boxes as the browser laid them out):
 * for each chart, labels that overlap another or stick out of the chart, and its time axis.
 */
async function axisReport(page) {
  return page.$$eval(".axis-layer", (layers) => layers.map((layer) => {
    const frame = layer.getBoundingClientRect();
    const labels = [...layer.querySelectorAll(".axis-label")].map((l) => ({ axis: l.dataset.axis, value: l.dataset.value, text: l.textContent, box: l.getBoundingClientRect() }));
    const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
    const overlaps = [];
    labels.forEach((a, i) => labels.slice(i + 1).forEach((b) => meet(a.box, b.box) && overlaps.push(`${a.text} / ${b.text}`)));
    const outside = labels.filter((l) => l.box.left < frame.left - 0.5 || l.box.right > frame.right + 0.5 || l.box.top < frame.top - 0.5 || l.box.bottom > frame.bottom + 0.5).map((l) => l.text);
    const chart = layer.parentElement.querySelector("canvas#heatmap") ? "heatmap" : layer.parentElement.querySelector("canvas#histogram") ? "histogram" : layer.closest("#slo-panel") ? "slo" : "line";
    const axis = layer.dataset.from ? { from: Number(layer.dataset.from), to: Number(layer.dataset.to), ticks: JSON.parse(layer.dataset.ticks), plot: JSON.parse(layer.dataset.plot) } : null;
    // Where each time label sits against where its time falls on the plot, in pixels.
    const misplaced = axis ? labels.filter((l) => l.axis === "x").map((l) => {
      const want = axis.plot[0] + ((Number(l.value) - axis.from) / (axis.to - axis.from)) * (axis.plot[1] - axis.plot[0]);
      return Math.abs(l.box.left + l.box.width / 2 - frame.left - want);
    }).filter((off) => off > 2) : [];
    return { chart, x: labels.filter((l) => l.axis === "x").length, y: labels.filter((l) => l.axis === "y").length, overlaps, outside, axis, misplaced };
  }));
}

/** Checks that no chart's labels overlap or are cut and that the SLO charts share the heatmap's time axis. */
async function checkAxes(page, where) {
  const charts = await axisReport(page);
  const bad = charts.filter((c) => c.overlaps.length || c.outside.length || c.misplaced.length || c.x < 2 || c.y < 1);
  check(`${where}: every chart's axis labels are whole, apart and where their values fall`, charts.length >= 6 && !bad.length, bad.length ? JSON.stringify(bad) : `${charts.length} charts`);
  const heat = charts.find((c) => c.chart === "heatmap");
  const slo = charts.filter((c) => c.chart === "slo");
  const shared = slo.length === 4 && slo.every((c) => c.axis.from === heat.axis.from && c.axis.to === heat.axis.to && c.axis.ticks.length >= 2 && c.axis.ticks.every((t) => heat.axis.ticks.includes(t)));
  check(`${where}: the SLO charts share the heatmap's time axis`, shared, JSON.stringify({ heat: heat?.axis, slo: slo.map((c) => c.axis) }));
}

async function api(http, route, params) {
  const response = await fetch(`http://${http}/api/v1/${route}?` + new URLSearchParams(params));
  return response.json();
}

/** Issue 49, item 2: with read tokens on, a person signs in by typing a token into the page,
 * sees the series, signs out and is refused again; a token removed from its file at a reload
 * ends its sessions. The browser never holds the token: only an HttpOnly session cookie. */
async function signIn(browser) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "histd-ui-sign-in-"));
  const tokens = path.join(dataDir, "read.tokens");
  const token = "person-0123456789abcdef";
  fs.writeFileSync(tokens, `person ${token}\n`, { mode: 0o600 });
  const { child, addresses } = await startHistd(dataDir, `http: { tokens: { read: '${tokens}' } },`);
  try {
    await sendLines(addresses.udp, ["signed.in.hits:1|c", "signed.in.latency:12|ms"]);
    await sleep(2500);
    const base = `http://${addresses.http}/`;
    const context = await browser.newContext();
    const page = await context.newPage();
    const first = await page.goto(base);
    check("sign-in: a guarded page is a sign-in form", first.status() === 401 && (await page.$('form#sign-in input[type="password"][name="token"]')) !== null, `HTTP ${first.status()}`);
    await page.fill("#token", "not-the-token-00000");
    await Promise.all([page.waitForNavigation(), page.click('form#sign-in button[type="submit"]')]);
    check("sign-in: a wrong token is told and refused", (await page.textContent("body")).includes("does not open") && (await context.cookies()).length === 0);
    await page.fill("#token", token);
    await Promise.all([page.waitForNavigation(), page.click('form#sign-in button[type="submit"]')]);
    await page.waitForSelector('button.series[data-series="signed.in.hits"]', { timeout: 15000 });
    const cookies = await context.cookies();
    const session = cookies.find((c) => c.name === "histd_session");
    check("sign-in: the token opens the page and its series", session !== undefined && page.url().startsWith(base), page.url());
    check("sign-in: the cookie is an HttpOnly, SameSite=Strict session id, never the token",
      session && session.httpOnly && session.sameSite === "Strict" && !session.value.includes(token) && session.value.length === 64,
      JSON.stringify(session && { httpOnly: session.httpOnly, sameSite: session.sameSite, length: session.value.length }));
    check("sign-in: the token is nowhere in the page or its URL", !(await page.content()).includes(token) && !page.url().includes(token));
    await page.screenshot({ path: path.join(shots, "signed-in-1280x800.png") });
    await Promise.all([page.waitForNavigation(), page.click("#sign-out")]);
    const out = await page.goto(base);
    check("sign-in: signed out, the page is the form again", out.status() === 401 && (await page.$("form#sign-in")) !== null, `HTTP ${out.status()}`);
    // Signed in again; the token leaves its file and the config is reloaded: the session ends.
    await page.fill("#token", token);
    await Promise.all([page.waitForNavigation(), page.click('form#sign-in button[type="submit"]')]);
    await page.waitForSelector('button.series[data-series="signed.in.hits"]', { timeout: 15000 });
    fs.writeFileSync(tokens, "person another-token-0123456789\n", { mode: 0o600 });
    child.kill("SIGHUP");
    await sleep(1000);
    const ended = await page.goto(base);
    check("sign-in: a token removed from its file ends its sessions", ended.status() === 401 && (await page.$("form#sign-in")) !== null, `HTTP ${ended.status()}`);
    await context.close();
  } finally {
    child.kill("SIGTERM");
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/** A global whose group has a member that does not answer (global.peers: a closed port): the
 * page says its answers are partial, naming the member, and still shows this global's series. */
async function partialGroup(browser) {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "histd-ui-partial-"));
  const { child, addresses } = await startHistd(dataDir, "global: { peers: ['http://127.0.0.1:9'] },");
  try {
    await sendLines(addresses.udp, ["group.latency:12|ms", "group.latency:30|ms"]);
    await sleep(2500);
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await page.goto(`http://${addresses.http}/`);
    await page.waitForSelector('button.series[data-series="group.latency"]', { timeout: 15000 });
    await page.waitForSelector("#partial:not([hidden])", { timeout: 15000 });
    const said = await page.textContent("#partial");
    check("a partial group answer is said above the view, naming the member", said.includes("Partial") && said.includes("http://127.0.0.1:9"), said);
    await page.close();
  } finally {
    child.kill("SIGTERM");
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "histd-ui-"));
  const { child, addresses } = await startHistd(dataDir);
  const browser = await chromium.launch({
    executablePath: browserPath,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const started = Math.floor(Date.now() / 1000);
    await sendLogUniform(addresses.udp);
    const routes = ["/checkout/payment/confirm", "/checkout/payment/cancel", "/search"];
    await sendLines(addresses.udp, routes.map((route, i) => `api.route:${10 + i}|ms|#route:${route},region:eu-west-1`));
    await sendTraffic(addresses.udp, 10);
    await sleep(2500); // two more flushes: everything sent is stored
    const to = Math.floor(Date.now() / 1000) + 1;
    const window = { from: started - 1, to, step: 1 };
    const base = `http://${addresses.http}/`;
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const offsite = [];
    await page.route("**/*", (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === "127.0.0.1" || url.protocol === "data:") return route.continue();
      offsite.push(url.href);
      return route.abort();
    });
    const pageErrors = [];
    page.on("pageerror", (error) => pageErrors.push(String(error)));

    // The metric browser lists the series, grouped by type.
    await page.goto(base + `?range=custom&from=${window.from}&to=${window.to}&step=${window.step}`);
    await page.waitForSelector('button.series[data-series="api.latency"]');
    // Nothing picked: the first timer opens (the page starts with a histogram, not a blank).
    await page.waitForSelector("canvas#heatmap[data-total]");
    // Issue 52: the page says when its first screen is drawn (a screenshot taken then shows it).
    await page.waitForSelector('html[data-state="ready"]', { timeout: 15000 });
    const firstScreen = await page.evaluate(() => ({ status: document.getElementById("status").textContent, list: document.getElementById("series-list").textContent }));
    check("the page is ready once the list and the first view are drawn", !firstScreen.status.startsWith("Loading") && !firstScreen.list.includes("Loading metrics"), JSON.stringify(firstScreen));
    check("the first timer opens by default", page.url().includes("series=api.latency") && (await page.$('button.series.selected[data-series="api.latency"]')) !== null, page.url());
    const listed = await page.$$eval("button.series", (buttons) => buttons.map((b) => b.dataset.series));
    // The alert rule on the tail fires while the traffic's last ten seconds are in its window.
    const alertPage = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await alertPage.goto(base);
    await alertPage.waitForSelector('#alerts-panel li[data-alert="slow api"]', { timeout: 15000 });
    const alertText = await alertPage.$eval("#alerts-panel", (panel) => panel.textContent);
    check("a firing alert is shown above the view, in people", /firing\s*slow api: \d+ requests took longer than 1 s in the last 10s/.test(alertText), alertText);
    await alertPage.click('#alerts-panel li[data-alert="slow api"] a');
    await alertPage.waitForSelector('#slo-total [data-alert="slow api"]', { timeout: 15000 });
    const sloAlert = await alertPage.$eval('#slo-total [data-alert="slow api"]', (line) => line.textContent);
    check("the alert's link opens its series with its threshold, and the rule is drawn there", alertPage.url().includes("slo=1000") && /more than 5 in 10 s/.test(sloAlert), `${alertPage.url()} ${sloAlert}`);
    await alertPage.close();
    check("the browser lists every type of series", ["api.latency", "api.requests", "api.inflight", "api.users"].every((s) => listed.includes(s)), listed.join(" "));
    await page.waitForFunction(() => document.getElementById("store-usage").textContent.startsWith("Store "));
    const usage = await page.textContent("#store-usage");
    check("the page shows the store's size against its budget", /^Store [0-9.]+ (B|KiB|MiB) of 2\.0 GiB/.test(usage), usage);
    const budgetLine = await page.textContent("#budget-usage");
    check("the page shows the series held against the cardinality budgets", /^[\d,]+ series; (counters|timers|gauges|sets) [\d,]+ of [\d,]+/.test(budgetLine), budgetLine);
    let queries = 0;
    page.on("request", (request) => { if (request.url().includes("/api/v1/query")) queries += 1; });
    await page.waitForLoadState("networkidle");
    const queriesBefore = queries;
    await page.type("#search", "infl", { delay: 40 }); // four keystrokes, faster than the debounce
    await page.waitForFunction(() => document.querySelectorAll("button.series").length === 1);
    await page.waitForLoadState("networkidle");
    const filtered = await page.$$eval("button.series", (buttons) => buttons.map((b) => b.dataset.series));
    check("the filter narrows the list", filtered.length === 1 && filtered[0] === "api.inflight", filtered.join(" "));
    check("typing renders the list once, not per keystroke", queries - queriesBefore <= 2, `${queries - queriesBefore} sparkline queries`);
    await page.fill("#search", "");
    await page.waitForFunction(() => document.querySelectorAll("button.series").length >= 4);

    // The timer view: the heatmap is drawn from the API's bins.
    await page.click('button.series[data-series="api.latency"]');
    await page.waitForSelector("canvas#heatmap[data-total]", { timeout: 10000 }).catch(async (error) => {
      throw new Error(`no heatmap; the page says: ${await page.textContent("#status")} (${error.message.split("\n")[0]})`);
    });
    const drawn = await page.$eval("canvas#heatmap", (c) => ({ total: Number(c.dataset.total), steps: Number(c.dataset.steps) }));
    const heat = await api(addresses.http, "heatmap", { name: "api.latency", ...window });
    const apiTotal = heat.steps.reduce((t, s) => t + s.bins.reduce((u, b) => u + b[2], 0), 0);
    check("the heatmap draws the API's samples", drawn.total === apiTotal && apiTotal > 0, `drawn ${drawn.total}, API ${apiTotal}`);
    check("the heatmap draws the API's steps", drawn.steps === heat.steps.length, `${drawn.steps} vs ${heat.steps.length}`);
    const histogram = await api(addresses.http, "histogram", { name: "api.latency", from: window.from, to: window.to });
    const bars = await page.$eval("canvas#histogram", (c) => Number(c.dataset.total));
    check("the merged histogram is the API's", bars === histogram.count, `${bars} vs ${histogram.count}`);
    // Sweep the pointer across the plot until it is over a cell; the readout must name it.
    const box = await page.$eval("canvas#heatmap", (c) => { const r = c.getBoundingClientRect(); return { x: r.x, y: r.y, w: r.width, h: r.height }; });
    let readout = "";
    for (let i = 1; i < 40 && !/per decade\)$/.test(readout); i++) {
      await page.mouse.move(box.x + box.w * (0.2 + 0.02 * i), box.y + box.h * 0.6);
      readout = await page.textContent("#heatmap-readout");
    }
    check("hovering a cell shows its time, range, count and density", /\[[^)]+\)\s+\d[\d,]* samples \([^)]+ per decade\)$/.test(readout), readout);

    // The SLO view: the count shown equals the API's count_above.
    await page.fill("#slo-input", "1000");
    await page.press("#slo-input", "Enter");
    await page.waitForSelector("#slo-total[data-count]");
    const shown = await page.$eval("#slo-total", (e) => Number(e.dataset.count));
    const above = await api(addresses.http, "query", { expr: "count_above(api.latency, 1000)", ...window });
    const expected = above.points.reduce((t, p) => t + p[1], 0);
    check("the SLO count equals the API's count_above", shown === expected && expected > 0, `${shown} vs ${expected}`);
    check("the SLO threshold is kept in the URL", page.url().includes("slo=1000"), page.url());
    await page.waitForFunction(() => document.querySelectorAll("#slo-panel .axis-layer").length === 4);
    await checkAxes(page, "1280 px wide");
    // Issue 32: on a custom range starting inside the traffic (not on a step), the heatmap, the
    // merged histogram and the SLO panel count the same samples: those of the flushes inside it.
    for (const offset of [3, 4, 7]) {
      const custom = { from: started + offset, to: window.to, step: 10 };
      await page.goto(base + `?series=api.latency&type=timer&slo=1000&range=custom&from=${custom.from}&to=${custom.to}&step=${custom.step}`);
      await page.waitForSelector("canvas#heatmap[data-total]");
      await page.waitForSelector("canvas#histogram[data-total]");
      await page.waitForSelector("#slo-total[data-samples]");
      const totals = await page.evaluate(() => [
        Number(document.querySelector("canvas#heatmap").dataset.total),
        Number(document.querySelector("canvas#histogram").dataset.total),
        Number(document.querySelector("#slo-total").dataset.samples),
      ]);
      const exact = await api(addresses.http, "query", { expr: "count(api.latency)", from: custom.from, to: custom.to, step: 1 });
      const flushed = exact.points.reduce((t, p) => t + p[1], 0);
      check(`a custom range from +${offset} s: heatmap, merged histogram and SLO panel agree`, totals.every((t) => t === flushed) && flushed > 0, `${totals.join(", ")} vs ${flushed} flushed in the range`);
    }
    // The custom range's inputs are in the page's one time format (not the browser's locale),
    // and a range typed in it is applied.
    const shownFrom = await page.inputValue("#from");
    check("the custom range's inputs use the page's time format", /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/.test(shownFrom) && !/[AP]M|\//.test(shownFrom), shownFrom);
    const pad = (n) => String(n).padStart(2, "0");
    const asPage = (unix) => { const d = new Date(unix * 1000); return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`; };
    await page.fill("#from", asPage(started + 5));
    await page.click("#custom button[type=submit]");
    await page.waitForFunction((want) => location.search.includes(`from=${want}`), started + 5, { timeout: 5000 }).catch(() => {});
    check("a range typed in that format is applied", page.url().includes(`from=${started + 5}`), page.url());
    await page.fill("#from", "11/27/2026, 09:09:27 AM");
    await page.click("#custom button[type=submit]");
    const refusal = await page.textContent("#status");
    check("a range in another format is refused with the format to use", /YYYY-MM-DD HH:MM:SS/.test(refusal) && page.url().includes(`from=${started + 5}`), refusal);
    await page.screenshot({ path: path.join(shots, "timer-1280x800.png"), fullPage: true });

    // Counters, gauges, sets are line charts.
    for (const series of ["api.requests", "api.inflight", "api.users"]) {
      await page.click(`button.series[data-series="${series}"]`);
      await page.waitForFunction((name) => document.querySelector("#content h3")?.textContent.startsWith(name + ":"), series);
      await page.waitForSelector("#content .uplot");
      check(`${series} is drawn as a line chart`, (await page.$$("#content .uplot")).length === 1);
    }
    // The charts' readout writes times as the heatmap's does (one format on the page).
    const over = await page.$eval("#content .uplot .u-over", (o) => { const r = o.getBoundingClientRect(); return { x: r.x + r.width / 2, y: r.y + r.height / 2 }; });
    await page.mouse.move(over.x, over.y);
    const legendTime = await page.$eval("#content .uplot .u-legend", (l) => l.textContent);
    check("the charts write times as the heatmap does", /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/.test(legendTime) && !/[ap]m/.test(legendTime), legendTime.slice(0, 80));
    // A render still loading when another series is picked is abandoned: the page ends on
    // the last one picked, with nothing of the first.
    await page.evaluate(() => {
      document.querySelector('button.series[data-series="api.latency"]').click();
      document.querySelector('button.series[data-series="api.users"]').click();
    });
    await page.waitForFunction(() => document.querySelector("#content h3")?.textContent.startsWith("api.users:"));
    await page.waitForLoadState("networkidle");
    const titles = await page.$$eval("#content h3", (nodes) => nodes.map((n) => n.textContent));
    check("a superseded render leaves nothing behind", titles.length === 1 && titles[0].startsWith("api.users:"), titles.join(" | "));

    // Densities, not raw counts: a log-uniform input draws flat bars across 100 (circllhist's
    // bins just above it are ten times wider on the log axis than those just below it).
    await page.goto(base + `?series=api.loguniform&type=timer&range=custom&from=${window.from}&to=${window.to}&step=${window.step}`);
    await page.waitForSelector("canvas#histogram[data-heights]");
    const heights = JSON.parse(await page.$eval("canvas#histogram", (c) => c.dataset.heights));
    const mean = (from, to) => {
      const inside = heights.filter(([lower]) => lower >= from && lower < to).map(([, h]) => h);
      return inside.reduce((a, b) => a + b, 0) / inside.length;
    };
    const [under100, over100] = [mean(50, 100), mean(100, 200)];
    check("a log-uniform input draws a flat histogram (no step at 100)", over100 / under100 > 0.8 && over100 / under100 < 1.25, `per decade: ${under100.toFixed(0)} below 100, ${over100.toFixed(0)} above`);
    const legend = await page.textContent(".heat-legend");
    check("the heatmap's colours have a legend with their unit", legend.includes("samples per decade of value"), legend);

    // A shared link restores the view; a narrow window has no horizontal scroll.
    const narrow = await browser.newPage({ viewport: { width: 420, height: 800 } });
    await narrow.goto(page.url().replace(/series=[^&]+/, "series=api.latency").replace(/type=[^&]+/, "type=timer") + "&slo=1000");
    await narrow.waitForSelector("canvas#heatmap[data-total]");
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check("a narrow window needs no horizontal scroll", overflow <= 0, `${overflow}px`);
    await narrow.waitForFunction(() => document.querySelectorAll("#slo-panel .axis-layer").length === 4 && document.querySelector("canvas#histogram[data-heights]"));
    await checkAxes(narrow, "420 px wide");
    await narrow.screenshot({ path: path.join(shots, "timer-420x800.png"), fullPage: true });
    // Resizing redraws at the new width.
    const before = await narrow.$eval("canvas#heatmap", (c) => c.width);
    await narrow.setViewportSize({ width: 900, height: 800 });
    await narrow.waitForFunction((old) => document.querySelector("canvas#heatmap[data-total]")?.width > old, before, { timeout: 5000 }).catch(() => {});
    const after = await narrow.$eval("canvas#heatmap", (c) => c.width);
    check("resizing the window redraws the heatmap at the new width", after > before, `${before} → ${after} px`);

    // The series list: a row per name, its tag sets a click away, written in full.
    const routeRow = 'button.series[data-series="api.route"]';
    check("a name with several tag sets is one row with their count", (await page.$eval(routeRow, (b) => b.dataset.tagSets)) === "3");
    await page.click('button.toggle[aria-label^="show the tag sets of api.route"]');
    await page.waitForSelector("#series-list .tagset button.series");
    const tagRows = await page.$$eval("#series-list .tagset button.series", (bs) => bs.map((b) => ({ selector: b.dataset.series, text: b.textContent, title: b.title })));
    const fullTags = "api.route{region=eu-west-1,route=-checkout-payment-confirm}";
    check("each tag set is a row, with its tags in full on hover", tagRows.length === 3 && tagRows.some((r) => r.title === fullTags && r.text.includes("route=-checkout-payment-confirm")), JSON.stringify(tagRows.map((r) => r.title)));
    await page.click(`button.series[data-series="${fullTags}"]`);
    await page.waitForFunction((s) => document.querySelector("#status")?.textContent.startsWith(s + ":"), fullTags);
    check("a tag set opens on its own", page.url().includes("series=" + encodeURIComponent(fullTags).replace(/%20/g, "+")), page.url());
    // histd's own series are folded away, with their count, and shown on request.
    const ownFold = await page.textContent('.fold[data-origin="histd"]');
    const ownListed = await page.$$eval("button.series", (bs) => bs.filter((b) => b.dataset.series.startsWith("statsd.")).length);
    check("histd's own series are folded away with their count", /histd's own series \(\d+\)/.test(ownFold) && ownListed === 0, `${ownFold}; ${ownListed} listed`);
    await page.click('.fold[data-origin="histd"] .fold-toggle');
    await page.waitForFunction(() => [...document.querySelectorAll("button.series")].some((b) => b.dataset.series.startsWith("statsd.")));
    check("unfolded, they are listed", page.url().includes("show=histd"), page.url());
    await page.click('.fold[data-origin="histd"] .fold-toggle');

    // 10,000 series: 9,900 counter names and a timer with 100 tag sets, and 5 bench series.
    const fleet = [];
    for (let i = 0; i < 9900; i++) fleet.push(`fleet.n${String(i).padStart(4, "0")}:1|c`);
    for (let i = 0; i < 100; i++) fleet.push(`fleet.tagged:${i + 1}|ms|#host:h${String(i).padStart(3, "0")}`);
    for (let i = 1; i <= 5; i++) fleet.push(`bench.${i}:1|c`);
    await sendLines(addresses.udp, fleet);
    await until(async () => (await api(addresses.http, "series", { match: "fleet.*", limit: 1 })).total >= 10000, 20000, "10,000 fleet series stored");
    const big = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    big.on("pageerror", (error) => pageErrors.push(String(error)));
    let clock = Date.now();
    await big.goto(base + "?range=15m");
    await big.waitForFunction(() => Number(document.getElementById("series-list").dataset.rows) >= 9900 && document.querySelector('button.series[data-series="fleet.n0000"]'));
    const listMs = Date.now() - clock;
    const inPage = await big.$$eval("#series-list .row", (r) => r.length);
    const listRows = await big.$eval("#series-list", (l) => Number(l.dataset.rows));
    check("10k series: the list holds only the rows in view", inPage <= 120 && listRows >= 9900, `${inPage} rows in the page for ${listRows} in the list`);
    check("10k series: the list is drawn within 5 s", listMs < 5000, `${listMs} ms from opening the page`);
    clock = Date.now();
    await big.$eval("#series-list", (l) => { l.scrollTop = l.scrollHeight; });
    await big.waitForSelector('.fold[data-origin="bench"]');
    const scrollMs = Date.now() - clock;
    check("10k series: scrolling to the end shows its rows within 1 s", scrollMs < 1000, `${scrollMs} ms`);
    check("bench series are folded away with their count", (await big.textContent('.fold[data-origin="bench"]')).includes("histd bench series (5)"));
    clock = Date.now();
    await big.type("#search", "n98");
    await big.waitForFunction(() => Number(document.getElementById("series-list").dataset.rows) < 120 && document.querySelector('button.series[data-series="fleet.n9800"]'));
    const filterMs = Date.now() - clock;
    const filteredRows = await big.$eval("#series-list", (l) => Number(l.dataset.rows));
    check("10k series: the filter answers within 3 s", filterMs < 3000, `${filterMs} ms for ${filteredRows} rows (250 ms of it waits for typing to pause)`);
    await big.fill("#search", "");
    await big.waitForFunction(() => Number(document.getElementById("series-list").dataset.rows) >= 9900);
    clock = Date.now();
    await big.click('button.toggle[aria-label^="show the tag sets of fleet.tagged"]');
    await big.waitForFunction(() => document.querySelector('button.series[data-series="fleet.tagged{host=h000}"]'));
    check("100 tag sets open within 2 s", Date.now() - clock < 2000, `${Date.now() - clock} ms`);
    await big.waitForLoadState("networkidle");
    await big.screenshot({ path: path.join(shots, "series-10k-1280x800.png") });

    // Forgetting: every bench series from the fold, one series from its view.
    big.on("dialog", (dialog) => dialog.accept());
    await big.$eval("#series-list", (l) => { l.scrollTop = l.scrollHeight; });
    await big.click('.fold[data-origin="bench"] .forget-all');
    await big.waitForFunction(() => document.getElementById("status").dataset.forgotten === "5");
    const benchLeft = (await api(addresses.http, "series", { origin: "bench" })).total;
    check("forget all bench series: gone from the store", benchLeft === 0 && !(await big.$('.fold[data-origin="bench"]')), `${benchLeft} left`);
    await big.goto(base + "?range=15m&series=fleet.n0001&type=counter");
    await big.waitForSelector("#forget");
    const asked = [];
    big.removeAllListeners("dialog");
    big.on("dialog", (dialog) => { asked.push(dialog.message()); dialog.accept(); });
    await big.click("#forget");
    await big.waitForFunction(() => document.getElementById("status").dataset.forgotten === "1");
    const gone = (await api(addresses.http, "series", { match: "fleet.n0001" })).total;
    check("forgetting asks first, then deletes the series", asked.length === 1 && asked[0].includes("fleet.n0001") && asked[0].includes("cannot be undone") && gone === 0, asked.join(" | "));
    await big.close();

    // Errors show in the page.
    await page.goto(base + `?series=api.latency&type=timer&range=custom&from=${window.to}&to=${window.from}`);
    await page.waitForSelector("#status.error");
    check("API errors are shown in the page", (await page.textContent("#status")).includes("parameter `from`"));

    await signIn(browser);
    await partialGroup(browser);
    check("every request stayed on 127.0.0.1", offsite.length === 0, offsite.join(" "));
    check("the page raised no script errors", pageErrors.length === 0, pageErrors.join(" | "));
  } finally {
    // The daemon first: a browser that fails to close must not leave histd running.
    child.kill("SIGTERM");
    await browser.close().catch((error) => console.error(`closing the browser: ${error.message}`));
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  const failed = results.filter((r) => !r.ok).length;
  console.log(`${results.length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((error) => {
  console.error(error);
  console.log(`${results.filter((r) => r.ok).length} passed, ${results.filter((r) => !r.ok).length + 1} failed`);
  process.exit(1);
});
