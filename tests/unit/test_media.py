"""Media rules (docs/asking.md#media), each cap at and one past its limit; nothing is stored on error."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from layby_contracts.errors import BadInput
from layby_contracts.events import MediaItem
from layby_contracts.limits import (
    MEDIA_CAPTION_MAX_CHARS,
    MEDIA_DATA_URI_MAX_CHARS,
    MEDIA_MAX_ITEMS,
    MEDIA_TOTAL_URI_CHARS,
    MEDIA_URL_MAX_CHARS,
)
from layby_domain.media import decode_data_image, sniff_image, validate_media

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
PNG_URI = "data:image/png;base64," + base64.b64encode(PNG).decode()
SERVED = "/api/interactions/media/" + "a" * 43


def refused(media: Any) -> BadInput:
    with pytest.raises(BadInput) as info:
        validate_media(media)
    return info.value


def test_five_kinds_each_with_its_own_url_rules_are_accepted() -> None:
    items = validate_media(
        [
            {"kind": "image", "url": PNG_URI, "caption": "logo"},
            {"kind": "image", "url": "https://cdn.example.com/a.png"},
            {"kind": "document", "url": SERVED, "filename": "spec.pdf"},
            {"kind": "video", "url": "https://v.example.com/clip.mp4"},
            MediaItem(kind="audio", url="https://127.0.0.1/x.ogg"),
            {"kind": "link", "url": "http://intranet.example/page?a=1#b", "caption": "Page"},
            {"kind": "image", "url": "http://localhost/api/interactions/media/" + "b" * 43},
        ]
    )
    assert items is not None and [i.kind for i in items][:6] == [
        "image",
        "image",
        "document",
        "video",
        "audio",
        "link",
    ]


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"kind": "gif", "url": "https://x.example/a"}, "media[0].kind"),
        ({"kind": "image", "url": "http://x.example/a.png"}, "media[0].url"),
        ({"kind": "document", "url": PNG_URI}, "media[0].url"),
        ({"kind": "link", "url": SERVED}, "media[0].url"),
        ({"kind": "link", "url": "ftp://x.example/a"}, "media[0].url"),
        ({"kind": "image", "url": "https://x.example/a b"}, "media[0].url"),
        ({"kind": "image", "url": "https://x.example/\u202ea"}, "media[0].url"),
        ({"kind": "image", "url": "https://user@x.example/a"}, "media[0].url"),
        ({"kind": "image", "url": "https://x.example/%41"}, "media[0].url"),
        ({"kind": "image", "url": "https://x.example:70000/a"}, "media[0].url"),
        ({"kind": "image", "url": "https://bücher.example/a"}, "media[0].url"),
        ({"kind": "image", "url": "https://-bad-.example/a"}, "media[0].url"),
        ({"kind": "image", "url": "https://example.123/a"}, "media[0].url"),
        ({"kind": "image", "url": "/api/interactions/media/short"}, "media[0].url"),
        ({"kind": "image", "url": "https://x.example/a", "caption": "  "}, "media[0].caption"),
        ({"kind": "image", "url": "https://x.example/a", "filename": "a.png"}, "media[0].filename"),
        ({"kind": "document", "url": SERVED, "filename": "../etc/passwd"}, "media[0].filename"),
        ({"kind": "image", "url": "https://x.example/a", "size": 3}, "media[0].size"),
        ("not an item", "media[0]"),
    ],
)
def test_a_bad_item_is_refused_naming_its_field(item: Any, field: str) -> None:
    assert refused([item]).field == field


def test_an_empty_list_and_a_non_list_are_refused() -> None:
    assert refused([]).message == "media must be a non-empty list when present"
    assert refused("https://x.example/a").field == "media"


def test_item_count_at_and_one_past_the_cap() -> None:
    one = {"kind": "link", "url": "https://x.example/"}
    assert validate_media([one] * MEDIA_MAX_ITEMS) is not None
    assert refused([one] * (MEDIA_MAX_ITEMS + 1)).field == "media"


def test_url_length_at_and_one_past_the_cap() -> None:
    base = "https://x.example/"
    at = base + "a" * (MEDIA_URL_MAX_CHARS - len(base))
    assert validate_media([{"kind": "link", "url": at}]) is not None
    assert refused([{"kind": "link", "url": at + "a"}]).field == "media[0].url"


def test_caption_at_and_one_past_the_cap() -> None:
    item = {"kind": "link", "url": "https://x.example/"}
    assert validate_media([{**item, "caption": "c" * MEDIA_CAPTION_MAX_CHARS}]) is not None
    assert refused([{**item, "caption": "c" * (MEDIA_CAPTION_MAX_CHARS + 1)}]).field == "media[0].caption"


def test_data_uri_at_and_one_past_the_cap() -> None:
    prefix = "data:image/png;base64,"
    room = MEDIA_DATA_URI_MAX_CHARS - len(prefix)
    payload_len = (room // 4) * 3
    raw = PNG + b"\x00" * (payload_len - len(PNG))
    at = prefix + base64.b64encode(raw).decode()
    assert len(at) <= MEDIA_DATA_URI_MAX_CHARS
    assert validate_media([{"kind": "image", "url": at}]) is not None
    over = at + "A" * (MEDIA_DATA_URI_MAX_CHARS - len(at) + 1)
    assert refused([{"kind": "image", "url": over}]).field == "media[0].url"


def test_total_url_budget_is_checked_on_the_raw_list_before_any_image_is_decoded() -> None:
    """Two inline images at the data-URI cap plus one more character of link pass the 1 MiB budget:
    refused as a whole (field ``media``) before either image is looked at."""
    image = {"kind": "image", "url": "data:image/png;base64," + "A" * (MEDIA_DATA_URI_MAX_CHARS - 22)}
    link = {"kind": "link", "url": "https://x.example/" + "a" * 8}
    total = 2 * MEDIA_DATA_URI_MAX_CHARS + len(link["url"])
    assert total > MEDIA_TOTAL_URI_CHARS
    assert refused([image, image, link]).field == "media"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("data:image/svg+xml;base64,PHN2Zz4=", "not accepted"),
        ("data:image/png,rawbytes", "data:image/<type>;base64"),
        ("data:image/png;base64,@@@@", "strict base64"),
        ("data:image/png;base64,", "empty image"),
        (
            "data:image/jpeg;base64," + base64.b64encode(PNG).decode(),
            "declares image/jpeg but its bytes are image/png",
        ),
        ("data:image/gif;base64," + base64.b64encode(b"<script>").decode(), "not a png, jpeg, gif or webp"),
    ],
)
def test_data_images_must_be_strict_base64_of_the_declared_sniffed_type(uri: str, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        decode_data_image(uri, "media[0].url")


def test_sniffing_knows_the_four_image_types() -> None:
    assert sniff_image(PNG) == "image/png"
    assert sniff_image(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image(b"GIF89a...") == "image/gif"
    assert sniff_image(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image(b"<svg>") is None


LINK = {"kind": "link", "url": "https://x.example/"}


@pytest.mark.parametrize(
    ("media", "message", "field"),
    [
        ("x", "media must be a list of media items", "media"),
        ([], "media must be a non-empty list when present", "media"),
        ([LINK] * (MEDIA_MAX_ITEMS + 1), f"media has 51 items; the limit is {MEDIA_MAX_ITEMS}", "media"),
        ([3], "media[0] must be a MediaItem or a dict", "media[0]"),
        ([{**LINK, "size": 1}], "media[0] has an unknown field 'size'", "media[0].size"),
        (
            [{**LINK, "kind": "gif"}],
            "media[0].kind must be one of image, document, video, audio, link",
            "media[0].kind",
        ),
        ([{**LINK, "url": " "}], "media[0].url must be a non-blank string", "media[0].url"),
        ([{**LINK, "url": None}], "media[0].url must be a non-blank string", "media[0].url"),
        (
            [{**LINK, "url": "https://x.example/a\tb"}],
            "media[0].url must be a single line with no spaces or control characters",
            "media[0].url",
        ),
        (
            [{"kind": "video", "url": PNG_URI}],
            "media[0].url: a data: URI is accepted on an image only",
            "media[0].url",
        ),
        (
            [{"kind": "link", "url": SERVED}],
            "media[0].url must be an absolute URL or /api/interactions/media/<id> (file kinds only)",
            "media[0].url",
        ),
        (
            [{"kind": "image", "url": "/elsewhere"}],
            "media[0].url must be an absolute URL or /api/interactions/media/<id> (file kinds only)",
            "media[0].url",
        ),
        (
            [{"kind": "link", "url": "ftp://x.example/"}],
            "media[0].url must be an absolute http or https URL",
            "media[0].url",
        ),
        (
            [{"kind": "image", "url": "http://x.example/a"}],
            "media[0].url must be an absolute https URL",
            "media[0].url",
        ),
        (
            [{"kind": "image", "url": "http://x.example/api/interactions/media/" + "a" * 43}],
            "media[0].url must be an absolute https URL",
            "media[0].url",
        ),
        (
            [{**LINK, "caption": 3}],
            f"media[0].caption must be non-blank text of at most {MEDIA_CAPTION_MAX_CHARS} characters",
            "media[0].caption",
        ),
        ([{**LINK, "filename": "a.txt"}], "media[0].filename is only for a document", "media[0].filename"),
        (
            [{"kind": "document", "url": SERVED, "filename": "a\nb"}],
            "media[0].filename must be a plain file name of at most 255 characters",
            "media[0].filename",
        ),
        (
            [{"kind": "document", "url": SERVED, "filename": "a\\b"}],
            "media[0].filename must be a plain file name of at most 255 characters",
            "media[0].filename",
        ),
        (
            [{"kind": "document", "url": SERVED, "filename": "f" * 256}],
            "media[0].filename must be a plain file name of at most 255 characters",
            "media[0].filename",
        ),
    ],
)
def test_each_media_rule_has_its_exact_message_and_field(media: Any, message: str, field: str) -> None:
    """docs/asking.md#media: every media refusal says what is wrong and names the item's field."""
    error = refused(media)
    assert (error.message, error.field) == (message, field)


