"""The SDK: ``await ask_user(...)`` blocks until a person answers (docs/asking.md#asking-a-question,
docs/aggregates/interaction.md#sync-wait).

A sync ask subscribes to its wake subject *before* it records the question, so an instant
answer is never lost. One monotonic deadline bounds the whole ask (recording included); when
it passes, the question is pruned and ``InteractionTimeoutError`` raised. Argument errors raise
``ValueError`` naming the field before anything leaves the process.
"""

from __future__ import annotations

import asyncio
import inspect
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

import msgspec
import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from layby.connection import connect_nats
from layby.logs import get_logger
from layby.natskeys import client_inbox, client_seed, key_id
from layby.runs import RunContext, current_context, require_park_context
from layby.runtime import data_dir, read_runtime
from layby.settings import ClientSettings, load_client_settings
from layby.tracecontext import command_headers
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.commands import (
    PROTOCOL_RESERVATIONS as RESERVATIONS,
)
from layby_contracts.commands import (
    PROTOCOL_TYPED_QUESTION as TYPED_QUESTION,
)
from layby_contracts.commands import (
    REPLY_DECODER,
    WAKE_DECODER,
    Accepted,
    Ask,
    AttachWorker,
    CancelRun,
    CheckCurrent,
    DoorCommand,
    EndRun,
    Look,
    Notified,
    ParkRun,
    Prune,
    PruneResult,
    RecordStep,
    Refused,
    Reply,
    Reserved,
    ReserveTicket,
    RetryRun,
    RunAccepted,
    StartRun,
    Wake,
    WorkerSeen,
)
from layby_contracts.errors import (
    BadInput,
    InteractionTimeoutError,
    LaybyError,
    NonDeterministicRunError,
    Permanent,
    Unavailable,
)
from layby_contracts.events import ChatOptions, ParkedAsk, Resolution
from layby_contracts.formats import payload_of
from layby_contracts.refusals import from_refused, to_refused
from layby_contracts.subjects import Names
from layby_domain.chat import chat_options
from layby_domain.formats import FORMATS, flat_fields, known_format
from layby_domain.tickets import callback_url, new_ticket
from layby_domain.validation import (
    AskSpec,
    call_interaction_id,
    is_flow_name,
    new_interaction_id,
    validate_ask,
)
from layby_domain.webhooks import check_notify_url

_enc = msgspec.json.Encoder()
RunCommand: TypeAlias = (
    StartRun | ParkRun | EndRun | AttachWorker | CheckCurrent | RecordStep | CancelRun | RetryRun | WorkerSeen
)
log = get_logger("layby.sdk")
REQUEST_TIMEOUT = 10.0
PARK_RECORD_BUDGET = 60.0
FIRST_CONNECT_SECONDS = 10.0
NO_RESPONDER_PAUSE = 0.2
"""How long ``connect`` tries to reach NATS before ``Unavailable`` naming LAYBY_NATS_URL."""
LOOK_SECONDS = 10.0
"""A waiter that has heard nothing for this long looks whether its wake was lost (at once after
its connection failed over; docs/reliability.md#lost-wakes)."""
PRUNE_SECONDS = 1.0
"""How long a timed-out ask may spend withdrawing its question before it raises anyway."""


class SecretValue:
    """The answer of a ``sensitive`` question: only ``.reveal()`` shows it
    (docs/aggregates/interaction.md#sensitive-answers)."""

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value

    def reveal(self) -> Any:
        return self._value

    def __repr__(self) -> str:
        return "SecretValue(***)"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a SecretValue cannot be serialized; call .reveal() deliberately")


@dataclass(frozen=True, slots=True)
class AnswerDetails:
    """An answer with what came beside it (``ask_user(..., details=True)``): who answered, and
    the opaque ``params`` a tapped chat control carried (``{"reply_id": ...}``; transport data,
    never trusted; None for a typed or inbox answer) (docs/channels.md#enrichment)."""

    answer: Any
    answered_by: str | None = None
    params: dict[str, Any] | None = None


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


CHAT_ARGS = ("on_mismatch", "mismatch_notice", "reply_ids", "details")
"""Arguments ``validate_ask`` does not take: the chat options (checked by ``chat_options``) and
``details`` (how the answer is returned)."""


