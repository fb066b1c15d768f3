"""Provider stand-ins: the chat providers' APIs served on loopback for the channel tests."""
