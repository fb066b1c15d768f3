"""Failpoints: crash a process at a named point, for the crash tests.

``LAYBY_FAILPOINTS=resume.after_claim,worker.after_flow`` makes the process SIGKILL itself the
first time it reaches one of those points, exactly like ``kill -9`` at the worst moment. Unset
(always, in production) a failpoint is one set lookup. The names:

- ``resume.after_claim``: the resume service recorded ``RunResumed`` but has not published.
- ``resume.after_publish``: it published the continuation but has not acknowledged its trigger.
- ``worker.after_flow``: a worker executed a resume (generation > 0) but has not recorded its
  outcome.
- ``worker.before_ack``: a worker recorded a resume's outcome but has not acknowledged it.
"""

from __future__ import annotations

import os
import signal

_ARMED = frozenset(p.strip() for p in os.environ.get("LAYBY_FAILPOINTS", "").split(",") if p.strip())


def hit(name: str) -> None:
    if name in _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
