"""One execution of a flow driven to its next outcome (docs/parks.md): it returns, raises, is
stopped (cancelled or superseded), or every live branch waits on a park. ``layby.worker`` records
what it reaches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import msgspec
import nats.errors
import nats.js.errors

from layby.runs import RunContext, bind, unbind
from layby_contracts.errors import Conflict, RunCancelledError, Transient

Flow = Callable[[Any], Coroutine[Any, Any, Any]]


class Finished(msgspec.Struct, frozen=True):
    result: Any


class Parked(msgspec.Struct, frozen=True):
    pass


class Stopped(msgspec.Struct, frozen=True):
    """The run was cancelled, or another execution moved it on: record nothing, drop the message."""

    why: Literal["cancelled", "superseded"]


class Raised(msgspec.Struct, frozen=True):
    error: str
    transient: bool = False
    """Layby was unavailable (not the flow's fault): retried, never counted against the flow."""
    final: bool = False
    """Retrying cannot help (the outcome itself was refused): fail the run now."""


Outcome = Finished | Parked | Raised | Stopped


async def drive(fn: Flow, ctx: RunContext, input: Any) -> Outcome:
    """Execute ``fn(input)`` once under ``ctx`` until it returns, raises, or parks."""
    token = bind(ctx)
    try:
        task: asyncio.Task[Any] = asyncio.create_task(fn(input))
    finally:
        unbind(token)
    while True:
        changed = asyncio.create_task(ctx.changed.wait())
        try:
            await asyncio.wait({task, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if task.done():
            break
        ctx.changed.clear()
        await ctx.settle()
        if task.done():
            break
        if ctx.changed.is_set():
            continue  # another ask parked while settling: settle again
        # Every live branch of the flow waits on a park: end this execution at the park.
        task.cancel()
        await asyncio.wait({task}, timeout=10)
        return Parked()
    if task.cancelled():
        return Raised("the flow was cancelled")
    exc = task.exception()
    if isinstance(exc, RunCancelledError):
        return Stopped("cancelled")
    if isinstance(exc, Conflict):
        return Stopped("superseded")
    if exc is not None:
        transient = isinstance(exc, Transient | nats.errors.Error | nats.js.errors.Error)
        return Raised(f"{type(exc).__name__}: {exc}", transient=transient)
    return Finished(task.result())
