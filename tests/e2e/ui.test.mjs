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

/** Starts histd; resolves with its addresses once it logs "ready". */
function startHistd(dataDir) {
  const config = path.join(dataDir, "config.js");
  fs.writeFileSync(config, `{ address: '127.0.0.1', port: 0, mgmt_port: 0, http_port: 0, flushInterval: 1000,
    backends: ['store'], store: { dataDir: '${dataDir}' } }`);
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

async function api(http, route, params) {
  const response = await fetch(`http://${http}/api/v1/${route}?` + new URLSearchParams(params));
  return response.json();
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
    const listed = await page.$$eval("button.series", (buttons) => buttons.map((b) => b.dataset.series));
    check("the browser lists every type of series", ["api.latency", "api.requests", "api.inflight", "api.users"].every((s) => listed.includes(s)), listed.join(" "));
    await page.waitForFunction(() => document.getElementById("store-usage").textContent.startsWith("Store "));
    const usage = await page.textContent("#store-usage");
    check("the page shows the store's size against its budget", /^Store [0-9.]+ (B|KiB|MiB) of 2\.0 GiB/.test(usage), usage);
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
    await narrow.goto(page.url().replace(/series=[^&]+/, "series=api.latency").replace(/type=[^&]+/, "type=timer"));
    await narrow.waitForSelector("canvas#heatmap[data-total]");
    const overflow = await narrow.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check("a narrow window needs no horizontal scroll", overflow <= 0, `${overflow}px`);
    await narrow.screenshot({ path: path.join(shots, "timer-420x800.png"), fullPage: true });
    // Resizing redraws at the new width.
    const before = await narrow.$eval("canvas#heatmap", (c) => c.width);
    await narrow.setViewportSize({ width: 900, height: 800 });
    await narrow.waitForFunction((old) => document.querySelector("canvas#heatmap[data-total]")?.width > old, before, { timeout: 5000 }).catch(() => {});
    const after = await narrow.$eval("canvas#heatmap", (c) => c.width);
    check("resizing the window redraws the heatmap at the new width", after > before, `${before} → ${after} px`);

    // Errors show in the page.
    await page.goto(base + `?series=api.latency&type=timer&range=custom&from=${window.to}&to=${window.from}`);
    await page.waitForSelector("#status.error");
    check("API errors are shown in the page", (await page.textContent("#status")).includes("parameter `from`"));

    check("every request stayed on 127.0.0.1", offsite.length === 0, offsite.join(" "));
    check("the page raised no script errors", pageErrors.length === 0, pageErrors.join(" | "));
  } finally {
    await browser.close();
    child.kill("SIGTERM");
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
