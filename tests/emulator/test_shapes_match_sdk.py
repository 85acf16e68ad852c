"""The emulator's own models (``emulator/shapes.py``) name exactly the SDK's fields, required ones alike."""

from __future__ import annotations

from typing import Any, Required

import pydantic
import pytest
import typing_extensions
from together import types as sdk
from together.types import cluster_create_params, cluster_update_params

from together_clusters.emulator import shapes

RESPONSES = [
    (shapes.Cluster, sdk.Cluster),
    (shapes.GPUWorkerNode, sdk.cluster.GPUWorkerNode),
    (shapes.ControlPlaneNode, sdk.cluster.ControlPlaneNode),
    (shapes.AddOn, sdk.cluster.AddOn),
    (shapes.Volume, sdk.cluster.Volume),
    (shapes.ClusterConfig, sdk.cluster.ClusterConfig),
    (shapes.NodeLifecycleEvent, sdk.cluster.NodeLifecycleEvent),
    (shapes.RegionDriverVersion, sdk.cluster_list_regions_response.RegionDriverVersion),
    (shapes.Region, sdk.cluster_list_regions_response.Region),
    (shapes.ClusterDeleteResponse, sdk.ClusterDeleteResponse),
]


def _fields(model: type[pydantic.BaseModel]) -> tuple[set[str], set[str]]:
    return set(model.model_fields), {n for n, f in model.model_fields.items() if f.is_required()}


@pytest.mark.parametrize(("ours", "theirs"), RESPONSES, ids=lambda m: m.__name__)
def test_reply_models_match_the_sdk(ours: type[pydantic.BaseModel], theirs: type[pydantic.BaseModel]) -> None:
    assert _fields(ours) == _fields(theirs)


def _typed_dict_fields(typed_dict: Any) -> tuple[set[str], set[str]]:
    # The SDK's modules postpone annotations, so ``__required_keys__`` is empty: read ``Required[...]``.
    hints = typing_extensions.get_type_hints(typed_dict, include_extras=True)
    required = {name for name, hint in hints.items() if typing_extensions.get_origin(hint) is Required}
    return set(hints), required


def test_create_request_is_the_union_of_the_sdks_two_forms() -> None:
    by_id = _typed_dict_fields(cluster_create_params.GPUClusterCreateRequestNvidiaVersion)
    legacy = _typed_dict_fields(cluster_create_params.GPUClusterCreateRequestLegacyNvidia)
    names, required = _fields(shapes.ClusterCreateRequest)
    assert names == by_id[0] | legacy[0]
    # What both forms require; the driver selector (one form or the other) is checked by the platform.
    assert required == by_id[1] & legacy[1]


def test_update_request_matches_the_sdk() -> None:
    names, required = _fields(shapes.ClusterUpdateRequest)
    assert (names, required) == _typed_dict_fields(cluster_update_params.ClusterUpdateParams)
