"""The built-in ``webhook`` channel: POST each delivery as JSON to an endpoint you run.

A bridge to any medium Layby has no plugin for (an internal chat bot, a pager, a ticket system):
the endpoint receives the question and its callback URL and relays the person's reply to that
URL as ``{"answer": <value>}``. Configuration (``LAYBY_CHANNELS``)::

    {"ops": {"plugin": "webhook", "url": "https://bridge.internal/layby", "secret": "bridge"}}

``secret`` names an entry of ``LAYBY_WEBHOOK_SECRETS``; with it every request carries
``X-Layby-Signature-256: sha256=<hex HMAC-SHA256 of the body>`` so the endpoint can refuse
forgeries. ``forms`` (default true) advertises form delivery; the endpoint may simply hand the
person the callback URL, whose page renders the form. 2xx is success; 408, 425, 429 and 5xx
(with ``Retry-After`` honoured) and network faults are retryable; any other status is final.

A one-way notification (``notify``) is POSTed the same way, signed alike, as the notification's
fields plus ``"kind": "notification"`` (a delivery's body has no ``kind``), so one endpoint tells
the two apart; the endpoint may answer ``{"message_ids": [...]}`` with its medium's ids
(docs/channels.md#notifications-through-the-webhook).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec

from layby_contracts.channels import ChannelDelivery, ChannelDeliveryError, ChannelNotification
from layby_server.chat import common

RETRYABLE_STATUSES = frozenset({408, 425, 429})
SIGNATURE_HEADER = "X-Layby-Signature-256"
NOTIFICATION_KIND = "notification"
"""The ``kind`` of a notification's body; a question's delivery carries no ``kind``."""


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the backoff decides


class WebhookChannel:
    # A notification reaches the bridge whole: its media, its template (as data, for the bridge
    # to render or hand to its provider) and its options (for the bridge to offer; a tap comes
    # back the bridge's own way, e.g. a conversation route). Its form has no way back (a
    # notification has no callback URL), so form notifications are not offered.
    supports_media_notifications = True
    supports_template_notifications = True
    supports_interactive_notifications = True

    def __init__(self, *, name: str, config: dict[str, Any], secrets: Mapping[str, bytes]) -> None:
        unknown = set(config) - {"url", "secret", "forms", "timeout"}
        if unknown:
            raise ValueError(f"unknown webhook option {sorted(unknown)[0]!r} (url, secret, forms, timeout)")
        url = config.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("webhook needs url, an absolute http(s) URL")
        secret_name = config.get("secret")
        if secret_name is not None and secret_name not in secrets:
            raise ValueError(f"webhook secret {secret_name!r} is not in LAYBY_WEBHOOK_SECRETS")
        timeout = common.timeout(config, "webhook")
        forms = config.get("forms", True)
        if not isinstance(forms, bool):
            raise ValueError("webhook forms must be true or false")  # noqa: TRY004 - a config error
        self.name = name
        self.url: str = url  # type: ignore[assignment]
        self.supports_form_delivery = forms
        self._secret = secrets[secret_name] if secret_name is not None else None
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None

    async def deliver(self, delivery: ChannelDelivery) -> None:
        await self._post(msgspec.json.encode(delivery))

    async def notify(self, notification: ChannelNotification) -> list[str]:
        """One POST of the notification (docs/channels.md#notifications-through-the-webhook);
        the ids the endpoint answers in ``message_ids``, else none."""
        body = msgspec.json.encode({"kind": NOTIFICATION_KIND, **msgspec.to_builtins(notification)})
        resp = await self._post(body)
        try:
            answered = msgspec.json.decode(resp.content) if resp.content else None
        except msgspec.DecodeError:
            return []
        ids = answered.get("message_ids") if isinstance(answered, dict) else None
        if not isinstance(ids, list):
            return []
        return [str(i) for i in ids if isinstance(i, str | int) and not isinstance(i, bool)]

    async def _post(self, body: bytes) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if self._secret is not None:
            digest = hmac.new(self._secret, body, hashlib.sha256).hexdigest()
            headers[SIGNATURE_HEADER] = f"sha256={digest}"
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
        try:
            resp = await self._http.post(self.url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ChannelDeliveryError(
                f"webhook {self.name!r}: {type(exc).__name__} posting to the endpoint", retryable=True
            ) from None
        if resp.is_success:
            return resp
        retryable = resp.status_code in RETRYABLE_STATUSES or resp.status_code >= 500
        raise ChannelDeliveryError(
            f"webhook {self.name!r}: the endpoint answered {resp.status_code}",
            retryable=retryable,
            retry_after=_retry_after(resp.headers.get("retry-after")),
        )

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
