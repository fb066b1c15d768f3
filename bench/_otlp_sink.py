"""An OTLP/HTTP endpoint that accepts every export and keeps nothing: the benchmarks measure what
tracing costs the services (making, batching, encoding and sending spans), not a trace backend.
It runs as a process of its own, so it takes no time from the benchmark's client.

    python bench/_otlp_sink.py        # prints its endpoint, then serves until killed
"""

from __future__ import annotations

import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Discard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the exporter reuses its connection

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def start_sink() -> tuple[str, subprocess.Popen[str]]:
    """(the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, the sink's process to terminate)."""
    proc = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc.stdout.readline().strip(), proc


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
