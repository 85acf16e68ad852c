"""WorkloadQueue and ``queue=``: Kueue's objects as plain dicts (flavors tried preemptible first, both with a
topology so a stockout falls through, quotas following the cluster less the reserve), Kueue's manager
configuration (requeued with backoff, never deactivated), and the workloads submitted to the queue (labelled,
a TrainingRun's workers as one workload), also under Pulumi's mocks."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from together_clusters.components import (
    BatchJob,
    BatchJobArgs,
    ClusterControllersArgs,
    ContainerSpec,
    KueueSettings,
    Retries,
    SharedVolume,
    SweepArgs,
    TrainingRunArgs,
    WorkloadQueue,
    WorkloadQueueArgs,
    kube,
    manifests,
    provider_for,
)
from together_clusters.components.controller_needs import needed_charts
from together_clusters.components.controllers.releases import kueue_manager_config, releases
from together_clusters.components.manifests.workload_queue import workload_queue
from together_clusters.errors import ArgsError
from together_clusters.platform import COMPUTE_CLASS_LABEL, DEFAULT_PREEMPTIBLE_TAINT, PREEMPTIBLE
from together_clusters.platform.charts import KUEUE, QUEUE_NAME_LABEL

from .conftest import Program

IMAGE = "ghcr.io/example/trainer:1"
TRAINER = ContainerSpec(image=IMAGE, gpus=8)
CKPT = SharedVolume(claim_name="ckpt")


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


# --- the queue's objects ---------------------------------------------------------------------------


def test_the_queue_tries_preemptible_then_standard_with_quotas_from_the_cluster_less_the_reserve() -> None:
    objects = workload_queue(
        "q", WorkloadQueueArgs(standard_gpus=16, preemptible_gpus=32, reserve_standard_gpus=8)
    )
    (cluster_queue,) = by_kind(objects, "ClusterQueue")
    (group,) = cluster_queue["spec"]["resourceGroups"]
    quotas = [(f["name"], f["resources"][0]["nominalQuota"]) for f in group["flavors"]]
    assert quotas == [("q-preemptible", 32), ("q-standard", 8)]
    assert group["coveredResources"] == ["nvidia.com/gpu"]
    # Short of preemptible quota: the next flavor, not a preemption of another workload.
    assert cluster_queue["spec"]["flavorFungibility"]["whenCanPreempt"] == "TryNextFlavor"
    (local_queue,) = by_kind(objects, "LocalQueue")
    assert (local_queue["metadata"]["namespace"], local_queue["spec"]["clusterQueue"]) == ("default", "q")


def test_both_flavors_use_topology_aware_scheduling_so_a_stockout_falls_through() -> None:
    objects = workload_queue("q", WorkloadQueueArgs(standard_gpus=8, preemptible_gpus=16))
    (topology,) = by_kind(objects, "Topology")
    # One level every node has, never the node itself: a node level would pin each pod to one node, and a
    # pod replacing a preempted one could be pinned to the node that is gone.
    assert topology["spec"]["levels"] == [{"nodeLabel": "kubernetes.io/os"}]
    flavors = {f["metadata"]["name"]: f["spec"] for f in by_kind(objects, "ResourceFlavor")}
    # Kueue implies TAS only when every flavor of the queue has a topology (and each needs a node label).
    assert {spec["topologyName"] for spec in flavors.values()} == {topology["metadata"]["name"]}
    assert all(spec["nodeLabels"] for spec in flavors.values())
    preemptible = flavors["q-preemptible"]
    assert preemptible["nodeLabels"] == {COMPUTE_CLASS_LABEL: PREEMPTIBLE}
    taint = DEFAULT_PREEMPTIBLE_TAINT
    assert preemptible["nodeTaints"] == [{"key": taint.key, "value": taint.value, "effect": taint.effect}]
    assert preemptible["tolerations"] == [
        {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}
    ]
    assert "nodeTaints" not in flavors["q-standard"]


def test_a_reserve_larger_than_the_standard_gpus_leaves_none_and_a_negative_one_is_refused() -> None:
    objects = workload_queue(
        "q", WorkloadQueueArgs(standard_gpus=8, preemptible_gpus=0, reserve_standard_gpus=16)
    )
    (cluster_queue,) = by_kind(objects, "ClusterQueue")
    assert cluster_queue["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]["nominalQuota"] == 0
    with pytest.raises(ArgsError, match="reserve_standard_gpus"):
        workload_queue("q", WorkloadQueueArgs(standard_gpus=8, preemptible_gpus=0, reserve_standard_gpus=-1))


# --- Kueue's configuration ---------------------------------------------------------------------------


def test_kueue_requeues_a_workload_that_lost_its_pods_with_backoff_and_never_deactivates_it() -> None:
    config = kueue_manager_config(
        KueueSettings(
            pods_ready_timeout_seconds=300, requeue_backoff_base_seconds=30, requeue_backoff_max_seconds=900
        )
    )
    ready = config["waitForPodsReady"]
    assert ready["timeout"] == "300s"
    assert ready["requeuingStrategy"] == {
        "timestamp": "Eviction",
        "backoffBaseSeconds": 30,
        "backoffMaxSeconds": 900,
    }
    assert "backoffLimitCount" not in ready["requeuingStrategy"]  # null: requeued without end
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    # No in-place node replacement: a workload that lost a node is evicted and requeued whole, placed afresh.
    assert config["featureGates"]["TASFailedNodeReplacement"] is False


def test_the_kueue_release_carries_that_configuration_in_the_charts_own_value() -> None:
    (release,) = releases(ClusterControllersArgs(jobset=False, kueue=True))
    text = release.values["managerConfig"]["controllerManagerConfigYaml"]
    assert yaml.safe_load(text) == kueue_manager_config(KueueSettings())
    assert release.values["controllerManager"]["manager"]["image"]["tag"] == "v0.17.0"


# --- workloads submitted to the queue ----------------------------------------------------------------


def test_a_batch_job_given_a_queue_is_labelled_with_it_and_needs_kueue() -> None:
    (job_set,) = manifests.batch_job("ft", BatchJobArgs(container=TRAINER, checkpoint=CKPT, queue="team"))
    assert job_set["metadata"]["labels"][QUEUE_NAME_LABEL] == "team"
    assert KUEUE in needed_charts([job_set])
    (plain,) = manifests.batch_job(
        "ft", BatchJobArgs(container=TRAINER, checkpoint=CKPT, retries=Retries(fresh_job_per_attempt=False))
    )
    assert QUEUE_NAME_LABEL not in plain["metadata"]["labels"]
    assert KUEUE not in needed_charts([plain])


def test_a_queued_plain_job_is_ready_for_pulumi_once_it_exists_not_once_it_starts() -> None:
    (job,) = manifests.batch_job(
        "ft",
        BatchJobArgs(
            container=TRAINER, checkpoint=CKPT, retries=Retries(fresh_job_per_attempt=False), queue="team"
        ),
    )
    assert job["metadata"]["annotations"]["pulumi.com/waitFor"] == "jsonpath={.metadata.uid}"


def test_each_trial_of_a_sweep_is_a_workload_of_its_own_in_the_queue() -> None:
    trials = ({"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001})
    objects = manifests.sweep(
        "hp", SweepArgs(container=TRAINER, checkpoint=CKPT, trials=trials, queue="team")
    )
    assert [o["metadata"]["labels"][QUEUE_NAME_LABEL] for o in objects] == ["team"] * 3


def test_a_queued_training_runs_workers_are_one_workload_so_it_is_admitted_whole() -> None:
    args = TrainingRunArgs(
        coordinator=ContainerSpec(image=IMAGE), worker=TRAINER, num_workers=4, checkpoint=CKPT, queue="team"
    )
    objects = manifests.training_run("llm", args)
    (workers,) = [o for o in objects if o["kind"] == "JobSet"]
    assert workers["metadata"]["name"] == "llm-workers"
    assert workers["metadata"]["labels"][QUEUE_NAME_LABEL] == "team"
    (replicated,) = workers["spec"]["replicatedJobs"]
    assert (replicated["template"]["spec"]["completions"], replicated["template"]["spec"]["parallelism"]) == (
        4,
        4,
    )
    # The critical coordinator is not queued: it never waits for capacity.
    (coordinator,) = [o for o in objects if o["kind"] == "Job"]
    assert QUEUE_NAME_LABEL not in coordinator["metadata"]["labels"]


# --- under Pulumi's mocks ----------------------------------------------------------------------------


def test_a_workload_given_the_queue_component_waits_for_it_and_its_quotas_follow_outputs(
    program: Program, served: dict[str, Any], waits: dict[str, Any]
) -> None:
    def build() -> tuple[Any, Any]:
        p = provider_for("kubeconfig", controllers=ClusterControllersArgs(kueue=True))
        opts = pulumi.ResourceOptions(provider=p)
        standard = pulumi.Output.from_input(16)
        queue = WorkloadQueue(
            "team",
            WorkloadQueueArgs(standard_gpus=standard, preemptible_gpus=24, reserve_standard_gpus=8),
            opts,
        )
        BatchJob("ft", BatchJobArgs(container=TRAINER, checkpoint=CKPT, job_name="ft", queue=queue), opts)
        return queue, kube.controllers_of(opts)

    queue, controllers = program.run(build)
    assert waits["ft-jobset-ft"] == [controllers, queue]
    objects = program.kubernetes_objects()
    assert objects["JobSet/ft"]["metadata"]["labels"][QUEUE_NAME_LABEL] == "team"
    flavors = objects["ClusterQueue/team"]["spec"]["resourceGroups"][0]["flavors"]
    assert [f["resources"][0]["nominalQuota"] for f in flavors] == [24, 8]
    assert sorted(k for k in objects if k.split("/")[0] in KUEUE.kinds) == [
        "ClusterQueue/team",
        "LocalQueue/team",
        "ResourceFlavor/team-preemptible",
        "ResourceFlavor/team-standard",
        "Topology/team-nodes",
    ]
