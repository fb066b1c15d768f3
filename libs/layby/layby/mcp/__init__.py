"""Layby and the Model Context Protocol (the ``mcp`` extra: ``pip install 'layby-server[mcp]'``).

``elicitation_handler`` lets people answer an MCP server's elicitations
(docs/mcp-elicitation.md). Loaded on first use, so ``import layby`` never needs ``mcp``.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from layby.mcp.elicitation import elicitation_handler

_HOMES = {"elicitation_handler": "layby.mcp.elicitation"}

__all__ = ["elicitation_handler"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'layby.mcp' has no attribute {name!r}")
    return getattr(import_module(home), name)