def validate_call(
    question: str, args: dict[str, Any], link: object, callback_base: Callable[[], object] | None = None
) -> AskSpec:
    """The SDK's checks of an ``ask_user`` call, before anything leaves the process: the same
    for ``Client.ask_user`` and the module-level ``ask_user`` (which checks before it connects)."""
    if args.get("channel") is not None:
        # The delivery service mints the ticket and hands the callback URL to the channel.
        return validate_ask(question, **args, link_url=link)
    fmt = known_format(args.get("answer_format"))
    if fmt is not None and fmt.needs_link(None):
        check_link(link)
        if callback_base is not None:
            callback_base()
        # Everything else first: the link builder may create an outside resource.
        return validate_ask(question, **args, link_url=LINK_PLACEHOLDER)
    if link is not None:
        raise BadInput(f"link is only for {_linked_formats()} questions", field="link")
    return validate_ask(question, **args)


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


class Client:
    """A connection to Layby for asking. Use ``layby.connect()``; close with ``await client.close()``."""

    def __init__(
        self,
        nc: NATS,
        *,
        names: Names,
        token: str,
        default_timeout: float,
        owns: bool,
        public_base_url: str | None = None,
    ) -> None:
        self._public_base_url = public_base_url
        self._nc = nc
        self._names = names
        self._token = token
        self._default_timeout = default_timeout
        self._owns = owns
        # Wakes arrive under this token's key id, which only its holder may read
        # (docs/security.md#nats-identities); the ask service adds the key id to the waiter.
        self._waiter = secrets.token_urlsafe(12)
        self._wake_prefix = f"{key_id(token)}.{self._waiter}"
        self._waiting: dict[str, asyncio.Future[Wake]] = {}
        self._wake_sub: Subscription | None = None
        self._nudges: dict[str, asyncio.Event] = {}
        """One per waiting ask, from before it is recorded: set when the connection came back (a
        wake may have been lost meanwhile)."""

    def look_again(self) -> None:
        """The connection failed over: every waiting ask looks whether its wake was lost."""
        for nudge in self._nudges.values():
            nudge.set()

    async def close(self) -> None:
        if self._owns and not self._nc.is_closed:
            await self._nc.drain()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def ask_user(
        self,
        question: str,
        *,
        answer_format: str = "text",
        options: list[str] | None = None,
        schema: Any = None,
        timeout: float | None = None,
        group_id: str | None = None,
        audience: str | None = None,
        sensitive: bool = False,
        mode: str | None = None,
        expiry_at: datetime | None = None,
        media: list[Any] | None = None,
        data: dict[str, Any] | None = None,
        pages: list[dict[str, Any]] | None = None,
        link: str | Callable[[str], Any] | None = None,
        verifier: dict[str, Any] | None = None,
        channel: str | list[str] | None = None,
        recipient: str | dict[str, str] | None = None,
        on_mismatch: str | None = None,
        mismatch_notice: str | None = None,
        reply_ids: list[str] | None = None,
        details: bool = False,
        to: str = "user",
        payload: Any = None,
        on_expiry: str | None = None,
        notify_url: str | None = None,
    ) -> Any:
        """Ask a person. ``mode="sync"`` blocks until the answer (or the timeout);
        ``mode="async"`` parks the run executing this code (see ``layby.Worker``). ``media``:
        display-only items (``layby.MediaItem`` or dicts) shown above the answer controls.
        ``answer_format="external"``: ``link`` is a template with ``{callback_url}`` or a callable
        (sync or async) that receives the callback URL and returns the URL to visit; the answer
        is the payload the outside system delivers to that callback. ``channel``: a channel named
        in ``LAYBY_CHANNELS`` delivers the question (to ``recipient``, or its default) with a
        callback URL the reply comes back through; a failed delivery raises
        ``ChannelDeliveryError``. Several channels (``channel=["slack", "telegram"]``, with
        ``recipient`` a mapping of channel to recipient) each get the question; the first reply
        wins. ``on_mismatch`` (``retry`` or ``bridge``), ``mismatch_notice`` and ``reply_ids``
        (the author's id of each option, returned as ``params.reply_id`` on a tap; see
        ``details``) set how a chat channel treats replies (docs/channels.md#replies).
        ``details=True`` returns an ``AnswerDetails`` (the answer, who answered, the tap's
        ``params``) instead of the bare answer. ``to="caller"`` asks the run that called this one
        instead of a person (docs/caller-asks.md): always async, with ``payload`` and ``on_expiry``
        (``kill``, the default, or ``resume``). ``notify_url``: an https URL the delivery service
        POSTs the outcome to, signed (docs/webhooks.md); checked by the ask service."""
        if notify_url is not None:
            check_notify_url(notify_url, allow_http=True)  # the shape; the ask service judges the rest
        mode = _mode_for(to, mode)
        channel, recipient, chat = chat_options(
            channel, recipient, on_mismatch=on_mismatch, mismatch_notice=mismatch_notice, reply_ids=reply_ids
        )
        args: dict[str, Any] = {
            "answer_format": answer_format,
            "options": options,
            "schema": _schema_of(schema),
            "timeout": timeout,
            "group_id": group_id,
            "audience": audience,
            "sensitive": sensitive,
            "default_timeout": self._default_timeout,
            "mode": mode,
            "expiry_at": expiry_at,
            "media": media,
            "data": data,
            "pages": pages,
            "verifier": verifier,
            "channel": channel,
            "recipient": recipient,
            "to": to,
            "payload": payload,
            "on_expiry": on_expiry,
        }
        fmt = known_format(answer_format)
        external = fmt is not None and fmt.needs_link(channel)
        spec = validate_call(question, args, link, self._callback_base)
        if channel is not None and not self._public_base_url:
            raise BadInput(
                "channel questions need INTERACTIONS_PUBLIC_BASE_URL (an https:// origin) for their "
                "callback URL",
                field="channel",
            )

        ctx: RunContext | None = None
        call = 0
        if spec.mode == "async":
            ctx = require_park_context()
            call = ctx.next_call()
            known = ctx.answers.get(str(call))
            if known is not None:
                return _replayed(ctx, call, known, spec.question, details)
            interaction_id = call_interaction_id(ctx.info.run_id, call)
            ctx.recording()  # asks raised together join one park, however long their links take
        else:
            interaction_id = new_interaction_id()
        ticket_hash = None
        recorded = False
        try:
            if external:
                # The ticket is bound before the link exists, so a callback that beats the ask to
                # the door waits for it; a question recorded by an earlier execution of this run
                # keeps its link, and the link builder is not run again.
                ticket, ticket_hash = new_ticket()
                recorded = await self._reserve(interaction_id, ticket_hash, spec, ctx, call)
                if not recorded:
                    url = await build_link(link, callback_url(self._callback_base(), ticket))
                    spec = validate_ask(question, **args, link_url=url)
            if ctx is not None and not recorded:
                await self._record(
                    interaction_id,
                    spec.question,
                    answer_format,
                    spec,
                    time.monotonic() + PARK_RECORD_BUDGET,
                    run_id=ctx.info.run_id,
                    call=call,
                    ticket_hash=ticket_hash,
                    chat=chat,
                    notify_url=notify_url,
                )
        finally:
            if ctx is not None:
                ctx.recorded()
        if ctx is not None:
            # The driver ends this execution at the park; the code after the ask runs when the
            # run resumes (docs/aggregates/run.md#the-suspension-sentinel).
            assert spec.expiry_at is not None
            return await ctx.suspend(
                ParkedAsk(
                    interaction_id=interaction_id, call=call, question=spec.question, expiry_at=spec.expiry_at
                )
            )
        deadline = time.monotonic() + spec.timeout
        # The server's deadline decides whether a late-found answer came in time; until the ask
        # is accepted, the local clock stands in for it.
        server_deadline = time.time() + spec.timeout
        # Listen before recording, so an instant answer is never lost.
        woken: asyncio.Future[Wake] = asyncio.get_running_loop().create_future()
        self._waiting[interaction_id] = woken
        self._nudges[interaction_id] = asyncio.Event()
        try:
            await self._ensure_wake_subscription(deadline)
            accepted = await self._record(
                interaction_id,
                spec.question,
                answer_format,
                spec,
                deadline,
                ticket_hash=ticket_hash,
                chat=chat,
                notify_url=notify_url,
            )
            server_deadline = datetime.fromisoformat(accepted.timeout_at).timestamp()
            # Routine for a library (debug); `layby ask` shows it, so a person at a terminal knows
            # what is being waited for.
            log.debug("sdk.waiting", interaction_id=interaction_id, timeout_at=accepted.timeout_at)
            _raise_if_cancelled()
            return await self._wait(woken, interaction_id, deadline, sensitive, details)
        except InteractionTimeoutError:
            raise
        except TimeoutError:
            return await self._timed_out(interaction_id, spec.timeout, server_deadline, details)
        except asyncio.CancelledError:
            # Cancelled while recording or waiting: prune, and let the cancellation propagate
            # (docs/aggregates/interaction.md#cancellation). A prune that arrives before the ask
            # records a withdrawal, so the ask cannot stay recorded afterwards. A failed prune
            # never replaces the cancellation.
            try:
                await asyncio.shield(self._prune(interaction_id, "cancelled"))
            except Exception as exc:  # noqa: BLE001 - the cancellation is what must propagate
                log.warning("sdk.prune_failed", interaction_id=interaction_id, error=repr(exc))
            raise
        finally:
            self._waiting.pop(interaction_id, None)
            self._nudges.pop(interaction_id, None)

    async def notify_user(
        self,
        message: str,
        *,
        channel: str | None = None,
        recipient: str | None = None,
        audience: str | None = None,
        media: list[Any] | None = None,
        template: Any = None,
        options: list[str] | None = None,
        schema: Any = None,
        data: dict[str, Any] | None = None,
        pages: list[dict[str, Any]] | None = None,
    ) -> Notified:
        """Send a one-way notification and return at once (docs/notifications.md): recorded to
        the feed with no ``channel``, sent on ``channel`` otherwise (one attempt; recorded as well
        when ``audience`` is set). Returns what happened (``outcome`` ``sent`` with the medium's
        ``message_ids``, or ``recorded``); raises ``BadInput`` (400), ``CrossIdentityAudienceError``
        (403), ``UnsupportedError`` (501), ``ChannelFailedError`` (502) or
        ``ChannelUnavailableError`` (503, with ``retry_after`` when the medium named one)."""
        from layby.notify import send_notification

        args = {
            "channel": channel,
            "recipient": recipient,
            "audience": audience,
            "media": media,
            "template": template,
            "options": options,
            "schema": schema,
            "data": data,
            "pages": pages,
        }
        return await send_notification(self, message, args)

    async def _reserve(
        self, interaction_id: str, ticket_hash: str, spec: Any, ctx: RunContext | None, call: int
    ) -> bool:
        """Bind an external question's ticket before its link is built (ADR 0010). True when an
        earlier execution of this run already recorded the question (its link stands)."""
        cmd = ReserveTicket(
            token=self._token,
            interaction_id=interaction_id,
            ticket_hash=ticket_hash,
            mode=spec.mode,
            timeout=None if spec.mode == "async" else spec.timeout,
            expiry_at=spec.expiry_at,
            run_id=ctx.info.run_id if ctx is not None else None,
            call=call if ctx is not None else None,
        )
        deadline = time.monotonic() + (PARK_RECORD_BUDGET if spec.mode == "async" else spec.timeout)
        try:
            reply = await self._request_ask(cmd, deadline)  # a reservation is idempotent
        except TimeoutError:
            raise Unavailable(f"the ask service did not answer on {self._names.cmd_ask}") from None
        if isinstance(reply, Refused):
            if reply.protocol < RESERVATIONS and reply.kind == "invalid" and reply.field is None:
                return False  # an ask service from before reservations: the ask binds the ticket
            raise from_refused(reply, interaction_id=interaction_id)
        return isinstance(reply, Reserved) and reply.existing

    def _callback_base(self) -> str:
        if not self._public_base_url:
            raise BadInput(
                "external questions need INTERACTIONS_PUBLIC_BASE_URL (an https:// origin) to build "
                "their callback URL (so do channel questions)",
                field="link",
            )
        return self._public_base_url

    async def start_run(self, flow: str, input: Any = None, *, run_id: str | None = None) -> str:
        """Start a run of ``flow``; a worker hosting the flow executes it. Returns the run id.

        Passing your own ``run_id`` (a uuid4 string) makes the start idempotent.
        """
        if not is_flow_name(flow):
            raise BadInput("flow must be 1-64 of [A-Za-z0-9_-]", field="flow")
        try:
            msgspec.json.encode(input)
        except (TypeError, msgspec.EncodeError) as exc:
            raise BadInput(f"input must be JSON-serializable: {exc}", field="input") from None
        run_id = run_id or new_interaction_id()
        reply = await self.run_command(StartRun(token=self._token, run_id=run_id, flow=flow, input=input))
        if isinstance(reply, LaybyError):
            raise reply
        if reply.warning:
            log.warning("run.no_worker", run_id=run_id, flow=flow, warning=reply.warning)
        return run_id

    async def start_child(self, run_id: str, flow: str, input: Any, *, caller: str, caller_call: int) -> None:
        """Start ``flow`` as the child of the run ``caller`` (``layby.call``); idempotent by ``run_id``."""
        reply = await self.run_command(
            StartRun(
                token=self._token,
                run_id=run_id,
                flow=flow,
                input=input,
                caller=caller,
                caller_call=caller_call,
            )
        )
        if isinstance(reply, LaybyError):
            raise reply
        if reply.warning:
            log.warning("run.no_worker", run_id=run_id, flow=flow, warning=reply.warning)

    async def run_command(
        self, cmd: StartRun | ParkRun | EndRun | RecordStep | CancelRun | RetryRun
    ) -> RunAccepted | LaybyError:
        """Send a run command to the ask service; retried on timeouts (commands are idempotent).
        A refusal comes back as the error the service raised (not raised: the worker decides)."""
        reply = await self.request_run(cmd)
        if isinstance(reply, Refused):
            return from_refused(reply)
        if not isinstance(reply, RunAccepted):
            raise RuntimeError(f"unexpected reply to a run command: {reply!r}")  # noqa: TRY004
        return reply

    async def cancel_run(self, run_id: str) -> None:
        """Cancel a running or parked run (a parked run's open questions leave the inbox; a
        running one stops at its next step, park or end). Raises ``Conflict`` when it has ended."""
        reply = await self.run_command(CancelRun(token=self._token, run_id=run_id))
        if isinstance(reply, LaybyError):
            raise reply

    async def retry_run(self, run_id: str) -> None:
        """Execute a failed run again from its last recorded step or park."""
        reply = await self.run_command(RetryRun(token=self._token, run_id=run_id))
        if isinstance(reply, LaybyError):
            raise reply

    async def request_run(self, cmd: RunCommand) -> Reply:
        """One request on the run-command subject, retried while no ask service answers."""
        return await self._request(self._names.cmd_run, cmd)

    async def request_door(self, cmd: DoorCommand) -> Reply:
        """One request on the door-command subject (visits, parked entries), retried while no ask
        service answers."""
        return await self._request(self._names.cmd_door, cmd)

    async def _request(self, subject: str, cmd: RunCommand | DoorCommand) -> Reply:
        payload = _enc.encode(cmd)
        headers = command_headers()
        for attempt in range(6):
            try:
                msg = await self._nc.request(subject, payload, timeout=REQUEST_TIMEOUT, headers=headers)
                break
            except nats.errors.MaxPayloadError:
                return to_refused(
                    BadInput(f"the {type(cmd).__name__} command is larger than the NATS server's max payload")
                )
            except nats.errors.NoRespondersError:
                if attempt == 5:
                    raise Unavailable(
                        f"no ask service answers on {subject}: start Layby with `layby up`"
                    ) from None
                await asyncio.sleep(0.5 * (attempt + 1))
            except nats.errors.TimeoutError:
                if attempt == 5:
                    raise Unavailable(f"the ask service did not answer on {subject}") from None
        return REPLY_DECODER.decode(msg.data)

    @property
    def token(self) -> str:
        return self._token

    @property
    def nc(self) -> NATS:
        return self._nc

    @property
    def names(self) -> Names:
        return self._names

    async def _ensure_wake_subscription(self, deadline: float) -> None:
        """One subscription per client on ``<ns>.wake.<waiter>.*``, created on the first ask."""
        if self._wake_sub is None:
            self._wake_sub = await self._nc.subscribe(
                self._names.wake_all(self._wake_prefix), cb=self._on_wake
            )
            # The server knows the interest before the first ask is sent (within the ask's budget).
            remaining = max(deadline - time.monotonic(), 0.001)
            await self._nc.flush(timeout=min(REQUEST_TIMEOUT, remaining))  # type: ignore[arg-type]  # float works

    async def _on_wake(self, msg: Msg) -> None:
        try:
            wake = WAKE_DECODER.decode(msg.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return
        woken = self._waiting.get(wake.interaction_id)
        if woken is not None and not woken.done():
            woken.set_result(wake)

    async def _record(
        self,
        interaction_id: str,
        question: str,
        fmt: str,
        spec: Any,
        deadline: float,
        *,
        run_id: str | None = None,
        call: int | None = None,
        ticket_hash: str | None = None,
        chat: ChatOptions | None = None,
        notify_url: str | None = None,
    ) -> Accepted:
        cmd = Ask(
            token=self._token,
            interaction_id=interaction_id,
            question=question,
            format=payload_of(fmt, spec.format_payload),
            answer_format=fmt,
            group_id=spec.group_id,
            audience=spec.audience,
            sensitive=spec.sensitive,
            waiter=None if run_id else self._waiter,
            mode=spec.mode,
            expiry_at=spec.expiry_at,
            timeout=None if spec.mode == "async" else spec.timeout,
            run_id=run_id,
            call=call,
            media=spec.media,
            ticket_hash=ticket_hash,
            channel=spec.channel,
            recipient=spec.recipient,
            chat=chat,
            to="caller" if spec.to == "caller" else "user",
            payload=spec.payload,
            on_expiry=spec.on_expiry if spec.on_expiry == "resume" else None,
            notify_url=notify_url,
        )
        # TimeoutError past the deadline: the caller prunes, and may find the ask recorded after all.
        reply = await self._request_ask(cmd, deadline)  # the same interaction id: idempotent
        if isinstance(reply, Refused) and _before_typed_question(reply):
            reply = await self._request_ask(cmd, deadline, payload=_flat_ask(cmd))
        if isinstance(reply, Refused):
            raise from_refused(reply, interaction_id=interaction_id)
        assert isinstance(reply, Accepted)
        return reply

    async def _request_ask(
        self, cmd: Ask | ReserveTicket, deadline: float, *, payload: bytes | None = None
    ) -> Reply:
        """Send an idempotent command (``payload``: as already encoded) to the ask service,
        retrying slow replies and a missing ask service (a restart) until ``deadline``, then
        ``TimeoutError``."""
        payload = payload if payload is not None else _enc.encode(cmd)
        headers = command_headers()  # the asker's span, if any, is the ask service's parent
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                msg = await self._nc.request(
                    self._names.cmd_ask, payload, timeout=min(remaining, REQUEST_TIMEOUT), headers=headers
                )
                return REPLY_DECODER.decode(msg.data)
            except nats.errors.NoRespondersError:
                # No ask service right now (a restart takes a moment): wait within the budget.
                if not self._nc.is_connected and not self._nc.is_reconnecting:
                    raise Unavailable(f"the NATS connection is closed ({self._names.cmd_ask})") from None
                await asyncio.sleep(min(NO_RESPONDER_PAUSE, max(0.0, deadline - time.monotonic())))
            except nats.errors.TimeoutError:
                continue

    async def _wait(
        self,
        woken: asyncio.Future[Wake],
        interaction_id: str,
        deadline: float,
        sensitive: bool,
        details: bool = False,
    ) -> Any:
        nudge = self._nudges.setdefault(interaction_id, asyncio.Event())
        while not woken.done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            nudged: asyncio.Future[Any] = asyncio.ensure_future(nudge.wait())
            try:
                # asyncio.wait neither swallows a cancel (wait_for on 3.11 can) nor cancels the task.
                either: set[asyncio.Future[Any]] = {woken, nudged}
                await asyncio.wait(
                    either, timeout=min(remaining, LOOK_SECONDS), return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                nudged.cancel()
            if not woken.done():
                nudge.clear()
                await self._look(interaction_id, woken, deadline)
        wake = woken.result()
        if wake.outcome == "answered":
            answer = SecretValue(wake.answer) if sensitive else wake.answer
            if details:
                return AnswerDetails(answer=answer, answered_by=wake.answered_by, params=wake.params)
            return answer
        if wake.reason == "delivery_failed":
            raise ChannelDeliveryError(
                f"interaction {interaction_id} could not be delivered: {wake.detail or 'no reason given'}"
            )
        raise InteractionTimeoutError(
            f"interaction {interaction_id} was removed before it was answered ({wake.reason})",
            interaction_id=interaction_id,
        )

    async def _look(self, interaction_id: str, woken: asyncio.Future[Wake], deadline: float) -> None:
        """Look whether the question resolved while its wake was lost; if so, wake the waiter as
        the wake would have. Anything else (still pending, no answer in time, an ask service
        from before the look) leaves it waiting."""
        cmd = Look(token=self._token, interaction_id=interaction_id)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        try:
            msg = await self._nc.request(
                self._names.cmd_ask, _enc.encode(cmd), timeout=min(remaining, REQUEST_TIMEOUT)
            )
            reply = REPLY_DECODER.decode(msg.data)
        except (nats.errors.Error, TimeoutError, msgspec.DecodeError, msgspec.ValidationError):
            return
        if not isinstance(reply, PruneResult) or woken.done():
            return
        if reply.outcome == "answered":
            log.info("sdk.wake_recovered", interaction_id=interaction_id)
            woken.set_result(
                Wake(
                    interaction_id=interaction_id,
                    outcome="answered",
                    answer=reply.answer,
                    answered_by=reply.answered_by,
                    answered_at=reply.answered_at,
                    params=reply.params,
                )
            )
        elif reply.outcome == "gone" and reply.reason is not None:
            log.info("sdk.wake_recovered", interaction_id=interaction_id)
            woken.set_result(
                Wake(
                    interaction_id=interaction_id, outcome="removed", reason=reply.reason, detail=reply.detail
                )
            )

    async def _prune(self, interaction_id: str, reason: str, timeout: float = REQUEST_TIMEOUT) -> PruneResult:
        cmd = Prune(token=self._token, interaction_id=interaction_id, reason=reason)  # type: ignore[arg-type]
        msg = await self._nc.request(
            self._names.cmd_prune, _enc.encode(cmd), timeout=timeout, headers=command_headers()
        )
        reply = REPLY_DECODER.decode(msg.data)
        if isinstance(reply, Refused):
            raise from_refused(reply, interaction_id=interaction_id)
        if not isinstance(reply, PruneResult):
            raise Permanent(f"unexpected reply to the prune of interaction {interaction_id}: {reply!r}")
        return reply

    async def _timed_out(
        self, interaction_id: str, budget: float, server_deadline: float, details: bool = False
    ) -> Any:
        try:
            result = await self._prune(interaction_id, "timeout", timeout=PRUNE_SECONDS)
        except (nats.errors.Error, TimeoutError, LaybyError) as exc:
            # Layby cannot be reached to withdraw the question (or refused to): the budget is spent
            # all the same. The question, if it was recorded, expires at its deadline and is swept.
            log.warning("sdk.prune_failed", interaction_id=interaction_id, error=repr(exc))
            raise InteractionTimeoutError(
                f"no answer to interaction {interaction_id} within {budget:g}s; Layby could not be "
                f"reached to withdraw the question ({type(exc).__name__})",
                interaction_id=interaction_id,
            ) from None
        if result.outcome == "answered":
            answered_at = (
                datetime.fromisoformat(result.answered_at).timestamp() if result.answered_at else None
            )
            if answered_at is not None and answered_at <= server_deadline:
                # Answered in time, but the wake was lost (a reconnect): the log has the answer.
                answer = SecretValue(result.answer) if result.sensitive else result.answer
                if details:
                    return AnswerDetails(answer=answer, answered_by=result.answered_by, params=result.params)
                return answer
            raise InteractionTimeoutError(
                f"no answer to interaction {interaction_id} within {budget:g}s; "
                "an answer was recorded after the budget and was not returned",
                interaction_id=interaction_id,
            )
        if result.outcome == "gone" and result.reason == "delivery_failed":
            raise ChannelDeliveryError(
                f"interaction {interaction_id} could not be delivered: {result.detail or 'no reason given'}"
            )
        if result.outcome == "gone":
            raise InteractionTimeoutError(
                f"no answer to interaction {interaction_id} within {budget:g}s; "
                "the question was already gone",
                interaction_id=interaction_id,
            )
        raise InteractionTimeoutError(
            f"no answer to interaction {interaction_id} within {budget:g}s; the question was pruned",
            interaction_id=interaction_id,
        )


async def connect(
    *, nats_url: str | None = None, token: str | None = None, settings: ClientSettings | None = None
) -> Client:
    """Connect explicitly; unset values come from ``LAYBY_NATS_URL`` / ``LAYBY_TOKEN`` or ``layby up``."""
    settings = settings or load_client_settings()
    runtime = read_runtime(data_dir(settings))
    url = nats_url or settings.nats_url or (runtime.nats_url if runtime else None)
    tok = token or settings.token or (runtime.token if runtime else None)
    if not url:
        raise RuntimeError("no NATS URL: set LAYBY_NATS_URL, pass nats_url=, or run `layby up`")
    if not tok:
        raise RuntimeError("no token: set LAYBY_TOKEN, pass token=, or run `layby up`")
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
        public_base_url=settings.public_base_url,
    )
    made.append(client)
    return client


_clients: dict[asyncio.AbstractEventLoop, Client] = {}


async def ask_user(
    question: str,
    *,
    answer_format: str = "text",
    options: list[str] | None = None,
    schema: Any = None,
    timeout: float | None = None,
    group_id: str | None = None,
    audience: str | None = None,
    sensitive: bool = False,
    mode: str | None = None,
    expiry_at: datetime | None = None,
    media: list[Any] | None = None,
    data: dict[str, Any] | None = None,
    pages: list[dict[str, Any]] | None = None,
    link: str | Callable[[str], Any] | None = None,
    verifier: dict[str, Any] | None = None,
    channel: str | list[str] | None = None,
    recipient: str | dict[str, str] | None = None,
    on_mismatch: str | None = None,
    mismatch_notice: str | None = None,
    reply_ids: list[str] | None = None,
    details: bool = False,
    to: str = "user",
    payload: Any = None,
    on_expiry: str | None = None,
    notify_url: str | None = None,
) -> Any:
    """Ask a person and block until they answer: ``str`` for text/select, ``bool`` for confirm,
    ``dict`` for form. Raises ``InteractionTimeoutError`` when the budget runs out.

    ``mode="async"`` with a timezone-aware ``expiry_at`` parks the flow run executing this
    code instead (``layby.Worker``); the run resumes with the answer, or with
    ``{"layby:interaction_expired": True}`` when ``expiry_at`` passes first."""
    args: dict[str, Any] = {
        "answer_format": answer_format,
        "options": options,
        "schema": schema,
        "timeout": timeout,
        "group_id": group_id,
        "audience": audience,
        "sensitive": sensitive,
        "mode": mode,
        "expiry_at": expiry_at,
        "media": media,
        "data": data,
        "pages": pages,
        "link": link,
        "verifier": verifier,
        "channel": channel,
        "recipient": recipient,
        "on_mismatch": on_mismatch,
        "mismatch_notice": mismatch_notice,
        "reply_ids": reply_ids,
        "details": details,
        "to": to,
        "payload": payload,
        "on_expiry": on_expiry,
        "notify_url": notify_url,
    }
    ctx = current_context()
    if ctx is not None and ctx.client is not None:
        return await ctx.client.ask_user(question, **args)
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        # Validate first so a bad call fails before any connection is opened (docs/asking.md#timeout).
        checks = {k: v for k, v in args.items() if k not in ("link", "notify_url", *CHAT_ARGS)}
        if notify_url is not None:
            check_notify_url(notify_url, allow_http=True)
        checks["channel"], checks["recipient"], _ = chat_options(
            channel, recipient, on_mismatch=on_mismatch, mismatch_notice=mismatch_notice, reply_ids=reply_ids
        )
        checks["mode"] = _mode_for(to, mode)
        validate_call(question, {**checks, "schema": _schema_of(schema)}, link)
        if checks["mode"] == "async":
            require_park_context()
        client = _clients[loop] = await connect()
    return await client.ask_user(question, **args)


async def notify_user(
    message: str,
    *,
    channel: str | None = None,
    recipient: str | None = None,
    audience: str | None = None,
    media: list[Any] | None = None,
    template: Any = None,
    options: list[str] | None = None,
    schema: Any = None,
    data: dict[str, Any] | None = None,
    pages: list[dict[str, Any]] | None = None,
) -> Notified:
    """Send a one-way notification and return at once: no interaction, no ticket, no wait
    (``Client.notify_user``; docs/notifications.md). Bad arguments raise ``BadInput`` naming the
    field before any connection is opened."""
    from layby.notify import check_notify

    args: dict[str, Any] = {
        "channel": channel,
        "recipient": recipient,
        "audience": audience,
        "media": media,
        "template": template,
        "options": options,
        "schema": schema,
        "data": data,
        "pages": pages,
    }
    ctx = current_context()
    if ctx is not None and ctx.client is not None:
        running: Client = ctx.client
        return await running.notify_user(message, **args)
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        check_notify(message, args)
        client = _clients[loop] = await connect()
    return await client.notify_user(message, **args)
