"""Pure rules of async parks: the wait arguments, retention parsing, stable call ids, the driver."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from layby.runs import RunContext, RunInfo, bind, unbind
from layby.worker import Finished, Parked, Raised, drive
from layby_contracts.errors import BadInput
from layby_contracts.events import ParkedAsk
from layby_domain.validation import call_interaction_id, check_wait, is_interaction_id
from layby_server.settings import SettingsError, load_settings


def test_expiry_at_is_normalized_to_utc() -> None:
    aware = datetime(2030, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert check_wait("async", None, aware) == datetime(2030, 1, 1, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("mode", "timeout", "expiry", "message"),
    [
        ("async", None, None, "requires expiry_at"),
        ("async", None, datetime(2030, 1, 1), "timezone-aware"),
        ("sync", None, datetime(2030, 1, 1, tzinfo=UTC), "only with mode='async'"),
        ("async", 5.0, datetime(2030, 1, 1, tzinfo=UTC), "mutually exclusive"),
        ("later", None, None, "mode must be"),
    ],
)
def test_wait_rules_name_the_field(mode: str, timeout: float | None, expiry: Any, message: str) -> None:
    with pytest.raises(BadInput, match=message) as info:
        check_wait(mode, timeout, expiry)
    assert info.value.field in {"expiry_at", "mode"}


def test_call_ids_are_stable_per_run_and_call_and_valid_interaction_ids() -> None:
    run = str(uuid.uuid4())
    ids = {call_interaction_id(run, call) for call in range(100)}
    assert len(ids) == 100
    assert all(is_interaction_id(i) for i in ids)
    assert call_interaction_id(run, 3) == call_interaction_id(run, 3)
    assert call_interaction_id(run, 3) != call_interaction_id(str(uuid.uuid4()), 3)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("forever", None), ("", None), ("3600", 3600.0), ("90m", 5400.0), ("12h", 43200.0), ("30d", 2592000.0)],
)
def test_checkpoint_retention_accepts_seconds_durations_and_forever(raw: str, seconds: float | None) -> None:
    assert load_settings({"LAYBY_CHECKPOINT_RETENTION": raw}).checkpoint_retention_seconds == seconds


@pytest.mark.parametrize("raw", ["-1d", "0", "soon", "inf", "nan"])
def test_a_bad_checkpoint_retention_fails_start_up_naming_the_variable(raw: str) -> None:
    with pytest.raises(SettingsError, match="LAYBY_CHECKPOINT_RETENTION"):
        load_settings({"LAYBY_CHECKPOINT_RETENTION": raw})


def _ctx() -> RunContext:
    info = RunInfo(run_id=str(uuid.uuid4()), flow="f", generation=0, resume_id="r:0", identity="me")
    return RunContext(info, durable=True)


async def _fake_ask(ctx: RunContext, question: str, delay: float = 0.0) -> Any:
    """What the SDK does for an async ask: record (I/O), then hand the park to the driver."""
    call = ctx.next_call()
    ctx.recording()
    try:
        await asyncio.sleep(delay)
    finally:
        ctx.recorded()
    ask = ParkedAsk(
        interaction_id=call_interaction_id(ctx.info.run_id, call),
        call=call,
        question=question,
        expiry_at=datetime(2030, 1, 1, tzinfo=UTC),
    )
    return await ctx.suspend(ask)


async def test_asks_raised_together_form_one_park_even_when_they_record_at_different_speeds() -> None:
    ctx = _ctx()

    async def flow(_: Any) -> Any:
        return await asyncio.gather(
            _fake_ask(ctx, "A", 0.05), _fake_ask(ctx, "B", 0.0), _fake_ask(ctx, "C", 0.01)
        )

    outcome = await drive(flow, ctx, None)
    assert isinstance(outcome, Parked)
    assert sorted(a.question for a in ctx.parked) == ["A", "B", "C"]


async def test_the_driver_reports_a_return_and_a_raise() -> None:
    async def ok(value: Any) -> Any:
        return value * 2

    async def boom(_: Any) -> Any:
        raise KeyError("x")

    assert await drive(ok, _ctx(), 21) == Finished(42)
    raised = await drive(boom, _ctx(), None)
    assert isinstance(raised, Raised) and raised.error == "KeyError: 'x'"


async def test_a_parked_execution_is_ended_at_the_park_and_runs_no_code_after_it() -> None:
    ctx = _ctx()
    after: list[str] = []

    async def flow(_: Any) -> Any:
        await _fake_ask(ctx, "A")
        after.append("ran")

    token = bind(None)
    try:
        assert isinstance(await drive(flow, ctx, None), Parked)
    finally:
        unbind(token)
    assert after == []


async def test_a_flow_failing_because_layby_is_unavailable_is_not_counted_against_it() -> None:
    from layby_contracts.errors import Unavailable

    async def down(_: Any) -> Any:
        raise Unavailable("no ask service answers")

    async def broken(_: Any) -> Any:
        raise ConnectionResetError("the flow's own dependency")

    assert (await drive(down, _ctx(), None)).transient is True  # type: ignore[union-attr]
    assert (await drive(broken, _ctx(), None)).transient is False  # type: ignore[union-attr]
