"""Durable steps: ``@layby.step`` (docs/aggregates/run.md#steps).

A flow executes from the start on every resume, so code with effects must not simply run again.
A *step* is a function whose call, inside a flow, executes once per run: its JSON result (or the
error of its last attempt) is recorded in the run's log before the flow goes on, and every later
execution of the run — on any worker, after any crash — gets the recorded value back without
calling the function::

    @layby.step(retries=3, backoff=1.0)
    async def charge(order_id: str, cents: int) -> dict:
        key = layby.current_step().key          # stable across every execution of this call
        return await payments.charge(order_id, cents, idempotency_key=key)

Steps are numbered in call order together with the run's async asks, so a flow must call them in
the same order on every execution (``NonDeterministicRunError`` otherwise). A step that raises is
retried with exponential backoff up to ``retries`` more times; the last error is recorded and
raised as ``StepFailedError`` now and on every replay. Outside a flow a step is just the function.

The one window that remains: a worker that dies after a step's effect and before its result is
recorded executes the step again on the next execution, with the same ``key`` — so pass the key
to the outside system as its idempotency key.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar, overload

import msgspec

from layby.runs import RunContext, current_context
from layby_contracts.commands import RecordStep, RunAccepted
from layby_contracts.errors import (
    BadInput,
    LaybyError,
    NonDeterministicRunError,
    StepFailedError,
    Transient,
)
from layby_contracts.events import StepResult

P = ParamSpec("P")
R = TypeVar("R")
ERROR_MAX_CHARS = 4000
RECORD_ATTEMPTS = 8


class StepInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What a running step may read about itself (``layby.current_step()``)."""

    key: str
    """``<run id>:step:<call>``: the same on every execution of this call, on every worker."""
    name: str
    call: int
    attempt: int
    """1 for the first attempt of this execution; retries count up."""


_current: ContextVar[StepInfo | None] = ContextVar("layby_step", default=None)


def current_step() -> StepInfo | None:
    """The step executing the calling code, or None outside a step (or outside a flow)."""
    return _current.get()


@overload
def step(fn: Callable[P, Awaitable[R]], /) -> Callable[P, Awaitable[R]]: ...
@overload
def step(fn: Callable[P, R], /) -> Callable[P, Awaitable[R]]: ...
@overload
def step(
    *, name: str | None = None, retries: int = 3, backoff: float = 1.0, max_backoff: float = 60.0
) -> Callable[[Callable[P, Any]], Callable[P, Awaitable[Any]]]: ...


