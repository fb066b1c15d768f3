"""Layby and the Model Context Protocol (the ``mcp`` extra: ``pip install 'layby-server[mcp]'``).

- ``layby mcp``: Layby as an MCP server (docs/mcp.md), over stdio (``serve_stdio``) or streamable
  HTTP (``serve_http``). The server is an SDK client: it connects to NATS with a token exactly as
  the CLI does (``LAYBY_NATS_URL``, ``LAYBY_TOKEN``).
- ``elicitation_handler`` lets people answer an MCP server's elicitations
  (docs/mcp-elicitation.md).

Loaded on first use, so ``import layby`` never needs ``mcp``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from layby.mcp.app import serve_http, serve_stdio
    from layby.mcp.elicitation import elicitation_handler

_HOMES = {
    "elicitation_handler": "layby.mcp.elicitation",
    "serve_http": "layby.mcp.app",
    "serve_stdio": "layby.mcp.app",
}

__all__ = ["elicitation_handler", "serve_http", "serve_stdio"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'layby.mcp' has no attribute {name!r}")
    return getattr(import_module(home), name)
