"""Strict validation of raw JSON replies with the official SDK's own types: the independent oracle.

The SDK parses replies leniently (``construct``: no validation at all), so a wrong shape would go unnoticed
through ``client.clusters.*``. Here the raw JSON goes through pydantic validation in strict mode (no type
coercion, every required field present, every literal known) and, as with ``extra="forbid"``, a field the
SDK's model does not define fails the check wherever it appears.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from together.types import (
    Cluster,
    ClusterDeleteResponse,
    ClusterListRegionsResponse,
    ClusterListResponse,
    WhoamiProjectAPIKey,
)
from together.types.clusters import ClusterStorage, StorageDeleteResponse, StorageListResponse

M = TypeVar("M", bound=pydantic.BaseModel)

# The fields the emulator adds to GPU worker nodes only when started with extra fields.
NODE_EXTRA_FIELDS = frozenset({"compute_class", "labels"})
_NODE_LISTS = ("gpu_worker_nodes", "deleted_gpu_worker_nodes")


def strict(model: type[M], raw_json: str, node_extras: frozenset[str] = frozenset()) -> M:
    """``raw_json`` as ``model``, strictly; only ``node_extras`` may appear beyond the SDK's fields, on nodes."""
    parsed = model.model_validate_json(raw_json, strict=True)
    _forbid_extras(parsed, model.__name__, frozenset(), node_extras)
    return parsed


def _forbid_extras(obj: Any, path: str, allowed: frozenset[str], node_extras: frozenset[str]) -> None:
    if isinstance(obj, pydantic.BaseModel):
        unexpected = set(obj.model_extra or {}) - allowed
        assert not unexpected, f"{path} has fields the SDK does not define: {sorted(unexpected)}"
        for name in type(obj).model_fields:
            child_allowed = node_extras if name in _NODE_LISTS else frozenset()
            _forbid_extras(getattr(obj, name), f"{path}.{name}", child_allowed, node_extras)
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            _forbid_extras(item, f"{path}[{i}]", allowed, node_extras)


def strict_cluster(raw_json: str, node_extras: frozenset[str] = frozenset()) -> Cluster:
    return strict(Cluster, raw_json, node_extras)


def strict_list(raw_json: str, node_extras: frozenset[str] = frozenset()) -> ClusterListResponse:
    return strict(ClusterListResponse, raw_json, node_extras)


def strict_regions(raw_json: str) -> ClusterListRegionsResponse:
    return strict(ClusterListRegionsResponse, raw_json)


def strict_delete(raw_json: str) -> ClusterDeleteResponse:
    return strict(ClusterDeleteResponse, raw_json)


def strict_whoami(raw_json: str) -> WhoamiProjectAPIKey:
    return strict(WhoamiProjectAPIKey, raw_json)


def strict_volume(raw_json: str) -> ClusterStorage:
    return strict(ClusterStorage, raw_json)


def strict_volumes(raw_json: str) -> StorageListResponse:
    return strict(StorageListResponse, raw_json)


def strict_volume_delete(raw_json: str) -> StorageDeleteResponse:
    return strict(StorageDeleteResponse, raw_json)