def test_a_document_file_name_may_contain_spaces() -> None:
    """docs/asking.md#media: a plain file name may have spaces, but no other whitespace or slashes."""
    items = validate_media([{"kind": "document", "url": SERVED, "filename": "my spec.pdf"}])
    assert items is not None and items[0].filename == "my spec.pdf"


def test_media_errors_come_list_first_then_item_by_item_kind_url_caption_filename() -> None:
    """docs/asking.md#media: the list and every item's shape first, then the total budget, then each
    item in turn: kind, url, caption, filename."""
    bad_kind = {"kind": "gif", "url": " ", "caption": " ", "filename": "x"}
    assert refused([bad_kind, "not an item"]).field == "media[1]"
    assert refused([bad_kind, {**LINK, "size": 1}]).field == "media[1].size"
    assert refused([bad_kind, LINK]).field == "media[0].kind"
    assert refused([{**bad_kind, "kind": "image"}]).field == "media[0].url"
    assert refused([{**LINK, "caption": " ", "filename": "x"}]).field == "media[0].caption"
    assert refused([LINK, {**LINK, "filename": "x"}]).field == "media[1].filename"
    image = {"kind": "image", "url": "data:image/png;base64," + "A" * (MEDIA_DATA_URI_MAX_CHARS - 22)}
    link = {"kind": "link", "url": "https://x.example/" + "a" * 8}
    assert refused([bad_kind, image, image, link]).field == "media"


def test_media_items_come_back_as_media_items_in_order() -> None:
    """docs/asking.md#media: a valid list is returned as MediaItems, data: images still inline."""
    assert validate_media(None) is None
    assert validate_media(({"kind": "image", "url": PNG_URI, "caption": "c"}, LINK)) == [
        MediaItem(kind="image", url=PNG_URI, caption="c"),
        MediaItem(kind="link", url="https://x.example/"),
    ]
