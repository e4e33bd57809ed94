// The gateway's web chat: log in with the token, list and open sessions, send, watch the reply
// stream in, see tool calls and their diffs, answer approval questions (with the diff a change
// would make), see the session's model, token usage and context fill, stop a run; reconnects
// (1 s → 30 s) when the gateway goes away. With several agents, a picker chooses whose sessions
// new chats open in; the list shows every agent's, each marked with its agent.
// Everything from the gateway is shown as text (textContent), or as Markdown built from escaped
// text (render.js); nothing it sends becomes markup.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  ws: null, token: "", session: "", nextId: 1, pending: new Map(),
  // The agent new chats go to (the gateway's default until one is picked), and the agents.
  agent: "main", agents: [],
  runs: new Map(), backoff: 1000, wanted: false, connected: false,
  // Approval questions waiting, by id (the gateway sends those asked before we connected).
  questions: new Map(),
  // sessions.list rows by key; the default model (status); context windows by model.
  rows: new Map(), defaultModel: "", windows: new Map(),
  // What the runs of a session said since the page loaded: {contextTokens, contextWindow, model}.
  live: new Map(),
  // Sessions with a run going (any client's), for the sidebar.
  busy: new Set(),
};

function setStatus(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = "status " + (kind || "");
}

function uuid() {
  return crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2);
}

// An element with a class and text (never HTML).
function h(tag, className, text) {
  const el = document.createElement(tag);
  if (className) { el.className = className; }
  if (text !== undefined && text !== null) { el.textContent = text; }
  return el;
}

// `agent:<id>:` of the agent chosen.
function prefix() {
  return "agent:" + state.agent + ":";
}

// A key as the sidebar shows it: without the chosen agent's prefix; another agent's as `id/rest`.
function shortKey(key) {
  if (key.startsWith(prefix())) { return key.slice(prefix().length); }
  const m = /^agent:([^:]+):(.+)$/.exec(key);
  return m ? m[1] + "/" + m[2] : key;
}

// A path as the session sees it: relative to its working directory when inside it.
function shortPath(path) {
  const row = state.rows.get(state.session);
  const cwd = row && row.cwd ? String(row.cwd).replace(/\/$/, "") : "";
  return cwd && path.startsWith(cwd + "/") ? path.slice(cwd.length + 1) : path;
}

function scrollToEnd() {
  const box = $("messages");
  box.scrollTop = box.scrollHeight;
}

// ---- Messages on screen ----------------------------------------------------------------------
function timeEl(ms) {
  const t = h("time", "msg-time", formatTime(ms));
  t.dateTime = new Date(ms).toISOString();
  t.title = new Date(ms).toLocaleString();
  return t;
}

// A message: its body, then a meta line (who, when, and for replies their tokens). `at` is the
// time the history gives, else now (when it arrived); `null` for history without times.
function addMessage(role, text, at) {
  $("messages").querySelector(".empty")?.remove();
  const el = h("article", "msg " + role);
  const body = h("div", "msg-body");
  if (role === "assistant") { body.innerHTML = renderMarkdown(text); } else { body.textContent = text; }
  el.appendChild(body);
  // (A message of the user's with no time has nothing to say under it.)
  if (at !== null || role !== "user") {
    const meta = el.appendChild(h("div", "msg-meta"));
    meta.appendChild(h("span", "who", role === "user" ? "You" : role === "assistant" ? "acp" : "Error"));
    if (at !== null) { meta.appendChild(timeEl(at === undefined ? Date.now() : at)); }
  }
  $("messages").appendChild(el);
  scrollToEnd();
  return el;
}

function setMessageUsage(el, input, output) {
  if (typeof input !== "number" && typeof output !== "number") { return; }
  const meta = el.querySelector(".msg-meta");
  let usage = meta.querySelector(".msg-usage");
  if (!usage) { usage = meta.appendChild(h("span", "msg-usage")); }
  usage.textContent = formatTokens(input || 0) + " in · " + formatTokens(output || 0) + " out";
  usage.title = (input || 0).toLocaleString() + " input and " + (output || 0).toLocaleString() + " output tokens";
}

