"""Writing the runtime file that ``layby up`` leaves for a second terminal (read by the SDK:
``layby.runtime``). It is written with mode 0600: it holds the operator token."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from layby.runtime import RUNTIME_FILE, Runtime, data_dir, read_runtime
from layby_server.settings import Settings

__all__ = ["remove_runtime", "resolve_seed", "resolve_urls", "write_runtime"]


def write_runtime(directory: Path, runtime: Runtime) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / RUNTIME_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(msgspec.json.encode(runtime))
    tmp.replace(path)
    return path


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


def resolve_seed(settings: Settings, role: str) -> str | None:
    """A service's NATS key: LAYBY_NATS_SEED, else (a server command beside ``layby up``, such as
    ``layby projections rebuild``) the role's key that ``layby up`` keeps in its data dir."""
    if settings.nats_seed is not None:
        return settings.nats_seed
    path = data_dir(settings) / "nats" / "keys" / f"{role}.seed"
    if settings.nats_url is None and read_runtime(data_dir(settings)) is not None and path.exists():
        return path.read_text(encoding="ascii").strip()
    return None
