"""The ask service's notifications (docs/notifications.md): ``cmd.notify.v1`` decided, sent and
recorded.

Every rule is checked before anything is stored or sent (``layby_domain.notify``). Then, in
this order: inline images are stored by reference, the channel gets **one** send attempt (no
retry: a notification has no budget to retry within, and a retried send could reach the person
twice), and only after a send that succeeded is the feed written — so a failed send leaves
nothing half-written (docs/notifications.md#order). With no channel the feed is the only effect.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping

import msgspec

from layby_contracts.channels import Channel, ChannelDeliveryError, ChannelInputError, ChannelNotification
from layby_contracts.commands import Notified, Notify
from layby_contracts.errors import (
    BadInput,
    ChannelFailedError,
    ChannelUnavailableError,
    Forbidden,
    LaybyError,
    UnsupportedError,
)
from layby_contracts.events import MediaItem
from layby_contracts.limits import MEDIA_ROUTE_PREFIX
from layby_domain.clock import Clock
from layby_domain.media import decode_data_image
from layby_domain.notify import (
    NotifyAbilities,
    NotifyDecision,
    NotifyFacts,
    abilities_of,
    decide_notify,
    validate_notify,
)
from layby_server.auth import Authenticator, asker_of
from layby_server.observability.logs import get_logger
from layby_server.observability.metrics import NO_CHANNEL, OTHER, ServiceMetrics
from layby_server.settings import Settings
from layby_server.store.eventstore import EventStore
from layby_server.write.feed import Feed, FeedEntry
from layby_services.ask.caller import identify

log = get_logger("layby.ask.notify")
SEND_TIMEOUT_SECONDS = 8.0
"""The one send attempt's bound: within the SDK's wait for the reply, so a hung medium is a 503
the caller hears about, not a silent timeout."""


class NotifyHandlers:
    def __init__(  # noqa: PLR0917 - the composition root hands each resource in, by role
        self,
        settings: Settings,
        store: EventStore,
        auth: Authenticator,
        clock: Clock,
        feed: Feed,
        channels: Mapping[str, Channel],
        metrics: ServiceMetrics,
    ) -> None:
        self._settings = settings
        self._store = store
        self._auth = auth
        self._clock = clock
        self._feed = feed
        self._channels = dict(channels)
        self._abilities: dict[str, NotifyAbilities] = {n: abilities_of(p) for n, p in channels.items()}
        self._metrics = metrics

    async def notify(self, cmd: Notify) -> Notified:
        """Decide, then send and record; count the outcome by channel and result."""
        label = NO_CHANNEL if cmd.channel is None else cmd.channel if cmd.channel in self._channels else OTHER
        try:
            reply = await self._notify(cmd)
        except LaybyError as exc:
            self._metrics.notification(label, _result_of(exc))
            raise
        self._metrics.notification(label, reply.outcome)
        return reply

    async def _notify(self, cmd: Notify) -> Notified:
        principal = identify(self._auth, cmd.token, cmd.notification_id, "notification_id")
        spec = validate_notify(cmd)
        decision = decide_notify(
            spec,
            NotifyFacts(
                sender=asker_of(principal),
                channels=self._abilities,
                public_base_url=bool(self._settings.public_base_url),
            ),
        )
        spec = decision.spec
        ids: list[str] = []
        if decision.send:
            assert spec.channel is not None
            ids = await self._send(cmd.notification_id, decision, principal.identity)
        if decision.record:
            await self._feed.record(
                FeedEntry(
                    id=cmd.notification_id,
                    message=spec.message,
                    recipient=spec.recipient,
                    audience=spec.audience,
                    created_at=self._clock.now(),
                )
            )
        log.info(
            "ask.notified",
            notification_id=cmd.notification_id,
            channel=spec.channel,
            sent=decision.send,
            recorded=decision.record,
        )
        if decision.send:
            return Notified(
                outcome="sent",
                notification_id=cmd.notification_id,
                channel=spec.channel,
                message_ids=ids,
                recorded=decision.record,
            )
        return Notified(outcome="recorded", notification_id=cmd.notification_id, recorded=True)

    async def _send(self, notification_id: str, decision: NotifyDecision, sender: str) -> list[str]:
        """The one send attempt; the medium's failure as the refusal the caller gets."""
        spec = decision.spec
        name = spec.channel
        assert name is not None
        plugin = self._channels[name]
        media = await self._served(spec.media or [], decision.inline)
        notification = ChannelNotification(
            notification_id=notification_id,
            message=spec.message,
            recipient=spec.recipient,
            sender_identity=sender,
            media=media or None,
            template=spec.template,
            options=spec.options,
            schema=spec.schema,
            data=spec.data,
            pages=spec.pages,
        )
        notify = getattr(plugin, "notify", None)
        if notify is None:  # checked by the decision; a plugin that lost it since is still refused
            raise UnsupportedError(f"channel {name!r} does not support notifications", field="channel")
        try:
            async with asyncio.timeout(SEND_TIMEOUT_SECONDS):
                ids = await notify(notification)
        except ChannelInputError as exc:
            raise BadInput(f"channel {name!r} refused the notification: {exc}", field="channel") from None
        except ChannelDeliveryError as exc:
            log.warning("ask.notify_failed", channel=name, retryable=exc.retryable, error=str(exc))
            if exc.retryable:
                # The medium's own text stays in the log: it may quote a URL or a credential.
                raise ChannelUnavailableError(
                    f"channel {name!r} could not send the notification now; try again later",
                    field="channel",
                    retry_after=exc.retry_after,
                ) from None
            raise ChannelFailedError(
                f"channel {name!r} refused to send the notification (a permanent failure)", field="channel"
            ) from None
        except TimeoutError:
            raise ChannelUnavailableError(
                f"channel {name!r} did not answer within {SEND_TIMEOUT_SECONDS:g}s", field="channel"
            ) from None
        except Exception as exc:  # noqa: BLE001 - a plugin's bug is the medium's permanent failure
            log.error("ask.notify_plugin_failed", channel=name, error=repr(exc))
            raise ChannelFailedError(
                f"channel {name!r} failed to send the notification (a permanent failure)", field="channel"
            ) from None
        return [str(i) for i in ids or []]

    async def _served(self, media: list[MediaItem], inline: tuple[int, ...]) -> list[MediaItem]:
        """Inline images stored by reference (as an ask's are), every served path made absolute
        under ``INTERACTIONS_PUBLIC_BASE_URL``: a medium fetches what it is handed."""
        base = (self._settings.public_base_url or "").rstrip("/")
        out: list[MediaItem] = []
        for index, item in enumerate(media):
            url = item.url
            if index in inline:
                mime, raw = decode_data_image(url, f"media[{index}].url")
                media_id = secrets.token_urlsafe(32)
                await self._store.put_media(media_id, mime, raw)
                url = MEDIA_ROUTE_PREFIX + media_id
            if url.startswith("/"):
                url = base + url
            out.append(msgspec.structs.replace(item, url=url))
        return out


def _result_of(exc: LaybyError) -> str:
    match exc:
        case UnsupportedError():
            return "unsupported"
        case ChannelUnavailableError():
            return "retryable_error"
        case ChannelFailedError():
            return "permanent_error"
        case BadInput() | Forbidden():
            return "refused"
    return "refused"
