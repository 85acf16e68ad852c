"""The RemediationGate's objects as plain data: opt-in modes, one way to give the API key, a standard node,
the least RBAC (the real API server's RBAC is the oracle in tests/twin/test_engine_remediation_gate.py)."""

from __future__ import annotations

from typing import Any

import pytest

from together_clusters.components.args import RemediationGateArgs
from together_clusters.components.manifests.remediation_gate import API_KEY_KEY, remediation_gate
from together_clusters.errors import ArgsError
from together_clusters.platform import COMPUTE_CLASS_LABEL, PREEMPTIBLE


def args(**changes: Any) -> RemediationGateArgs:
    fields: dict[str, Any] = {
        "cluster_id": "c-1",
        "modes": ["reboot-vm"],
        "image": "registry.example/gate:0.1.0",
        "api_key": "tgp_v1_secret",
    }
    return RemediationGateArgs(**{**fields, **changes})


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def test_the_gate_runs_the_gate_command_with_its_modes_on_a_standard_node_as_its_own_service_account() -> (
    None
):
    objects = by_kind(remediation_gate("gate", args(modes=["reboot-vm", "vm-only"])))
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert objects["Deployment"]["spec"]["strategy"] == {"type": "Recreate"}
    assert pod["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"] == "gate"
    (container,) = pod["containers"]
    assert container["command"][:5] == ["python", "-m", "together_clusters.cli", "remediations", "gate"]
    assert container["command"][container["command"].index("--modes") + 1] == "reboot-vm,vm-only"
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {"matchExpressions": [{"key": COMPUTE_CLASS_LABEL, "operator": "NotIn", "values": [PREEMPTIBLE]}]}
    ]
    assert "tolerations" not in pod


def test_the_api_key_reaches_the_pod_only_from_its_secret() -> None:
    objects = by_kind(remediation_gate("gate", args()))
    assert objects["Secret"]["stringData"] == {API_KEY_KEY: "tgp_v1_secret"}
    env = {e["name"]: e for e in objects["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TOGETHER_API_KEY"] == {
        "name": "TOGETHER_API_KEY",
        "valueFrom": {"secretKeyRef": {"name": "gate-api-key", "key": API_KEY_KEY}},
    }
    assert "tgp_v1_secret" not in str(objects["Deployment"])
    own = by_kind(remediation_gate("gate", args(api_key=None, api_key_secret="mine", create_namespace=False)))
    assert "Secret" not in own and "Namespace" not in own
    env = own["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "mine", "key": API_KEY_KEY} in [e.get("valueFrom", {}).get("secretKeyRef") for e in env]


def test_the_gate_is_granted_cordon_evict_and_read_and_nothing_else() -> None:
    role = by_kind(remediation_gate("gate", args()))["ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    writes = {g for g in granted if g[2] not in ("get", "list", "watch")}
    assert writes == {("", "nodes", "patch"), ("", "pods/eviction", "create")}
    assert not any(resource == "secrets" for _, resource, _ in granted)
    assert not any("*" in part for g in granted for part in g)


@pytest.mark.parametrize(
    ("changes", "field", "fix"),
    [
        ({"modes": []}, "modes", "modes=['reboot-vm']"),
        ({"modes": "reboot-vm"}, "modes", "modes=['reboot-vm']"),
        ({"modes": ["reboot"]}, "modes", "vm-only"),
        ({"api_key": None}, "api_key", "api_key_secret="),
        ({"api_key_secret": "mine"}, "api_key", "exactly one"),
        ({"api_key": None, "api_key_secret": "mine"}, "api_key_secret", "create_namespace=False"),
        ({"image": " "}, "image", "together-gpu-clusters[remediations]"),
        ({"interval_seconds": 0}, "interval_seconds", "1"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field_and_the_fix(
    changes: dict[str, Any], field: str, fix: str
) -> None:
    with pytest.raises(ArgsError) as refused:
        remediation_gate("gate", args(**changes))
    message = str(refused.value)
    assert "RemediationGate 'gate'" in message
    assert field in message and fix in message
