"""Slack end to end (docs/channels.md#slack): the whole system with the Slack plugin pointed at
the Slack stand-in; the stand-in plays the person, signing what it sends exactly as Slack does,
to the door's inbound webhook. Every format, sync and parked; mismatches; late replies;
retraction; a provider 429; forged and stale signatures."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

import layby
from layby.review import review
from layby.sdk import AnswerDetails, Client
from layby_contracts.channels import ChannelDeliveryError
from layby_contracts.errors import BadInput
from layby_domain.formats.review import arguments_sha256
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import eventually, finished_run, serving
from tests.integration.chat_systems import (
    SLACK_SECRETS,
    answer_in_the_inbox,
    chat_system,
    door_url,
    inbound_messages,
    slack_channel,
)
from tests.standins.slack import (
    CHANNEL,
    PERSON,
    Message,
    SlackStandin,
    serve_slack_standin,
)

pytestmark = pytest.mark.timeout(90)
FORM = {
    "type": "object",
    "required": ["service", "replicas"],
    "properties": {
        "service": {"type": "string", "enum": ["api", "web"]},
        "replicas": {"type": "integer", "title": "Replicas"},
        "canary": {"type": "boolean"},
    },
}


@pytest.fixture
async def slack(settings: Settings, store: EventStore, db: Any) -> AsyncIterator[tuple[System, SlackStandin]]:
    async with serve_slack_standin() as standin:
        channels = {"slack": slack_channel(standin, default_recipient=CHANNEL)}
        standin.target = f"{door_url(settings)}/api/channels/slack/events"
        async with chat_system(settings, channels, SLACK_SECRETS, delivery_backoff_seconds=0.02) as system:
            yield system, standin


@pytest.fixture
async def sdk(slack: tuple[System, SlackStandin]) -> Client:
    system, _ = slack
    return await system.sdk(public_base_url=system.url)


def _ask(sdk: Client, question: str, **kw: Any) -> asyncio.Task[Any]:
    return asyncio.create_task(sdk.ask_user(question, channel="slack", timeout=30, **kw))


async def _question(standin: SlackStandin, n: int = 1) -> Message:
    async def posted() -> Message | None:
        found = [m for m in standin.messages(CHANNEL) if m.bot]
        return found[n - 1] if len(found) >= n else None

    return await eventually(posted, f"question {n} posted in Slack", timeout=10)


async def _retracted(standin: SlackStandin, ts: str) -> Message:
    async def edited() -> Message | None:
        msg = standin.message(CHANNEL, ts)
        return msg if msg.edited and not msg.has_controls() else None

    return await eventually(edited, "the Slack message retracted", timeout=10)


async def test_select_buttons_answer_with_the_option_text_and_the_message_is_retracted(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    ask = _ask(
        sdk, "Region?", answer_format="select", options=["eu", "us"], reply_ids=["r1", "r2"], details=True
    )
    msg = await _question(standin)
    assert [b["text"]["text"] for b in msg.buttons()] == ["eu", "us"]
    assert all("eu" not in b["value"] and "us" not in b["value"] for b in msg.buttons())
    resp = await standin.tap(CHANNEL, msg.ts, "us")
    assert resp.status_code == 200
    got = await asyncio.wait_for(ask, 10)
    assert isinstance(got, AnswerDetails)
    assert got.answer == "us" and got.params == {"reply_id": "r2"} and got.answered_by == f"slack:{PERSON}"
    shown = await _retracted(standin, msg.ts)
    assert any("Answered" in line for line in shown.lines())


async def test_a_long_select_is_a_menu_and_a_pick_answers(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    options = [f"zone-{i}" for i in range(12)]
    ask = _ask(sdk, "Zone?", answer_format="select", options=options)
    msg = await _question(standin)
    assert msg.menus() and not msg.buttons()
    await standin.pick(CHANNEL, msg.ts, "zone-7")
    assert await asyncio.wait_for(ask, 10) == "zone-7"


async def test_confirm_yes_and_a_typed_thread_reply_answer_text(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    confirm = _ask(sdk, "Deploy?", answer_format="confirm")
    msg = await _question(standin)
    await standin.tap(CHANNEL, msg.ts, "Yes")
    assert await asyncio.wait_for(confirm, 10) is True
    text = _ask(sdk, "Why?")
    second = await _question(standin, 2)
    await standin.type_message(CHANNEL, "because it is Friday", thread_ts=second.ts)
    assert await asyncio.wait_for(text, 10) == "because it is Friday"


async def test_a_form_opens_as_a_modal_and_its_submission_answers_after_a_refusal(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    ask = _ask(sdk, "Scale", answer_format="form", schema=FORM)
    msg = await _question(standin)
    [opener] = msg.buttons()
    await standin.tap(CHANNEL, msg.ts, opener["text"]["text"])
    view = standin.view()
    assert view.view["type"] == "modal"
    refused = await standin.submit({"service": "api", "replicas": "1.5"})
    assert refused.status_code == 200 and standin.view().errors
    await standin.submit({"service": "web", "replicas": "3", "canary": True})
    assert await asyncio.wait_for(ask, 10) == {"service": "web", "replicas": 3, "canary": True}


async def test_a_mismatched_reply_gets_the_notice_in_the_thread_and_the_ask_stays_open(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    ask = _ask(sdk, "Ship?", answer_format="confirm", mismatch_notice="Please: {reason}")
    msg = await _question(standin)
    await standin.type_message(CHANNEL, "perhaps", thread_ts=msg.ts)

    async def noticed() -> list[str]:
        return [r.text for r in standin.message(CHANNEL, msg.ts).replies if r.bot]

    notices = await eventually(noticed, "the mismatch notice in the thread", timeout=10)
    assert notices == ["Please: reply yes or no"]
    assert not ask.done()
    await standin.type_message(CHANNEL, "yes", thread_ts=msg.ts)
    assert await asyncio.wait_for(ask, 10) is True


async def test_an_inbox_answer_retracts_the_slack_copy_and_a_late_tap_is_an_inbound_message(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    system, standin = slack
    ask = _ask(sdk, "Restart?", answer_format="confirm")
    msg = await _question(standin)
    [yes, _] = msg.buttons()
    _, resp = await answer_in_the_inbox(system, False)
    assert resp.status_code == 200
    assert await asyncio.wait_for(ask, 10) is False
    tap = standin.build_tap(CHANNEL, msg.ts, yes["text"]["text"])  # built before the edit removes it
    shown = await _retracted(standin, msg.ts)
    assert any("inbox" in line for line in shown.lines())
    await standin.send(tap)
    [frame] = await inbound_messages(system, 1)
    assert frame["reason"] == "late" and frame["channel"] == "slack" and frame["sender"] == PERSON


async def test_a_parked_run_resumes_on_a_slack_tap(slack: tuple[System, SlackStandin], sdk: Client) -> None:
    """Async: the run parks on a Slack question and the tap resumes it with the answer."""
    system, standin = slack
    worker = layby.Worker(sdk, settings=system.settings)

    @worker.flow("approve-refund")
    async def approve(_: Any) -> Any:
        return await layby.ask_user(
            "Approve the refund?",
            answer_format="confirm",
            channel="slack",
            mode="async",
            expiry_at=datetime.now(UTC) + timedelta(minutes=5),
        )

    async with serving(worker):
        run_id = await sdk.start_run("approve-refund", {})
        msg = await _question(standin)
        await standin.tap(CHANNEL, msg.ts, "Yes")
        assert (await finished_run(system, run_id))["result"] is True


async def test_a_provider_429_is_honoured_and_the_question_still_arrives(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    standin.fail_next("chat.postMessage", "ratelimited", status=429, retry_after=0.05)
    ask = _ask(sdk, "Again?")
    msg = await _question(standin)
    assert [c.error for c in standin.calls if c.method == "chat.postMessage"][:2] == ["ratelimited", None]
    await standin.type_message(CHANNEL, "ok", thread_ts=msg.ts)
    assert await asyncio.wait_for(ask, 10) == "ok"


async def test_forged_and_stale_signatures_are_401_and_url_verification_is_answered(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    _, standin = slack
    ask = _ask(sdk, "Sure?", answer_format="confirm")
    msg = await _question(standin)
    good = standin.build_tap(CHANNEL, msg.ts, "Yes")
    forged = {**good.headers, "X-Slack-Signature": "v0=" + "0" * 64}
    async with httpx.AsyncClient(timeout=10) as http:
        assert (await http.post(standin.target, content=good.body, headers=forged)).status_code == 401
        standin.clock.advance(-400)
        stale = standin.build_tap(CHANNEL, msg.ts, "Yes")
        standin.clock.advance(400)
        assert (await http.post(standin.target, content=stale.body, headers=stale.headers)).status_code == 401
    assert not ask.done()
    verified = await standin.verify_url("abc123")
    assert verified.status_code == 200 and verified.text == "abc123"
    await standin.send(good)
    assert await asyncio.wait_for(ask, 10) is True


async def test_slack_retrying_an_event_is_taken_once(slack: tuple[System, SlackStandin], sdk: Client) -> None:
    """Slack redelivers an event it thinks was not acknowledged, with X-Slack-Retry-Num and the
    same event_id: the redelivery is acknowledged and changes nothing."""
    system, standin = slack
    ask = _ask(sdk, "Note?")
    msg = await _question(standin)
    signed = standin.build_message(CHANNEL, "first words", thread_ts=msg.ts)
    assert (await standin.send(signed)).status_code == 200
    assert await asyncio.wait_for(ask, 10) == "first words"
    again = {**signed.headers, "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    async with httpx.AsyncClient(timeout=10) as http:
        resp = await http.post(standin.target, content=signed.body, headers=again)
    assert resp.status_code == 200
    marker = standin.build_message(CHANNEL, "after", thread_ts=msg.ts)
    await standin.send(marker)
    [first] = await inbound_messages(system, 1)
    assert first["text"] == "after"  # the retry recorded nothing


async def test_a_recipient_slack_refuses_fails_the_ask_with_the_reason_and_nothing_is_left_open(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    """A recipient the provider refuses (channel_not_found) is a permanent delivery failure: the
    asker's ask raises ChannelDeliveryError naming Slack's error, and the question is removed."""
    system, _ = slack
    with pytest.raises(ChannelDeliveryError, match="channel_not_found"):
        await sdk.ask_user("Anyone?", channel="slack", recipient="C0NOWHERE", timeout=30)

    async def listed() -> list[Any]:
        async with system.http() as http:
            items: list[Any] = (await http.get("/api/interactions")).json()["data"]["items"]
        return items

    await eventually(
        listed, "the undeliverable question gone from the inbox", until=lambda items: items == []
    )


async def test_a_form_too_large_for_a_slack_modal_is_refused_at_ask_time(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    """The plugin's own limits are checked before anything is stored, naming the schema."""
    schema = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(120)}}
    with pytest.raises(BadInput) as refused:
        await sdk.ask_user("Huge", answer_format="form", schema=schema, channel="slack", timeout=30)
    assert refused.value.field == "schema" and "slack" in refused.value.message


