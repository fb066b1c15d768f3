"""``GET /api/interactions`` (the paged pending list, docs/doors/list.md#the-list-door) and
``GET /api/interactions/done`` (recently resolved questions, docs/doors/done.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from litestar import Request, Response, get

from layby.logs import get_logger
from layby_contracts.errors import BadInput
from layby_contracts.events import EXPIRY_ANSWERER
from layby_contracts.limits import ANSWER_FORMATS, PAGE_MAX, PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX
from layby_server.prune import prune_abandoned
from layby_services.door.deps import DoorState, door, principal_of

log = get_logger("layby.door.inbox")

# Pending, visible questions; a sync question past its deadline is an abandoned waiter and is
# left out (and pruned in the background). Optional filters narrow the whole pending set before
# paging (docs/doors/list.md#filters-and-order); every value is a $n parameter.
_VISIBLE = """
    FROM interactions
    WHERE status = 'pending' AND item IS NOT NULL
      AND (mode = 'async' OR timeout_at > $1)
      AND ($2::text IS NULL OR audience = $2)
      AND ($3::text IS NULL OR strpos(lower(item->>'question'), $3) > 0)
      AND ($4::text IS NULL OR answer_format = $4)
      AND ($5::text IS NULL OR group_id = $5)
      AND ($6::text IS NULL OR item->>'origin' = $6)
"""
# Constant SQL assembled from constants.
_COUNT = "SELECT count(*) " + _VISIBLE
_ORDERS = {
    # Groups by their most recent question, then creation order within a group (the default).
    "group": "group_latest, group_id, created_at, interaction_id",
    "newest": "created_at DESC, interaction_id DESC",
    "oldest": "created_at, interaction_id",
    "deadline": "timeout_at, created_at, interaction_id",
}
# The group order needs each group's latest question: a window over the matching set.
_GROUPED = (
    "SELECT item::text AS item FROM (SELECT item, group_id, created_at, interaction_id, "  # noqa: S608
    "max(created_at) OVER (PARTITION BY group_id) AS group_latest " + _VISIBLE + ") v"
)
_PLAIN = "SELECT item::text AS item " + _VISIBLE
_PAGES = {
    sort: (_GROUPED if sort == "group" else _PLAIN) + " ORDER BY " + order + " LIMIT $7 OFFSET $8"
    for sort, order in _ORDERS.items()
}
FILTER_MAX_CHARS = 200


class ListFilter(msgspec.Struct, frozen=True):
    """The list door's optional narrowing and order (docs/doors/list.md#filters-and-order)."""

    q: str | None = None
    format: str | None = None
    group: str | None = None
    origin: str | None = None
    sort: str = "group"

    def args(self) -> tuple[str | None, str | None, str | None, str | None]:
        return (self.q.lower() if self.q else None, self.format, self.group, self.origin)


def parse_text(params: Any, name: str) -> str | None:
    """A free-text query parameter: absent or empty is None; too long or holding a NUL character
    (which PostgreSQL cannot store) is a 400 naming it."""
    raw: str | None = params.get(name)
    if raw is None or raw == "":
        return None
    if len(raw) > FILTER_MAX_CHARS:
        raise BadInput(f"{name} must be at most {FILTER_MAX_CHARS} characters", field=name)
    return no_nul(raw, name)


def no_nul(raw: str, name: str) -> str:
    """``raw``, or a 400 naming the parameter when it holds a NUL character (PostgreSQL cannot
    store one)."""
    if "\x00" in raw:
        raise BadInput(f"{name} must not contain NUL characters", field=name)
    return raw


def parse_filter(params: Any) -> ListFilter:
    values: dict[str, str] = {}
    for name in ("q", "format", "group", "origin", "sort"):
        raw = parse_text(params, name)
        if raw is not None:
            values[name] = raw
    if "format" in values and values["format"] not in ANSWER_FORMATS:
        raise BadInput(f"format must be one of {', '.join(ANSWER_FORMATS)}", field="format")
    if "sort" in values and values["sort"] not in _ORDERS:
        raise BadInput(f"sort must be one of {', '.join(_ORDERS)}", field="sort")
    return ListFilter(**values)


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


def next_page(page: int, size: int, total: int) -> int | None:
    """The page after ``page``, when there is one (docs/doors/list.md#response)."""
    return page + 1 if page * size < total else None


_background: set[asyncio.Task[int]] = set()


