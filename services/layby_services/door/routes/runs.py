"""``GET /api/runs`` and ``GET /api/runs/{id}``: run status (issue 3, authenticated, read).

A run is ``running`` (started, executing), ``parked`` (on its open questions, each with its
deadline), ``resumed`` (its park resolved; the continuation is being executed), ``finished``
(with its result) or ``failed`` (with the error). A restricted identity sees only its own
runs; another identity's run is the same 404 as an unknown one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from litestar import Request, get
from litestar.params import FromPath

from layby_contracts.errors import BadInput, NotFound
from layby_domain.validation import is_interaction_id
from layby_services.door.deps import door, principal_of
from layby_services.door.routes.inbox import parse_window

NOT_FOUND = "Run not found"
STATUSES = ("running", "parked", "resumed", "finished", "failed")

_DETAIL = """
SELECT r.*, (
    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'interaction_id', a.value->>'interaction_id',
        'question', a.value->>'question',
        'expiry_at', a.value->>'expiry_at',
        'status', CASE
            WHEN i.status = 'answered' AND i.answered_by = 'system:expiry' THEN 'expired'
            ELSE coalesce(i.status, 'pending') END,
        'answered_by', i.answered_by) ORDER BY (a.value->>'call')::int), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(r.asks, '[]'::jsonb)) a
    LEFT JOIN interactions i ON i.interaction_id = a.value->>'interaction_id'
)::text AS park
FROM runs r WHERE r.run_id = $1 AND ($2::text IS NULL OR r.identity = $2)
"""

_FILTER = " FROM runs WHERE ($1::text IS NULL OR identity = $1) AND ($2::text IS NULL OR status = $2)"
_COUNT = "SELECT count(*)" + _FILTER
_PAGE = (
    "SELECT run_id, flow, identity, status, generation, expiry_at, created_at, updated_at"
    + _FILTER
    + " ORDER BY updated_at DESC NULLS LAST, run_id LIMIT $3 OFFSET $4"
)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _summary(row: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "run_id": row["run_id"],
        "flow": row["flow"],
        "identity": row["identity"],
        "status": row["status"],
        "generation": row["generation"],
        "created_at": _iso(row["created_at"]),
        "updated_at": _iso(row["updated_at"]),
    }
    if row["status"] == "parked" and row["expiry_at"] is not None:
        item["expiry_at"] = _iso(row["expiry_at"])
    return item


@get("/api/runs/{run_id:str}", summary="One run's status")
async def run_door(request: Request[Any, Any, Any], run_id: FromPath[str]) -> dict[str, Any]:
    state = door(request)
    who = principal_of(request)
    if not is_interaction_id(run_id):
        raise NotFound(NOT_FOUND)
    row = await state.pool.fetchrow(_DETAIL, run_id, who.identity if who.restricted else None)
    if row is None or row["flow"] is None:
        raise NotFound(NOT_FOUND)
    data = _summary(row)
    park = json.loads(row["park"])
    if row["status"] in ("parked", "resumed"):
        data["asks"] = [{k: v for k, v in ask.items() if v is not None} for ask in park]
        data["open"] = [a["interaction_id"] for a in park if a["status"] == "pending"]
    if row["resume_id"] is not None:
        data["resume_id"] = row["resume_id"]
    if row["status"] == "finished":
        data["result"] = json.loads(row["result"]) if row["result"] is not None else None
    if row["status"] == "failed":
        data["error"] = row["error"]
    return {"data": data}


@get("/api/runs", summary="Runs, most recently active first")
async def runs_door(request: Request[Any, Any, Any]) -> dict[str, Any]:
    """Query ``status`` (one of running, parked, resumed, finished, failed), ``page``, ``pageSize``."""
    state = door(request)
    who = principal_of(request)
    page, size = parse_window(request.query_params.get("page"), request.query_params.get("pageSize"))
    status = request.query_params.get("status")
    if status is not None and status not in STATUSES:
        raise BadInput(f"status must be one of {', '.join(STATUSES)}", field="status")
    identity = who.identity if who.restricted else None
    async with state.pool.acquire() as conn:
        total = int(await conn.fetchval(_COUNT, identity, status))
        rows = await conn.fetch(_PAGE, identity, status, size, (page - 1) * size) if total else []
    return {
        "data": {
            "items": [_summary(r) for r in rows if r["flow"] is not None],
            "total": total,
            "page": page,
            "page_size": size,
            "next_page": page + 1 if page * size < total else None,
        }
    }
