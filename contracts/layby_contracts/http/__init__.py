"""HTTP bodies of the doors: what a client sends and gets. They are not events
(docs/engineering.md#http-bodies-are-not-events): no internal event is serialized straight to a
client. The door's handlers take and return these Structs, and the door's OpenAPI document is
generated from them (docs/doors/common.md#the-openapi-document).

A key that does not apply is absent (``UNSET``), never null, wherever the doors leave it out.
"""

from layby_contracts.http.common import Error, Health, HealthData, NotReady, Ready, ReadyChecks, ReadyData
from layby_contracts.http.interactions import (
    AlreadyAnswered,
    AlreadyAnsweredData,
    Answered,
    AnsweredData,
    AnswerRequest,
    DonePage,
    DonePageData,
    DoneQuestion,
    InteractionPage,
    InteractionPageData,
    MediaItem,
    PendingQuestion,
    TerminalFrame,
)
from layby_contracts.http.messages import InboundMessage
from layby_contracts.http.runs import (
    RUN_STATUSES,
    Cancelled,
    CancelledData,
    OldestOpen,
    Retried,
    RetriedData,
    Run,
    RunAsk,
    RunCounts,
    RunDetail,
    RunPage,
    RunPageData,
    RunsSummary,
    RunsSummaryData,
    RunStatus,
    RunSummary,
    Worker,
    Workers,
    WorkersData,
)

__all__ = [
    "RUN_STATUSES",
    "AlreadyAnswered",
    "AlreadyAnsweredData",
    "AnswerRequest",
    "Answered",
    "AnsweredData",
    "Cancelled",
    "CancelledData",
    "DonePage",
    "DonePageData",
    "DoneQuestion",
    "Error",
    "Health",
    "HealthData",
    "InboundMessage",
    "InteractionPage",
    "InteractionPageData",
    "MediaItem",
    "NotReady",
    "OldestOpen",
    "PendingQuestion",
    "Ready",
    "ReadyChecks",
    "ReadyData",
    "Retried",
    "RetriedData",
    "Run",
    "RunAsk",
    "RunCounts",
    "RunDetail",
    "RunPage",
    "RunPageData",
    "RunStatus",
    "RunSummary",
    "RunsSummary",
    "RunsSummaryData",
    "TerminalFrame",
    "Worker",
    "Workers",
    "WorkersData",
]
