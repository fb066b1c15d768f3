"""``GET /api/runs`` and ``GET /api/runs/{id}``: run status (authenticated, read; docs/doors/runs.md).

A run is ``running`` (started, executing), ``parked`` (on its open questions, each with its
deadline), ``resumed`` (its park resolved; the continuation is being executed), ``finished``
(with its result) or ``failed`` (with the error). A restricted identity sees only its own
runs; another identity's run is the same 404 as an unknown one.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import PathParameter

from layby.ids import new_interaction_id
from layby.requests import expect
from layby_contracts import events, http
from layby_contracts.commands import RunAccepted, StartRun
from layby_contracts.errors import BadInput, Forbidden, NotFound
from layby_contracts.limits import ANSWERED_BY_EXPIRY, PAGE_SIZE_MAX
from layby_domain.run import MOVABLE
from layby_domain.validation import is_flow_name, is_interaction_id
from layby_server.auth import Principal
from layby_server.projection.workers import WorkerRegistry
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.runops import NOT_FOUND, OPERATORS_MOVE, cancel_run, load_run, move_run, retry_run
from layby_services.door.bodies import decode_struct
from layby_services.door.commands import send
from layby_services.door.deps import Door, Token, Who, json_body
from layby_services.door.openapi import UUID4, documented, refusal
from layby_services.door.openapi.components import UNAVAILABLE_503
from layby_services.door.query import (
    DEFAULT_PAGE_SIZE,
    Flow,
    Page,
    PageSize,
    Status,
    parse_status,
)
from layby_services.door.routes.inbox import PAGING_400, first_item_link, next_page

STATUSES = http.RUN_STATUSES
_enc = msgspec.json.Encoder()
RunId = Annotated[
    str,
    PathParameter(
        description="A lowercase uuid4; anything else is the same 404 as an unknown run.",
        schema_extra={"pattern": UUID4},
    ),
]
RUN_NOT_FOUND = refusal(
    "Not a lowercase uuid4, unknown, or another identity's run (for a `user`).", NOT_FOUND
)

_DETAIL = """
SELECT r.*, (
    SELECT coalesce(jsonb_agg(jsonb_build_object(
        'interaction_id', a.value->>'interaction_id',
        'kind', coalesce(a.value->>'kind', 'ask'),
        'question', a.value->>'question',
        'expiry_at', a.value->>'expiry_at',
        'status', CASE
            WHEN i.status = 'answered' AND i.answered_by = 'system:expiry' THEN 'expired'
            ELSE coalesce(i.status, 'pending') END,
        'answered_by', i.answered_by,
        'audience', i.audience,
        'channel', i.item->>'channel',
        'recipient', i.item->>'recipient') ORDER BY (a.value->>'call')::int), '[]'::jsonb)
    FROM jsonb_array_elements(coalesce(r.asks, '[]'::jsonb)) a
    LEFT JOIN interactions i ON i.interaction_id = a.value->>'interaction_id'
)::text AS park
FROM runs r WHERE r.run_id = $1 AND ($2::text IS NULL OR r.identity = $2)
"""

_FILTER = (
    " FROM runs WHERE flow IS NOT NULL"  # a row projected before its start event is not a run yet
    " AND ($1::text IS NULL OR identity = $1) AND ($2::text IS NULL OR status = $2)"
    " AND ($3::text IS NULL OR flow = $3)"
)
_COUNT = "SELECT count(*)" + _FILTER
_PAGE = (
    "SELECT run_id, flow, identity, status, generation, expiry_at, created_at, updated_at, step_count,"
    " version" + _FILTER + " ORDER BY updated_at DESC NULLS LAST, run_id LIMIT $4 OFFSET $5"
)

# The summary door (docs/doors/runs.md#summary): one snapshot for the dashboard's header.
_VISIBLE = " FROM runs WHERE flow IS NOT NULL AND ($1::text IS NULL OR identity = $1)"
_COUNTS = "SELECT status, count(*) AS n" + _VISIBLE + " AND ($2::text IS NULL OR flow = $2) GROUP BY status"
_FLOWS = "SELECT DISTINCT flow" + _VISIBLE + " ORDER BY flow LIMIT $2"
_OLDEST = """
SELECT i.interaction_id, i.run_id, r.flow, coalesce(i.item->>'question', '') AS question, i.audience,
       i.created_at, i.timeout_at
