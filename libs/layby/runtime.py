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

from layby.settings import Settings

RUNTIME_FILE = "runtime.json"
TOKEN_FILE = "operator-token"  # noqa: S105 - a file name, not a secret


class Runtime(msgspec.Struct, frozen=True, kw_only=True):
    url: str
    token: str | None = None
    nats_url: str
    database_url: str
    pid: int


def data_dir(settings: Settings | None = None, env_value: str | None = None) -> Path:
    raw = env_value or (settings.data_dir if settings else None)
    return Path(raw) if raw else Path(platformdirs.user_data_dir("layby", appauthor=False))


def write_runtime(directory: Path, runtime: Runtime) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RUNTIME_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(msgspec.json.encode(runtime))
    tmp.replace(path)
    return path


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


def remove_runtime(directory: Path) -> None:
    (directory / RUNTIME_FILE).unlink(missing_ok=True)


def resolve_urls(settings: Settings) -> tuple[str | None, str | None]:
    """NATS and PostgreSQL URLs: settings first, else a live ``layby up`` runtime file."""
    nats_url, db_url = settings.nats_url, settings.database_url
    if nats_url is None or db_url is None:
        runtime = read_runtime(data_dir(settings))
        if runtime is not None:
            nats_url = nats_url or runtime.nats_url
            db_url = db_url or runtime.database_url
    return nats_url, db_url
