// An editor built on the official ACP TypeScript SDK: it offers fs (with an unsaved buffer for one
// file) and terminals (real child processes), approves permission requests, and records, in
// order, everything the agent asks and every tool-call update. Every line the agent writes is
// validated against the SDK's JSON schema. Prints a JSON report {log, files, failures, ...}.
//
// usage: node editor.mjs <scenario> <workspace> <path-to-acp> [args...]
// Scenarios (the caller scripts the model to match):
//   fix     an edit of src/lib.rs, `sh check.sh`, then text; the turn must end `end_turn`.
//   cancel  a command that runs until killed; once its terminal exists the editor cancels the turn,
//           which must end `cancelled` after the agent killed and released the terminal.
//   mcp     the editor passes its MCP servers (JSON in $ACP_TEST_MCP_SERVERS) in session/new and
//           fills forms (`elicitation/create`, answered with name "Ada"); the turn must end `end_turn`.

import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { tapAgent } from "./validate.mjs";

const [scenario, workspace, cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
const { toAgent, fromAgent, report, check } = tapAgent(child);
const log = [];
const written = {};

// The editor has an unsaved change in src/lib.rs: a comment the disk does not have yet.
const UNSAVED = "// unsaved change in the editor\n";
const buffer = (path) => {
  const disk = readFileSync(path, "utf8");
  return path.endsWith("src/lib.rs") && !(path in written) ? UNSAVED + disk : disk;
};

const terminals = new Map();
let nextTerminal = 0;
let cancel = null;

const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(fromAgent));
try {
  const result = await acp
    .client({ name: "acp-editor-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      const u = params.update;
      if (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") {
        log.push({
          event: u.sessionUpdate,
          id: u.toolCallId,
          status: u.status ?? (u.sessionUpdate === "tool_call" ? "pending" : undefined),
          content: (u.content ?? []).map((c) => c.type),
          diff: (u.content ?? []).find((c) => c.type === "diff"),
          terminalId: (u.content ?? []).find((c) => c.type === "terminal")?.terminalId,
          kind: u.kind,
          title: u.title,
          text: (u.content ?? []).filter((c) => c.type === "content" && c.content.type === "text").map((c) => c.content.text),
        });
      }
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      log.push({ event: "request_permission", id: params.toolCall.toolCallId, options: params.options.map((o) => o.kind) });
      return { outcome: { outcome: "selected", optionId: params.options.find((o) => o.kind === "allow_once").optionId } };
    })
    .onRequest(acp.methods.client.elicitation.create, ({ params }) => {
      log.push({ event: "elicitation/create", id: params.toolCallId, message: params.message, mode: params.mode, fields: Object.keys(params.requestedSchema?.properties ?? {}) });
      return { action: "accept", content: { name: "Ada" } };
    })
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => {
      log.push({ event: "fs/read_text_file", path: params.path, line: params.line, limit: params.limit });
      let content = buffer(params.path);
      if (params.line || params.limit) {
        const lines = content.split("\n");
        const from = (params.line ?? 1) - 1;
        content = lines.slice(from, params.limit ? from + params.limit : undefined).join("\n");
      }
      return { content };
    })
    .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
      log.push({ event: "fs/write_text_file", path: params.path });
      written[params.path] = params.content;
      writeFileSync(params.path, params.content);
      return {};
    })
    .onRequest(acp.methods.client.terminal.create, ({ params }) => {
      const id = `term-${nextTerminal++}`;
      log.push({ event: "terminal/create", terminalId: id, command: params.command, args: params.args, cwd: params.cwd });
      const env = { ...process.env };
      for (const { name, value } of params.env ?? []) env[name] = value;
      const proc = spawn(params.command, params.args ?? [], { cwd: params.cwd, env });
      const t = { output: "", exit: null, done: null, pid: proc.pid };
      t.done = new Promise((resolve) => proc.on("exit", (code, signal) => {
        t.exit = { exitCode: code, signal };
        resolve();
      }));
      proc.stdout.on("data", (d) => (t.output += d));
      proc.stderr.on("data", (d) => (t.output += d));
      t.proc = proc;
      terminals.set(id, t);
      if (scenario === "cancel") {
        // The user stops the turn while the command runs.
        setTimeout(() => cancel?.(), 200);
      }
      return { terminalId: id };
    })
    .onRequest(acp.methods.client.terminal.waitForExit, async ({ params }) => {
      log.push({ event: "terminal/wait_for_exit", terminalId: params.terminalId });
      const t = terminals.get(params.terminalId);
      await t.done;
      return t.exit;
    })
    .onRequest(acp.methods.client.terminal.output, ({ params }) => {
      log.push({ event: "terminal/output", terminalId: params.terminalId });
      const t = terminals.get(params.terminalId);
      return { output: t.output, truncated: false, exitStatus: t.exit ?? undefined };
    })
    .onRequest(acp.methods.client.terminal.kill, ({ params }) => {
      log.push({ event: "terminal/kill", terminalId: params.terminalId });
      const t = terminals.get(params.terminalId);
      t.proc.kill();
      log.push({ event: "killed", pid: t.pid });
      return {};
    })
    .onRequest(acp.methods.client.terminal.release, ({ params }) => {
      log.push({ event: "terminal/release", terminalId: params.terminalId });
      return {};
    })
    .connectWith(stream, async (ctx) => {
      await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: true, elicitation: { form: {} } },
        clientInfo: { name: "acp-editor-test", version: "1" },
      });
      const mcpServers = scenario === "mcp" ? JSON.parse(process.env.ACP_TEST_MCP_SERVERS) : [];
      const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd: workspace, mcpServers, _meta: { mode: "ask" } });
      cancel = () => {
        log.push({ event: "session/cancel" });
        ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      };
      return ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "fix the failing test" }],
      });
    });
  const expected = scenario === "cancel" ? "cancelled" : "end_turn";
  check(`the turn ends ${expected}`, result.stopReason === expected, result);
} catch (e) {
  report.failures.push({ problem: "client error", error: String(e?.stack ?? e) });
}

child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
await new Promise((r) => setTimeout(r, 50));
process.stdout.write(JSON.stringify({ ...report, log, written }, null, 2) + "\n");
process.exit(report.failures.length === 0 ? 0 : 1);