function addNote(parent, text, kind) {
  const note = h("div", "note" + (kind ? " " + kind : ""), text);
  parent.insertBefore(note, parent.querySelector(".msg-meta"));
  return note;
}

function showEmpty() {
  const box = h("div", "empty");
  box.appendChild(h("div", "empty-mark", "a"));
  box.appendChild(h("h2", null, "What shall we work on?"));
  box.appendChild(h("p", null, "Replies stream in here; file changes and commands that need your approval show what they will do first."));
  $("messages").appendChild(box);
}

// Reasoning, folded away.
function setThinking(parent, before, text) {
  let box = parent.querySelector(":scope > .thinking");
  if (!text) { return; }
  if (!box) {
    box = h("details", "thinking");
    box.appendChild(h("summary", null, "Thinking"));
    box.appendChild(h("div", "thinking-text"));
    parent.insertBefore(box, before);
  }
  box.lastChild.textContent = text;
}

function runView(runId, at) {
  let run = state.runs.get(runId);
  if (!run) {
    const el = addMessage("assistant", "", at);
    el.classList.add("streaming");
    run = { el, body: el.querySelector(".msg-body"), tools: new Map(), text: "", thinking: "" };
    state.runs.set(runId, run);
    $("abort").disabled = false;
  }
  return run;
}

function onChat(p) {
  if (p.state === "final" || p.state === "aborted" || p.state === "error") { markBusy(p.sessionKey, false); }
  if (p.sessionKey !== state.session) { return; }
  const message = p.message || {};
  const run = runView(p.runId, typeof message.timestamp === "number" ? message.timestamp : Date.now());
  const content = Array.isArray(message.content) ? message.content : [];
  const block = content.find((c) => c.type === "text");
  const thought = content.find((c) => c.type === "thinking");
  if (p.state === "delta" || p.state === "final" || p.state === "aborted") {
    run.text = block ? block.text || "" : run.text;
    run.thinking = thought ? thought.thinking || "" : run.thinking;
    // Deltas come faster than frames: render once per frame, the latest text.
    if (!run.scheduled) {
      run.scheduled = true;
      requestAnimationFrame(() => {
        run.scheduled = false;
        setThinking(run.el, run.el.firstChild, run.thinking);
        run.body.innerHTML = renderMarkdown(run.text);
        scrollToEnd();
      });
    }
  }
  if (p.state === "aborted") { addNote(run.el, "(stopped)", "stopped"); }
  if (p.state === "error") {
    run.el.classList.add("error");
    addNote(run.el, p.errorMessage || "The run failed.", "failed");
  }
  if (p.state === "final" || p.state === "aborted" || p.state === "error") {
    run.el.classList.remove("streaming");
    state.runs.delete(p.runId);
    $("abort").disabled = state.runs.size === 0;
    if (message.usage) { setMessageUsage(run.el, message.usage.input, message.usage.output); }
  }
}

function onAgent(p) {
  const d = p.data || {};
  if (p.stream === "lifecycle" && d.phase === "start") { markBusy(p.sessionKey, true); }
  if (p.stream === "lifecycle" && d.phase === "model" && d.model) {
    live(p.sessionKey).model = (d.provider ? d.provider + "/" : "") + d.model;
    if (p.sessionKey === state.session) { updateSessionBar(); }
  }
  if (p.stream === "usage") { onUsage(p, d); }
  if (p.sessionKey !== state.session) { return; }
  if (p.stream === "notice" && d.text) {
    // acp's own words about the run (not the model's), shown apart from the reply.
    addNote(runView(p.runId, p.ts).el, d.text, "notice");
  }
  if (p.stream !== "tool") { return; }
  const run = runView(p.runId, typeof p.ts === "number" ? p.ts : Date.now());
  let el = run.tools.get(d.toolCallId);
  if (!el) {
    el = toolRow();
    run.tools.set(d.toolCallId, el);
    run.el.insertBefore(el, run.body);
  }
  setTool(el, d.title || d.name, d.status, d.phase === "result" && d.isError);
  addDiffs(el, d.diffs);
}

