"""``external``: an action on an outside surface (sign, approve, pay), answered only through
the question's callback URL — by the outside system, or by a person tapping a channel's link.
The ask carries the ``link`` a person visits (unless a channel delivers the callback URL
itself), an optional ``schema`` the callback's JSON must match, and an optional ``verifier``
binding that checks the provider's signature (docs/asking.md#external-questions).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from layby_contracts.errors import BadInput
from layby_contracts.formats import ExternalPayload, FormatPayload, FormPayload
from layby_domain.formats._base import AskInputs, Format
from layby_domain.formats.form import FORM, check_schema
from layby_domain.verifiers import check_binding


class External(Format):
    name = "external"
    control = "link"
    page = "confirm"
    answered_at_the_door = False
    ticketed = True

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        self._refuse_options(ask.options)
        self._refuse_form_extras(ask.data, ask.pages)
        return external_payload(ask.schema, ask.verifier, ask.link_url, ask.channel)

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        raise BadInput("external interactions are answered via their callback URL")

    def check_callback_answer(self, payload: FormatPayload, answer: dict[str, Any]) -> dict[str, Any]:
        """The callback's JSON object, checked against the question's ``schema`` when it has one
        (the door's form message on a mismatch)."""
        assert isinstance(payload, ExternalPayload)
        if payload.schema is not None:
            FORM.check_answer(FormPayload(schema=payload.schema), answer)
        return answer

    def frame(self, payload: dict[str, Any] | None) -> dict[str, Any]:
        """The verifier binding never leaves the server; clients learn only that there is one."""
        if payload is None or "verifier" not in payload:
            return {"format_payload": payload}
        shown = {k: v for k, v in payload.items() if k != "verifier"}
        return {"format_payload": shown, "server_verified": True}


EXTERNAL = External()


def external_payload(
    schema: object, verifier: object, link_url: object, channel: object = None
) -> dict[str, Any]:
    """``{"url"?, "schema"?, "verifier"?}`` of an external question
    (docs/aggregates/interaction.md#the-recorded-question); a channel
    question has no link (the channel delivers the callback URL itself)."""
    payload: dict[str, Any] = {}
    if channel is None:
        if not isinstance(link_url, str) or not link_url:
            raise BadInput("answer_format 'external' requires a link (or a channel)", field="link")
        check_link_url(link_url)
        payload["url"] = link_url
    if schema is not None:
        payload["schema"] = check_schema(schema)
    if verifier is not None:
        payload["verifier"] = check_binding(verifier)
    return payload


def check_link_url(url: str) -> None:
    """The final URL a person visits: an absolute http(s) URL on one line, at most 8192 chars."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput("link must produce an absolute http:// or https:// URL", field="link")
    if len(url) > 8192 or any(c.isspace() or ord(c) < 32 for c in url):
        raise BadInput("link must be a single-line URL of at most 8192 characters", field="link")
