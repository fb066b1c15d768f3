"""What a Layby process loads: nats-py without its WebSocket transport's aiohttp, structlog
without rich, the webhook sender only where webhooks go out; and the SDK alone in someone else's
program changes nothing of the kind (docs/performance.md#what-a-process-loads)."""

from __future__ import annotations

import subprocess
import sys

SERVICES = ("ask", "door", "delivery", "resume", "sweeper")


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_no_service_loads_aiohttp_or_rich_it_does_not_use() -> None:
    loaded = _run(
        "import importlib, sys\n"
        "import layby.cli\n"
        f"for name in {SERVICES!r}:\n"
        "    importlib.import_module(f'layby_services.{name}.main')\n"
        "print(sorted(m for m in ('aiohttp', 'rich', 'layby_services.delivery.webhooks') if m in sys.modules))\n"
    )
    assert loaded == "[]"


def test_the_layby_command_loads_neither() -> None:
    loaded = _run(
        "import sys\n"
        "import layby.cli\n"
        "from layby_server.operations.up import up\n"
        "print(sorted(m for m in ('aiohttp', 'rich') if m in sys.modules))\n"
    )
    assert loaded == "[]"


def test_a_hidden_package_stays_importable_for_the_code_that_uses_it() -> None:
    out = _run(
        "import layby_server, nats, structlog\n"
        "import nats.aio.transport as transport\n"
        "import aiohttp, rich\n"
        "print(transport.aiohttp is None, aiohttp.ClientSession.__name__, rich.__name__)\n"
    )
    assert out == "True ClientSession rich"


def test_a_websocket_url_gets_nats_its_websocket_transport_back() -> None:
    out = _run(
        "import layby_server, nats\n"
        "import nats.aio.transport as transport\n"
        "from layby import lean\n"
        "lean.websocket_transport()\n"
        "import aiohttp, multidict\n"
        "print(transport.aiohttp is aiohttp, transport.multidict is multidict)\n"
    )
    assert out == "True True"


def test_a_package_imported_before_layby_is_left_as_it_is() -> None:
    out = _run(
        "import aiohttp\n"
        "import layby_server, nats\n"
        "import nats.aio.transport as transport\n"
        "print(transport.aiohttp is aiohttp)\n"
    )
    assert out == "True"


def test_connecting_to_a_websocket_url_uses_the_websocket_transport() -> None:
    """Nothing listens there: the error is the connection's, not a missing transport."""
    out = _run(
        "import asyncio, socket\n"
        "import layby_server\n"
        "from layby.connection import connect_nats\n"
        "from layby_contracts.errors import Unavailable\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
        "try:\n"
        "    asyncio.run(connect_nats(f'ws://127.0.0.1:{port}', name='t', first_connect_timeout=5))\n"
        "except Unavailable as exc:\n"
        "    print('aiohttp' in str(exc), 'cannot reach NATS' in str(exc))\n"
    )
    assert out == "False True"


def test_the_sdk_alone_leaves_nats_and_structlog_as_they_are() -> None:
    """An application that imports the SDK keeps nats-py's WebSocket transport and structlog's
    rich tracebacks: only the ``layby`` command and the server packages change how they load."""
    out = _run(
        "import layby\n"
        "from layby import ask_user\n"
        "import nats.aio.transport as transport, structlog.dev\n"
        "print(transport.aiohttp is not None, structlog.dev.rich is not None)\n"
    )
    assert out == "True True"
