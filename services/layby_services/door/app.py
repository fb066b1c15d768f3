"""The door service's Litestar application: the HTTP doors and the live projector."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
from litestar import Litestar, Request, Response, Router, route
from litestar.datastructures import ResponseHeader
from litestar.enums import HttpMethod, MediaType
from litestar.exceptions import NotFoundException
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import DefineMiddleware
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.openapi.spec import Components

from layby_contracts.channels import ChatChannel
from layby_domain.clock import Clock, SystemClock
from layby_domain.verifiers import parse_secrets
from layby_server.auth import Authenticator
from layby_server.channels import chat_channels, close_channels, load_channels
from layby_server.chat.inbound import ChatInbound
from layby_server.observability.gauges import ConsumerGauges
from layby_server.observability.logs import get_logger
from layby_server.observability.metrics import ServiceMetrics
from layby_server.projection.projector import run_projector
from layby_server.projection.workers import WorkerRegistry
from layby_server.service import open_resources
from layby_server.settings import Settings
from layby_server.write.jqrun import LazyJq
from layby_server.write.parked import Entries
from layby_server.write.visits import Visitor
from layby_services.door.conversations import ChatConversations
from layby_services.door.deps import AUTHENTICATED, DEPENDENCIES, DoorState, authenticated
from layby_services.door.errors import EXCEPTION_HANDLERS
from layby_services.door.fanout import Tails
from layby_services.door.openapi import DoorOperation, finish
from layby_services.door.openapi.components import BEARER, BEARER_AUTH, DESCRIPTION, SUMMARY, TAGS
from layby_services.door.query import PARAMETER_HANDLERS
from layby_services.door.ratelimit import RateLimiter, RateLimitMiddleware
from layby_services.door.routes.answer import answer_door
from layby_services.door.routes.asks import ask_door, outcome_door, withdraw_door
from layby_services.door.routes.callback import callback_get, callback_post
from layby_services.door.routes.channels import channel_events, channel_handshake
from layby_services.door.routes.delegate import delegate_door
from layby_services.door.routes.doctor import doctor_door, doctor_probe
from layby_services.door.routes.doors import delete_door, get_door, list_doors, put_door
from layby_services.door.routes.health import healthz, readyz
from layby_services.door.routes.history import export_door, history_door
from layby_services.door.routes.inbox import done_door, list_door
from layby_services.door.routes.media import media_door
from layby_services.door.routes.messages import messages_stream
from layby_services.door.routes.notifications import notifications_door, notify_door
from layby_services.door.routes.page import inbox_page, static_file
from layby_services.door.routes.runs import (
    cancel_door,
    move_door,
    retry_door,
    run_door,
    runs_door,
    start_run_door,
    summary_door,
    workers_door,
)
from layby_services.door.routes.stream import stream_door
from layby_services.door.routes.timeline import timeline_door
from layby_services.door.routes.visits import conversation_door, hook_door, parked_door
from layby_services.door.routes.webhooks import webhook_door
from layby_services.door.spans import RequestSpans

log = get_logger("layby.door")


def _rate_limits(clock: Clock) -> DefineMiddleware:
    return DefineMiddleware(RateLimitMiddleware, limiter=RateLimiter(clock))


class _Document(OpenAPIRenderPlugin):
    """``GET /schema/openapi.json``: the document Litestar generates from the handlers, finished
    with the hand-written parts (openapi.py) and encoded once."""

    def __init__(self) -> None:
        super().__init__(path="/openapi.json", media_type=MediaType.JSON)
        self._body: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._body is None:
            self._body = msgspec.json.encode(finish(openapi_schema))
        return self._body


@route(["/", "/{path:str}"], http_method=list(HttpMethod), include_in_schema=False)
async def _no_other_schema_page() -> None:
    """Litestar serves only the JSON document: every other path under ``/schema`` is the doors'
    404, as for any unknown path."""
    raise NotFoundException


def _openapi_config() -> OpenAPIConfig:
    return OpenAPIConfig(
        title="Layby",
        version="0.1.0",
        summary=SUMMARY,
        description=DESCRIPTION,
        tags=TAGS,
        components=Components(security_schemes={"bearerAuth": BEARER_AUTH}),
        path="/schema",
        render_plugins=[_Document()],
        openapi_router=Router(
            "/schema",
            route_handlers=[_no_other_schema_page],
            response_headers=[ResponseHeader(name="Cache-Control", value="no-cache")],
        ),
    )


def _options_doors(handlers: Sequence[HTTPRouteHandler]) -> list[HTTPRouteHandler]:
    """``OPTIONS`` for each path several of ``handlers`` serve: 204 with an ``Allow`` listing
    all their methods.

    Litestar answers ``OPTIONS`` by itself (the guard lets it through, deps.py), but for a path
    registered by more than one handler its answer lists only the first handler's methods;
    registered before them, these are used instead."""
    by_path: dict[str, list[HTTPRouteHandler]] = defaultdict(list)
    for handler in handlers:
        for path in handler.paths:
            by_path[path].append(handler)
    return [
        _options_door(path, ", ".join(sorted({m for h in served for m in h.http_methods} | {"OPTIONS"})))
        for path, served in by_path.items()
        if len(served) > 1
    ]


def _options_door(path: str, allow: str) -> HTTPRouteHandler:
    @route(path, http_method=[HttpMethod.OPTIONS], status_code=204, include_in_schema=False)
    async def options() -> Response[None]:
        return Response(None, status_code=204, headers={"Allow": allow}, media_type="text/plain")

    return options


AUTHENTICATED_DOORS: list[HTTPRouteHandler] = [
    list_door,
    done_door,
    stream_door,
    answer_door,
    delegate_door,
    webhook_door,
    history_door,
    export_door,
    run_door,
    timeline_door,
    runs_door,
    start_run_door,
    ask_door,
    outcome_door,
    withdraw_door,
    summary_door,
    cancel_door,
    retry_door,
    move_door,
    workers_door,
    get_door,
    put_door,
    delete_door,
    list_doors,
    messages_stream,
    notify_door,
    notifications_door,
    conversation_door,
    parked_door,
    doctor_door,
]
"""Behind the ``authenticated`` guard: a bearer token first (docs/doors/common.md#authentication)."""
PUBLIC_DOORS: list[HTTPRouteHandler] = [
    healthz,
    readyz,
    inbox_page,
    static_file,
    media_door,
    callback_post,
    callback_get,
    channel_events,
    channel_handshake,
    doctor_probe,
    hook_door,  # authenticates itself, unless its door binds a verifier (routes/visits.py)
]


for _door in (*AUTHENTICATED_DOORS, *PUBLIC_DOORS):
    # Every door's operation follows the doors' conventions (openapi.DoorOperation); a handler
    # whose operation says more declares ``operation_class=documented(...)``.
    if not issubclass(_door.operation_class, DoorOperation):
        _door.operation_class = DoorOperation


def register_webhooks(chats: dict[str, ChatChannel], public_base_url: str | None) -> asyncio.Task[None]:
    """Point each chat channel that asks for it (``register_webhook``) at this door's inbound
    webhook, in the background: a provider that cannot be reached delays nothing, and is logged
    (docs/channels.md#registering-the-webhook)."""

    async def register() -> None:
        for name, plugin in chats.items():
            set_webhook = getattr(plugin, "set_webhook", None)
            if not getattr(plugin, "register_webhook", False) or set_webhook is None:
                continue
            if not public_base_url:
                log.error(
                    "chat.webhook_not_registered", channel=name, why="INTERACTIONS_PUBLIC_BASE_URL is not set"
                )
                continue
            url = f"{public_base_url.rstrip('/')}/api/channels/{name}/events"
            try:
                await set_webhook(url)
                log.info("chat.webhook_registered", channel=name, url=url)
            except Exception as exc:  # noqa: BLE001 - logged; the door serves on without it
                log.error("chat.webhook_not_registered", channel=name, why=str(exc)[:300])

    return asyncio.create_task(register())


def create_app(
    settings: Settings,
    *,
    clock: Clock | None = None,
    run_projection: bool = True,
    metrics: ServiceMetrics | None = None,
) -> Litestar:
    """The door's application; ``metrics`` is the registry its requests are counted into (the
    health port serves it)."""
    channels = load_channels(settings.channels, parse_secrets(settings.webhook_secrets))

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_resources(settings, name="door", clock=clock, secrets=True, metrics=metrics) as res:
            assert res.pool is not None
            chats = chat_channels(channels)
            app.state.door = DoorState(
                settings, res.store, res.pool, Authenticator(settings.api_tokens), res.clock
            )
            app.state.door.tails = Tails(
                res.store,
                buffer=settings.sse_client_buffer,
                window=settings.sse_keepalive_seconds + settings.blocking_grace_seconds,
                clock=res.clock,
            )
            programs = LazyJq(processes=settings.jq_processes, timeout_seconds=settings.jq_timeout_seconds)
            app.state.door.visitor = Visitor(
                res.store,
                Entries(res.store, res.clock.now),
                res.clock.now,
                programs=programs,
                extras_of=WorkerRegistry(res.pool).extras,
            )
            if chats:
                app.state.door.chat = ChatInbound(
                    res.store,
                    res.clock,
                    chats,
                    settings.public_base_url or "",
                    converse=ChatConversations(res.pool, app.state.door.visitor, res.clock),
                )
                registering = register_webhooks(chats, settings.public_base_url)
            stop = asyncio.Event()
            observe = app.state.door.asked.observe
            projector = (
                asyncio.create_task(
                    run_projector(
                        res.pool,
                        res.store,
                        stop,
                        observe=observe,
                        waiting_retention=settings.waiting_outcome_retention_seconds,
                    )
                )
                if run_projection
                else None
            )
            lag = ConsumerGauges(
                res.store, res.metrics.registry, res.clock, settings.metrics_interval_seconds, ("projector",)
            )
            lagging = asyncio.create_task(lag.run(stop)) if run_projection else None
            log.info("door.ready", namespace=settings.namespace)
            try:
                yield
            finally:
                await app.state.door.drain()
                stop.set()
                await app.state.door.tails.aclose()  # the shared tails' consumers go with the door
                for task in (projector, lagging):
                    if task is not None:
                        try:
                            await asyncio.wait_for(task, timeout=5)
                        except (TimeoutError, asyncio.CancelledError):
                            task.cancel()
                await programs.aclose()
                if app.state.door.chat is not None:
                    registering.cancel()
                    await app.state.door.chat.aclose()
                await close_channels(channels)

    return Litestar(
        route_handlers=[
            Router(
                "/",
                route_handlers=[*_options_doors(AUTHENTICATED_DOORS), *AUTHENTICATED_DOORS],
                guards=[authenticated],
                dependencies=AUTHENTICATED,
                security=BEARER,
            ),
            *_options_doors(PUBLIC_DOORS),
            *PUBLIC_DOORS,
        ],
        dependencies=DEPENDENCIES,
        lifespan=[lifespan],
        exception_handlers={**EXCEPTION_HANDLERS, **PARAMETER_HANDLERS},  # type: ignore[dict-item]
        openapi_config=_openapi_config(),
        middleware=[
            RequestSpans,  # outermost: a refused (429) request has its span too
            *([_rate_limits(clock or SystemClock())] if settings.rate_limits else []),
        ],
        debug=False,
        request_max_body_size=None,
    )
