"""``GET /api/interactions`` (the paged pending list, docs/doors/list.md#the-list-door) and
``GET /api/interactions/done`` (recently resolved questions, docs/doors/done.md)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
from litestar import Response, get

from layby_contracts.events import EXPIRY_ANSWERER
from layby_contracts.http import (
    DonePage,
    DonePageData,
    DoneQuestion,
    InteractionPage,
    InteractionPageData,
    PendingQuestion,
)
from layby_contracts.limits import PAGE_MAX, PAGE_SIZE_MAX
from layby_server.observability.logs import get_logger
from layby_server.write.prune import prune_abandoned
from layby_services.door.deps import Door, DoorState, Who
from layby_services.door.openapi import documented, refusal
from layby_services.door.openapi.components import NO_STORE, SEQ, header
from layby_services.door.query import (
    DEFAULT_PAGE_SIZE,
    FILTER_MAX_CHARS,
    SORTS,
    After,
    Format,
    Group,
    Origin,
    Page,
    PageSize,
    Sort,
    Text,
    parse_filter,
)

log = get_logger("layby.door.inbox")

# Pending, visible questions; a sync question past its deadline is an abandoned waiter and is
# left out (and pruned in the background). Optional filters narrow the whole pending set before
# paging (docs/doors/list.md#filters-and-order); every value is a $n parameter.
_VISIBLE = """
    FROM interactions
    WHERE status = 'pending' AND item IS NOT NULL
      AND (mode = 'async' OR timeout_at > $1)
      AND ($2::text IS NULL OR audience = $2 OR $2 = ANY(offered))
      AND ($3::text IS NULL OR strpos(lower(item->>'question'), $3) > 0)
      AND ($4::text IS NULL OR answer_format = $4)
      AND ($5::text IS NULL OR group_id = $5)
      AND ($6::text IS NULL OR item->>'origin' = $6)
"""
# Constant SQL assembled from constants.
_COUNT = "SELECT count(*) " + _VISIBLE
_ORDERS: dict[str, str] = {
    # Groups by their most recent question, then creation order within a group (the default).
    "group": "group_latest, group_id, created_at, interaction_id",
    "newest": "created_at DESC, interaction_id DESC",
    "oldest": "created_at, interaction_id",
    "deadline": "timeout_at, created_at, interaction_id",
}
# The group order needs each group's latest question: a window over the matching set.
# A routed question's item carries its votes so far (docs/routing.md), spliced into the item's
# text: a jsonb merge would reorder the item's keys (a form's properties keep the author's order).
_ITEM = (
    "(CASE WHEN votes IS NULL THEN item::text "
    "ELSE left(item::text, -1) || ',\"votes\":' || votes::text || '}' END)"
)
_GROUPED = (
    "SELECT item FROM (SELECT " + _ITEM + " AS item, group_id, created_at, interaction_id, "  # noqa: S608
    "max(created_at) OVER (PARTITION BY group_id) AS group_latest " + _VISIBLE + ") v"
)
_PLAIN = "SELECT " + _ITEM + " AS item " + _VISIBLE
_PAGES = {
    sort: (_GROUPED if sort == "group" else _PLAIN) + " ORDER BY " + order + " LIMIT $7 OFFSET $8"
    for sort, order in _ORDERS.items()
}
assert tuple(_ORDERS) == SORTS
_SEQ = "SELECT seq FROM projector_checkpoints WHERE name = 'inbox'"
STREAM_SEQ = "Layby-Stream-Seq"
"""The stream sequence a list reflects, and the one a stream resumes after: a page seeds its
stream with the list's, so nothing recorded between the two is missed."""
CATCH_UP_SECONDS = 2.0
CATCH_UP_POLL = 0.02


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


PAGING_400 = (
    "Paging that is not an integer, below 1, or a page above the maximum; or a request the HTTP "
    "parser cannot read (`invalid HTTP request`). Messages: `page and pageSize must be integers: "
    "page=<raw> pageSize=<raw>`, `page must be >= 1` (field `page`), `pageSize must be >= 1` (field "
    f"`pageSize`), `page must be <= {PAGE_MAX}` (field `page`); `after must be a stream sequence "
    "(a non-negative integer)` (field `after`)."
)


def first_item_link(name: str, operation_id: str, parameter: str, description: str) -> dict[str, Any]:
    """A list door's OpenAPI link ``name``: operation ``operation_id`` on the page's first item,
    its ``parameter`` read from the item's field of the same name."""
    return {
        name: {
            "operationId": operation_id,
            "parameters": {parameter: f"$response.body#/data/items/0/{parameter}"},
            "description": description,
        }
    }


_LIST_DOC = documented(
    headers={
        "Cache-Control": NO_STORE,
        STREAM_SEQ: header(SEQ, "The stream sequence this page and its total reflect."),
    },
    links=first_item_link(
        "AnswerTheFirstItem",
        "answerInteraction",
        "interaction_id",
        "Answer the first pending question of the page.",
    ),
)


