"""The ask service's command handlers: the authority that validates and records asks."""

from __future__ import annotations

import asyncio
import math
import secrets
import uuid
from datetime import datetime, timedelta

import msgspec

from layby.ids import new_interaction_id
from layby.natskeys import key_id
from layby_contracts.commands import Accepted, Ask, Look, Prune, PruneResult, Reserved, ReserveTicket
from layby_contracts.errors import (
    BadInput,
    Conflict,
    Forbidden,
    InteractionLimitError,
    Transient,
    Unauthorized,
    Unavailable,
)
from layby_contracts.events import InteractionAsked, InteractionWithdrawn, MediaItem, RunStarted
from layby_contracts.limits import MEDIA_ROUTE_PREFIX
from layby_domain.ask import AskFacts, check_retention, decide_ask, park_identity
from layby_domain.clock import Clock
from layby_domain.interaction import Interaction, decide_prune, decide_withdrawn, withdrawal
from layby_domain.media import decode_data_image
from layby_domain.tickets import ticket_expires_at
from layby_domain.validation import check_wait, is_interaction_id, is_sha256_hex
from layby_domain.verifiers import parse_secrets
from layby_server.auth import Authenticator, Principal, asker_of
from layby_server.channels import abilities, load_channels
from layby_server.observability.logs import get_logger
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_server.write.parked import Entries
from layby_server.write.resolve import resolve, state_of
from layby_server.write.webhooks import webhook_policy
from layby_services.ask.admission import Admitter, caller_deadline, caller_limit_error
from layby_services.ask.caller import identify
from layby_services.ask.runs import RunHandlers

log = get_logger("layby.ask")
RESERVATION_SECONDS = 600.0
"""How long a reserved ticket lives before its ask binds it (the link builder's time)."""


