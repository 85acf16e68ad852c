"""What the rules answer: a broken rule (``Failure``), what a change does (``ChangePlan``), and whether a
value is known yet at preview. Shared by the Cluster's rules and the Volume's (``volume_rules``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pulumi.runtime.rpc import UNKNOWN


@dataclass(frozen=True)
class Failure:
    """One broken rule: the input it concerns and a message that says how to fix it."""

    field: str
    message: str


@dataclass(frozen=True)
class ChangePlan:
    """What a change from old to new inputs does.

    ``replace`` and ``update`` list the fields that force a replacement or are changed in place;
    ``refusals`` are changes the platform cannot make at all.
    """

    replace: list[str] = field(default_factory=list)
    update: list[str] = field(default_factory=list)
    local: list[str] = field(default_factory=list)
    refusals: list[Failure] = field(default_factory=list)
    delete_before_replace: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.replace or self.update or self.local)


def is_unknown(value: Any) -> bool:
    """Whether a value, or anything inside it, is not known yet (preview of a dependent resource)."""
    if isinstance(value, str):
        return value == UNKNOWN
    if isinstance(value, dict):
        return any(is_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(is_unknown(v) for v in value)
    return False


def is_int(value: Any) -> bool:
    """A whole number, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def parse_time(value: Any) -> datetime | None:
    """An ISO-8601 time as an aware datetime (UTC when no zone is given); ``None`` if unparsable."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
