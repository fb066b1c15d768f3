"""Liveness and readiness (docs/doors/common.md#health)."""

from __future__ import annotations

from litestar import Response, get
from litestar.openapi import ResponseSpec

from layby_contracts.http import Health, HealthData, NotReady, Ready, ReadyChecks, ReadyData
from layby_services.door.deps import Door
from layby_services.door.messages import NOT_READY
from layby_services.door.openapi import documented
from layby_services.door.openapi.components import RETRY_503

NOT_READY_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Retry-After": "1"}


@get(
    "/healthz",
    operation_id="healthz",
    tags=["health"],
    summary="The process is alive",
)
async def healthz() -> Health:
    return Health(data=HealthData())


@get(
    "/readyz",
    operation_id="readyz",
    tags=["health"],
    operation_class=documented(responses=RETRY_503),
    summary="NATS JetStream and PostgreSQL answer",
    responses={
        503: ResponseSpec(
            NotReady, description="One of them does not answer; `checks` says which.", generate_examples=False
        )
    },
)
async def readyz(door: Door) -> Response[Ready]:
    nats = postgres = False
    try:
        await door.store.bounds()
        nats = True
    except Exception:  # noqa: BLE001, S110 - readiness reports the failure instead of raising it
        pass
    try:
        await door.pool.fetchval("SELECT 1")
        postgres = True
    except Exception:  # noqa: BLE001, S110
        pass
    if nats and postgres:
        return Response(Ready(data=ReadyData()))
    refused = NotReady(error=NOT_READY, checks=ReadyChecks(nats=nats, postgres=postgres))
    return Response(refused, status_code=503, headers=NOT_READY_HEADERS)  # type: ignore[arg-type]
