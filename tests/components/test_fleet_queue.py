"""FleetQueue's objects as plain data and its refusals at construction (the real Kueue, MultiKueue and API
servers are the oracles in tests/twin/test_engine_fleet.py)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pulumi
import pytest
import yaml

from together_clusters.components import (
    BatchJobArgs,
    ClusterControllersArgs,
    ContainerSpec,
    FleetQueue,
    FleetQueueArgs,
    FleetWorkerArgs,
    PodSettings,
    S3Bucket,
    SharedVolume,
    provider_for,
)
from together_clusters.components.controllers.releases import KueueSettings, kueue_manager_config
from together_clusters.components.fleet_checks import fleet_workload_violations
from together_clusters.components.guard import check_manifests
from together_clusters.components.manifests import fleet_queue as builder
from together_clusters.errors import ArgsError
from together_clusters.platform import COMPUTE_CLASS_LABEL, PREEMPTIBLE
from together_clusters.provider import Cluster, ClusterArgs

from .conftest import Program

IMAGE = "registry.example/train:1"


def by_key(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def test_the_manager_queue_waits_for_multikueue_which_lists_the_workers_in_order() -> None:
    objects = by_key(builder.manager_objects("fleet", FleetQueueArgs(workers=["x"]), ["east", "west"], 16, 8))
    queue = objects["ClusterQueue/fleet"]["spec"]
    assert queue["admissionChecksStrategy"] == {"admissionChecks": [{"name": "fleet"}]}
    check = objects["AdmissionCheck/fleet"]["spec"]
    assert check["controllerName"] == "kueue.x-k8s.io/multikueue"
    assert check["parameters"] == {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "fleet"}
    assert objects["MultiKueueConfig/fleet"]["spec"]["clusters"] == ["fleet-east", "fleet-west"]
    for worker in ("east", "west"):
        source = objects[f"MultiKueueCluster/fleet-{worker}"]["spec"]["clusterSource"]["kubeConfig"]
        assert source == {"locationType": "Secret", "location": f"fleet-{worker}"}
        secret = builder.kubeconfig_secret("fleet", worker)["metadata"]
        assert (secret["name"], secret["namespace"]) == (f"fleet-{worker}", "kueue-system")
    flavors = queue["resourceGroups"][0]["flavors"]
    assert [(f["name"], f["resources"][0]["nominalQuota"]) for f in flavors] == [
        ("fleet-preemptible", 16),
        ("fleet-standard", 8),
    ]
    # Pods are counted too, so a TrainingRun's coordinator (no GPUs) is given a flavor.
    assert queue["resourceGroups"][0]["coveredResources"] == ["nvidia.com/gpu", "pods"]
    # The manager's flavors fit no pods (it has no GPU nodes): no topology, but the class's labels.
    preemptible = objects["ResourceFlavor/fleet-preemptible"]["spec"]
    assert "topologyName" not in preemptible
    assert preemptible["nodeLabels"] == {COMPUTE_CLASS_LABEL: PREEMPTIBLE}
    assert objects["LocalQueue/fleet"]["spec"] == {"clusterQueue": "fleet"}


def test_the_manager_acts_in_a_worker_only_on_jobs_jobsets_and_workloads() -> None:
    objects = by_key(builder.worker_access_objects("fleet"))
    granted = {
        (group, resource, verb)
        for rule in objects["ClusterRole/fleet-multikueue"]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert {resource.split("/")[0] for _, resource, _ in granted} == {"jobs", "jobsets", "workloads"}
    assert not any("*" in part for g in granted for part in g)
    binding = objects["ClusterRoleBinding/fleet-multikueue"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "fleet-multikueue", "namespace": "kueue-system"}
    ]
    token = objects["Secret/fleet-multikueue"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "fleet-multikueue"}


def test_a_worker_kubeconfig_carries_the_token_and_the_ca_as_kueue_0_17_requires() -> None:
    admin = yaml.safe_dump(
        {
            "clusters": [
                {"name": "c", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority": "/ca"}}
            ],
            "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "admin"}}],
            "current-context": "ctx",
            "users": [{"name": "admin", "user": {"client-key-data": "KEY"}}],
        }
    )
    server = builder.api_server_of(admin)
    config = yaml.safe_load(builder.worker_kubeconfig("west", server, "Q0E=", "tok"))
    (cluster,) = config["clusters"]
    assert cluster["cluster"] == {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Q0E="}
    (user,) = config["users"]
    assert user["user"] == {"token": "tok"}
    assert "KEY" not in yaml.safe_dump(config)


def test_the_manager_kueue_is_configured_with_the_fleets_worker_lost_timeout() -> None:
    config = kueue_manager_config(KueueSettings(), builder.multikueue_settings(300))
    assert config["multiKueue"] == {"workerLostTimeout": "300s"}
    assert "multiKueue" not in kueue_manager_config(KueueSettings())


def test_the_manager_kueue_times_no_pods_it_cannot_see() -> None:
    """A fleet's manager runs none of its workloads' pods: the workers time them (``waitForPodsReady``) and
    give a workload back, MultiKueue re-admits it with no backoff. The manager's own timer evicted too, with a
    requeue backoff (60 s) on top of the worker's timeout (issue 40, part 2); a cluster's own Kueue and a
    worker's keep it."""
    settings = KueueSettings(pods_ready_timeout_seconds=30)
    assert "waitForPodsReady" not in kueue_manager_config(settings, builder.multikueue_settings(300, True))
    assert kueue_manager_config(settings)["waitForPodsReady"]["timeout"] == "30s"


