"""The limits of Layby's streams, and who owns them (docs/operations.md#retention).

Layby writes every limit when it creates a stream. On a stream that already exists it rewrites
a tunable limit (max age, max bytes, max messages, replicas) only when the variable that names
it was set (``Settings.explicit``); otherwise the stream keeps what it has, so a limit an
operator changed by hand (``nats stream edit``) survives every restart. What the code relies on
(subjects, one message per subject, the duplicate window, direct gets) is always rewritten.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nats.js.api import StreamConfig

from layby.settings import SettingsError

if TYPE_CHECKING:
    from layby_server.settings import Settings

TUNABLE = ("max_age", "max_bytes", "max_msgs", "num_replicas")
"""The limits an operator may tune by hand; the rest of a stream's configuration is Layby's."""
HORIZON_MARGIN_SECONDS = 86400.0
"""A bounded log keeps a day more than the longest wait, so a deadline that passes while the
sweeper is down, or a resume retried for a while, still finds its events."""


@dataclass(frozen=True, slots=True)
class Ownership:
    """Which tunable limits Layby rewrites, by stream role (``events``, ``tickets``, ...)."""

    replicas: bool = False
    """LAYBY_STREAM_REPLICAS was set: Layby writes every stream's replica count."""
    by_role: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def owned(self, role: str) -> frozenset[str]:
        mine = self.by_role.get(role, frozenset())
        return mine | {"num_replicas"} if self.replicas else mine


_VARIABLES = {
    "LAYBY_EVENTS_MAX_AGE": ("events", "max_age"),
    "LAYBY_EVENTS_MAX_BYTES": ("events", "max_bytes"),
    "LAYBY_TICKETS_MAX_AGE": ("tickets", "max_age"),
    "INTERACTIONS_IDLE_TTL_SECONDS": ("secrets", "max_age"),
    "LAYBY_MEDIA_RETENTION_SECONDS": ("media", "max_age"),
}
"""The variable that names each limit Layby may own."""


def ownership(explicit: Collection[str]) -> Ownership:
    """What Layby owns, given the variables that were set."""
    by_role: dict[str, set[str]] = {}
    for var, (role, limit) in _VARIABLES.items():
        if var in explicit:
            by_role.setdefault(role, set()).add(limit)
    return Ownership(
        replicas="LAYBY_STREAM_REPLICAS" in explicit,
        by_role={role: frozenset(limits) for role, limits in by_role.items()},
    )


def merge(wanted: StreamConfig, existing: StreamConfig, owned: Collection[str]) -> StreamConfig:
    """``wanted`` with every tunable limit Layby does not own taken from the existing stream."""
    kept = {name: getattr(existing, name) for name in TUNABLE if name not in owned}
    return dataclasses.replace(wanted, **kept)


def live_horizon(settings: Settings) -> tuple[float, str]:
    """The longest a live question, park or waiting outcome may go without a new event on its
    subject, and the variable that sets it; needs a finite LAYBY_CHECKPOINT_RETENTION."""
    candidates = [
        (settings.waiting_outcome_retention_seconds, "LAYBY_WAITING_OUTCOME_RETENTION"),
        (settings.idle_ttl_seconds, "INTERACTIONS_IDLE_TTL_SECONDS"),
        (settings.answer_timeout_seconds, "INTERACTIONS_ANSWER_TIMEOUT_SECONDS"),
    ]
    if settings.checkpoint_retention_seconds is not None:
        candidates.append((settings.checkpoint_retention_seconds, "LAYBY_CHECKPOINT_RETENTION"))
    return max(candidates)


def check_log_horizon(settings: Settings) -> None:
    """A bounded event log (or ticket stream) must outlast everything still live; refuse to
    start otherwise, naming both variables."""
    for var, max_age in (
        ("LAYBY_EVENTS_MAX_AGE", settings.events_max_age_seconds),
        ("LAYBY_TICKETS_MAX_AGE", settings.tickets_max_age_seconds),
    ):
        if max_age is None:
            continue
        if settings.checkpoint_retention_seconds is None:
            raise SettingsError(
                f"{var} needs LAYBY_CHECKPOINT_RETENTION: with parks kept forever a parked run "
                f"would lose its events after {max_age:g}s"
            )
        horizon, named = live_horizon(settings)
        if max_age < horizon + HORIZON_MARGIN_SECONDS:
            raise SettingsError(
                f"{var} ({max_age:g}s) must exceed {named} ({horizon:g}s) by at least a day "
                f"({horizon + HORIZON_MARGIN_SECONDS:g}s): live questions and parks would lose their events"
            )
