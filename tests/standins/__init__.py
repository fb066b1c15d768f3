"""Local stand-ins for chat providers: each serves the provider's API to its official SDK (and
checks every call), plays the person (signed inbound requests built from what was posted), and
shows what the person now sees."""
