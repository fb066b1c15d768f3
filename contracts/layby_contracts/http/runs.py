"""Bodies of the run doors (docs/doors/runs.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import UNSET, Struct, UnsetType

from layby_contracts.http.common import Timestamp
from layby_contracts.http.interactions import Count, NextPage, PageNumber, PageSize
from layby_contracts.limits import FLOW_VERSION_MAX, PAGE_SIZE_MAX

RunStatus = Literal["running", "parked", "resumed", "finished", "failed", "cancelled"]
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)


class RunSummary(Struct, frozen=True, kw_only=True):
    """A run in the runs list; ``expiry_at`` (the current park's earliest deadline) only while
    parked."""

    run_id: str
    flow: str
    identity: str
    status: RunStatus
    generation: Count
    created_at: Timestamp | None
    updated_at: Timestamp | None
    steps: Count
    version: Annotated[int, msgspec.Meta(ge=1)] = 1
    """The version of its flow the run is on (docs/versions.md)."""
    expiry_at: Timestamp | UnsetType | None = UNSET


class RunPageData(Struct, frozen=True, kw_only=True):
    items: Annotated[list[RunSummary], msgspec.Meta(max_length=PAGE_SIZE_MAX)]
    total: Count
    page: PageNumber
    page_size: PageSize
    next_page: NextPage


class RunPage(Struct, frozen=True, kw_only=True):
    """``GET /api/runs``: one page of runs, most recently active first."""

    data: RunPageData


class RunAsk(Struct, frozen=True, kw_only=True):
    """One question of a run's current park."""

    interaction_id: str
    question: str
    expiry_at: Timestamp
    status: Literal["pending", "answered", "expired", "removed"]
    answered_by: str | UnsetType = UNSET
    audience: str | UnsetType = UNSET
    channel: str | UnsetType = UNSET
    recipient: str | UnsetType = UNSET


class RunCall(Struct, frozen=True, kw_only=True):
    """A run this run called (``layby.call``) and is parked waiting for."""

    run_id: str
    flow: str


class RunDetail(RunSummary, frozen=True, kw_only=True):
    """One run: a RunSummary's keys, then those of its status; keys that do not apply to its status
    are absent: ``asks`` and ``open`` while parked or resumed, ``result`` once finished, ``error``
    once failed."""

    asks: list[RunAsk] | UnsetType = UNSET
    open: list[str] | UnsetType = UNSET
    calls: list[RunCall] | UnsetType = UNSET
    resumed_interactions: list[str] | UnsetType = UNSET
    """The caller asks this run resumed, took or cancelled with its generic tools."""
    resume_id: str | UnsetType = UNSET
    result: Any | UnsetType = UNSET
    error: str | UnsetType = UNSET
    cancelled_by: str | UnsetType = UNSET
    retried_by: str | UnsetType = UNSET
    warning: str | UnsetType = UNSET
    """A run that no live worker serves (its flow, or its flow's version) says so: it waits."""


class Run(Struct, frozen=True, kw_only=True):
    """``GET /api/runs/{run_id}``."""

    data: RunDetail


class RunCounts(Struct, frozen=True, kw_only=True):
    """How many runs this caller may see are in each status."""

    running: Count
    parked: Count
    resumed: Count
    finished: Count
    failed: Count
    cancelled: Count


class OldestOpen(Struct, frozen=True, kw_only=True):
    interaction_id: str
    run_id: str
    flow: str
    question: str
    created_at: Timestamp | None
    expiry_at: Timestamp | None
    audience: str | UnsetType = UNSET


class RunsSummaryData(Struct, frozen=True, kw_only=True):
    counts: RunCounts
    total: Count
    flows: list[str]
    oldest_open: OldestOpen | None


class RunsSummary(Struct, frozen=True, kw_only=True):
    """``GET /api/runs/summary``: the counts, the flows and the oldest question a run waits on."""

    data: RunsSummaryData


class CancelledData(Struct, frozen=True, kw_only=True):
    run_id: str
    status: Literal["cancelled"]
    was: Literal["running", "parked"]
    cancelled_by: str


class Cancelled(Struct, frozen=True, kw_only=True):
    """A parked run's pending questions have left the inbox."""

    data: CancelledData


class RetriedData(Struct, frozen=True, kw_only=True):
    run_id: str
    status: Literal["resumed"]
    generation: Annotated[int, msgspec.Meta(ge=1)]
    retried_by: str | None


class Retried(Struct, frozen=True, kw_only=True):
    """The run executes again from its last recorded step or park."""

    data: RetriedData


class MoveRunRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Move the run to ``version`` of its flow (docs/versions.md#moving-runs)."""

    version: Annotated[int, msgspec.Meta(ge=1, le=FLOW_VERSION_MAX)]


class MovedData(Struct, frozen=True, kw_only=True):
    run_id: str
    version: Annotated[int, msgspec.Meta(ge=1)]
    from_version: Annotated[int, msgspec.Meta(ge=1)] | None
    """None when the run was on ``version`` already (nothing was recorded)."""
    status: Literal["parked", "resumed", "failed"]
    moved_by: str | None


class Moved(Struct, frozen=True, kw_only=True):
    """The run is on ``version`` now: parked, it waits for its questions; resumed, a worker of the
    new version executes it; failed, a retry runs on it."""

    data: MovedData


class Worker(Struct, frozen=True, kw_only=True):
    worker_id: str
    identity: str
    host: str | None
    pid: int | None
    flows: list[str]
    concurrency: int | None
    alive: bool
    started_at: Timestamp | None
    seen_at: Timestamp | None
    versions: dict[str, int] | UnsetType = UNSET
    """The version of each flow it serves where that is not 1 (docs/versions.md)."""


class WorkersData(Struct, frozen=True, kw_only=True):
    items: list[Worker]
    alive: Count


class Workers(Struct, frozen=True, kw_only=True):
    """``GET /api/workers``: workers seen in the last hour."""

    data: WorkersData
