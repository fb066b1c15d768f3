"""Load two libraries without the optional packages they import whenever those are installed.

- nats-py imports aiohttp (and multidict) for its WebSocket transport, in every process that
  imports ``nats`` at all;
- structlog imports rich for pretty tracebacks in its console renderer.

Both packages are installed beside Layby (aiohttp signs webhooks out and carries the Slack and
Twilio SDKs; Litestar depends on rich), and both cost every process that never uses them: about
8 MB of resident memory and 120 ms of start-up for aiohttp, 3 MB and 35 ms for rich, in each of
the five services, ``layby up`` and every CLI command (docs/performance.md#what-a-process-loads).
Layby connects to NATS over TCP and writes its logs as JSON or plain console lines, so neither
import is used. ``install`` adds an import hook (it imports nothing itself) under which those
two modules are executed with the optional package hidden: its ``import`` fails, the library
falls back as it does when the package is absent, and the package stays importable for the code
that does use it (the webhook sender imports aiohttp where it needs it). The ``layby`` command
(and every service it starts) and the server packages install it; the SDK alone does not, so
``import layby`` in someone else's program leaves their nats-py and structlog as they are.

A NATS URL with a ``ws://`` or ``wss://`` scheme still works: ``websocket_transport`` gives
nats-py back its WebSocket transport before such a connection is opened.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

_HIDDEN: dict[str, tuple[str, ...]] = {
    "nats.aio.transport": ("aiohttp", "multidict"),
    "structlog.dev": ("rich",),
    "structlog.tracebacks": ("rich",),
}
"""For each module: the optional packages it is executed without."""


class _Hiding(importlib.abc.Loader):
    """A module's own loader, run while ``hidden`` packages not yet imported cannot be."""

    def __init__(self, loader: importlib.abc.Loader, hidden: tuple[str, ...]) -> None:
        self._loader = loader
        self._hidden = hidden

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        hidden = [name for name in self._hidden if name not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` fail
        try:
            self._loader.exec_module(module)
        finally:
            for name in hidden:
                if sys.modules.get(name, ModuleType) is None:
                    del sys.modules[name]


class _Lean(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        hidden = _HIDDEN.get(fullname)
        if hidden is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Hiding(spec.loader, hidden)
        return spec


_HOOK = _Lean()


def install() -> None:
    """Add the hook (once). It acts only on modules not imported yet."""
    if _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def websocket_transport() -> None:
    """Give nats-py its WebSocket transport back (for a ``ws://`` or ``wss://`` URL): import
    aiohttp, which then must be installed, and hand it to the transport module."""
    transport = importlib.import_module("nats.aio.transport")
    if getattr(transport, "aiohttp", None) is None:
        transport.aiohttp = importlib.import_module("aiohttp")  # type: ignore[attr-defined]
        transport.multidict = importlib.import_module("multidict")  # type: ignore[attr-defined]
