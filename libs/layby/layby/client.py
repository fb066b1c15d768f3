"""A connection to Layby (``layby.connect()``): the asking API (``ask_user``, whose machinery is
``layby.asking``), one-way notifications, and the run commands a worker and a caller send.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any

import msgspec
from nats.aio.client import Client as NATS
from nats.aio.subscription import Subscription

from layby.asking import Asking, log
from layby.ids import new_interaction_id
from layby.natskeys import key_id
from layby.questions import check_call
from layby.requests import IDEMPOTENT, request
from layby.tracecontext import command_headers
from layby_contracts.commands import (
    CancelRun,
    DoorCommand,
    EndRun,
    MoveRun,
    Notified,
    ParkRun,
    RecordStep,
    Refused,
    Reply,
    RetryRun,
    RunAccepted,
    RunCommand,
    StartRun,
    Wake,
)
from layby_contracts.errors import BadInput, LaybyError
from layby_contracts.events import Routing
from layby_contracts.refusals import from_refused, to_refused
from layby_contracts.subjects import Names
from layby_domain.validation import is_flow_name

_enc = msgspec.json.Encoder()


class Client(Asking):
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
        action: dict[str, Any] | None = None,
        decisions: list[str] | None = None,
        routing: Routing | dict[str, Any] | None = None,
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
        POSTs the outcome to, signed (docs/webhooks.md); checked by the ask service.
        ``answer_format="review"``: ``action`` is the proposed action (``name``, ``arguments``,
        optional ``schema`` and ``description``) and ``decisions`` what the reviewer may decide;
        ``layby.review`` returns the decision as a ``Review`` (docs/review.md). ``routing``: who
        decides and what happens while nobody does — ``voters``, a quorum of ``required`` agreeing
        votes, ``veto``, ``escalate`` steps, ``remind_every`` (a ``layby.Routing`` or a dict;
        docs/routing.md)."""
        args = dict(locals())  # the keywords as given: the one list of them is this signature
        del args["self"], args["question"]
        checked = check_call(
            question, args, default_timeout=self._default_timeout, callback_base=self._callback_base
        )
        return await self._ask(checked)

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

    async def start_run(
        self, flow: str, input: Any = None, *, run_id: str | None = None, version: int | None = None
    ) -> str:
        """Start a run of ``flow``; a worker hosting the flow executes it. Returns the run id.

        Passing your own ``run_id`` (a uuid4 string) makes the start idempotent. ``version``: the
        flow version to run on (default: the newest a live worker serves; docs/versions.md).
        """
        if not is_flow_name(flow):
            raise BadInput("flow must be 1-64 of [A-Za-z0-9_-]", field="flow")
        try:
            msgspec.json.encode(input)
        except (TypeError, msgspec.EncodeError) as exc:
            raise BadInput(f"input must be JSON-serializable: {exc}", field="input") from None
        run_id = run_id or new_interaction_id()
        reply = await self.run_command(
            StartRun(token=self._token, run_id=run_id, flow=flow, input=input, version=version)
        )
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
        self, cmd: StartRun | ParkRun | EndRun | RecordStep | CancelRun | RetryRun | MoveRun
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

    async def move_run(self, run_id: str, version: int) -> None:
        """Move a parked, waiting or failed run to ``version`` of its flow (an operator token;
        docs/versions.md#moving-runs). Moving it to the version it is on changes nothing."""
        reply = await self.run_command(MoveRun(token=self._token, run_id=run_id, version=version))
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
        try:
            return await request(
                self._nc,
                subject,
                _enc.encode(cmd),
                retry=IDEMPOTENT,
                headers=command_headers(),
                what=f"the {type(cmd).__name__} command",
            )
        except BadInput as exc:  # too large: a refusal like the service's, for the caller to raise
            return to_refused(exc)

    @property
    def token(self) -> str:
        return self._token

    @property
    def nc(self) -> NATS:
        return self._nc

    @property
    def names(self) -> Names:
        return self._names
