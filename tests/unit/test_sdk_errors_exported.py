"""Every error class a Layby service can raise to an SDK user is importable from ``layby.errors``
(docs/errors.md#the-classes-and-what-happens-next)."""

from __future__ import annotations

import inspect

import pytest

import layby.errors
from layby_contracts import errors as contract_errors

pytestmark = pytest.mark.unit


def test_every_layby_error_class_is_exported_by_layby_errors() -> None:
    defined = {
        name
        for name, value in vars(contract_errors).items()
        if inspect.isclass(value)
        and issubclass(value, contract_errors.LaybyError)
        and value.__module__ == contract_errors.__name__
    }
    assert defined - set(layby.errors.__all__) == set()
    assert all(getattr(layby.errors, name) is getattr(contract_errors, name) for name in defined)
