"""Strict validation of raw JSON replies with the official SDK's own types.

The SDK parses replies leniently (``construct``: no validation at all), so a wrong shape would go unnoticed
through ``client.clusters.*``. Here the raw JSON goes through pydantic validation in strict mode: no type
coercion, every required field present, every literal known.
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

M = TypeVar("M", bound=pydantic.BaseModel)

# Extra fields the emulator adds on purpose (the SDK tolerates them).
ALLOWED_NODE_EXTRAS = {"compute_class", "labels"}


def strict(model: type[M], raw_json: str) -> M:
    return model.model_validate_json(raw_json, strict=True)


def _no_unexpected_extras(obj: Any, path: str, allowed: set[str]) -> None:
    if isinstance(obj, pydantic.BaseModel):
        extras = set(obj.model_extra or {})
        unexpected = extras - allowed
        assert not unexpected, f"{path} has fields the SDK does not know: {sorted(unexpected)}"
        for name in type(obj).model_fields:
            child_allowed = (
                ALLOWED_NODE_EXTRAS if name in ("gpu_worker_nodes", "deleted_gpu_worker_nodes") else set()
            )
            _no_unexpected_extras(getattr(obj, name), f"{path}.{name}", child_allowed)
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            _no_unexpected_extras(item, f"{path}[{i}]", allowed)


def strict_cluster(raw_json: str) -> Cluster:
    cluster = strict(Cluster, raw_json)
    _no_unexpected_extras(cluster, "cluster", set())
    return cluster


def strict_list(raw_json: str) -> ClusterListResponse:
    listing = strict(ClusterListResponse, raw_json)
    _no_unexpected_extras(listing, "list", set())
    return listing


def strict_regions(raw_json: str) -> ClusterListRegionsResponse:
    regions = strict(ClusterListRegionsResponse, raw_json)
    _no_unexpected_extras(regions, "regions", set())
    return regions


def strict_delete(raw_json: str) -> ClusterDeleteResponse:
    return strict(ClusterDeleteResponse, raw_json)


def strict_whoami(raw_json: str) -> WhoamiProjectAPIKey:
    me = strict(WhoamiProjectAPIKey, raw_json)
    _no_unexpected_extras(me, "whoami", set())
    return me
