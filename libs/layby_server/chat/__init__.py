"""Chat channels: plugins with their own inbound webhook (Slack, Telegram), and the
channel-neutral rules they share (docs/channels.md#chat-channels)."""
