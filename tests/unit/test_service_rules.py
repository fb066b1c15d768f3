"""The ask service's and the answer door's rules on the in-memory event store with a manual
clock: what is recorded, who may act, and how a race is decided (docs/asking.md,
docs/doors/answer.md, docs/aggregates/interaction.md). The same rules run against real NATS
and PostgreSQL in tests/integration."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from layby.ids import new_interaction_id
from layby_contracts.commands import Accepted, Ask, Prune, PruneResult
from layby_contracts.errors import BadInput, Conflict, Forbidden, ParkExpiryExceedsRetentionError
from layby_contracts.events import InteractionAnswered, InteractionAsked, InteractionRemoved
from layby_domain.clock import ManualClock
from layby_domain.interaction import withdrawal
from layby_server.auth import Authenticator
from layby_server.settings import load_settings
from layby_server.store.memstore import MemoryEventStore
from layby_services.ask.admission import CALLER_POOL, Admitter
from layby_services.ask.handlers import AskHandlers
from layby_services.door.deps import DoorState
from layby_services.door.routes.answer import submit_answer
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
OPERATOR, ALICE, BOB = "op-token-0123456789abcdef", "alice-token-0123456789abcd", "bob-token-0123456789abcdef"
TOKENS = f"{OPERATOR}:ops:operator,{ALICE}:alice:user,{BOB}:bob:user"


class World:
    def __init__(self, tokens: str = TOKENS, **settings: Any) -> None:
        self.clock = ManualClock(T0)
        self.settings = load_settings({}, api_tokens=tokens, max_concurrent=None, **settings)
        self.store = MemoryEventStore(self.settings.names, clock=self.clock)
        self.auth = Authenticator(tokens)
        admitter = Admitter(None, cap=None, clock=self.clock, namespace="t")  # type: ignore[arg-type]
        callers = Admitter(None, cap=None, clock=self.clock, namespace="t", table=CALLER_POOL)  # type: ignore[arg-type]
        self.ask_service = AskHandlers(
            self.settings,
            self.store,  # type: ignore[arg-type]
            admitter,
            self.auth,
            self.clock,
            caller_admitter=callers,
        )
        self.door = DoorState(self.settings, self.store, None, self.auth, self.clock)  # type: ignore[arg-type]

    async def ask(self, token: str = ALICE, **fields: Any) -> str:
        interaction_id = fields.pop("interaction_id", new_interaction_id())
        fields.setdefault("question", "Deploy?")
        fields.setdefault("answer_format", "confirm")
        await self.ask_service.ask(Ask(token=token, interaction_id=interaction_id, **fields))
        return interaction_id

    async def withdraw(self, interaction_id: str, *, by: str) -> None:
        """``by``'s prune of an id its ask has not recorded: the withdrawal on the log."""
        await self.store.append(
            self.store.names.withdrawn(interaction_id),
            withdrawal(interaction_id, by=by, reason="cancelled", now=T0),
            msg_id=f"w-{interaction_id}",
            expected_seq=None,
        )

    async def events(self, interaction_id: str) -> list[Any]:
        first = await self.store.first(self.store.names.ix(interaction_id))
        last = await self.store.last(self.store.names.ix(interaction_id))
        return [s.event for s in {first.seq: first, last.seq: last}.values()] if first and last else []


async def test_an_ask_is_recorded_as_the_token_s_identity_with_its_deadline() -> None:
    """The Asked event names the asker and its deadline on the service's clock."""
    world = World()
    ix = await world.ask(timeout=120)
    (asked,) = await world.events(ix)
    assert isinstance(asked, InteractionAsked)
    assert (asked.asked_by, asked.audience, asked.timeout_at) == (
        "alice",
        "alice",
        T0 + timedelta(seconds=120),
    )


async def test_a_restricted_identity_cannot_address_someone_else() -> None:
    """A user's question for another identity is refused naming audience; nothing is stored."""
    world = World()
    with pytest.raises(Forbidden) as caught:
        await world.ask(audience="bob", interaction_id=(ix := new_interaction_id()))
    assert caught.value.field == "audience"
    assert await world.events(ix) == []


async def test_a_park_beyond_the_checkpoint_retention_is_refused() -> None:
    """expiry_at past now + LAYBY_CHECKPOINT_RETENTION is refused naming expiry_at."""
    world = World(checkpoint_retention_seconds=3600.0)
    with pytest.raises(ParkExpiryExceedsRetentionError) as caught:
        world.ask_service._check_retention("ix", T0 + timedelta(hours=2))
    assert caught.value.field == "expiry_at"
    world.ask_service._check_retention("ix", T0 + timedelta(minutes=30))