class AskHandlers:
    def __init__(
        self,
        settings: Settings,
        store: EventStore,
        admitter: Admitter,
        auth: Authenticator,
        clock: Clock,
        *,
        caller_admitter: Admitter,
    ) -> None:
        self._settings = settings
        self._store = store
        self._admitter = admitter
        self.caller_admitter = caller_admitter
        """The caller pool (``INTERACTIONS_MAX_CONCURRENT_CALLER``): a caller ask takes its slot
        here and never from ``admitter``, the to-user pool."""
        self._auth = auth
        self._clock = clock
        self.runs = RunHandlers(settings, store, auth, clock)
        self.entries = Entries(store, clock.now)
        self.channels = load_channels(settings.channels, parse_secrets(settings.webhook_secrets))
        """The registered channel plugins, loaded once (the notifications send through them too)."""
        self._channel_abilities = abilities(self.channels)

    async def _run_of(self, cmd: Ask | ReserveTicket) -> RunStarted | None:
        """The run an async ask parks, when the command names a well-formed one (the decision
        says what is wrong with one that does not)."""
        if cmd.mode != "async" or not is_interaction_id(cmd.run_id):
            return None
        assert cmd.run_id is not None
        return await self.runs.started(cmd.run_id)

    def _check_retention(self, interaction_id: str, expiry_at: datetime) -> None:
        """A park that would outlive its checkpoint is refused (the domain's rule)."""
        check_retention(
            interaction_id, expiry_at, self._clock.now(), self._settings.checkpoint_retention_seconds
        )

    async def _bind_ticket(self, ticket_hash: str, interaction_id: str, expires: datetime) -> None:
        """Store a ticket for this question, or refresh the one its reservation stored; refused
        when the hash belongs to another question."""
        if await self._store.put_ticket(ticket_hash, interaction_id, expires, new=True):
            return
        found = await self._store.get_ticket(ticket_hash)
        if found is None or found[0] != interaction_id:
            raise BadInput("ticket_hash is already in use", field="ticket_hash")
        await self._store.put_ticket(ticket_hash, interaction_id, expires, new=False)

    async def reserve(self, cmd: ReserveTicket) -> Reserved:
        """Bind an external question's ticket before its link is built (ADR 0010)."""
        asker = asker_of(identify(self._auth, cmd.token, cmd.interaction_id, "interaction_id"))
        if not is_sha256_hex(cmd.ticket_hash):
            raise BadInput("ticket_hash must be a SHA-256 (64 hex)", field="ticket_hash")
        expiry = check_wait(cmd.mode, cmd.timeout, cmd.expiry_at)
        if cmd.timeout is not None and (not math.isfinite(cmd.timeout) or cmd.timeout <= 0):
            raise BadInput(f"timeout must be positive, got {cmd.timeout}", field="timeout")
        if cmd.mode == "async":
            # A park's id is derived from its run: only the run's identity (or an operator) may
            # bind a ticket to it, exactly as only they may ask it.
            asker = park_identity(cmd.run_id, cmd.call, cmd.interaction_id, asker, await self._run_of(cmd))
        elif cmd.run_id is not None or cmd.call is not None:
            raise BadInput("run_id and call belong to async asks only", field="run_id")
        first = await self._store.first(self._store.names.ix(cmd.interaction_id))
        if first is not None:
            asked = first.event
            if not isinstance(asked, InteractionAsked):
                raise BadInput("interaction_id is already in use", field="interaction_id")
            if asker.restricted and asked.asked_by != asker.identity:
                raise Forbidden("this question belongs to another identity")
            return Reserved(existing=True)  # recorded by an earlier execution: its link stands
        now = self._clock.now()
        timeout = cmd.timeout if cmd.timeout is not None else self._settings.answer_timeout_seconds
        timeout_at = expiry if expiry is not None else now + timedelta(seconds=timeout)
        # Until the ask binds it for the question's whole life, a reservation lives only as long
        # as a link may take to build: one that is never followed by its ask soon expires.
        expires = min(
            ticket_expires_at(now, timeout_at, cmd.mode), now + timedelta(seconds=RESERVATION_SECONDS)
        )
        await self._bind_ticket(cmd.ticket_hash, cmd.interaction_id, expires)
        return Reserved()

    async def ask(self, cmd: Ask) -> Accepted:
        """Gather the facts, decide (``layby_domain.ask.decide_ask``), then do what the decision
        says: bind the ticket, admit, store inline images, record. Nothing is stored on a refusal
        (docs/asking.md#asking-a-question)."""
        principal = identify(self._auth, cmd.token, cmd.interaction_id, "interaction_id")
        facts = AskFacts(
            asker=asker_of(principal),
            now=self._clock.now(),
            new_group_id=new_interaction_id(),
            default_timeout=self._settings.answer_timeout_seconds,
            token_key=key_id(cmd.token),
            run=await self._run_of(cmd),
            channels=self._channel_abilities,
            public_base_url=bool(self._settings.public_base_url),
            retention_seconds=self._settings.checkpoint_retention_seconds,
            media_retention_seconds=self._settings.media_retention_seconds,
            webhooks=await webhook_policy(self._settings, cmd.notify_url),
        )
        decision = decide_ask(cmd, facts)
        event = decision.event
        if event.run_id is not None:
            # A replayed or duplicated execution re-asks under the same id: the question exists
            # already (perhaps answered), so it takes no new slot and is not appended again.
            first_ask = await self._asked_before(event)
            if first_ask is not None:
                if first_ask.to == "caller" and first_ask.subject is not None:
                    await self._index(first_ask)  # an earlier attempt may have stopped before it
                return _accepted(first_ask)
        if event.to == "caller":
            return await self._ask_caller(event)
        if decision.binds_ticket:
            # A channel question's ticket is minted by the delivery service, per delivery.
            assert cmd.ticket_hash is not None
            expires = ticket_expires_at(event.created_at, event.timeout_at, event.mode)
            await self._bind_ticket(cmd.ticket_hash, cmd.interaction_id, expires)
        if not await self._admitter.admit(event.interaction_id, event.timeout_at):
            raise InteractionLimitError(
                f"ask_user refused: already at the max_concurrent limit ({self._admitter.cap})"
            )
        if decision.inline:
            try:
                event = msgspec.structs.replace(event, media=await self._store_inline(event.media or []))
            except Transient:
                await self._admitter.release(event.interaction_id)
                raise
        event = await self._record(event)
        log.info(
            "ask.recorded",
            interaction_id=event.interaction_id,
            asked_by=event.asked_by,
            answer_format=event.answer_format,
        )
        return _accepted(event)

    async def _ask_caller(self, event: InteractionAsked) -> Accepted:
        """A caller ask (docs/caller-asks.md): its own cap, then recorded and put on its subject's
        index before the asker parks, so a visit right after the park sees it."""
        admitter = self.caller_admitter
        if not await admitter.admit(
            event.interaction_id, caller_deadline(event.expiry_at or event.timeout_at)
        ):
            raise caller_limit_error(admitter.cap)
        event = await self._record(event)
        await self._index(event)
        log.info("ask.recorded", interaction_id=event.interaction_id, to="caller", subject=event.subject)
        return _accepted(event)

    async def _index(self, event: InteractionAsked) -> None:
        assert event.subject is not None
        self.entries.remember(event)
        await self.entries.add(event.subject, event.interaction_id)

    async def _asked_before(self, event: InteractionAsked) -> InteractionAsked | None:
        """The question an earlier execution of this run's call recorded under the same id."""
        existing = await self._store.first(self._store.names.ix(event.interaction_id))
        if existing is None:
            return None
        if isinstance(existing.event, InteractionAsked) and existing.event.asked_by == event.asked_by:
            return existing.event
        raise BadInput("interaction_id is already in use", field="interaction_id")

    async def _store_inline(self, media: list[MediaItem]) -> list[MediaItem]:
        """Store each ``data:image`` by reference (docs/asking.md#inline-images): the record keeps the served
        ``/api/interactions/media/<id>`` url, never the bytes."""
        out: list[MediaItem] = []
        for index, item in enumerate(media):
            if not item.url.startswith("data:"):
                out.append(item)
                continue
            mime, raw = decode_data_image(item.url, f"media[{index}].url")
            media_id = secrets.token_urlsafe(32)
            await self._store.put_media(media_id, mime, raw)
            out.append(msgspec.structs.replace(item, url=MEDIA_ROUTE_PREFIX + media_id))
        return out

    async def _record(self, event: InteractionAsked) -> InteractionAsked:
        """Append the asked event; the slot is released only when the log surely lacks it."""
        slots = self.caller_admitter if event.to == "caller" else self._admitter
        subject = self._store.names.ix(event.interaction_id)
        # Whether the asker withdrew the id first is read once, after the append (one read per
        # ask on the hot path): a withdrawal that came before is found there just the same.
        for attempt in range(3):
            try:
                # The same Nats-Msg-Id on every attempt: a retry of an append that did land
                # is de-duplicated by the server instead of failing.
                await self._store.append(
                    subject, event, msg_id=f"asked-{event.interaction_id}", expected_seq=0
                )
                await self._unless_withdrawn(event, slots)
                return event
            except Conflict:
                break
            except Transient as exc:
                log.warning("ask.append_retry", interaction_id=event.interaction_id, error=str(exc))
                await asyncio.sleep(0.2 * (attempt + 1))
        # When this read fails too, it is unknown whether the ask landed: the slot is kept (it
        # expires at the deadline) and the caller gets ``Unavailable``.
        first = await self._store.first(subject)
        if (
            first is not None
            and isinstance(first.event, InteractionAsked)
            and first.event.asked_by == event.asked_by
        ):
            return first.event  # an earlier attempt of this very ask was recorded
        await slots.release(event.interaction_id)
        if first is None:
            raise Unavailable("the event log is unavailable; nothing was recorded")
        raise BadInput("interaction_id is already in use", field="interaction_id")

    async def prune(self, cmd: Prune) -> PruneResult:
        """Prune a sync question whose waiter gave up; tell pruned / answered / gone apart."""
        result = await self._prune(cmd)
        outcome = result.outcome if isinstance(result, PruneResult) else result.kind
        log.info("ask.prune", interaction_id=cmd.interaction_id, reason=cmd.reason, outcome=outcome)
        return result

    def _waiter_of(self, cmd: Prune | Look) -> Principal:
        try:
            return self._auth.principal(cmd.token)
        except Unauthorized as exc:
            raise Unauthorized(str(exc), field="token") from None

    async def _prune(self, cmd: Prune) -> PruneResult:
        principal = self._waiter_of(cmd)
        if not is_interaction_id(cmd.interaction_id):
            return PruneResult(outcome="gone")
        restricted_to = principal.identity if principal.restricted else None
        resolved = await resolve(
            self._store,
            cmd.interaction_id,
            lambda s: decide_prune(s, reason=cmd.reason, now=self._clock.now(), restricted_to=restricted_to),
        )
        if resolved.appended is not None:
            return PruneResult(outcome="pruned")
        if resolved.kept == "absent":
            return await self._withdraw(cmd, principal.identity)
        return await self._outcome(cmd.interaction_id, resolved.state, restricted_to, "prune")

    async def look(self, cmd: Look) -> PruneResult:
        """How a sync question stands, changing nothing (a waiter whose wake may have been lost;
        docs/reliability.md#lost-wakes). Read from the stream leader: an answer acknowledged
        before the look is seen."""
        principal = self._waiter_of(cmd)
        if not is_interaction_id(cmd.interaction_id):
            return PruneResult(outcome="gone")
        restricted_to = principal.identity if principal.restricted else None
        last = await self._store.last(self._store.names.ix(cmd.interaction_id), leader=True)
        state = state_of(last)
        if state.status == "pending":
            if restricted_to is not None:
                await self._asker_only(cmd.interaction_id, restricted_to, "look at")
            return PruneResult(outcome="pending")
        return await self._outcome(cmd.interaction_id, state, restricted_to, "look at")

    async def _asker_only(self, interaction_id: str, restricted_to: str, verb: str) -> None:
        asked_event = await self._store.first(self._store.names.ix(interaction_id))
        if asked_event is None or getattr(asked_event.event, "asked_by", None) != restricted_to:
            raise Forbidden(f"only the asker may {verb} its question")

    async def _outcome(
        self, interaction_id: str, state: Interaction, restricted_to: str | None, verb: str
    ) -> PruneResult:
        """A question that is no longer pending: gone (removed, or never recorded) or answered,
        with the answer for its asker."""
        removed, answered = state.removed, state.answered
        if removed is not None:
            return PruneResult(outcome="gone", reason=removed.reason, detail=removed.detail)
        if answered is None:
            return PruneResult(outcome="gone")
        if restricted_to is not None:
            await self._asker_only(interaction_id, restricted_to, verb)
        answer = answered.answer
        if answered.sensitive:
            raw = await self._store.get_secret(answered.interaction_id, answered.secret_ref)
            answer = None if raw is None else msgspec.json.decode(raw)
        return PruneResult(
            outcome="answered",
            answer=answer,
            answered_at=answered.answered_at.isoformat(),
            sensitive=answered.sensitive,
            answered_by=answered.answered_by,
            params=answered.params,
        )

    async def _withdraw(self, cmd: Prune, by: str) -> PruneResult:
        """A prune that overtook its ask: record that ``by`` withdraws the id (on the withdrawal
        subject, never the question's), then look again — an ask of ``by`` that landed meanwhile
        is removed. Together with ``_withdrawn_by`` after an ask's append, one of the two sees the
        other, so a cancelled asker never leaves an orphan question; and since a withdrawal
        binds only its author, nobody pre-empts another identity's question by guessing its id."""
        event = withdrawal(cmd.interaction_id, by=by, reason=cmd.reason, now=self._clock.now())
        await self._store.append(
            self._store.names.withdrawn(cmd.interaction_id),
            event,
            msg_id=f"withdrawn-{cmd.interaction_id}-{uuid.uuid4().hex}",
            expected_seq=None,
        )
        resolved = await resolve(
            self._store,
            cmd.interaction_id,
            lambda s: decide_withdrawn(s, by=by, reason=cmd.reason, now=self._clock.now()),
        )
        return PruneResult(outcome="pruned" if resolved.appended is not None else "gone")

    async def _unless_withdrawn(self, event: InteractionAsked, slots: Admitter) -> None:
        """Just recorded: if its asker's prune overtook it (before or while it was appended),
        remove it again and refuse."""
        if not await self._withdrawn_by(event.interaction_id, event.asked_by):
            return
        await resolve(
            self._store,
            event.interaction_id,
            lambda s: decide_withdrawn(s, by=event.asked_by, reason="cancelled", now=self._clock.now()),
        )
        await slots.release(event.interaction_id)
        raise BadInput("interaction_id is already in use", field="interaction_id")

    async def _withdrawn_by(self, interaction_id: str, identity: str) -> bool:
        """Did ``identity`` withdraw this id (its prune overtook this ask)?"""
        last = await self._store.last(self._store.names.withdrawn(interaction_id), leader=True)
        return last is not None and isinstance(last.event, InteractionWithdrawn) and last.event.by == identity


def _accepted(event: InteractionAsked) -> Accepted:
    return Accepted(
        interaction_id=event.interaction_id,
        group_id=event.group_id,
        timeout_at=event.timeout_at.isoformat(),
    )
