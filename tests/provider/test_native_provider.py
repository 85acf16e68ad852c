"""The plugin's ``TogetherProvider`` called as the SDK's server calls it, against the emulator: camelCase in and
out, an unknown input at preview, a refusal naming the schema's field, the schema with its version, the
provider configuration, and an expected error ended on its one line."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.provider.experimental.provider import (
    CheckRequest,
    ConfigureRequest,
    CreateRequest,
    DiffRequest,
    GetSchemaRequest,
    UpdateRequest,
)
from pulumi.runtime.rpc import UNKNOWN

from together_clusters.provider import planning, settings
from together_clusters.provider.errors import InputError
from together_clusters.provider.native import serve
from together_clusters.provider.native.provider import TogetherProvider, version

URN = "urn:pulumi:test::p::together:index:Cluster::gpu"
API_KEY = "tgp_v1_native-provider-key-0123456789"


def _inputs(**overrides: Any) -> dict[str, PropertyValue]:
    given: dict[str, Any] = {
        "clusterName": "native",
        "region": "us-central-8",
        "gpuType": "H100_SXM",
        "numGpus": 8.0,
        "nvidiaVersionId": "nv-570-cu128-ubuntu2204",
    } | overrides
    return {k: v if isinstance(v, PropertyValue) else PropertyValue(v) for k, v in given.items()}


@pytest.fixture
def provider(emu, monkeypatch) -> TogetherProvider:
    monkeypatch.setenv(settings.API_KEY_ENV, API_KEY)
    monkeypatch.setenv(settings.BASE_URL_ENV, emu.base_url)
    settings.take_stack_config({})
    settings.forget_clients()
    planning.forget_catalog()
    return TogetherProvider()


def test_check_takes_an_input_unknown_at_preview_and_answers_in_camel_case(provider) -> None:
    news = _inputs(volumeId=PropertyValue(Computed()))
    checked = asyncio.run(provider.check(CheckRequest(URN, {}, news, b"")))
    assert checked.failures == []
    assert checked.inputs is not None
    assert checked.inputs["volumeId"].value == UNKNOWN
    assert checked.inputs["numGpus"].value == 8.0 and checked.inputs["readyTimeoutMinutes"].value == 60.0


def test_check_refuses_zero_standard_gpus_naming_the_schema_field(provider) -> None:
    checked = asyncio.run(provider.check(CheckRequest(URN, {}, _inputs(numGpus=0.0), b"")))
    assert [f.property for f in checked.failures] == ["numGpus"]
    assert "at least one standard node" in checked.failures[0].reason


def test_a_refusal_names_every_field_as_the_program_writes_it(provider) -> None:
    """A rule's message names fields in snake_case for Python; through the plugin the program wrote camelCase,
    so the reason speaks the schema's names: a class conversion in one update, refused at check."""
    olds = _inputs(numPreemptibleGpus=8.0)
    checked = asyncio.run(
        provider.check(CheckRequest(URN, olds, _inputs(numGpus=16.0, numPreemptibleGpus=0.0), b""))
    )
    (failure,) = checked.failures
    assert failure.property == "numGpus"
    assert "numGpus 8 -> 16 together with numPreemptibleGpus 8 -> 0" in failure.reason, failure.reason
    assert "lower numPreemptibleGpus to 0" in failure.reason, failure.reason
    assert "num_gpus" not in failure.reason and "num_preemptible_gpus" not in failure.reason, failure.reason


def test_diff_names_a_replacing_field_in_camel_case(provider) -> None:
    olds = {
        **_inputs(),
        "clusterId": PropertyValue("c-1"),
        "__provider": PropertyValue("x").with_secret(True),
    }
    diff = asyncio.run(provider.diff(DiffRequest(URN, "c-1", olds, _inputs(gpuType="H200_SXM"), [])))
    assert diff.changes is True and diff.replaces == ["gpuType"]
    same = asyncio.run(provider.diff(DiffRequest(URN, "c-1", olds, _inputs(), [])))
    assert same.changes is False and same.replaces == []


def test_the_schema_is_the_package_schema_with_the_packages_version(provider) -> None:
    served = json.loads(asyncio.run(provider.get_schema(GetSchemaRequest(0))).schema or "{}")
    assert served["name"] == "together" and served["version"] == version()
    assert set(served["resources"]) == {
        "together:index:Cluster",
        "together:index:Volume",
        "together:index:BatchJob",
        "together:index:Sweep",
        "together:index:TrainingRun",
        "together:index:BatchInference",
        "together:index:CheckpointStore",
        "together:index:ClusterControllers",
        "together:index:RemediationGate",
    }


