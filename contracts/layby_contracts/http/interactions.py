"""Bodies of the interaction doors: the list, done, answer and callback doors and the stream's
frame data (docs/doors/list.md, docs/doors/done.md, docs/doors/answer.md, docs/doors/callback.md,
docs/doors/stream.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

from layby_contracts.events import EXPIRY_KEY
from layby_contracts.http.common import Timestamp
from layby_contracts.limits import PAGE_MAX, PAGE_SIZE_MAX

NotNull = Annotated[
    Any,
    msgspec.Meta(
        description="Any JSON value but null; the question's format decides what is accepted "
        "(docs/doors/answer.md#answer-validation). An object must not carry the reserved key "
        f"`{EXPIRY_KEY}`, and no string in it may hold a NUL character.",
        extra_json_schema={"not": {"type": "null"}},
    ),
]
"""Any JSON value but null."""
PageNumber = Annotated[int, msgspec.Meta(ge=1, le=PAGE_MAX)]
PageSize = Annotated[int, msgspec.Meta(ge=1, le=PAGE_SIZE_MAX)]
Count = Annotated[int, msgspec.Meta(ge=0)]
NextPage = Annotated[int, msgspec.Meta(ge=2)] | None
"""``page + 1`` while ``page * page_size < total``, else null (docs/doors/list.md#response)."""


class MediaItem(Struct, frozen=True, kw_only=True):
    kind: Literal["image", "document", "video", "audio", "link"]
    url: str
    caption: str | UnsetType = UNSET
    filename: str | UnsetType = UNSET


class RoutingView(Struct, frozen=True, kw_only=True):
    """Who decides a routed question (docs/routing.md): ``required`` agreeing votes, of ``voters``
    when named, and whether a no vetoes."""

    required: int
    veto: bool
    voters: list[str] | UnsetType = UNSET


class VoteView(Struct, frozen=True, kw_only=True):
    """A vote cast so far: who and when (what they decided is in the history)."""

    by: str
    at: Timestamp


class PendingQuestion(Struct, frozen=True, kw_only=True):
    """A pending question: a list item, and the data of the stream's ``interaction.add`` frame
    (docs/doors/list.md#the-item). A key that does not apply is absent, never null; an external
    question's verifier is never shown, and there is never a ticket."""

    interaction_id: str
    group_id: str
    question: str
    answer_format: str
    format_payload: dict[str, Any] | None
    created_at: Timestamp
    timeout_at: Timestamp
    sensitive: bool
    server_verified: Literal[True] | UnsetType = UNSET
    channel: str | UnsetType = UNSET
    recipient: str | UnsetType = UNSET
    origin: str | UnsetType = UNSET
    audience: str | UnsetType = UNSET
    media: list[MediaItem] | UnsetType = UNSET
    routing: RoutingView | UnsetType = UNSET
    votes: list[VoteView] | UnsetType = UNSET
    """The votes so far (the list door's item; absent before the first)."""


class InteractionPageData(Struct, frozen=True, kw_only=True):
    items: Annotated[list[PendingQuestion], msgspec.Meta(max_length=PAGE_SIZE_MAX)]
    total: Count
    page: PageNumber
    page_size: PageSize
    next_page: NextPage
    truncated: Literal[False] = False


class InteractionPage(Struct, frozen=True, kw_only=True):
    """``GET /api/interactions``: one page of pending questions."""

    data: InteractionPageData


class DoneQuestion(Struct, frozen=True, kw_only=True):
    """A resolved question (docs/doors/done.md): what was answered, by whom, when and where, or
    what was removed and why. The answer is absent when sensitive, expired or removed."""

    interaction_id: str
    group_id: str
    question: str
    answer_format: str
    status: Literal["answered", "expired", "removed"]
    at: Timestamp | None
    by: str | UnsetType = UNSET
    via: Literal["inbox", "cli", "api", "callback", "channel", "expiry"] | UnsetType = UNSET
    answer: Any | UnsetType = UNSET
    sensitive: Literal[True] | UnsetType = UNSET
    reason: str | UnsetType | None = UNSET


class DonePageData(Struct, frozen=True, kw_only=True):
    items: Annotated[list[DoneQuestion], msgspec.Meta(max_length=PAGE_SIZE_MAX)]
    total: Count
    page: PageNumber
    page_size: PageSize
    next_page: NextPage


class DonePage(Struct, frozen=True, kw_only=True):
    """``GET /api/interactions/done``: one page of resolved questions, newest first."""

    data: DonePageData


class AnswerRequest(Struct, frozen=True, kw_only=True):
    """``POST /api/interactions/{id}/answer``'s body. The question's format decides which values
    are accepted, and none accepts null (docs/doors/answer.md#answer-validation); other keys are
    ignored."""

    answer: NotNull


class AnsweredData(Struct, frozen=True, kw_only=True):
    """``answered``: the answer decided the question. ``voted``: a routed question recorded it as
    one vote and waits for more (``votes`` of ``required``, docs/routing.md#quorum)."""

    interaction_id: str
    status: Literal["answered", "voted"] = "answered"
    votes: int | UnsetType = UNSET
    required: int | UnsetType = UNSET


class Answered(Struct, frozen=True, kw_only=True):
    """The answer is recorded."""

    data: AnsweredData


class DelegateRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``POST /api/interactions/{id}/delegate``'s body: hand the question to ``to``, with an
    optional ``note`` both of you see (docs/routing.md#delegation)."""

    to: str
    note: str | None = None


class DelegatedData(Struct, frozen=True, kw_only=True):
    interaction_id: str
    to: str
    status: Literal["delegated"] = "delegated"


class Delegated(Struct, frozen=True, kw_only=True):
    """The question is handed on: ``to`` may decide it now, the caller no longer."""

    data: DelegatedData


class AlreadyAnsweredData(Struct, frozen=True, kw_only=True):
    status: Literal["already_answered"] = "already_answered"


class AlreadyAnswered(Struct, frozen=True, kw_only=True):
    """A callback for a question already answered: the idempotent 200 provider retries get."""

    data: AlreadyAnsweredData


class TerminalFrame(Struct, frozen=True, kw_only=True):
    """``interaction.answered`` / ``interaction.removed`` frame data: exactly these two keys."""

    interaction_id: str
    group_id: str
