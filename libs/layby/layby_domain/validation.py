"""Pure validation of asks and answers, shared by the SDK and the services.

The SDK runs ``validate_ask`` before anything leaves the process; the ask service (the
authority) runs it again before anything is appended (docs/asking.md#validated-before-anything-is-stored).
Every error is a ``BadInput`` naming the field.
"""

from __future__ import annotations

import hashlib
import math
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from layby_contracts.errors import BadInput
from layby_contracts.events import MediaItem
from layby_contracts.limits import ANSWER_FORMATS, QUESTION_MAX_CHARS
from layby_domain.media import validate_media
from layby_domain.verifiers import check_binding

if TYPE_CHECKING:
    import jsonschema

GROUP_ID_MAX_CHARS = 256
OPTION_MAX_CHARS = 1000
OPTIONS_MAX_ITEMS = 200
_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class AskSpec(msgspec.Struct, frozen=True, kw_only=True):
    """An ask after validation: what the ask service records."""

    question: str
    answer_format: str
    format_payload: dict[str, Any] | None
    timeout: float
    group_id: str | None
    audience: str | None
    sensitive: bool
    mode: str = "sync"
    expiry_at: datetime | None = None
    media: list[MediaItem] | None = None
    channel: str | None = None
    recipient: str | None = None


RECIPIENT_MAX_CHARS = 512


def check_channel(channel: object, recipient: object, link: object, verifier: object) -> None:
    """The channel rules that need no registry (docs/asking.md#channel-checks), naming the field."""
    if recipient is not None:
        if channel is None:
            raise BadInput("recipient requires a channel", field="recipient")
        if not isinstance(recipient, str) or not recipient.strip() or len(recipient) > RECIPIENT_MAX_CHARS:
            raise BadInput(
                f"recipient must be non-blank text of at most {RECIPIENT_MAX_CHARS} characters",
                field="recipient",
            )
    if channel is None:
        return
    if not isinstance(channel, str) or not channel.strip():
        raise BadInput("channel must name a registered channel", field="channel")
    if link is not None:
        raise BadInput("link is not allowed with a channel: the channel delivers the callback", field="link")
    if verifier is not None:
        raise BadInput("verifier is not allowed with a channel", field="verifier")


def nul_path(value: object) -> str | None:
    """Where a NUL character hides in a JSON-like value ("" for the root), or None.

    PostgreSQL text and jsonb cannot hold U+0000, so such input is refused up front rather than
    left to fail in a projection later.
    """
    stack: list[tuple[str, object]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                if isinstance(key, str) and "\x00" in key:
                    return child_path
                stack.append((child_path, child))
        elif isinstance(item, list | tuple):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(item))
    return None


def is_interaction_id(value: object) -> bool:
    """Interaction ids are lowercase uuid4 strings: safe as a subject token and as a path part."""
    return isinstance(value, str) and bool(_UUID_RE.match(value))


_WAITER_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


def is_waiter(value: object) -> bool:
    """A waiter id is one subject token: no dots, no wildcards."""
    return isinstance(value, str) and bool(_WAITER_RE.match(value))


def new_interaction_id() -> str:
    return str(uuid.uuid4())


