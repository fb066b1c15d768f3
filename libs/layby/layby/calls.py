"""Runs that call runs, and the generic tools on a run's subject (docs/caller-asks.md).

``await layby.call("child", kwargs)`` inside a flow starts the registered flow ``child`` as this
run's child and parks this run until the child's next outcome: its result is returned (its
failure raised as ``CallFailedError``) — or, when the child asks its caller, the reserved marker
``{"layby:caller_asks": {"run_id": ..., "asks": [entries]}}``: the question is handed up, and this
run answers it with ``resume_parked`` (or hands it further up by returning). Like an async ask,
a call has a call index and is made once; a replay returns the same value.

``list_parked()``, ``resume_parked(id, payload=...)`` and ``cancel_parked(ids)`` read and act on
the calling run's subject with the same rules as a door contract. Each is recorded as a step, so
a replayed flow gets the same answer back and never acts twice.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from layby.errors import RunRequiredError
from layby.runs import RunContext, current_context
from layby.steps import step
from layby_contracts.commands import Explicit, Listed, ListParked, Refused, Visit, Visited, VisitStatus
from layby_contracts.doors import VisitResult
from layby_contracts.errors import BadInput, CallFailedError, NonDeterministicRunError, Transient
from layby_contracts.events import ParkedAsk, Resolution
from layby_contracts.refusals import from_refused
from layby_domain.validation import call_interaction_id, is_flow_name

_MISSING: Any = object()
WAIT_SECONDS = 60.0
"""How long ``resume_parked`` waits for the resumed chain's next outcome before it reports
``running`` (the outcome then waits on the subject for its next owner)."""
POLL_SECONDS = 0.05


def _context(what: str) -> RunContext:
    ctx = current_context()
    if ctx is None or not ctx.durable or not ctx.info.identity or ctx.client is None:
        raise RunRequiredError(
            f"{what} needs a resumable run: call it inside a flow executed by layby.Worker "
            "(with the durable checkpointer and an identity); nothing was recorded"
        )
    return ctx


async def call(flow: str, kwargs: Any = None) -> Any:
    """Run the registered flow ``flow`` on ``kwargs`` as this run's child and return its result;
    this run parks until the child's next outcome. When the child asks its caller, returns
    ``{"layby:caller_asks": {"run_id": <child>, "asks": [<entries>]}}``. Raises
    ``CallFailedError`` when the child fails or is cancelled."""
    if not is_flow_name(flow):
        raise BadInput("flow must be 1-64 of [A-Za-z0-9_-]", field="flow")
    try:
        msgspec.json.encode(kwargs)
    except (TypeError, msgspec.EncodeError) as exc:
        raise BadInput(f"kwargs must be JSON-serializable: {exc}", field="kwargs") from None
    ctx = _context("layby.call()")
    n = ctx.next_call()
    known = ctx.answers.get(str(n))
    if known is not None:
        return _call_result(ctx, n, flow, known)
    child = call_interaction_id(ctx.info.run_id, n)
    ctx.recording()
    try:
        await ctx.client.start_child(child, flow, kwargs, caller=ctx.info.run_id, caller_call=n)
    finally:
        ctx.recorded()
    return await ctx.suspend(
        ParkedAsk(interaction_id=child, call=n, question=flow, expiry_at=None, kind="call")
    )


def _call_result(ctx: RunContext, n: int, flow: str, known: Resolution) -> Any:
    if known.question != flow:
        raise NonDeterministicRunError(
            f"run {ctx.info.run_id} called {flow!r} at call {n}, but that call was recorded as "
            f"{known.question!r}: a flow must make the same calls in the same order on every execution"
        )
    if known.answered_by == "system:call_failed":
        raise CallFailedError(f"the called run {known.interaction_id} ({flow}) failed: {known.detail or ''}")
    if (known.answered_by or "").startswith("system:"):
        raise CallFailedError(
            f"the called run {known.interaction_id} ({flow}) ended without a result ({known.answered_by})"
        )
    return known.answer


class _Refusal(Exception):
    """A final refusal inside a tool's step: recorded as the step's value and raised after it,
    so a bad id is not retried like a transient failure."""

    def __init__(self, reply: Refused) -> None:
        super().__init__(reply.message)
        self.reply = reply


def _refusal_or_raise(reply: Refused) -> _Refusal:
    error = from_refused(reply)
    if isinstance(error, Transient):
        raise error
    return _Refusal(reply)


def _raise_refused(value: Any) -> Any:
    """The value a tool's step recorded; a recorded refusal is raised as the error it was."""
    if isinstance(value, dict) and set(value) == {"refused"}:
        raise from_refused(msgspec.convert(value["refused"], Refused))
    return value


