"""An OTLP/HTTP endpoint that accepts every export and keeps nothing: the benchmarks measure what
tracing costs the services (making, batching, encoding and sending spans), not a trace backend."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Discard(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def start_sink() -> tuple[str, ThreadingHTTPServer]:
    """(the endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, the server to shut down)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Discard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server
