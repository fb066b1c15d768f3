"""The run context: what an ``ask_user(mode="async")`` needs to park (docs/aggregates/run.md#parking).

A flow executed by ``layby.Worker`` runs with a ``RunContext`` bound in a context variable.
Its async asks are numbered in call order; on a resume the flow is executed again from the
start and an ask whose call already resolved returns that resolution at once (the replay model
of durable-execution engines). The first unresolved asks of an execution form one park.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from datetime import datetime
from typing import Any

import msgspec

from layby.errors import RunRequiredError
from layby_contracts.events import ParkedAsk, Resolution, StepResult


class Suspended(msgspec.Struct, frozen=True):
    """The suspension sentinel of an async ask (docs/aggregates/run.md#the-suspension-sentinel): the run
    parks on it."""

    interaction_id: str
    expiry_at: datetime


class RunInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a flow may read about the run executing it (``layby.current_run()``)."""

    run_id: str
    flow: str
    generation: int
    resume_id: str
    """Stable for one resume on every worker and every redelivery: key idempotent effects by it."""
    identity: str
    """The asker's identity: the run's, never the answerer's."""
    subject: str | None = None
    """The subject the run's chain parks caller asks on (docs/caller-asks.md#parks-on-the-subject)."""
    extras: dict[str, Any] | None = None
    """What the door that started the run handed it beside its input (docs/caller-asks.md#extras)."""


SETTLE_TICKS = 5


class RunContext:
    """One execution of a run by the driver (never shared between executions)."""

    def __init__(
        self,
        info: RunInfo,
        *,
        durable: bool,
        answers: dict[str, Resolution] | None = None,
        steps: dict[str, StepResult] | None = None,
        client: Any = None,
    ) -> None:
        self.info = info
        self.durable = durable
        self.answers = dict(answers or {})
        self.steps = dict(steps or {})
        """Steps recorded so far, by call index (``layby.step`` returns them on replay)."""
        self.client = client
        self.calls = 0
        self.parked: list[ParkedAsk] = []
        self.in_flight = 0
        self.changed = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def next_call(self) -> int:
        call = self.calls
        self.calls += 1
        return call

    def recording(self) -> None:
        self.in_flight += 1
        self._idle.clear()

    def recorded(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._idle.set()

    async def suspend(self, ask: ParkedAsk) -> Any:
        """Hand the parked ask to the driver; the driver ends this execution at the park."""
        self.parked.append(ask)
        self.changed.set()
        never: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        return await never

    async def settle(self) -> None:
        """Wait until no ask is being recorded and none started in the last few loop turns.

        Asks raised together (``asyncio.gather``) start in the same loop turn, so they all join
        one park; an ask raised only after further I/O parks the run on its own next time.
        """
        while True:
            await self._idle.wait()
            for _ in range(SETTLE_TICKS):
                await asyncio.sleep(0)
            if self.in_flight == 0:
                return


_current: ContextVar[RunContext | None] = ContextVar("layby_run", default=None)


def current_context() -> RunContext | None:
    return _current.get()


def current_run() -> RunInfo | None:
    """The run executing the calling code, or None outside a run."""
    ctx = _current.get()
    return ctx.info if ctx is not None else None


def bind(ctx: RunContext | None) -> Any:
    return _current.set(ctx)


def unbind(token: Any) -> None:
    _current.reset(token)


def require_park_context() -> RunContext:
    """The context an async ask parks in; raises loudly, before anything is stored, without one."""
    ctx = _current.get()
    if ctx is None:
        raise RunRequiredError(
            "ask_user(mode='async') needs a resumable run: call it inside a flow executed by "
            "layby.Worker (a resuming driver with a bound identity); nothing was recorded"
        )
    if not ctx.durable:
        raise RunRequiredError(
            "ask_user(mode='async') needs a durable, cross-worker checkpointer, and this run uses the "
            "in-memory checkpointer: a run parked there could never resume on another worker. Use "
            "layby.Worker(checkpointer='postgres'); nothing was recorded"
        )
    if not ctx.info.identity:
        raise RunRequiredError(
            "ask_user(mode='async') needs a bound execution identity, and this run has none; "
            "nothing was recorded"
        )
    return ctx
