// The gateway's web chat: log in with the token, list and open sessions, send, watch the reply
// stream in, see tool calls, answer approval questions, stop a run; reconnects (1 s → 30 s) when
// the gateway goes away.
// Model output is never inserted as HTML: text is escaped first, then a small Markdown subset
// (code blocks, inline code, bold, italics, http(s) links, lists) is built from it.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  ws: null, token: "", session: "agent:main:main", nextId: 1, pending: new Map(),
  runs: new Map(), backoff: 1000, wanted: false, connected: false,
  // Approval questions waiting, by id (the gateway sends those asked before we connected).
  questions: new Map(),
};

function setStatus(text, kind) {
  const el = $("status");
  el.textContent = text;
  el.className = "status " + (kind || "");
}

function uuid() {
  return crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2);
}

// ---- Markdown, safely ----------------------------------------------------------------------
function escapeHtml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

function inline(escaped) {
  return escaped
    .replace(/`([^`]+)`/g, "<code>$1</code>")
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, "$1<em>$2</em>")
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)"]+)\)/g, '<a href="$2" rel="noopener noreferrer" target="_blank">$1</a>');
}

// Markdown text to HTML; everything from the model is escaped before any tag is added.
function renderMarkdown(text) {
  const out = [];
  const parts = text.split(/```/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {
      const body = part.replace(/^[^\n]*\n/, "");
      out.push("<pre><code>" + escapeHtml(body) + "</code></pre>");
      return;
    }
    let list = null;
    for (const line of part.split("\n")) {
      const item = line.match(/^\s*(?:[-*]|\d+\.)\s+(.*)$/);
      if (item) {
        if (!list) { list = []; }
        list.push("<li>" + inline(escapeHtml(item[1])) + "</li>");
        continue;
      }
      if (list) { out.push("<ul>" + list.join("") + "</ul>"); list = null; }
      if (line.trim() === "") { continue; }
      out.push("<p>" + inline(escapeHtml(line)) + "</p>");
    }
    if (list) { out.push("<ul>" + list.join("") + "</ul>"); }
  });
  return out.join("");
}

// ---- Messages on screen ----------------------------------------------------------------------
function addMessage(role, text) {
  const el = document.createElement("div");
  el.className = "msg " + role;
  if (role === "assistant") { el.innerHTML = renderMarkdown(text); } else { el.textContent = text; }
  $("messages").appendChild(el);
  el.scrollIntoView({ block: "end" });
  return el;
}

function runView(runId) {
  let run = state.runs.get(runId);
  if (!run) {
    const el = addMessage("assistant", "");
    run = { el, body: document.createElement("div"), tools: new Map(), text: "" };
    el.appendChild(run.body);
    state.runs.set(runId, run);
    $("abort").disabled = false;
  }
  return run;
}

function onChat(p) {
  if (p.sessionKey !== state.session) { return; }
  const run = runView(p.runId);
  const block = p.message && Array.isArray(p.message.content) ? p.message.content.find((c) => c.type === "text") : null;
  const text = block ? block.text || "" : run.text;
  if (p.state === "delta" || p.state === "final" || p.state === "aborted") {
    run.text = text;
    // Deltas come faster than frames: render once per frame, the latest text.
    if (!run.scheduled) {
      run.scheduled = true;
      requestAnimationFrame(() => {
        run.scheduled = false;
        run.body.innerHTML = renderMarkdown(run.text);
        run.el.scrollIntoView({ block: "end" });
      });
    }
  }
  if (p.state === "aborted") {
    const note = document.createElement("div");
    note.className = "note";
    note.textContent = "(stopped)";
    run.el.appendChild(note);
  }
  if (p.state === "error") {
    run.el.classList.add("error");
    const note = document.createElement("div");
    note.className = "note";
    note.textContent = p.errorMessage || "The run failed.";
    run.el.appendChild(note);
  }
  if (p.state === "final" || p.state === "aborted" || p.state === "error") {
    state.runs.delete(p.runId);
    $("abort").disabled = state.runs.size === 0;
  }
}

function onAgent(p) {
  if (p.sessionKey !== state.session || p.stream !== "tool") { return; }
  const run = runView(p.runId);
  const d = p.data || {};
  let el = run.tools.get(d.toolCallId);
  if (!el) {
    el = document.createElement("div");
    el.className = "tool";
    run.tools.set(d.toolCallId, el);
    run.el.insertBefore(el, run.body);
  }
  el.textContent = (d.title || d.name) + " — " + d.status;
  if (d.phase === "result" && d.isError) { el.classList.add("failed"); }
}