async def test_a_prune_before_the_ask_leaves_a_tombstone_the_ask_then_meets() -> None:
    """A cancelled asker's prune that arrives first makes the late ask fail: no orphan question."""
    world = World()
    ix = new_interaction_id()
    result = await world.ask_service.prune(Prune(token=ALICE, interaction_id=ix, reason="cancelled"))
    assert result == PruneResult(outcome="gone")
    with pytest.raises(BadInput, match="interaction_id is already in use"):
        await world.ask(interaction_id=ix)


async def test_a_guessed_id_pruned_by_someone_else_does_not_stop_the_owners_ask() -> None:
    """bob's prune of an id alice has not asked yet is accepted as "gone" but binds only bob:
    alice's ask of that id is recorded (no side door through guessable park ids)."""
    world = World()
    ix = new_interaction_id()
    assert await world.ask_service.prune(Prune(token=BOB, interaction_id=ix)) == PruneResult(outcome="gone")
    assert await world.ask(interaction_id=ix) == ix
    (asked,) = await world.events(ix)
    assert isinstance(asked, InteractionAsked)


async def test_an_ask_overtaken_by_its_own_prune_is_removed_again() -> None:
    """The prune's withdrawal lands between the ask's append and its check: the ask removes its
    question again and is refused, so no orphan question waits for a caller that is gone."""
    world = World()
    ix = new_interaction_id()
    asked = interaction_asked(
        ix,
        T0,
        question="Deploy?",
        answer_format="confirm",
        timeout_at=T0 + timedelta(minutes=5),
        asked_by="alice",
    )
    await world.store.append(world.store.names.ix(ix), asked, msg_id="a", expected_seq=0)
    await world.withdraw(ix, by="alice")
    with pytest.raises(BadInput, match="interaction_id is already in use"):
        await world.ask_service._unless_withdrawn(asked, world.ask_service._admitter)
    assert isinstance((await world.events(ix))[-1], InteractionRemoved)


async def test_an_ask_whose_prune_came_first_is_removed_at_once_and_refused() -> None:
    """The withdrawal is on the log before the ask arrives: the ask's one check, after its
    append, finds it, so the question is removed as cancelled and the ask refused."""
    world = World()
    ix = new_interaction_id()
    await world.withdraw(ix, by="alice")
    with pytest.raises(BadInput, match="interaction_id is already in use"):
        await world.ask(ALICE, interaction_id=ix)
    events = await world.events(ix)
    assert [type(e) for e in events] == [InteractionAsked, InteractionRemoved]
    assert events[-1].reason == "cancelled"


async def test_only_the_asker_prunes_its_question() -> None:
    """Another restricted identity's prune is refused; the asker's removes the question."""
    world = World()
    ix = await world.ask()
    with pytest.raises(Forbidden, match="only the asker may prune its question"):
        await world.ask_service.prune(Prune(token=BOB, interaction_id=ix))
    assert await world.ask_service.prune(Prune(token=ALICE, interaction_id=ix)) == PruneResult(
        outcome="pruned"
    )
    events = await world.events(ix)
    assert isinstance(events[-1], InteractionRemoved)
    assert events[-1].reason == "timeout"


async def test_racing_answers_record_one_and_the_other_gets_conflict() -> None:
    """Two answers at once: the log keeps the first, the second is told it was already answered."""
    world = World()
    ix = await world.ask(audience=None, token=OPERATOR)
    ops = world.auth.principal(OPERATOR)
    results = await asyncio.gather(
        submit_answer(world.door, ops, ix, True),
        submit_answer(world.door, ops, ix, False),
        return_exceptions=True,
    )
    assert sorted(type(r).__name__ for r in results) == ["AnsweredData", "Conflict"]
    conflict = next(r for r in results if isinstance(r, Conflict))
    assert str(conflict) == "Interaction already answered"
    answered = (await world.events(ix))[-1]
    assert isinstance(answered, InteractionAnswered)
    assert answered.answer == (not isinstance(results[0], Conflict))


async def test_an_answer_after_a_removal_is_not_found() -> None:
    """A pruned question answers the uniform 404 at the answer door."""
    world = World()
    ix = await world.ask()
    await world.ask_service.prune(Prune(token=ALICE, interaction_id=ix))
    with pytest.raises(Exception, match="Interaction not found"):
        await submit_answer(world.door, world.auth.principal(ALICE), ix, True)


async def test_the_ask_replies_accepted_with_the_recorded_deadline() -> None:
    """The Accepted reply carries the id, the group and the deadline the log recorded."""
    world = World()
    ix = new_interaction_id()
    reply = await world.ask_service.ask(
        Ask(
            token=ALICE, interaction_id=ix, question="Ship?", answer_format="text", group_id="g-1", timeout=60
        )
    )
    assert reply == Accepted(
        interaction_id=ix, group_id="g-1", timeout_at=(T0 + timedelta(seconds=60)).isoformat()
    )
