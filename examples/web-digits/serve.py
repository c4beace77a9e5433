#!/usr/bin/env python3
"""Serves www/ on a loopback address only: `./serve.py [PORT]` (default 8000; 0 picks a free
port). Prints `serving http://127.0.0.1:PORT/` once listening. Wasm goes out as
application/wasm, which the browser needs to compile it while it downloads."""
import functools
import http.server
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "www")


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".wasm": "application/wasm", ".js": "text/javascript"}

    def log_message(self, fmt, *args):
        if os.environ.get("WEB_DIGITS_LOG"):
            super().log_message(fmt, *args)


port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Handler, directory=root))
print(f"serving http://127.0.0.1:{server.server_address[1]}/", flush=True)
server.serve_forever()
