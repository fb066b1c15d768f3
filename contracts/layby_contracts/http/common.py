"""Bodies every door shares: the error envelope and the health probes
(docs/doors/common.md#envelope-and-errors, docs/doors/common.md#health)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

Timestamp = Annotated[str, msgspec.Meta(extra_json_schema={"extra": {"format": "date-time"}})]
"""An ISO 8601 moment, as the doors write it (``datetime.isoformat``)."""


class Error(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every failure of a JSON door (docs/doors/common.md#envelope-and-errors)."""

    error: Annotated[str, Meta(description="What went wrong, for a person to read.")]
    field: Annotated[str | UnsetType, Meta(description="The input field to blame, when one is.")] = UNSET


class HealthData(Struct, frozen=True, kw_only=True):
    status: Literal["ok"] = "ok"


class Health(Struct, frozen=True, kw_only=True):
    """``GET /healthz``: the process is alive."""

    data: HealthData


class ReadyData(Struct, frozen=True, kw_only=True):
    status: Literal["ready"] = "ready"
    nats: Literal[True] = True
    postgres: Literal[True] = True


class Ready(Struct, frozen=True, kw_only=True):
    """``GET /readyz``: NATS JetStream and PostgreSQL both answer."""

    data: ReadyData


class ReadyChecks(Struct, frozen=True, kw_only=True):
    nats: bool
    postgres: bool


class NotReady(Struct, frozen=True, kw_only=True):
    """``GET /readyz``'s 503: ``checks`` says which dependency does not answer."""

    error: Literal["not ready"]
    checks: ReadyChecks