@pytest.mark.parametrize(
    ("workers", "field", "fix"),
    [
        ([], "workers", "list the Cluster resources"),
        ([builder.WorkerView("hub", 1, is_manager=True)], "workers[0]", "remove it from workers"),
        (
            [builder.WorkerView("east", 1), builder.WorkerView("east2", 1)],
            "workers[1]",
            "each worker cluster once",
        ),
        ([builder.WorkerView("East", 1)], "workers[0].name", "FleetWorkerArgs(name=...)"),
        ([builder.WorkerView("east", 1), builder.WorkerView("east", 2)], "workers", "name=...) of its own"),
    ],
)
def test_bad_workers_are_refused_naming_the_field_and_the_fix(
    workers: list[builder.WorkerView], field: str, fix: str
) -> None:
    (violation,) = builder.fleet_violations("fleet", FleetQueueArgs(workers=[]), workers)
    assert violation.field == field
    assert fix in str(violation)
    assert "\n" not in str(violation)


def test_a_slurm_worker_is_refused() -> None:
    violation = builder.slurm_worker_violation("workers[1]", "west", "SLURM")
    assert violation is not None and "cluster_type='KUBERNETES'" in str(violation)
    assert builder.slurm_worker_violation("workers[1]", "west", "KUBERNETES") is None


def cluster(name: str) -> Cluster:
    return Cluster(
        name,
        ClusterArgs(
            cluster_name=name, region="us-central-8", gpu_type="H100_SXM", num_gpus=8, nvidia_version_id="v"
        ),
    )


@pytest.mark.parametrize("case", ["manager", "twice", "none"])
def test_the_fleet_is_refused_before_anything_is_registered(program: Program, case: str) -> None:
    def build() -> None:
        hub, east = cluster("hub"), cluster("east")
        workers = {"manager": [east, hub], "twice": [east, FleetWorkerArgs(east, name="again")], "none": []}[
            case
        ]
        opts = pulumi.ResourceOptions(
            provider=provider_for(hub, controllers=ClusterControllersArgs(kueue=True))
        )
        FleetQueue("fleet", FleetQueueArgs(workers=workers), opts)

    with pytest.raises(ArgsError) as refused:
        program.run(build)
    assert "FleetQueue 'fleet'" in str(refused.value)
    assert not program.by_type("together:components:FleetQueue")
    assert not [r for r in program.mocks.registered if "kueue" in r.typ or "MultiKueue" in str(r.inputs)]


def test_a_fleet_whose_manager_installs_no_kueue_is_refused(program: Program) -> None:
    def build() -> None:
        hub, east = cluster("hub"), cluster("east")
        opts = pulumi.ResourceOptions(provider=provider_for(hub))  # JobSet only
        FleetQueue("fleet", FleetQueueArgs(workers=[east]), opts)

    with pytest.raises(ArgsError) as refused:
        program.run(build)
    assert "opts.provider" in str(refused.value) and "kueue=True" in str(refused.value)
    assert not program.by_type("together:components:FleetQueue")


