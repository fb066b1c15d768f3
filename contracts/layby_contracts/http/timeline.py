"""The run timeline door's body (docs/doors/runs.md#the-timeline): what ``GET /api/runs/{run_id}/timeline``
answers — every recorded event of one run and of the questions it asked, in time order, with the
wait before each."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

from layby_contracts.limits import PAGE_MAX, PAGE_SIZE_MAX

TimelineKind = Literal[
    "started",
    "step",
    "parked",
    "asked",
    "voted",
    "escalated",
    "reminded",
    "delegated",
    "answered",
    "removed",
    "resumed",
    "retried",
    "moved",
    "finished",
    "failed",
    "cancelled",
]


class TimelineEntry(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One thing that happened to a run: ``kind``, when (``at``), the milliseconds since the entry
    before it (``after_ms``: the wait), who did it (``by``) and where (``via``, ``channels``); a
    question's entries name it (``interaction_id``, ``question``); a step its ``name``, its
    ``attempts`` and its ``error``; ``detail`` says the rest (a removal's reason, a failure's
    error, a flow's name)."""

    kind: TimelineKind
    at: datetime
    after_ms: int
    generation: int | None = None
    by: str | None = None
    via: str | None = None
    channels: list[str] | None = None
    interaction_id: str | None = None
    question: str | None = None
    name: str | None = None
    attempts: int | None = None
    error: str | None = None
    answer: Any | UnsetType = UNSET
    detail: str | None = None


class TimelineBlock(Struct, frozen=True, kw_only=True):
    run_id: str
    flow: str
    entries: Annotated[list[TimelineEntry], msgspec.Meta(max_length=PAGE_SIZE_MAX)]
    total: Annotated[int, msgspec.Meta(ge=0)]
    page: Annotated[int, msgspec.Meta(ge=1, le=PAGE_MAX)]
    page_size: Annotated[int, msgspec.Meta(ge=1, le=PAGE_SIZE_MAX)]
    next_page: Annotated[int, msgspec.Meta(ge=2)] | None


class TimelineView(Struct, frozen=True, kw_only=True):
    """``GET /api/runs/{run_id}/timeline``: one page of a run's timeline, oldest first."""

    data: TimelineBlock
