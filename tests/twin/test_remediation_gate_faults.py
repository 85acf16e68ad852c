"""``together-clusters remediations approve`` with the misbehaving proxy (tests/faultproxy.py) between it and the
compute API, on the twin (issue 41, part 3).

Under every fault: the approval is reported done exactly when the API shows it approved; it is never sent for a
node whose drain the gate has not seen through (the remediation's state and the node's pods are watched from a
thread of the test's own, straight from the emulator and the twin's API server); one remediation stays one
repair; and a run that failed leaves its plan on the Node, so the next run (as after a gate that died) approves
without draining anything twice.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from tests.faultproxy import Fault, FaultProxy
from together_clusters.emulator.server import RunningEmulator

from ._repairs import remediation_timings
from ._twin import TwinCluster, no_namespace_terminating, wait_for
from .test_remediation_gate import (  # noqa: F401 - cancelled_after: the gate module's cleanup, used here too
    REBOOT_VM,
    TIMINGS,
    cancelled_after,
    cordoned,
    gate,
    remediation,
)
from .test_remediation_nodes import instance_of, victim

pytestmark = pytest.mark.twin

FAULTS = {
    "approval-503": Fault("status", method="POST", status=503),
    "approval-reply-lost": Fault("drop", method="POST"),
    "approval-sent-twice": Fault("twice", method="POST"),
    "approval-reset": Fault("reset", method="POST"),
    "reads-503-storm": Fault("status", method="GET", status=503, count=3),
}
APP = "serve"


@pytest.fixture(autouse=True)
def owns_its_nodes(cluster: TwinCluster) -> None:
    no_namespace_terminating(cluster)


@pytest.fixture(scope="module", autouse=True)
def timings(twin_emulator: RunningEmulator) -> Iterator[None]:
    with remediation_timings(twin_emulator.admin, TIMINGS):
        yield


def serve_on(cluster: TwinCluster, namespace: str, node: str) -> None:
    """One replica of a Deployment, first placed on ``node`` (its replacement may go anywhere preemptible)."""
    manifest: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "affinity": {
                        "nodeAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "preference": {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": [node],
                                            }
                                        ]
                                    },
                                }
                            ]
                        }
                    },
                    "nodeSelector": {"together.ai/compute-class": "preemptible"},
                    "tolerations": [{"key": "together.ai/compute-class", "operator": "Exists"}],
                    "containers": [{"name": "main", "image": "registry.invalid/serve:1"}],
                },
            },
        },
    }
    from kubernetes import client

    client.AppsV1Api(cluster.api).create_namespaced_deployment(namespace, manifest)
    wait_for(lambda: ours_on(cluster, namespace, node) or None, f"{APP} to run on {node}")


def ours_on(cluster: TwinCluster, namespace: str, node: str) -> list[str]:
    """This test's pods running (not terminating) on ``node``."""
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"app={APP}").items
    return [
        p.metadata.name
        for p in pods
        if p.spec.node_name == node and p.status.phase == "Running" and p.metadata.deletion_timestamp is None
    ]


@pytest.mark.parametrize("kind", list(FAULTS))
def test_approve_under_a_fault_is_reported_as_the_api_did_it_and_only_after_the_drain(
    kind: str, cluster: TwinCluster, twin_emulator: RunningEmulator, namespace: str
) -> None:
    node = victim(cluster, "preemptible")
    serve_on(cluster, namespace, node)
    instance = instance_of(cluster, node)
    listed = f"/v1/compute/clusters/{cluster.cluster_id}/instances/{instance}/remediations"
    earlier = {r["id"] for r in cluster.http.get(listed).json()["remediations"]}  # earlier tests' on this node
    rem = twin_emulator.admin.raise_remediation(cluster.cluster_id, instance, mode=REBOOT_VM)
    seen: dict[str, Any] = {}

    def watch() -> None:  # the moment the API leaves PENDING_APPROVAL, who still runs on the node
        while "state" not in seen:
            state = remediation(cluster, rem)["state"]
            if state != "PENDING_APPROVAL":
                seen["still_running"] = ours_on(cluster, namespace, node)
                seen["state"] = state
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    with FaultProxy(twin_emulator.base_url) as proxy:
        proxy.add(
            replace(
                FAULTS[kind],
                path=f"/v1/compute/clusters/{cluster.cluster_id}/instances/{instance}/remediations",
            )
        )
        first = gate(cluster, "approve", rem["id"], "--timeout", "120", "--json", base_url=proxy.url)
        injected = sum(proxy.injected.values())
    assert injected >= 1, f"{kind}: the fault was never met"
    approved = remediation(cluster, rem)["state"] != "PENDING_APPROVAL"
    assert (first.returncode == 0) == approved, (kind, first.returncode, first.stderr)
    if first.returncode == 0:
        assert json.loads(first.stdout)["approved"] is True
    else:
        # Progress lines, then the failure on one line of its own, with the API's status, and no traceback.
        assert "Traceback" not in first.stderr, first.stderr
        assert "error: " in first.stderr.strip().splitlines()[-1], first.stderr
        assert cordoned(cluster, node), "a failed approval keeps the node it drained out of use"
        again = gate(cluster, "approve", rem["id"], "--timeout", "120")
        assert again.returncode == 0, again.stderr

    watcher.join(30)
    assert seen.get("state") is not None, "never approved"
    assert seen["still_running"] == [], f"approved while {seen['still_running']} still ran on {node}"
    now = [r["id"] for r in cluster.http.get(listed).json()["remediations"] if r["id"] not in earlier]
    assert now == [rem["id"]], "one remediation, one repair"
    # The reboot ends; the next pass lifts the gate's cordon: the shared cluster keeps its nodes.
    wait_for(
        lambda: remediation(cluster, rem)["state"] == "SUCCEEDED" or None, "the reboot to end", timeout=90
    )
    assert gate(cluster, "list").returncode == 0
    assert not cordoned(cluster, node)
