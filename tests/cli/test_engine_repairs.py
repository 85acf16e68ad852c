"""Node repairs (remediations) as ``status`` and ``drift`` see them: real engine, real emulator, one deployed
quickstart stack (see conftest.py: one standard node, one preemptible).

``status`` lists a repair the platform's health checks raised, waiting for approval, on the Node it repairs,
and once rejected among those ended in the window; ``drift`` finds nothing after a repair that replaced a VM,
and after one that evicted a node without replacement reports the lower count as drift (an update brings the
node back), never as a change of the code.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.cli.conftest import Deployed
from together_clusters.platform import compute_class_of_node, kubernetes_node_name
from together_clusters.provider.mapping import marked_compute_class

pytestmark = pytest.mark.engine


def node_of_class(deployed: Deployed, compute_class: str) -> Any:
    """The cluster's live worker node of ``compute_class`` (its marking, else what its name says)."""
    cluster = deployed.cluster()
    return next(
        n
        for n in cluster.gpu_worker_nodes
        if (marked_compute_class(n) or compute_class_of_node(n.node_id or "")) == compute_class
    )


def wait_for_state(deployed: Deployed, instance_id: str, remediation_id: str, state: str) -> Any:
    deadline = time.monotonic() + 30
    with deployed.api() as client:
        while True:
            found = client.get_remediation(deployed.cluster_id, instance_id, remediation_id)
            if found.state == state:
                return found
            assert time.monotonic() < deadline, f"remediation {remediation_id} stays {found.state}"
            time.sleep(0.2)


def repaired(deployed: Deployed, compute_class: str, mode: str) -> Any:
    """A node of ``compute_class`` after an automated repair in ``mode``, approved, has succeeded (the node
    as it was before)."""
    node = node_of_class(deployed, compute_class)
    raised = deployed.emu.admin.raise_remediation(deployed.cluster_id, node.instance_id, mode=mode)
    with deployed.api() as client:
        client.approve_remediation(deployed.cluster_id, node.instance_id, raised["id"])
    wait_for_state(deployed, node.instance_id, raised["id"], "SUCCEEDED")
    return node


def test_status_shows_a_repair_waiting_for_approval_on_its_node_and_once_rejected_as_ended(
    deployed: Deployed,
) -> None:
    deployed.restore()
    node = node_of_class(deployed, "standard")
    raised = deployed.emu.admin.raise_remediation(deployed.cluster_id, node.instance_id)
    try:
        as_json = deployed.cli("status", "--json")
        text = deployed.cli("status")
    finally:
        with deployed.api() as client:
            client.reject_remediation(deployed.cluster_id, node.instance_id, raised["id"], "not now")
    after = deployed.cli("status", "--json")

    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    [cluster] = json.loads(as_json.stdout)["clusters"]
    assert cluster["repairs"]["unread"] is None
    [row] = [r for r in cluster["repairs"]["active"] if r["remediation_id"] == raised["id"]]
    assert row["node"] == kubernetes_node_name(node.host_name)
    assert (row["instance_id"], row["mode"], row["state"], row["trigger"]) == (
        node.instance_id,
        "host-aware",
        "PENDING_APPROVAL",
        "AUTOMATED",
    )
    assert row["since"][:19] == raised["create_time"][:19]
    assert row["workloads"] == []  # the emulator without --kubernetes: no pods to tell of

    assert text.returncode == 0, text.stderr
    assert "quickstart: node repairs (remediations) under way:" in text.stdout, text.stdout
    [line] = [line for line in text.stdout.splitlines() if raised["id"] in line]
    assert line.split()[:5] == [
        kubernetes_node_name(node.host_name),
        raised["id"],
        "host-aware",
        "PENDING_APPROVAL",
        "AUTOMATED",
    ]

    assert after.returncode == 0, after.stderr
    [cluster] = json.loads(after.stdout)["clusters"]
    assert raised["id"] not in [r["remediation_id"] for r in cluster["repairs"]["active"]]
    [ended] = [r for r in cluster["repairs"]["recently_ended"] if r["remediation_id"] == raised["id"]]
    assert ended["state"] == "CANCELLED" and ended["ended_at"]


def test_a_vm_replaced_by_a_repair_is_no_drift(deployed: Deployed) -> None:
    deployed.restore()
    node = repaired(deployed, "standard", "REMEDIATION_MODE_VM_ONLY")
    replaced = deployed.wait_for(
        "the replacement node",
        lambda c: (
            len(c.gpu_worker_nodes) == 2
            and node.instance_id not in {n.instance_id for n in c.gpu_worker_nodes}
        ),
    )
    assert replaced.num_gpus == deployed.cluster().num_gpus

    proc = deployed.cli("drift", "--json")

    assert proc.returncode == 0, proc.stdout + proc.stderr
    [stack] = json.loads(proc.stdout)["stacks"]
    assert stack["in_sync"] is True and stack["drift"] == [] and stack["pending"] == []


def test_an_eviction_without_replacement_is_drift_of_the_count_never_a_change_of_the_code(
    deployed: Deployed,
) -> None:
    deployed.restore()
    repaired(deployed, "preemptible", "REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT")
    deployed.wait_for("the evicted node gone", lambda c: c.desired_preemptible_gpus == 0)

    proc = deployed.cli("drift", "--json")
    deployed.restore()  # an update asking for the old count brings a node back

    assert proc.returncode == 2, proc.stdout + proc.stderr
    [stack] = json.loads(proc.stdout)["stacks"]
    assert stack["pending"] == []
    assert [(d["field"], d["code"], d["live"], d["deployed"]) for d in stack["drift"]] == [
        ("num_preemptible_gpus", 8, 0, 8)
    ]
