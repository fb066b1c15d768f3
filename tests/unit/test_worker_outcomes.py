"""How the worker records an execution's outcome and settles its continuation
(docs/aggregates/run.md#parking): given a flow and the ask service's reply, which command is sent
and whether the message is acked or redelivered later."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from layby.runs import current_context
from layby.settings import ClientSettings
from layby.worker import Worker
from layby_contracts.commands import Continuation, EndRun, ParkRun, RunAccepted
from layby_contracts.errors import BadInput, Conflict, Forbidden, LaybyError, RunCancelledError, Transient
from layby_contracts.events import ParkedAsk

pytestmark = pytest.mark.unit
MAX_ATTEMPTS = 3
ACK_WAIT = 7.0
ASK = ParkedAsk(interaction_id="ix-1", call=0, question="Q?", expiry_at=datetime(2030, 1, 1, tzinfo=UTC))


@dataclass
class FakeMsg:
    delivered: int = 1
    settled: list[tuple[str, float | None]] = field(default_factory=list)

    @property
    def metadata(self) -> Any:
        return SimpleNamespace(num_delivered=self.delivered)

    async def ack(self) -> None:
        self.settled.append(("ack", None))

    async def nak(self, delay: float | None = None) -> None:
        self.settled.append(("nak", delay))


@dataclass
class FakeClient:
    replies: list[RunAccepted | LaybyError]
    token: str = "tok"
    sent: list[Any] = field(default_factory=list)
    pruned: list[bytes] = field(default_factory=list)
    names: Any = field(default_factory=lambda: SimpleNamespace(cmd_prune="prune"))

    @property
    def nc(self) -> Any:
        async def request(_subject: str, body: bytes, timeout: float) -> None:
            self.pruned.append(body)

        return SimpleNamespace(request=request)

    async def run_command(self, cmd: Any) -> RunAccepted | LaybyError:
        self.sent.append(cmd)
        return self.replies.pop(0)


def accepted() -> RunAccepted:
    return RunAccepted(run_id="r", seq=1)


async def execute(
    flow: Any, *replies: RunAccepted | LaybyError, delivered: int = 1
) -> tuple[FakeMsg, FakeClient]:
    client = FakeClient(list(replies))
    settings = ClientSettings(continuation_max_attempts=MAX_ATTEMPTS, continuation_ack_wait_seconds=ACK_WAIT)
    worker = Worker(client, settings=settings)  # type: ignore[arg-type]
    msg = FakeMsg(delivered=delivered)
    cont = Continuation(run_id="r", flow="f", generation=0, resume_id="res", identity="ops", input=2)
    await worker._execute_current(msg, cont, flow, {})  # type: ignore[arg-type]
    return msg, client


async def returns(x: int) -> int:
    return x * 2


async def raises(_x: int) -> None:
    raise ValueError("boom")


async def parks(_x: int) -> None:
    ctx = current_context()
    assert ctx is not None
    await ctx.suspend(ASK)


async def parks_after_a_stray_ask(_x: int) -> int:
    ctx = current_context()
    assert ctx is not None
    ctx.parked.append(ASK)  # an ask recorded by this execution that it did not park on
    return 1


async def test_a_finished_flow_ends_the_run_with_its_result_then_acks() -> None:
    """A flow that returns is recorded as finished with its result; the continuation is acked."""
    msg, client = await execute(returns, accepted())
    assert client.sent == [
        EndRun(token="tok", run_id="r", generation=0, outcome="finished", result=4, resume_id="res")
    ]
    assert msg.settled == [("ack", None)]


async def test_a_parked_flow_records_the_park_for_the_next_generation_then_acks() -> None:
    """A flow waiting on an async ask is recorded as parked on it, as generation + 1."""
    msg, client = await execute(parks, accepted())
    assert client.sent == [ParkRun(token="tok", run_id="r", generation=1, asks=[ASK], resume_id="res")]
    assert msg.settled == [("ack", None)]


async def test_a_refused_park_fails_the_run_at_once() -> None:
    """A park refused as bad input fails the run on this attempt: the same flow parks the same way every time."""
    msg, client = await execute(parks, BadInput("too late"), accepted())
    assert client.sent[1] == EndRun(
        token="tok",
        run_id="r",
        generation=0,
        outcome="failed",
        error="the park was refused: too late",
        attempts=1,
        resume_id="res",
    )
    assert msg.settled == [("ack", None)]


async def test_a_refused_result_fails_the_run_at_once() -> None:
    """A result refused as bad input fails the run on this attempt, and the failure is recorded."""
    msg, client = await execute(returns, BadInput("too big"), accepted())
    assert client.sent[1] == EndRun(
        token="tok",
        run_id="r",
        generation=0,
        outcome="failed",
        error="the flow's result was refused: too big",
        attempts=1,
        resume_id="res",
    )
    assert msg.settled == [("ack", None)]


async def test_a_raising_flow_is_retried_with_backoff_before_its_last_attempt() -> None:
    """A flow that raises is redelivered after a growing delay, recording nothing, until its last attempt."""
    msg, client = await execute(raises, delivered=2)
    assert client.sent == []
    assert msg.settled == [("nak", 2.0)]


async def test_a_flow_that_raises_on_its_last_attempt_fails_the_run() -> None:
    """At ``continuation_max_attempts`` the run is recorded as failed with the error and the attempts."""
    msg, client = await execute(raises, accepted(), delivered=MAX_ATTEMPTS)
    assert client.sent == [
        EndRun(
            token="tok",
            run_id="r",
            generation=0,
            outcome="failed",
            error="ValueError: boom",
            attempts=MAX_ATTEMPTS,
            resume_id="res",
        )
    ]
    assert msg.settled == [("ack", None)]


async def test_layby_unavailable_to_the_flow_is_retried_and_never_counted() -> None:
    """A flow that met Layby unavailable is redelivered (delay capped at the sixth step), even past its attempts."""

    async def unavailable(_x: int) -> None:
        raise Transient("down")

    msg, client = await execute(unavailable, delivered=MAX_ATTEMPTS + 10)
    assert client.sent == []
    assert msg.settled == [("nak", 32.0)]


async def test_a_cancelled_or_superseded_flow_records_nothing_and_acks() -> None:
    """A flow stopped by a cancel (or another execution) records nothing; the message is dropped."""

    async def cancelled(_x: int) -> None:
        raise RunCancelledError("cancelled")

    msg, client = await execute(cancelled)
    assert client.sent == []
    assert msg.settled == [("ack", None)]


async def test_an_outcome_another_execution_recorded_first_is_acked_without_pruning() -> None:
    """A conflict means another execution of this resume won: its asks are ours too, nothing is pruned."""
    msg, client = await execute(parks_after_a_stray_ask, Conflict("already"))
    assert client.pruned == []
    assert msg.settled == [("ack", None)]


async def test_a_run_cancelled_while_it_ran_prunes_its_stray_asks_and_acks() -> None:
    """A run cancelled during the execution: its outcome is not recorded and its asks are pruned."""
    msg, client = await execute(parks_after_a_stray_ask, RunCancelledError("cancelled"))
    assert len(client.pruned) == 1 and b"ix-1" in client.pruned[0]
    assert msg.settled == [("ack", None)]


async def test_an_ended_run_prunes_the_asks_it_did_not_park_on() -> None:
    """A finished run's asks that no park holds are pruned before the ack."""
    msg, client = await execute(parks_after_a_stray_ask, accepted())
    assert len(client.pruned) == 1
    assert msg.settled == [("ack", None)]


async def test_a_transient_reply_to_the_outcome_raises_for_the_serve_loop_to_retry() -> None:
    """Layby unavailable while recording: the error reaches the loop (which naks), nothing is settled here."""
    with pytest.raises(Transient):
        await execute(returns, Transient("down"))


async def test_an_outcome_this_worker_may_not_record_is_left_to_another_worker() -> None:
    """A refusal (say, not allowed for the run's identity) never drops the continuation: nak after the ack wait."""
    msg, _client = await execute(returns, Forbidden("not yours"))
    assert msg.settled == [("nak", ACK_WAIT)]
