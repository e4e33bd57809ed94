// An editor on the official ACP TypeScript SDK driving an agent that bridges to a gateway
// (`acp serve --gateway …` or `openclaw acp --url …`): every line the agent writes is validated
// against the SDK's schema. It opens a session, sends a prompt and collects the reply, sends a
// second prompt and cancels it at its first chunk, lists sessions, and (when the agent loads
// sessions) loads the first one on a second connection. Prints a JSON report.
//
// usage: node bridge.mjs <cwd> <cmd> [args...]
// The caller scripts the model: 1) a text reply  2) a reply that never ends.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { tapAgent } from "./validate.mjs";

const [cwd, cmd, ...args] = process.argv.slice(2);
const out = { failures: [] };

async function connect(steps) {
  const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
  const { toAgent, fromAgent, report } = tapAgent(child);
  const updates = [];
  let onUpdate = () => {};
  const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(fromAgent));
  try {
    await acp
      .client({ name: "acp-bridge-test" })
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
          clientCapabilities: {},
          clientInfo: { name: "acp-bridge-test", version: "1" },
        });
        await steps(ctx, init, updates, (f) => (onUpdate = f));
      });
  } catch (e) {
    out.failures.push({ what: "exception", detail: String(e && e.stack || e) });
  } finally {
    toAgent.end();
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.on("exit", resolve)));
    out.failures.push(...report.failures);
    out.validated = (out.validated ?? 0) + report.validated;
  }
}

const textOf = (updates, sessionId, from, kind) =>
  updates.slice(from).filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === kind)
    .map((u) => u.update.content.text).join("");

await connect(async (ctx, init, updates, setOnUpdate) => {
  out.loadSession = init.agentCapabilities?.loadSession === true;
  const { sessionId } = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  out.sessionId = sessionId;

  let from = updates.length;
  const hello = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId, prompt: [{ type: "text", text: "Say hello." }],
  });
  out.hello = { stopReason: hello.stopReason, text: textOf(updates, sessionId, from, "agent_message_chunk") };

  from = updates.length;
  let cancelled = false;
  setOnUpdate((u) => {
    if (!cancelled && u.sessionId === sessionId && u.update.sessionUpdate === "agent_message_chunk") {
      cancelled = true;
      ctx.notify(acp.methods.agent.session.cancel, { sessionId });
    }
  });
  const count = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId, prompt: [{ type: "text", text: "Count forever." }],
  });
  out.cancel = { stopReason: count.stopReason, sawText: textOf(updates, sessionId, from, "agent_message_chunk").length > 0 };

  const listed = await ctx.request(acp.methods.agent.session.list, {});
  out.listed = listed.sessions.map((s) => s.sessionId);
});

if (out.loadSession && out.sessionId) {
  await connect(async (ctx, _init, updates) => {
    await ctx.request(acp.methods.agent.session.load, { sessionId: out.sessionId, cwd, mcpServers: [] });
    out.loaded = updates.filter((u) => u.sessionId === out.sessionId)
      .map((u) => [u.update.sessionUpdate, (u.update.content?.text ?? "").slice(0, 200)]);
  });
}

process.stdout.write("REPORT " + JSON.stringify(out) + "\n", () => process.exit(out.failures.length === 0 ? 0 : 1));
