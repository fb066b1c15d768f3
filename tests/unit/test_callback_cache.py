"""A callback decided on the door's asked cache gives the response the log's own reads give
(docs/doors/callback.md#what-a-callback-costs): a stale copy never turns the log's answer into a
refusal of the body."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import RequestFactory

from layby.ids import new_interaction_id, new_ticket
from layby_contracts.events import InteractionAnswered
from layby_domain.clock import ManualClock
from layby_server.auth import Authenticator
from layby_server.settings import load_settings
from layby_server.store.eventstore import Stored
from layby_server.store.memstore import MemoryEventStore
from layby_services.door.deps import DoorState
from layby_services.door.routes.callback import callback_post
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def _world(*, answered: bool) -> tuple[DoorState, str, str]:
    clock = ManualClock(T0)
    settings = load_settings(
        {}, api_tokens="t-0123456789abcdef:ops:operator", public_base_url="https://x.example"
    )
    store = MemoryEventStore(settings.names, clock=clock)
    state = DoorState(settings, store, None, Authenticator(settings.api_tokens), clock)  # type: ignore[arg-type]
    iid = new_interaction_id()
    asked = interaction_asked(
        iid,
        T0,
        question="Pay?",
        answer_format="external",
        format_payload={"url": "https://pay.example/x"},
        timeout_at=T0 + timedelta(minutes=5),
    )
    seq = await store.append(store.names.ix(iid), asked, msg_id="a", expected_seq=0)
    ticket, hashed = new_ticket()
    await store.put_ticket(hashed, iid, T0 + timedelta(minutes=5), new=True)
    state.asked.observe([Stored(seq=seq, event=asked)])  # the door saw it asked...
    if answered:  # ...but not (yet) that another door recorded an answer
        done = InteractionAnswered(
            interaction_id=iid,
            group_id="g",
            answered_by="external-callback",
            answered_at=T0,
            answer={"ok": 1},
        )
        await store.append(store.names.ix(iid), done, msg_id="b", expected_seq=seq)
    return state, iid, ticket


async def _post(state: DoorState, ticket: str, body: object) -> tuple[int, object]:
    app = Litestar()
    app.state.door = state
    request = RequestFactory(app=app).post(f"/api/interactions/callback/{ticket}", data=body)
    response = await callback_post.fn(request, ticket, state)
    return response.status_code, msgspec.json.decode(response.content)


async def test_a_stale_cache_entry_gets_the_logs_already_answered_not_a_refusal_of_the_body() -> None:
    state, _, ticket = await _world(answered=True)
    assert await _post(state, ticket, [1, 2]) == (200, {"data": {"status": "already_answered"}})


async def test_a_fresh_cache_entry_still_refuses_a_bad_body_and_records_the_good_one() -> None:
    state, iid, ticket = await _world(answered=False)
    status, _ = await _post(state, ticket, [1, 2])
    assert status == 400
    status, body = await _post(state, ticket, {"paid": True})
    assert (status, body) == (200, {"data": {"interaction_id": iid, "status": "answered"}})
    await state.drain()