FROM interactions i JOIN runs r ON r.run_id = i.run_id
WHERE i.status = 'pending' AND r.flow IS NOT NULL
  AND ($1::text IS NULL OR r.identity = $1) AND ($2::text IS NULL OR r.flow = $2)
ORDER BY i.created_at, i.interaction_id LIMIT 1
"""
FLOWS_MAX = 200
"""The summary names at most this many flows (the dashboard's flow filter)."""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _summary(row: Any) -> dict[str, Any]:
    """The fields every run view shares (a RunSummary's)."""
    item: dict[str, Any] = {
        "run_id": row["run_id"],
        "flow": row["flow"],
        "identity": row["identity"],
        "status": row["status"],
        "generation": row["generation"],
        "created_at": _iso(row["created_at"]),
        "updated_at": _iso(row["updated_at"]),
        "steps": row["step_count"],
        "version": row["version"] or 1,
    }
    if row["status"] == "parked" and row["expiry_at"] is not None:
        item["expiry_at"] = _iso(row["expiry_at"])
    return item


def _asks(park: list[dict[str, Any]]) -> list[http.RunAsk]:
    return [
        http.RunAsk(**{k: v for k, v in ask.items() if v is not None and k != "kind"})
        for ask in park
        if ask.get("kind", "ask") == "ask"
    ]


def _park_view(data: dict[str, Any], park: list[dict[str, Any]]) -> None:
    """A park's questions (``asks``, ``open``) and the runs it called and waits for (``calls``,
    docs/caller-asks.md#runs-that-call-runs)."""
    questions = [a for a in park if a.get("kind", "ask") == "ask"]
    calls = [a for a in park if a.get("kind") == "call"]
    data["asks"] = _asks(questions)
    data["open"] = [a["interaction_id"] for a in questions if a["status"] == "pending"]
    if calls:
        data["calls"] = [http.RunCall(run_id=a["interaction_id"], flow=a["question"]) for a in calls]


@get(
    "/api/runs/{run_id:str}",
    operation_id="getRun",
    tags=["runs"],
    summary="One run's status",
    description="The run; keys that do not apply to its status are absent (docs/doors/runs.md).",
    responses={404: RUN_NOT_FOUND},
)
async def run_door(door: Door, who: Who, run_id: RunId) -> http.Run:
    if not is_interaction_id(run_id):
        raise NotFound(NOT_FOUND)
    row = await door.pool.fetchrow(_DETAIL, run_id, who.identity if who.restricted else None)
    if row is None or row["flow"] is None:
        # Read your writes: a run whose start was accepted is shown from the log until the
        # projection has it (docs/doors/runs.md#read-your-writes).
        data = await _from_log(door.store, run_id, who)
    else:
        data = _summary(row)
        park = json.loads(row["park"])
        if row["status"] in ("parked", "resumed"):
            await _settle_pending(door.store, park)
            _park_view(data, park)
        if row["resume_id"] is not None:
            data["resume_id"] = row["resume_id"]
        if row["status"] == "finished":
            data["result"] = json.loads(row["result"]) if row["result"] is not None else None
        if row["status"] == "failed":
            data["error"] = row["error"]
        for key in ("cancelled_by", "retried_by"):
            if row[key] is not None:
                data[key] = row[key]
        if row["resumed_interactions"] is not None:
            data["resumed_interactions"] = json.loads(row["resumed_interactions"])
    if data["status"] in ("running", "resumed", "parked"):
        await _warn_unserved(door.pool, data)
    return http.Run(data=http.RunDetail(**data))


async def _warn_unserved(pool: Any, data: dict[str, Any]) -> None:
    """A run that no live worker serves says so: one that should run waits for one; a parked one
    whose flow is served at other versions only will wait when it resumes
    (docs/versions.md#a-run-no-worker-serves)."""
    flow, version, run_id = data["flow"], data.get("version", 1), data["run_id"]
    registry = WorkerRegistry(pool)
    if await registry.serves(flow, version):
        return
    served = flow in await registry.served()
    if data["status"] == "parked" and not served:
        return  # nothing serves the flow at all: nothing to choose between yet
    if not served and version == 1:
        data["warning"] = f"no worker serves flow {flow!r}; the run waits for one"
        return
    when = "it will wait for one when it resumes" if data["status"] == "parked" else "the run waits for one"
    data["warning"] = (
        f"no worker serves version {version} of flow {flow!r}; {when} "
        f"(start one, or move the run: layby runs migrate {run_id} --to N)"
    )


@get(
    "/api/workers",
    operation_id="listWorkers",
    tags=["runs"],
    summary="Workers seen in the last hour: alive or not, and the flows they serve",
)
async def workers_door(door: Door, who: Who) -> http.Workers:
    """A restricted identity sees its own workers only (docs/doors/runs.md#workers)."""
    rows = await WorkerRegistry(door.pool).listing(who.identity if who.restricted else None)
    items = [
        http.Worker(
            worker_id=r["worker_id"],
            identity=r["identity"],
            host=r["host"],
            pid=r["pid"],
            flows=list(r["flows"]),
            concurrency=r["concurrency"],
            alive=r["alive"],
            started_at=_iso(r["started_at"]),
            seen_at=_iso(r["seen_at"]),
            **({"versions": json.loads(r["versions"])} if r["versions"] else {}),
        )
        for r in rows
    ]
    return http.Workers(data=http.WorkersData(items=items, alive=sum(1 for i in items if i.alive)))


async def _settle_pending(store: EventStore, park: list[dict[str, Any]]) -> None:
    """The log is ahead of the projection: a question the projection still lists as pending may
    be answered or removed already (an answer door returned 200 a moment ago); ask the log."""
    for ask in park:
        if ask["status"] != "pending" or ask.get("kind") == "call":
            continue
        last = await store.last(store.names.ix(ask["interaction_id"]))
        if isinstance(last, Stored) and isinstance(last.event, events.InteractionAnswered):
            expired = last.event.answered_by == ANSWERED_BY_EXPIRY
            ask["status"], ask["answered_by"] = ("expired" if expired else "answered"), last.event.answered_by
        elif isinstance(last, Stored) and isinstance(last.event, events.InteractionRemoved):
            ask["status"] = "removed"


async def _from_log(store: EventStore, run_id: str, who: Principal) -> dict[str, Any]:
    """A run's view built from its log (its first and last events), for a run the projection
    has not caught up with yet. Another identity's run is the same 404 as an unknown one."""
    started, run = await load_run(store, run_id, who)
    event = run.last
    assert event is not None
    status = (
        "resumed"
        if isinstance(event, events.RunResumed | events.RunStepRecorded) and run.generation
        else run.status
    )
    data: dict[str, Any] = {
        "run_id": run_id,
        "flow": started.flow,
        "identity": started.identity,
        "status": status,
        "generation": run.generation,
        "created_at": _iso(started.started_at),
        "updated_at": _iso(_at(event)),
        "steps": event.step_count if isinstance(event, events.RunFinished) else len(run.steps),
        "version": run.version
        if isinstance(event, events.RunParked | events.RunResumed | events.RunFailed)
        else started.version,
    }
    if isinstance(event, events.RunParked):
        park = [
            {
                "interaction_id": a.interaction_id,
                "kind": a.kind,
                "question": a.question,
                "expiry_at": _iso(a.expiry_at),
                "status": "pending",
            }
            for a in event.asks
        ]
        await _settle_pending(store, park)
        _park_view(data, park)
        deadlines = [a.expiry_at for a in event.asks if a.expiry_at is not None]
        data["expiry_at"] = _iso(min(deadlines, default=None))
    if isinstance(event, events.RunFinished):
        data["result"] = event.result
    if isinstance(event, events.RunFailed):
        data["error"] = event.error
    if isinstance(event, events.RunCancelled):
        data["cancelled_by"] = event.by
    return data


def _at(event: events.RunEvent) -> datetime:
    match event:
        case events.RunStarted():
            return event.started_at
        case events.RunParked():
            return event.parked_at
        case events.RunResumed():
            return event.resumed_at
        case events.RunStepRecorded():
            return event.recorded_at
        case events.RunFinished():
            return event.finished_at
        case events.RunFailed():
            return event.failed_at
        case events.RunCancelled():
            return event.cancelled_at


_RUNS_DOC = documented(
    links=first_item_link("ShowTheFirstRun", "getRun", "run_id", "The first run of the page.")
)


@get(
    "/api/runs",
    operation_id="listRuns",
    tags=["runs"],
    operation_class=_RUNS_DOC,
    summary="Runs, most recently active first",
    responses={
        400: refusal(
            f"{PAGING_400} A `status` that is not a run status: `status must be one of "
            f"{', '.join(STATUSES)}` (field `status`). A `flow` holding a NUL character: `flow must not "
            "contain NUL characters` (field `flow`).",
            field=True,
        )
    },
)
async def runs_door(
    door: Door,
    who: Who,
    *,
    status: Status = None,
    flow: Flow = None,
    page: Page = 1,
    page_size: PageSize = DEFAULT_PAGE_SIZE,
) -> http.RunPage:
    """``status`` (a run status), ``flow`` (a flow name; an empty one matches no run), ``page``,
    ``pageSize``."""
    size = min(page_size, PAGE_SIZE_MAX)
    parse_status(status)
    identity = who.identity if who.restricted else None
    async with door.pool.acquire() as conn:
        total = int(await conn.fetchval(_COUNT, identity, status, flow))
        rows = await conn.fetch(_PAGE, identity, status, flow, size, (page - 1) * size) if total else []
    items = [http.RunSummary(**_summary(r)) for r in rows if r["flow"] is not None]
    return http.RunPage(
        data=http.RunPageData(
            items=items, total=total, page=page, page_size=size, next_page=next_page(page, size, total)
        )
    )


@get(
    "/api/runs/summary",
    operation_id="summarizeRuns",
    tags=["runs"],
    summary="How many runs are in each status, their flows, the oldest open question",
    description="One snapshot: the counts and the oldest question for `flow` when given; a `user` token "
    "counts its own identity's runs only (docs/doors/runs.md#summary).",
    responses={
        400: refusal(
            "A `flow` holding a NUL character: `flow must not contain NUL characters` (field `flow`); or "
            "a request the HTTP parser cannot read.",
            field=True,
        )
    },
)
async def summary_door(door: Door, who: Who, flow: Flow = None) -> http.RunsSummary:
    """The dashboard's header in one snapshot (docs/doors/runs.md#summary): the count of every
    status (zero included) and the oldest question a run waits on, both for ``flow`` when given;
    the flows the caller's runs belong to. A restricted identity counts its own runs only."""
    identity = who.identity if who.restricted else None
    async with door.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        counted = {r["status"]: int(r["n"]) for r in await conn.fetch(_COUNTS, identity, flow)}
        flows = [r["flow"] for r in await conn.fetch(_FLOWS, identity, FLOWS_MAX)]
        oldest = await conn.fetchrow(_OLDEST, identity, flow)
    counts = {status: counted.get(status, 0) for status in STATUSES}
    waiting = None
    if oldest is not None:
        waiting = http.OldestOpen(
            interaction_id=oldest["interaction_id"],
            run_id=oldest["run_id"],
            flow=oldest["flow"],
            question=oldest["question"],
            created_at=_iso(oldest["created_at"]),
            expiry_at=_iso(oldest["timeout_at"]),
            audience=oldest["audience"] if oldest["audience"] is not None else msgspec.UNSET,
        )
    return http.RunsSummary(
        data=http.RunsSummaryData(
            counts=http.RunCounts(**counts), total=sum(counts.values()), flows=flows, oldest_open=waiting
        )
    )


_CONFLICT = "The run is in a status this operation does not apply to: "


@post(
    "/api/runs/{run_id:str}/cancel",
    operation_id="cancelRun",
    tags=["runs"],
    operation_class=documented(responses=UNAVAILABLE_503),
    status_code=200,
    summary="Cancel a running or parked run",
    description="A parked run's open questions leave the inbox before this returns; a running run stops "
    "at its next step, park or end (docs/doors/runs.md#cancel).",
    responses={
        404: RUN_NOT_FOUND,
        409: refusal(_CONFLICT + "`the run is <status>; only a running or parked run can be cancelled`."),
    },
)
async def cancel_door(door: Door, who: Who, run_id: RunId) -> http.Cancelled:
    """409 when the run already ended (docs/doors/runs.md#cancel)."""
    if not is_interaction_id(run_id):
        raise NotFound(NOT_FOUND)
    event = await cancel_run(door.store, run_id, who, door.clock.now)
    return http.Cancelled(
        data=http.CancelledData(run_id=run_id, status="cancelled", was=event.was, cancelled_by=event.by)
    )


@post(
    "/api/runs/{run_id:str}/retry",
    operation_id="retryRun",
    tags=["runs"],
    operation_class=documented(responses=UNAVAILABLE_503),
    status_code=200,
    summary="Retry a failed run",
    description="The run executes again from its last recorded step or park (docs/doors/runs.md).",
    responses={
        404: RUN_NOT_FOUND,
        409: refusal(_CONFLICT + "`the run is <status>; only a failed run can be retried`."),
    },
)
async def retry_door(door: Door, who: Who, run_id: RunId) -> http.Retried:
    """Execute a failed run again from its last recorded step or park. 409 unless it failed."""
    if not is_interaction_id(run_id):
        raise NotFound(NOT_FOUND)
    event = await retry_run(door.store, run_id, who, door.clock.now)
    return http.Retried(
        data=http.RetriedData(
            run_id=run_id, status="resumed", generation=event.generation, retried_by=event.retried_by
        )
    )


@post(
    "/api/runs/{run_id:str}/move",
    operation_id="moveRun",
    tags=["runs"],
    operation_class=documented(body=http.MoveRunRequest, responses=UNAVAILABLE_503),
    status_code=200,
    dependencies={"payload": json_body(lambda raw: decode_struct(raw, http.MoveRunRequest))},
    summary="Move a run to another version of its flow",
    description="An operator's decision, recorded on the run's log: a parked run waits for its questions "
    "on the new version, a run waiting for a worker is executed by the new version's workers, a failed "
    "run is retried on it. Moving a run to the version it is on records nothing "
    "(docs/versions.md#moving-runs).",
    responses={
        400: refusal(
            "The body: not JSON, an unknown key, or `version` not a whole number from 1; `field` names it.",
            field=True,
        ),
        403: refusal("A `user` token: only an operator moves runs.", OPERATORS_MOVE),
        404: RUN_NOT_FOUND,
        409: refusal(_CONFLICT + f"`the run is <status>; {MOVABLE}`."),
    },
)
async def move_door(
    door: Door, who: Who, run_id: RunId, payload: NamedDependency[http.MoveRunRequest]
) -> http.Moved:
    if who.restricted:
        raise Forbidden(OPERATORS_MOVE)
    if not is_interaction_id(run_id):
        raise NotFound(NOT_FOUND)
    event = await move_run(door.store, run_id, payload.version, who, door.clock.now)
    status = {events.RunParked: "parked", events.RunResumed: "resumed", events.RunFailed: "failed"}
    return http.Moved(
        data=http.MovedData(
            run_id=run_id,
            version=event.version,
            from_version=event.moved.from_version if event.moved is not None else None,
            status=status[type(event)],  # type: ignore[arg-type]
            moved_by=event.moved.by if event.moved is not None else None,
        )
    )


INVALID_FLOW = "flow must be 1-64 of [A-Za-z0-9_-]"


def parse_start_body(raw: bytes) -> http.StartRunRequest:
    """The body as a ``StartRunRequest``; every refusal names the field."""
    start = decode_struct(raw, http.StartRunRequest)
    if not is_flow_name(start.flow):
        raise BadInput(INVALID_FLOW, field="flow")
    if start.run_id is not None and not is_interaction_id(start.run_id):
        raise BadInput("run_id must be a lowercase uuid4", field="run_id")
    return start


@post(
    "/api/runs",
    operation_id="startRun",
    tags=["runs"],
    operation_class=documented(body=http.StartRunRequest),
    status_code=201,
    dependencies={"payload": json_body(parse_start_body)},
    summary="Start a run of a registered flow",
    description="Recorded as `Client.start_run` records it; a worker serving the flow executes it. When "
    "no live worker serves the flow, the run is recorded all the same and `warning` says so "
    "(docs/doors/runs.md#start).",
    responses={
        400: refusal(
            "The body (not JSON, not an object, an unknown key, a wrong type), an invalid `flow` name, "
            "an `input` over the size cap, or a `run_id` that is not a lowercase uuid4 or is another "
            "start's; `field` names it. Nothing was recorded.",
            field=True,
        ),
        503: refusal("The ask service is unavailable; nothing was recorded.", field=True),
    },
)
async def start_run_door(
    door: Door, token: Token, payload: NamedDependency[http.StartRunRequest]
) -> http.RunStart:
    """Body: a ``StartRunRequest``; 201 with the run's id (and the unserved-flow warning)."""
    start = payload
    run_id = start.run_id or new_interaction_id()
    cmd = StartRun(token=token, run_id=run_id, flow=start.flow, input=start.input, version=start.version)
    reply = expect(
        await send(door.store, door.store.names.cmd_run, cmd),
        RunAccepted,
        "a run start",
    )
    return http.RunStart(
        data=http.RunStartData(run_id=run_id, **({"warning": reply.warning} if reply.warning else {}))
    )
