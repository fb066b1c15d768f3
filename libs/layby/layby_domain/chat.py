"""The chat options of an ask (docs/channels.md#replies, docs/channels.md#several-channels):
several channels, what a refused reply does, and the author's ids of the tappable options.

``chat_options`` turns the SDK's arguments into the wire form (the first channel stays the ask's
``channel``/``recipient``; ``ChatOptions`` carries the rest); ``check_chat`` checks that form
again where a command arrives. Both raise ``BadInput`` naming the argument.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from layby_contracts.errors import BadInput
from layby_contracts.events import ChannelTarget, ChatOptions

CHANNELS_MAX = 10
NOTICE_MAX_CHARS = 1000
REPLY_ID_MAX_CHARS = 64
MISMATCH_POLICIES = ("retry", "bridge")


def chat_options(
    channel: object,
    recipient: object,
    *,
    on_mismatch: object = None,
    mismatch_notice: object = None,
    reply_ids: object = None,
) -> tuple[Any, Any, ChatOptions | None]:
    """``(channel, recipient, chat)`` for the wire: ``channel`` a name or a list of names,
    ``recipient`` one recipient or a mapping of channel name to recipient."""
    targets: list[ChannelTarget] | None = None
    if isinstance(channel, list | tuple):
        channel, recipient, targets = _several_channels(channel, recipient)
    elif isinstance(recipient, Mapping):
        if channel is None or set(recipient) - {channel}:
            raise BadInput("recipient maps only the asked channel's name to its recipient", field="recipient")
        recipient = recipient.get(channel)
    if on_mismatch is None and mismatch_notice is None and reply_ids is None and targets is None:
        return channel, recipient, None
    chat = ChatOptions(
        targets=targets,
        on_mismatch=on_mismatch if on_mismatch is not None else "retry",  # type: ignore[arg-type]
        mismatch_notice=mismatch_notice,  # type: ignore[arg-type]
        reply_ids=list(reply_ids) if isinstance(reply_ids, list | tuple) else reply_ids,  # type: ignore[arg-type]
    )
    check_chat(chat, channel, recipient, None)
    return channel, recipient, chat


def _several_channels(
    channel: list[Any] | tuple[Any, ...], recipient: object
) -> tuple[str, Any, list[ChannelTarget] | None]:
    """The first channel and its recipient, and the targets when there are several."""
    if not channel:
        raise BadInput("channel must name at least one channel", field="channel")
    if recipient is not None and not isinstance(recipient, Mapping):
        raise BadInput(
            "with several channels, recipient maps each channel's name to its recipient",
            field="recipient",
        )
    names = list(channel)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise BadInput("channel must name registered channels", field="channel")
    rec = dict(recipient or {})
    unknown = set(rec) - set(names)
    if unknown:
        raise BadInput(f"recipient names {sorted(unknown)[0]!r}, which is not in channel", field="recipient")
    targets = [ChannelTarget(channel=name, recipient=rec.get(name)) for name in names]
    return names[0], rec.get(names[0]), targets if len(targets) > 1 else None


def check_chat(chat: ChatOptions | None, channel: object, recipient: object, choices: int | None) -> None:
    """The chat options' own rules, naming the argument. ``choices``: how many options or
    suggested replies the question has (None: not known yet)."""
    if chat is None:
        return
    if channel is None:
        raise BadInput("on_mismatch, mismatch_notice and reply_ids need a channel", field="channel")
    if chat.on_mismatch not in MISMATCH_POLICIES:
        raise BadInput("on_mismatch must be 'retry' or 'bridge'", field="on_mismatch")
    _check_notice(chat.mismatch_notice)
    if chat.reply_ids is not None:
        _check_reply_ids(chat.reply_ids, choices)
    if chat.targets is not None:
        _check_targets(chat.targets, channel, recipient)


def _check_notice(notice: object) -> None:
    if notice is not None and (
        not isinstance(notice, str) or not notice.strip() or len(notice) > NOTICE_MAX_CHARS
    ):
        raise BadInput(
            f"mismatch_notice must be non-blank text of at most {NOTICE_MAX_CHARS} characters",
            field="mismatch_notice",
        )


def _check_reply_ids(ids: object, choices: int | None) -> None:
    if not isinstance(ids, list) or not ids:
        raise BadInput("reply_ids must be a non-empty list of strings", field="reply_ids")
    for index, value in enumerate(ids):
        if not isinstance(value, str) or not value.strip() or len(value) > REPLY_ID_MAX_CHARS:
            raise BadInput(
                f"reply_ids[{index}] must be non-blank text of at most {REPLY_ID_MAX_CHARS} characters",
                field=f"reply_ids[{index}]",
            )
    if choices is not None and len(ids) != choices:
        raise BadInput(
            f"reply_ids must hold one id per option ({choices}), not {len(ids)}", field="reply_ids"
        )


def _check_targets(targets: list[ChannelTarget], channel: object, recipient: object) -> None:
    if len(targets) > CHANNELS_MAX:
        raise BadInput(f"channel may name at most {CHANNELS_MAX} channels", field="channel")
    if len(targets) < 2:
        raise BadInput("chat targets list the channels of a question asked on several", field="channel")
    names = [target.channel for target in targets]
    if len(set(names)) != len(names):
        raise BadInput("channel names a channel twice", field="channel")
    if names[0] != channel or targets[0].recipient != recipient:
        raise BadInput("the first channel target must be the ask's channel and recipient", field="channel")
