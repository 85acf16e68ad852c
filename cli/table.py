"""Plain-text tables and value formatting for people. Pure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pulumi.runtime.rpc import UNKNOWN

from .stack_state import is_secret


def fmt(value: Any) -> str:
    """A value as a short, unambiguous cell; secrets are never shown."""
    if is_secret(value):
        return "[secret]"
    if value is None:
        return "(unset)"
    if value == UNKNOWN:
        return "(known after apply)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> str:
    """Left-aligned columns separated by two spaces, a dashed rule under the headers."""
    cells = [[fmt(c) if not isinstance(c, str) else c for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(values: Sequence[str]) -> str:
        return (indent + "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True))).rstrip()

    rule = [("-" * w) for w in widths]
    return "\n".join([line(list(headers)), line(rule), *(line(r) for r in cells)])
