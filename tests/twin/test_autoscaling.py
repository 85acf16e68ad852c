"""Autoscaling on the twin (issue 42): GPU pods Pending for lack of GPUs on a cluster created with
``auto_scale`` add standard Nodes up to the ceiling, and the added Nodes go once the pods finish; the floor
(``num_gpus``) stays what the program set throughout.

Oracles: the API server (Nodes, pod phases, the scheduler's ``Unschedulable``) and the compute API's reply
(``num_gpus``, ``gpu_worker_nodes``, the scale events).
"""

from __future__ import annotations

from typing import Any

import pytest

from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE, RUN_DURATION
from together_clusters.emulator.server import RunningEmulator
from together_clusters.platform import GPU_RESOURCE, LifecycleReason

from ._twin import TwinCluster, wait_for

pytestmark = pytest.mark.twin


def gpu_pod(name: str, run_for: str) -> dict[str, Any]:
    """A pod of 8 GPUs (a whole node) that succeeds by itself after ``run_for``."""
    return {
        "metadata": {"name": name, "annotations": {EXIT_CODE: "0", RUN_DURATION: run_for}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "train", "image": "trainer", "resources": {"limits": {GPU_RESOURCE: "8"}}}
            ],
        },
    }


def standard_nodes(reply: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in reply["gpu_worker_nodes"] if "preemptible" not in n["node_id"]]


def test_pending_gpu_pods_add_standard_nodes_up_to_the_ceiling_and_they_go_once_idle(
    twin_emulator: RunningEmulator,
) -> None:
    with TwinCluster.create(
        twin_emulator, "autoscale", num_gpus=8, auto_scale=True, auto_scale_max_gpus=24
    ) as cluster:
        cluster.wait_for_nodes(standard=1, preemptible=0)
        # Four pods of a whole node each: one fits the floor's node, two more fit under the ceiling (24 GPUs),
        # the fourth waits for one of them to finish.
        for i in range(4):
            cluster.core.create_namespaced_pod("default", gpu_pod(f"train-{i}", run_for="8s"))
        cluster.wait_for_nodes(standard=3, preemptible=0, timeout=120)
        reply = cluster.get()
        assert reply["num_gpus"] == 8  # the floor the program set, never the live size
        assert len(standard_nodes(reply)) == 3
        ups = [e for e in reply["node_lifecycle_events"] if e["reason"] == LifecycleReason.SCALED_UP]
        assert {e["node_id"] for e in ups} >= set(standard_nodes(reply)[1:])

        def all_succeeded() -> bool | None:
            phases = [p.status.phase for p in cluster.core.list_namespaced_pod("default").items]
            return phases.count("Succeeded") == 4 or None

        wait_for(all_succeeded, "the four pods to succeed", timeout=120)
        # Idle for 10 minutes of the platform (10 s at speed 60): the added Nodes go, the floor's stays.
        cluster.wait_for_nodes(standard=1, preemptible=0, timeout=120)
        reply = cluster.get()
        assert reply["num_gpus"] == 8 and len(standard_nodes(reply)) == 1
        downs = {
            e["node_id"] for e in reply["node_lifecycle_events"] if e["reason"] == LifecycleReason.SCALED_DOWN
        }
        assert len(downs) == 2 and standard_nodes(reply)[0] not in downs
