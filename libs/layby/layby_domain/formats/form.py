"""``form``: the answer is a JSON object that matches the question's JSON schema.

The schema is checked at ask time (a valid JSON schema; per-send ``data`` prefill values and
choices, and ``pages`` grouping its fields), and the answer against its effective schema (the
schema with the per-send choices in place of each property's enum). Channels and the callback
page can render only a subset of JSON schema (``check_form_subset``).
(docs/asking.md#schema)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from layby_contracts.errors import BadInput
from layby_contracts.formats import FormatPayload, FormPayload
from layby_domain.formats._base import AskInputs, Format
from layby_domain.values import nul_path

if TYPE_CHECKING:
    import jsonschema


class Form(Format):
    name = "form"
    page = "form"
    control = "fields"
    delivered_as_form = True

    def check_ask(self, ask: AskInputs) -> dict[str, Any] | None:
        self._refuse_options(ask.options)
        if ask.schema is None:
            raise BadInput("answer_format 'form' requires a schema", field="schema")
        checked = check_schema(ask.schema)
        for name, value in (("data", ask.data), ("pages", ask.pages)):
            where = nul_path(value)
            if where is not None:
                raise BadInput(f"{name} must not contain NUL characters", field=name)
        payload = {"schema": checked, **check_form_extras(checked, ask.data, ask.pages)}
        self._refuse_verifier(ask.verifier)
        return payload

    def check_answer(self, payload: FormatPayload, answer: Any) -> Any:
        import jsonschema  # only form answers pay for loading it
        import referencing.exceptions

        assert isinstance(payload, FormPayload)
        schema = effective_schema({"schema": payload.schema, "data": payload.data}) or None
        if not isinstance(schema, dict):
            raise BadInput("question schema is invalid: missing or non-object schema")
        if not isinstance(answer, dict):
            raise BadInput("answer must be an object")
        try:
            mismatch = schema_mismatch(schema, answer)
        except RecursionError:
            raise BadInput("answer does not match schema: nested too deeply") from None
        except (jsonschema.SchemaError, referencing.exceptions.Unresolvable) as exc:
            raise BadInput(f"question schema is invalid: {exc}") from None
        if mismatch is not None:
            where, message = mismatch
            if where:
                raise BadInput(f"answer does not match schema at {where}: {message}", field=where)
            raise BadInput(f"answer does not match schema: {message}")
        return answer

    def delivery(self, payload: FormatPayload) -> dict[str, Any]:
        assert isinstance(payload, FormPayload)
        return {"schema": payload.schema}


FORM = Form()


def _dotted(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path)


def check_schema(schema: object, field: str = "schema") -> dict[str, Any]:
    """A form schema must be a JSON-schema dict that is itself valid (``field``: where it came)."""
    import jsonschema  # only form questions pay for loading it

    if not isinstance(schema, dict) or not schema:
        raise BadInput(f"{field} must be a msgspec Struct type or a non-empty JSON-schema dict", field=field)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        suffix = f" at {where}" if where else ""
        raise BadInput(f"{field} is not a valid JSON schema{suffix}: {exc.message}", field=field) from None
    except RecursionError:
        raise BadInput(f"{field} is nested too deeply", field=field) from None
    try:
        msgspec.json.encode(schema)
    except (TypeError, msgspec.EncodeError) as exc:
        raise BadInput(f"{field} must be JSON-serializable: {exc}", field=field) from None
    return schema


def schema_mismatch(schema: dict[str, Any], instance: object) -> tuple[str, str] | None:
    """Where (the dotted path, "" at the root) and why ``instance`` fails ``schema`` at its most
    relevant error, or None when it matches. jsonschema's own errors (an invalid or unresolvable
    schema, a RecursionError) pass through for the caller to name."""
    import jsonschema  # only schema-checked answers pay for loading it

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(instance))
    return None if error is None else (_dotted(error.absolute_path), error.message)


PAGE_TITLE_MAX_CHARS = 200


def _prop_validator(schema: dict[str, Any], prop: Any) -> jsonschema.Draft202012Validator:
    """A validator for one top-level property, resolving ``$defs`` of the root schema."""
    import jsonschema  # only form questions pay for loading it

    sub = dict(prop) if isinstance(prop, dict) else {}
    if "$defs" in schema and "$defs" not in sub:
        sub["$defs"] = schema["$defs"]
    return jsonschema.Draft202012Validator(sub)


def _not_a_property(name: object, where: str) -> BadInput:
    return BadInput(f"{where}: {name!r} is not a property of the schema", field=where)


def _first_error(validator: jsonschema.Draft202012Validator, instance: object) -> str | None:
    """The message of the most relevant error of ``instance``, or None when it is valid."""
    import jsonschema  # only form questions pay for loading it

    error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
    return None if error is None else error.message


def check_form_extras(schema: dict[str, Any], data: object, pages: object) -> dict[str, Any]:
    """Per-send ``data`` (``values`` prefill, ``options`` choices) and ``pages``
    (docs/asking.md#per-send-form-data-and-pages);
    every error names the field. Returns the keys to add to the form's format payload.

    The errors come in this order: ``data`` (its keys, then ``values``, then ``options``), then
    ``pages``; each rule below raises the first fault it finds, in the order it walks the input."""
    props = schema.get("properties")
    props = props if isinstance(props, dict) else {}
    extra: dict[str, Any] = {}
    if data is not None:
        _check_data(schema, props, data)
        extra["data"] = data
    if pages is not None:
        _check_pages(props, pages)
        extra["pages"] = pages
    return extra


def _check_data(schema: dict[str, Any], props: dict[Any, Any], data: object) -> None:
    """``data`` is an object with only ``values`` and/or ``options``."""
    if not isinstance(data, dict):
        raise BadInput("data must be an object with 'values' and/or 'options'", field="data")
    for key in data:
        if key not in ("values", "options"):
            raise BadInput(f"data has an unknown key {key!r} (values, options)", field=f"data.{key}")
    values = data.get("values")
    if values is not None:
        _check_prefill(schema, props, values)
    options = data.get("options")
    if options is not None:
        _check_per_send_options(schema, props, options)


def _check_prefill(schema: dict[str, Any], props: dict[Any, Any], values: object) -> None:
    """``data.values``: each name is a property and each value satisfies that property's schema."""
    for name, value, where in _by_property(props, "values", values):
        error = _first_error(_prop_validator(schema, props[name]), value)
        if error is not None:
            raise BadInput(f"{where} does not match its property's schema: {error}", field=where)


def _check_per_send_options(schema: dict[str, Any], props: dict[Any, Any], options: object) -> None:
    """``data.options``: for a string property only, a non-empty list of ``{value, label?}``."""
    for name, choices, where in _by_property(props, "options", options):
        prop = props[name] if isinstance(props[name], dict) else {}
        if prop.get("type") != "string":
            raise BadInput(f"{where}: options are only for string properties", field=where)
        if not isinstance(choices, list) or not choices:
            raise BadInput(f"{where} must be a non-empty list of {{value, label?}}", field=where)
        # A per-send choice replaces the enum (the effective schema), so it is not held to it.
        loose = _prop_validator(schema, {k: v for k, v in prop.items() if k != "enum"})
        for i, choice in enumerate(choices):
            _check_choice(loose, choice, f"{where}[{i}]")


def _by_property(props: dict[Any, Any], key: str, given: object) -> Iterator[tuple[str, Any, str]]:
    """``data.<key>``'s entries as (property name, value, where it stands), each name refused
    unless it is a property of the form."""
    if not isinstance(given, dict):
        raise BadInput(f"data.{key} must be an object keyed by property name", field=f"data.{key}")
    for name, value in given.items():
        where = f"data.{key}.{name}"
        if name not in props:
            raise _not_a_property(name, where)
        yield name, value, where


def _check_choice(loose: jsonschema.Draft202012Validator, choice: object, at: str) -> None:
    """One choice: a string ``value`` that fits the property apart from its enum, and an optional
    non-blank ``label``."""
    if not isinstance(choice, dict) or set(choice) - {"value", "label"} or "value" not in choice:
        raise BadInput(f"{at} must be {{value, label?}}", field=at)
    if not isinstance(choice["value"], str):
        raise BadInput(f"{at}.value must be a string", field=f"{at}.value")
    error = _first_error(loose, choice["value"])
    if error is not None:
        raise BadInput(f"{at}.value does not match its property's schema: {error}", field=f"{at}.value")
    label = choice.get("label")
    if label is not None and (not isinstance(label, str) or not label.strip()):
        raise BadInput(f"{at}.label must be non-blank text", field=f"{at}.label")


def _check_pages(props: dict[Any, Any], pages: object) -> None:
    """``pages``: a non-empty list of pages on which every property appears exactly once."""
    if not isinstance(pages, list) or not pages:
        raise BadInput("pages must be a non-empty list of {title, fields}", field="pages")
    seen: dict[str, str] = {}  # property name -> the page it is on
    for i, page in enumerate(pages):
        _check_page(props, page, f"pages[{i}]", seen)
    missing = [name for name in props if name not in seen]
    if missing:
        raise BadInput(
            f"pages miss the field {missing[0]!r}: every property appears exactly once", field="pages"
        )


def _check_page(props: dict[Any, Any], page: object, at: str, seen: dict[str, str]) -> None:
    """One page: ``{title, fields}``, a short non-blank title, and names of properties not yet on
    a page (recorded in ``seen``)."""
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
        raise BadInput(f"{at}.fields must be a non-empty list of property names", field=f"{at}.fields")
    for j, name in enumerate(fields):
        where = f"{at}.fields[{j}]"
        if not isinstance(name, str) or name not in props:
            raise _not_a_property(name, where)
        if name in seen:
            raise BadInput(f"{where}: {name!r} repeats (already on {seen[name]})", field=where)
        seen[name] = at


SCALAR_TYPES = ("string", "boolean", "integer", "number")


def check_form_subset(schema: object) -> None:
    """The renderable subset of a channel form (docs/asking.md#channel-form-subset); raises naming the
    property or rule.

    The callback form page renders exactly this subset; extra constraint keywords next to a
    scalar ``type`` are not rendered but are enforced when the answer is validated. The errors come
    in this order: the root, each property in turn (its type, then its enum), then ``required``.
    """
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise BadInput('a channel form schema must have {"type": "object"} at its root', field="schema")
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        raise BadInput("a channel form schema needs a non-empty properties map", field="schema.properties")
    for name, prop in props.items():
        _check_renderable_property(f"schema.properties.{name}", prop)
    required = schema.get("required")
    if required is not None:
        _check_required_names(required, props)


def _check_renderable_property(where: str, prop: object) -> None:
    """A scalar ``type``; an ``enum`` only on a string, as a non-empty list of strings."""
    keywords = prop if isinstance(prop, dict) else {}
    kind = keywords.get("type")
    if not isinstance(kind, str) or kind not in SCALAR_TYPES:
        raise BadInput(
            f"{where}: a channel form property must have a scalar type "
            f"({', '.join(SCALAR_TYPES)}); nested objects, arrays, anyOf/oneOf/$ref and a missing "
            "type cannot be rendered",
            field=where,
        )
    if "enum" not in keywords:
        return
    enum = keywords["enum"]
    if kind != "string":
        raise BadInput(f"{where}: enum is allowed only on string properties", field=f"{where}.enum")
    if not isinstance(enum, list) or not enum or not all(isinstance(v, str) for v in enum):
        raise BadInput(f"{where}: enum must be a non-empty list of strings", field=f"{where}.enum")


def _check_required_names(required: object, props: dict[Any, Any]) -> None:
    """``required``: a list naming only declared properties."""
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise BadInput("schema.required must be a list of property names", field="schema.required")
    for name in required:
        if name not in props:
            raise BadInput(
                f"schema.required names {name!r}, which is not a declared property",
                field="schema.required",
            )


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
