"""An ``ask_user`` call checked before anything leaves the process (docs/asking.md): the same
rules as the ask service (``validate_ask``), the external question's link, the chat options, and
the fallbacks for an ask service older than the typed question.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from layby.runs import RunContext
from layby.values import AnswerDetails
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.commands import PROTOCOL_TYPED_QUESTION as TYPED_QUESTION
from layby_contracts.commands import Ask, Refused
from layby_contracts.errors import BadInput, NonDeterministicRunError
from layby_contracts.events import ChatOptions, Resolution, Routing
from layby_contracts.question import Question
from layby_domain.chat import chat_options
from layby_domain.formats import FORMATS, flat_fields, known_format
from layby_domain.notify import field_of
from layby_domain.validation import AskSpec, validate_ask
from layby_domain.webhooks import check_notify_url

_enc = msgspec.json.Encoder()
DEFAULT_TIMEOUT = 3600.0
"""A sync question's budget when neither the call nor the settings name one."""


def _raise_if_cancelled() -> None:
    """Re-raise a cancellation that ``asyncio.wait_for`` swallowed.

    On Python 3.11, ``wait_for`` returns the result when its inner future completes in the same
    loop iteration as a cancel, and the cancel is lost (fixed in 3.12). nats-py waits with
    ``wait_for``, so a cancel landing as a reply arrives would leave the asker blocked.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


LINK_PLACEHOLDER = "https://example.invalid/"
"""Stands in for an external link while the rest of the ask is validated (before it is built)."""


def _replayed(ctx: RunContext, call: int, known: Resolution, question: str, details: bool = False) -> Any:
    """An ask whose call resolved in an earlier execution: its answer, at once (replay)."""
    if known.question != question:
        raise NonDeterministicRunError(
            f"run {ctx.info.run_id} asked {question!r} at call {call}, but that call was recorded "
            f"as {known.question!r}: a flow must ask the same questions in the same order on every "
            "execution"
        )
    if known.answered_by == "system:delivery_failed":
        raise ChannelDeliveryError(
            f"interaction {known.interaction_id} could not be delivered: {known.detail or 'no reason given'}"
        )
    if details:
        return AnswerDetails(answer=known.answer, answered_by=known.answered_by, params=known.params)
    return known.answer


_QUESTION = frozenset(Question.__struct_fields__)
CHAT_ARGS = ("on_mismatch", "mismatch_notice", "reply_ids", "details")
"""Arguments of ``ask_user`` that are not the question's: the chat options (checked by
``chat_options``) and ``details`` (how the answer is returned)."""


def validate_call(
    question: str,
    args: Mapping[str, Any],
    link: object,
    callback_base: Callable[[], object] | None = None,
    *,
    default_timeout: float = DEFAULT_TIMEOUT,
) -> AskSpec:
    """The SDK's checks of an ``ask_user`` call's question (``args``: ``Question`` fields, the
    channel resolved), before anything leaves the process: the same for ``Client.ask_user`` and
    the module-level ``ask_user`` (which checks before it connects)."""
    ask = Question(question=question, **args)
    if ask.channel is not None:
        # The delivery service mints the ticket and hands the callback URL to the channel (a
        # link is refused, naming it).
        return validate_ask(msgspec.structs.replace(ask, link_url=link), default_timeout=default_timeout)
    fmt = known_format(ask.answer_format)
    if fmt is not None and fmt.needs_link(None):
        check_link(link)
        if callback_base is not None:
            callback_base()
        # Everything else first: the link builder may create an outside resource.
        placeheld = msgspec.structs.replace(ask, link_url=LINK_PLACEHOLDER)
        return validate_ask(placeheld, default_timeout=default_timeout)
    if link is not None:
        raise BadInput(f"link is only for {_linked_formats()} questions", field="link")
    return validate_ask(ask, default_timeout=default_timeout)


@dataclass(frozen=True, slots=True)
class Call:
    """An ``ask_user`` call, checked: the question as the rules judged it (``link_url`` comes
    once the link is built), its validated ``spec``, the chat options, and what only the SDK reads
    (``link``, ``details``)."""

    question: Question
    spec: AskSpec
    chat: ChatOptions | None
    link: Any
    details: bool
    notify_url: str | None

    @property
    def external(self) -> bool:
        """A question whose link the SDK builds around its callback URL (no channel delivers it)."""
        fmt = known_format(self.spec.answer_format)
        return fmt is not None and fmt.needs_link(self.spec.channel)


def check_call(
    question: str,
    args: Mapping[str, Any],
    *,
    default_timeout: float = DEFAULT_TIMEOUT,
    callback_base: Callable[[], object] | None = None,
) -> Call:
    """Every check of an ``ask_user`` call that needs no server, in the order the SDK reports
    them (``args``: the call's keywords). The module-level ``ask_user`` runs it before it
    connects, ``Client.ask_user`` before anything is sent."""
    notify_url = args["notify_url"]
    if notify_url is not None:
        check_notify_url(notify_url, allow_http=True)  # the shape; the ask service judges the rest
    channel, recipient, chat = chat_options(
        args["channel"],
        args["recipient"],
        on_mismatch=args["on_mismatch"],
        mismatch_notice=args["mismatch_notice"],
        reply_ids=args["reply_ids"],
    )
    resolved = {
        **args,
        "schema": _schema_of(args["schema"]),
        "mode": _mode_for(args["to"], args["mode"]),
        "channel": channel,
        "recipient": recipient,
        "routing": routing_of(args.get("routing")),
    }
    fields = {name: value for name, value in resolved.items() if name in _QUESTION and name != "question"}
    spec = validate_call(question, fields, args["link"], callback_base, default_timeout=default_timeout)
    return Call(
        question=Question(question=question, **fields),
        spec=spec,
        chat=chat,
        link=args["link"],
        details=args["details"],
        notify_url=notify_url,
    )


def routing_of(value: object) -> Routing | None:
    """``routing`` as ``ask_user`` takes it: a ``layby.Routing`` or a dict of its keys, refused
    naming the key (``routing.required``) when it is not one (docs/routing.md)."""
    if value is None or isinstance(value, Routing):
        return value
    if not isinstance(value, dict):
        raise BadInput("routing must be a layby.Routing or a dict of its keys", field="routing")
    try:
        return msgspec.convert(value, Routing)
    except msgspec.ValidationError as exc:
        where = field_of(exc)
        unknown = _UNKNOWN_KEY.search(str(exc))
        if unknown is not None:
            where = f"{where}.{unknown.group(1)}" if where else unknown.group(1)
        raise BadInput(f"routing: {exc}", field=f"routing.{where}" if where else "routing") from None


_UNKNOWN_KEY = re.compile(r"unknown field `([^`]*)`")


def _mode_for(to: object, mode: object) -> Any:
    """Left unset, ``mode`` is ``sync`` — and ``async`` for a caller ask, which always parks."""
    if mode is None:
        return "async" if to == "caller" else "sync"
    return mode


def _before_typed_question(reply: Refused) -> bool:
    """An ask service older than the typed question refuses its ``format`` field as malformed."""
    return reply.protocol < TYPED_QUESTION and reply.kind == "invalid" and reply.field is None


def _flat_ask(cmd: Ask) -> bytes:
    """The ask as an ask service older than the typed question reads it: the format's arguments
    as flat fields, and no ``format`` field (such a service refuses fields it does not know)."""
    assert cmd.format is not None
    raw: dict[str, Any] = msgspec.to_builtins(cmd)
    raw.pop("format")
    raw.update(flat_fields(cmd.format))
    return _enc.encode(raw)


def _linked_formats() -> str:
    """The formats that take a ``link``, as a message names them ('external')."""
    return " or ".join(repr(name) for name, fmt in FORMATS.items() if fmt.ticketed)


def check_link(link: object) -> None:
    """An external question's ``link`` (docs/asking.md#links): a template or a callable."""
    if link is None:
        raise BadInput("answer_format 'external' requires a link", field="link")
    if isinstance(link, str):
        if "{callback_url}" not in link:
            raise BadInput("a link template must contain the literal {callback_url}", field="link")
        return
    if not callable(link):
        raise BadInput("link must be a template string or a callable", field="link")


async def build_link(link: Any, callback_url: str) -> str:
    """The URL to visit. A template is a plain replace (other braces survive); a callable gets the
    callback URL and must return an http(s) URL. Its exceptions propagate unchanged."""
    if isinstance(link, str):
        return link.replace("{callback_url}", callback_url)
    url = link(callback_url)
    if inspect.isawaitable(url):
        url = await url
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise BadInput("the link callable must return an http:// or https:// URL", field="link")
    return url


def _schema_of(schema: Any) -> Any:
    """A msgspec Struct type becomes its JSON schema; anything else is validated as given."""
    if isinstance(schema, type) and issubclass(schema, msgspec.Struct):
        return msgspec.json.schema(schema)
    return schema
