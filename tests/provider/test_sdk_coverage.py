"""Never behind the SDK: every field the official ``together`` SDK sends or reads for clusters and volumes is
known to the provider's field tables (``provider/schema.py``), its request and reply models
(``provider/models.py``) and its nested args (``provider/nested_inputs.py``), each named where it is missing.

The oracle is the installed SDK's own types (create and update parameters, the Cluster and storage replies),
read as the SDK declares them: when a new SDK release adds a field, these tests name it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Required

import pydantic
import pytest
import typing_extensions
from together import types as sdk
from together.types import cluster_create_params, cluster_update_params
from together.types.clusters import storage_create_params, storage_update_params

from together_clusters.provider import models, nested_inputs
from together_clusters.provider.schema import FIELDS, VOLUME_FIELDS, FieldSpec, OnChange

BY_ID = cluster_create_params.GPUClusterCreateRequestNvidiaVersion
LEGACY = cluster_create_params.GPUClusterCreateRequestLegacyNvidia


def _keys(typed_dict: Any) -> tuple[set[str], set[str]]:
    """A TypedDict's keys and its ``Required[...]`` ones (the SDK postpones annotations)."""
    hints = typing_extensions.get_type_hints(typed_dict, include_extras=True)
    required = {name for name, hint in hints.items() if typing_extensions.get_origin(hint) is Required}
    return set(hints), required


SDK_CREATE = _keys(BY_ID)[0] | _keys(LEGACY)[0]
SDK_UPDATE = _keys(cluster_update_params.ClusterUpdateParams)[0]
SDK_REPLY = set(sdk.Cluster.model_fields)

# The SDK's update takes cluster_type, but turning a Kubernetes cluster into a Slurm one (or back) in place is
# nothing the platform documents: the table replaces the cluster instead of betting its workloads on it.
UPDATABLE_BUT_REPLACED = {"cluster_type"}
# Create fields the reply does not carry (so a refresh cannot see them change): the SDK's Cluster type has no
# such field. duration_days comes back as duration_hours, which a refresh does not compare.
NOT_IN_THE_REPLY = {
    "acceptance_tests_params",
    "auto_scale",
    "auto_scale_max_gpus",
    "duration_days",
    "nvidia_version_id",  # reported as nvidia_driver_version_id
    "num_preemptible_gpus",  # reported as desired_preemptible_gpus
    "shared_volume",
    "slurm_image",
    "volume_id",
}


def missing_from_table(table: Mapping[str, FieldSpec], sdk_fields: set[str]) -> set[str]:
    return sdk_fields - set(table)


def test_the_sdk_sends_the_28_create_fields_this_table_was_written_against() -> None:
    # Not a limit: a guard that the oracle is read (two request forms, one union).
    assert len(SDK_CREATE) >= 28


def test_every_create_field_of_the_sdk_is_in_the_cluster_table() -> None:
    assert missing_from_table(FIELDS, SDK_CREATE) == set()


def test_every_table_field_sent_to_the_api_is_one_the_sdk_defines() -> None:
    sent = {name for name, spec in FIELDS.items() if spec.on_change.sent_on_create} - {"adopt_cluster_id"}
    assert sent - SDK_CREATE == set()


def test_the_coverage_check_names_a_field_removed_from_the_table() -> None:
    without = {name: spec for name, spec in FIELDS.items() if name != "num_capacity_pool_gpus"}
    assert missing_from_table(without, SDK_CREATE) == {"num_capacity_pool_gpus"}


def test_every_update_field_of_the_sdk_is_an_in_place_field_of_the_table() -> None:
    in_place = {name for name, spec in FIELDS.items() if spec.on_change is OnChange.UPDATE}
    assert SDK_UPDATE - in_place == UPDATABLE_BUT_REPLACED
    # And nothing is called in place that the API cannot update.
    assert in_place - SDK_UPDATE == set()


def test_a_create_only_field_of_the_sdk_is_never_planned_as_an_in_place_update() -> None:
    create_only = SDK_CREATE - SDK_UPDATE
    assert {n for n in create_only if FIELDS[n].on_change is OnChange.UPDATE} == set()


