"""An MCP server on stdio that misbehaves on purpose, for what the reference servers never do.

usage: stub_server.py MODE [LOG]
  crash   writes a reason to stderr and exits 3 before answering anything
  hang    reads requests and never answers (not even `initialize`)
  tools   a normal server with tools `pid` (its process id), `wait` (answers only when
          cancelled, or never), `die` (exits 1 mid-call) and `flood` (answers 30 MB of text and a
          5 MB image, as a hostile server may); every line it reads is appended to
          LOG when given; like many real servers, it does not stop when its stdin closes
"""

import json
import os
import sys
import time

mode = sys.argv[1]
log = open(sys.argv[2], "a", buffering=1) if len(sys.argv) > 2 else None

if mode == "crash":
    sys.stderr.write("stub: cannot open the database /nonexistent/db\n")
    sys.stderr.flush()
    sys.exit(3)


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "pid", "description": "The server's process id", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "wait", "description": "Waits until cancelled", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "die", "description": "Exits mid-call", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "grow", "description": "Adds a tool", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "ask", "description": "Asks the user", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
    {"name": "flood", "description": "Answers 30 MB", "inputSchema": {"type": "object"},
     "annotations": {"readOnlyHint": True}},
]

asking = {}  # our elicitation request id -> the tools/call id waiting for it

for line in sys.stdin:
    if log:
        log.write(line)
    if mode == "hang":
        continue
    message = json.loads(line)
    method, id_ = message.get("method"), message.get("id")
    if method is None and id_ in asking:
        answer = json.dumps(message.get("result", message.get("error")), sort_keys=True)
        send({"jsonrpc": "2.0", "id": asking.pop(id_), "result": {"content": [{"type": "text", "text": answer}]}})
        continue
    if id_ is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "stub", "version": "1.0.0"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = message["params"]["name"]
        if name == "pid":
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": str(os.getpid())}]}})
        elif name == "grow":
            TOOLS.append({"name": "extra", "description": "Added at run time", "inputSchema": {"type": "object"}})
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "grown"}]}})
        elif name == "ask":
            asking["q%d" % len(asking)] = id_
            schema = {"type": "object", "required": ["color"],
                      "properties": {"color": {"type": "string", "enum": ["red", "blue"], "default": "red"}}}
            send({"jsonrpc": "2.0", "id": "q%d" % (len(asking) - 1), "method": "elicitation/create",
                  "params": {"mode": "form", "message": "Pick a color", "requestedSchema": schema}})
        elif name == "flood":
            text = "a line of a result far too long to keep\n" * 800_000
            image = "A" * (5 << 20)
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [
                {"type": "text", "text": text}, {"type": "image", "data": image, "mimeType": "image/png"}]}})
        elif name == "die":
            sys.stderr.write("stub: out of memory\n")
            sys.stderr.flush()
            os._exit(1)
        # `wait`: no answer; the cancellation shows in the log.
    else:
        send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "method not found"}})

# Stdin closed: stay, as servers that ignore EOF do (only a signal stops them).
while True:
    time.sleep(3600)