def _prune_later(state: DoorState) -> None:
    task = asyncio.create_task(
        prune_abandoned(state.pool, state.store, state.clock, grace_seconds=0, limit=100)
    )
    _background.add(task)
    task.add_done_callback(_background.discard)


@get("/api/interactions", summary="One page of pending questions")
async def list_door(request: Request[Any, Any, Any]) -> Response[bytes]:
    """Query ``page`` (default 1) and ``pageSize`` (default 50, capped at 200); optional ``q``,
    ``format``, ``group``, ``origin`` and ``sort`` (docs/doors/list.md#filters-and-order)."""
    state = door(request)
    who = principal_of(request)
    page, size = parse_window(request.query_params.get("page"), request.query_params.get("pageSize"))
    after = parse_after(request.query_params.get("after"))
    narrow = parse_filter(request.query_params)
    now = state.clock.now()
    audience = who.identity if who.restricted else None
    async with state.pool.acquire() as conn:
        if after is not None:
            await _caught_up(conn, after)
        # One snapshot: the page, its total and the stream position they reflect agree.
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            seq = int(await conn.fetchval(_SEQ) or 0)
            total = int(await conn.fetchval(_COUNT, now, audience, *narrow.args()))
            rows = (
                await conn.fetch(_PAGES[narrow.sort], now, audience, *narrow.args(), size, (page - 1) * size)
                if total
                else []
            )
        stale = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM interactions WHERE status = 'pending' AND mode = 'sync' "
            "AND timeout_at <= $1)",
            now,
        )
    if stale:
        _prune_later(state)
    following = next_page(page, size, total)
    items = b",".join(r["item"].encode() for r in rows)
    body = (
        b'{"data":{"items":['
        + items
        + b'],"total":%d,"page":%d,"page_size":%d,"next_page":%s,"truncated":false}}'
        % (total, page, size, b"null" if following is None else str(following).encode())
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


# Recently resolved questions the caller may see, newest first (docs/doors/done.md).
_DONE_WHERE = """
    FROM interactions
    WHERE status <> 'pending' AND item IS NOT NULL
      AND ($1::text IS NULL OR audience = $1)
"""
_DONE_COUNT = "SELECT count(*) " + _DONE_WHERE
_DONE_PAGE = (
    "SELECT interaction_id, group_id, status, item->>'question' AS question, answer_format, "
    "sensitive, answer::text AS answer, answered_by, answered_at, removed_reason, removed_at, via "
    + _DONE_WHERE
    + " ORDER BY coalesce(answered_at, removed_at) DESC, interaction_id LIMIT $2 OFFSET $3"
)


def done_item(row: Any) -> dict[str, Any]:
    """One resolved question: what was answered, by whom, when and where."""
    item: dict[str, Any] = {
        "interaction_id": row["interaction_id"],
        "group_id": row["group_id"],
        "question": row["question"],
        "answer_format": row["answer_format"],
    }
    if row["status"] == "answered":
        expired = row["via"] == "expiry" or row["answered_by"] == EXPIRY_ANSWERER
        item["status"] = "expired" if expired else "answered"
        item["at"] = row["answered_at"].isoformat()
        item["by"] = row["answered_by"]
        item["via"] = "expiry" if expired else (row["via"] or "api")
        if not expired and not row["sensitive"] and row["answer"] is not None:
            item["answer"] = msgspec.json.decode(row["answer"])
        if row["sensitive"]:
            item["sensitive"] = True
    else:
        item["status"] = "removed"
        item["at"] = row["removed_at"].isoformat() if row["removed_at"] else None
        item["reason"] = row["removed_reason"]
    return item


@get("/api/interactions/done", summary="Recently resolved questions, newest first")
async def done_door(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    """Query ``page`` (default 1), ``pageSize`` (default 50, capped at 200) and ``after``."""
    state = door(request)
    who = principal_of(request)
    page, size = parse_window(request.query_params.get("page"), request.query_params.get("pageSize"))
    after = parse_after(request.query_params.get("after"))
    audience = who.identity if who.restricted else None
    async with state.pool.acquire() as conn:
        if after is not None:
            await _caught_up(conn, after)
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            total = int(await conn.fetchval(_DONE_COUNT, audience))
            rows = await conn.fetch(_DONE_PAGE, audience, size, (page - 1) * size) if total else []
    data = {
        "items": [done_item(r) for r in rows],
        "total": total,
        "page": page,
        "page_size": size,
        "next_page": next_page(page, size, total),
    }
    return Response({"data": data}, headers={"Cache-Control": "no-store"})
