"""The HTTP ask doors' bodies (docs/doors/asks.md): ``POST /api/asks`` records a question,
``GET /api/interactions/{id}/outcome`` reads what became of it, ``DELETE
/api/interactions/{id}`` withdraws it; and ``POST /api/runs`` starts a run (docs/doors/runs.md#start).

``AskRequest`` is the SDK's ``ask_user`` as a JSON object: one key per argument that makes sense
without a waiting process. Its fields are the question's (``layby_contracts.question.AskFields``),
declared once for every body that carries a question."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType

from layby_contracts.limits import FLOW_VERSION_MAX
from layby_contracts.question import AskFields

OUTCOME_STATUSES = ("pending", "answered", "expired", "removed")


class AskRequest(AskFields, frozen=True, kw_only=True):
    """A question, as ``ask_user`` takes it (docs/asking.md). ``timeout`` (seconds) is the
    question's deadline; left out, the server's INTERACTIONS_ANSWER_TIMEOUT_SECONDS.
    ``link``: an ``external`` question's template holding ``{callback_url}``. ``channel`` is one
    name or several, ``recipient`` one recipient or a mapping of channel to recipient."""


class AskCreatedData(Struct, frozen=True, kw_only=True):
    interaction_id: str
    group_id: str
    timeout_at: str


class AskCreated(Struct, frozen=True, kw_only=True):
    """The recorded question: its id (read its outcome with it), its group and its deadline."""

    data: AskCreatedData


class OutcomeData(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``pending`` (the wait ended first), ``answered`` (with ``answer``; a sensitive answer's
    value only to the identity that asked, else ``answer`` is absent), ``expired`` (its deadline
    passed unanswered) or ``removed`` (with ``reason``: ``cancelled``, ``delivery_failed``, ...)."""

    interaction_id: str
    status: Literal["pending", "answered", "expired", "removed"]
    timeout_at: str
    answer: Any | UnsetType = UNSET
    sensitive: bool | UnsetType = UNSET
    answered_by: str | UnsetType = UNSET
    answered_at: str | UnsetType = UNSET
    params: dict[str, Any] | UnsetType = UNSET
    reason: str | UnsetType = UNSET
    detail: str | UnsetType = UNSET


class Outcome(Struct, frozen=True, kw_only=True):
    data: OutcomeData


class WithdrawnData(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``pruned``: removed now (reason ``cancelled``); ``answered``: an answer won first (read it
    at the outcome door); ``gone``: removed earlier (``reason`` says why)."""

    interaction_id: str
    outcome: Literal["pruned", "answered", "gone"]
    reason: str | UnsetType = UNSET


class Withdrawn(Struct, frozen=True, kw_only=True):
    data: WithdrawnData


class StartRunRequest(Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """Start a run of ``flow`` with ``input`` (any JSON). ``run_id`` (a lowercase uuid4) makes the
    start idempotent: the same start again answers the same run."""

    flow: str
    input: Any = None
    run_id: str | None = None
    version: Annotated[int, msgspec.Meta(ge=1, le=FLOW_VERSION_MAX)] | None = None
    """The flow version to run on; absent: the newest a live worker serves (docs/versions.md)."""


class RunStartData(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``warning``: no live worker serves the flow now; the run is recorded and starts once one does."""

    run_id: str
    warning: str | UnsetType = UNSET


class RunStart(Struct, frozen=True, kw_only=True):
    data: RunStartData
