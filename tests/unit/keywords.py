"""The domain's checks called with keywords, as the tests write their cases: each builds the
Struct the check takes (``Question``, ``NotificationFields``) from them."""

from __future__ import annotations

from typing import Any

from layby_contracts.notification import NotificationFields
from layby_contracts.question import Question
from layby_domain.notify import NotifySpec
from layby_domain.notify import validate_notify as _validate_notify
from layby_domain.validation import AskSpec
from layby_domain.validation import validate_ask as _validate_ask


def validate_ask(question: Any, *, default_timeout: float = 3600.0, **fields: Any) -> AskSpec:
    """``validate_ask`` of the ``Question`` these keywords make."""
    return _validate_ask(Question(question=question, **fields), default_timeout=default_timeout)


def validate_notify(message: Any, **fields: Any) -> NotifySpec:
    """``validate_notify`` of the ``NotificationFields`` these keywords make."""
    return _validate_notify(NotificationFields(message=message, **fields))
