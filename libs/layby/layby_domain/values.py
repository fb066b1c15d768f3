"""Rules every JSON-like value that enters Layby follows, whatever carries it (an ask, an answer,
a form's schema, a door's rule, a run's input): one module that the others import, so the
formats and the validation of asks share it without importing each other."""

from __future__ import annotations


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


__all__ = ["nul_path"]
