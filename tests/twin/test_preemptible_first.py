"""PREEMPTIBLE_FIRST on the twin, with the real scheduler and the real Job and JobSet controllers, on a cluster
created while its region had no preemptible capacity at all:

- a PREEMPTIBLE_FIRST trial runs on the idle standard node at once, while a plain PREEMPTIBLE job waits
  Pending for the preemptible nodes (no fallback: as before);
- a critical pod arriving for that standard node takes it: the scheduler preempts the fallback pod
  (``DisruptionTarget``, reason ``PreemptionByScheduler``), its JobSet counts no failure and makes a
  replacement, which runs again once there is room;
- when the capacity returns, the waiting trials start on the new preemptible nodes.

The pods are kwok's (their saving on SIGTERM is the checkpoint runtime's, tested on its own); the priority
class is the one ClusterControllers installs, made from the same manifest.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from together_clusters.components import (
    BatchInferenceArgs,
    BatchJobArgs,
    ContainerSpec,
    NoCheckpoint,
    NodePlacement,
    SweepArgs,
    manifests,
)
from together_clusters.components.controllers.priorities import FALLBACK, priority_class_manifest
from together_clusters.emulator.server import RunningEmulator
from together_clusters.platform import COMPUTE_CLASS_LABEL, PLACEMENT_LABEL, ComputeClass

from ._twin import JOBSETS, REGION, TwinCluster, failed_workloads, wait_for

pytestmark = pytest.mark.twin

SCARCE_GPU = "H200_SXM"
"""A pool of its own, emptied for this module (the package's cluster draws on the H100 one)."""
IMAGE = "ghcr.io/example/trainer:1"
NONE = NoCheckpoint()


@pytest.fixture(scope="module")
def scarce(twin_emulator: RunningEmulator) -> Iterator[TwinCluster]:
    """One standard node, a target of two preemptible ones, and a region with no preemptible GPU free."""
    twin_emulator.admin.set_capacity(REGION, SCARCE_GPU, 0)
    with TwinCluster.create(
        twin_emulator, "scarce", gpu_type=SCARCE_GPU, num_gpus=8, num_preemptible_gpus=16
    ) as created:
        created.wait_for_nodes(standard=1, preemptible=0)
        client.SchedulingV1Api(created.api).create_priority_class(priority_class_manifest(FALLBACK))
        yield created


def create_all(cluster: TwinCluster, objects: list[dict[str, Any]]) -> None:
    custom = client.CustomObjectsApi(cluster.api)
    apps = client.AppsV1Api(cluster.api)
    for obj in objects:
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": "default"}}
        if obj["kind"] == "JobSet":
            custom.create_namespaced_custom_object(*JOBSETS, obj)
        elif obj["kind"] == "Job":
            cluster.batch.create_namespaced_job("default", obj)
        elif obj["kind"] == "Deployment":
            apps.create_namespaced_deployment("default", obj)
        elif obj["kind"] == "ConfigMap":
            cluster.core.create_namespaced_config_map("default", obj)
        else:
            raise AssertionError(f"not expected here: {obj['kind']}")


def pods(cluster: TwinCluster, selector: str) -> list[client.V1Pod]:
    return list(cluster.core.list_namespaced_pod("default", label_selector=selector).items)


def node_class(cluster: TwinCluster, pod: client.V1Pod) -> str:
    node = cluster.core.read_node(pod.spec.node_name)
    return str((node.metadata.labels or {}).get(COMPUTE_CLASS_LABEL, "standard"))


def running_on(cluster: TwinCluster, selector: str) -> list[tuple[str, str]]:
    """(pod name, class of its node) of the running pods matching ``selector``, not being deleted."""
    return sorted(
        (p.metadata.name, node_class(cluster, p))
        for p in pods(cluster, selector)
        if p.status.phase == "Running" and not p.metadata.deletion_timestamp
    )


def unschedulable(pod: client.V1Pod) -> bool:
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        for c in pod.status.conditions or []
    )


