"""Signed webhooks out (docs/webhooks.md): POST each resolved question's outcome to the
``notify_url`` its ask named.

A consumer of its own (``delivery-webhooks``) reads every resolution from the log. One attempt
per delivery of the message: a 2xx (or a 410, which stops for good) acknowledges it; any other
outcome records the attempt and naks the message with the backoff's delay, so the retry schedule
lives in JetStream and a killed delivery service loses nothing — the un-acknowledged message
comes back to whichever replica runs next. Every attempt carries the same ``webhook-id``, so the
receiver de-duplicates; the timestamp and signature are made per attempt. Past the deadline the
outcome is given up (recorded, acknowledged). The host is resolved and checked again before
every send (a name that now resolves inside the cluster is refused) and redirects are never
followed.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import aiohttp

from layby_contracts.errors import BadInput
from layby_contracts.events import InteractionAnswered, InteractionAsked, InteractionRemoved
from layby_contracts.webhooks import AttemptResult, WebhookAttempt
from layby_domain.clock import Clock
from layby_domain.interaction import of_caller_ask
from layby_domain.webhooks import (
    body_of,
    check_addresses,
    check_notify_url,
    encode_body,
    parse_webhook_secrets,
    past_deadline,
    retry_delay,
    sign,
    webhook_id,
)
from layby_server.observability.logs import get_logger
from layby_server.settings import Settings
from layby_server.store.consumer import RetryLater
from layby_server.store.eventstore import EventStore, Stored
from layby_server.write.webhooks import resolve_host

log = get_logger("layby.webhooks")
CONCURRENCY = 512
"""Webhooks sent at once (each acknowledged when its attempt is settled)."""
USER_AGENT = "Layby-Webhooks/1"
ASKED_CACHE = 50_000
"""Recent questions this replica saw asked, kept so their resolution needs no read of the log."""


class WebhookSender:
    def __init__(
        self, store: EventStore, settings: Settings, clock: Clock, client: aiohttp.ClientSession
    ) -> None:
        self._store = store
        self._settings = settings
        self._clock = clock
        self._client = client
        self._secrets = parse_webhook_secrets(settings.webhooks_out_secrets)
        self._asked: dict[str, InteractionAsked | None] = {}
        """interaction id -> its asked event when it names a notify_url, else None (oldest first)."""

    def on_asked(self, asked: InteractionAsked) -> None:
        """Remember where a question's outcome goes (nowhere, for most), so that its resolution,
        later on the same consumer, needs no read. A replica that missed it reads the log."""
        self._asked[asked.interaction_id] = asked if asked.notify_url is not None else None
        if len(self._asked) > ASKED_CACHE:
            del self._asked[next(iter(self._asked))]

    async def _asked_of(self, interaction_id: str) -> InteractionAsked | None:
        if interaction_id in self._asked:
            return self._asked[interaction_id]
        first = await self._store.first(self._store.names.ix(interaction_id))
        if first is None or not isinstance(first.event, InteractionAsked) or first.event.notify_url is None:
            return None
        return first.event

    async def on_resolved(self, stored: Stored) -> None:
        """One attempt for one resolution; raises ``RetryLater`` when it must be tried again."""
        resolution = stored.event
        assert isinstance(resolution, InteractionAnswered | InteractionRemoved)
        await self._attempt(stored)
        self._asked.pop(resolution.interaction_id, None)  # settled: its question is done with

    async def _attempt(self, stored: Stored) -> None:
        resolution = stored.event
        assert isinstance(resolution, InteractionAnswered | InteractionRemoved)
        asked = await self._asked_of(resolution.interaction_id)
        if asked is None:
            return
        assert asked.notify_url is not None
        msg_id = webhook_id(asked.interaction_id, stored.seq)
        body = body_of(asked, resolution)
        attempt = stored.delivered
        now = self._clock.now()
        if past_deadline(body.timestamp, now, self._settings.webhooks_deadline_seconds):
            await self._record(msg_id, asked, attempt, "gave_up", error="the delivery deadline passed")
            log.warning("webhook.gave_up", interaction_id=asked.interaction_id, webhook_id=msg_id)
            return
        key = self._secrets.get(asked.asked_by)
        if key is None:
            await self._record(msg_id, asked, attempt, "gave_up", error="no signing secret for the asker")
            log.error("webhook.no_secret", interaction_id=asked.interaction_id, asked_by=asked.asked_by)
            return
        status, error = await self._post(
            asked.notify_url, msg_id, key, encode_body(body), int(now.timestamp())
        )
        if status is not None and 200 <= status < 300:
            await self._record(msg_id, asked, attempt, "delivered", status=status)
            log.info(
                "webhook.delivered", interaction_id=asked.interaction_id, webhook_id=msg_id, attempt=attempt
            )
            return
        if status == 410:
            await self._record(msg_id, asked, attempt, "gone", status=status)
            log.info("webhook.gone", interaction_id=asked.interaction_id, webhook_id=msg_id)
            return
        delay = retry_delay(
            attempt,
            base=self._settings.webhooks_backoff_seconds,
            cap=self._settings.webhooks_backoff_max_seconds,
        )
        await self._record(
            msg_id,
            asked,
            attempt,
            "failed",
            status=status,
            error=error,
            next_retry_at=now + timedelta(seconds=delay),
        )
        log.info(
            "webhook.failed",
            interaction_id=asked.interaction_id,
            webhook_id=msg_id,
            attempt=attempt,
            status=status,
            error=error,
            retry_in=delay,
        )
        raise RetryLater(delay)

    async def _post(
        self, url: str, msg_id: str, key: bytes, body: bytes, timestamp: int
    ) -> tuple[int | None, str | None]:
        """The receiver's status, or why there is none. The host is checked again now: a name
        that resolves somewhere forbidden since the ask was taken is refused."""
        settings = self._settings
        try:
            host = check_notify_url(url, allow_http=settings.webhooks_allow_http)
            check_addresses(host, await resolve_host(host), allow_private=settings.webhooks_allow_private)
        except BadInput as exc:
            return None, exc.message
        headers = {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "webhook-id": msg_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(key, msg_id, timestamp, body),
        }
        try:
            async with self._client.post(
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=settings.webhooks_timeout_seconds),
            ) as response:
                await response.read()  # bounded by the timeout; frees the connection for reuse
                return response.status, None
        except TimeoutError:
            return None, f"timed out after {settings.webhooks_timeout_seconds:g}s"
        except aiohttp.ClientError as exc:
            return None, f"{type(exc).__name__}: {exc}"[:200]

    async def _record(
        self,
        msg_id: str,
        asked: InteractionAsked,
        attempt: int,
        result: AttemptResult,
        *,
        status: int | None = None,
        error: str | None = None,
        next_retry_at: datetime | None = None,
    ) -> None:
        await self._store.record_webhook_attempt(
            WebhookAttempt(
                webhook_id=msg_id,
                interaction_id=asked.interaction_id,
                attempt=attempt,
                at=self._clock.now(),
                result=result,
                status=status,
                error=error,
                next_retry_at=next_retry_at,
            )
        )


def new_client() -> aiohttp.ClientSession:
    """One session for every webhook (redirects are refused per request), pooling connections
    per receiver; no proxy settings from the environment, no cookies kept between receivers."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=CONCURRENCY),
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
    )


class Webhooks:
    """The ``delivery-webhooks`` consumer's handler: its sender and the HTTP session it owns."""

    CONCURRENCY = CONCURRENCY

    def __init__(self, store: EventStore, settings: Settings, clock: Clock) -> None:
        self._client = new_client()
        self._sender = WebhookSender(store, settings, clock, self._client)

    async def handle(self, batch: list[Stored]) -> None:
        for stored in batch:
            ev = stored.event
            if of_caller_ask(ev):
                continue
            if isinstance(ev, InteractionAsked):
                self._sender.on_asked(ev)
            elif isinstance(ev, InteractionAnswered | InteractionRemoved):
                await self._sender.on_resolved(stored)

    async def aclose(self) -> None:
        await self._client.close()