// The files a tool call changes (`[{path, oldText, newText}]`), folded under "+a −r changes".
function addDiffs(el, diffs) {
  if (!Array.isArray(diffs) || !diffs.length || el.querySelector(".diffs")) { return; }
  const box = h("details", "diffs");
  const summary = h("summary");
  let added = 0;
  let removed = 0;
  for (const diff of diffs) {
    const view = renderDiff(diff.path, diff.oldText, diff.newText, diffs.filter((o) => o.path === diff.path).length > 1);
    added += view.added;
    removed += view.removed;
    box.appendChild(view.el);
  }
  summary.appendChild(h("span", "diff-stat-add", "+" + added));
  summary.appendChild(h("span", "diff-stat-del", "−" + removed));
  summary.appendChild(document.createTextNode(" changes"));
  box.prepend(summary);
  el.appendChild(box);
}

function live(key) {
  if (!state.live.has(key)) { state.live.set(key, {}); }
  return state.live.get(key);
}

// `usage` of a run: the context after each model request; input and output tokens at its end.
function onUsage(p, d) {
  const l = live(p.sessionKey);
  if (typeof d.contextTokens === "number") { l.contextTokens = d.contextTokens; }
  if (typeof d.contextWindow === "number" && d.contextWindow > 0) {
    l.contextWindow = d.contextWindow;
    const model = modelOf(p.sessionKey);
    if (model) { state.windows.set(model, d.contextWindow); }
  }
  if (p.sessionKey !== state.session) { return; }
  const run = state.runs.get(p.runId);
  if (run && (typeof d.inputTokens === "number" || typeof d.outputTokens === "number")) {
    setMessageUsage(run.el, d.inputTokens, d.outputTokens);
  }
  updateSessionBar();
}

function toolRow() {
  const el = h("div", "tool");
  const head = el.appendChild(h("div", "tool-head"));
  head.appendChild(h("span", "tool-icon"));
  head.appendChild(h("span", "tool-title"));
  head.appendChild(h("span", "tool-status"));
  return el;
}

function setTool(el, title, status, failed) {
  const s = failed ? "failed" : status || "pending";
  el.className = "tool " + s;
  el.querySelector(".tool-title").textContent = title || "tool";
  el.querySelector(".tool-status").textContent = s.replace(/_/g, " ");
}

// ---- Diffs -----------------------------------------------------------------------------------
// A file's change as a unified diff with line numbers (none when `excerpt`: a piece of a large
// file, whose numbers the gateway does not send). Returns {el, added, removed}.
function renderDiff(path, oldText, newText, excerpt) {
  const lines = lineDiff(oldText || "", newText || "");
  const added = lines.filter((l) => l.op === "+").length;
  const removed = lines.filter((l) => l.op === "-").length;
  const el = h("div", "diff");
  const head = el.appendChild(h("div", "diff-file"));
  head.appendChild(h("span", "diff-path", shortPath(String(path))));
  if (oldText === null || oldText === undefined) { head.appendChild(h("span", "badge", "new file")); }
  const stat = head.appendChild(h("span", "diff-stat"));
  stat.appendChild(h("span", "diff-stat-add", "+" + added));
  stat.appendChild(h("span", "diff-stat-del", "−" + removed));
  const body = el.appendChild(h("div", "diff-body"));
  let shown = 0;
  const hunks = diffHunks(lines, 3);
  if (!hunks.length) { body.appendChild(h("div", "diff-hunk", "no changes")); }
  for (const hunk of hunks) {
    body.appendChild(h("div", "diff-hunk", excerpt ? "@@" : hunk.header));
    for (const line of hunk.lines) {
      if (shown++ >= 2000) { break; }
      const kind = line.op === "+" ? "diff-add" : line.op === "-" ? "diff-del" : "diff-ctx";
      const row = body.appendChild(h("div", "diff-line " + kind));
      row.appendChild(h("span", "ln", excerpt || line.op === "+" ? "" : String(line.oldNo)));
      row.appendChild(h("span", "ln", excerpt || line.op === "-" ? "" : String(line.newNo)));
      row.appendChild(h("span", "sign", line.op));
      row.appendChild(h("span", "text", line.text));
    }
  }
  if (shown > 2000) { body.appendChild(h("div", "diff-hunk", "… " + (shown - 2000) + " more lines")); }
  return { el, added, removed };
}