def fleet_queue(hub: Any, workers: dict[str, Any]) -> Any:
    """What a workload sees of a FleetQueue (its manager and workers), without building one."""
    return SimpleNamespace(
        local_queue_name="fleet", manager_cluster=hub, worker_names=tuple(workers), worker_clusters=workers
    )


def test_a_workload_given_the_fleet_must_be_created_on_the_manager() -> None:
    hub, east = object(), object()
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=S3Bucket(bucket="b", credentials_secret="s3"),
        queue=fleet_queue(hub, {"east": east}),
    )
    (violation,) = fleet_workload_violations(args, east)
    assert violation.field == "opts.provider"
    assert "worker 'east'" in str(violation) and "the manager's provider" in str(violation)
    assert fleet_workload_violations(args, hub) == []


def test_a_fleet_workload_keeps_its_checkpoints_where_every_region_reaches_them() -> None:
    hub = object()
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=SharedVolume(claim_name="ckpt"),
        queue=fleet_queue(hub, {}),
    )
    (violation,) = fleet_workload_violations(args, hub)
    assert violation.field == "checkpoint"
    assert "S3Bucket" in str(violation)
    # The same volume on a cluster's own queue is fine.
    plain = BatchJobArgs(
        container=ContainerSpec(image=IMAGE), checkpoint=SharedVolume(claim_name="ckpt"), queue="q"
    )
    assert fleet_workload_violations(plain, hub) == []


def fleet_training_run(**extra: Any) -> list[dict[str, Any]]:
    from together_clusters.components import TrainingRunArgs
    from together_clusters.components.manifests.training_run import training_run

    args = TrainingRunArgs(
        coordinator=ContainerSpec(image=IMAGE),
        worker=ContainerSpec(image=IMAGE, gpus=4),
        num_workers=3,
        checkpoint=S3Bucket(bucket="b", credentials_secret="s3"),
        pod=PodSettings(namespace="research"),
        queue=fleet_queue(object(), {}),
        **extra,
    )
    return training_run("llm", args)


