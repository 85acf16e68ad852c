"""Fields a request sends that the API does not define: found at any depth and taken out before validation.

The real API's enum names (``CLUSTER_PHASE_READY``, ``NODE_PHASE_RUNNING``) are those of protobuf enums, so
its JSON most likely goes through a protobuf JSON gateway, which discards unknown fields by default; the
docs say nothing either way. Together's own Terraform provider relies on it: through ``together-go`` its
create sends the deprecated ``auto_scaled`` and its update the whole object (``cluster_name``,
``gpu_type``, ``region``, ``project_id``, ...). So the emulator ignores such fields as the gateway would,
while the fields it knows keep their strict checks (the request models still forbid extras: what reaches
them has been cleaned here), and it records what it ignored so a test can prove that a client of ours
sends none (see ``docs/guides/emulator-and-twin.md``).
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel


def strip_unknown(
    model: type[BaseModel], data: dict[str, Any], prefix: str = ""
) -> tuple[dict[str, Any], list[str]]:
    """``data`` without the keys ``model`` does not define (at any depth), and their dotted paths in body order.

    A known field's value is left as sent, whatever its type: validating it is the model's job.
    """
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:
            ignored.append(f"{prefix}{key}")
            continue
        kept[key] = _strip_value(field.annotation, value, f"{prefix}{key}", ignored)
    return kept, ignored


def _strip_value(annotation: Any, value: Any, path: str, ignored: list[str]) -> Any:
    model, in_list = _nested_model(annotation)
    if model is None:
        return value
    if in_list and isinstance(value, list):
        return [_strip_item(model, item, f"{path}.{i}", ignored) for i, item in enumerate(value)]
    if not in_list:
        return _strip_item(model, value, path, ignored)
    return value


def _strip_item(model: type[BaseModel], value: Any, path: str, ignored: list[str]) -> Any:
    if not isinstance(value, dict):
        return value
    kept, more = strip_unknown(model, value, f"{path}.")
    ignored.extend(more)
    return kept


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model a field holds (``X``, ``X | None``) or holds a list of (``list[X] | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _nested_model(arg)
            if found[0] is not None:
                return found
    if origin is list:
        (item,) = typing.get_args(annotation) or (None,)
        model, nested_list = _nested_model(item)
        if model is not None and not nested_list:
            return model, True
    return None, False
