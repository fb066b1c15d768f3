"""Layby's server core."""

from layby import lean

lean.install()  # the server's processes load no optional package they do not use (layby/lean.py)
