"""The headless Chromium the browser tests and bench/inbox_page.py drive: Debian's, with the flags
that keep it to the page (no sandbox in a container, no GPU, no background traffic)."""

from __future__ import annotations

import os
import shutil

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HAVE_CHROMIUM = os.path.exists(CHROMIUM)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
