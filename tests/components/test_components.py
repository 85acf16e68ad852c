"""Each component's Kubernetes objects, field by field under Pulumi's mocks, and against the API schema."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from together_clusters.components import (
    BatchInference,
    BatchInferenceArgs,
    BatchJob,
    BatchJobArgs,
    CheckpointStore,
    CheckpointStoreArgs,
    ComputeClass,
    ContainerSpec,
    NodePlacement,
    PodSettings,
    Retries,
    S3Bucket,
    SharedVolume,
    Sweep,
    SweepArgs,
    Taint,
    TrainingRun,
    TrainingRunArgs,
    manifests,
)
from together_clusters.components.platform import COMPUTE_CLASS_LABEL, CRITICAL_LABEL

from .conftest import Program, assert_schema_valid
from .helpers import env_names, env_of, env_values, main_container, pod_spec, pod_template, required_terms

IMAGE = "ghcr.io/example/trainer:1.0"
SHARED = SharedVolume(claim_name="ckpt", size="1Ti", storage_class="shared-fs")
S3 = S3Bucket(
    bucket="ckpts", credentials_secret="s3-creds", endpoint="https://s3.example.test", prefix="runs"
)

PREEMPTIBLE_TERMS = [
    {"matchExpressions": [{"key": COMPUTE_CLASS_LABEL, "operator": "In", "values": ["preemptible"]}]}
]
STANDARD_TERMS = [
    {"matchExpressions": [{"key": COMPUTE_CLASS_LABEL, "operator": "NotIn", "values": ["preemptible"]}]}
]
DEFAULT_TOLERATION = {
    "key": COMPUTE_CLASS_LABEL,
    "operator": "Equal",
    "value": "preemptible",
    "effect": "NoSchedule",
}
DISRUPTION_RULE = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
# A plain delete sets no condition: the runtime's exit after its SIGTERM save must not count either.
SIGTERM_EXIT_RULE = {
    "action": "Ignore",
    "onExitCodes": {"containerName": "main", "operator": "In", "values": [143]},
}


def provider() -> k8s.Provider:
    return k8s.Provider("k8s", render_yaml_to_directory="/tmp/unused-in-mocks")


def opts_with(p: k8s.Provider) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(provider=p)


def assert_children_use_provider(program: Program) -> None:
    children = program.by_type("kubernetes:")
    assert children
    for child in children:
        assert child.provider is not None and "pulumi:providers:kubernetes::k8s::" in child.provider, child


def assert_preemptible_placement(obj: dict, spread_component: str) -> None:
    spec = pod_spec(obj)
    assert required_terms(obj) == PREEMPTIBLE_TERMS
    assert spec["tolerations"] == [DEFAULT_TOLERATION]
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["nodeTaintsPolicy"] == "Honor"
    assert spread["nodeAffinityPolicy"] == "Honor"
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == spread_component
    for key, value in spread["labelSelector"]["matchLabels"].items():
        assert pod_template(obj)["metadata"]["labels"][key] == value


def assert_standard_placement(obj: dict) -> None:
    assert required_terms(obj) == STANDARD_TERMS
    assert "tolerations" not in pod_spec(obj)


def assert_job_survives_preemption(job: dict) -> None:
    spec = job["spec"]
    assert spec["podFailurePolicy"]["rules"][:2] == [DISRUPTION_RULE, SIGTERM_EXIT_RULE]
    assert spec["podReplacementPolicy"] == "Failed"
    assert pod_spec(job)["restartPolicy"] == "Never"


# --- BatchJob --------------------------------------------------------------------------------


def attempt_job(objects: dict[str, dict], name: str) -> dict:
    """The Job inside a BatchJob's JobSet (the default layout), as a batch/v1 Job object."""
    (replicated,) = objects[f"JobSet/{name}"]["spec"]["replicatedJobs"]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"{name}-attempt-0"}}
    return {**job, "spec": replicated["template"]["spec"]}


