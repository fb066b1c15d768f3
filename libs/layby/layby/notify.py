"""``layby.notify_user``: send a one-way notification and return at once (docs/notifications.md).

Nothing is asked: no interaction, no ticket, no wait. The arguments are checked here first (the
same rules the ask service applies, ``layby_domain.notify``), so a bad call fails before anything
leaves the process; then one ``cmd.notify.v1`` request goes to the ask service, which sends it on
the channel (one attempt) and records it to the feed. A request that reached no ask service is
tried again (nothing was done); one that got no answer in time is not, since the notification may
have been sent.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import msgspec

from layby.requests import NOTIFY, expect, request
from layby.tracecontext import command_headers
from layby_contracts.commands import Notified, Notify
from layby_contracts.errors import BadInput
from layby_contracts.notification import NotificationFields, notification_fields
from layby_domain.notify import NotifySpec, validate_notify

if TYPE_CHECKING:
    from layby.sdk import Client

_enc = msgspec.json.Encoder()


def check_notify(message: Any, args: dict[str, Any]) -> NotifySpec:
    """The rules that need no registry, before anything leaves the process (``BadInput``); a
    ``schema`` may be a msgspec Struct type, as on a form ask."""
    schema = args.get("schema")
    if isinstance(schema, type) and issubclass(schema, msgspec.Struct):
        args = {**args, "schema": msgspec.json.schema(schema)}
    return validate_notify(NotificationFields(message=message, **args))


async def send_notification(client: Client, message: Any, args: dict[str, Any]) -> Notified:
    """Check, then one request to the ask service; its refusal raised as the error it raised."""
    spec = check_notify(message, args)
    cmd = Notify(**notification_fields(spec), token=client.token, notification_id=str(uuid.uuid4()))
    try:
        payload = _enc.encode(cmd)
    except (TypeError, msgspec.EncodeError) as exc:
        raise BadInput(f"the notification is not JSON-serializable: {exc}") from None
    subject = client.names.cmd_notify
    reply = await request(
        client.nc,
        subject,
        payload,
        retry=NOTIFY,
        headers=command_headers(),
        what="the notification",
        after_timeout="; the notification may have been sent",
    )
    return expect(reply, Notified, "a notification")