def step(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    retries: int = 3,
    backoff: float = 1.0,
    max_backoff: float = 60.0,
) -> Any:
    """Make an async (or sync) function a durable step; see the module docstring.

    ``retries``: further attempts after a raising one (0: none). ``backoff``: seconds before the
    first retry, doubling each time (with jitter) up to ``max_backoff``. A sync function runs in a
    thread, so it never blocks the worker's other runs. The call returns an awaitable either way.
    """
    if retries < 0:
        raise BadInput("retries must be >= 0", field="retries")
    if backoff < 0 or max_backoff < 0:
        raise BadInput("backoff must be >= 0", field="backoff")

    def decorate(f: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        step_name = name or f"{f.__module__}.{f.__qualname__}"
        policy = _Policy(step_name, retries, backoff, max_backoff)

        @functools.wraps(f)
        async def run_step(*args: Any, **kwargs: Any) -> Any:
            ctx = current_context()
            if ctx is None or not ctx.durable or not ctx.info.identity:
                return await _invoke(f, args, kwargs)  # outside a flow: just the function
            return await _durable(ctx, policy, f, args, kwargs)

        return run_step

    return decorate(fn) if fn is not None else decorate


class _Policy(msgspec.Struct, frozen=True):
    name: str
    retries: int
    backoff: float
    max_backoff: float


async def _invoke(f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if asyncio.iscoroutinefunction(f):
        return await f(*args, **kwargs)
    return await asyncio.to_thread(functools.partial(f, *args, **kwargs))


def _replay(run_id: str, call: int, recorded: StepResult, name: str) -> Any:
    if recorded.name != name:
        raise NonDeterministicRunError(
            f"run {run_id} called step {name!r} at call {call}, but that call was recorded as step "
            f"{recorded.name!r}: a flow must call its steps and asks in the same order on every execution"
        )
    if recorded.error is not None:
        raise StepFailedError(f"step {name!r} failed after {recorded.attempts} attempt(s): {recorded.error}")
    return recorded.result


async def _durable(
    ctx: RunContext, policy: _Policy, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    call = ctx.next_call()
    recorded = ctx.steps.get(str(call))
    if recorded is not None:
        return _replay(ctx.info.run_id, call, recorded, policy.name)
    if str(call) in ctx.answers:
        raise NonDeterministicRunError(
            f"run {ctx.info.run_id} called step {policy.name!r} at call {call}, but that call was "
            "recorded as an ask: a flow must call its steps and asks in the same order on every execution"
        )
    ctx.recording()  # a park raised meanwhile waits for this step: it joins no half-done state
    try:
        result = await _attempts(ctx, policy, call, f, args=args, kwargs=kwargs)
        result = await _record(ctx, call, result)
    finally:
        ctx.recorded()
    ctx.steps[str(call)] = result
    return _replay(ctx.info.run_id, call, result, policy.name)


async def _attempts(
    ctx: RunContext,
    policy: _Policy,
    call: int,
    f: Callable[..., Any],
    *,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> StepResult:
    key = f"{ctx.info.run_id}:step:{call}"
    attempt = 0
    while True:
        attempt += 1
        token = _current.set(StepInfo(key=key, name=policy.name, call=call, attempt=attempt))
        try:
            value = await _invoke(f, args, kwargs)
        except (asyncio.CancelledError, LaybyError):
            raise  # the run is cancelled or superseded, or Layby refused something: not the step's failure
        except Exception as exc:  # noqa: BLE001 - any failure of the step is its outcome
            if attempt > policy.retries:
                return StepResult(
                    name=policy.name, error=f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS], attempts=attempt
                )
            pause = min(policy.backoff * 2 ** (attempt - 1), policy.max_backoff)
            await asyncio.sleep(pause * random.uniform(0.5, 1.0))  # noqa: S311 - jitter, not a secret
            continue
        finally:
            _current.reset(token)
        try:
            # What a replay will return: the value as JSON gives it back (a tuple is a list).
            plain = msgspec.json.decode(msgspec.json.encode(value))
        except (TypeError, msgspec.EncodeError) as exc:
            raise BadInput(
                f"step {policy.name!r} returned a value that is not JSON-serializable: {exc}", field="result"
            ) from None
        return StepResult(name=policy.name, result=plain, attempts=attempt)


async def _record(ctx: RunContext, call: int, result: StepResult) -> StepResult:
    """Record the step in the run's log before the flow goes on; Layby unavailable is waited out.
    Returns what the log holds for the call: ``result``, or the record of another execution of
    the run that recorded that call first (every execution goes on with the same value)."""
    client = ctx.client
    cmd = RecordStep(
        token=client.token,
        run_id=ctx.info.run_id,
        generation=ctx.info.generation,
        call=call,
        step=result,
        resume_id=ctx.info.resume_id,
    )
    for attempt in range(RECORD_ATTEMPTS):
        try:
            reply = await client.run_command(cmd)
        except Transient:
            reply = None
        if isinstance(reply, RunAccepted):
            return reply.step or result
        if isinstance(reply, LaybyError) and not isinstance(reply, Transient):
            raise reply  # cancelled, superseded by another execution, or refused outright
        await asyncio.sleep(min(0.25 * 2**attempt, 5.0))
    raise Transient(f"the step at call {call} could not be recorded: Layby is unavailable")
