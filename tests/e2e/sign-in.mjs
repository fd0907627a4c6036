// A person signs in to a running, guarded histd over HTTPS (issue 49's fleet test runs it against
// a global of scripts/fleet-on-one-machine): the page is a sign-in form; the token typed into it
// opens the page and shows `series`; the session cookie is Secure, HttpOnly and SameSite=Strict
// and never the token; the group's answer is whole (no partial banner); signing out brings the
// form back. Chromium accepts exactly the server's key (its SPKI pinned from `cert.pem`), not
// any certificate.
//
// Run: node tests/e2e/sign-in.mjs https://127.0.0.1:PORT/ TOKEN_FILE SERIES CERT_PEM

import crypto from "node:crypto";
import fs from "node:fs";
import { chromium } from "playwright-core";

const [base, tokenFile, series, certFile] = process.argv.slice(2);
if (!certFile) {
  console.error("usage: node tests/e2e/sign-in.mjs https://HOST:PORT/ TOKEN_FILE SERIES CERT_PEM");
  process.exit(2);
}
const token = fs.readFileSync(tokenFile, "utf8").trim();
const spki = crypto
  .createHash("sha256")
  .update(new crypto.X509Certificate(fs.readFileSync(certFile)).publicKey.export({ type: "spki", format: "der" }))
  .digest("base64");
let failed = 0;

function check(name, condition, detail = "") {
  if (!condition) failed += 1;
  console.log(`${condition ? "ok  " : "FAIL"} ${name}${detail ? `: ${detail}` : ""}`);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", `--ignore-certificate-errors-spki-list=${spki}`],
});
try {
  const context = await browser.newContext();
  const page = await context.newPage();
  const first = await page.goto(base);
  check("the guarded page is a sign-in form", first.status() === 401 && (await page.$('form#sign-in input[type="password"]')) !== null, `HTTP ${first.status()}`);
  await page.fill("#token", token);
  await Promise.all([page.waitForNavigation(), page.click('form#sign-in button[type="submit"]')]);
  await page.waitForSelector(`button.series[data-series="${series}"]`, { timeout: 15000 });
  const session = (await context.cookies()).find((cookie) => cookie.name === "histd_session");
  check("the token typed opens the page and its series", session !== undefined, page.url());
  check("over HTTPS the session cookie is Secure, HttpOnly, SameSite=Strict, and not the token",
    session && session.secure && session.httpOnly && session.sameSite === "Strict" && !session.value.includes(token),
    JSON.stringify(session && { secure: session.secure, httpOnly: session.httpOnly, sameSite: session.sameSite }));
  await page.click(`button.series[data-series="${series}"]`);
  await page.waitForFunction(() => document.documentElement.dataset.state === "ready", null, { timeout: 15000 });
  check("the group answered whole: no partial banner", await page.$eval("#partial", (banner) => banner.hidden));
  check("the token is nowhere in the page or its URL", !(await page.content()).includes(token) && !page.url().includes(token));
  await Promise.all([page.waitForNavigation(), page.click("#sign-out")]);
  const out = await page.goto(base);
  check("signed out, the page is the form again", out.status() === 401 && (await page.$("form#sign-in")) !== null, `HTTP ${out.status()}`);
} catch (error) {
  check("the sign-in ran to its end", false, error.message);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
