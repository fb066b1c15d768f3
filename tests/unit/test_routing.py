"""Routing a question (docs/routing.md): quorum, veto, escalation, reminders and delegation,
decided by the ask service's rules and the answer door on the in-memory event store with a manual
clock. Given a question with a routing policy, when people decide or time passes, then the log
holds exactly the steps the rules say. The same runs on real NATS and PostgreSQL in
tests/integration/test_routing_e2e.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import msgspec
import pytest

from layby_contracts.errors import BadInput, Conflict, CrossIdentityAudienceError, Forbidden
from layby_contracts.events import (
    EscalationStep,
    InteractionAnswered,
    InteractionAsked,
    InteractionRouted,
    Routing,
)
from layby_domain.formats.review import arguments_sha256
from layby_domain.history import history_of
from layby_domain.interaction import ALREADY_ANSWERED, decide_answer, decide_delegate, decide_route
from layby_domain.routing import ALREADY_VOTED, HANDED_ON, NOT_A_VOTER, next_due_at
from layby_server.write.resolve import read_state, resolve
from layby_services.door.routes.answer import submit_answer
from tests.unit.test_service_rules import ALICE, BOB, OPERATOR, T0, World

pytestmark = pytest.mark.unit

CAROL, DANA = "carol-token-0123456789abcd", "dana-token-0123456789abcde"
TOKENS = f"{OPERATOR}:ops:operator,{ALICE}:alice:user,{BOB}:bob:user,{CAROL}:carol:user,{DANA}:dana:user"
TOKEN_OF = {"ops": OPERATOR, "alice": ALICE, "bob": BOB, "carol": CAROL, "dana": DANA}


class Routed(World):
    """A world with four people and an operator; questions asked by the operator."""

    def __init__(self) -> None:
        super().__init__(tokens=TOKENS)

    async def ask_routed(self, routing: Routing, **fields: Any) -> str:
        return await self.ask(token=OPERATOR, routing=routing, **fields)

    async def decide(self, who: str, interaction_id: str, answer: Any) -> Any:
        return await submit_answer(self.door, self.auth.principal(TOKEN_OF[who]), interaction_id, answer)

    async def last(self, interaction_id: str) -> Any:
        stored = await self.store.last(self.store.names.ix(interaction_id))
        assert stored is not None
        return stored.event

    async def sweep(self, interaction_id: str) -> Any:
        resolved = await resolve(self.store, interaction_id, lambda s: decide_route(s, now=self.clock.now()))
        return resolved.appended

    async def state(self, interaction_id: str) -> Any:
        return await read_state(self.store, self.store.names.ix(interaction_id))


TWO_OF_THREE = Routing(voters=["alice", "bob", "carol"], required=2)


# --- quorum -------------------------------------------------------------------------------------


async def test_a_quorum_resolves_when_the_required_number_of_voters_agree() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    first = await world.decide("alice", ix, True)
    assert (first.status, first.votes, first.required) == ("voted", 1, 2)
    assert isinstance(await world.last(ix), InteractionRouted)
    second = await world.decide("bob", ix, True)
    assert second.status == "answered"
    answered = await world.last(ix)
    assert isinstance(answered, InteractionAnswered)
    assert answered.answer is True
    assert [(v.by, v.answer) for v in answered.votes or []] == [("alice", True), ("bob", True)]


async def test_a_second_vote_by_the_same_person_is_refused_and_records_nothing() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    await world.decide("alice", ix, True)
    before = await world.store.last(world.store.names.ix(ix))
    with pytest.raises(Conflict) as caught:
        await world.decide("alice", ix, True)
    assert caught.value.message == ALREADY_VOTED
    after = await world.store.last(world.store.names.ix(ix))
    assert before is not None and after is not None and after.seq == before.seq


async def test_a_no_vetoes_the_quorum_at_once() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    await world.decide("alice", ix, True)
    vetoed = await world.decide("bob", ix, False)
    assert vetoed.status == "answered"
    answered = await world.last(ix)
    assert isinstance(answered, InteractionAnswered)
    assert answered.answer is False
    assert answered.answered_by == "bob"


async def test_without_veto_a_no_is_one_vote_among_others() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(voters=["alice", "bob", "carol"], required=2, veto=False))
    assert (await world.decide("alice", ix, False)).status == "voted"
    assert (await world.decide("bob", ix, True)).status == "voted"
    assert (await world.decide("carol", ix, True)).status == "answered"
    answered = await world.last(ix)
    assert answered.answer is True
    assert len(answered.votes) == 3


async def test_a_vote_after_the_decision_is_already_answered() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    await world.decide("alice", ix, True)
    await world.decide("bob", ix, True)
    with pytest.raises(Conflict) as caught:
        await world.decide("carol", ix, True)
    assert caught.value.message == ALREADY_ANSWERED


async def test_only_the_named_voters_decide_even_an_operator_is_refused() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    for who in ("ops", "dana"):
        with pytest.raises(Forbidden) as caught:
            await world.decide(who, ix, True)
        assert caught.value.message == NOT_A_VOTER


async def test_a_quorum_of_reviews_counts_accepts_of_the_same_proposal() -> None:
    world = Routed()
    ix = await world.ask_routed(
        TWO_OF_THREE, answer_format="review", action={"name": "refund", "arguments": {"amount": 5}}
    )
    digest = arguments_sha256({"amount": 5})
    assert (
        await world.decide("alice", ix, {"decision": "accept", "arguments_sha256": digest})
    ).status == "voted"
    done = await world.decide("carol", ix, {"decision": "accept", "arguments_sha256": digest})
    assert done.status == "answered"
    answered = await world.last(ix)
    assert answered.answer["decision"] == "accept"
    assert [v.by for v in answered.votes] == ["alice", "carol"]


async def test_a_review_reject_vetoes() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE, answer_format="review", action={"name": "drop_table"})
    done = await world.decide("bob", ix, {"decision": "reject", "reason": "no"})
    assert done.status == "answered"
    assert (await world.last(ix)).answer == {"decision": "reject", "reason": "no"}


async def test_racing_votes_that_complete_the_quorum_record_one_decision() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    await world.decide("alice", ix, True)
    results = await asyncio.gather(
        world.decide("bob", ix, True), world.decide("carol", ix, True), return_exceptions=True
    )
    kinds = sorted(type(r).__name__ for r in results)
    assert kinds == ["AnsweredData", "Conflict"]
    answered = await world.last(ix)
    assert isinstance(answered, InteractionAnswered)
    assert len(answered.votes) == 2


# --- escalation and reminders -------------------------------------------------------------------


async def test_an_escalation_fires_at_its_boundary_and_once() -> None:
    world = Routed()
    ix = await world.ask_routed(
        Routing(escalate=[EscalationStep(after=60, to=["carol"])]), audience="alice", timeout=600
    )
    world.clock.advance(59.999)
    assert await world.sweep(ix) is None
    world.clock.advance(0.001)
    step = await world.sweep(ix)
    assert isinstance(step, InteractionRouted)
    assert (step.step, step.progress.offered, step.progress.escalated) == ("escalated", ["carol"], 1)
    assert await world.sweep(ix) is None  # taken: a second pass (another replica) finds nothing due


async def test_two_sweepers_racing_take_an_escalation_once() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(escalate=[EscalationStep(after=60, to=["carol"])]), timeout=600)
    world.clock.advance(61)
    taken = await asyncio.gather(world.sweep(ix), world.sweep(ix))
    assert sum(isinstance(t, InteractionRouted) for t in taken) == 1


async def test_an_escalated_person_may_decide_and_was_not_before() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(escalate=[EscalationStep(after=60, to=["carol"])]), audience="alice")
    with pytest.raises(Forbidden):
        await world.decide("carol", ix, True)
    world.clock.advance(60)
    await world.sweep(ix)
    assert (await world.decide("carol", ix, True)).status == "answered"
    answered = await world.last(ix)
    assert answered.answered_by == "carol"
    assert answered.offered == ["carol"]


async def test_escalation_adds_voters_to_a_named_quorum() -> None:
    world = Routed()
    ix = await world.ask_routed(
        Routing(voters=["alice", "bob"], required=2, escalate=[EscalationStep(after=30, to=["dana"])])
    )
    await world.decide("alice", ix, True)
    world.clock.advance(30)
    escalated = await world.sweep(ix)
    assert escalated.progress.votes[0].by == "alice"  # the votes carry over every step
    assert (await world.decide("dana", ix, True)).status == "answered"


async def test_reminders_come_every_interval_up_to_their_number() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(remind_every=30, reminders=2), timeout=600)
    asked = (await world.state(ix)).asked
    assert next_due_at(asked, None) == T0 + timedelta(seconds=30)
    steps = []
    for _ in range(4):
        world.clock.advance(30)
        steps.append(await world.sweep(ix))
    assert [s.step if s else None for s in steps] == ["reminded", "reminded", None, None]
    assert steps[1].next_at is None


async def test_no_step_is_due_past_the_question_s_deadline() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(remind_every=50), timeout=100)
    asked = (await world.state(ix)).asked
    first = next_due_at(asked, None)
    assert first == T0 + timedelta(seconds=50)
    world.clock.advance(50)
    step = await world.sweep(ix)
    assert step.next_at is None  # the next would be at the deadline: never


async def test_a_decided_question_takes_no_more_steps() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(remind_every=30), audience="alice", timeout=600)
    await world.decide("alice", ix, True)
    world.clock.advance(30)
    assert await world.sweep(ix) is None


# --- delegation ---------------------------------------------------------------------------------


async def test_a_delegated_question_is_decided_by_the_delegate_and_no_longer_by_the_delegator() -> None:
    world = Routed()
    ix = await world.ask(token=OPERATOR, audience="alice")
    resolved = await resolve(
        world.store,
        ix,
        lambda s: decide_delegate(
            s, by="alice", restricted=True, to="bob", note="on leave", now=world.clock.now()
        ),
    )
    assert isinstance(resolved.appended, InteractionRouted)
    with pytest.raises(Forbidden) as caught:
        await world.decide("alice", ix, True)
    assert caught.value.message == HANDED_ON
    assert (await world.decide("bob", ix, True)).status == "answered"
    answered = await world.last(ix)
    assert (answered.answered_by, answered.offered) == ("bob", ["bob"])


async def test_a_delegation_is_refused_to_oneself_to_a_decider_after_voting_and_by_outsiders() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)

    async def delegate(by: str, to: Any, *, restricted: bool = True) -> Any:
        return await resolve(
            world.store,
            ix,
            lambda s: decide_delegate(
                s, by=by, restricted=restricted, to=to, note=None, now=world.clock.now()
            ),
        )

    with pytest.raises(BadInput) as caught:
        await delegate("alice", "alice")
    assert caught.value.field == "to"
    with pytest.raises(BadInput) as caught:
        await delegate("alice", " ")
    assert caught.value.field == "to"
    with pytest.raises(Conflict):
        await delegate("alice", "bob")  # bob decides it already
    with pytest.raises(Forbidden):
        await delegate("dana", "alice")  # dana does not decide it
    await world.decide("alice", ix, True)
    with pytest.raises(Conflict):
        await delegate("alice", "dana")  # a vote is not handed on


# --- the audit trail ----------------------------------------------------------------------------


async def test_the_history_shows_every_vote_escalation_reminder_and_delegation() -> None:
    world = Routed()
    ix = await world.ask_routed(
        Routing(
            voters=["alice", "bob"],
            required=2,
            escalate=[EscalationStep(after=10, to=["carol"])],
            remind_every=20,
            reminders=1,
        ),
        timeout=600,
    )
    seen: list[tuple[int, Any]] = []

    async def note() -> None:
        stored = await world.store.last(world.store.names.ix(ix))
        seen.append((stored.seq, stored.event))

    await note()
    await world.decide("alice", ix, True)
    await note()
    world.clock.advance(10)
    await world.sweep(ix)
    await note()
    await resolve(
        world.store,
        ix,
        lambda s: decide_delegate(s, by="bob", restricted=True, to="dana", note=None, now=world.clock.now()),
    )
    await note()
    world.clock.advance(10)
    await world.sweep(ix)
    await note()
    await world.decide("dana", ix, True)
    await note()
    entries = history_of(seen)
    assert [(e.kind, e.by) for e in entries] == [
        ("asked", "ops"),
        ("voted", "alice"),
        ("escalated", "system:routing"),
        ("delegated", "bob"),
        ("reminded", "system:routing"),
        ("answered", "dana"),
    ]
    assert entries[2].to == ["carol"]
    assert entries[3].to == ["dana"]
    assert entries[-1].votes == 2


# --- the ask's rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("routing", "fields", "field"),
    [
        ({"required": 0}, {}, "routing.required"),
        ({"required": 3, "voters": ["alice", "bob"]}, {}, "routing.required"),
        ({"voters": ["alice", "alice"]}, {}, "routing.voters[1]"),
        ({"voters": []}, {}, "routing.voters"),
        ({"voters": [" "]}, {}, "routing.voters[0]"),
        (
            {"escalate": [{"after": 60, "to": ["a"]}, {"after": 30, "to": ["b"]}]},
            {},
            "routing.escalate[1].after",
        ),
        ({"escalate": [{"after": 600, "to": ["a"]}]}, {"timeout": 600}, "routing.escalate[0].after"),
        ({"escalate": [{"after": 60}]}, {}, "routing.escalate[0]"),
        ({"escalate": [{"after": 60, "recipient": "x"}]}, {}, "routing.escalate[0].recipient"),
        ({"escalate": [{"after": 60, "channel": "nope"}]}, {}, "routing.escalate[0].channel"),
        ({"remind_every": 0.5}, {}, "routing.remind_every"),
        ({"remind_every": 60, "reminders": 0}, {}, "routing.reminders"),
        ({"required": 2}, {"sensitive": True}, "routing.required"),
        (
            {"required": 2},
            {"answer_format": "external", "link_url": "https://x.example/{callback_url}"},
            "routing.required",
        ),
    ],
)
async def test_a_routing_the_rules_refuse_names_its_field_and_records_nothing(
    routing: dict[str, Any], fields: dict[str, Any], field: str
) -> None:
    world = Routed()
    with pytest.raises(BadInput) as caught:
        await world.ask(token=OPERATOR, routing=msgspec.convert(routing, Routing), **fields)
    assert caught.value.field == field


async def test_a_user_identity_may_route_only_to_itself() -> None:
    world = Routed()
    with pytest.raises(CrossIdentityAudienceError) as caught:
        await world.ask(token=ALICE, routing=Routing(voters=["alice", "bob"], required=2))
    assert caught.value.field == "routing.voters"
    with pytest.raises(CrossIdentityAudienceError) as caught:
        await world.ask(token=ALICE, routing=Routing(escalate=[EscalationStep(after=5, to=["bob"])]))
    assert caught.value.field == "routing.escalate[0].to"


async def test_the_recorded_question_carries_its_routing() -> None:
    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    asked = (await world.state(ix)).asked
    assert isinstance(asked, InteractionAsked)
    assert asked.routing == TWO_OF_THREE


# --- what a vote costs ----------------------------------------------------------------------------


async def test_the_door_keeps_the_latest_routing_step_and_forgets_it_when_the_question_ends() -> None:
    from layby_server.store.eventstore import Stored
    from layby_services.door.cache import AskedCache

    world = Routed()
    ix = await world.ask_routed(TWO_OF_THREE)
    asked = await world.store.first(world.store.names.ix(ix))
    await world.decide("alice", ix, True)
    step = await world.store.last(world.store.names.ix(ix))
    cache = AskedCache()
    cache.observe([asked, step])
    cache.observe([Stored(seq=step.seq - 1, event=step.event)])  # an older step seen late: kept out
    assert cache.routed(ix) is step
    answered = await world.decide("bob", ix, True)
    assert answered.status == "answered"
    cache.observe([await world.store.last(world.store.names.ix(ix))])
    assert cache.get(ix) is None and cache.routed(ix) is None


async def test_a_vote_decided_again_after_a_lost_race_reads_only_the_last_event() -> None:
    world = Routed()
    ix = await world.ask_routed(Routing(voters=["alice", "bob", "carol"], required=3))
    stale = await world.state(ix)  # as a cache holds it, before the first vote
    await world.decide("alice", ix, True)
    firsts = 0
    real_first = world.store.first

    async def counting_first(subject: str) -> Any:
        nonlocal firsts
        firsts += 1
        return await real_first(subject)

    world.store.first = counting_first  # type: ignore[method-assign]
    decided = await resolve(
        world.store,
        ix,
        lambda s: decide_answer(s, by="bob", restricted=True, answer=True, now=world.clock.now()),
        seed=stale,
        trusted=False,
    )
    assert isinstance(decided.appended, InteractionRouted)
    assert [v.by for v in decided.appended.progress.votes] == ["alice", "bob"]
    assert firsts == 0  # the asked event came with the stale state; only the last was read
