"""Wire-contract constants (docs/asking.md#question-text, docs/asking.md#media-caps,
docs/doors/common.md#body-size-cap, docs/aggregates/interaction.md#reserved-values). These are not operator
settings."""

from typing import Final

from layby_contracts.formats import FORMAT_NAMES

QUESTION_MAX_CHARS: Final = 8192
MEDIA_MAX_ITEMS: Final = 50
MEDIA_URL_MAX_CHARS: Final = 8192
MEDIA_DATA_URI_MAX_CHARS: Final = 524288
MEDIA_CAPTION_MAX_CHARS: Final = 1000
MEDIA_TOTAL_URI_CHARS: Final = 1048576
MEDIA_FILENAME_MAX_CHARS: Final = 255
MEDIA_ROUTE_PREFIX: Final = "/api/interactions/media/"
MAX_BODY_BYTES_DEFAULT: Final = 65536
PAGE_MAX: Final = 1_000_000
PAGE_SIZE_DEFAULT: Final = 50
PAGE_SIZE_MAX: Final = 200
KEEPALIVE_SECONDS: Final = 15.0

ANSWER_FORMATS: Final = FORMAT_NAMES
"""The answer formats' names (the one list is ``layby_contracts.formats.FORMAT_NAMES``)."""

# Sentinel answerers (docs/aggregates/interaction.md#reserved-values).
ANSWERED_BY_EXTERNAL: Final = "external-callback"
ANSWERED_BY_EXPIRY: Final = "system:expiry"

CHECKPOINT_MAX_BYTES = 512 * 1024
"""Cap on a park's checkpoint (its asks plus every answer so far), well under NATS's max payload."""

FLOW_VERSION_MAX = 1_000_000
"""The largest flow version (a whole number from 1: docs/versions.md)."""