// ---- Approval questions ---------------------------------------------------------------------
// Shown as text (never HTML): what will run — the command, or the diff of each file — and one
// button per choice the agent offers.
function showQuestion(q) {
  const r = q.request || {};
  if (r.sessionKey !== state.session || document.getElementById("q-" + q.id)) { return; }
  const box = h("div", "question");
  box.id = "q-" + q.id;
  const head = box.appendChild(h("div", "question-head"));
  head.appendChild(h("span", "question-icon", "!"));
  const title = head.appendChild(h("div", "question-title", "Approve: " + (r.title || r.toolName || "this action")));
  if (r.toolName) { head.appendChild(h("span", "badge", r.toolName)); }
  if (r.command && r.command !== r.title) {
    const pre = box.appendChild(h("pre", "command"));
    pre.appendChild(h("code", null, r.command));
  }
  const diffs = (r.content || []).filter((c) => c.type === "diff");
  for (const c of diffs) {
    const excerpt = diffs.filter((o) => o.path === c.path).length > 1;
    box.appendChild(renderDiff(c.path, c.oldText, c.newText, excerpt).el);
  }
  for (const c of r.content || []) {
    if (c.type === "text" && c.text) { box.appendChild(h("p", "question-text", c.text)); }
  }
  const buttons = box.appendChild(h("div", "actions"));
  for (const o of r.options || []) {
    const b = h("button", null, o.label);
    b.type = "button";
    const kind = String(o.kind || "");
    b.className = "button " + (kind === "allow_once" ? "primary allow" : kind.startsWith("allow") ? "secondary allow"
      : kind === "reject_once" ? "danger reject" : "danger-quiet reject");
    b.onclick = () => {
      for (const other of buttons.children) { other.disabled = true; }
      request("exec.approval.resolve", { id: q.id, decision: o.id }).catch((e) => {
        title.textContent = e.message || "could not answer";
        for (const other of buttons.children) { other.disabled = false; }
      });
    };
    buttons.appendChild(b);
  }
  if (typeof q.expiresAtMs === "number") {
    buttons.appendChild(h("span", "expires", "unanswered by " + formatTime(q.expiresAtMs) + ": not run"));
  }
  const run = r.runId ? runView(r.runId, q.createdAtMs) : null;
  if (run) { run.el.insertBefore(box, run.body); } else { $("messages").appendChild(box); }
  scrollToEnd();
}

function onQuestion(q) {
  state.questions.set(q.id, q);
  showQuestion(q);
}

function onResolved(p) {
  const q = state.questions.get(p.id);
  state.questions.delete(p.id);
  const box = document.getElementById("q-" + p.id);
  if (!box) { return; }
  const what = q && q.request ? " — " + (q.request.title || q.request.toolName || "") : "";
  const [text, kind] = p.reason === "expired" ? ["Not answered in time: not run", "failed"]
    : p.reason === "cancelled" ? ["Withdrawn", ""]
      : p.decision === "deny" ? ["Rejected", "failed"]
        : p.decision === "allow-always" ? ["Always allowed", "allowed"] : ["Allowed", "allowed"];
  const note = h("div", "note resolved " + kind, text + what);
  box.replaceWith(note);
}

// ---- The socket ------------------------------------------------------------------------------
function request(method, params) {
  const id = String(state.nextId++);
  return new Promise((resolve, reject) => {
    state.pending.set(id, { resolve, reject });
    state.ws.send(JSON.stringify({ type: "req", id, method, params }));
  });
}

