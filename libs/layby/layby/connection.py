"""The NATS connection every Layby process opens: the SDK's, the worker's and the services'.

Once connected, a connection reconnects forever: a NATS restart must not kill a service or a
waiting ask. The first connection is different: the SDK gives up after ``first_connect_timeout``
with an error naming the variable and the address (a wrong ``LAYBY_NATS_URL`` is a clear error,
not an endless retry), while a service waits for NATS as long as it takes and can be stopped at
any moment. Connection errors are logged once per distinct error and backoff step, never as a
traceback per retry (docs/errors.md#connection-failures).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from nats.aio.client import Client as NATS

from layby import lean
from layby.logs import get_logger
from layby_contracts.errors import Unavailable

NO_MESSAGE_FOUND = 10037
"""JetStream's error code for a read of an empty subject (an answer, not a failure)."""
WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for an append whose expected last subject sequence moved on (a lost race)."""
REPEAT_LOG_SECONDS = 30.0
PING_SECONDS = 2
MAX_OUTSTANDING_PINGS = 2
"""A connection whose server misses this many pings in a row is closed and made again to another
server (docs/reliability.md#clients-and-failover)."""

log = get_logger("layby.connection")


def servers(url: str) -> list[str]:
    """The servers a NATS URL names: one URL, or several separated by commas (a cluster's seeds,
    as NATS clients write them; docs/reliability.md#naming-a-cluster). Blanks around each are
    ignored; an empty entry is an error naming the variable's value."""
    found = [part.strip() for part in url.split(",")]
    if not url.strip() or any(not part for part in found):
        raise ValueError(f"a NATS URL list has an empty entry: {url!r}")
    return found


def redacted(url: str) -> str:
    """The URL (or each of a comma-separated list) without a password, fit for a log line or an
    error message."""
    if "," in url:
        return ", ".join(redacted(part.strip()) for part in url.split(","))
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else "***@"
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


class _ErrorLog:
    """nats-py reports every failed attempt; log the first of each kind, then at most one line per
    ``REPEAT_LOG_SECONDS`` with how many were skipped."""

    def __init__(self, name: str, url: str, variable: str, *, servers: int = 1) -> None:
        self._where = {"client": name, "address": redacted(url), "variable": variable}
        self._servers = servers
        self._attempts = 0
        self.reasons: list[str] = []
        """The distinct reasons first attempts failed, in order (for the error naming them)."""
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self.latest: BaseException | None = None
        self.refused: BaseException | None = None
        self.failed = asyncio.Event()
        self.denied = asyncio.Event()

    async def on_error(self, exc: Exception) -> None:
        if self.refused is None and "authorization violation" in str(exc).lower():
            self.refused = exc  # the reason worth naming; the reset that follows is its echo
            self.denied.set()
        self.latest = exc
        self._attempts += 1
        reason = _describe(exc)
        if reason not in self.reasons:
            self.reasons.append(reason)
        if self._attempts >= self._servers:
            self.failed.set()  # every server named has failed once: a client gives up here
        kind = type(exc).__name__
        now = time.monotonic()
        if now - self._last.get(kind, -REPEAT_LOG_SECONDS) < REPEAT_LOG_SECONDS:
            self._skipped[kind] = self._skipped.get(kind, 0) + 1
            return
        self._last[kind] = now
        skipped = self._skipped.pop(kind, 0)
        log.warning("nats.connection_error", error=f"{kind}: {exc}", repeated=skipped, **self._where)


async def connect_nats(
    url: str,
    *,
    name: str,
    variable: str = "LAYBY_NATS_URL",
    first_connect_timeout: float | None = None,
    seed: str | None = None,
    inbox_prefix: str | None = None,
    ca_file: str | None = None,
    reconnected: Callable[[], Awaitable[None]] | None = None,
) -> NATS:
    """Connect to NATS and reconnect forever once connected.

    ``first_connect_timeout``: how long the first connection may take before ``Unavailable``
    naming ``variable`` and the address (None: wait until connected, or until cancelled).
    ``seed``: the NATS key this connection signs in with (docs/security.md#nats-identities);
    ``inbox_prefix``: where its request replies arrive (only its own key may read there);
    ``ca_file``: the CA that signs a ``tls://`` server's certificate (LAYBY_NATS_CA_FILE);
    ``reconnected``: called each time the connection is made again (to the same server or
    another of those named): what was published to this client meanwhile is lost.
    """
    try:
        addresses = servers(url)
    except ValueError as exc:
        raise Unavailable(f"{variable} is not a usable NATS URL: {exc}") from None
    if any(urlsplit(address).scheme in ("ws", "wss") for address in addresses):
        lean.websocket_transport()
    errors = _ErrorLog(name, url, variable, servers=len(addresses))
    nc = NATS()
    options: dict[str, Any] = {}
    if seed is not None:
        options["nkeys_seed_str"] = seed
    if inbox_prefix is not None:
        options["inbox_prefix"] = inbox_prefix
    if ca_file is not None:
        options["tls"] = ssl.create_default_context(cafile=ca_file)
    if reconnected is not None:
        options["reconnected_cb"] = reconnected
    attempt = nc.connect(
        addresses,
        **options,
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,  # type: ignore[arg-type]  # seconds; fractions work
        connect_timeout=5,
        # A server that stops answering (paused, partitioned) is left within a few seconds for
        # another of the servers named, instead of the client default's four minutes.
        ping_interval=PING_SECONDS,
        max_outstanding_pings=MAX_OUTSTANDING_PINGS,
        allow_reconnect=True,
        error_cb=errors.on_error,
    )
    # A service waits for NATS as long as it takes (cancellable), unless NATS refuses its key:
    # that does not heal by waiting. A client fails fast: on the first failed attempt, or when
    # the first connection takes too long. With several servers named, a client tries each once
    # before it gives up (the first may be the one that is down).
    connecting = asyncio.ensure_future(attempt)
    failing = asyncio.ensure_future((errors.failed if first_connect_timeout else errors.denied).wait())
    try:
        done, _ = await asyncio.wait(
            {connecting, failing}, timeout=first_connect_timeout, return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:
        connecting.cancel()  # a stop signal while connecting stops the attempt too
        raise
    finally:
        failing.cancel()
    if connecting in done and connecting.exception() is None:
        return nc
    connecting.cancel()
    with contextlib.suppress(BaseException):
        await connecting
    with contextlib.suppress(Exception):
        await nc.close()
    if errors.refused is not None:
        raise Unavailable(
            f"NATS at {redacted(url)} ({variable}) refused this connection (Authorization Violation): "
            "it admits only Layby's keys; an SDK client signs in with its LAYBY_TOKEN, a service "
            "with LAYBY_NATS_SEED (docs/security.md#nats-identities)"
        )
    reason = _reason(errors, connecting, first_connect_timeout)
    raise Unavailable(f"cannot reach NATS at {redacted(url)} ({variable}): {reason}")


def _describe(failure: BaseException) -> str:
    text = str(failure).strip()
    return f"{type(failure).__name__}: {text}" if text else type(failure).__name__


def _reason(errors: _ErrorLog, connecting: asyncio.Future[Any], timeout: float | None) -> str:
    """Why a first connection failed: each distinct error the attempts met, else the attempt's
    own exception (a URL the client could not parse), else how long it waited."""
    if errors.reasons:
        return "; ".join(errors.reasons)
    if connecting.done() and not connecting.cancelled() and connecting.exception() is not None:
        return _describe(connecting.exception())  # type: ignore[arg-type]
    return f"no answer within {timeout:g}s" if timeout is not None else "no answer"


async def until_stopped(pull: Awaitable[list[Any]], stop: asyncio.Event) -> list[Any] | None:
    """The pull's messages, or None when ``stop`` is set first (the pull is cancelled: anything it
    would have delivered stays unacknowledged and goes to a replica that is still running)."""
    pulling = asyncio.ensure_future(pull)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({pulling, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if pulling.done():
        return list(pulling.result())
    pulling.cancel()
    with contextlib.suppress(BaseException):
        await pulling
    return None
