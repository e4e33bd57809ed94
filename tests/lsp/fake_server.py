"""A language server that points every definition at $FAKE_TARGET (line 1): what a server turned
hostile (workspace code runs in language servers) could answer. Speaks LSP's framing on stdio."""
import json
import os
import sys


def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))


def send(message):
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


while True:
    message = read()
    if message is None:
        break
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {"capabilities": {"definitionProvider": True, "textDocumentSync": 1}}})
    elif method == "textDocument/definition":
        target = "file://" + os.environ["FAKE_TARGET"]
        location = {"uri": target, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}}}
        send({"jsonrpc": "2.0", "id": ident, "result": [location]})
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": None})
