// Drives the acp binary with the official ACP TypeScript SDK (@agentclientprotocol/sdk) acting as
// an editor, and validates every line the agent writes against the JSON schema the SDK ships:
// responses against the schema of the method they answer, notifications and agent requests against
// theirs, errors against `Error`. Prints a JSON report on stdout; exits non-zero on any failure.
//
// usage: node conformance.mjs <path-to-acp> [args...]
// The model is a mock the caller runs; its base URLs come in through the environment, and the
// caller scripts its replies in this order: anthropic text, anthropic thinking, anthropic text
// (stalled, for cancel), anthropic 401, openai-chat text, openai-responses thinking.

import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { PassThrough, Readable, Writable } from "node:stream";
import { createInterface } from "node:readline";
import * as acp from "@agentclientprotocol/sdk";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const require = createRequire(import.meta.url);
const schemaDir = require.resolve("@agentclientprotocol/sdk/schema/v1/schema.json").replace(/schema\.json$/, "");
const schemas = {
  stable: JSON.parse(readFileSync(schemaDir + "schema.json", "utf8")),
  unstable: JSON.parse(readFileSync(schemaDir + "schema.unstable.json", "utf8")),
};
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv, ["uri"]);
// The schema's numeric formats (from the Rust types) are ranges: check them too.
const integer = (min, max) => ({ type: "number", validate: (n) => Number.isInteger(n) && n >= min && n <= max });
ajv.addFormat("uint16", integer(0, 2 ** 16 - 1));
ajv.addFormat("uint32", integer(0, 2 ** 32 - 1));
ajv.addFormat("uint64", integer(0, Number.MAX_SAFE_INTEGER));
ajv.addFormat("int32", integer(-(2 ** 31), 2 ** 31 - 1));
ajv.addFormat("int64", integer(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
ajv.addFormat("double", { type: "number", validate: Number.isFinite });
for (const [name, schema] of Object.entries(schemas)) {
  ajv.addSchema({ ...schema, $id: `acp-${name}` });
}

const RESPONSE_DEFS = {
  initialize: "InitializeResponse",
  authenticate: "AuthenticateResponse",
  "session/new": "NewSessionResponse",
  "session/prompt": "PromptResponse",
  "session/set_mode": "SetSessionModeResponse",
  "session/set_config_option": "SetSessionConfigOptionResponse",
  "session/close": "CloseSessionResponse",
};
const AGENT_REQUEST_DEFS = {
  "session/request_permission": "RequestPermissionRequest",
  "fs/read_text_file": "ReadTextFileRequest",
  "fs/write_text_file": "WriteTextFileRequest",
};
const NOTIFICATION_DEFS = { "session/update": "SessionNotification", "$/cancel_request": "CancelRequestNotification" };

const report = { validated: 0, byKind: {}, failures: [], checks: [] };
const sentMethods = new Map();

function validate(def, value, line) {
  for (const name of Object.keys(schemas)) {
    const check = ajv.getSchema(`acp-${name}#/$defs/${def}`);
    if (!check) {
      report.failures.push({ line, problem: `no ${def} in the ${name} schema` });
      continue;
    }
    if (!check(value)) {
      report.failures.push({ line, schema: name, def, errors: check.errors });
    }
  }
  report.validated += 1;
  report.byKind[def] = (report.byKind[def] ?? 0) + 1;
}

function validateAgentLine(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    report.failures.push({ line, problem: "not JSON" });
    return;
  }
  if (msg.jsonrpc !== "2.0") report.failures.push({ line, problem: "missing jsonrpc 2.0" });
  if ("method" in msg) {
    const def = "id" in msg ? AGENT_REQUEST_DEFS[msg.method] : NOTIFICATION_DEFS[msg.method];
    if (!def) return report.failures.push({ line, problem: `unexpected agent method ${msg.method}` });
    return validate(def, msg.params, line);
  }
  if ("error" in msg) return validate("Error", msg.error, line);
  const method = sentMethods.get(JSON.stringify(msg.id));
  const def = RESPONSE_DEFS[method];
  if (!def) return report.failures.push({ line, problem: `response to unknown request ${msg.id} (${method})` });
  validate(def, msg.result, line);
}

function check(name, ok, detail) {
  report.checks.push({ name, ok: !!ok, detail });
  if (!ok) report.failures.push({ check: name, detail });
}

const [cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });

// Tap both directions: what we send (to know which method each response answers) and what the agent sends.
const toAgent = new PassThrough();
toAgent.pipe(child.stdin);
createInterface({ input: toAgent }).on("line", (line) => {
  const msg = JSON.parse(line);
  if ("id" in msg && "method" in msg) sentMethods.set(JSON.stringify(msg.id), msg.method);
});
const fromAgent = new PassThrough();
child.stdout.pipe(fromAgent);
createInterface({ input: child.stdout }).on("line", validateAgentLine);

