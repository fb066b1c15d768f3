"""Test helpers: waiting for a condition (``eventually``), an SSE reader over httpx, polling of
the list door, minted callback tickets."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Generic, TypedDict, TypeVar, Unpack, overload

import httpx
import msgspec

from layby.ids import new_ticket
from layby.sdk import Client
from layby_contracts.doors import DoorSpec
from layby_contracts.events import DoorSaved
from layby_server.store.eventstore import EventStore
from tests.channel_plugins import Bridge
from tests.conftest import OPERATOR, System

T = TypeVar("T")


def _holds(until: Callable[[Any], object] | None, value: object) -> bool:
    return bool(value) if until is None else bool(until(value))


def _timed_out(
    what: str, timeout: float, tries: int, seen: object, error: BaseException | None
) -> AssertionError:
    shown = repr(seen)
    if len(shown) > 2000:
        shown = shown[:2000] + "..."
    last = f"its last try raised {error!r}" if error is not None else f"it last saw {shown}"
    return AssertionError(f"timed out after {timeout:g}s ({tries} tries) waiting for {what}; {last}")


Retry = type[BaseException] | tuple[type[BaseException], ...]


@dataclass
class _Wait:
    """One wait's bookkeeping, shared by ``eventually`` and ``eventually_sync``: what it saw last
    and whether its time is up."""

    what: str
    timeout: float
    until: Callable[[Any], object] | None
    deadline: float = 0.0
    tries: int = 0
    seen: object = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.timeout

    def done(self, value: object, error: BaseException | None) -> bool:
        """Whether a try that gave ``value`` (or raised ``error``, a "not yet") ends the wait; once
        the time is up, the wait's failure is raised instead of trying again."""
        if error is None and _holds(self.until, value):
            return True
        if error is None:
            self.seen = value
        self.error = error
        self.tries += 1
        if time.monotonic() >= self.deadline:
            raise _timed_out(self.what, self.timeout, self.tries, self.seen, self.error) from error
        return False


class Patience(TypedDict, Generic[T], total=False):
    """How a wait goes (``eventually``): ``until`` the value holds (else while it is falsy), for
    ``timeout`` seconds, a try every ``interval``; an exception of a ``retry`` class is "not yet"."""

    until: Callable[[T], object] | None
    timeout: float
    interval: float
    retry: Retry


@overload
async def eventually(probe: Callable[[], Awaitable[T]], what: str, **patience: Unpack[Patience[T]]) -> T: ...


@overload
async def eventually(probe: Callable[[], T], what: str, **patience: Unpack[Patience[T]]) -> T: ...


async def eventually(
    probe: Callable[[], Any],
    what: str,
    *,
    until: Callable[[Any], object] | None = None,
    timeout: float = 10,
    interval: float = 0.02,
    retry: Retry = Exception,
) -> Any:
    """Call ``probe`` (sync or async) until its value is truthy, or ``until(value)`` holds, and
    return that value. An exception of a ``retry`` class counts as "not yet" (a door not
    listening yet, a consumer not created yet); any other propagates at once. After ``timeout``
    seconds it fails with ``what`` it waited for and the last value or exception it saw."""
    wait = _Wait(what, timeout, until)
    while True:
        value, error = None, None
        try:
            value = probe()
            if inspect.isawaitable(value):
                value = await value
        except retry as exc:
            error = exc
        if wait.done(value, error):
            return value
        await asyncio.sleep(interval)


def eventually_sync(probe: Callable[[], T], what: str, **patience: Unpack[Patience[T]]) -> T:
    """``eventually`` for a synchronous test (one that drives processes and blocks between tries;
    its probe may run an event loop of its own, so this one runs none): a try every 0.05 s unless
    told."""
    wait = _Wait(what, patience.get("timeout", 10), patience.get("until"))
    while True:
        value, error = None, None
        try:
            value = probe()
        except patience.get("retry", Exception) as exc:
            error = exc
        if wait.done(value, error):
            return value
        time.sleep(patience.get("interval", 0.05))


