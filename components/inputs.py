"""``pulumi.Input`` values in component arguments, resolved where the engine resolves them.

The manifest builders and the guard are pure functions of plain data. An argument may still hold an
``Output`` (a namespace, an image digest, a bucket name from another resource): :meth:`Placeholders.plain`
swaps each one for a placeholder text, the builders run as usual (a placeholder is copied or embedded
in text like any string), the guard checks the result, and :meth:`Placeholders.restore` turns every text that
holds placeholders back into an ``Output`` that the engine fills in when the values are known. So an
``Output`` never meets ``str()`` and never becomes "Calling __str__ on an Output[T]".

A run key computed over a placeholder (see ``manifests.run_key``) is a deferred digest: it is worked
out from the resolved text, so a changed image still starts a fresh run.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping
from typing import Any

import pulumi

from .manifests import finish_deferred_digests

_PLACEHOLDER = "@@pulumi-input-{}@@"
_PLACEHOLDER_PATTERN = re.compile(r"@@pulumi-input-(\d+)@@")


def _is_input_value(value: Any) -> bool:
    return isinstance(value, pulumi.Output) or inspect.isawaitable(value)


class Placeholders:
    """The ``Output`` values taken out of one component's arguments, by placeholder."""

    def __init__(self) -> None:
        self.outputs: list[pulumi.Output[Any]] = []

    def plain(self, value: Any) -> Any:
        """A copy of ``value`` (dataclasses, mappings, tuples, lists) with each Input replaced by a placeholder."""
        if _is_input_value(value):
            self.outputs.append(pulumi.Output.from_input(value))
            return _PLACEHOLDER.format(len(self.outputs) - 1)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # Built anew from its fields, not with dataclasses.replace: replace would also pass a grouped
            # argument's flat keywords (read back from its groups), and those would undo the copy's groups.
            values = {f.name: self.plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return type(value)(**values)
        if isinstance(value, Mapping):
            return {self.plain(k): self.plain(v) for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(self.plain(v) for v in value)
        if isinstance(value, list):
            return [self.plain(v) for v in value]
        return value

    def restore(self, value: Any) -> Any:
        """``value`` with every text holding placeholders turned into an Output of the resolved text."""
        if isinstance(value, str):
            return self._restore_text(value)
        if isinstance(value, Mapping):
            return {k: self.restore(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.restore(v) for v in value]
        return value

    def _restore_text(self, text: str) -> Any:
        indexes = [int(i) for i in _PLACEHOLDER_PATTERN.findall(text)]
        if not indexes:
            return text
        if text == _PLACEHOLDER.format(indexes[0]):
            return self.outputs[indexes[0]]  # the value itself, with its own type
        outputs = [self.outputs[i] for i in indexes]

        def fill(values: list[Any]) -> str:
            resolved = dict(zip(indexes, values, strict=True))
            filled = _PLACEHOLDER_PATTERN.sub(lambda m: str(resolved[int(m.group(1))]), text)
            return finish_deferred_digests(filled)

        return pulumi.Output.all(*outputs).apply(fill)


def holds_placeholder(value: Any) -> bool:
    """Whether a rendered value (a name, say) depends on an Input."""
    return isinstance(value, str) and bool(_PLACEHOLDER_PATTERN.search(value))


def without_placeholders(text: str, fallback: str) -> str:
    """``text`` if it holds no placeholder, else ``fallback``: for Pulumi's logical names, which must be plain."""
    return fallback if holds_placeholder(text) else text
