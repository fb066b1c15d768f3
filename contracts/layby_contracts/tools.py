"""The arguments of Layby's agent tools (docs/mcp.md#tools): what an MCP client passes to
``ask_user``, ``list_parked``, ``resume_parked`` and ``cancel_parked``. ``notify_user`` takes the
notification door's own body (``layby_contracts.http.notifications.NotifyRequest``).

The tools' JSON schemas are generated from these Structs (``msgspec.json.schema``); unknown keys
are refused (``forbid_unknown_fields``: ``additionalProperties: false`` in the schema). They are
additive: a door that takes the same arguments may decode its body into ``AskArgs`` as well.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from layby_contracts.events import MediaItem
from layby_contracts.formats import FORMAT_NAMES

AnswerFormat = Annotated[
    str,
    msgspec.Meta(
        description="the answer format (docs/asking.md#answer-formats)",
        extra_json_schema={"enum": list(FORMAT_NAMES)},
    ),
]
"""Any registered format's name: the registry names them (``FORMAT_NAMES``), so the schema an
agent sees lists exactly the formats the ask service accepts, which checks the name again."""


class AskArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """A synchronous question to a person, with the arguments of ``layby.ask_user`` that travel
    as JSON (docs/asking.md): the answer ``format`` and its ``options`` or form ``schema`` (with
    ``data`` and ``pages``), display-only ``media``, the ``audience`` who may answer, the
    ``channel`` (one name or several) and its ``recipient``, the chat ``on_mismatch``,
    ``mismatch_notice`` and ``reply_ids``, an external question's ``link`` template and
    ``verifier``, the ``timeout`` in seconds, whether the answer is ``sensitive``, and the
    ``notify_url`` its outcome is POSTed to."""

    question: str
    answer_format: AnswerFormat = "text"
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    pages: list[dict[str, Any]] | None = None
    media: list[MediaItem] | None = None
    timeout: float | None = None
    group_id: str | None = None
    audience: str | None = None
    sensitive: bool = False
    channel: str | list[str] | None = None
    recipient: str | dict[str, str] | None = None
    on_mismatch: Literal["retry", "bridge"] | None = None
    mismatch_notice: str | None = None
    reply_ids: list[str] | None = None
    link: str | None = None
    """An external question's link template: it must contain the literal ``{callback_url}``."""
    verifier: dict[str, Any] | None = None
    notify_url: str | None = None
    """An https URL the question's outcome is POSTed to, signed (docs/webhooks.md)."""


class ListParkedArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Every entry parked on the subject of the run ``run_id`` (docs/caller-asks.md)."""

    run_id: str


class ResumeParkedArgs(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """Resume the asking entry ``id`` on the subject of the run ``run_id`` with ``payload`` as its
    answer; without ``payload``, take that finished waiting outcome. ``wait``: seconds to wait for
    the resumed chain's next outcome before reporting ``running``."""

    run_id: str
    id: str
    payload: Any = msgspec.UNSET
    wait: float = 60.0


class CancelParkedArgs(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Whole-chain kill each named entry on the subject of the run ``run_id``."""

    run_id: str
    ids: list[str]
