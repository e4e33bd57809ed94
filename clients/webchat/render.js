// The web chat's pure helpers, no page state: escaping, the Markdown subset, line diffs, and how
// times and token counts read. Loaded before app.js.
// Model output is never inserted as HTML: text is escaped first, then the Markdown subset (code
// blocks, inline code, headings, quotes, bold, italics, http(s) links, lists) is built from it.
"use strict";

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
      // A fenced block (the last one may still be streaming in, unclosed).
      const lang = (part.match(/^([\w+#.-]*)/) || ["", ""])[1];
      const body = part.replace(/^[^\n]*\n?/, "").replace(/\n$/, "");
      out.push('<div class="code"><div class="code-head"><span>' + escapeHtml(lang || "text")
        + '</span><button type="button" class="copy">Copy</button></div><pre><code>' + escapeHtml(body) + "</code></pre></div>");
      return;
    }
    let list = null;
    let para = null;
    const flush = () => {
      if (list) { out.push("<" + list.tag + ">" + list.items.join("") + "</" + list.tag + ">"); list = null; }
      if (para) { out.push("<p>" + para.join("<br>") + "</p>"); para = null; }
    };
    for (const line of part.split("\n")) {
      const item = line.match(/^\s*([-*]|\d+\.)\s+(.*)$/);
      if (item) {
        const tag = /\d/.test(item[1]) ? "ol" : "ul";
        if (para || (list && list.tag !== tag)) { flush(); }
        if (!list) { list = { tag, items: [] }; }
        list.items.push("<li>" + inline(escapeHtml(item[2])) + "</li>");
        continue;
      }
      const heading = line.match(/^(#{1,6})\s+(.*)$/);
      const quote = line.match(/^>\s?(.*)$/);
      if (heading || quote || line.trim() === "") {
        flush();
        if (heading) {
          const level = Math.min(heading[1].length + 2, 6);
          out.push("<h" + level + ">" + inline(escapeHtml(heading[2])) + "</h" + level + ">");
        } else if (quote) {
          out.push("<blockquote>" + inline(escapeHtml(quote[1])) + "</blockquote>");
        }
        continue;
      }
      if (list) { flush(); }
      if (!para) { para = []; }
      para.push(inline(escapeHtml(line)));
    }
    flush();
  });
  return out.join("");
}

// ---- Line diffs --------------------------------------------------------------------------------
function splitLines(text) {
  if (!text) { return []; }
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") { lines.pop(); }
  return lines;
}

// The line diff of two texts, as [{op: " " | "-" | "+", text, oldNo, newNo}]: common ends
// trimmed, then a longest common subsequence of what is left (past 4M cells, all of the old
// middle removed and all of the new added: still correct, only less tidy).
function lineDiff(oldText, newText) {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) { start++; }
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA--; endB--; }
  const n = endA - start;
  const m = endB - start;
  const ops = [];
  for (let i = 0; i < start; i++) { ops.push([" ", i, i]); }
  if (n > 0 && m > 0 && n * m <= 4e6) {
    // lcs[i][j]: the common subsequence of a[start+i..endA] and b[start+j..endB].
    const w = m + 1;
    const lcs = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * w + j] = a[start + i] === b[start + j] ? lcs[(i + 1) * w + j + 1] + 1
          : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[start + i] === b[start + j]) { ops.push([" ", start + i++, start + j++]); }
      else if (j < m && (i === n || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) { ops.push(["+", -1, start + j++]); }
      else { ops.push(["-", start + i++, -1]); }
    }
    // Within a change, removals read first.
    for (let k = start; k < ops.length; k++) {
      let e = k;
      while (e < ops.length && ops[e][0] !== " ") { e++; }
      if (e > k) {
        const run = ops.slice(k, e);
        ops.splice(k, e - k, ...run.filter((o) => o[0] === "-"), ...run.filter((o) => o[0] === "+"));
      }
      k = e;
    }
  } else {
    for (let i = start; i < endA; i++) { ops.push(["-", i, -1]); }
    for (let j = start; j < endB; j++) { ops.push(["+", -1, j]); }
  }
  for (let k = 0; k < a.length - endA; k++) { ops.push([" ", endA + k, endB + k]); }
  return ops.map(([op, i, j]) => ({ op, text: op === "+" ? b[j] : a[i], oldNo: i + 1, newNo: j + 1 }));
}

// Groups a line diff into hunks with `context` unchanged lines around each change:
// [{header: "@@ -a,b +c,d @@", lines}].
function diffHunks(lines, context) {
  const hunks = [];
  let k = 0;
  while (k < lines.length) {
    while (k < lines.length && lines[k].op === " ") { k++; }
    if (k === lines.length) { break; }
    let from = Math.max(0, k - context);
    if (hunks.length && from <= hunks[hunks.length - 1].to) { from = hunks.pop().from; }
    let to = k;
    // Extend while the next change is within 2 × context unchanged lines.
    for (;;) {
      while (to < lines.length && lines[to].op !== " ") { to++; }
      let next = to;
      while (next < lines.length && lines[next].op === " ") { next++; }
      if (next < lines.length && next - to <= 2 * context) { to = next; continue; }
      break;
    }
    to = Math.min(lines.length, to + context);
    hunks.push({ from, to });
    k = to;
  }
  return hunks.map(({ from, to }) => {
    const part = lines.slice(from, to);
    const olds = part.filter((l) => l.op !== "+");
    const news = part.filter((l) => l.op !== "-");
    const oldStart = olds.length ? olds[0].oldNo : (lines.slice(0, from).filter((l) => l.op !== "+").length);
    const newStart = news.length ? news[0].newNo : (lines.slice(0, from).filter((l) => l.op !== "-").length);
    return { header: "@@ -" + oldStart + "," + olds.length + " +" + newStart + "," + news.length + " @@", lines: part };
  });
}

// ---- Figures -------------------------------------------------------------------------------------
// 950, 12.3k, 200k, 1.2M.
function formatTokens(n) {
  if (typeof n !== "number" || !isFinite(n)) { return "–"; }
  if (n < 1000) { return String(Math.round(n)); }
  if (n < 1e6) { return (n < 1e4 ? (n / 1e3).toFixed(1) : Math.round(n / 1e3)).toString().replace(/\.0$/, "") + "k"; }
  return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
}

// A message's time: "14:05" today, else "3 Mar, 14:05" (and the year when it is not this one).
function formatTime(ms) {
  const d = new Date(ms);
  const now = new Date();
  const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (d.toDateString() === now.toDateString()) { return time; }
  const date = d.toLocaleDateString([], d.getFullYear() === now.getFullYear()
    ? { day: "numeric", month: "short" } : { day: "numeric", month: "short", year: "numeric" });
  return date + ", " + time;
}

// "just now", "5 min ago", "3 h ago", else the date.
function formatAgo(ms) {
  const s = (Date.now() - ms) / 1000;
  if (s < 60) { return "just now"; }
  if (s < 3600) { return Math.floor(s / 60) + " min ago"; }
  if (s < 86400) { return Math.floor(s / 3600) + " h ago"; }
  return new Date(ms).toLocaleDateString([], { day: "numeric", month: "short" });
}
