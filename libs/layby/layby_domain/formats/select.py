"""``select``: the answer is one of the question's ``options``."""

from __future__ import annotations

from typing import Any

from layby_contracts.errors import BadInput
from layby_contracts.formats import FormatPayload, SelectPayload
from layby_domain.formats._base import AskInputs, Format, check_options


class Select(Format):
    name = "select"
    control = "choice"

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        if ask.options is None:
            raise BadInput("answer_format 'select' requires a non-empty options list", field="options")
        options = check_options(ask.options)
        self._refuse_form_extras(ask.data, ask.pages)
        self._refuse_schema(ask.schema)
        self._refuse_verifier(ask.verifier)
        return {"options": options}

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        assert isinstance(payload, SelectPayload)
        if not isinstance(answer, str) or answer not in payload.options:
            raise BadInput(f"answer must be one of {payload.options!r}")
        return answer

    def choices(self, payload: FormatPayload) -> list[str] | None:
        assert isinstance(payload, SelectPayload)
        return payload.options

    def typed_reply(self, payload: FormatPayload, text: str) -> Any:
        return text.strip()

    def delivery(self, payload: FormatPayload) -> dict[str, Any]:
        assert isinstance(payload, SelectPayload)
        return {"options": payload.options}


SELECT = Select()
