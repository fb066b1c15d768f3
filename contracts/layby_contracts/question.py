"""The question's fields, declared once (docs/asking.md): every body that carries a question —
the HTTP ask door's ``AskRequest``, the MCP tool's ``AskArgs``, the ``Ask`` command — derives
from ``QuestionFields``, so a new ask argument is one field here and every surface has it.

Two branches share the base. ``AskFields`` is the question as its asker writes it (the SDK's
``ask_user``, the HTTP body, the agent tool): an external question's ``link`` template, one
channel or several with their recipients, and the chat options. ``Question`` is what the ask's
rules judge (``layby_domain.validation.validate_ask``): one channel and its recipient (the others
travel in ``Ask.chat``), the final ``link_url``, the wait (``mode``, ``expiry_at``) and a caller
ask's ``to``, ``payload`` and ``on_expiry``. ``Ask`` is a ``Question`` with what the command adds.

Every class here refuses unknown fields and leaves defaults out when encoded (commands and HTTP
input do; docs/engineering.md#evolving-event-schemas). JSON key order follows the field order
(base first) and means nothing to a reader.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from layby_contracts.events import MediaItem, Routing
from layby_contracts.formats import FORMAT_NAMES

AnswerFormat = Annotated[
    str,
    msgspec.Meta(
        description="the answer format (docs/asking.md#answer-formats)",
        extra_json_schema={"enum": list(FORMAT_NAMES)},
    ),
]
"""Any registered format's name: the registry names them (``FORMAT_NAMES``), so the schema a
reader sees lists exactly the formats the ask service accepts, which checks the name again."""

MismatchPolicy = Annotated[str, msgspec.Meta(extra_json_schema={"enum": ["bridge", "retry"]})]
"""``retry`` or ``bridge`` (docs/channels.md#replies). A plain string on the wire so that a wrong
value is refused by the ask's rules with their documented message, naming ``on_mismatch``; the
schema lists the two values."""


class QuestionFields(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """What every body carrying a question has: the text, its answer format and the format's
    arguments (``options``, form ``schema`` with ``data`` and ``pages``, an external question's
    ``verifier``, a review's ``action`` and ``decisions``), display-only ``media``, the
    ``timeout`` in seconds, the ``group_id``, the ``audience`` who may answer, whether the
    answer is ``sensitive``, and the ``notify_url``."""

    question: str
    answer_format: AnswerFormat = "text"
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    timeout: float | None = None
    group_id: str | None = None
    audience: str | None = None
    sensitive: bool = False
    media: list[MediaItem] | None = None
    data: dict[str, Any] | None = None
    pages: list[dict[str, Any]] | None = None
    verifier: dict[str, Any] | None = None
    notify_url: str | None = None
    """An https URL the question's outcome is POSTed to, signed (docs/webhooks.md)."""
    action: dict[str, Any] | None = None
    """review: the proposed action (``name``, ``arguments``, ``schema``, ``description``)."""
    decisions: list[str] | None = None
    """review: what the reviewer may decide (``accept``, ``edit``, ``reject``, ``respond``)."""
    routing: Routing | None = None
    """Who decides and what happens while nobody does: quorum, escalation, reminders
    (docs/routing.md)."""


class AskFields(QuestionFields, frozen=True, kw_only=True):
    """The question as its asker writes it (``ask_user``, ``POST /api/asks``, the ``ask_user``
    tool): a ``link`` template, one channel or several, and the chat options."""

    link: str | None = None
    """An external question's link template: it must contain the literal ``{callback_url}``."""
    channel: str | list[str] | None = None
    recipient: str | dict[str, str] | None = None
    on_mismatch: MismatchPolicy | None = None
    mismatch_notice: str | None = None
    reply_ids: list[str] | None = None


class Question(QuestionFields, frozen=True, kw_only=True):
    """The question as the ask's rules judge it: one ``channel`` and its ``recipient`` (more
    channels travel in ``Ask.chat``), the final ``link_url``, the wait, and a caller ask's
    fields."""

    mode: Literal["sync", "async"] = "sync"
    expiry_at: datetime | None = None
    link_url: str | None = None
    """external: the final URL the person visits (the SDK built it around the callback URL)."""
    channel: str | None = None
    """A registered channel delivers the question (the delivery service mints its ticket)."""
    recipient: str | None = None
    """Where on the channel (a chat id, a phone number); the channel's default when unset."""
    to: Literal["user", "caller"] = "user"
    """``caller``: ask the run that called this one (docs/caller-asks.md); async only."""
    payload: Any = None
    """A caller ask's structured value; refused on a ``to="user"`` ask."""
    on_expiry: Literal["kill", "resume"] | None = None
    """A caller ask's deadline behaviour (default ``kill``)."""


def question_fields(body: QuestionFields) -> dict[str, Any]:
    """The base's fields of a body carrying a question, by name: what another body of the
    question takes from it as it is (``Question(**question_fields(request), ...)``)."""
    return {name: getattr(body, name) for name in QuestionFields.__struct_fields__}
