"""A small typed client for the WhatsApp Cloud API's send endpoint on httpx, and how Graph's
error envelope maps to a retryable or a final failure (docs/channels.md#whatsapp-errors).

Every send is ``POST {api_url}/{api_version}/{phone_number_id}/messages`` with a bearer token;
success is ``{"messaging_product": "whatsapp", "contacts": [...], "messages": [{"id": wamid}]}``,
failure ``{"error": {"message", "type", "code", "error_subcode", "error_data", "fbtrace_id"}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from layby_contracts.channels import ChannelDeliveryError, ChannelInputError

RATE_LIMITED = frozenset({4, 80007, 130429, 131056})
"""Too many calls or messages (app, account, throughput, pair rate): another attempt later."""
TRANSIENT = frozenset({1, 2, 131000, 131016})
"""Graph's own unknown or temporary faults and service unavailability."""
TEMPLATE_MISSING = 132001
AUTH = frozenset({190, 0, 10, 200, 131005})
"""The access token is invalid or expired, or lacks the permission."""
CONNECTIONS = 8
"""Connections to Graph at once: more made the delivery service slower under load (httpx scans
its whole pool for every queued request), fewer queued sends (docs/performance.md)."""
RATE_PAUSE = 5.0
"""Seconds to wait after a rate limit (Graph names no pause of its own)."""
SEND_ERRORS: dict[int, str] = {
    100: "invalid parameter",
    131008: "a required parameter is missing",
    131009: "a parameter value is not valid",
    131026: "the message is undeliverable to this number",
    131047: "more than 24 hours since the person last wrote: only a template can reach them now",
    131051: "unsupported message type",
    131052: "the media could not be downloaded",
    131053: "the media could not be uploaded",
    132000: "the template's parameters do not match its placeholders",
    132012: "the template's parameters are not in the expected format",
}
"""Final refusals of what was sent (never retried), with what each means."""


@dataclass(frozen=True)
class GraphError:
    status: int
    code: int | None
    subcode: int | None
    message: str
    details: str | None
    trace: str | None


def read_error(status: int, body: bytes) -> GraphError:
    """Graph's error envelope, read leniently (a proxy's HTML page is an error too)."""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return GraphError(status, None, None, f"HTTP {status}", None, None)
    code = error.get("code")
    subcode = error.get("error_subcode")
    details = (
        (error.get("error_data") or {}).get("details") if isinstance(error.get("error_data"), dict) else None
    )
    return GraphError(
        status=status,
        code=code if isinstance(code, int) else None,
        subcode=subcode if isinstance(subcode, int) else None,
        message=str(error.get("message") or f"HTTP {status}")[:300],
        details=str(details)[:300] if details else None,
        trace=str(error.get("fbtrace_id")) if error.get("fbtrace_id") else None,
    )


def failure(where: str, error: GraphError, template: str | None = None) -> ChannelDeliveryError:
    """The ``ChannelDeliveryError`` a Graph error stands for (docs/channels.md#whatsapp-errors)."""
    code = f" (code {error.code})" if error.code is not None else ""
    said = error.message + (f": {error.details}" if error.details else "") + code
    if error.code in RATE_LIMITED or error.status == 429:
        return ChannelDeliveryError(f"{where}: rate limited, {said}", retryable=True, retry_after=RATE_PAUSE)
    if error.code in TRANSIENT or error.status >= 500:
        return ChannelDeliveryError(f"{where}: WhatsApp is unavailable, {said}", retryable=True)
    if error.code == TEMPLATE_MISSING:
        return ChannelInputError(f"{where}: template {template!r} does not exist or is not approved, {said}")
    if error.code in AUTH:
        return ChannelDeliveryError(f"{where}: the access token was refused, {said}", retryable=False)
    if error.code is not None and error.code in SEND_ERRORS:
        return ChannelInputError(f"{where}: {SEND_ERRORS[error.code]}, {said}")
    return ChannelDeliveryError(f"{where}: {said}", retryable=False)


@dataclass(frozen=True)
class Sent:
    """A message WhatsApp accepted: its id and the person's WhatsApp id, when it says."""

    wamid: str
    wa_id: str | None


class Graph:
    """One phone number's send endpoint; the token only ever travels in the header."""

    def __init__(
        self, *, api_url: str, api_version: str, phone_number_id: str, token: str, timeout: float, where: str
    ) -> None:
        self.number_url = f"{api_url.rstrip('/')}/{api_version}/{phone_number_id}"
        self.url = f"{self.number_url}/messages"
        self._token = token
        self._timeout = timeout
        self._where = where
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=self._timeout,
                headers={"Authorization": f"Bearer {self._token}"},
                limits=httpx.Limits(max_connections=CONNECTIONS),
            )
        return self._http

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()

    async def identity(self) -> str:
        """The phone number the token may send from (its display number and verified name)."""
        try:
            response = await self._client().get(
                self.number_url, params={"fields": "verified_name,display_phone_number"}
            )
        except httpx.HTTPError as exc:
            raise ChannelDeliveryError(
                f"{self._where}: cannot reach WhatsApp: {type(exc).__name__}", retryable=True
            ) from None
        if response.status_code >= 400:
            raise failure(self._where, read_error(response.status_code, response.content))
        try:
            data = msgspec.json.decode(response.content)
        except msgspec.DecodeError:
            raise ChannelDeliveryError(f"{self._where}: WhatsApp's answer is not JSON") from None
        number = data.get("display_phone_number", "?") if isinstance(data, dict) else "?"
        name = data.get("verified_name", "?") if isinstance(data, dict) else "?"
        return f"WhatsApp accepts the access token: {number} ({name})"

    async def send(self, to: str, message: dict[str, Any], *, reply_to: str | None = None) -> Sent:
        """One message to ``to``; one attempt."""
        body: dict[str, Any] = {"messaging_product": "whatsapp", "recipient_type": "individual", "to": to}
        if reply_to:
            body["context"] = {"message_id": reply_to}
        body |= message
        template = (message.get("template") or {}).get("name") if message.get("type") == "template" else None
        try:
            response = await self._client().post(
                self.url, content=msgspec.json.encode(body), headers={"Content-Type": "application/json"}
            )
        except httpx.TimeoutException:
            raise ChannelDeliveryError(
                f"{self._where}: WhatsApp did not answer in time", retryable=True
            ) from None
        except httpx.HTTPError as exc:
            raise ChannelDeliveryError(
                f"{self._where}: cannot reach WhatsApp: {type(exc).__name__}", retryable=True
            ) from None
        if response.status_code >= 400:
            raise failure(self._where, read_error(response.status_code, response.content), template)
        try:
            data = msgspec.json.decode(response.content)
            wamid = str(data["messages"][0]["id"])
        except (msgspec.DecodeError, KeyError, IndexError, TypeError):
            raise ChannelDeliveryError(f"{self._where}: WhatsApp's answer holds no message id") from None
        contacts = data.get("contacts") or [{}]
        wa_id = contacts[0].get("wa_id") if isinstance(contacts[0], dict) else None
        return Sent(wamid=wamid, wa_id=str(wa_id) if wa_id else None)