function connect() {
  state.wanted = true;
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(proto + "//" + location.host + "/");
  state.ws = ws;
  setStatus("connecting…", "busy");
  ws.onmessage = (ev) => {
    let frame;
    try { frame = JSON.parse(ev.data); } catch { return; }
    if (frame.type === "event" && frame.event === "connect.challenge") {
      const params = {
        minProtocol: 4, maxProtocol: 4,
        client: { id: "webchat-ui", version: "acp", platform: navigator.platform || "web", mode: "webchat" },
        role: "operator", scopes: ["operator.read", "operator.write", "operator.approvals"],
      };
      if (state.token) { params.auth = { token: state.token }; }
      request("connect", params).then(onHello, (e) => {
        setStatus(e.message || "refused", "bad");
        sessionStorage.removeItem("acp-token");
        state.wanted = false;
        document.body.classList.remove("signed-in");
        $("login").hidden = false;
        $("app").hidden = true;
      });
      return;
    }
    if (frame.type === "res") {
      const waiting = state.pending.get(frame.id);
      if (!waiting) { return; }
      state.pending.delete(frame.id);
      if (frame.ok) { waiting.resolve(frame.payload); } else { waiting.reject(frame.error || { message: "failed" }); }
      return;
    }
    if (frame.type === "event") {
      const p = frame.payload || {};
      if (frame.event === "chat") { onChat(p); }
      if (frame.event === "agent") { onAgent(p); }
      if (frame.event === "sessions.changed") { loadSessions(); }
      if (frame.event === "exec.approval.requested") { onQuestion(p); }
      if (frame.event === "exec.approval.resolved") { onResolved(p); }
    }
  };
  ws.onclose = () => {
    state.connected = false;
    $("send").disabled = true;
    for (const waiting of state.pending.values()) { waiting.reject({ message: "disconnected" }); }
    state.pending.clear();
    if (!state.wanted) { return; }
    setStatus("disconnected — retrying in " + Math.round(state.backoff / 1000) + " s", "bad");
    setTimeout(connect, state.backoff);
    state.backoff = Math.min(state.backoff * 2, 30000);
  };
}

function onHello(hello) {
  const defaults = (hello && hello.snapshot && hello.snapshot.sessionDefaults) || {};
  const m = /^agent:([^:]+):/.exec(state.session);
  state.agent = m ? m[1] : defaults.defaultAgentId || state.agent;
  if (!state.session) { state.session = defaults.mainSessionKey || prefix() + "main"; }
  state.connected = true;
  state.backoff = 1000;
  state.questions.clear();
  setStatus("connected", "ok");
  document.body.classList.add("signed-in");
  $("login").hidden = true;
  $("app").hidden = false;
  $("send").disabled = false;
  request("sessions.subscribe", {}).catch(() => {});
  request("status", {}).then((s) => {
    state.defaultModel = (s.sessions && s.sessions.defaults && s.sessions.defaults.model) || "";
    updateSessionBar();
  }, () => {});
  // Context windows, where the gateway's model list gives them.
  request("models.list", {}).then((r) => {
    for (const m of r.models || []) {
      if (typeof m.contextWindow === "number") { state.windows.set(m.id, m.contextWindow); }
    }
    updateSessionBar();
  }, () => {});
  request("agents.list", {}).then(showAgents, () => {});
  loadSessions();
  openSession(state.session);
}

// The agent picker, when there is more than one agent.
function showAgents(r) {
  state.agents = (r && r.agents) || [];
  const picker = $("agent");
  picker.textContent = "";
  for (const a of state.agents) {
    const o = picker.appendChild(h("option", null, (a.identity && a.identity.emoji ? a.identity.emoji + " " : "")
      + (a.name || a.id)));
    o.value = a.id;
  }
  picker.value = state.agent;
  $("agent-row").hidden = state.agents.length < 2;
  renderSessions();
}

// ---- Sessions --------------------------------------------------------------------------------
function loadSessions() {
  request("sessions.list", { limit: 100 }).then((r) => {
    state.rows = new Map(r.sessions.map((s) => [s.key, s]));
    renderSessions();
    updateSessionBar();
  }, () => {});
}

