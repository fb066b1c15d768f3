"""Run chains: what ``layby.call`` waits for, and the whole-chain kill (docs/caller-asks.md).

A run started by ``layby.call`` records its caller (``RunStarted.caller``); the caller's park
holds the call (a ``ParkedAsk`` of kind ``call``) and resolves on the child's next outcome. A
whole-chain kill walks those links upwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

import msgspec

from layby_contracts import events
from layby_contracts.doors import Entry
from layby_contracts.errors import Conflict, NotFound
from layby_server.auth import Principal
from layby_server.observability.logs import get_logger
from layby_server.store.eventlog import EventLog
from layby_server.write.runops import cancel_run

log = get_logger("layby.chains")
KILLER = Principal(identity="system:caller_expiry", role="operator")
"""Who a chain killed at a caller ask's deadline is cancelled by."""


def call_resolution(
    ask: events.ParkedAsk, last: events.Event | None, asks: list[Entry]
) -> events.Resolution | None:
    """How a ``layby.call`` resolved, from its child's last event (None: still waiting)."""
    child = ask.interaction_id
    match last:
        case events.RunFinished():
            return events.Resolution(
                interaction_id=child, question=ask.question, answer=last.result, answered_by=f"run:{child}"
            )
        case events.RunFailed():
            return events.Resolution(
                interaction_id=child,
                question=ask.question,
                answered_by="system:call_failed",
                detail=last.error,
            )
        case events.RunCancelled():
            return events.Resolution(
                interaction_id=child,
                question=ask.question,
                answered_by="system:cancelled",
                detail="the called run was cancelled",
            )
        case events.RunParked() if asks:
            marker = {events.CALLER_ASKS_KEY: {"run_id": child, "asks": msgspec.to_builtins(asks)}}
            return events.Resolution(
                interaction_id=child, question=ask.question, answer=marker, answered_by=f"run:{child}"
            )
        case _:
            return None


async def kill_chain(
    store: EventLog,
    started: Callable[[str], Awaitable[events.RunStarted | None]],
    run_id: str,
    who: Principal,
    now: Callable[[], datetime],
) -> list[str]:
    """Cancel ``run_id`` and every run linked above it (its caller, that run's caller, ...) that is
    still running or parked: a whole-chain kill. Returns the runs it cancelled. Idempotent."""
    killed: list[str] = []
    current: str | None = run_id
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        try:
            await cancel_run(store, current, who, now)
            killed.append(current)
        except (Conflict, NotFound):
            pass  # ended already (or cancelled by an earlier attempt of this kill)
        found = await started(current)
        current = found.caller if found is not None else None
    log.info("chain.killed", run_id=run_id, runs=killed)
    return killed
