"""``pod_gpu_request`` against the real kube-scheduler: on the twin's standard node, a pod of each shape (limits
only, requests and limits, an init container above the app, a sidecar beside a later init container) and one
plain pod taking the rest of the node's GPUs by the function's count are all placed, and one GPU more stays
Pending, ``Insufficient nvidia.com/gpu``. Had the function counted a shape below the scheduler, the last
filler would wait; above it, the extra pod would be placed. A pod asking for GPUs by requests alone never
reaches the scheduler: the API server wants the limits.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from together_clusters.platform import GPU_RESOURCE, ComputeClass, pod_gpu_request

from ._twin import TwinCluster, wait_for

pytestmark = pytest.mark.twin


def container(name: str, limits: int | None = None, requests: int | None = None, **fields: Any) -> dict:
    resources = {k: {GPU_RESOURCE: str(v)} for k, v in (("limits", limits), ("requests", requests)) if v}
    return {"name": name, "image": "registry.invalid/trainer:1", "resources": resources, **fields}


SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("limits-only", {"containers": [container("main", limits=1)]}),
    ("requests-and-limits", {"containers": [container("main", limits=1, requests=1)]}),
    (
        "init-above-the-app",
        {"initContainers": [container("fetch", limits=2)], "containers": [container("main", limits=1)]},
    ),
    (
        "sidecar-beside-a-later-init",
        {
            "initContainers": [
                container("proxy", limits=1, restartPolicy="Always"),
                container("fetch", limits=2),
            ],
            "containers": [container("main", limits=1)],
        },
    ),
]
"""1 + 1 + 2 + 3 GPUs as the scheduler counts them; the app containers' limits alone say 1 each, and the
sidecar's pod is 2 when the sidecar is taken for a plain init container or not counted beside the later one."""


def pod(name: str, node: str, spec: dict[str, Any]) -> dict[str, Any]:
    full = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,  # gone with the namespace at once: the next test has the node
        "nodeSelector": {"kubernetes.io/hostname": node},
        **spec,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": full}


def gpus_held(cluster: TwinCluster, node: str) -> int:
    """The GPUs the pods bound to ``node`` hold, by the function (finished pods hold none)."""
    pods = cluster.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    return sum(
        pod_gpu_request(cluster.api.sanitize_for_serialization(p.spec))
        for p in pods
        if p.status.phase not in ("Succeeded", "Failed")
    )


def verdict(cluster: TwinCluster, namespace: str, name: str) -> str | None:
    """The scheduler's verdict on a pod: ``placed``, ``Unschedulable: <why>``, or ``None`` while it has none."""
    found = cluster.core.read_namespaced_pod(name, namespace)
    if found.spec.node_name:
        return "placed"
    for condition in found.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False" and condition.reason:
            return f"{condition.reason}: {condition.message}"
    return None


def test_the_scheduler_places_pods_exactly_while_their_gpus_by_the_function_fit(
    cluster: TwinCluster, namespace: str
) -> None:
    (node,) = [n for n, c in cluster.node_classes().items() if c == ComputeClass.STANDARD]
    allocatable = int(cluster.core.read_node(node).status.allocatable[GPU_RESOURCE])
    wait_for(lambda: gpus_held(cluster, node) == 0, f"{node} to hold no GPUs (earlier tests' pods gone)", 60)
    rest = allocatable - sum(pod_gpu_request(spec) for _, spec in SHAPES)
    assert rest >= 0, f"the function counts more GPUs for {[n for n, _ in SHAPES]} than {node} has"
    fillers = [*SHAPES, ("the-rest", {"containers": [container("main", limits=rest)]})]

    for name, spec in fillers:
        cluster.core.create_namespaced_pod(namespace, pod(name, node, spec))
        said = wait_for(
            lambda name=name: verdict(cluster, namespace, name), f"the scheduler's verdict on {name}"
        )
        assert said == "placed", f"{name} ({pod_gpu_request(spec)} GPUs by the function): {said}"
    assert gpus_held(cluster, node) == allocatable

    cluster.core.create_namespaced_pod(
        namespace, pod("one-more", node, {"containers": [container("main", 1)]})
    )
    said = wait_for(lambda: verdict(cluster, namespace, "one-more"), "the scheduler's verdict on one-more")
    assert said.startswith("Unschedulable: ") and "Insufficient nvidia.com/gpu" in said, said

    requests_only = pod("requests-only", node, {"containers": [container("main", requests=1)]})
    with pytest.raises(ApiException) as refused_by_the_api:
        cluster.core.create_namespaced_pod(namespace, requests_only)
    assert refused_by_the_api.value.status == 422
    assert "Limit must be set" in str(refused_by_the_api.value.body)
