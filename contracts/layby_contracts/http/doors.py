"""Bodies of the door-definition doors (docs/doors/doors.md).

The request body of ``PUT /api/doors/{name}`` is a ``DoorSpec`` itself: the definition is the one
thing a client sends, and the door reads it under the body cap. A definition comes back with who
saved it last and when.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Struct

from layby_contracts.doors import DoorSpec
from layby_contracts.http.common import Timestamp
from layby_contracts.http.interactions import Count, NextPage, PageNumber, PageSize
from layby_contracts.limits import PAGE_SIZE_MAX


class DoorView(Struct, frozen=True, kw_only=True):
    """One saved door: its definition (unset keys absent), who saved it last and when."""

    name: str
    spec: DoorSpec
    updated_by: str
    updated_at: Timestamp


class DoorBody(Struct, frozen=True, kw_only=True):
    """``GET`` and ``PUT /api/doors/{name}``: the door as saved."""

    data: DoorView


class DoorPageData(Struct, frozen=True, kw_only=True):
    items: Annotated[list[DoorView], msgspec.Meta(max_length=PAGE_SIZE_MAX)]
    total: Count
    page: PageNumber
    page_size: PageSize
    next_page: NextPage


class DoorPage(Struct, frozen=True, kw_only=True):
    """``GET /api/doors``: one page of saved doors, by name."""

    data: DoorPageData


class DoorRemovedData(Struct, frozen=True, kw_only=True):
    name: str
    status: Literal["deleted"]
    deleted_by: str


class DoorRemoved(Struct, frozen=True, kw_only=True):
    """``DELETE /api/doors/{name}``: the door is gone from the log's point of view at once."""

    data: DoorRemovedData
