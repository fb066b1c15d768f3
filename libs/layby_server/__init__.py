"""Layby's server core."""

import layby  # noqa: F401  # its import hook keeps unused optional packages out (layby/lean.py)
