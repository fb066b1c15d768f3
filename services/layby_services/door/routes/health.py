"""Liveness and readiness (docs/doors/common.md#health)."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.openapi import ResponseSpec

from layby_contracts.http import Health, HealthData, NotReady, Ready, ReadyChecks, ReadyData
from layby_services.door.deps import door
from layby_services.door.messages import NOT_READY

NOT_READY_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Retry-After": "1"}


@get("/healthz", summary="The process is alive")
async def healthz() -> Health:
    return Health(data=HealthData())


@get(
    "/readyz",
    summary="NATS JetStream and PostgreSQL answer",
    responses={
        503: ResponseSpec(
            NotReady, description="One of them does not answer; `checks` says which.", generate_examples=False
        )
    },
)
async def readyz(request: Request[Any, Any, Any]) -> Response[Ready]:
    state = door(request)
    nats = postgres = False
    try:
        await state.store.bounds()
        nats = True
    except Exception:  # noqa: BLE001, S110 - readiness reports the failure instead of raising it
        pass
    try:
        await state.pool.fetchval("SELECT 1")
        postgres = True
    except Exception:  # noqa: BLE001, S110
        pass
    if nats and postgres:
        return Response(Ready(data=ReadyData()))
    refused = NotReady(error=NOT_READY, checks=ReadyChecks(nats=nats, postgres=postgres))
    return Response(refused, status_code=503, headers=NOT_READY_HEADERS)  # type: ignore[arg-type]