function renderSessions() {
  const ul = $("sessions");
  ul.textContent = "";
  if (!state.rows.size) { ul.appendChild(h("li", "sessions-empty", "No sessions yet")); }
  for (const s of state.rows.values()) {
    const li = h("li");
    li.title = s.key;
    const b = li.appendChild(h("button", "session"));
    b.type = "button";
    b.appendChild(h("span", "session-label", s.label || shortKey(s.key)));
    const sub = b.appendChild(h("span", "session-meta"));
    if (s.label) { sub.appendChild(h("span", "session-key", shortKey(s.key))); }
    if (typeof s.updatedAt === "number") { sub.appendChild(h("span", null, formatAgo(s.updatedAt))); }
    b.appendChild(h("span", "busy-dot"));
    b.onclick = () => { openSession(s.key); closeMenu(); };
    ul.appendChild(li);
  }
  markCurrent();
}

function markCurrent() {
  for (const li of $("sessions").children) {
    li.classList.toggle("current", li.title === state.session);
    li.classList.toggle("busy", state.busy.has(li.title));
    li.querySelector("button")?.setAttribute("aria-current", li.title === state.session ? "true" : "false");
  }
}

function markBusy(key, busy) {
  if (!key) { return; }
  if (busy) { state.busy.add(key); } else { state.busy.delete(key); }
  markCurrent();
}

function modelOf(key) {
  const row = state.rows.get(key);
  return live(key).model || (row && row.model) || state.defaultModel || "";
}

// The open session's name, model, tokens used and context fill.
function updateSessionBar() {
  const key = state.session;
  const row = state.rows.get(key) || {};
  const l = live(key);
  $("session-title").textContent = row.label || shortKey(key);
  $("session-sub").textContent = [row.label ? shortKey(key) : "", row.cwd ? String(row.cwd) : ""].filter(Boolean).join(" · ");
  const model = modelOf(key);
  $("model").textContent = model ? model.slice(model.indexOf("/") + 1) : "no model";
  $("model").title = model ? "Model: " + model : "Model";
  const usage = $("usage");
  if (typeof row.inputTokens === "number" && (row.inputTokens || row.outputTokens)) {
    usage.textContent = formatTokens(row.inputTokens) + " in · " + formatTokens(row.outputTokens || 0) + " out";
    usage.title = "This session has used " + row.inputTokens.toLocaleString() + " input and "
      + (row.outputTokens || 0).toLocaleString() + " output tokens";
  } else {
    usage.textContent = "";
  }
  const used = typeof l.contextTokens === "number" ? l.contextTokens : row.contextTokens;
  const size = l.contextWindow || state.windows.get(model) || 0;
  const context = $("context");
  context.hidden = typeof used !== "number" || (!used && !size);
  if (context.hidden) { return; }
  const fill = size ? Math.min(1, used / size) : 0;
  const pct = fill * 100;
  $("context-text").textContent = size
    ? formatTokens(used) + " / " + formatTokens(size) + " · " + (pct > 0 && pct < 1 ? "<1" : Math.round(pct)) + "%"
    : formatTokens(used) + " in context";
  $("context-fill").style.width = (size ? Math.max(pct, used ? 2 : 0) : 0) + "%";
  context.title = size ? "Context: " + used.toLocaleString() + " of " + size.toLocaleString() + " tokens"
    : "Context: " + used.toLocaleString() + " tokens";
  context.className = "context" + (fill >= 0.9 ? " full" : fill >= 0.7 ? " high" : "");
}

function openSession(key) {
  state.session = key.startsWith("agent:") ? key : prefix() + key;
  const m = /^agent:([^:]+):/.exec(state.session);
  if (m && state.agents.some((a) => a.id === m[1])) { state.agent = m[1]; $("agent").value = m[1]; }
  sessionStorage.setItem("acp-session", state.session);
  $("messages").textContent = "";
  state.runs.clear();
  $("abort").disabled = true;
  markCurrent();
  updateSessionBar();
  const opened = state.session;
  request("chat.history", { sessionKey: state.session, limit: 100 }).then((hist) => {
    if (opened !== state.session) { return; }
    showHistory(hist);
  }, () => {
    if (opened === state.session) { showHistory({ messages: [] }); }
  });
}

