"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get

from layby_services.door.deps import door


@get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, Any]:
    return {"data": {"status": "ok"}}


@get("/readyz", summary="NATS JetStream and PostgreSQL answer")
async def readyz(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
    state = door(request)
    checks = {"nats": False, "postgres": False}
    try:
        await state.store.bounds()
        checks["nats"] = True
    except Exception:  # noqa: BLE001, S110 - readiness reports the failure instead of raising it
        pass
    try:
        await state.pool.fetchval("SELECT 1")
        checks["postgres"] = True
    except Exception:  # noqa: BLE001, S110
        pass
    if all(checks.values()):
        return Response({"data": {"status": "ready", **checks}})
    return Response(
        {"error": "not ready", "checks": checks},
        status_code=503,
        headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Retry-After": "1"},
    )
