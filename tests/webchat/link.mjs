// The web chat of a gateway without a shared token, in real headless Chromium: the link
// `acp gateway` prints logs the page in (the token taken out of the address bar, kept for the
// tab), a page opened without it asks for the token, and a page of another site whose name
// resolves to 127.0.0.1 (DNS rebinding, played with Chromium's own resolver rules) gets neither
// a WebSocket nor an answer. Prints a JSON report {steps, failures}.
//
// usage: node link.mjs <link> <port>

import { chromium } from "playwright-core";

const [link, port] = process.argv.slice(2);
const report = { steps: [], failures: [] };
const check = (what, ok, detail) => {
  report.steps.push(what);
  if (!ok) report.failures.push({ what, detail });
};
const connected = () => document.getElementById("status").textContent === "connected";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  // Chromium's own guard against public pages reaching local addresses (Local Network Access) is
  // turned off, as other browsers have none: what is tested is the gateway's.
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--host-resolver-rules=MAP evil.test 127.0.0.1",
    "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults"],
});
try {
  // The printed link: logged in, and the token gone from the address bar.
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(link);
  await page.waitForFunction(connected);
  check("the link logs in", true);
  check("the token leaves the address bar", !page.url().includes("token"), page.url());
  await page.reload();
  await page.waitForFunction(connected);
  check("a reload stays logged in", true);

  // Without the link: the token is asked for.
  const fresh = await (await browser.newContext()).newPage();
  await fresh.goto(`http://127.0.0.1:${port}/`);
  await fresh.waitForTimeout(300);
  const state = await fresh.evaluate(() => ({
    login: !document.getElementById("login").hidden,
    status: document.getElementById("status").textContent,
  }));
  check("without the link the token is asked for", state.login && state.status !== "connected", state);

  // DNS rebinding: the attacker's page at evil.test, whose name now resolves to 127.0.0.1.
  const attacker = await (await browser.newContext()).newPage();
  const evil = `http://evil.test:${port}`;
  await attacker.route(`${evil}/`, (route) =>
    route.fulfill({ contentType: "text/html", body: "<!doctype html><title>evil</title><p>hi</p>" }));
  await attacker.goto(`${evil}/`);
  const got = await attacker.evaluate(async (port) => {
    const socket = await new Promise((resolve) => {
      const ws = new WebSocket(`ws://evil.test:${port}/`);
      ws.onopen = () => resolve("open");
      ws.onerror = () => resolve("refused");
    });
    const health = await fetch("/healthz").then((r) => r.status, () => "failed");
    return { socket, health };
  }, port);
  check("a rebinding page gets no WebSocket", got.socket === "refused", got);
  check("nor an answer", got.health === 421, got);
} catch (e) {
  report.failures.push({ what: "exception", detail: String(e && e.stack || e) });
} finally {
  await browser.close();
  console.log("REPORT " + JSON.stringify(report));
}