class Records(logging.Handler):
    """A logging handler that keeps every record it is given, from debug up."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Frame:
    id: str | None
    event: str | None
    data: Any
    comment: str | None = None


class SSE:
    """Reads frames from an open stream response into a queue."""

    def __init__(self, resp: httpx.Response) -> None:
        self.resp = resp
        self.frames: asyncio.Queue[Frame] = asyncio.Queue()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        fields: dict[str, str] = {}
        with contextlib.suppress(httpx.HTTPError, asyncio.CancelledError):
            async for line in self.resp.aiter_lines():
                if line.startswith(":"):
                    await self.frames.put(Frame(None, None, None, comment=line[1:].strip()))
                    continue
                if not line:
                    if fields:
                        data = json.loads(fields["data"]) if "data" in fields else None
                        await self.frames.put(Frame(fields.get("id"), fields.get("event"), data))
                        fields = {}
                    continue
                key, _, value = line.partition(":")
                fields[key] = value[1:] if value.startswith(" ") else value

    async def next(self, timeout: float = 10) -> Frame:
        while True:
            f = await asyncio.wait_for(self.frames.get(), timeout)
            if f.comment is None:
                return f

    async def next_any(self, timeout: float = 10) -> Frame:
        return await asyncio.wait_for(self.frames.get(), timeout)

    async def until(self, event: str, interaction_id: str, timeout: float = 10) -> Frame:
        while True:
            f = await self.next(timeout)
            if f.event == event and f.data["interaction_id"] == interaction_id:
                return f

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task


@contextlib.asynccontextmanager
async def sse(
    system: System,
    token: str = OPERATOR,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
) -> AsyncIterator[SSE]:
    async with (
        system.http(token) as http,
        http.stream(
            "GET", "/api/interactions/stream", headers=headers or {}, params=params or {}, timeout=None
        ) as resp,
    ):
        assert resp.status_code == 200, resp.status_code
        reader = SSE(resp)
        try:
            yield reader
        finally:
            await reader.close()


async def handled_by(store: EventStore, role: str, timeout: float = 10) -> Any:
    """Wait until the ``role`` service's consumer of the event log has handled (acknowledged)
    every event appended so far; its consumer info."""
    names = store.names
    return await eventually(
        lambda: store.js.consumer_info(names.events_stream, names.durable(role)),
        f"the {role} service to handle every event in the log",
        until=lambda info: info.num_pending == 0 and info.num_ack_pending == 0,
        timeout=timeout,
    )


async def caught_up(db: Any, store: EventStore) -> None:
    """Wait until the projection has applied every event in the log so far (services may append
    more meanwhile, e.g. a subject's index after a caller ask)."""
    _, last = await store.bounds()
    await eventually(
        lambda: db.fetchval("SELECT seq FROM projector_checkpoints WHERE name = 'inbox'"),
        f"the projector to catch up with the log's last event ({last})",
        until=lambda seq: seq is not None and seq >= last,
    )


async def settled(db: Any, store: EventStore, flow: str) -> None:
    """Wait until nothing more is under way for ``flow``'s runs: the workers have finished with
    every continuation, the resume service has handled every event, the projection is caught up."""
    names = store.names

    async def busy() -> list[str]:
        found = []
        workers = await store.js.consumer_info(names.continuations_stream, names.flow_durable(flow))
        if workers.num_pending or workers.num_ack_pending:
            found.append("a continuation")
        resume = await store.js.consumer_info(names.events_stream, names.durable("resume"))
        if resume.num_pending or resume.num_ack_pending:
            found.append("an event for the resume service")
        _, last = await store.bounds()
        if await db.fetchval("SELECT seq FROM projector_checkpoints WHERE name = 'inbox'") != last:
            found.append("an event to project")
        return found

    await eventually(busy, f"the {flow} runs to settle", until=lambda found: not found)


async def wait_total(
    system: System, total: int, token: str = OPERATOR, timeout: float = 10
) -> dict[str, Any]:
    """Poll the list door until it reports ``total`` pending questions."""
    async with system.http(token) as http:

        async def listed() -> dict[str, Any]:
            return (await http.get("/api/interactions", params={"pageSize": 200})).json()["data"]  # type: ignore[no-any-return]

        return await eventually(
            listed, f"{total} pending questions", until=lambda data: data["total"] == total, timeout=timeout
        )


async def pending(
    system: System, client: Client, bridge: Bridge, question: str, **kwargs: Any
) -> tuple[asyncio.Task[Any], str]:
    """Ask over the test channel ``ops`` (the built-in webhook channel posting to ``bridge``, see
    the ``chan`` fixture); (the asker's task, the callback URL the channel delivered)."""
    seen = len(bridge.deliveries)
    ask = asyncio.create_task(client.ask_user(question, timeout=30, channel="ops", **kwargs))
    delivery = await bridge.next_delivery(seen + 1)
    assert delivery["question"] == question
    ASKED[delivery["callback_url"]] = delivery["interaction_id"]
    return ask, str(delivery["callback_url"])


ASKED: dict[str, str] = {}
"""Callback URL -> interaction id, for the assertions on the log."""


async def mint(system: System, store: EventStore, interaction_id: str) -> str:
    """Bind a fresh ticket to a question directly in the ticket store (as a delivery would)."""
    ticket, digest = new_ticket()
    expires = datetime.now(UTC) + timedelta(seconds=60)
    assert await store.put_ticket(digest, interaction_id, expires, new=True)
    return f"{system.url}/api/interactions/callback/{ticket}"


def order_flows(w: Any) -> None:
    """Flows the run tests share: ``approve`` parks on a question for alice, ``explode`` fails,
    ``quick`` returns its input."""
    import layby

    @w.flow("approve")
    async def approve(order: Any) -> Any:
        return await layby.ask_user(
            f"Approve order {order}?",
            mode="async",
            expiry_at=datetime.now(UTC) + timedelta(minutes=60),
            audience="alice",
        )

    @w.flow("explode")
    async def explode(_: Any) -> Any:
        raise RuntimeError("the mail server is down")

    @w.flow("quick")
    async def quick(n: Any) -> Any:
        return n


class Booking:
    """The flow ``book``: a step reserves a seat (counted in ``effects``), then the run fails
    while ``broken`` — what a retry must resume after, not repeat."""

    def __init__(self) -> None:
        from collections import Counter

        self.effects: Counter[str] = Counter()
        self.broken = True

    def register(self, w: Any) -> None:
        import layby

        @layby.step
        async def reserve() -> str:
            self.effects["reserve"] += 1
            return "seat 12A"

        @w.flow("book")
        async def book(_: Any) -> Any:
            seat = await reserve()
            if self.broken:
                raise RuntimeError("the mail server is down")
            return seat


def soon(minutes: float = 60) -> datetime:
    """A deadline ``minutes`` from now (a park's or a caller ask's ``expiry_at``)."""
    return datetime.now(UTC) + timedelta(minutes=minutes)


async def save_door(store: EventStore, name: str, **spec: Any) -> None:
    """A door as saving one records it (the doors API is tested on its own)."""
    event = DoorSaved(name=name, spec=msgspec.convert(spec, DoorSpec), by="ops", saved_at=datetime.now(UTC))
    await store.append(store.names.door(name), event, msg_id=f"door-{name}", expected_seq=None)


async def route(system: System, store: EventStore, name: str, **spec: Any) -> None:
    """Save door ``name`` and wait until the doors API lists it (routes read what it reads)."""
    await save_door(store, name, **spec)
    async with system.http() as http:
        await eventually(
            lambda: http.get("/api/doors"),
            f"door {name} listed",
            until=lambda r: name in [d["name"] for d in r.json()["data"]["items"]],
        )


@contextlib.asynccontextmanager
async def serving(worker: Any) -> AsyncIterator[None]:
    """A ``layby.Worker`` serving its flows (bound to their consumers) for the block's length."""
    stop = asyncio.Event()
    task = asyncio.create_task(worker.serve(stop))
    try:
        await asyncio.wait_for(worker.ready.wait(), 15)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def finished_run(system: System, run_id: str, timeout: float = 20) -> dict[str, Any]:
    """The run as the runs door shows it, once it has finished."""

    async def finished() -> dict[str, Any] | None:
        async with system.http() as http:
            run: dict[str, Any] = (await http.get(f"/api/runs/{run_id}")).json()["data"]
        return run if run["status"] == "finished" else None

    found: dict[str, Any] = await eventually(finished, f"run {run_id} to finish", timeout=timeout)
    return found
