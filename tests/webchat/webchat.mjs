// The web chat in real headless Chromium: log in with the token, send, watch the streamed reply
// render as Markdown, check that a reply made of HTML and script stays text, stop a run that
// never ends, and take a screenshot. Prints a JSON report {steps, failures}.
//
// usage: node webchat.mjs <url> <token> <screenshot.png>
// The caller scripts the model: 1) "Hello **world** from `acp`."  2) a reply with <img onerror>
// and <script>  3) a write of notes.txt that needs approval, then "Written."  4) a reply that
// never ends.

import { chromium } from "playwright-core";

const [url, token, screenshot] = process.argv.slice(2);
const report = { steps: [], failures: [] };
const check = (what, ok, detail) => {
  report.steps.push(what);
  if (!ok) report.failures.push({ what, detail });
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("dialog", (d) => { errors.push("dialog: " + d.message()); d.dismiss(); });
  await page.goto(url);
  await page.fill("#token", token);
  await page.click("#login button");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
  check("logged in", true);

  // 1. A streamed reply, rendered as Markdown.
  await page.fill("#input", "Say hello");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("Hello world from acp.")));
  const html = await page.evaluate(() => [...document.querySelectorAll(".msg.assistant")].pop().innerHTML);
  check("markdown rendered", html.includes("<strong>world</strong>") && html.includes("<code>acp</code>"), html);
  await page.waitForFunction(() => [...document.querySelectorAll("#sessions li")].some((li) => li.title === "agent:main:main"));
  check("the session is listed", true);

  // 2. Model output never becomes markup.
  await page.fill("#input", "Show me HTML");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("<script>")));
  const injected = await page.evaluate(() => ({
    images: document.querySelectorAll(".messages img").length,
    scripts: document.querySelectorAll(".messages script").length,
    pwned: window.__pwned === true,
    text: [...document.querySelectorAll(".msg.assistant")].pop().textContent,
  }));
  check("html in a reply shows as text", injected.images === 0 && injected.scripts === 0 && !injected.pwned
    && injected.text.includes("<img src=x onerror=") && injected.text.includes("<script>window.__pwned = true</script>"), injected);

  // 3. An approval question: shown with what will be written, answered with a button.
  await page.fill("#input", "Write the notes");
  await page.press("#input", "Enter");
  await page.waitForSelector(".question button.allow");
  await page.screenshot({ path: screenshot.replace(/\.png$/, "-question.png") });
  const question = await page.evaluate(() => document.querySelector(".question").textContent);
  check("the question shows what will be written", question.includes("notes.txt") && question.includes("from the web chat"), question);
  await page.click(".question button.allow");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("Written.")));
  const answered = await page.evaluate(() => ({ open: document.querySelectorAll(".question").length,
    note: [...document.querySelectorAll(".note")].map((n) => n.textContent).join(" ") }));
  if (answered.open !== 0 || !answered.note.includes("(allowed)")) {
    report.failures.push({ what: "the question closes once answered", detail: answered });
  }

  // 4. Stop a run that never ends.
  await page.fill("#input", "Count forever");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("Counting")));
  await page.waitForFunction(() => !document.getElementById("abort").disabled);
  await page.click("#abort");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("(stopped)")));
  check("stopped", true);
  await page.screenshot({ path: screenshot, fullPage: true });

  // 5. The gateway restarts: the page sees it go and comes back by itself.
  process.stdout.write("RESTART\n");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("disconnected"));
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.user")].some((m) => m.textContent === "Say hello"));
  check("reconnected after a restart, history shown", true);
  check("no page errors", errors.length === 0, errors);
} catch (e) {
  report.failures.push({ what: "exception", detail: String(e && e.stack || e) });
} finally {
  await browser.close();
}
process.stdout.write("REPORT " + JSON.stringify(report) + "\n");
process.exit(report.failures.length === 0 ? 0 : 1);