def test_configure_takes_the_api_key_and_base_url_of_the_provider(provider, emu, monkeypatch) -> None:
    monkeypatch.delenv(settings.API_KEY_ENV)
    monkeypatch.setenv(settings.BASE_URL_ENV, "http://127.0.0.1:9")
    args = {"apiKey": PropertyValue("tgp_v1_configured-key-0123456789").with_secret(True)}
    variables = {"together:config:baseUrl": emu.base_url}
    answer = asyncio.run(provider.configure(ConfigureRequest(variables, args, True, False)))
    assert answer.accept_secrets and not answer.accept_outputs
    client = settings.connect()
    assert client.base_url.rstrip("/") == emu.base_url.rstrip("/")
    settings.take_stack_config({})


def test_a_previewed_update_keeps_what_an_update_in_place_keeps_and_leaves_the_rest_unknown(
    provider, emu
) -> None:
    """Else the kubeconfig shows unknown and a Kubernetes provider made from it previews as replaced."""
    olds = _inputs(numPreemptibleGpus=8.0) | {
        "clusterId": PropertyValue("c-1"),
        "kubeConfig": PropertyValue("apiVersion: v1").with_secret(True),
        "apiEndpoint": PropertyValue(emu.base_url),
        "createdAt": PropertyValue("2026-12-05T00:00:00Z"),
        "desiredPreemptibleGpus": PropertyValue(8.0),
        "status": PropertyValue("Ready"),
    }
    news = _inputs(numPreemptibleGpus=16.0)
    before = emu.admin.clusters()
    answer = asyncio.run(provider.update(UpdateRequest(URN, "c-1", olds, news, 60, [], preview=True)))
    planned = answer.properties or {}
    assert planned["numPreemptibleGpus"].value == 16.0
    assert (planned["clusterId"].value, planned["apiEndpoint"].value) == ("c-1", emu.base_url)
    assert planned["kubeConfig"].value == "apiVersion: v1" and planned["kubeConfig"].is_secret
    assert planned["desiredPreemptibleGpus"].value == UNKNOWN and planned["status"].value == UNKNOWN
    assert emu.admin.clusters() == before  # a preview calls nothing


def test_a_previewed_create_creates_nothing_and_leaves_every_output_unknown(provider, emu) -> None:
    before = emu.admin.clusters()
    answer = asyncio.run(provider.create(CreateRequest(URN, _inputs(), 60, preview=True)))
    planned = answer.properties or {}
    assert planned["clusterName"].value == "native"
    assert planned["clusterId"].value == UNKNOWN and planned["kubeConfig"].value == UNKNOWN
    assert emu.admin.clusters() == before


def test_an_unknown_resource_type_is_refused_naming_the_types(provider) -> None:
    urn = "urn:pulumi:test::p::together:index:Nope::x"
    with pytest.raises(ValueError, match="together:index:Cluster"):
        asyncio.run(provider.check(CheckRequest(urn, {}, {}, b"")))


class _Context:
    def __init__(self) -> None:
        self.aborted: tuple[Any, str] | None = None

    async def abort(self, code: Any, details: str) -> None:
        self.aborted = (code, details)
        raise RuntimeError("aborted")


def test_an_expected_error_ends_the_call_on_its_one_line() -> None:
    async def failing(self: Any, request: Any, context: Any) -> None:
        try:
            raise InputError("num_gpus", 0, "num_gpus is 0:\n  set it to 8")
        except InputError as exc:  # as the SDK's _raise_with_traceback re-raises it, frames appended
            raise Exception(f"{exc}:\n  File 'x', line 1") from None

    context = _Context()
    with pytest.raises(RuntimeError, match="aborted"):
        asyncio.run(serve._one_line_for_expected(failing)(None, None, context))
    assert context.aborted is not None
    assert context.aborted[1] == "InputError: num_gpus is 0: set it to 8"


def test_a_bug_keeps_its_frames() -> None:
    async def buggy(self: Any, request: Any, context: Any) -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        asyncio.run(serve._one_line_for_expected(buggy)(None, None, _Context()))


def test_the_plugin_constructs_each_component_under_its_schema_token_and_tells_the_controllers_so() -> None:
    """A YAML, TypeScript or Go program's provider reaches the plugin's construct by reference, read back from
    the engine's state with its kubeconfig in some runs only: ClusterControllers is told so (and then waits as
    the engine does unless given ``kubeconfig``); every component registers under the schema's token."""
    from together_clusters.components import BatchJob, ClusterControllers
    from together_clusters.provider.native.provider import constructed_class

    controllers = constructed_class("together:index:ClusterControllers")
    assert issubclass(controllers, ClusterControllers)
    assert controllers.type_token == "together:index:ClusterControllers"
    assert controllers.provider_by_reference is True and ClusterControllers.provider_by_reference is False
    batch_job = constructed_class("together:index:BatchJob")
    assert issubclass(batch_job, BatchJob) and batch_job.type_token == "together:index:BatchJob"
