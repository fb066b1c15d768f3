"""``layby mcp``: Layby as an MCP server (docs/mcp.md), over stdio or streamable HTTP.

Needs the ``mcp`` extra (``pip install 'layby-server[mcp]'``). The server is an SDK client: it
connects to NATS with a token exactly as the CLI does (``LAYBY_NATS_URL``, ``LAYBY_TOKEN``).
"""

from layby.mcp.app import serve_http, serve_stdio

__all__ = ["serve_http", "serve_stdio"]
