"""The shared tail's direct writes to a stream response's connection (docs/doors/stream.md#one-shared-tail), pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from layby_services.door.protocol import DirectBody

pytestmark = pytest.mark.unit


@dataclass
class _Transport:
    written: list[bytes] = field(default_factory=list)
    closing: bool = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing


@dataclass
class _Flow:
    write_paused: bool = False


@dataclass
class _Cycle:
    """The parts of uvicorn's request cycle a direct write looks at."""

    transport: _Transport = field(default_factory=_Transport)
    flow: _Flow = field(default_factory=_Flow)
    disconnected: bool = False
    response_started: bool = True
    response_complete: bool = False
    chunked_encoding: bool | None = True


def _body(cycle: _Cycle) -> DirectBody:
    return DirectBody(cycle)  # type: ignore[arg-type]  # the cycle's parts it reads


def test_a_started_chunked_open_response_with_room_is_written_directly() -> None:
    """The chunk goes straight to the socket when that is what the response's own send would do."""
    cycle = _Cycle()
    assert _body(cycle).write(b"5\r\nhello\r\n") is True
    assert cycle.transport.written == [b"5\r\nhello\r\n"]


@pytest.mark.parametrize(
    "change",
    [
        {"response_started": False},
        {"chunked_encoding": None},
        {"response_complete": True},
        {"disconnected": True},
    ],
)
def test_a_direct_write_is_refused_unless_the_response_could_take_it_now(change: dict[str, Any]) -> None:
    """Before the headers, without chunked encoding, after the end or on a lost connection the
    tail queues the frame for the response's own send instead."""
    cycle = _Cycle(**change)
    assert _body(cycle).write(b"x") is False
    assert cycle.transport.written == []


def test_a_socket_over_its_high_water_mark_or_closing_is_not_written_to() -> None:
    """A slow client's frames wait in its bounded queue, never in the socket's buffer."""
    paused = _Cycle(flow=_Flow(write_paused=True))
    closing = _Cycle(transport=_Transport(closing=True))
    assert _body(paused).write(b"x") is False
    assert _body(closing).write(b"x") is False
    assert paused.transport.written == closing.transport.written == []