def two_trials(name: str) -> list[dict[str, Any]]:
    """A PREEMPTIBLE_FIRST Sweep of two 8-GPU trials (a node each)."""
    sweep = SweepArgs(
        container=ContainerSpec(image=IMAGE, gpus=8),
        trials=({"lr": 0.1}, {"lr": 0.2}),
        checkpoint=NONE,
        sweep_name=name,
        placement=NodePlacement(ComputeClass.PREEMPTIBLE_FIRST),
    )
    return manifests.sweep(name, sweep)


def both_running(cluster: TwinCluster, selector: str) -> list[tuple[str, str]] | None:
    found = running_on(cluster, selector)
    return found if len(found) == 2 else None


TRIALS = "app.kubernetes.io/name=lr"
PLAIN = "app.kubernetes.io/name=plain"
SERVE = "app.kubernetes.io/name=serve"
FALLBACK_JOB = "app.kubernetes.io/name=fb"


def disruption_condition(cluster: TwinCluster, pod_name: str, resource_version: str) -> Any:
    """The pod's DisruptionTarget condition, from the pod's changes since ``resource_version`` (its deletion
    included: the scheduler's victim may be gone by the time anyone reads it)."""
    stream = watch.Watch()
    for event in stream.stream(
        cluster.core.list_namespaced_pod,
        "default",
        field_selector=f"metadata.name={pod_name}",
        resource_version=resource_version,
        timeout_seconds=120,
    ):
        pod = event["object"]
        found = next((c for c in (pod.status.conditions or []) if c.type == "DisruptionTarget"), None)
        if found is not None:
            stream.stop()
            return found
    raise AssertionError(f"no DisruptionTarget condition on {pod_name} within 120 s")


def test_a_critical_pod_takes_the_standard_node_back_from_a_fallback_pod_which_is_replaced_not_failed(
    scarce: TwinCluster,
) -> None:
    job = BatchJobArgs(
        container=ContainerSpec(image=IMAGE, gpus=8),
        checkpoint=NONE,
        job_name="fb",
        placement=NodePlacement(ComputeClass.PREEMPTIBLE_FIRST),
    )
    create_all(scarce, manifests.batch_job("fb", job))
    (first,) = wait_for(lambda: running_on(scarce, FALLBACK_JOB) or None, "the fallback pod running")
    assert first[1] == "standard"  # no preemptible node at all: it fell back

    serving = BatchInferenceArgs(
        container=ContainerSpec(image=IMAGE, gpus=8),
        replicas=1,
        deployment_name="serve",
        placement=NodePlacement(ComputeClass.STANDARD, critical=True),
    )
    seen_from = scarce.core.read_namespaced_pod(first[0], "default").metadata.resource_version
    create_all(scarce, [m for m in manifests.batch_inference("serve", serving) if m["kind"] == "Deployment"])
    wait_for(lambda: running_on(scarce, SERVE) or None, "the critical replica running on the standard node")

    # Watched from before the critical pod came, so the condition is seen even once the victim is gone.
    disruption = disruption_condition(scarce, first[0], seen_from)
    assert (disruption.status, disruption.reason) == ("True", "PreemptionByScheduler")
    # Replaced, not failed: a new pod waits for room (the JobSet recreated its Job; nothing counted).
    replacement = wait_for(
        lambda: next(
            (p for p in pods(scarce, FALLBACK_JOB) if p.metadata.name != first[0] and unschedulable(p)), None
        ),
        "the fallback pod's replacement waiting for room",
    )
    assert replacement.spec.priority_class_name == FALLBACK.name
    assert failed_workloads(scarce.api) == []

    # The critical replica goes: the replacement runs on the freed standard node.
    client.AppsV1Api(scarce.api).delete_namespaced_deployment("serve", "default")
    (again,) = wait_for(
        lambda: running_on(scarce, FALLBACK_JOB) or None, "the replacement running", timeout=180
    )
    assert again[1] == "standard"
    assert failed_workloads(scarce.api) == []
    client.CustomObjectsApi(scarce.api).delete_namespaced_custom_object(*JOBSETS[:3], JOBSETS[3], "fb")
    wait_for(lambda: not pods(scarce, FALLBACK_JOB) or None, "the fallback job's pods gone")


