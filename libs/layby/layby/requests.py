"""Every command reaches the ask service the same way: one core-NATS request, its reply decoded,
its refusal raised as the error the ask service raised. What differs between callers is only how
patiently they ride out a restart of the ask service, a ``Retry`` value each
(docs/errors.md#commands-and-their-retries). The door and the SDK both use it."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TypeVar

import nats.errors
from nats.aio.client import Client as NATS

from layby_contracts.commands import REPLY_DECODER, Refused, Reply
from layby_contracts.errors import BadInput, Unavailable
from layby_contracts.refusals import from_refused

R = TypeVar("R", bound=Reply)


@dataclass(frozen=True, slots=True)
class Retry:
    """How one command request rides out an ask service that is restarting or slow."""

    tries: int | None = 1
    """Requests at most while no ask service answers (None: until the deadline)."""
    pause: float = 0.0
    """The pause after the n-th "no responders": ``pause * n`` (``growing``) or ``pause``."""
    growing: bool = True
    resend_after_timeout: bool = False
    """Whether a request whose reply did not come is sent again: only for idempotent commands."""
    timeout: float = 10.0
    """One request's wait for its reply."""
    hint: str = ""
    """Said after "no ask service answers on <subject>" when the tries are spent."""


ONCE = Retry()
"""One request (the door: its client sees 503 and may try again)."""
IDEMPOTENT = Retry(tries=6, pause=0.5, resend_after_timeout=True, hint=": start Layby with `layby up`")
"""The SDK's run and door commands: idempotent, so a slow reply is asked for again."""
NOTIFY = Retry(tries=5, pause=0.5, timeout=20.0, hint=": start Layby with `layby up`")
"""A notification is not idempotent once a channel sent it: never sent again after a timeout;
its wait is longer than the ask service's bound on its one send attempt."""
UNTIL_DEADLINE = Retry(tries=None, pause=0.2, growing=False, resend_after_timeout=True)
"""An ask or a ticket reservation: idempotent by its interaction id, tried until its deadline."""


async def request(
    nc: NATS,
    subject: str,
    payload: bytes,
    *,
    retry: Retry = ONCE,
    headers: dict[str, str] | None = None,
    deadline: float | None = None,
    what: str = "the command",
    after_timeout: str = "",
) -> Reply:
    """The ask service's reply to ``payload`` on ``subject`` (a refusal is returned, not raised).

    Spent tries are ``Unavailable``; with a ``deadline`` (``time.monotonic()``) that passes first,
    ``TimeoutError``. A payload over the server's limit is ``BadInput`` naming ``what``."""
    attempt = 0
    while True:
        attempt += 1
        timeout = retry.timeout
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            timeout = min(remaining, timeout)
        last = retry.tries is not None and attempt >= retry.tries
        try:
            msg = await nc.request(subject, payload, timeout=timeout, headers=headers)
            return REPLY_DECODER.decode(msg.data)
        except nats.errors.MaxPayloadError:
            raise BadInput(f"{what} is larger than the NATS server's max payload") from None
        except nats.errors.NoRespondersError:
            if last:
                raise Unavailable(f"no ask service answers on {subject}{retry.hint}") from None
            if not nc.is_connected and not nc.is_reconnecting:
                raise Unavailable(f"the NATS connection is closed ({subject})") from None
            pause = retry.pause * attempt if retry.growing else retry.pause
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(pause)
        except (nats.errors.TimeoutError, TimeoutError):
            if last or not retry.resend_after_timeout:
                raise Unavailable(f"the ask service did not answer on {subject}{after_timeout}") from None


def expect(reply: Reply, kind: type[R], what: str, *, interaction_id: str = "") -> R:
    """``reply`` as the ``kind`` a command expects; a refusal raised as the error it names."""
    if isinstance(reply, Refused):
        raise from_refused(reply, interaction_id=interaction_id)
    if not isinstance(reply, kind):
        raise Unavailable(f"the ask service answered {what} with something else")
    return reply


__all__ = ["IDEMPOTENT", "NOTIFY", "ONCE", "UNTIL_DEADLINE", "Retry", "expect", "request"]
