"""An HTTP server that only records what it is sent: each request's method, path and headers as
one JSON line in LOG, answered 401 with a bearer challenge (as a server whose token is wrong).

usage: header_server.py LOG   (prints the port it listens on, on 127.0.0.1, then serves)
"""

import http.server
import json
import sys

log = open(sys.argv[1], "a", buffering=1)


class Handler(http.server.BaseHTTPRequestHandler):
    def record(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        log.write(json.dumps({"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}) + "\n")
        body = b'{"error": "bad token"}'
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="test"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = record

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