def test_a_preemptible_first_sweep_starts_on_standard_at_once_and_on_preemptible_nodes_when_they_come(
    scarce: TwinCluster, twin_emulator: RunningEmulator
) -> None:
    plain = BatchJobArgs(container=ContainerSpec(image=IMAGE, gpus=8), checkpoint=NONE, job_name="plain")
    create_all(scarce, manifests.batch_job("plain", plain))
    (waiting,) = wait_for(
        lambda: [p for p in pods(scarce, PLAIN) if unschedulable(p)] or None,
        "the plain preemptible job Pending",
    )
    assert waiting.spec.node_name is None  # the standard node is free, and it may not take it

    create_all(scarce, two_trials("lr"))
    (on_standard,) = wait_for(lambda: running_on(scarce, TRIALS) or None, "the first trial running")
    assert on_standard[1] == "standard"
    trial_pods = pods(scarce, TRIALS)
    assert {p.metadata.labels[PLACEMENT_LABEL] for p in trial_pods} == {"preemptible-first"}
    # The second trial waits: one standard node. Waited for: under load the scheduler may not have tried it yet
    # when the first runs (CI: read at once, no pod was Unschedulable yet).
    wait_for(
        lambda: sum(unschedulable(p) for p in pods(scarce, TRIALS)) == 1 or None,
        "the second trial Pending for want of a node",
    )
    assert len(running_on(scarce, TRIALS)) == 1

    twin_emulator.admin.set_capacity(REGION, SCARCE_GPU, 16)
    scarce.wait_for_nodes(standard=1, preemptible=2, timeout=180)
    placed = wait_for(lambda: both_running(scarce, TRIALS), "both trials running", timeout=180)
    assert sorted(cls for _, cls in placed) == ["preemptible", "standard"]
    (plain_placed,) = wait_for(lambda: running_on(scarce, PLAIN) or None, "the plain job running")
    assert plain_placed[1] == "preemptible"  # the plain job got its node too
    assert failed_workloads(scarce.api) == []


def test_a_preempted_preemptible_first_trial_runs_on_the_standard_node_at_once_instead_of_waiting_for_the_refill(
    scarce: TwinCluster, twin_emulator: RunningEmulator
) -> None:
    # The pool sized exactly, and nothing to refill with: a plain PREEMPTIBLE trial would wait for the refill; a
    # PREEMPTIBLE_FIRST one takes the standard node. The pool is filled here, not left to the previous test's
    # refill (CI: that test failed before its refill, and this one then waited for nodes that never came).
    custom = client.CustomObjectsApi(scarce.api)
    for job_set in custom.list_namespaced_custom_object(*JOBSETS)["items"]:
        custom.delete_namespaced_custom_object(*JOBSETS[:3], JOBSETS[3], job_set["metadata"]["name"])
    scarce.core.delete_collection_namespaced_pod("default", grace_period_seconds=0)
    wait_for(lambda: not pods(scarce, "app.kubernetes.io/managed-by=pulumi") or None, "the earlier pods gone")
    twin_emulator.admin.set_capacity(REGION, SCARCE_GPU, 16)
    scarce.wait_for_nodes(standard=1, preemptible=2, timeout=180)
    twin_emulator.admin.set_capacity(REGION, SCARCE_GPU, 0)

    create_all(scarce, two_trials("exact"))
    exact = "app.kubernetes.io/name=exact"
    placed = wait_for(lambda: both_running(scarce, exact), "both trials running")
    assert [cls for _, cls in placed] == ["preemptible", "preemptible"]  # preferred while there is room

    victim = scarce.next_victim()
    on_victim = next(p.metadata.name for p in pods(scarce, exact) if p.spec.node_name == victim)
    scarce.preempt(1)
    moved = wait_for(
        lambda: next(
            (cls for name, cls in running_on(scarce, exact) if name != on_victim and cls == "standard"), None
        ),
        "the preempted trial's replacement running on the standard node",
    )
    assert moved == "standard"
    assert len(running_on(scarce, exact)) == 2  # both trials run while the pool has nothing to refill with
    assert failed_workloads(scarce.api) == []
