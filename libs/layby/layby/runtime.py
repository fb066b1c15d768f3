"""The runtime file ``layby up`` writes, so a second terminal needs no configuration.

It holds the inbox URL, the operator token and the NATS/PostgreSQL URLs of the embedded
servers. The CLI and the SDK read it when ``LAYBY_NATS_URL``, ``LAYBY_URL`` or
``LAYBY_TOKEN`` are unset. It is written with mode 0600: the token is a credential.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import platformdirs

from layby.settings import ClientSettings

RUNTIME_FILE = "runtime.json"
TOKEN_FILE = "operator-token"  # noqa: S105 - a file name, not a secret


class Runtime(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    token: str | None = None
    nats_url: str
    database_url: str
    pid: int
    public_base_url: str | None = None
    """The services' INTERACTIONS_PUBLIC_BASE_URL: a client on this machine builds an external
    question's link around it with no configuration of its own."""
    nats_monitor_url: str | None = None
    """The embedded NATS's monitoring endpoints (``layby doctor`` reads its settings there)."""


def data_dir(settings: ClientSettings | None = None, env_value: str | None = None) -> Path:
    raw = env_value or (settings.data_dir if settings else None)
    return Path(raw) if raw else Path(platformdirs.user_data_dir("layby", appauthor=False))


def read_runtime(directory: Path) -> Runtime | None:
    path = directory / RUNTIME_FILE
    try:
        runtime = msgspec.json.decode(path.read_bytes(), type=Runtime)
    except (FileNotFoundError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    try:
        os.kill(runtime.pid, 0)
    except ProcessLookupError:
        return None  # the `layby up` that wrote it is gone
    except PermissionError:
        pass
    return runtime
