"""The plugin's wire conversion (``provider.native.wire``), as plain data: names, unknowns, numbers, secrets;
and a workload component's wire args, built into its nested Python argument dataclasses."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import pulumi
import pytest
from pulumi.provider.experimental.property_value import Computed, PropertyValue
from pulumi.runtime.rpc import UNKNOWN

from together_clusters.components.args import (
    BatchInferenceArgs,
    BatchJobArgs,
    Checkpointing,
    CheckpointStoreArgs,
    ContainerSpec,
    NoCheckpoint,
    NodePlacement,
    PodSettings,
    RemediationGateArgs,
    Retries,
    S3Bucket,
    SecretEnv,
    SharedVolume,
    SweepArgs,
)
from together_clusters.components.controllers.releases import ClusterControllersArgs, KueueSettings
from together_clusters.errors import ArgsError
from together_clusters.platform import ComputeClass, Taint
from together_clusters.provider.native.wire import (
    camel,
    keyword_args,
    snake,
    to_plain,
    to_values,
    to_wire,
    workload_args,
)
from together_clusters.provider.package_schema import CHECKPOINT_STORE_TOKEN, COMPONENTS, SCHEMA_FILE
from together_clusters.provider.schema import FIELDS, OUTPUT_NAMES, VOLUME_FIELDS, VOLUME_OUTPUT_NAMES


def _schema_names() -> set[str]:
    schema = json.loads(SCHEMA_FILE.read_text())
    names: set[str] = set()
    for spec in [*schema["resources"].values(), *schema["types"].values()]:
        names |= set(spec.get("properties", {})) | set(spec.get("inputProperties", {}))
    return names


@pytest.mark.parametrize("name", sorted({*FIELDS, *OUTPUT_NAMES, *VOLUME_FIELDS, *VOLUME_OUTPUT_NAMES}))
def test_every_field_name_goes_to_camel_case_and_back(name: str) -> None:
    assert snake(camel(name)) == name


def test_every_schema_name_is_the_camel_case_of_its_snake_case() -> None:
    assert all(camel(snake(name)) == name for name in _schema_names())


def test_inputs_arrive_snake_case_with_whole_numbers_and_nested_names() -> None:
    wire = {
        "clusterName": PropertyValue("a"),
        "numGpus": PropertyValue(8.0),
        "readyTimeoutMinutes": PropertyValue(2.5),
        "autoScale": PropertyValue(True),
        "sharedVolume": PropertyValue({"volumeName": PropertyValue("v"), "sizeTib": PropertyValue(1.0)}),
        "addOns": PropertyValue([PropertyValue({"addOnType": PropertyValue("x")})]),
        "projectId": PropertyValue(None),
    }
    assert to_plain(wire) == {
        "cluster_name": "a",
        "num_gpus": 8,
        "ready_timeout_minutes": 2.5,
        "auto_scale": True,
        "shared_volume": {"volume_name": "v", "size_tib": 1},
        "add_ons": [{"add_on_type": "x"}],
        "project_id": None,
    }
    assert type(to_plain(wire)["num_gpus"]) is int


def test_an_unknown_arrives_as_the_sentinel_the_rules_know_either_way() -> None:
    wire = {"volumeId": PropertyValue(Computed()), "region": PropertyValue(UNKNOWN)}
    assert to_plain(wire) == {"volume_id": UNKNOWN, "region": UNKNOWN}


def test_an_unknown_goes_back_as_the_sentinel_string_which_marshals() -> None:
    back = to_wire({"volume_id": UNKNOWN})
    assert back["volumeId"].marshal().string_value == UNKNOWN


def test_secrets_are_unwrapped_and_the_dynamic_providers_keys_dropped() -> None:
    wire = {
        "kubeConfig": PropertyValue("apiVersion: v1").with_secret(True),
        "__provider": PropertyValue("pickled").with_secret(True),
        "num_gpus": PropertyValue(8.0),  # a state written by the dynamic provider: snake_case already
    }
    assert to_plain(wire) == {"kube_config": "apiVersion: v1", "num_gpus": 8}


def test_outputs_go_back_camel_case_numbers_as_floats_and_secret_outputs_secret() -> None:
    back = to_wire(
        {"cluster_id": "c-1", "num_gpus": 8, "kube_config": "yaml", "last_preempted_at": None},
        secrets=("kube_config", "last_preempted_at"),
    )
    assert back["clusterId"] == PropertyValue("c-1")
    assert back["numGpus"].value == 8.0 and isinstance(back["numGpus"].value, float)
    assert back["kubeConfig"].is_secret and not back["clusterId"].is_secret
    assert not back["lastPreemptedAt"].is_secret  # nothing to hide in a null
    assert back["kubeConfig"].marshal().struct_value.fields["value"].string_value == "yaml"


def test_nested_values_go_back_camel_case() -> None:
    back = to_wire(
        {"cluster_config": {"load_balancer": "NONE", "slurm_startup_scripts": {"worker_prolog": "x"}}}
    )
    nested = back["clusterConfig"].value
    assert isinstance(nested, Mapping) and nested["loadBalancer"] == PropertyValue("NONE")
    scripts = nested["slurmStartupScripts"].value
    assert isinstance(scripts, Mapping) and scripts["workerProlog"] == PropertyValue("x")


def test_a_value_with_no_wire_form_is_refused_by_type() -> None:
    with pytest.raises(TypeError, match="no wire form for object"):
        to_wire({"x": object()})


# --- a workload component's arguments (construct) ----------------------------------------------------------


def _wired(value: object) -> PropertyValue:
    """``value`` as the engine sends it: maps and lists of PropertyValues, numbers as floats."""
    if isinstance(value, Mapping):
        return PropertyValue({key: _wired(item) for key, item in value.items()})
    if isinstance(value, list):
        return PropertyValue([_wired(item) for item in value])
    if isinstance(value, int) and not isinstance(value, bool):
        return PropertyValue(float(value))
    return value if isinstance(value, PropertyValue) else PropertyValue(value)  # type: ignore[arg-type]


def _batch_job_args(inputs: Mapping[str, object]) -> BatchJobArgs:
    async def build() -> BatchJobArgs:
        wire = {key: _wired(value) for key, value in inputs.items()}
        return workload_args(BatchJobArgs, to_values(wire), "BatchJob 'ft'")

    return asyncio.run(build())


def test_a_batch_jobs_wire_args_are_its_nested_python_args_names_of_maps_kept() -> None:
    args = _batch_job_args(
        {
            "container": {
                "image": "img:1",
                "command": ["python", "t.py"],
                "gpus": 8,
                "env": {"HF_HOME": "/c"},
                "resources": {"rdma/ib": "1"},
                "secretEnv": {"WANDB_API_KEY": {"secret": "wandb", "key": "key"}},
            },
            "checkpoint": {"s3Bucket": {"bucket": "b", "credentialsSecret": "s3"}},
            "placement": {
                "computeClass": "preemptible-first",
                "preemptibleTaint": {"key": "k", "value": "v"},
            },
            "pod": {"namespace": "ml", "gracePeriodSeconds": 120, "labels": {"team": "x"}},
            "retries": {"nonRetriableExitCodes": [3], "freshJobPerAttempt": False},
            "checkpointing": {"runId": "r1"},
            "completions": 2,
            "queue": "main",
        }
    )
    assert args.container == ContainerSpec(
        image="img:1",
        command=("python", "t.py"),
        gpus=8,
        env={"HF_HOME": "/c"},
        resources={"rdma/ib": "1"},
        secret_env={"WANDB_API_KEY": SecretEnv(secret="wandb", key="key")},
    )
    assert args.checkpoint == S3Bucket(bucket="b", credentials_secret="s3")
    assert args.placement == NodePlacement(ComputeClass.PREEMPTIBLE_FIRST, preemptible_taint=Taint("k", "v"))
    assert args.pod == PodSettings(namespace="ml", grace_period_seconds=120, labels={"team": "x"})
    assert args.retries == Retries(non_retriable_exit_codes=(3,), fresh_job_per_attempt=False)
    assert args.checkpointing == Checkpointing(run_id="r1")
    assert (args.completions, args.queue, args.parallelism) == (2, "main", 1)
    # What the wire leaves out is the Python default.
    bare = _batch_job_args({"container": {"image": "img:1"}})
    assert bare == BatchJobArgs(container=ContainerSpec(image="img:1"), checkpoint=None)


def test_a_batch_jobs_wrong_wire_args_are_refused_at_once_naming_each_path() -> None:
    with pytest.raises(ArgsError) as refused:
        _batch_job_args(
            {
                "container": {"gpus": 8, "imagePull": "Always"},
                "checkpoint": {"sharedVolume": {"claimName": "c"}, "noCheckpoint": {}},
                "placement": {"computeClass": "cheap"},
            }
        )
    said = str(refused.value)
    assert said.startswith("BatchJob 'ft': invalid arguments:")
    assert "container: no argument imagePull" in said and "container: image must be given" in said
    assert (
        "checkpoint: give exactly one of sharedVolume, s3Bucket, noCheckpoint (given: sharedVolume, noCheckpoint)"
        in said
    )
    assert "placement.computeClass: 'cheap' is none of standard, preemptible, preemptible-first" in said


def test_an_unknown_text_stays_an_output_and_an_unknown_layout_field_is_refused() -> None:
    args = _batch_job_args(
        {"container": {"image": PropertyValue(Computed())}, "checkpoint": {"noCheckpoint": {}}}
    )
    assert isinstance(args.container.image, pulumi.Output) and args.checkpoint == NoCheckpoint()
    with pytest.raises(ArgsError, match=r"^container.gpus: must be known at preview"):
        _batch_job_args({"container": {"image": "img:1", "gpus": PropertyValue(UNKNOWN)}})


def _args(cls: type, owner: str, inputs: Mapping[str, object]) -> object:
    async def build() -> object:
        wire = {key: _wired(value) for key, value in inputs.items()}
        return workload_args(cls, to_values(wire), owner)

    return asyncio.run(build())


def test_a_sweeps_trials_cross_the_wire_as_the_json_the_program_wrote() -> None:
    trials = [{"learning_rate": 0.1, "layers": [2, 4], "name": "a"}, {"learning_rate": 0.25, "warm": True}]
    args = _args(
        SweepArgs, "Sweep 'lr'", {"container": {"image": "img:1"}, "trials": trials, "sweepName": "lr"}
    )
    assert isinstance(args, SweepArgs)
    assert args.trials == (
        {"learning_rate": 0.1, "layers": [2, 4], "name": "a"},
        {"learning_rate": 0.25, "warm": True},
    )
    assert args.retries == Retries(backoff_limit=2)  # a Sweep's own default, not Retries()'s


@pytest.mark.parametrize("given", [1, "25%"])
def test_batch_inferences_max_unavailable_is_a_count_or_a_percentage(given: object) -> None:
    args = _args(
        BatchInferenceArgs, "BatchInference 'llm'", {"container": {"image": "img:1"}, "maxUnavailable": given}
    )
    assert isinstance(args, BatchInferenceArgs) and args.max_unavailable == given


@pytest.mark.parametrize("given", [True, 1.5, ["1"]])
def test_batch_inferences_max_unavailable_of_another_type_is_refused_naming_both(given: object) -> None:
    with pytest.raises(ArgsError, match=r"maxUnavailable: .* is not an int or a string"):
        _args(
            BatchInferenceArgs,
            "BatchInference 'llm'",
            {"container": {"image": "img:1"}, "maxUnavailable": given},
        )


def test_a_checkpoint_store_takes_a_volume_or_a_bucket_never_no_checkpoint() -> None:
    store = _args(
        CheckpointStoreArgs, "CheckpointStore 'c'", {"storage": {"sharedVolume": {"claimName": "c"}}}
    )
    assert store == CheckpointStoreArgs(storage=SharedVolume(claim_name="c"))
    with pytest.raises(
        ArgsError, match=r"storage: give exactly one of sharedVolume, s3Bucket \(given: noCheckpoint\)"
    ):
        _args(CheckpointStoreArgs, "CheckpointStore 'c'", {"storage": {"noCheckpoint": {}}})


def test_a_components_keyword_inputs_are_taken_out_and_checked() -> None:
    keywords = COMPONENTS[CHECKPOINT_STORE_TOKEN].keywords
    values: dict[str, object] = {"storage": {}, "volumeName": "research-data", "allowDataLoss": True}
    assert keyword_args(keywords, values, "CheckpointStore 'c'") == {
        "volume_name": "research-data",
        "allow_data_loss": True,
    }
    assert values == {"storage": {}}  # what the arguments' class is built from
    with pytest.raises(ArgsError, match=r"^allowDataLoss: 'yes' is not a bool \(CheckpointStore 'c'\)"):
        keyword_args(keywords, {"allowDataLoss": "yes"}, "CheckpointStore 'c'")


def test_cluster_controllers_wire_args_are_its_python_args_kueue_settings_nested() -> None:
    args = _args(
        ClusterControllersArgs,
        "ClusterControllers 'controllers'",
        {"kueue": True, "descheduler": False, "kueueSettings": {"podsReadyTimeoutSeconds": 120}},
    )
    assert args == ClusterControllersArgs(kueue=True, descheduler=False, kueue_settings=KueueSettings(120))
    assert _args(ClusterControllersArgs, "ClusterControllers 'c'", {}) == ClusterControllersArgs()


def test_a_remediation_gates_cluster_id_may_be_an_output_and_its_api_key_is_always_a_secret() -> None:
    async def build(api_key: PropertyValue) -> tuple[object, bool, object, bool]:
        # The clusterId of a Cluster is unknown at the preview of its create.
        wire = {
            "clusterId": PropertyValue(Computed()),
            "modes": _wired(["reboot-vm"]),
            "image": PropertyValue("registry.example/gate:1"),
            "apiKey": api_key,
        }
        args = workload_args(RemediationGateArgs, to_values(wire), "RemediationGate 'gate'")
        assert isinstance(args, RemediationGateArgs)
        key = args.api_key
        assert isinstance(key, pulumi.Output) and isinstance(args.cluster_id, pulumi.Output)
        return args.modes, await key.is_secret(), await key.future(), await args.cluster_id.is_known()

    # Secret as the program's config gave it, and secret too when a YAML program wrote it as a plain literal.
    for given in (PropertyValue("tgp_v1_gate").with_secret(True), PropertyValue("tgp_v1_gate")):
        modes, secret, key, cluster_known = asyncio.run(build(given))
        assert (modes, secret, key, cluster_known) == (("reboot-vm",), True, "tgp_v1_gate", False)


def test_a_remediation_gates_wrong_wire_args_are_refused_naming_each() -> None:
    with pytest.raises(ArgsError) as refused:
        _args(RemediationGateArgs, "RemediationGate 'gate'", {"modes": "reboot-vm", "intervalSeconds": "30"})
    said = str(refused.value)
    assert "clusterId, image must be given" in said and "modes: 'reboot-vm' is not a " in said, said
    assert "intervalSeconds: '30' is not a int" in said, said