def call_interaction_id(run_id: str, call: int) -> str:
    """The interaction id of a run's ``call``-th ask: the same on every replay and every worker.

    A continuation executed twice (a worker died before acking) asks the same questions under
    the same ids, so the second execution's asks are de-duplicated instead of doubled.
    """
    digest = bytearray(hashlib.sha256(f"layby-run:{run_id}:{call}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x40  # version 4 layout, so it is an ordinary interaction id
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


_FLOW_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def is_flow_name(value: object) -> bool:
    """Flow names are subject tokens: 1-64 of [A-Za-z0-9_-]."""
    return isinstance(value, str) and bool(_FLOW_RE.match(value))


def check_wait(mode: object, timeout: object, expiry_at: object) -> datetime | None:
    """``mode`` / ``timeout`` / ``expiry_at`` rules (docs/asking.md#mode-and-expiry); returns UTC
    ``expiry_at``."""
    if mode not in ("sync", "async"):
        raise BadInput(f"mode must be 'sync' or 'async', got {mode!r}", field="mode")
    if expiry_at is not None and timeout is not None:
        raise BadInput("timeout and expiry_at are mutually exclusive", field="expiry_at")
    if mode == "sync":
        if expiry_at is not None:
            raise BadInput("expiry_at is valid only with mode='async'", field="expiry_at")
        return None
    if expiry_at is None:
        raise BadInput(
            "mode='async' requires expiry_at (a timezone-aware datetime): a park with no deadline "
            "could never expire",
            field="expiry_at",
        )
    if not isinstance(expiry_at, datetime):
        raise BadInput(
            f"expiry_at must be a timezone-aware datetime, got {type(expiry_at).__name__}", field="expiry_at"
        )
    if expiry_at.tzinfo is None or expiry_at.utcoffset() is None:
        raise BadInput("expiry_at must be timezone-aware (a naive datetime is refused)", field="expiry_at")
    return expiry_at.astimezone(UTC)


def _check_options(answer_format: str, options: object) -> list[str] | None:
    if options is None:
        if answer_format == "select":
            raise BadInput("answer_format 'select' requires a non-empty options list", field="options")
        return None
    if answer_format not in ("select", "text"):
        raise BadInput(
            f"options are only for 'select' (the choices) or 'text' (suggested replies), "
            f"not for {answer_format!r}",
            field="options",
        )
    if not isinstance(options, list | tuple) or not options:
        raise BadInput("options must be a non-empty list of strings", field="options")
    if len(options) > OPTIONS_MAX_ITEMS:
        raise BadInput(f"options must hold at most {OPTIONS_MAX_ITEMS} items", field="options")
    seen: set[str] = set()
    for index, option in enumerate(options):
        if not isinstance(option, str) or not option.strip():
            raise BadInput(f"options[{index}] must be a non-blank string", field=f"options[{index}]")
        if len(option) > OPTION_MAX_CHARS:
            raise BadInput(
                f"options[{index}] is longer than {OPTION_MAX_CHARS} characters", field=f"options[{index}]"
            )
        if option in seen:
            raise BadInput(f"options[{index}] repeats {option!r}", field=f"options[{index}]")
        seen.add(option)
    return list(options)


def check_schema(schema: object) -> dict[str, Any]:
    """A form schema must be a JSON-schema dict that is itself valid."""
    import jsonschema  # only form questions pay for loading it

    if not isinstance(schema, dict) or not schema:
        raise BadInput("schema must be a msgspec Struct type or a non-empty JSON-schema dict", field="schema")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        suffix = f" at {where}" if where else ""
        raise BadInput(f"schema is not a valid JSON schema{suffix}: {exc.message}", field="schema") from None
    except RecursionError:
        raise BadInput("schema is nested too deeply", field="schema") from None
    try:
        msgspec.json.encode(schema)
    except (TypeError, msgspec.EncodeError) as exc:
        raise BadInput(f"schema must be JSON-serializable: {exc}", field="schema") from None
    return schema


PAGE_TITLE_MAX_CHARS = 200


def _prop_validator(schema: dict[str, Any], prop: Any) -> jsonschema.Draft202012Validator:
    """A validator for one top-level property, resolving ``$defs`` of the root schema."""
    import jsonschema  # only form questions pay for loading it

    sub = dict(prop) if isinstance(prop, dict) else {}
    if "$defs" in schema and "$defs" not in sub:
        sub["$defs"] = schema["$defs"]
    return jsonschema.Draft202012Validator(sub)


def check_form_extras(schema: dict[str, Any], data: object, pages: object) -> dict[str, Any]:
    """Per-send ``data`` (``values`` prefill, ``options`` choices) and ``pages``
    (docs/asking.md#per-send-form-data-and-pages);
    every error names the field. Returns the keys to add to the form's format payload."""
    import jsonschema  # only form questions pay for loading it

    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    extra: dict[str, Any] = {}
    if data is not None:
        if not isinstance(data, dict):
            raise BadInput("data must be an object with 'values' and/or 'options'", field="data")
        for key in data:
            if key not in ("values", "options"):
                raise BadInput(f"data has an unknown key {key!r} (values, options)", field=f"data.{key}")
        values = data.get("values")
        if values is not None:
            if not isinstance(values, dict):
                raise BadInput("data.values must be an object keyed by property name", field="data.values")
            for name, value in values.items():
                where = f"data.values.{name}"
                if name not in props:
                    raise BadInput(f"{where}: {name!r} is not a property of the schema", field=where)
                error = jsonschema.exceptions.best_match(
                    _prop_validator(schema, props[name]).iter_errors(value)
                )
                if error is not None:
                    raise BadInput(
                        f"{where} does not match its property's schema: {error.message}", field=where
                    )
        options = data.get("options")
        if options is not None:
            if not isinstance(options, dict):
                raise BadInput("data.options must be an object keyed by property name", field="data.options")
            for name, choices in options.items():
                where = f"data.options.{name}"
                if name not in props:
                    raise BadInput(f"{where}: {name!r} is not a property of the schema", field=where)
                prop = props[name] if isinstance(props[name], dict) else {}
                if prop.get("type") != "string":
                    raise BadInput(f"{where}: options are only for string properties", field=where)
                if not isinstance(choices, list) or not choices:
                    raise BadInput(f"{where} must be a non-empty list of {{value, label?}}", field=where)
                loose = _prop_validator(schema, {k: v for k, v in prop.items() if k != "enum"})
                for i, choice in enumerate(choices):
                    at = f"{where}[{i}]"
                    if (
                        not isinstance(choice, dict)
                        or set(choice) - {"value", "label"}
                        or "value" not in choice
                    ):
                        raise BadInput(f"{at} must be {{value, label?}}", field=at)
                    if not isinstance(choice["value"], str):
                        raise BadInput(f"{at}.value must be a string", field=f"{at}.value")
                    error = jsonschema.exceptions.best_match(loose.iter_errors(choice["value"]))
                    if error is not None:
                        raise BadInput(
                            f"{at}.value does not match its property's schema: {error.message}",
                            field=f"{at}.value",
                        )
                    label = choice.get("label")
                    if label is not None and (not isinstance(label, str) or not label.strip()):
                        raise BadInput(f"{at}.label must be non-blank text", field=f"{at}.label")
        extra["data"] = data
    if pages is not None:
        if not isinstance(pages, list) or not pages:
            raise BadInput("pages must be a non-empty list of {title, fields}", field="pages")
        seen: dict[str, str] = {}
        for i, page in enumerate(pages):
            at = f"pages[{i}]"
            if not isinstance(page, dict) or set(page) - {"title", "fields"}:
                raise BadInput(f"{at} must be {{title, fields}}", field=at)
            title = page.get("title")
            if not isinstance(title, str) or not title.strip() or len(title) > PAGE_TITLE_MAX_CHARS:
                raise BadInput(
                    f"{at}.title must be non-blank text of at most {PAGE_TITLE_MAX_CHARS} characters",
                    field=f"{at}.title",
                )
            fields = page.get("fields")
            if not isinstance(fields, list) or not fields:
                raise BadInput(
                    f"{at}.fields must be a non-empty list of property names", field=f"{at}.fields"
                )
            for j, name in enumerate(fields):
                where = f"{at}.fields[{j}]"
                if not isinstance(name, str) or name not in props:
                    raise BadInput(f"{where}: {name!r} is not a property of the schema", field=where)
                if name in seen:
                    raise BadInput(f"{where}: {name!r} repeats (already on {seen[name]})", field=where)
                seen[name] = at
        missing = [name for name in props if name not in seen]
        if missing:
            raise BadInput(
                f"pages miss the field {missing[0]!r}: every property appears exactly once", field="pages"
            )
        extra["pages"] = pages
    return extra


SCALAR_TYPES = ("string", "boolean", "integer", "number")


def check_form_subset(schema: object) -> None:
    """The renderable subset of a channel form (docs/asking.md#channel-form-subset); raises naming the
    property or rule.

    The callback form page renders exactly this subset; extra constraint keywords next to a
    scalar ``type`` are not rendered but are enforced when the answer is validated.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise BadInput('a channel form schema must have {"type": "object"} at its root', field="schema")
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        raise BadInput("a channel form schema needs a non-empty properties map", field="schema.properties")
    for name, prop in props.items():
        where = f"schema.properties.{name}"
        kind = prop.get("type") if isinstance(prop, dict) else None
        if not isinstance(kind, str) or kind not in SCALAR_TYPES:
            raise BadInput(
                f"{where}: a channel form property must have a scalar type "
                f"({', '.join(SCALAR_TYPES)}); nested objects, arrays, anyOf/oneOf/$ref and a missing "
                "type cannot be rendered",
                field=where,
            )
        if "enum" in prop:
            enum = prop["enum"]
            if kind != "string":
                raise BadInput(f"{where}: enum is allowed only on string properties", field=f"{where}.enum")
            if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
                raise BadInput(f"{where}: enum must be a non-empty list of strings", field=f"{where}.enum")
    required = schema.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise BadInput("schema.required must be a list of property names", field="schema.required")
        for name in required:
            if name not in props:
                raise BadInput(
                    f"schema.required names {name!r}, which is not a declared property",
                    field="schema.required",
                )


def external_payload(
    schema: object, verifier: object, link_url: object, channel: object = None
) -> dict[str, Any]:
    """``{"url"?, "schema"?, "verifier"?}`` of an external question
    (docs/aggregates/interaction.md#the-recorded-question); a channel
    question has no link (the channel delivers the callback URL itself)."""
    payload: dict[str, Any] = {}
    if channel is None:
        if not isinstance(link_url, str) or not link_url:
            raise BadInput("answer_format 'external' requires a link (or a channel)", field="link")
        check_link_url(link_url)
        payload["url"] = link_url
    if schema is not None:
        payload["schema"] = check_schema(schema)
    if verifier is not None:
        payload["verifier"] = check_binding(verifier)
    return payload


def check_link_url(url: str) -> None:
    """The final URL a person visits: an absolute http(s) URL on one line, at most 8192 chars."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise BadInput("link must produce an absolute http:// or https:// URL", field="link")
    if len(url) > 8192 or any(c.isspace() or ord(c) < 32 for c in url):
        raise BadInput("link must be a single-line URL of at most 8192 characters", field="link")


def effective_schema(format_payload: dict[str, Any]) -> dict[str, Any]:
    """The form schema with ``data.options`` values replacing each property's enum (A5b.60)."""
    schema = format_payload.get("schema")
    options = ((format_payload.get("data") or {}).get("options")) or {}
    if not isinstance(schema, dict) or not options:
        return schema if isinstance(schema, dict) else {}
    props = dict(schema.get("properties") or {})
    for name, choices in options.items():
        if isinstance(props.get(name), dict):
            props[name] = {**props[name], "enum": [c["value"] for c in choices]}
    return {**schema, "properties": props}


def validate_ask(
    question: object,
    *,
    answer_format: object = "text",
    options: object = None,
    schema: object = None,
    timeout: object = None,
    group_id: object = None,
    audience: object = None,
    sensitive: object = False,
    default_timeout: float = 3600.0,
    mode: object = "sync",
    expiry_at: object = None,
    media: object = None,
    data: object = None,
    pages: object = None,
    verifier: object = None,
    link_url: object = None,
    channel: object = None,
    recipient: object = None,
) -> AskSpec:
    """Validate every argument of an ask; raise ``BadInput`` naming the first bad field."""
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise BadInput(
                f"timeout must be a number of seconds, got {type(timeout).__name__}", field="timeout"
            )
        if not math.isfinite(timeout) or timeout <= 0:
            raise BadInput(f"timeout must be positive, got {timeout}", field="timeout")
    if not isinstance(answer_format, str) or answer_format not in ANSWER_FORMATS:
        raise BadInput(f"unknown answer_format: {answer_format!r}", field="answer_format")
    if audience is not None and (not isinstance(audience, str) or not audience.strip()):
        raise BadInput("audience must be a non-empty identity", field="audience")
    if not isinstance(question, str) or not question.strip():
        raise BadInput("question must be a non-empty string", field="question")
    for name, value in (
        ("question", question),
        ("group_id", group_id),
        ("audience", audience),
        ("options", options),
        ("schema", schema),
    ):
        where = nul_path(value)
        if where is not None:
            field = name + (where if where.startswith("[") else f".{where}" if where else "")
            raise BadInput(f"{field} must not contain NUL characters", field=field)
    if len(question) > QUESTION_MAX_CHARS:
        raise BadInput(
            f"question is {len(question)} characters; the limit is {QUESTION_MAX_CHARS}", field="question"
        )
    check_channel(channel, recipient, link_url, verifier)
    checked_options = _check_options(answer_format, options)
    payload: dict[str, Any] | None = None
    if answer_format == "form":
        if schema is None:
            raise BadInput("answer_format 'form' requires a schema", field="schema")
        checked = check_schema(schema)
        for name, value in (("data", data), ("pages", pages)):
            where = nul_path(value)
            if where is not None:
                raise BadInput(f"{name} must not contain NUL characters", field=name)
        payload = {"schema": checked, **check_form_extras(checked, data, pages)}
    elif data is not None or pages is not None:
        raise BadInput(
            f"{'data' if data is not None else 'pages'} is only for 'form', not for {answer_format!r}",
            field="data" if data is not None else "pages",
        )
    elif answer_format == "external":
        payload = external_payload(schema, verifier, link_url, channel)
    elif schema is not None:
        raise BadInput(f"schema is only for 'form' or 'external', not for {answer_format!r}", field="schema")
    if answer_format != "external" and verifier is not None:
        raise BadInput("verifier is only for 'external' questions", field="verifier")
    if checked_options is not None:
        payload = {"options": checked_options}
    if group_id is not None and (
        not isinstance(group_id, str) or not group_id.strip() or len(group_id) > GROUP_ID_MAX_CHARS
    ):
        raise BadInput(
            f"group_id must be a non-blank string of at most {GROUP_ID_MAX_CHARS} characters",
            field="group_id",
        )
    if not isinstance(sensitive, bool):
        raise BadInput("sensitive must be a boolean", field="sensitive")
    expiry = check_wait(mode, timeout, expiry_at)
    checked_media = validate_media(media)
    if mode == "async" and sensitive:
        raise BadInput(
            "sensitive is not available with mode='async': a park's answer is kept in its run's "
            "checkpoint, and a sensitive answer is never stored",
            field="sensitive",
        )
    return AskSpec(
        question=question,
        answer_format=answer_format,
        format_payload=payload,
        timeout=float(timeout) if timeout is not None else default_timeout,
        group_id=group_id,
        audience=audience,
        sensitive=sensitive,
        mode=str(mode),
        expiry_at=expiry,
        media=checked_media,
        channel=channel if isinstance(channel, str) else None,
        recipient=recipient if isinstance(recipient, str) else None,
    )


def _dotted(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path)


def validate_answer(answer_format: str, format_payload: dict[str, Any] | None, answer: Any) -> Any:
    """Check an answer against its question (docs/doors/answer.md#answer-validation); returns the typed value.

    Raises ``BadInput`` with the door's exact message; ``field`` carries the dotted path of a
    failing form field and is ``None`` for root-level faults.
    """
    import jsonschema  # only form questions pay for loading it
    import referencing.exceptions  # only form questions pay for loading it

    if answer_format == "text":
        if not isinstance(answer, str):
            raise BadInput("answer must be a string")
        return answer
    if answer_format == "confirm":
        if not isinstance(answer, bool):
            raise BadInput("answer must be a boolean")
        return answer
    if answer_format == "select":
        options = (format_payload or {}).get("options") or []
        if not isinstance(answer, str) or answer not in options:
            raise BadInput(f"answer must be one of {options!r}")
        return answer
    if answer_format == "form":
        schema = effective_schema(format_payload or {}) or None
        if not isinstance(schema, dict):
            raise BadInput("question schema is invalid: missing or non-object schema")
        if not isinstance(answer, dict):
            raise BadInput("answer must be an object")
        try:
            error = jsonschema.exceptions.best_match(
                jsonschema.Draft202012Validator(schema).iter_errors(answer)
            )
        except RecursionError:
            raise BadInput("answer does not match schema: nested too deeply") from None
        except (jsonschema.SchemaError, referencing.exceptions.Unresolvable) as exc:
            raise BadInput(f"question schema is invalid: {exc}") from None
        if error is not None:
            where = _dotted(error.absolute_path)
            if where:
                raise BadInput(f"answer does not match schema at {where}: {error.message}", field=where)
            raise BadInput(f"answer does not match schema: {error.message}")
        return answer
    raise BadInput("external interactions are answered via their callback URL")
