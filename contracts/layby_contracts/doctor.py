"""What a service answers on ``Names.doctor_ping`` (core NATS request, many replies): who it is and
what its clock says, so ``layby doctor`` can count the services and compare clocks
(docs/operations.md#layby-doctor)."""

from __future__ import annotations

import msgspec


class ServiceSeen(msgspec.Struct, frozen=True, kw_only=True, tag="doctor.seen.v1"):
    """One service process: its role (``ask``, ``door``...), an ``instance`` name (host and pid),
    its wall clock in Unix seconds (``clock``) and the command protocol it speaks."""

    service: str
    instance: str
    clock: float
    protocol: int
