// Validates every line an ACP agent writes against the JSON schema shipped with the official
// TypeScript SDK (@agentclientprotocol/sdk): schema.json and schema.unstable.json. Responses are
// checked against the schema of the method they answer, agent requests and notifications against
// theirs, errors against `Error`.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { PassThrough } from "node:stream";
import { createInterface } from "node:readline";
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
  "session/load": "LoadSessionResponse",
  "session/resume": "ResumeSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/delete": "DeleteSessionResponse",
};
const AGENT_REQUEST_DEFS = {
  "session/request_permission": "RequestPermissionRequest",
  "fs/read_text_file": "ReadTextFileRequest",
  "fs/write_text_file": "WriteTextFileRequest",
  "terminal/create": "CreateTerminalRequest",
  "terminal/output": "TerminalOutputRequest",
  "terminal/wait_for_exit": "WaitForTerminalExitRequest",
  "terminal/kill": "KillTerminalRequest",
  "terminal/release": "ReleaseTerminalRequest",
  "elicitation/create": "CreateElicitationRequest",
};
const NOTIFICATION_DEFS = { "session/update": "SessionNotification", "$/cancel_request": "CancelRequestNotification" };

/// Taps both directions of a child agent's stdio; returns the streams to hand to the SDK and a report.
export function tapAgent(child) {
  const report = { validated: 0, byKind: {}, failures: [], checks: [] };
  const sentMethods = new Map();

  const validate = (def, value, line) => {
    for (const name of Object.keys(schemas)) {
      const check = ajv.getSchema(`acp-${name}#/$defs/${def}`);
      if (!check) {
        report.failures.push({ line, problem: `no ${def} in the ${name} schema` });
      } else if (!check(value)) {
        report.failures.push({ line, schema: name, def, errors: check.errors });
      }
    }
    report.validated += 1;
    report.byKind[def] = (report.byKind[def] ?? 0) + 1;
  };

  const onAgentLine = (line) => {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch {
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
  };

  const toAgent = new PassThrough();
  toAgent.pipe(child.stdin);
  createInterface({ input: toAgent }).on("line", (line) => {
    const msg = JSON.parse(line);
    if ("id" in msg && "method" in msg) sentMethods.set(JSON.stringify(msg.id), msg.method);
  });
  const fromAgent = new PassThrough();
  child.stdout.pipe(fromAgent);
  createInterface({ input: child.stdout }).on("line", onAgentLine);

  const check = (name, ok, detail) => {
    report.checks.push({ name, ok: !!ok, detail });
    if (!ok) report.failures.push({ check: name, detail });
  };
  return { toAgent, fromAgent, report, check };
}