def test_batch_job_renders_a_preemptible_job_with_checkpoints(program: Program) -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE, command=("python", "train.py"), env={"LR": "3e-4"}, gpus=8),
        checkpoint=SHARED,
        ttl_seconds_after_finished=3600,
        pod=PodSettings(namespace="ml"),
        retries=Retries(backoff_limit=4, non_retriable_exit_codes=(2, 42), fresh_job_per_attempt=False),
    )
    job_component = program.run(lambda: BatchJob("ft", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    assert sorted(objects) == ["Job/ft"]
    job = objects["Job/ft"]
    assert_schema_valid(job)
    assert job["metadata"]["namespace"] == "ml"
    assert job["spec"]["backoffLimit"] == 4
    assert job["spec"]["ttlSecondsAfterFinished"] == 3600
    assert_job_survives_preemption(job)
    assert job["spec"]["podFailurePolicy"]["rules"][2] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "main", "operator": "In", "values": [2, 42]},
    }
    assert pod_spec(job)["terminationGracePeriodSeconds"] == 300
    assert_preemptible_placement(job, "batch")
    assert pod_spec(job)["volumes"] == [
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}}
    ]
    container = main_container(job)
    assert container["image"] == IMAGE
    assert container["command"] == ["python", "train.py"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "8"}}
    assert container["volumeMounts"] == [{"name": "checkpoints", "mountPath": "/checkpoints"}]
    assert env_values(job) == {
        "CHECKPOINT_BACKEND": "filesystem",
        "CHECKPOINT_DIR": env_values(job)["CHECKPOINT_DIR"],
        "CHECKPOINT_KEEP": "3",
        "CHECKPOINT_RESUME": "true",
        "CHECKPOINT_SAVE_BUDGET_SECONDS": "270",
        "LR": "3e-4",
    }
    assert re.fullmatch(r"/checkpoints/ft/run-[0-9a-f]{12}", env_values(job)["CHECKPOINT_DIR"])
    assert CRITICAL_LABEL not in pod_template(job)["metadata"]["labels"]
    assert_children_use_provider(program)
    assert program.by_type("together:components:BatchJob")[0].name == "ft"
    assert job_component.manifests[0]["spec"]["podFailurePolicy"]["rules"][0] == DISRUPTION_RULE


def test_batch_job_with_a_custom_taint_and_a_shorter_grace_period(program: Program) -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=SHARED,
        job_name="eval-7",
        placement=NodePlacement(preemptible_taint=Taint(key="spot", value="true", effect="NoExecute")),
        pod=PodSettings(grace_period_seconds=120),
    )
    program.run(lambda: BatchJob("eval", args, opts=opts_with(provider())))
    job = attempt_job(program.kubernetes_objects(), "eval-7")
    assert_schema_valid(job)
    assert pod_spec(job)["tolerations"] == [
        {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoExecute"}
    ]
    assert pod_spec(job)["terminationGracePeriodSeconds"] == 120
    assert env_values(job)["CHECKPOINT_SAVE_BUDGET_SECONDS"] == "108"


def test_batch_job_on_untainted_preemptible_nodes_needs_no_toleration(program: Program) -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=SHARED,
        placement=NodePlacement(preemptible_taint=None),
    )
    program.run(lambda: BatchJob("ft", args, opts=opts_with(provider())))
    job = attempt_job(program.kubernetes_objects(), "ft")
    assert "tolerations" not in pod_spec(job)
    assert required_terms(job) == PREEMPTIBLE_TERMS


def test_batch_job_with_s3_checkpoints_reads_credentials_from_a_secret(program: Program) -> None:
    args = BatchJobArgs(container=ContainerSpec(image=IMAGE), checkpoint=S3)
    program.run(lambda: BatchJob("ft", args, opts=opts_with(provider())))
    job = attempt_job(program.kubernetes_objects(), "ft")
    assert_schema_valid(job)
    env = env_of(job)
    assert env["CHECKPOINT_BACKEND"]["value"] == "s3"
    assert env["CHECKPOINT_S3_BUCKET"]["value"] == "ckpts"
    assert re.fullmatch(r"runs/ft/run-[0-9a-f]{12}", env["CHECKPOINT_S3_PREFIX"]["value"])
    assert env["CHECKPOINT_S3_ENDPOINT"]["value"] == "https://s3.example.test"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert "value" not in env[name]
        assert env[name]["valueFrom"] == {"secretKeyRef": {"name": "s3-creds", "key": name}}
    assert "volumes" not in pod_spec(job)


def test_batch_job_on_standard_nodes(program: Program) -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=None,
        placement=NodePlacement(ComputeClass.STANDARD, critical=True),
    )
    program.run(lambda: BatchJob("prod-eval", args, opts=opts_with(provider())))
    job = attempt_job(program.kubernetes_objects(), "prod-eval")
    assert_schema_valid(job)
    assert_standard_placement(job)
    assert pod_template(job)["metadata"]["labels"][CRITICAL_LABEL] == "true"


