"""The doctor door's body (docs/operations.md#layby-doctor): what ``GET /api/doctor`` answers and
``layby doctor --json`` prints — each check of an installation with what was found and how to fix it."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from msgspec import Struct

CheckStatus = Literal["ok", "warn", "fail", "skip"]
"""``ok``: as it should be; ``warn``: works, but not as a production installation should;
``fail``: something people will notice (a question nobody can answer, an event that can be lost);
``skip``: not configured, or not checkable from here (``detail`` says which)."""


class DoctorCheck(Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One check: its dotted ``name`` (``nats.sync``, ``channel.team``), its ``status``, what was
    found (``detail``) and, unless it is ``ok``, what to do (``fix``)."""

    name: str
    status: CheckStatus
    detail: str
    fix: str | None = None


class DoctorReport(Struct, frozen=True, kw_only=True):
    """Every check, in a fixed order; ``ok`` is false when any check failed (a warning is not a failure)."""

    ok: bool
    at: datetime
    checks: list[DoctorCheck]


class DoctorView(Struct, frozen=True, kw_only=True):
    """``GET /api/doctor``: the installation's checks as this door sees them."""

    data: DoctorReport
