"""Media on a question through the ask service and the media door (docs/asking.md#media, docs/doors/media.md#the-media-door).

Real services. ``data:image`` images are stored by reference and served publicly by id; every
bad item is refused naming its field before anything is stored.
"""

from __future__ import annotations

import asyncio
import base64

import asyncpg
import pytest

from layby.ids import new_interaction_id
from layby_contracts.errors import BadInput
from layby_server.store.eventstore import EventStore
from tests.conftest import System
from tests.helpers import wait_total

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)
PNG_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()


async def test_an_inline_image_is_stored_by_reference_and_served_by_the_public_media_door(
    system: System, store: EventStore
) -> None:
    client = await system.sdk()
    media = [
        {"kind": "image", "url": PNG_URI, "caption": "A dot"},
        {"kind": "link", "url": "http://intranet.example/page", "caption": "Context"},
    ]
    ask = asyncio.create_task(client.ask_user("Look?", answer_format="confirm", media=media, timeout=30))
    [item] = (await wait_total(system, 1))["items"]
    image, link = item["media"]
    assert image["url"].startswith("/api/interactions/media/") and len(image["url"]) == 24 + 43
    assert image["caption"] == "A dot" and "filename" not in image
    assert link == {"kind": "link", "url": "http://intranet.example/page", "caption": "Context"}
    # The log keeps the reference, never the bytes.
    stored = await store.last(store.names.ix(item["interaction_id"]))
    assert stored is not None and "base64" not in str(stored.event)
    async with system.http(None) as anon:
        resp = await anon.get(image["url"])
    assert resp.status_code == 200
    assert resp.content == PNG
    assert resp.headers["content-type"] == "image/png"
    assert resp.headers["x-content-type-options"] == "nosniff"
    max_age = int(resp.headers["cache-control"].removeprefix("private, max-age="))
    assert 0 < max_age <= system.settings.media_retention_seconds
    ask.cancel()


async def test_the_media_door_refuses_a_malformed_id_and_gives_one_404_for_unknown_ids(
    system: System,
) -> None:
    async with system.http(None) as anon:
        bad = await anon.get("/api/interactions/media/short")
        traversal = [
            await anon.get("/api/interactions/media/" + raw) for raw in ("..%2F..", "a/b", "%2e%2e%2f")
        ]
        unknown_a = await anon.get("/api/interactions/media/" + "a" * 43)
        unknown_b = await anon.get("/api/interactions/media/" + "B" * 43)
    assert bad.status_code == 400 and bad.json() == {"error": "invalid media id"}
    assert [(r.status_code, r.json()) for r in traversal] == [(400, {"error": "invalid media id"})] * 3
    assert unknown_a.status_code == unknown_b.status_code == 404
    assert unknown_a.content == unknown_b.content == b'{"error":"not found"}'


@pytest.mark.parametrize(
    ("media", "field"),
    [
        ([], "media"),
        ([{"kind": "image", "url": "http://cdn.example/a.png"}], "media[0].url"),
        ([{"kind": "video", "url": PNG_URI}], "media[0].url"),
        (
            [{"kind": "image", "url": "data:image/jpeg;base64," + base64.b64encode(PNG).decode()}],
            "media[0].url",
        ),
        ([{"kind": "link", "url": "https://x.example/", "filename": "a.pdf"}], "media[0].filename"),
    ],
)
async def test_bad_media_is_refused_naming_the_field_and_nothing_is_stored(
    system: System, store: EventStore, db: asyncpg.Pool, media: list[dict[str, str]], field: str
) -> None:
    from layby_contracts.commands import REPLY_DECODER, Ask, Refused
    from tests.conftest import OPERATOR

    client = await system.sdk()
    with pytest.raises(BadInput) as info:
        await client.ask_user("Look?", media=media, timeout=5)
    assert info.value.field == field
    # The authority refuses it too, when a client skips the SDK's check.
    cmd = Ask(token=OPERATOR, interaction_id=new_interaction_id(), question="Look?", media=None)
    import msgspec

    payload = msgspec.json.decode(msgspec.json.encode(cmd))
    payload["media"] = media
    reply = REPLY_DECODER.decode(
        (
            await client.nc.request(system.settings.names.cmd_ask, msgspec.json.encode(payload), timeout=10)
        ).data
    )
    assert isinstance(reply, Refused) and reply.field == field, reply
    _, last = await store.bounds()
    assert last == 0
    info_media = await store.js.stream_info(store.names.media_stream)
    assert info_media.state.messages == 0
