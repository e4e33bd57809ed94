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
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { tapAgent } from "./validate.mjs";

const [cmd, ...args] = process.argv.slice(2);
const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "inherit"] });
const { toAgent, fromAgent, report, check } = tapAgent(child);

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

      // Sessions that last: listed with their title, replayed whole by load (validated like every
      // other line), resumed without replay, answered by slash commands, deleted.
      const listed = await ctx.request(acp.methods.agent.session.list, {});
      const mine = listed.sessions.find((s) => s.sessionId === sessionId);
      check("session/list shows the session with its title", mine?.title === "Say hello" && !!mine?.updatedAt, listed);
      const beforeLoad = updates.length;
      const loaded = await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
      const replay = updates.slice(beforeLoad).map((u) => u.update);
      const userBlocks = replay.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content);
      const userTexts = userBlocks.map((c) => c.text ?? `[${c.type} ${c.uri}]`);
      check(
        "session/load replays every prompt as sent",
        userTexts.join("|") === "Say hello|Think first|[resource_link file:///tmp/a.rs]|Slow|fail|again|again",
        userTexts,
      );
      check(
        "session/load replays thoughts and replies",
        replay.some((u) => u.sessionUpdate === "agent_thought_chunk" && u.content.text === "Let me think about this.") &&
          replay.some((u) => u.sessionUpdate === "agent_message_chunk" && u.content.text === "Hello, wörld! 👋"),
        replay,
      );
      check("session/load restores the model", loaded.configOptions?.[0]?.currentValue === "openai-responses/gpt-5-codex", loaded);
      const beforeResume = updates.length;
      const resumed = await ctx.request(acp.methods.agent.session.resume, { sessionId, cwd: process.cwd() });
      // After the answer come the commands and the context's fill, never the conversation.
      const setupOnly = ["available_commands_update", "usage_update", "session_info_update"];
      const afterResume = updates.slice(beforeResume).filter((u) => !setupOnly.includes(u.update.sessionUpdate));
      check("session/resume answers without replaying", afterResume.length === 0 && resumed.modes?.currentModeId === "auto", {
        resumed,
        replayed: afterResume,
      });
      const status = await ctx.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: "text", text: "/status" }] });
      check("/status ends end_turn", status.stopReason === "end_turn", status);
      await ctx.request(acp.methods.agent.session.delete, { sessionId });
      const after = await ctx.request(acp.methods.agent.session.list, {});
      check("session/delete removes it from the list", !after.sessions.some((s) => s.sessionId === sessionId), after);
      try {
        await ctx.request(acp.methods.agent.session.load, { sessionId, cwd: process.cwd(), mcpServers: [] });
        check("a deleted session cannot be loaded", false, "no error");
      } catch (e) {
        check("a deleted session cannot be loaded", e.code === -32002, e);
      }
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
