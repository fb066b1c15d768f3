"""The image's health check: ``python -m layby_server.operations.healthcheck`` (docs/kubernetes.md#image).

One image runs any of the five services, and the check cannot see which one its container runs.
Each service answers ``/healthz`` on exactly one port: the door on its HTTP port, the ask,
delivery, resume and sweeper services on the health port (the image sets ``LAYBY_HEALTH_PORT``).
So the check asks the health port first and, when nothing listens there, the HTTP port; the first
one that answers decides. It asks ``/healthz`` (the event loop answers), not ``/readyz``: a
container whose NATS or PostgreSQL is away is waiting, not broken, and an engine that restarts
unhealthy containers must not restart it for that.

Exit 0 when healthy, 1 otherwise, with one line saying what answered. Standard library only
besides the settings, so a check costs one short interpreter start.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Protocol

from layby_server.settings import Settings, load_settings

__all__ = ["check", "main", "targets"]

_TIMEOUT_SECONDS = 3.0


class _Answer(Protocol):
    status: int

    def __enter__(self) -> _Answer: ...
    def __exit__(self, *exc: object) -> None: ...


Opener = Callable[..., _Answer]


def _loopback(host: str) -> str:
    """Where to reach a server bound to ``host`` from inside its own container."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - compared, not bound
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def targets(settings: Settings) -> list[str]:
    """The URLs to ask, in order: the health port (when set), then the door's HTTP port."""
    host = _loopback(settings.http_host)
    ports = [port for port in (settings.health_port, settings.http_port) if port is not None]
    return [f"http://{host}:{port}/healthz" for port in dict.fromkeys(ports)]


def check(urls: list[str], opener: Opener = urllib.request.urlopen) -> tuple[bool, str]:
    """Whether the first URL that answers says 200, and a line saying what happened."""
    refused: list[str] = []
    for url in urls:
        try:
            with opener(url, timeout=_TIMEOUT_SECONDS) as answer:
                return answer.status == 200, f"{url} answered {answer.status}"
        except urllib.error.HTTPError as exc:
            return False, f"{url} answered {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            refused.append(f"{url} ({reason})")
    return False, "nothing answers: " + ", ".join(refused)


def main() -> int:
    healthy, line = check(targets(load_settings()))
    print(line, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
