"""Sizing: the bytes the event log stores per ask → answer cycle and per park → resume cycle.

    python bench/event_sizes.py [--per-minute 1000]

Each event is the test suite's golden sample (tests/unit/golden/) with real-sized identifiers,
encoded by ``layby_contracts.events.encode_event`` as the services encode it. A stored message
also carries its subject, its headers (``Nats-Msg-Id``, the expected sequence) and the file
store's record framing; all three are counted. Prints each cycle's bytes and a year's disk at
the given rate (docs/operations.md#sizing).
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

import msgspec

from layby_contracts.events import Event, decode_event, encode_event
from layby_contracts.subjects import Names

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "unit" / "golden"
RECORD_FRAMING = 22 + 8
"""The file store's per-message record header and its checksum (nats-server filestore)."""
YEAR_MINUTES = 365 * 24 * 60


def _golden(tag: str, **changes: object) -> Event:
    event = decode_event((GOLDEN / f"{tag}.json").read_bytes())
    return msgspec.structs.replace(event, **changes)


def _stored(subject: str, event: Event, *, expected_seq: bool) -> int:
    """Bytes one appended event takes in the stream: payload, subject, headers, framing."""
    headers = f"NATS/1.0\r\nNats-Msg-Id: {type(event).__name__}-{uuid.uuid4()}\r\n"
    if expected_seq:
        headers += "Nats-Expected-Last-Subject-Sequence: 123456789\r\n"
    headers += "\r\n"
    return len(encode_event(event)) + len(subject) + len(headers) + RECORD_FRAMING


def ask_cycle(names: Names) -> list[tuple[str, int, int]]:
    """A sync question to a person, answered: ``asked`` then ``answered`` on its subject."""
    ix, group = str(uuid.uuid4()), str(uuid.uuid4())
    waiter = uuid.uuid4().hex
    asked = _golden("interaction.asked.v1", interaction_id=ix, group_id=group, waiter=waiter)
    answered = _golden(
        "interaction.answered.v1", interaction_id=ix, group_id=group, waiter=waiter, via="inbox"
    )
    subject = names.ix(ix)
    return [
        (type(e).__name__, len(encode_event(e)), _stored(subject, e, expected_seq=True))
        for e in (asked, answered)
    ]


def park_cycle(names: Names) -> list[tuple[str, int, int]]:
    """A run parks on one question and resumes with its answer: ``run.parked``, the park's
    ``asked`` and ``answered``, ``run.resumed``."""
    run_id, ix = str(uuid.uuid4()), str(uuid.uuid4())
    parked = _golden("run.parked.v1", run_id=run_id)
    asked = _golden("interaction.asked.v1", interaction_id=ix, group_id=ix, mode="async", run_id=run_id)
    answered = _golden("interaction.answered.v1", interaction_id=ix, group_id=ix, run_id=run_id, via="inbox")
    resumed = _golden("run.resumed.v1", run_id=run_id, resume_id=f"{run_id}:1")
    events = [
        (names.run(run_id), parked),
        (names.ix(ix), asked),
        (names.ix(ix), answered),
        (names.run(run_id), resumed),
    ]
    return [(type(e).__name__, len(encode_event(e)), _stored(s, e, expected_seq=True)) for s, e in events]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-minute", type=int, default=1000)
    rate = parser.parse_args().per_minute
    names = Names()
    for title, rows in (("ask -> answer", ask_cycle(names)), ("park -> resume", park_cycle(names))):
        print(f"{title}:")
        for name, payload, stored in rows:
            print(f"  {name:22} payload {payload:4} B   stored {stored:4} B")
        total = sum(stored for _, _, stored in rows)
        year = total * rate * YEAR_MINUTES
        print(
            f"  cycle: {total} B stored; {rate}/min for a year: {year / 1e9:.1f} GB ({year / 2**30:.1f} GiB)"
        )


if __name__ == "__main__":
    main()
