"""What a failed Twilio call means for the delivery service: retry or give up
(docs/channels.md#twilio-errors).

Twilio answers a refused request with ``{"code", "message", "more_info", "status"}``; the SDK
raises it as ``TwilioRestException`` (``TwilioServiceException`` for the newer problem-details
shape). Rate limits, Twilio's own faults and the network are retried; everything else is the
recipient's, the sender's or the account's problem, which another attempt cannot fix."""

from __future__ import annotations

import asyncio

import aiohttp
from twilio.base.exceptions import TwilioException, TwilioRestException, TwilioServiceException

from layby_contracts.channels import ChannelDeliveryError, ChannelInputError

RETRYABLE_CODES = frozenset({20429, 20500, 20503, 30001})
"""Too many requests, Twilio's internal error and unavailability, its queue overflowing."""
FINAL_CODES: dict[int, str] = {
    20003: "authentication failed (check account_sid and auth_token)",
    21211: "the To number is not a valid phone number",
    21408: "the account may not send to this region",
    21606: "the From number cannot send messages",
    21608: "a trial account may only send to verified numbers",
    21610: "the recipient has unsubscribed (replied STOP)",
    21612: "Twilio cannot route a message between these From and To numbers",
    21614: "the To number is not a mobile number",
    21617: "the body is over 1,600 characters",
    63007: "the WhatsApp sender is not a WhatsApp channel of this account",
    63016: "outside the 24-hour WhatsApp window: the person must write first",
}
"""Refusals another attempt cannot change, with what they mean in our words."""
ACCOUNT_CODES = frozenset({20003, 21408, 21606, 21608, 63007})
"""Final refusals caused by the account's own set-up (credentials, permissions, the sender), not
by what was sent or to whom: a plain final failure, never an input refusal (so a notification
gets 502, not 400)."""


def delivery_error(channel: str, exc: BaseException) -> ChannelDeliveryError:
    """``exc`` (raised by a Twilio call) as a ``ChannelDeliveryError`` that says whether another
    attempt may succeed, naming Twilio's code and reason (never a credential)."""
    where = f"twilio {channel!r}"
    if isinstance(exc, TwilioRestException | TwilioServiceException):
        status, code = int(exc.status), exc.code
        reason = (
            exc.msg.removeprefix("Unable to create record: ")
            if isinstance(exc, TwilioRestException)
            else (exc.detail or exc.title)
        )
        meaning = FINAL_CODES.get(code) if isinstance(code, int) else None
        text = f"{where}: error {code} ({status}): {reason}" + (f" — {meaning}" if meaning else "")
        if status == 429 or status >= 500 or code in RETRYABLE_CODES:
            return ChannelDeliveryError(text, retryable=True)
        if code in ACCOUNT_CODES or status in (401, 403):
            return ChannelDeliveryError(text)
        return ChannelInputError(text)
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | OSError):
        return ChannelDeliveryError(f"{where}: {type(exc).__name__}: {exc}"[:500], retryable=True)
    if isinstance(exc, TwilioException):
        return ChannelDeliveryError(f"{where}: {exc}"[:500])
    raise exc