function showHistory(hist) {
  const messages = hist.messages || [];
  if (hist.defaults && typeof hist.defaults.contextTokens === "number" && hist.defaults.model) {
    state.windows.set(hist.defaults.model, hist.defaults.contextTokens);
  }
  for (const m of messages) {
    const at = typeof m.timestamp === "number" ? m.timestamp : null;
    if (m.role === "user") {
      const text = typeof m.content === "string" ? m.content : (m.content || []).map((c) => c.text || "").join("");
      addMessage("user", text, at);
      continue;
    }
    const content = Array.isArray(m.content) ? m.content : [{ type: "text", text: String(m.content || "") }];
    const el = addMessage("assistant", content.filter((c) => c.type === "text").map((c) => c.text || "").join(""), at);
    const body = el.querySelector(".msg-body");
    setThinking(el, el.firstChild, content.filter((c) => c.type === "thinking").map((c) => c.thinking || "").join("\n"));
    for (const c of content) {
      if (c.type !== "toolCall") { continue; }
      const row = toolRow();
      setTool(row, c.title || c.name, c.status, c.status === "failed");
      addDiffs(row, c.diffs);
      el.insertBefore(row, body);
    }
    if (m.usage) { setMessageUsage(el, m.usage.input, m.usage.output); }
  }
  if (!messages.length) { showEmpty(); }
  for (const q of state.questions.values()) { showQuestion(q); }
  updateSessionBar();
}

function send() {
  const text = $("input").value;
  if (!text.trim() || !state.connected) { return; }
  $("input").value = "";
  fitInput();
  addMessage("user", text);
  request("chat.send", { sessionKey: state.session, message: text, idempotencyKey: uuid() }).catch((e) => {
    addMessage("error", e.message || "could not send");
  });
}

// A fresh session, named after the time it was started.
function newChat() {
  const d = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  openSession("web-" + d.getFullYear() + pad(d.getMonth() + 1) + pad(d.getDate()) + "-" + pad(d.getHours())
    + pad(d.getMinutes()) + pad(d.getSeconds()));
  closeMenu();
  $("input").focus();
}

function fitInput() {
  const input = $("input");
  input.style.height = "auto";
  input.style.height = Math.min(input.scrollHeight, 240) + "px";
}

function closeMenu() {
  document.body.classList.remove("nav-open");
  $("menu").setAttribute("aria-expanded", "false");
  $("scrim").hidden = true;
}

// The token from the link `acp gateway` prints (`/#token=…`: the fragment never reaches a
// server), kept for this tab only and taken out of the address bar at once.
function tokenFromLink() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem("acp-token", token);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return token || sessionStorage.getItem("acp-token") || "";
}

document.addEventListener("DOMContentLoaded", () => {
  state.session = sessionStorage.getItem("acp-session") || state.session;
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    state.token = $("token").value;
    sessionStorage.setItem("acp-token", state.token);
    connect();
  });
  const linked = tokenFromLink();
  if (linked) {
    state.token = linked;
    connect();
  } else {
    $("token").focus();
  }
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
  });
  $("input").addEventListener("input", fitInput);
  $("abort").addEventListener("click", () => {
    request("chat.abort", { sessionKey: state.session }).catch(() => {});
  });
  $("new-session").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("session-key").value.trim();
    if (key) { openSession(key); closeMenu(); }
  });
  $("new-chat").addEventListener("click", newChat);
  $("agent").addEventListener("change", () => {
    state.agent = $("agent").value;
    openSession(prefix() + "main");
    closeMenu();
  });
  $("menu").addEventListener("click", () => {
    const open = document.body.classList.toggle("nav-open");
    $("menu").setAttribute("aria-expanded", String(open));
    $("scrim").hidden = !open;
  });
  $("scrim").addEventListener("click", closeMenu);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") { closeMenu(); } });
  // Code blocks' copy buttons.
  $("messages").addEventListener("click", (e) => {
    const button = e.target.closest("button.copy");
    if (!button || !navigator.clipboard) { return; }
    navigator.clipboard.writeText(button.closest(".code").querySelector("code").textContent).then(() => {
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = "Copy"; }, 1500);
    }, () => {});
  });
});
