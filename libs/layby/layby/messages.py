"""``layby.messages()``: follow the inbound chat messages that answered nothing
(docs/channels.md#inbound-messages).

A reply to a question that is gone, a bridged mismatch, or an ordinary message to a bot is
recorded on the messages stream; this iterator follows it through the door's messages door
(``GET /api/messages/stream``) with the caller's token — tokens never read streams directly. A
broken connection is resumed from the last message seen (``Last-Event-ID``), so none is skipped
or repeated within the door's resume window.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import httpx
import msgspec
from httpx_sse import aconnect_sse

from layby.runtime import data_dir, read_runtime
from layby.settings import load_client_settings
from layby_contracts.errors import BadInput
from layby_contracts.http import InboundMessage

log = logging.getLogger("layby.messages")
RECONNECT_PAUSE = 1.0
_decode = msgspec.json.Decoder(InboundMessage).decode


async def messages(
    channel: str | None = None,
    *,
    url: str | None = None,
    token: str | None = None,
    last_event_id: str | None = None,
) -> AsyncIterator[tuple[str, InboundMessage]]:
    """Yield ``(event_id, message)`` for each inbound message from now on (or after
    ``last_event_id``), for ``channel`` or every channel. ``url``/``token`` default to
    ``LAYBY_URL``/``LAYBY_TOKEN`` (or the running ``layby up``). A restricted token sees only
    replies to questions addressed to it. Runs until the caller stops iterating."""
    settings = load_client_settings()
    runtime = read_runtime(data_dir(settings))
    base = url or settings.url or (runtime.url if runtime else None)
    key = token or settings.token or (runtime.token if runtime else None)
    if not base or not key:
        raise BadInput("layby.messages needs the door's URL and a token (LAYBY_URL, LAYBY_TOKEN)")
    params = {"channel": channel} if channel else {}
    headers = {"Authorization": f"Bearer {key}", "Layby-Client": "sdk"}
    async with httpx.AsyncClient(base_url=base.rstrip("/"), timeout=httpx.Timeout(30, read=None)) as http:
        while True:
            resume = {"Last-Event-ID": last_event_id} if last_event_id else {}
            try:
                async with aconnect_sse(
                    http, "GET", "/api/messages/stream", params=params, headers={**headers, **resume}
                ) as source:
                    if source.response.status_code in (401, 403, 400):
                        body = await source.response.aread()
                        raise BadInput(f"the messages door refused: {body.decode(errors='replace')[:300]}")
                    source.response.raise_for_status()
                    async for sse in source.aiter_sse():
                        if sse.event == "stream.evicted":
                            last_event_id = sse.id or last_event_id  # the stream ends; resume there
                        if sse.event != "message" or not sse.data:
                            continue
                        last_event_id = sse.id or last_event_id
                        yield sse.id, _decode(sse.data)
            except (httpx.HTTPError, httpx.StreamError) as exc:
                log.debug("messages.reconnect", extra={"error": repr(exc)})
            await asyncio.sleep(RECONNECT_PAUSE)