def test_container_env_may_not_override_the_contract() -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE, env={"CHECKPOINT_DIR": "/tmp"}), checkpoint=SHARED
    )
    with pytest.raises(ValueError, match="CHECKPOINT_DIR, which the component sets itself"):
        BatchJob("ft", args)


# --- Sweep -----------------------------------------------------------------------------------

TRIALS = ({"lr": 1e-4, "warmup": 100}, {"lr": 3e-4, "warmup": 100}, {"lr": 1e-3, "warmup": 0})


def gpu_sweep(fresh_job_per_attempt: bool = True, **args: Any) -> SweepArgs:
    """The sweep both layouts render: a GPU a trial, a trial retried up to 3 times, never on exit code 3."""
    return SweepArgs(
        container=ContainerSpec(image=IMAGE, gpus=1),
        trials=TRIALS,
        checkpoint=SHARED,
        retries=Retries(
            backoff_limit=3, non_retriable_exit_codes=(3,), fresh_job_per_attempt=fresh_job_per_attempt
        ),
        **args,
    )


def test_sweep_renders_trials_and_an_indexed_job(program: Program) -> None:
    args = gpu_sweep(parallelism=2, fresh_job_per_attempt=False)
    sweep = program.run(lambda: Sweep("lr-sweep", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    (config_map_key,) = [k for k in objects if k.startswith("ConfigMap/")]
    config_map = objects[config_map_key]
    job = objects["Job/lr-sweep"]
    for obj in (config_map, job):
        assert_schema_valid(obj)
    assert config_map_key.startswith("ConfigMap/lr-sweep-trials-")
    assert json.loads(config_map["data"]["trials.json"]) == [dict(t) for t in TRIALS]
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == 3
    assert spec["parallelism"] == 2
    assert spec["backoffLimitPerIndex"] == 3
    assert spec["maxFailedIndexes"] == 2
    assert_job_survives_preemption(job)
    assert spec["podFailurePolicy"]["rules"][2]["action"] == "FailIndex"
    assert_preemptible_placement(job, "trial")
    env = env_of(job)
    assert env["TRIAL_INDEX"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["TRIAL_PARAMETERS_FILE"]["value"] == "/etc/sweep/trials.json"
    assert env["CHECKPOINT_DIR"]["value"] == "/checkpoints/lr-sweep"
    assert env["CHECKPOINT_RUN_KEYS_FILE"]["value"] == "/etc/sweep/checkpoint-keys.json"
    keys = json.loads(config_map["data"]["checkpoint-keys.json"])
    assert [re.fullmatch(r"trial-(\d)-run-[0-9a-f]{12}", k).group(1) for k in keys] == ["0", "1", "2"]
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    assert env_names(job).index("TRIAL_INDEX") < env_names(job).index("CHECKPOINT_DIR")
    volumes = {v["name"]: v for v in pod_spec(job)["volumes"]}
    assert volumes["trials"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert volumes["checkpoints"]["persistentVolumeClaim"]["claimName"] == "ckpt"
    assert_children_use_provider(program)
    assert sweep.manifests[0]["metadata"]["name"] == config_map["metadata"]["name"]


def test_sweep_config_map_name_follows_the_trials() -> None:
    def name(trials: tuple[dict, ...]) -> str:
        args = SweepArgs(
            ContainerSpec(IMAGE),
            trials,
            SHARED,
            retries=Retries(backoff_limit=2, fresh_job_per_attempt=False),
        )
        (config_map, _) = manifests.sweep("s", args)
        return str(config_map["metadata"]["name"])

    assert name(TRIALS) == name(tuple(dict(t) for t in TRIALS))
    assert name(TRIALS) != name(TRIALS[:2])


def test_sweep_rejects_impossible_failure_limits() -> None:
    args = SweepArgs(
        container=ContainerSpec(image=IMAGE), trials=TRIALS, checkpoint=SHARED, max_failed_indexes=4
    )
    with pytest.raises(ValueError, match="max_failed_indexes must be between 0 and the number of trials"):
        Sweep("s", args)


def test_a_sweep_is_one_job_set_per_trial_each_restarting_only_itself_on_preemption(program: Program) -> None:
    args = gpu_sweep()
    sweep = program.run(lambda: Sweep("lr-sweep", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    assert sorted(objects) == ["JobSet/lr-sweep-0", "JobSet/lr-sweep-1", "JobSet/lr-sweep-2"]
    keys = []
    for index, trial in enumerate(TRIALS):
        job_set = objects[f"JobSet/lr-sweep-{index}"]
        assert job_set["spec"]["failurePolicy"]["rules"][0]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
        job = attempt_job(objects, f"lr-sweep-{index}")
        assert_schema_valid(job)
        spec = job["spec"]
        assert spec["completions"] == 1 and spec["parallelism"] == 1
        assert spec["backoffLimitPerIndex"] == 3 and spec["maxFailedIndexes"] == 0
        assert spec["podFailurePolicy"]["rules"][2]["onExitCodes"]["values"] == [3]
        assert_preemptible_placement(job, "trial")
        env = env_values(job)
        assert env["TRIAL_INDEX"] == str(index)
        assert json.loads(env["TRIAL_PARAMETERS"]) == trial
        assert "TRIAL_PARAMETERS_FILE" not in env and "CHECKPOINT_RUN_KEYS_FILE" not in env
        match = re.fullmatch(
            rf"/checkpoints/lr-sweep/trial-{index}-run-[0-9a-f]{{12}}", env["CHECKPOINT_DIR"]
        )
        assert match, env["CHECKPOINT_DIR"]
        keys.append(env["CHECKPOINT_DIR"])
        from together_clusters.components import guard

        assert guard.check_manifest(job_set) == []
    assert len(set(keys)) == 3
    assert_children_use_provider(program)
    assert [m["metadata"]["name"] for m in sweep.manifests] == ["lr-sweep-0", "lr-sweep-1", "lr-sweep-2"]


def test_a_changed_trial_changes_only_its_own_job_set() -> None:
    def rendered(trials: tuple[dict, ...]) -> list[dict]:
        return manifests.sweep("s", SweepArgs(ContainerSpec(IMAGE), trials, SHARED))

    before = rendered(TRIALS)
    after = rendered((TRIALS[0], {**TRIALS[1], "lr": 5e-4}, TRIALS[2]))
    assert [b == a for b, a in zip(before, after, strict=True)] == [True, False, True]


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"parallelism": 2}, r"parallelism=2: with fresh_job_per_attempt=True each of the 3 trials"),
        (
            {"max_failed_indexes": 1},
            r"max_failed_indexes=1: with fresh_job_per_attempt=True each trial fails",
        ),
    ],
)
def test_sweep_wide_limits_that_trial_job_sets_cannot_keep_are_refused_with_the_fix(
    limits: dict, message: str
) -> None:
    args = SweepArgs(container=ContainerSpec(image=IMAGE), trials=TRIALS, checkpoint=SHARED, **limits)
    with pytest.raises(ValueError, match=message) as refused:
        Sweep("s", args)
    assert "fresh_job_per_attempt=False" in str(refused.value)
    # Limits that cap nothing are accepted, and the Indexed Job keeps them.
    manifests.sweep("s", SweepArgs(ContainerSpec(IMAGE), TRIALS, SHARED, parallelism=3, max_failed_indexes=3))
    manifests.sweep(
        "s", dataclasses.replace(args, retries=Retries(backoff_limit=2, fresh_job_per_attempt=False))
    )


# --- BatchInference --------------------------------------------------------------------------


def test_queue_workers_drain_at_sigterm_with_no_pre_stop_and_no_budget_to_block_the_drain(
    program: Program,
) -> None:
    args = BatchInferenceArgs(
        container=ContainerSpec(image=IMAGE, gpus=1), replicas=6, pod=PodSettings(grace_period_seconds=180)
    )
    program.run(lambda: BatchInference("infer", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    # No PodDisruptionBudget: it cannot stop the node's deletion, and a refused eviction means the
    # worker dies undrained at T+grace. No Service routes to queue workers, so no preStop pause.
    assert sorted(objects) == ["Deployment/infer"]
    deployment = objects["Deployment/infer"]
    assert_schema_valid(deployment)
    assert deployment["spec"]["replicas"] == 6
    assert pod_spec(deployment)["terminationGracePeriodSeconds"] == 180
    assert "lifecycle" not in main_container(deployment)
    assert env_values(deployment) == {"DRAIN_BUDGET_SECONDS": "162"}
    assert_preemptible_placement(deployment, "inference-worker")
    assert_children_use_provider(program)


def test_workers_behind_a_service_pause_before_sigterm_so_routing_stops(program: Program) -> None:
    args = BatchInferenceArgs(
        container=ContainerSpec(image=IMAGE, gpus=1),
        service_port=8000,
        pre_stop_seconds=10,
        pod=PodSettings(grace_period_seconds=180),
    )
    program.run(lambda: BatchInference("infer", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    assert sorted(objects) == ["Deployment/infer", "Service/infer"]
    deployment, service = objects["Deployment/infer"], objects["Service/infer"]
    for obj in objects.values():
        assert_schema_valid(obj)
    assert main_container(deployment)["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
    assert env_values(deployment) == {"DRAIN_BUDGET_SECONDS": "153"}
    assert service["spec"]["ports"] == [{"name": "serving", "port": 8000, "targetPort": 8000}]
    for key, value in service["spec"]["selector"].items():
        assert pod_template(deployment)["metadata"]["labels"][key] == value
    assert main_container(deployment)["ports"] == [
        {"name": "serving", "containerPort": 8000, "protocol": "TCP"}
    ]


def test_production_replicas_are_critical_standard_and_budgeted(program: Program) -> None:
    args = BatchInferenceArgs(
        container=ContainerSpec(image=IMAGE),
        max_unavailable="25%",
        placement=NodePlacement(ComputeClass.STANDARD, critical=True),
    )
    program.run(lambda: BatchInference("prod", args, opts=opts_with(provider())))
    deployment, pdb = (
        program.kubernetes_objects()["Deployment/prod"],
        program.kubernetes_objects()["PodDisruptionBudget/prod"],
    )
    assert_schema_valid(pdb)
    assert_standard_placement(deployment)
    assert pod_template(deployment)["metadata"]["labels"][CRITICAL_LABEL] == "true"
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["maxUnavailable"] == "25%"
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"service_port": 8000, "pod": PodSettings(grace_period_seconds=30), "pre_stop_seconds": 30},
            "must be >= 0 and below",
        ),
        ({"pre_stop_seconds": 5}, "without service_port: nothing routes to queue workers"),
    ],
)
def test_batch_inference_pre_stop_must_fit_the_grace_period_and_a_service(fields: dict, message: str) -> None:
    args = BatchInferenceArgs(container=ContainerSpec(image=IMAGE), **fields)
    with pytest.raises(ValueError, match=message):
        BatchInference("infer", args)


# --- TrainingRun -----------------------------------------------------------------------------


@pytest.mark.parametrize("fresh", [True, False], ids=["job-set-per-worker", "indexed-job"])
def test_training_run_renders_coordinator_service_and_workers(program: Program, fresh: bool) -> None:
    args = TrainingRunArgs(
        coordinator=ContainerSpec(image=IMAGE, command=("coordinator",)),
        worker=ContainerSpec(image=IMAGE, command=("worker",), gpus=8),
        num_workers=4,
        checkpoint=SHARED,
        login=ContainerSpec(image="ghcr.io/example/login:1", command=("sleep", "infinity")),
        pod=PodSettings(namespace="ml"),
        retries=Retries(fresh_job_per_attempt=fresh),
    )
    run = program.run(lambda: TrainingRun("llm", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    worker_objects = [f"JobSet/llm-workers-{rank}" for rank in range(4)] if fresh else ["Job/llm-workers"]
    assert sorted(objects) == sorted(
        [
            "Deployment/llm-login",
            "Job/llm-coordinator",
            *worker_objects,
            "Service/llm-coordinator",
            "Service/llm-workers",
        ]
    )
    if fresh:
        all_workers = [attempt_job(objects, f"llm-workers-{rank}") for rank in range(4)]
    else:
        all_workers = [objects["Job/llm-workers"]]
    for obj in [*objects.values(), *all_workers]:
        if obj["kind"] != "JobSet":
            assert_schema_valid(obj)
    service, coordinator = objects["Service/llm-coordinator"], objects["Job/llm-coordinator"]
    workers, login = all_workers[-1], objects["Deployment/llm-login"]

    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"] == [{"name": "rendezvous", "port": 29500, "targetPort": 29500}]
    coordinator_labels = pod_template(coordinator)["metadata"]["labels"]
    for key, value in service["spec"]["selector"].items():
        assert coordinator_labels[key] == value
    for other in (workers, login):
        assert any(
            pod_template(other)["metadata"]["labels"].get(k) != v
            for k, v in service["spec"]["selector"].items()
        )

    assert_standard_placement(coordinator)
    assert coordinator_labels[CRITICAL_LABEL] == "true"
    assert_job_survives_preemption(coordinator)
    assert main_container(coordinator)["ports"] == [
        {"name": "rendezvous", "containerPort": 29500, "protocol": "TCP"}
    ]

    assert_preemptible_placement(workers, "worker")
    assert CRITICAL_LABEL not in pod_template(workers)["metadata"]["labels"]
    assert workers["spec"]["completionMode"] == "Indexed"
    # A worker's crashes use its own retries.
    assert workers["spec"]["backoffLimitPerIndex"] == 3 and workers["spec"]["maxFailedIndexes"] == 0
    if fresh:
        # A preempted worker fails its own Job, which its JobSet recreates at once; the others are untouched.
        for rank, job in enumerate(all_workers):
            assert job["spec"]["completions"] == job["spec"]["parallelism"] == 1
            assert [r["action"] for r in job["spec"]["podFailurePolicy"]["rules"][:2]] == [
                "FailJob",
                "FailJob",
            ]
            assert env_values(job)["WORKER_RANK"] == str(rank)
            job_set = objects[f"JobSet/llm-workers-{rank}"]
            assert (
                job_set["spec"]["failurePolicy"]["rules"][0]["action"] == "RestartJobSetAndIgnoreMaxRestarts"
            )
            assert job_set["spec"]["network"] == {"enableDNSHostnames": False}
    else:
        # A preempted worker is replaced under the same index (after the Job controller's backoff).
        assert_job_survives_preemption(workers)
        assert workers["spec"]["completions"] == workers["spec"]["parallelism"] == 4
        assert "fieldRef" in env_of(workers)["WORKER_RANK"]["valueFrom"]
    host = "llm-coordinator.ml.svc"
    worker_env = env_of(workers)
    assert worker_env["COORDINATOR_HOST"]["value"] == host
    assert worker_env["COORDINATOR_PORT"]["value"] == "29500"
    assert worker_env["NUM_WORKERS"]["value"] == "4"
    assert worker_env["WORLD_SIZE"]["value"] == "32", "WORLD_SIZE is the process count: 4 workers x 8 GPUs"
    # torchrun elastic, configured by its own PET_* variables: c10d rendezvous hosted by the coordinator.
    values = env_values(workers)
    assert values["PET_NNODES"] == "4:4" and values["PET_NPROC_PER_NODE"] == "8"
    assert values["PET_RDZV_BACKEND"] == "c10d"
    assert values["PET_RDZV_ENDPOINT"] == f"{host}:29500"
    assert values["PET_RDZV_CONF"] == "is_host=false,join_timeout=86400"
    assert values["PET_RDZV_ID"] == values["CHECKPOINT_DIR"].rsplit("/", 1)[1]
    assert int(values["PET_MAX_RESTARTS"]) >= 100
    # One checkpoint location for the world, shared with the coordinator: no per-rank directories.
    assert re.fullmatch(r"/checkpoints/llm/run-[0-9a-f]{12}", values["CHECKPOINT_DIR"])
    assert env_values(coordinator)["CHECKPOINT_DIR"] == values["CHECKPOINT_DIR"]
    # Stable DNS for every worker: the Indexed Job's pod hostnames under the headless Service.
    worker_service = objects["Service/llm-workers"]
    assert (
        worker_service["spec"]["clusterIP"] == "None" and worker_service["spec"]["publishNotReadyAddresses"]
    )
    assert pod_spec(workers)["subdomain"] == "llm-workers"
    for key, value in worker_service["spec"]["selector"].items():
        assert pod_template(workers)["metadata"]["labels"][key] == value
    # /dev/shm for NCCL and data loaders.
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}} in pod_spec(workers)[
        "volumes"
    ]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main_container(workers)["volumeMounts"]
    for obj in (coordinator, workers, login):
        assert {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}} in pod_spec(obj)[
            "volumes"
        ]

    assert_standard_placement(login)
    assert pod_template(login)["metadata"]["labels"][CRITICAL_LABEL] == "true"
    assert_children_use_provider(program)

    hosts: list[str] = []
    program.run(lambda: run.coordinator_host.apply(hosts.append))
    assert hosts == [host]


# --- CheckpointStore -------------------------------------------------------------------------


def test_checkpoint_store_creates_a_shared_claim(program: Program) -> None:
    store = program.run(
        lambda: CheckpointStore(
            "ckpt", CheckpointStoreArgs(storage=SHARED, namespace="ml"), opts=opts_with(provider())
        )
    )
    objects = program.kubernetes_objects()
    claim = objects["PersistentVolumeClaim/ckpt"]
    assert_schema_valid(claim)
    assert claim["metadata"]["namespace"] == "ml"
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "1Ti"}},
        "storageClassName": "shared-fs",
    }
    assert store.storage is SHARED
    assert_children_use_provider(program)