const updates = [];
let onUpdate = () => {};
const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(fromAgent));

const text = (sessionId, kind) =>
  updates
    .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === kind)
    .map((u) => u.update.content.text)
    .join("");

try {
  await acp
    .client({ name: "acp-conformance" })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => ({
      outcome: { outcome: "selected", optionId: params.options[0].optionId },
    }))
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
      onUpdate(params);
    })
    .connectWith(stream, async (ctx) => {
      const init = await ctx.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
        clientInfo: { name: "acp-conformance", version: "1" },
      });
      check("initialize answers protocolVersion 1", init.protocolVersion === 1, init);
      check("agentInfo names acp", init.agentInfo?.name === "acp", init.agentInfo);

      const session = await ctx.request(acp.methods.agent.session.new, { cwd: process.cwd(), mcpServers: [] });
      const sessionId = session.sessionId;
      check("session/new returns modes", session.modes?.currentModeId === "code", session.modes);
      const categories = (session.configOptions ?? []).map((o) => o.category);
      check(
        "config options for model, mode and thought level",
        ["model", "mode", "thought_level"].every((c) => categories.includes(c)),
        categories,
      );
      await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "thought_level", value: "low" });

      await ctx.request(acp.methods.agent.session.setMode, { sessionId, modeId: "ask" });
      const afterSet = await ctx.request(acp.methods.agent.session.setConfigOption, {
        sessionId,
        configId: "mode",
        value: "auto",
      });
      check(
        "set_config_option returns the complete list",
        afterSet.configOptions.length === 3 && afterSet.configOptions[1].currentValue === "auto",
        afterSet,
      );

      const r1 = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "Say hello" }],
      });
      check("text turn ends end_turn", r1.stopReason === "end_turn", r1);
      check("text turn streams the reply", text(sessionId, "agent_message_chunk") === "Hello, wörld! 👋", updates);

      const r2 = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId,
        prompt: [{ type: "text", text: "Think first" }, { type: "resource_link", name: "a.rs", uri: "file:///tmp/a.rs" }],
      });
      check("thinking turn ends end_turn", r2.stopReason === "end_turn", r2);
      check("thoughts stream as agent_thought_chunk", text(sessionId, "agent_thought_chunk") === "Let me think about this.");

      // Cancel mid-stream: the reply stalls after its first text.
      const firstChunk = new Promise((resolve) => {
        onUpdate = (p) => {
          if (p.update.sessionUpdate === "agent_message_chunk") resolve();
        };
      });
      const pending = ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "Slow" }] });
      await firstChunk;
      onUpdate = () => {};
      await ctx.notify(acp.methods.agent.session.cancel, { sessionId });
      const r3 = await pending;
      check("cancel ends the turn cancelled", r3.stopReason === "cancelled", r3);

      // A provider failure is a JSON-RPC error with a message.
      try {
        await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "fail" }] });
        check("a 401 fails the prompt", false, "no error");
      } catch (e) {
        check("a 401 fails the prompt with auth_required", e.code === -32000, { code: e.code, message: e.message });
      }

      // The other two wire APIs, switched through the model config option.
      for (const [model, expected] of [
        ["openai/gpt-4.1", "Hello, wörld! 👋"],
        ["openai-responses/gpt-5-codex", "The answer is 42."],
      ]) {
        await ctx.request(acp.methods.agent.session.setConfigOption, { sessionId, configId: "model", value: model });
        const before = updates.length;
        const r = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "again" }] });
        const got = updates
          .slice(before)
          .filter((u) => u.update.sessionUpdate === "agent_message_chunk")
          .map((u) => u.update.content.text)
          .join("");
        check(`${model} turn`, r.stopReason === "end_turn" && got === expected, { r, got });
      }

      try {
        await ctx.request(acp.methods.agent.session.prompt, { sessionId: "missing", prompt: [{ type: "text", text: "x" }] });
        check("unknown session is an error", false, "no error");
      } catch (e) {
        check("unknown session is -32002 with data.sessionId", e.code === -32002 && e.data?.sessionId === "missing", e);
      }
      await ctx.request(acp.methods.agent.session.close, { sessionId });
    });
} catch (e) {
  report.failures.push({ problem: "client error", error: String(e?.stack ?? e) });
}

child.stdin.end();
const exitCode = await new Promise((resolve) => child.on("exit", (code) => resolve(code)));
check("agent exits 0 on end of input", exitCode === 0, exitCode);
// Let the line readers drain.
await new Promise((r) => setTimeout(r, 50));
check("every agent line was validated", report.validated > 20, report.validated);
process.stdout.write(JSON.stringify(report, null, 2) + "\n");
process.exit(report.failures.length === 0 ? 0 : 1);