@get(
    "/api/interactions",
    operation_id="listInteractions",
    tags=["interactions"],
    operation_class=_LIST_DOC,
    summary="One page of pending questions",
    description="Pending questions this caller may see, groups by their latest question, then creation "
    "order (docs/doors/list.md).",
    responses={
        400: refusal(
            f"{PAGING_400} Or a filter that is too long (over {FILTER_MAX_CHARS} characters), holds a "
            "NUL character, or is not one of the allowed values (`format`, `sort`); the message names "
            "the field and never repeats the value.",
            field=True,
        )
    },
)
async def list_door(
    door: Door,
    who: Who,
    *,
    page: Page = 1,
    page_size: PageSize = DEFAULT_PAGE_SIZE,
    after: After = None,
    q: Text = None,
    format: Format = None,
    group: Group = None,
    origin: Origin = None,
    sort: Sort = None,
) -> Response[InteractionPage]:
    """``page`` (default 1) and ``pageSize`` (default 50, capped at 200); optional ``q``,
    ``format``, ``group``, ``origin`` and ``sort`` (docs/doors/list.md#filters-and-order)."""
    size = min(page_size, PAGE_SIZE_MAX)
    narrow = parse_filter({"q": q, "format": format, "group": group, "origin": origin, "sort": sort})
    now = door.clock.now()
    audience = who.identity if who.restricted else None
    async with door.pool.acquire() as conn:
        if after is not None:
            await _caught_up(conn, int(after))
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
        _prune_later(door)
    # Each item is stored already encoded (the projection wrote it from the asked event): it is
    # passed through verbatim.
    items = cast(list[PendingQuestion], [msgspec.Raw(r["item"].encode()) for r in rows])
    data = InteractionPageData(
        items=items, total=total, page=page, page_size=size, next_page=next_page(page, size, total)
    )
    return Response(InteractionPage(data=data), headers={"Cache-Control": "no-store", STREAM_SEQ: str(seq)})


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
      AND ($1::text IS NULL OR audience = $1 OR $1 = ANY(offered))
"""
_DONE_COUNT = "SELECT count(*) " + _DONE_WHERE
_DONE_PAGE = (
    "SELECT interaction_id, group_id, status, item->>'question' AS question, answer_format, "
    "sensitive, answer::text AS answer, answered_by, answered_at, removed_reason, removed_at, via "
    + _DONE_WHERE
    + " ORDER BY coalesce(answered_at, removed_at) DESC, interaction_id LIMIT $2 OFFSET $3"
)


def done_item(row: Any) -> DoneQuestion:
    """One resolved question: what was answered, by whom, when and where."""
    common = {
        "interaction_id": row["interaction_id"],
        "group_id": row["group_id"],
        "question": row["question"],
        "answer_format": row["answer_format"],
    }
    if row["status"] != "answered":
        at = row["removed_at"].isoformat() if row["removed_at"] else None
        return DoneQuestion(**common, status="removed", at=at, reason=row["removed_reason"])
    expired = row["via"] == "expiry" or row["answered_by"] == EXPIRY_ANSWERER
    shown = not expired and not row["sensitive"] and row["answer"] is not None
    return DoneQuestion(
        **common,
        status="expired" if expired else "answered",
        at=row["answered_at"].isoformat(),
        by=row["answered_by"],
        via="expiry" if expired else (row["via"] or "api"),
        answer=msgspec.json.decode(row["answer"]) if shown else msgspec.UNSET,
        sensitive=True if row["sensitive"] else msgspec.UNSET,
    )


@get(
    "/api/interactions/done",
    operation_id="listDoneInteractions",
    tags=["interactions"],
    operation_class=documented(headers={"Cache-Control": NO_STORE}),
    summary="Recently resolved questions, newest first",
    description="What was answered, by whom, when and where (inbox, cli, api, callback, expiry), and what "
    "was removed and why; a sensitive answer is never shown (docs/doors/done.md).",
    responses={400: refusal(PAGING_400, field=True)},
)
async def done_door(
    door: Door,
    who: Who,
    page: Page = 1,
    page_size: PageSize = DEFAULT_PAGE_SIZE,
    after: After = None,
) -> Response[DonePage]:
    """``page`` (default 1), ``pageSize`` (default 50, capped at 200) and ``after``."""
    size = min(page_size, PAGE_SIZE_MAX)
    audience = who.identity if who.restricted else None
    async with door.pool.acquire() as conn:
        if after is not None:
            await _caught_up(conn, int(after))
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            total = int(await conn.fetchval(_DONE_COUNT, audience))
            rows = await conn.fetch(_DONE_PAGE, audience, size, (page - 1) * size) if total else []
    data = DonePageData(
        items=[done_item(r) for r in rows],
        total=total,
        page=page,
        page_size=size,
        next_page=next_page(page, size, total),
    )
    return Response(DonePage(data=data), headers={"Cache-Control": "no-store"})