def env_of(template: dict[str, Any]) -> dict[str, Any]:
    (container,) = template["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_a_training_run_in_a_fleet_is_one_job_set_so_its_coordinator_goes_where_its_workers_go() -> None:
    """MultiKueue dispatches one Kueue workload to one worker: the coordinator and the workers must be that one
    workload, and reach each other there by names the worker's JobSet controller gives them."""
    (job_set,) = fleet_training_run()
    assert job_set["kind"] == "JobSet" and job_set["metadata"]["name"] == "llm"
    assert job_set["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "fleet"
    spec = job_set["spec"]
    assert spec["network"] == {
        "enableDNSHostnames": True,
        "subdomain": "llm",
        "publishNotReadyAddresses": True,
    }
    jobs = {job["name"]: job["template"]["spec"] for job in spec["replicatedJobs"]}
    assert list(jobs) == ["coordinator", "workers"]
    assert (jobs["coordinator"]["completions"], jobs["workers"]["completions"]) == (1, 3)
    coordinator, workers = (jobs[name]["template"] for name in ("coordinator", "workers"))
    # JobSet names the first coordinator pod llm-coordinator-0-0 under the JobSet's Service llm.
    address = "llm-coordinator-0-0.llm.research.svc"
    assert env_of(workers)["PET_RDZV_ENDPOINT"] == f"{address}:29500"
    assert env_of(coordinator)["COORDINATOR_HOST"] == env_of(workers)["COORDINATOR_HOST"] == address
    assert "subdomain" not in workers["spec"]  # the JobSet's own, not a Service the fleet would not copy
    # Standard nodes for the coordinator, preemptible for the workers (the guard's labels and affinity).
    assert coordinator["metadata"]["labels"]["together.ai/critical"] == "true"
    classes = {
        name: template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        for name, template in (("coordinator", coordinator), ("workers", workers))
    }
    (coordinator_class,) = classes["coordinator"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert coordinator_class == {"key": COMPUTE_CLASS_LABEL, "operator": "NotIn", "values": [PREEMPTIBLE]}
    assert {"key": COMPUTE_CLASS_LABEL, "operator": "In", "values": [PREEMPTIBLE]} in (
        classes["workers"]["nodeSelectorTerms"][0]["matchExpressions"]
    )
    # Every rank of the copy holds the checkpoint lease under the JobSet's uid (one holder per copy).
    path = "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"
    assert (
        lease_env(job_set)
        == [{"name": "CHECKPOINT_LEASE_HOLDER", "valueFrom": {"fieldRef": {"fieldPath": path}}}] * 2
    )
    # The placement guard (the rule table every component's objects pass) finds nothing to refuse.
    assert check_manifests([job_set]) == []


def test_a_training_run_in_a_fleet_whose_pods_would_get_names_kubernetes_refuses_is_refused() -> None:
    with pytest.raises(ArgsError) as refused:
        fleet_training_run(run_name="r" * 48)
    message = str(refused.value)
    assert "run_name" in message and "-coordinator-0-0-" in message and "at most 41 characters" in message
    assert "fresh_job_per_attempt" not in message  # a fleet runs it as one JobSet either way


def test_a_training_run_in_a_fleet_is_refused_a_login_pod() -> None:
    hub = object()
    run = SimpleNamespace(login=ContainerSpec(image=IMAGE), queue=fleet_queue(hub, {}), checkpoint=None)
    (violation,) = fleet_workload_violations(run, hub)
    assert violation.field == "login"
    assert "leave login unset" in violation.fix and "\n" not in str(violation)


def lease_env(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The CHECKPOINT_LEASE_HOLDER entries of a rendered workload's containers (JobSet or Job)."""
    spec = manifest["spec"]
    if manifest["kind"] == "JobSet":
        templates = [job["template"]["spec"]["template"] for job in spec["replicatedJobs"]]
    else:
        templates = [spec["template"]]
    return [
        entry
        for template in templates
        for c in template["spec"]["containers"]
        for entry in c.get("env", [])
        if entry["name"] == "CHECKPOINT_LEASE_HOLDER"
    ]


def test_a_fleet_workloads_pods_hold_the_checkpoint_lease_as_the_object_that_runs_them() -> None:
    """A copy MultiKueue makes on another worker is a new JobSet (or Job) with a new uid, read from the label its
    controller puts on the pods: the runtime's lease then lets only the newest copy commit (tests/checkpoint)."""
    from together_clusters.components import SweepArgs
    from together_clusters.components.manifests.batch_job import batch_job
    from together_clusters.components.manifests.sweep import sweep

    fleet = fleet_queue(object(), {})
    s3 = S3Bucket(bucket="b", credentials_secret="s3")
    trials = sweep(
        "ablation",
        SweepArgs(container=ContainerSpec(image=IMAGE), trials=[{"lr": 1}], checkpoint=s3, queue=fleet),
    )
    (job_set,) = [m for m in trials if m["kind"] == "JobSet"]
    path = "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"
    assert lease_env(job_set) == [
        {"name": "CHECKPOINT_LEASE_HOLDER", "valueFrom": {"fieldRef": {"fieldPath": path}}}
    ]

    plain = BatchJobArgs(container=ContainerSpec(image=IMAGE), checkpoint=s3, queue=fleet)
    plain = dataclasses.replace(
        plain, retries=dataclasses.replace(plain.retries, fresh_job_per_attempt=False)
    )
    (job,) = batch_job("eval", plain)
    assert job["kind"] == "Job"
    assert lease_env(job)[0]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.labels['batch.kubernetes.io/controller-uid']"
    )

    # One cluster's queue runs one copy at a time: no lease, the checkpoints behave as before.
    alone = batch_job("eval", BatchJobArgs(container=ContainerSpec(image=IMAGE), checkpoint=s3, queue="q"))
    assert lease_env(alone[0]) == []


def test_workers_of_another_gpu_type_are_refused_naming_the_worker_and_the_fix() -> None:
    violation = builder.gpu_type_violation(["east", "west"], ["H100_SXM", "A100_SXM_80GB"])
    assert violation is not None and violation.field == "workers[1]"
    assert "('west') has gpu_type 'A100_SXM_80GB' but 'east' has 'H100_SXM'" in str(violation)
    assert "one FleetQueue per GPU type" in violation.fix
    assert builder.gpu_type_violation(["east", "west"], ["H100_SXM", "H100_SXM"]) is None
    assert builder.gpu_type_violation(["east", "west"], [None, "H100_SXM"]) is None  # not known yet
