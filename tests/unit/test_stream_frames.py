"""SSE resume points and frames (docs/doors/stream.md#the-stream-door), pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from layby_contracts.events import InteractionAnswered, InteractionAsked, encode_event
from layby_server.auth import Principal
from layby_services.door.routes.stream import evicted_frame, frame, resume_point
from tests.samples import interaction_asked

pytestmark = pytest.mark.unit
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_no_id_starts_at_the_live_end_without_a_fallback() -> None:
    """An absent id is a fresh connect: tail from the end, not logged (docs/doors/stream.md#fresh-connect)."""
    assert resume_point(None, 1, 40, 10000) == (41, None)


def test_an_id_inside_the_window_resumes_right_after_it() -> None:
    """The server resumes the tail after the given id (docs/doors/stream.md#resume-with-last-event-id)."""
    assert resume_point("37", 1, 40, 10000) == (38, None)
    assert resume_point("40", 1, 40, 10000) == (41, None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("abc", "malformed"), ("-3", "malformed"), ("", "malformed"), ("99", "ahead_of_log"), ("4", "aged_out")],
)
def test_malformed_or_aged_out_ids_fall_back_to_the_tail(raw: str, reason: str) -> None:
    """A malformed or aged-out id falls back to the tail end with a reason to log (docs/doors/stream.md#fallback-to-the-tail)."""
    assert resume_point(raw, 10, 40, 10000) == (41, reason)


def test_an_id_older_than_the_resume_window_is_aged_out() -> None:
    """The resume window bounds how far back a Last-Event-ID reaches (docs/doors/stream.md#resume-window)."""
    assert resume_point("10", 1, 40, 20) == (41, "aged_out")


def _asked(audience: str | None) -> InteractionAsked:
    return interaction_asked("i1", NOW, group_id="g1", question="<b>q</b>\ndata: x", audience=audience)


def test_add_frame_carries_the_sequence_id_and_no_ticket() -> None:
    """Every frame has id: = stream sequence; add data is the pending item, never a ticket (docs/doors/stream.md#frames)."""
    out = frame(7, encode_event(_asked(None)), Principal("ops", "operator"))
    assert out is not None
    lines = out.decode().split("\n")
    assert lines[0] == "id: 7"
    assert lines[1] == "event: interaction.add"
    assert lines[2].startswith("data: {")
    assert lines[3:] == ["", ""]  # JSON keeps the newline in the question from forging a frame
    assert b"ticket" not in out
    assert b'"sensitive":false' in out


def test_terminal_frames_carry_exactly_id_and_group() -> None:
    """answered/removed data is exactly {interaction_id, group_id} (docs/doors/stream.md#frames)."""
    ev = InteractionAnswered(
        interaction_id="i1", group_id="g1", answered_by="ops", answered_at=NOW, answer="x"
    )
    out = frame(9, encode_event(ev), Principal("ops", "operator"))
    assert out == b'id: 9\nevent: interaction.answered\ndata: {"interaction_id":"i1","group_id":"g1"}\n\n'


def test_restricted_callers_see_only_frames_addressed_to_them() -> None:
    """Restricted callers get frames only for their own audience (docs/doors/stream.md#audience-filter)."""
    alice = Principal("alice", "user")
    assert frame(1, encode_event(_asked("alice")), alice) is not None
    assert frame(1, encode_event(_asked("bob")), alice) is None
    assert frame(1, encode_event(_asked(None)), alice) is None
    assert frame(1, encode_event(_asked("bob")), Principal("ops", "operator")) is not None


def test_malformed_log_messages_are_skipped() -> None:
    """Malformed events are skipped without breaking the stream (docs/doors/stream.md#skipped-events)."""
    assert frame(1, b"{not json", Principal("ops", "operator")) is None


def test_an_evicted_client_gets_a_final_frame_with_the_id_it_has_everything_up_to() -> None:
    """A client too slow for its queue gets ``stream.evicted`` whose id is where it resumes from (docs/doors/stream.md#slow-clients)."""
    assert evicted_frame(41) == b"id: 41\nevent: stream.evicted\ndata: {}\n\n"