def test_checkpoint_store_with_an_existing_claim_or_a_bucket_creates_nothing(program: Program) -> None:
    existing = SharedVolume(claim_name="team-fs", create=False)
    program.run(
        lambda: CheckpointStore("a", CheckpointStoreArgs(storage=existing), opts=opts_with(provider()))
    )
    program.run(lambda: CheckpointStore("b", CheckpointStoreArgs(storage=S3), opts=opts_with(provider())))
    assert program.kubernetes_objects() == {}
    assert len(program.by_type("together:components:CheckpointStore")) == 2


def test_checkpoint_store_registers_its_outputs(program: Program) -> None:
    claims: list[object] = []
    program.run(
        lambda: CheckpointStore(
            "c", CheckpointStoreArgs(storage=SHARED), opts=opts_with(provider())
        ).claim_name.apply(claims.append)
    )
    assert claims == ["ckpt"]


# --- every Job -------------------------------------------------------------------------------


def test_pulumi_waits_for_jobs_to_start_not_to_finish() -> None:
    from together_clusters.components import manifests

    container = ContainerSpec(image=IMAGE)
    jobs = [
        m
        for m in (
            *manifests.batch_job(
                "ft",
                BatchJobArgs(
                    container=container, checkpoint=SHARED, retries=Retries(fresh_job_per_attempt=False)
                ),
            ),
            *manifests.sweep(
                "s",
                SweepArgs(
                    container=container,
                    trials=TRIALS,
                    checkpoint=SHARED,
                    retries=Retries(backoff_limit=2, fresh_job_per_attempt=False),
                ),
            ),
            *manifests.training_run(
                "r",
                TrainingRunArgs(
                    coordinator=container,
                    worker=container,
                    num_workers=2,
                    checkpoint=SHARED,
                    retries=Retries(fresh_job_per_attempt=False),
                ),
            ),
        )
        if m["kind"] == "Job"
    ]
    assert len(jobs) == 4
    for job in jobs:
        assert job["metadata"]["annotations"] == {"pulumi.com/waitFor": "jsonpath={.status.startTime}"}
        assert "pulumi.com/skipAwait" not in job["metadata"]["annotations"]
        assert_schema_valid(job)


