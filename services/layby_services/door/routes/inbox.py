"""``GET /api/interactions``: the paged pending list (docs/doors/list.md#the-list-door)."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Request, Response, get

from layby.logs import get_logger
from layby_contracts.errors import BadInput
from layby_contracts.limits import PAGE_MAX, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX
from layby_server.prune import prune_abandoned
from layby_services.door.deps import DoorState, door, principal_of

log = get_logger("layby.door.inbox")

# Pending, visible questions; a sync question past its deadline is an abandoned waiter and is
# left out (and pruned in the background). Groups ordered by their most recent question, then
# creation order within a group (docs/doors/list.md#order).
_VISIBLE = """
    FROM interactions
    WHERE status = 'pending' AND item IS NOT NULL
      AND (mode = 'async' OR timeout_at > $1)
      AND ($2::text IS NULL OR audience = $2)
"""
# Constant SQL assembled from constants; every value is a $n parameter.
_COUNT = "SELECT count(*) " + _VISIBLE
_PAGE = (
    "SELECT item::text AS item FROM (SELECT item, group_id, created_at, interaction_id, "  # noqa: S608
    "max(created_at) OVER (PARTITION BY group_id) AS group_latest "
    + _VISIBLE
    + ") v ORDER BY group_latest, group_id, created_at, interaction_id LIMIT $3 OFFSET $4"
)


_SEQ = "SELECT seq FROM projector_checkpoints WHERE name = 'inbox'"
STREAM_SEQ = "Layby-Stream-Seq"
"""The stream sequence a list reflects, and the one a stream resumes after: a page seeds its
stream with the list's, so nothing recorded between the two is missed."""
CATCH_UP_SECONDS = 2.0
CATCH_UP_POLL = 0.02


def parse_window(page_raw: str | None, size_raw: str | None) -> tuple[int, int]:
    try:
        page = int(page_raw) if page_raw is not None else 1
        size = int(size_raw) if size_raw is not None else PAGE_SIZE_DEFAULT
    except ValueError:
        raise BadInput(f"page and pageSize must be integers: page={page_raw} pageSize={size_raw}") from None
    if page < 1:
        raise BadInput("page must be >= 1", field="page")
    if size < 1:
        raise BadInput("pageSize must be >= 1", field="pageSize")
    if page > PAGE_MAX:
        raise BadInput(f"page must be <= {PAGE_MAX}", field="page")
    return page, min(size, PAGE_SIZE_MAX)


_background: set[asyncio.Task[int]] = set()


def _prune_later(state: DoorState) -> None:
    task = asyncio.create_task(
        prune_abandoned(state.pool, state.store, state.clock, grace_seconds=0, limit=100)
    )
    _background.add(task)
    task.add_done_callback(_background.discard)


@get("/api/interactions", summary="One page of pending questions")
async def list_door(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Query ``page`` (default 1) and ``pageSize`` (default 50, capped at 200)."""
    state = door(request)
    who = principal_of(request)
    page, size = parse_window(request.query_params.get("page"), request.query_params.get("pageSize"))
    after = parse_after(request.query_params.get("after"))
    now = state.clock.now()
    audience = who.identity if who.restricted else None
    async with state.pool.acquire() as conn:
        if after is not None:
            await _caught_up(conn, after)
        # One snapshot: the page, its total and the stream position they reflect agree.
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            seq = int(await conn.fetchval(_SEQ) or 0)
            total = int(await conn.fetchval(_COUNT, now, audience))
            rows = await conn.fetch(_PAGE, now, audience, size, (page - 1) * size) if total else []
        stale = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM interactions WHERE status = 'pending' AND mode = 'sync' "
            "AND timeout_at <= $1)",
            now,
        )
    if stale:
        _prune_later(state)
    next_page = page + 1 if page * size < total else None
    items = b",".join(r["item"].encode() for r in rows)
    body = (
        b'{"data":{"items":['
        + items
        + b'],"total":%d,"page":%d,"page_size":%d,"next_page":%s,"truncated":false}}'
        % (total, page, size, b"null" if next_page is None else str(next_page).encode())
    )
    return Response(
        body, media_type="application/json", headers={"Cache-Control": "no-store", STREAM_SEQ: str(seq)}
    )


def parse_after(raw: str | None) -> int | None:
    """``after``: a stream sequence the list must reflect (docs/doors/list.md#seeding-the-stream)."""
    if raw is None:
        return None
    if not raw.isdigit() or len(raw) > 19:
        raise BadInput("after must be a stream sequence (a non-negative integer)", field="after")
    return int(raw)


async def _caught_up(conn: Any, after: int) -> None:
    """Wait (bounded) until the projection has applied the stream up to ``after``."""
    for _ in range(int(CATCH_UP_SECONDS / CATCH_UP_POLL)):
        if int(await conn.fetchval(_SEQ) or 0) >= after:
            return
        await asyncio.sleep(CATCH_UP_POLL)