async def test_a_review_is_accepted_with_its_slack_button_and_edited_on_the_page_its_message_links(
    slack: tuple[System, SlackStandin], sdk: Client
) -> None:
    """docs/review.md#where-it-is-answered: Accept / Reject are the message's buttons; the edit is
    made on the review page behind the link the message carries."""
    _, standin = slack
    args = {"service": "api", "replicas": 3}
    accepted = asyncio.create_task(review("scale", args, client=sdk, channel="slack", timeout=30))
    msg = await _question(standin)
    assert [b["text"]["text"] for b in msg.buttons()] == ["Accept", "Reject"]
    await standin.send(standin.build_tap(CHANNEL, msg.ts, "Accept"))
    decided = await asyncio.wait_for(accepted, 10)
    assert (decided.decision, decided.arguments, decided.by) == ("accept", args, f"slack:{PERSON}")
    edited = asyncio.create_task(review("scale", args, client=sdk, channel="slack", timeout=30))
    second = await _question(standin, 2)
    link = next(m.group(0) for line in second.lines() if (m := re.search(r"https?://\S+/callback/\S+", line)))
    async with httpx.AsyncClient(timeout=10) as http:
        page = await http.get(link.rstrip(">|)"))
        assert page.status_code == 200
        resp = await http.post(
            link.rstrip(">|)"),
            json={
                "answer": {
                    "decision": "edit",
                    "arguments": {"service": "api", "replicas": 2},
                    "arguments_sha256": arguments_sha256(args),
                }
            },
        )
        assert resp.status_code == 200, resp.text
    decided = await asyncio.wait_for(edited, 10)
    assert (decided.decision, decided.arguments) == ("edit", {"service": "api", "replicas": 2})
