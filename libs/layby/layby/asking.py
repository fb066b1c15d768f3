"""The asking half of a ``Client`` (docs/asking.md#asking-a-question,
docs/aggregates/interaction.md#sync-wait): record a checked question, wait for its wake, look
for a lost one, and withdraw the question when the wait ends without an answer.

A sync ask subscribes to its wake subject *before* it records the question, so an instant
answer is never lost. One monotonic deadline bounds the whole ask (recording included); when
it passes, the question is pruned and ``InteractionTimeoutError`` raised.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import msgspec
import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from layby.ids import new_interaction_id, new_ticket
from layby.logs import get_logger
from layby.questions import (
    Call,
    _before_typed_question,
    _flat_ask,
    _raise_if_cancelled,
    _replayed,
    build_link,
)
from layby.requests import UNTIL_DEADLINE, Retry, expect, request
from layby.runs import RunContext, require_park_context
from layby.tracecontext import command_headers
from layby.values import AnswerDetails, SecretValue
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.commands import PROTOCOL_RESERVATIONS as RESERVATIONS
from layby_contracts.commands import (
    WAKE_DECODER,
    Accepted,
    Ask,
    Look,
    Prune,
    PruneResult,
    Refused,
    Reply,
    Reserved,
    ReserveTicket,
    Wake,
)
from layby_contracts.errors import BadInput, InteractionTimeoutError, LaybyError, Unavailable
from layby_contracts.events import ParkedAsk
from layby_contracts.refusals import from_refused
from layby_contracts.subjects import Names
from layby_domain.tickets import callback_url
from layby_domain.validation import AskSpec, ask_command, call_interaction_id, validate_ask

_enc = msgspec.json.Encoder()
log = get_logger("layby.sdk")
REQUEST_TIMEOUT = 10.0
PARK_RECORD_BUDGET = 60.0
NO_RESPONDER_PAUSE = UNTIL_DEADLINE.pause
"""How long a sync ask waits before it sends again when no ask service answered (a restart)."""
LOOK_SECONDS = 10.0
"""A waiter that has heard nothing for this long looks whether its wake was lost (at once after
its connection failed over; docs/reliability.md#lost-wakes)."""
PRUNE_SECONDS = 1.0
"""How long a timed-out ask may spend withdrawing its question before it raises anyway."""


class Asking:
    """The ask machinery a ``Client`` is built on; its state is set by ``Client.__init__``."""

    _nc: NATS
    _names: Names
    _token: str
    _default_timeout: float
    _public_base_url: str | None
    _waiter: str
    _wake_prefix: str
    _waiting: dict[str, asyncio.Future[Wake]]
    _wake_sub: Subscription | None
    _nudges: dict[str, asyncio.Event]

    def look_again(self) -> None:
        """The connection failed over: every waiting ask looks whether its wake was lost."""
        for nudge in self._nudges.values():
            nudge.set()

    async def _ask(self, checked: Call) -> Any:
        """Record the checked question and wait for its answer (sync), or park the run (async)."""
        spec = checked.spec
        # A channel question's callback URL is the services' business (the ask service refuses
        # the ask, naming `channel`, when they have no public base URL): the client needs none.

        ctx: RunContext | None = None
        call = 0
        if spec.mode == "async":
            ctx = require_park_context()
            call = ctx.next_call()
            known = ctx.answers.get(str(call))
            if known is not None:
                return _replayed(ctx, call, known, spec.question, checked.details)
            interaction_id = call_interaction_id(ctx.info.run_id, call)
            ctx.recording()  # asks raised together join one park, however long their links take
        else:
            interaction_id = new_interaction_id()
        ticket_hash = None
        recorded = False
        try:
            if checked.external:
                # The ticket is bound before the link exists, so a callback that beats the ask to
                # the door waits for it; a question recorded by an earlier execution of this run
                # keeps its link, and the link builder is not run again.
                ticket, ticket_hash = new_ticket()
                recorded = await self._reserve(interaction_id, ticket_hash, spec, ctx, call)
                if not recorded:
                    url = await build_link(checked.link, callback_url(self._callback_base(), ticket))
                    built = msgspec.structs.replace(checked.question, link_url=url)
                    spec = validate_ask(built, default_timeout=self._default_timeout)
            if ctx is not None and not recorded:
                await self._record(
                    interaction_id,
                    spec,
                    checked,
                    time.monotonic() + PARK_RECORD_BUDGET,
                    run_id=ctx.info.run_id,
                    call=call,
                    ticket_hash=ticket_hash,
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
            accepted = await self._record(interaction_id, spec, checked, deadline, ticket_hash=ticket_hash)
            server_deadline = datetime.fromisoformat(accepted.timeout_at).timestamp()
            # Routine for a library (debug); `layby ask` shows it, so a person at a terminal knows
            # what is being waited for.
            log.debug("sdk.waiting", interaction_id=interaction_id, timeout_at=accepted.timeout_at)
            _raise_if_cancelled()
            return await self._wait(woken, interaction_id, deadline, spec.sensitive, checked.details)
        except InteractionTimeoutError:
            raise
        except TimeoutError:
            return await self._timed_out(interaction_id, spec.timeout, server_deadline, checked.details)
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
        spec: AskSpec,
        checked: Call,
        deadline: float,
        *,
        run_id: str | None = None,
        call: int | None = None,
        ticket_hash: str | None = None,
    ) -> Accepted:
        cmd = ask_command(
            spec,
            token=self._token,
            interaction_id=interaction_id,
            waiter=None if run_id else self._waiter,
            run_id=run_id,
            call=call,
            ticket_hash=ticket_hash,
            chat=checked.chat,
            notify_url=checked.notify_url,
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
        return await request(
            self._nc,
            self._names.cmd_ask,
            payload,
            retry=UNTIL_DEADLINE,
            headers=command_headers(),  # the asker's span, if any, is the ask service's parent
            deadline=deadline,
        )

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
            reply = await request(self._nc, self._names.cmd_ask, _enc.encode(cmd), deadline=deadline)
        except (LaybyError, nats.errors.Error, TimeoutError, msgspec.DecodeError, msgspec.ValidationError):
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
        reply = await request(
            self._nc,
            self._names.cmd_prune,
            _enc.encode(cmd),
            retry=Retry(timeout=timeout),
            headers=command_headers(),
        )
        return expect(
            reply, PruneResult, f"the prune of interaction {interaction_id}", interaction_id=interaction_id
        )

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
