// The web chat in real headless Chromium: log in with the token, send, watch the streamed reply
// render as Markdown with the session's model, tokens and context fill and the messages' times,
// check that a reply made of HTML and script stays text, answer an approval question that shows
// the edit's diff, see the page in dark mode and at a phone's width, stop a run that never ends,
// and come back after a gateway restart. Screenshots go next to <screenshot.png>. Prints a JSON
// report {steps, failures, screenshots}.
//
// usage: node webchat.mjs <url> <token> <screenshot.png> <model>
// The caller scripts the model: 1) "Hello **world** from `acp`."  2) a reply with <img onerror>
// and <script>  3) an edit of notes.txt ("old line" → "from the web chat") that needs approval,
// then "Written."  4) a reply that never ends. <model> is the gateway's default model.

import { chromium } from "playwright-core";

const [url, token, screenshot, model] = process.argv.slice(2);
const shot = (name) => screenshot.replace(/\.png$/, name ? "-" + name + ".png" : ".png");
const report = { steps: [], failures: [], screenshots: [] };
const check = (what, ok, detail) => {
  report.steps.push(what);
  if (!ok) report.failures.push({ what, detail });
};
const snap = async (page, name, options) => {
  await page.screenshot({ path: shot(name), ...options });
  report.screenshots.push(shot(name));
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.emulateMedia({ colorScheme: "light" });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
  page.on("dialog", (d) => { errors.push("dialog: " + d.message()); d.dismiss(); });
  await page.goto(url);
  await page.fill("#token", token);
  await page.click("#login button");
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected");
  check("logged in", true);
  await snap(page, "empty");

  // The diff the page computes (the same one the approval card shows below).
  const diff = await page.evaluate(() => ({
    ops: lineDiff("a\nb\nc\nd\n", "a\nx\nc\nd\ne\n").map((l) => l.op + l.text).join(" "),
    hunks: diffHunks(lineDiff("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\n2\n3\n4\n5\n6\n7\n8\nnine\n10\n"), 3).map((x) => x.header),
    added: lineDiff(null, "x\ny\n").map((l) => l.op + l.newNo).join(" "),
  }));
  check("line diffs", diff.ops === " a -b +x  c  d +e" && diff.hunks.join() === "@@ -6,5 +6,5 @@"
    && diff.added === "+1 +2", diff);

  // 1. A streamed reply, rendered as Markdown, with the model, usage and context, and times.
  await page.fill("#input", "Say hello");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("Hello world from acp.")));
  const html = await page.evaluate(() => [...document.querySelectorAll(".msg.assistant")].pop().innerHTML);
  check("markdown rendered", html.includes("<strong>world</strong>") && html.includes("<code>acp</code>"), html);
  await page.waitForFunction(() => [...document.querySelectorAll("#sessions li")].some((li) => li.title === "agent:main:main"));
  check("the session is listed", true);
  await page.waitForFunction(() => !document.getElementById("context").hidden
    && document.querySelector(".msg.assistant .msg-usage") && /\bin\b/.test(document.getElementById("usage").textContent),
  null, { timeout: 15000 }).catch(() => {});
  const info = await page.evaluate(() => ({
    model: document.getElementById("model").textContent,
    modelTitle: document.getElementById("model").title,
    usage: document.getElementById("usage").textContent,
    context: document.getElementById("context").hidden ? null : document.getElementById("context-text").textContent,
    fill: document.getElementById("context-fill").getBoundingClientRect().width,
    reply: document.querySelector(".msg.assistant .msg-usage")?.textContent,
  }));
  const name = model.slice(model.indexOf("/") + 1);
  check("the session's model is shown", info.model === name && info.modelTitle.includes(model), { info, model });
  check("the context fill is shown", /^\d+(\.\d)?k? \/ \d+(\.\d)?[kM] · (<1|\d+)%$/.test(info.context || "") && info.fill > 0, info);
  check("token usage is shown", /^\d+(\.\d)?k? in · \d+(\.\d)?k? out$/.test(info.reply || "")
    && /^\d+(\.\d)?k? in · \d+(\.\d)?k? out$/.test(info.usage), info);
  const times = await page.evaluate(() => [...document.querySelectorAll(".msg time.msg-time")].map((t) => ({
    role: t.closest(".msg").classList.contains("user") ? "user" : "assistant", at: Date.parse(t.dateTime), text: t.textContent })));
  check("messages show their time", ["user", "assistant"].every((role) => times.some((t) => t.role === role
    && Math.abs(Date.now() - t.at) < 120000 && /\d{1,2}[:.]\d{2}/.test(t.text))), times);

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

  // 3. An approval question: shown with the diff the edit makes, answered with a button.
  await page.fill("#input", "Write the notes");
  await page.press("#input", "Enter");
  await page.waitForSelector(".question button.allow");
  const question = await page.evaluate(() => {
    const q = document.querySelector(".question");
    const rows = (kind) => [...q.querySelectorAll(".diff-line." + kind)].map((r) => [...r.children].map((c) => c.textContent));
    const style = (sel) => { const b = q.querySelector(sel); return b && getComputedStyle(b).backgroundColor; };
    return { path: q.querySelector(".diff-path")?.textContent, del: rows("diff-del"), add: rows("diff-add"), ctx: rows("diff-ctx"),
      hunk: q.querySelector(".diff-hunk")?.textContent, text: q.textContent,
      allow: style("button.primary.allow"), reject: style("button.danger.reject"), delBg: style(".diff-del"), addBg: style(".diff-add") };
  });
  check("the question shows the edit as a diff", question.path === "notes.txt" && question.hunk === "@@ -1,3 +1,3 @@"
    && JSON.stringify(question.del) === '[["2","","-","old line"]]' && JSON.stringify(question.add) === '[["","2","+","from the web chat"]]'
    && question.ctx.length === 2 && question.ctx[0][3] === "first line", question);
  check("its buttons and lines are coloured", question.delBg && question.addBg && new Set([question.allow, question.reject, question.delBg, question.addBg, "rgba(0, 0, 0, 0)"]).size === 5
    && question.allow !== "rgb(239, 239, 239)", question);
  await snap(page, "question");

  // Dark mode: the same page under prefers-color-scheme: dark.
  const colours = () => page.evaluate(() => ({
    body: getComputedStyle(document.body).backgroundColor,
    text: getComputedStyle(document.body).color,
    question: getComputedStyle(document.querySelector(".question")).backgroundColor,
    add: getComputedStyle(document.querySelector(".question .diff-add")).backgroundColor,
  }));
  const light = await colours();
  await page.emulateMedia({ colorScheme: "dark" });
  await page.waitForTimeout(300); // the buttons' colour transitions
  const dark = await colours();
  const luminance = (rgb) => { const [r, g, b] = rgb.match(/\d+/g).map(Number); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  check("dark mode applies", luminance(dark.body) < 60 && luminance(light.body) > 200 && luminance(dark.text) > 180
    && dark.question !== light.question && dark.add !== light.add, { light, dark });
  await snap(page, "question-dark");
  await page.emulateMedia({ colorScheme: "light" });

  await page.click(".question button.allow");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("Written.")));
  const answered = await page.evaluate(() => ({ open: document.querySelectorAll(".question").length,
    note: [...document.querySelectorAll(".note.resolved")].map((n) => n.textContent).join(" "),
    tool: [...document.querySelectorAll(".tool")].map((t) => t.className + ": " + t.textContent).join(" | ") }));
  check("the question closes once answered", answered.open === 0 && answered.note.includes("Allowed")
    && /tool completed: Edit notes\.txt.*\+1−1/.test(answered.tool), answered);

  // 4. Stop a run that never ends.
  await page.fill("#input", "Count forever");
  await page.press("#input", "Enter");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("Counting")));
  await page.waitForFunction(() => !document.getElementById("abort").disabled);
  await page.click("#abort");
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.assistant")].some((m) => m.textContent.includes("(stopped)")));
  check("stopped", true);
  // Back to the edit, for the pictures.
  await page.evaluate(() => document.querySelector(".tool .diffs")?.setAttribute("open", ""));
  await page.evaluate(() => [...document.querySelectorAll(".msg.user")].find((m) => m.textContent.includes("Write the notes")).scrollIntoView());
  await snap(page);
  await page.emulateMedia({ colorScheme: "dark" });
  await page.waitForTimeout(300);
  await snap(page, "dark");
  await page.emulateMedia({ colorScheme: "light" });

  // A phone's width: the sessions are a drawer behind the menu button.
  await page.setViewportSize({ width: 390, height: 844 });
  await page.evaluate(() => { const m = document.getElementById("messages"); m.scrollTop = 0; });
  // (The drawer slides away as the window narrows.)
  await page.waitForFunction(() => document.getElementById("sidebar").getBoundingClientRect().right <= 0, null, { timeout: 2000 })
    .catch(() => {});
  const narrow = await page.evaluate(() => ({
    menu: getComputedStyle(document.getElementById("menu")).display,
    sidebar: document.getElementById("sidebar").getBoundingClientRect().right,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  }));
  await snap(page, "phone");
  await page.click("#menu");
  await page.waitForFunction(() => document.getElementById("sidebar").getBoundingClientRect().left >= 0);
  await page.waitForTimeout(250);
  await snap(page, "phone-sessions");
  await page.click("#scrim", { position: { x: 370, y: 400 } });
  await page.waitForFunction(() => document.getElementById("sidebar").getBoundingClientRect().right <= 0);
  check("at a phone's width the sessions are a drawer", narrow.menu !== "none" && narrow.sidebar <= 0 && narrow.overflow <= 0, narrow);
  await page.setViewportSize({ width: 1280, height: 800 });

  // 5. The gateway restarts: the page sees it go and comes back by itself.
  process.stdout.write("RESTART\n");
  await page.waitForFunction(() => document.getElementById("status").textContent.startsWith("disconnected"));
  await page.waitForFunction(() => document.getElementById("status").textContent === "connected", null, { timeout: 20000 });
  await page.waitForFunction(() => [...document.querySelectorAll(".msg.user .msg-body")].some((m) => m.textContent === "Say hello"));
  check("reconnected after a restart, history shown", true);
  await page.evaluate(() => [...document.querySelectorAll(".msg.user")].find((m) => m.textContent.includes("Show me HTML")).scrollIntoView());
  await snap(page, "history");
  check("no page errors", errors.length === 0, errors);
} catch (e) {
  report.failures.push({ what: "exception", detail: String(e && e.stack || e) });
} finally {
  await browser.close();
}
process.stdout.write("REPORT " + JSON.stringify(report) + "\n");
process.exit(report.failures.length === 0 ? 0 : 1);
