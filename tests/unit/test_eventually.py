"""The tests' one way to wait: ``eventually`` polls for a condition and, when it never comes,
fails saying what it waited for and what it saw last."""

from __future__ import annotations

import itertools

import pytest

from tests.helpers import eventually, eventually_sync

pytestmark = pytest.mark.unit


async def test_it_returns_the_first_value_that_holds_from_a_sync_or_async_probe() -> None:
    """The probe may be sync or async; the value that satisfied the wait is returned."""
    counter = itertools.count()

    async def grows() -> int:
        return next(counter)

    assert await eventually(grows, "a count of 3", until=lambda n: n >= 3, interval=0) == 3
    assert await eventually(lambda: ["found"], "a non-empty list") == ["found"]


async def test_a_wait_that_never_holds_fails_naming_what_and_the_last_value() -> None:
    """A timeout is an AssertionError with the description and the last value seen."""
    with pytest.raises(AssertionError, match=r"waiting for the answer; it last saw \{'total': 0\}"):
        await eventually(lambda: {"total": 0}, "the answer", until=lambda b: b["total"] == 1, timeout=0.05)


async def test_an_exception_counts_as_not_yet_and_the_last_one_is_reported() -> None:
    """A probe that raises is retried; on timeout the failure names the last exception."""

    def refuses() -> None:
        raise ConnectionRefusedError("no door yet")

    with pytest.raises(AssertionError, match=r"its last try raised ConnectionRefusedError\('no door yet'\)"):
        await eventually(refuses, "the door", timeout=0.05)


async def test_an_exception_outside_retry_propagates_at_once() -> None:
    """Only the ``retry`` classes mean "not yet"; anything else is a failure now."""

    def broken() -> None:
        raise KeyError("items")

    with pytest.raises(KeyError):
        await eventually(broken, "the items", retry=ConnectionError, timeout=5)


def test_the_sync_variant_waits_and_fails_alike() -> None:
    """``eventually_sync`` polls a sync probe with the same result and failure."""
    counter = itertools.count()
    assert eventually_sync(lambda: next(counter), "a count of 2", until=lambda n: n >= 2, interval=0) == 2
    with pytest.raises(AssertionError, match=r"waiting for a process; it last saw None"):
        eventually_sync(lambda: None, "a process", timeout=0.05)
