"""The SDK: ``await ask_user(...)`` blocks until a person answers (docs/asking.md#asking-a-question,
docs/aggregates/interaction.md#sync-wait).

``connect`` opens a ``Client`` (``layby.client``; its asking machinery is ``layby.asking``); the
module-level ``ask_user`` and ``notify_user`` use the running flow's client, or one connection per
event loop opened on first use. Argument errors raise ``ValueError`` (``BadInput``) naming the
field before anything leaves the process (``layby.questions``); the answer's value types are in
``layby.values``. Every name this module had is still importable from it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from layby.asking import (
    LOOK_SECONDS,
    NO_RESPONDER_PAUSE,
    PARK_RECORD_BUDGET,
    PRUNE_SECONDS,
    REQUEST_TIMEOUT,
    log,
)
from layby.client import Client
from layby.connection import connect_nats
from layby.errors import NotConfiguredError
from layby.natskeys import client_inbox, client_seed
from layby.questions import (
    CHAT_ARGS,
    LINK_PLACEHOLDER,
    _before_typed_question,
    _flat_ask,
    _mode_for,
    _raise_if_cancelled,
    _replayed,
    _schema_of,
    build_link,
    check_call,
    check_link,
    validate_call,
)
from layby.runs import current_context, require_park_context
from layby.runtime import data_dir, read_runtime
from layby.settings import ClientSettings, load_client_settings
from layby.values import AnswerDetails, SecretValue
from layby_contracts.commands import Notified, RunCommand

__all__ = [
    "CHAT_ARGS",
    "FIRST_CONNECT_SECONDS",
    "LINK_PLACEHOLDER",
    "LOOK_SECONDS",
    "NO_RESPONDER_PAUSE",
    "PARK_RECORD_BUDGET",
    "PRUNE_SECONDS",
    "REQUEST_TIMEOUT",
    "AnswerDetails",
    "Client",
    "RunCommand",
    "SecretValue",
    "_before_typed_question",
    "_flat_ask",
    "_mode_for",
    "_raise_if_cancelled",
    "_replayed",
    "_schema_of",
    "ask_user",
    "build_link",
    "check_link",
    "connect",
    "log",
    "notify_user",
    "validate_call",
]

FIRST_CONNECT_SECONDS = 10.0
"""How long ``connect`` tries to reach NATS before ``Unavailable`` naming LAYBY_NATS_URL."""
P = ParamSpec("P")
R = TypeVar("R")


async def connect(
    *, nats_url: str | None = None, token: str | None = None, settings: ClientSettings | None = None
) -> Client:
    """Connect explicitly; unset values come from ``LAYBY_NATS_URL`` / ``LAYBY_TOKEN`` or ``layby up``
    (``NotConfiguredError`` naming the setting when neither has one)."""
    settings = settings or load_client_settings()
    runtime = read_runtime(data_dir(settings))
    url = nats_url or settings.nats_url or (runtime.nats_url if runtime else None)
    tok = token or settings.token or (runtime.token if runtime else None)
    if not url:
        raise NotConfiguredError(
            "no NATS URL: set LAYBY_NATS_URL, pass nats_url=, or run `layby up`", field="nats_url"
        )
    if not tok:
        raise NotConfiguredError("no token: set LAYBY_TOKEN, pass token=, or run `layby up`", field="token")
    made: list[Client] = []

    async def reconnected() -> None:
        for client in made:
            client.look_again()

    nc = await connect_nats(
        url,
        name="layby-sdk",
        first_connect_timeout=FIRST_CONNECT_SECONDS,
        seed=settings.nats_seed or client_seed(tok),
        inbox_prefix=client_inbox(tok),
        ca_file=settings.nats_ca_file,
        reconnected=reconnected,
    )
    client = Client(
        nc,
        names=settings.names,
        token=tok,
        default_timeout=settings.answer_timeout_seconds,
        owns=True,
        public_base_url=settings.public_base_url or (runtime.public_base_url if runtime else None),
    )
    made.append(client)
    return client


_clients: dict[asyncio.AbstractEventLoop, Client] = {}


def _method_signature(method: Callable[..., Any]) -> inspect.Signature:
    """A method's signature without ``self``."""
    signature = inspect.signature(method)
    return signature.replace(parameters=list(signature.parameters.values())[1:])


def _takes_the_arguments_of(
    method: Callable[Concatenate[Client, P], Awaitable[R]],
) -> Callable[[Callable[..., Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """The decorated function takes exactly the arguments of the ``Client`` method it forwards
    to: type checkers see that signature, and so do ``help()`` and ``inspect.signature``; the
    keywords are written once, on the method."""

    def share(function: Callable[..., Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        function.__signature__ = _method_signature(method)  # type: ignore[attr-defined]
        return cast("Callable[P, Awaitable[R]]", function)

    return share


_ASK_SIGNATURE = _method_signature(Client.ask_user)


@_takes_the_arguments_of(Client.ask_user)
async def ask_user(question: str, **kwargs: Any) -> Any:
    """Ask a person and block until they answer: ``str`` for text/select, ``bool`` for confirm,
    ``dict`` for form. Raises ``InteractionTimeoutError`` when the budget runs out. Takes the
    arguments of ``Client.ask_user``.

    ``mode="async"`` with a timezone-aware ``expiry_at`` parks the flow run executing this
    code instead (``layby.Worker``); the run resumes with the answer, or with
    ``{"layby:interaction_expired": True}`` when ``expiry_at`` passes first."""
    ctx = current_context()
    if ctx is not None and ctx.client is not None:
        return await ctx.client.ask_user(question, **kwargs)
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # Validate first so a bad call fails before any connection is opened (docs/asking.md#timeout).
        bound = _ASK_SIGNATURE.bind(question, **kwargs)
        bound.apply_defaults()
        args = dict(bound.arguments)
        del args["question"]
        if check_call(question, args).spec.mode == "async":
            require_park_context()
        client = _clients[loop] = await connect()
    return await client.ask_user(question, **kwargs)


@_takes_the_arguments_of(Client.notify_user)
async def notify_user(message: str, **kwargs: Any) -> Notified:
    """Send a one-way notification and return at once: no interaction, no ticket, no wait
    (``Client.notify_user``, whose arguments it takes; docs/notifications.md). Bad arguments raise
    ``BadInput`` naming the field before any connection is opened."""
    from layby.notify import check_notify

    ctx = current_context()
    if ctx is not None and ctx.client is not None:
        running: Client = ctx.client
        return await running.notify_user(message, **kwargs)
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        check_notify(message, kwargs)
        client = _clients[loop] = await connect()
    return await client.notify_user(message, **kwargs)