def test_every_create_field_the_reply_carries_is_read_back() -> None:
    reported = {n for n in SDK_CREATE if n in SDK_REPLY}
    assert {n for n in reported if not FIELDS[n].read_back} == set()
    assert SDK_CREATE - SDK_REPLY == NOT_IN_THE_REPLY


def _model_fields(model: type[pydantic.BaseModel]) -> tuple[set[str], set[str]]:
    return set(model.model_fields), {n for n, f in model.model_fields.items() if f.is_required()}


def test_the_request_models_are_the_sdks() -> None:
    assert _model_fields(models.ClusterCreateRequest)[0] == SDK_CREATE
    assert _model_fields(models.ClusterUpdateRequest)[0] == SDK_UPDATE
    assert _model_fields(models.StorageCreateRequest) == _keys(storage_create_params.StorageCreateParams)
    assert _model_fields(models.StorageUpdateRequest) == _keys(storage_update_params.StorageUpdateParams)
    assert _model_fields(models.OidcConfigSpec) == _keys(
        cluster_create_params.GPUClusterCreateRequestNvidiaVersionOidcConfig
    )
    assert (
        _model_fields(models.AcceptanceTestsParams)[0]
        == _keys(cluster_create_params.GPUClusterCreateRequestNvidiaVersionAcceptanceTestsParams)[0]
    )


def test_the_reply_model_reads_every_field_of_the_sdks_cluster() -> None:
    assert SDK_REPLY - set(models.Cluster.model_fields) == set()
    assert set(sdk.cluster.GPUWorkerNode.model_fields) - set(models.GPUWorkerNode.model_fields) == set()
    assert set(sdk.cluster.OidcConfig.model_fields) - set(models.OidcConfig.model_fields) == set()


def test_every_storage_field_of_the_sdk_is_in_the_volume_table() -> None:
    create = _keys(storage_create_params.StorageCreateParams)[0]
    update = _keys(storage_update_params.StorageUpdateParams)[0] - {
        "volume_id"
    }  # the PUT's key, not a change
    assert missing_from_table(VOLUME_FIELDS, create) == set()
    assert update - {n for n, s in VOLUME_FIELDS.items() if s.on_change is OnChange.UPDATE} == set()


NESTED = [
    (nested_inputs.OidcConfigArgs, cluster_create_params.GPUClusterCreateRequestNvidiaVersionOidcConfig),
    (
        nested_inputs.AcceptanceTestsArgs,
        cluster_create_params.GPUClusterCreateRequestNvidiaVersionAcceptanceTestsParams,
    ),
    (
        nested_inputs.ClusterConfigArgs,
        cluster_create_params.GPUClusterCreateRequestNvidiaVersionClusterConfig,
    ),
    (
        nested_inputs.SlurmStartupScriptsArgs,
        cluster_create_params.GPUClusterCreateRequestNvidiaVersionClusterConfigSlurmStartupScripts,
    ),
    (nested_inputs.AddOnArgs, cluster_create_params.GPUClusterCreateRequestNvidiaVersionAddOn),
    (nested_inputs.AddOnConfigArgs, cluster_create_params.GPUClusterCreateRequestNvidiaVersionAddOnConfig),
    (nested_inputs.SharedVolumeArgs, cluster_create_params.GPUClusterCreateRequestNvidiaVersionSharedVolume),
    (
        nested_inputs.EnabledFlagArgs,
        cluster_create_params.GPUClusterCreateRequestNvidiaVersionAddOnConfigIngress,
    ),
]


@pytest.mark.parametrize(("ours", "theirs"), NESTED, ids=lambda t: t.__name__)
def test_each_nested_args_dataclass_has_the_sdks_keys_and_required_ones(ours: type, theirs: Any) -> None:
    fields = dataclasses.fields(ours)
    names = {f.name for f in fields}
    required = {
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert (names, required) == _keys(theirs)


def test_every_nested_input_of_the_table_has_its_dataclass() -> None:
    dict_shaped = {"oidc_config", "acceptance_tests_params", "cluster_config", "add_ons", "shared_volume"}
    assert set(nested_inputs.NESTED_ARGS) == dict_shaped
    assert dict_shaped <= set(FIELDS)