def test_pulumi_waits_for_deployments_to_be_accepted_not_for_their_pods() -> None:
    """A Deployment whose GPUs are short must not block ``up`` (its pods wait Pending, as a Job's do), and
    its deletion is still awaited on a replace (no skipAwait)."""
    from together_clusters.components import manifests

    container = ContainerSpec(image=IMAGE, gpus=8)
    deployments = [
        m
        for m in (
            *manifests.batch_inference("infer", BatchInferenceArgs(container=container)),
            *manifests.training_run(
                "r",
                TrainingRunArgs(
                    coordinator=ContainerSpec(image=IMAGE),
                    worker=container,
                    num_workers=2,
                    checkpoint=SHARED,
                    login=ContainerSpec(image=IMAGE),
                ),
            ),
        )
        if m["kind"] == "Deployment"
    ]
    assert [d["metadata"]["name"] for d in deployments] == ["infer", "r-login"]
    for deployment in deployments:
        assert deployment["metadata"]["annotations"] == {
            "pulumi.com/waitFor": "jsonpath={.status.observedGeneration}"
        }
        assert_schema_valid(deployment)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: BatchJob(
                "ft",
                BatchJobArgs(
                    container=ContainerSpec(image=IMAGE), checkpoint=SHARED, retries=Retries(backoff_limit=-1)
                ),
            ),
            "backoff_limit must be >= 0, got -1",
        ),
        (
            lambda: BatchJob(
                "ft",
                BatchJobArgs(
                    container=ContainerSpec(image=IMAGE),
                    checkpoint=SHARED,
                    pod=PodSettings(grace_period_seconds=0),
                ),
            ),
            "grace_period_seconds must be >= 1, got 0",
        ),
        (
            lambda: Sweep(
                "s",
                SweepArgs(
                    container=ContainerSpec(image=IMAGE), trials=TRIALS, checkpoint=SHARED, parallelism=0
                ),
            ),
            "parallelism must be >= 1, got 0",
        ),
        (
            lambda: Sweep(
                "s",
                SweepArgs(
                    container=ContainerSpec(image=IMAGE),
                    trials=TRIALS,
                    checkpoint=SHARED,
                    retries=Retries(backoff_limit=-1),
                ),
            ),
            "backoff_limit must be >= 0, got -1",
        ),
    ],
)
def test_values_the_api_server_would_reject_fail_at_preview(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_batch_job_with_a_fresh_job_per_attempt_is_a_job_set_that_restarts_on_preemption(
    program: Program,
) -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE, gpus=8),
        checkpoint=SHARED,
        retries=Retries(backoff_limit=2, non_retriable_exit_codes=(42,), fresh_job_per_attempt=True),
    )
    program.run(lambda: BatchJob("ft", args, opts=opts_with(provider())))
    objects = program.kubernetes_objects()
    assert sorted(objects) == ["JobSet/ft"]
    (registered,) = program.by_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    job_set = objects["JobSet/ft"]
    policy = job_set["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 0
    assert policy["restartStrategy"] == "BlockingRecreate"
    assert policy["rules"] == [
        {
            "name": "preempted",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"],
        },
        {"name": "failed", "action": "FailJobSet", "onJobFailureReasons": []},
    ]
    (replicated,) = job_set["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 1
    job_spec = replicated["template"]["spec"]
    # The Job inside is an ordinary batch/v1 Job: the API server's own schema accepts it.
    assert_schema_valid(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ft-attempt-0"}, "spec": job_spec}
    )
    assert job_spec["podFailurePolicy"]["rules"] == [
        {**DISRUPTION_RULE, "action": "FailJob"},
        {**SIGTERM_EXIT_RULE, "action": "FailJob"},
        {"action": "FailIndex", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
    ]
    # A non-retriable code or too many crashes fail the Job with MaxFailedIndexesExceeded, not PodFailurePolicy.
    assert job_spec["backoffLimitPerIndex"] == 2 and job_spec["maxFailedIndexes"] == 0
    assert job_spec["completionMode"] == "Indexed" and job_spec["podReplacementPolicy"] == "Failed"
    assert job_spec["template"]["spec"]["restartPolicy"] == "Never"
    assert job_spec["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    from together_clusters.components import guard

    assert guard.check_manifest(job_set) == []


LONGEST_ACCEPTED = {"batch": 45, "sweep": 43, "run": 35}
"""The longest name whose JobSets' pod names stay within 63 characters (see tests/twin/test_jobset.py)."""


def render_named(kind: str, name: str) -> list[dict]:
    container = ContainerSpec(image=IMAGE)
    if kind == "batch":
        return manifests.batch_job(name, BatchJobArgs(container=container, checkpoint=SHARED))
    if kind == "sweep":
        trials = tuple({"lr": i} for i in range(10))
        return manifests.sweep(name, SweepArgs(container=container, trials=trials, checkpoint=SHARED))
    args = TrainingRunArgs(coordinator=container, worker=container, num_workers=10, checkpoint=SHARED)
    return manifests.training_run(name, args)


@pytest.mark.parametrize(
    ("kind", "field"), [("batch", "job_name"), ("sweep", "sweep_name"), ("run", "run_name")]
)
def test_a_name_too_long_for_job_set_pod_names_is_refused_at_preview_naming_the_limit(
    kind: str, field: str
) -> None:
    longest = LONGEST_ACCEPTED[kind]
    render_named(kind, "a" * longest)
    with pytest.raises(
        ValueError, match=rf"^{field} \(or the component's name\)='a{{{longest + 1}}}'"
    ) as refused:
        render_named(kind, "a" * (longest + 1))
    assert f"use a name of at most {longest} characters" in str(refused.value)
    assert "fresh_job_per_attempt=False" in str(refused.value)
    with pytest.raises(ValueError, match="starting with a letter"):
        render_named(kind, "7b-run")


def test_a_checkpoint_store_on_a_together_volume_binds_its_claim_to_the_static_volume(
    program: Program,
) -> None:
    program.run(
        lambda: CheckpointStore(
            "ckpt", CheckpointStoreArgs(storage=SHARED), opts=opts_with(provider()), volume_name="checkpoints"
        )
    )
    claim = program.kubernetes_objects()["PersistentVolumeClaim/ckpt"]
    assert_schema_valid(claim)
    assert claim["spec"]["volumeName"] == "checkpoints" and claim["spec"]["storageClassName"] == ""


def test_the_checkpoint_claim_is_retained_on_delete_and_nothing_else() -> None:
    from together_clusters.components.checkpoint_store import keep_claims

    def transformed(type_: str) -> pulumi.ResourceTransformationResult | None:
        args = pulumi.ResourceTransformationArgs(None, type_, "x", {}, pulumi.ResourceOptions())  # type: ignore[arg-type]
        return keep_claims(args)

    kept = transformed("kubernetes:core/v1:PersistentVolumeClaim")
    assert kept is not None and kept.opts.retain_on_delete is True
    assert transformed("kubernetes:batch/v1:Job") is None