// ---- Approval questions ---------------------------------------------------------------------
// Shown as text (never HTML): what will run, and one button per choice the agent offers.
function showQuestion(q) {
  const r = q.request || {};
  if (r.sessionKey !== state.session || document.getElementById("q-" + q.id)) { return; }
  const box = document.createElement("div");
  box.className = "question";
  box.id = "q-" + q.id;
  const title = document.createElement("div");
  title.className = "question-title";
  title.textContent = "Approve: " + (r.title || r.toolName || "this action");
  box.appendChild(title);
  if (r.command && r.command !== r.title) {
    const pre = document.createElement("pre");
    pre.textContent = r.command;
    box.appendChild(pre);
  }
  for (const c of r.content || []) {
    if (c.type !== "diff") { continue; }
    const pre = document.createElement("pre");
    pre.textContent = c.path + "\n" + c.newText;
    box.appendChild(pre);
  }
  const buttons = document.createElement("div");
  buttons.className = "actions";
  for (const o of r.options || []) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = o.label;
    b.className = o.kind.startsWith("allow") ? "allow" : "reject";
    b.onclick = () => {
      for (const other of buttons.children) { other.disabled = true; }
      request("exec.approval.resolve", { id: q.id, decision: o.id }).catch((e) => {
        title.textContent = e.message || "could not answer";
      });
    };
    buttons.appendChild(b);
  }
  box.appendChild(buttons);
  const run = r.runId ? runView(r.runId) : null;
  if (run) { run.el.insertBefore(box, run.body); } else { $("messages").appendChild(box); }
  box.scrollIntoView({ block: "end" });
}

function onQuestion(q) {
  state.questions.set(q.id, q);
  showQuestion(q);
}

function onResolved(p) {
  state.questions.delete(p.id);
  const box = document.getElementById("q-" + p.id);
  if (!box) { return; }
  const note = document.createElement("div");
  note.className = "note";
  note.textContent = p.reason === "expired" ? "(not answered in time: not run)"
    : p.reason === "cancelled" ? "(withdrawn)" : p.decision === "deny" ? "(rejected)" : "(allowed)";
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
  setStatus("connecting…");
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
      if (frame.event === "chat") { onChat(frame.payload); }
      if (frame.event === "agent") { onAgent(frame.payload); }
      if (frame.event === "sessions.changed") { loadSessions(); }
      if (frame.event === "exec.approval.requested") { onQuestion(frame.payload); }
      if (frame.event === "exec.approval.resolved") { onResolved(frame.payload); }
    }
  };
  ws.onclose = () => {
    state.connected = false;
    for (const waiting of state.pending.values()) { waiting.reject({ message: "disconnected" }); }
    state.pending.clear();
    if (!state.wanted) { return; }
    setStatus("disconnected — retrying in " + Math.round(state.backoff / 1000) + " s", "bad");
    setTimeout(connect, state.backoff);
    state.backoff = Math.min(state.backoff * 2, 30000);
  };
}

function onHello() {
  state.connected = true;
  state.backoff = 1000;
  state.questions.clear();
  setStatus("connected", "ok");
  $("login").hidden = true;
  $("app").hidden = false;
  request("sessions.subscribe", {}).catch(() => {});
  loadSessions();
  openSession(state.session);
}

function loadSessions() {
  request("sessions.list", { limit: 100 }).then((r) => {
    const ul = $("sessions");
    ul.textContent = "";
    for (const s of r.sessions) {
      const li = document.createElement("li");
      li.textContent = s.label || s.key;
      if (s.label) {
        const key = document.createElement("small");
        key.textContent = s.key.replace(/^agent:main:/, "");
        li.appendChild(key);
      }
      li.title = s.key;
      if (s.key === state.session) { li.className = "current"; }
      li.onclick = () => openSession(s.key);
      ul.appendChild(li);
    }
  }, () => {});
}

function openSession(key) {
  state.session = key.startsWith("agent:") ? key : "agent:main:" + key;
  $("messages").textContent = "";
  state.runs.clear();
  for (const li of $("sessions").children) { li.className = li.title === state.session ? "current" : ""; }
  request("chat.history", { sessionKey: state.session, limit: 100 }).then((h) => {
    for (const m of h.messages) {
      const text = typeof m.content === "string" ? m.content : m.content.map((c) => c.text || "").join("");
      addMessage(m.role === "user" ? "user" : "assistant", text);
    }
    for (const q of state.questions.values()) { showQuestion(q); }
  }, () => {});
}

function send() {
  const text = $("input").value;
  if (!text.trim() || !state.connected) { return; }
  $("input").value = "";
  addMessage("user", text);
  request("chat.send", { sessionKey: state.session, message: text, idempotencyKey: uuid() }).catch((e) => {
    addMessage("error", e.message || "could not send");
  });
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
  }
  $("composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
  });
  $("abort").addEventListener("click", () => {
    request("chat.abort", { sessionKey: state.session }).catch(() => {});
  });
  $("new-session").addEventListener("submit", (e) => {
    e.preventDefault();
    const key = $("session-key").value.trim();
    if (key) { openSession(key); }
  });
});