async def _visit(ctx: RunContext, visit_id: str, explicit: Explicit) -> VisitResult:
    reply = await ctx.client.request_door(
        Visit(
            token=ctx.client.token, visit_id=visit_id, run_id=ctx.info.run_id, explicit=explicit, kind="tool"
        )
    )
    if isinstance(reply, Refused):
        raise _refusal_or_raise(reply)
    if not isinstance(reply, Visited):
        raise Transient(f"unexpected reply to a visit: {type(reply).__name__}")
    return reply.result


def _visit_id(ctx: RunContext, what: str) -> str:
    """The same on every attempt and replay of one tool call, so a repeated visit is answered
    with what the first did instead of acting again."""
    from layby.steps import current_step

    info = current_step()
    key = info.key if info is not None else f"{ctx.info.run_id}:{what}:{time.monotonic_ns()}"
    return call_interaction_id(key, 0)


@step(name="layby.list_parked", retries=3)
async def _list() -> Any:
    ctx = _context("list_parked()")
    reply = await ctx.client.request_door(ListParked(token=ctx.client.token, run_id=ctx.info.run_id))
    if isinstance(reply, Refused):
        return {"refused": msgspec.to_builtins(_refusal_or_raise(reply).reply)}
    if not isinstance(reply, Listed):
        raise Transient(f"unexpected reply to list_parked: {type(reply).__name__}")
    return [dict(msgspec.to_builtins(e)) for e in reply.entries]


async def list_parked() -> list[dict[str, Any]]:
    """Every parked entry on this run's subject, as a door's ``$parked`` shows them."""
    _context("list_parked()")
    entries: list[dict[str, Any]] = _raise_refused(await _list())
    return entries


@step(name="layby.resume_parked", retries=3)
async def _resume(interaction_id: str, payload: Any, take: bool, wait: float) -> dict[str, Any]:
    try:
        return await _resume_once(interaction_id, payload, take, wait)
    except _Refusal as refused:
        return {"refused": msgspec.to_builtins(refused.reply)}


async def _resume_once(interaction_id: str, payload: Any, take: bool, wait: float) -> dict[str, Any]:
    ctx = _context("resume_parked()")
    visit_id = _visit_id(ctx, "resume")
    if take:
        took = await _visit(ctx, visit_id, Explicit(takes=[interaction_id]))
        return dict(msgspec.to_builtins(took.taken[0]))
    result = await _visit(ctx, visit_id, Explicit(resumes=[{"id": interaction_id, "payload": payload}]))
    deadline = time.monotonic() + wait
    while result.outcome is None and time.monotonic() < deadline:
        await asyncio.sleep(POLL_SECONDS)
        reply = await ctx.client.request_door(VisitStatus(token=ctx.client.token, visit_id=visit_id))
        if isinstance(reply, Visited):
            result = reply.result
    if result.outcome is None:
        return {"id": interaction_id, "status": "running"}
    outcome = result.outcome
    if outcome.status == "parked":
        return {"id": interaction_id, **dict(msgspec.to_builtins(outcome))}
    # This run receives the outcome inline: take it, so it does not also wait on the subject.
    taken = await _visit(ctx, call_interaction_id(visit_id, 1), Explicit(takes=[interaction_id]))
    return dict(msgspec.to_builtins(taken.taken[0]))


async def resume_parked(
    interaction_id: str, payload: Any = _MISSING, *, wait: float = WAIT_SECONDS
) -> dict[str, Any]:
    """With ``payload``: resume that caller ask with ``payload`` as its answer and return the
    resumed chain's next outcome (``{"status": "finished", "result": ...}``, ``{"status":
    "parked", "asks": [...]}``, or ``{"status": "running"}`` when ``wait`` seconds pass first).
    Without: take that finished waiting outcome. A failed outcome raises ``CallFailedError``."""
    _context("resume_parked()")
    if not isinstance(interaction_id, str) or not interaction_id:
        raise BadInput("interaction_id must be an entry id", field="interaction_id")
    take = payload is _MISSING
    outcome: dict[str, Any] = _raise_refused(
        await _resume(interaction_id, None if take else payload, take, float(wait))
    )
    if outcome.get("status") == "failed":
        raise CallFailedError(f"entry {interaction_id} failed: {outcome.get('error') or ''}")
    return outcome


@step(name="layby.cancel_parked", retries=3)
async def _cancel(ids: list[str]) -> Any:
    ctx = _context("cancel_parked()")
    try:
        result = await _visit(ctx, _visit_id(ctx, "cancel"), Explicit(cancels=ids))
    except _Refusal as refused:
        return {"refused": msgspec.to_builtins(refused.reply)}
    return list(result.cancelled)


async def cancel_parked(ids: str | list[str]) -> list[str]:
    """Whole-chain kill each named entry: it and every run linked above it end for good."""
    _context("cancel_parked()")
    named = [ids] if isinstance(ids, str) else list(ids)
    if not named or not all(isinstance(i, str) and i for i in named):
        raise BadInput("ids must be an entry id or a list of entry ids", field="ids")
    cancelled: list[str] = _raise_refused(await _cancel(named))
    return cancelled
