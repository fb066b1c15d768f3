"""Layby's five services. Each is runnable on its own: ``layby serve <name>``.

They exchange only msgspec events (``contracts``) over JetStream and never import each other.
"""
