"""Pure validation of asks and answers, shared by the SDK and the services.

The SDK runs ``validate_ask`` before anything leaves the process; the ask service (the
authority) runs it again before anything is appended (docs/asking.md#validated-before-anything-is-stored).
Every error is a ``BadInput`` naming the field.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import msgspec

from layby_contracts.commands import Ask
from layby_contracts.errors import BadInput
from layby_contracts.events import EXPIRY_KEY, ChatOptions, MediaItem, Routing
from layby_contracts.formats import payload_of
from layby_contracts.limits import FLOW_VERSION_MAX, QUESTION_MAX_CHARS
from layby_contracts.question import Question
from layby_domain.formats import FORMATS, AskInputs, format_named
from layby_domain.media import validate_media
from layby_domain.routing import check_routing
from layby_domain.values import nul_path

GROUP_ID_MAX_CHARS = 256
OPTION_MAX_CHARS = 1000
OPTIONS_MAX_ITEMS = 200
_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class AskSpec(msgspec.Struct, frozen=True, kw_only=True):
    """An ask after validation: what the ask service records."""

    question: str
    answer_format: str
    format_payload: dict[str, Any] | None
    timeout: float
    group_id: str | None
    audience: str | None
    sensitive: bool
    mode: str = "sync"
    expiry_at: datetime | None = None
    media: list[MediaItem] | None = None
    channel: str | None = None
    recipient: str | None = None
    to: str = "user"
    payload: Any = None
    on_expiry: str | None = None
    routing: Routing | None = None


RECIPIENT_MAX_CHARS = 512
PAYLOAD_MAX_BYTES = 65536
"""A caller ask's ``payload``, encoded (the same bound as a run's input and result)."""


def check_channel(channel: object, recipient: object, link: object, verifier: object) -> None:
    """The channel rules that need no registry (docs/asking.md#channel-checks), naming the field."""
    if recipient is not None:
        if channel is None:
            raise BadInput("recipient requires a channel", field="recipient")
        if not isinstance(recipient, str) or not recipient.strip() or len(recipient) > RECIPIENT_MAX_CHARS:
            raise BadInput(
                f"recipient must be non-blank text of at most {RECIPIENT_MAX_CHARS} characters",
                field="recipient",
            )
    if channel is None:
        return
    if not isinstance(channel, str) or not channel.strip():
        raise BadInput("channel must name a registered channel", field="channel")
    if link is not None:
        raise BadInput("link is not allowed with a channel: the channel delivers the callback", field="link")
    if verifier is not None:
        raise BadInput("verifier is not allowed with a channel", field="verifier")


def is_interaction_id(value: object) -> bool:
    """Interaction ids are lowercase uuid4 strings: safe as a subject token and as a path part."""
    return isinstance(value, str) and bool(_UUID_RE.match(value))


_WAITER_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


_SHA256_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def is_sha256_hex(value: object) -> bool:
    """A ticket's hash as the ask carries it: SHA-256, 64 lowercase hex digits."""
    return isinstance(value, str) and bool(_SHA256_HEX_RE.match(value))


def is_waiter(value: object) -> bool:
    """A waiter id is one subject token: no dots, no wildcards."""
    return isinstance(value, str) and bool(_WAITER_RE.match(value))


def call_interaction_id(run_id: str, call: int) -> str:
    """The interaction id of a run's ``call``-th ask: the same on every replay and every worker.

    A continuation executed twice (a worker died before acking) asks the same questions under
    the same ids, so the second execution's asks are de-duplicated instead of doubled.
    """
    digest = bytearray(hashlib.sha256(f"layby-run:{run_id}:{call}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40  # version 4 layout, so it is an ordinary interaction id
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


_FLOW_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


_SUBJECT_RE = re.compile(r"[A-Za-z0-9_:@-]{1,128}")


def is_subject(value: object) -> bool:
    """Subjects name run chains and conversations, and are NATS subject tokens: 1-128 of
    [A-Za-z0-9_:@-]."""
    return isinstance(value, str) and _SUBJECT_RE.fullmatch(value) is not None


def is_flow_name(value: object) -> bool:
    """Flow names are subject tokens: 1-64 of [A-Za-z0-9_-]."""
    return isinstance(value, str) and bool(_FLOW_RE.match(value))


FLOW_VERSION_RULE = f"version must be a whole number from 1 to {FLOW_VERSION_MAX}"


def is_flow_version(value: object) -> bool:
    """A flow's version (docs/versions.md): a whole number from 1 to ``FLOW_VERSION_MAX``."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= FLOW_VERSION_MAX


def check_wait(mode: object, timeout: object, expiry_at: object) -> datetime | None:
    """``mode`` / ``timeout`` / ``expiry_at`` rules (docs/asking.md#mode-and-expiry); returns UTC
    ``expiry_at``."""
    if mode not in ("sync", "async"):
        raise BadInput(f"mode must be 'sync' or 'async', got {mode!r}", field="mode")
    if expiry_at is not None and timeout is not None:
        raise BadInput("timeout and expiry_at are mutually exclusive", field="expiry_at")
    if mode == "sync":
        if expiry_at is not None:
            raise BadInput("expiry_at is valid only with mode='async'", field="expiry_at")
        return None
    if expiry_at is None:
        raise BadInput(
            "mode='async' requires expiry_at (a timezone-aware datetime): a park with no deadline "
            "could never expire",
            field="expiry_at",
        )
    if not isinstance(expiry_at, datetime):
        raise BadInput(
            f"expiry_at must be a timezone-aware datetime, got {type(expiry_at).__name__}", field="expiry_at"
        )
    if expiry_at.tzinfo is None or expiry_at.utcoffset() is None:
        raise BadInput("expiry_at must be timezone-aware (a naive datetime is refused)", field="expiry_at")
    return expiry_at.astimezone(UTC)


# Complexity D, on purpose: the ask's own rules, flat, in the order their errors must be reported;
# each format's rules are its own module's (layby_domain.formats).
def validate_ask(ask: Question, *, default_timeout: float = 3600.0) -> AskSpec:
    """Validate every field of an ask; raise ``BadInput`` naming the first bad field. The fields
    are not trusted to have their declared types (a Struct built in code is not checked)."""
    question: object = ask.question
    timeout: object = ask.timeout
    audience: object = ask.audience
    check_caller(
        ask.to, ask.mode, ask.payload, ask.on_expiry, channel=ask.channel, audience=audience, media=ask.media
    )
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise BadInput(
                f"timeout must be a number of seconds, got {type(timeout).__name__}", field="timeout"
            )
        if not math.isfinite(timeout) or timeout <= 0:
            raise BadInput(f"timeout must be positive, got {timeout}", field="timeout")
    fmt = format_named(ask.answer_format)
    if audience is not None and (not isinstance(audience, str) or not audience.strip()):
        raise BadInput("audience must be a non-empty identity", field="audience")
    if not isinstance(question, str) or not question.strip():
        raise BadInput("question must be a non-empty string", field="question")
    for name in ("question", "group_id", "audience", "options", "schema", "action"):
        where = nul_path(getattr(ask, name))
        if where is not None:
            field = name + (where if where.startswith("[") else f".{where}" if where else "")
            raise BadInput(f"{field} must not contain NUL characters", field=field)
    if len(question) > QUESTION_MAX_CHARS:
        raise BadInput(
            f"question is {len(question)} characters; the limit is {QUESTION_MAX_CHARS}", field="question"
        )
    check_channel(ask.channel, ask.recipient, ask.link_url, ask.verifier)
    if not fmt.reviews_an_action:
        for name in ("action", "decisions"):
            if getattr(ask, name) is not None:
                raise BadInput(f"{name} is only for 'review', not for {fmt.name!r}", field=name)
    payload = fmt.check_ask(
        AskInputs(
            options=ask.options,
            schema=ask.schema,
            data=ask.data,
            pages=ask.pages,
            verifier=ask.verifier,
            link_url=ask.link_url,
            channel=ask.channel,
            action=ask.action,
            decisions=ask.decisions,
        )
    )
    group_id: object = ask.group_id
    if group_id is not None and (
        not isinstance(group_id, str) or not group_id.strip() or len(group_id) > GROUP_ID_MAX_CHARS
    ):
        raise BadInput(
            f"group_id must be a non-blank string of at most {GROUP_ID_MAX_CHARS} characters",
            field="group_id",
        )
    if not isinstance(ask.sensitive, bool):
        raise BadInput("sensitive must be a boolean", field="sensitive")
    expiry = check_wait(ask.mode, timeout, ask.expiry_at)
    checked_media = validate_media(ask.media)
    if ask.mode == "async" and ask.sensitive:
        raise BadInput(
            "sensitive is not available with mode='async': a park's answer is kept in its run's "
            "checkpoint, and a sensitive answer is never stored",
            field="sensitive",
        )
    caller = ask.to == "caller"
    routing = check_routing(
        ask.routing,
        answer_format=fmt.name,
        sensitive=ask.sensitive,
        timeout_seconds=(float(timeout) if timeout is not None else default_timeout)
        if ask.mode == "sync"
        else None,
        to=str(ask.to),
    )
    return AskSpec(
        question=question,
        answer_format=fmt.name,
        format_payload=payload,
        timeout=float(timeout) if timeout is not None else default_timeout,
        group_id=ask.group_id,
        audience=ask.audience,
        sensitive=ask.sensitive,
        mode=str(ask.mode),
        expiry_at=expiry,
        media=checked_media,
        channel=ask.channel if isinstance(ask.channel, str) else None,
        recipient=ask.recipient if isinstance(ask.recipient, str) else None,
        to=str(ask.to),
        payload=ask.payload,
        on_expiry=(str(ask.on_expiry) if ask.on_expiry is not None else "kill") if caller else None,
        routing=routing,
    )


def ask_command(
    spec: AskSpec,
    *,
    token: str,
    interaction_id: str,
    waiter: str | None = None,
    run_id: str | None = None,
    call: int | None = None,
    ticket_hash: str | None = None,
    chat: ChatOptions | None = None,
    notify_url: str | None = None,
) -> Ask:
    """The ``Ask`` command that records a validated question (the SDK's and the HTTP door's): the
    format travels typed (``format``), a park carries its ``expiry_at`` and no ``timeout``, and a
    caller ask's fields travel only on a caller ask."""
    parked = spec.mode == "async"
    return Ask(
        token=token,
        interaction_id=interaction_id,
        question=spec.question,
        format=payload_of(spec.answer_format, spec.format_payload),
        answer_format=spec.answer_format,
        group_id=spec.group_id,
        audience=spec.audience,
        sensitive=spec.sensitive,
        waiter=waiter,
        mode="async" if parked else "sync",
        expiry_at=spec.expiry_at,
        timeout=None if parked else spec.timeout,
        run_id=run_id,
        call=call,
        media=spec.media,
        ticket_hash=ticket_hash,
        channel=spec.channel,
        recipient=spec.recipient,
        chat=chat,
        to="caller" if spec.to == "caller" else "user",
        payload=spec.payload,
        on_expiry="resume" if spec.on_expiry == "resume" else None,
        notify_url=notify_url,
        routing=spec.routing,
    )


def check_caller(
    to: object,
    mode: object,
    payload: object,
    on_expiry: object,
    *,
    channel: object,
    audience: object,
    media: object,
) -> None:
    """The rules of ``to`` (docs/caller-asks.md#asking-the-caller): a caller ask parks (always
    async), reaches no person (no channel, audience or media), and alone carries ``payload`` and
    ``on_expiry``."""
    if to not in ("user", "caller"):
        raise BadInput("to must be 'user' or 'caller'", field="to")
    if to != "caller":
        if payload is not None:
            raise BadInput("payload is only for to='caller' asks", field="payload")
        if on_expiry is not None:
            raise BadInput("on_expiry is only for to='caller' asks", field="on_expiry")
        return
    if mode != "async":
        raise BadInput("to='caller' is always mode='async'; mode='sync' is refused", field="mode")
    if on_expiry is not None and on_expiry not in ("kill", "resume"):
        raise BadInput("on_expiry must be 'kill' or 'resume'", field="on_expiry")
    for name, value in (("channel", channel), ("audience", audience), ("media", media)):
        if value is not None:
            raise BadInput(f"{name} is not for to='caller' asks: they never reach a person", field=name)
    if payload is not None:
        where = nul_path(payload)
        if where is not None:
            raise BadInput("payload must not contain NUL characters", field="payload")
        try:
            size = len(msgspec.json.encode(payload))
        except (TypeError, msgspec.EncodeError):
            raise BadInput(
                "payload must be JSON (objects, arrays, strings, numbers, booleans, null)", field="payload"
            ) from None
        if size > PAYLOAD_MAX_BYTES:
            raise BadInput(
                f"payload is {size} bytes encoded; the limit is {PAYLOAD_MAX_BYTES}", field="payload"
            )


RESERVED_ANSWER_KEY = f"answer must not carry the reserved key {EXPIRY_KEY!r}"
NUL_IN_ANSWER = "answer must not contain NUL characters"


def check_submitted_answer(answer: object, *, reserved_field: str = EXPIRY_KEY) -> None:
    """What every door that takes an answer from outside refuses before anything else looks at
    it (docs/doors/answer.md#answer-validation), in this order: an object carrying the expiry
    marker (only the sweeper resolves a park as expired; nobody fakes it), then a NUL character
    anywhere (PostgreSQL cannot store one; ``field``: where it hides, none at the root).

    ``reserved_field``: the field the marker's refusal names. The answer door names it inside
    its body (``answer.<key>``); the callback doors, whose body or query is the answer, the key.
    """
    if isinstance(answer, dict) and EXPIRY_KEY in answer:
        raise BadInput(RESERVED_ANSWER_KEY, field=reserved_field)
    where = nul_path(answer)
    if where is not None:
        raise BadInput(NUL_IN_ANSWER, field=where or None)


def validate_answer(answer_format: str, format_payload: dict[str, Any] | None, answer: Any) -> Any:
    """Check an answer against its question (docs/doors/answer.md#answer-validation); returns the
    typed value, or raises ``BadInput`` with the door's exact message (``field``: the dotted path
    of a failing form field, None for root-level faults)."""
    fmt = FORMATS.get(answer_format)
    if fmt is None or not fmt.answered_at_the_door:
        raise BadInput("external interactions are answered via their callback URL")
    try:
        typed = fmt.typed(format_payload)
    except msgspec.ValidationError as exc:
        raise BadInput(f"question schema is invalid: {exc}") from None
    return fmt.check_answer(typed, answer)
