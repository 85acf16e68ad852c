"""The local runtime's plan of a pod: what a kubelet would run, with the one liberty of rewritten mount paths."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from together_clusters.components.args import FleetDispatchArgs, RemediationGateArgs
from together_clusters.components.checkpoint import contract
from together_clusters.components.manifests import fleet_dispatch
from together_clusters.components.manifests.remediation_gate import remediation_gate
from together_clusters.emulator.kubernetes import controller_images, kwok_config
from together_clusters.emulator.kubernetes.controller_images import SERVICE_ACCOUNT_MOUNT
from together_clusters.emulator.kubernetes.kwok_config import RUN, RUN_LOCAL
from together_clusters.emulator.kubernetes.local_pods import (
    Controller,
    Layout,
    PodNetwork,
    Unrunnable,
    expand,
    opted_in,
    plan,
    rewrite,
)
from together_clusters.platform import CONTROLLER_LABEL, PackageController

PYTHON = "/opt/emulator/bin/python"


class Cluster:
    """ConfigMaps, Secrets and claims as the API would return them."""

    def __init__(self) -> None:
        self.config_maps: dict[tuple[str, str], dict[str, str]] = {("ns", "settings"): {"lr": "0.1"}}
        self.secrets = {("ns", "creds"): {"token": base64.b64encode(b"s3cr3t").decode()}}
        self.claims: dict[tuple[str, str], str | None] = {("ns", "ckpt"): "pvc-1234", ("ns", "pending"): None}

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.config_maps.get((namespace, name))

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        return self.secrets.get((namespace, name))

    def claim_volume(self, namespace: str, claim: str) -> str | None:
        return self.claims.get((namespace, claim))

    def service_account_token(self, namespace: str, service_account: str, audience: str | None) -> str:
        return f"token-of-{namespace}/{service_account}"


def pod(container: dict[str, Any], volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "train-0-abcde",
            "namespace": "ns",
            "uid": "u-1",
            "labels": {"app": "train"},
            "annotations": {RUN: RUN_LOCAL, "batch.kubernetes.io/job-completion-index": "3"},
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "main", **container}],
            "volumes": volumes or [],
        },
    }


def planned(container: dict[str, Any], volumes: list[dict[str, Any]] | None = None, speed: float = 60):
    return plan(pod(container, volumes), Cluster(), Layout(Path("/twin")), PYTHON, lambda s: s / speed)


def test_only_annotated_pods_opt_in() -> None:
    assert opted_in(pod({}))
    assert not opted_in({"metadata": {"annotations": {RUN: "kwok"}}})
    assert not opted_in({"metadata": {}})


def test_references_expand_as_the_kubelet_expands_them() -> None:
    env = {"STEP": "12"}
    assert expand("--step=$(STEP) $(MISSING) $$(STEP) $$", env) == "--step=12 $(MISSING) $(STEP) $"


def test_a_mount_path_and_what_is_under_it_are_rewritten_and_nothing_else() -> None:
    mounts = {"/ckpt": Path("/host/a"), "/ckpt/deep": Path("/host/b"), "/": Path("/host/root")}
    assert rewrite("/ckpt", mounts) == "/host/a"
    assert rewrite("/ckpt/run-1/x", mounts) == "/host/a/run-1/x"
    assert rewrite("/ckpt/deep/x", mounts) == "/host/b/x"
    assert rewrite("/ckptx", mounts) == "/host/root/ckptx"
    assert rewrite("relative/ckpt", {"/ckpt": Path("/host/a")}) == "relative/ckpt"


def test_env_in_order_from_values_fields_configmaps_and_secrets() -> None:
    result = planned(
        {
            "command": ["python", "-m", "train"],
            "args": ["--index=$(INDEX)"],
            "env": [
                {"name": "INDEX", "valueFrom": {"fieldRef": {"fieldPath": _index_path()}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "lr"}}},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "GONE", "valueFrom": {"secretKeyRef": {"name": "x", "key": "y", "optional": True}}},
                {"name": "TAG", "value": "$(POD)-$(INDEX)"},
            ],
        }
    )
    assert result.argv == (PYTHON, "-m", "train", "--index=3")
    assert {k: result.env[k] for k in ("INDEX", "POD", "APP", "LR", "TOKEN", "TAG")} == {
        "INDEX": "3",
        "POD": "train-0-abcde",
        "APP": "train",
        "LR": "0.1",
        "TOKEN": "s3cr3t",
        "TAG": "train-0-abcde-3",
    }
    assert "GONE" not in result.env
    assert result.env["HOSTNAME"] == "train-0-abcde"


def _index_path() -> str:
    return "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def test_env_from_configmaps_and_secrets_with_a_prefix() -> None:
    result = planned(
        {
            "command": ["true"],
            "envFrom": [
                {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
                {"secretRef": {"name": "creds"}},
            ],
        }
    )
    assert (result.env["CFG_lr"], result.env["token"]) == ("0.1", "s3cr3t")


def test_a_claim_is_its_volumes_folder_shared_by_every_pod_and_mount_paths_are_rewritten() -> None:
    volumes = [
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}},
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    result = planned(
        {
            "command": ["python", "/app/train.py", "/checkpoints/run"],
            "workingDir": "/scratch",
            "env": [{"name": "CHECKPOINT_DIR", "value": "/checkpoints/job/run-1"}],
            "volumeMounts": [
                {"name": "checkpoints", "mountPath": "/checkpoints"},
                {"name": "settings", "mountPath": "/etc/settings"},
                {"name": "scratch", "mountPath": "/scratch"},
            ],
        },
        volumes,
    )
    pod_folder = Path("/twin/pods/ns_train-0-abcde_u-1")
    assert result.env["CHECKPOINT_DIR"] == "/twin/volumes/pvc-1234/job/run-1"
    assert result.argv == (PYTHON, "/app/train.py", "/twin/volumes/pvc-1234/run")
    assert result.cwd == pod_folder / "volumes/scratch"
    assert result.files == {pod_folder / "volumes/settings/lr": b"0.1"}
    assert Path("/twin/volumes/pvc-1234") in result.folders


def test_the_checkpoint_budgets_follow_the_clock_speed() -> None:
    result = planned(
        {
            "command": ["true"],
            "env": [
                {"name": contract.ENV_SAVE_BUDGET, "value": "270"},
                {"name": contract.ENV_DRAIN_BUDGET, "value": "108"},
                {"name": "OTHER_SECONDS", "value": "270"},
            ],
        }
    )
    assert result.env[contract.ENV_SAVE_BUDGET] == "4.5"
    assert result.env[contract.ENV_DRAIN_BUDGET] == "1.8"
    assert result.env["OTHER_SECONDS"] == "270"


@pytest.mark.parametrize(
    ("container", "volumes", "reason", "names"),
    [
        (
            {
                "command": ["true"],
                "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}],
            },
            [],
            "CreateContainerConfigError",
            "nope",
        ),
        (
            {"command": ["true"]},
            [{"name": "c", "persistentVolumeClaim": {"claimName": "pending"}}],
            "ContainerCreating",
            "pending",
        ),
        ({"image": "trainer:1"}, [], "CreateContainerConfigError", "no command"),
        ({"command": ["true"]}, [{"name": "v", "csi": {"driver": "x"}}], "ContainerCreating", "csi"),
    ],
)
def test_a_pod_that_cannot_start_says_why(container, volumes, reason, names) -> None:
    with pytest.raises(Unrunnable) as raised:
        planned(container, volumes)
    assert raised.value.reason == reason
    assert names in raised.value.message


def test_the_descheduler_chart_pod_runs_as_its_binary_with_its_policy_file_and_the_pods_own_address() -> None:
    # The container as the descheduler's chart (v0.36.0, kind: Deployment) renders it.
    container = {
        "image": "registry.k8s.io/descheduler/descheduler:v0.36.0",
        "command": ["/bin/descheduler"],
        "args": ["--policy-config-file=/policy-dir/policy.yaml", "--descheduling-interval=60s", "--v=3"],
        "ports": [{"containerPort": 10258, "protocol": "TCP"}],
        "volumeMounts": [
            {"mountPath": "/policy-dir", "name": "policy-volume"},
            {"mountPath": SERVICE_ACCOUNT_MOUNT, "name": "kube-api-access", "readOnly": True},
        ],
    }
    volumes = [
        {"name": "policy-volume", "configMap": {"name": "descheduler"}},
        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
    ]
    lookups = Cluster()
    lookups.config_maps[("ns", "descheduler")] = {"policy.yaml": "kind: DeschedulerPolicy\n"}
    binary = Path("/bin-dir/descheduler")
    controller = Controller(controller_images.DESCHEDULER, binary, "https://127.0.0.1:6443")
    result = plan(
        pod(container, volumes),
        lookups,
        Layout(Path("/twin")),
        PYTHON,
        lambda s: s,
        network=PodNetwork(pod_ip="10.246.0.7", host_ip="127.70.0.7"),
        controller=controller,
    )
    policy = Path("/twin/pods/ns_train-0-abcde_u-1/volumes/policy-volume/policy.yaml")
    kubeconfig = Path("/twin/pods/ns_train-0-abcde_u-1/kubeconfig")
    assert result.argv == (
        str(binary),
        f"--policy-config-file={policy}",
        "--descheduling-interval=60s",
        "--v=3",
        f"--client-connection-kubeconfig={kubeconfig}",
        "--bind-address=127.70.0.7",
    )
    assert result.files[policy] == b"kind: DeschedulerPolicy\n"
    assert b"tokenFile" in result.files[kubeconfig]


def _template_pod(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The pod a Deployment's controller makes of its template, as the twin's runtime reads it."""
    template = deployment["spec"]["template"]
    return {"metadata": {**template["metadata"], "name": "p", "namespace": "ns"}, "spec": template["spec"]}


def _deployment(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == "Deployment")


def _simulated_by_kwok(found: Mapping[str, Any]) -> bool:
    """Whether kwok's pod stages would simulate the pod: every ``DoesNotExist`` selector of the first stage on
    its labels and annotations holds (the other stages share the same ones)."""
    stage = kwok_config.pod_stages()[0]
    meta = found["metadata"]
    for expression in stage["spec"]["selector"]["matchExpressions"]:
        if expression["operator"] != "DoesNotExist":
            continue
        where, _, rest = expression["key"].removeprefix(".metadata.").partition("[")
        if where in ("labels", "annotations") and rest.strip('"]') in (meta.get(where) or {}):
            return False
    return True


def test_the_packages_own_controllers_run_locally_without_any_marker_of_the_twins() -> None:
    """A stack written as the docs show (no ``twin.together.ai/run`` anywhere) has its fleet dispatcher and its
    remediation gate run by the twin as local processes, as the real cluster runs them; a user's pod still runs
    locally only when it asks to, and kwok simulates exactly the pods the runtime leaves."""
    dispatcher = _template_pod(
        _deployment(
            fleet_dispatch.manager_dispatch_objects(
                "fleet", "default", "kueue-system", [("east", "fleet-east")], FleetDispatchArgs()
            )
        )
    )
    gate = _template_pod(
        _deployment(
            remediation_gate(
                "gate",
                RemediationGateArgs(
                    cluster_id="c-1", modes=["reboot-vm"], image="gate:1", api_key="tgp_v1_k"
                ),
            )
        )
    )
    user = {"metadata": {"name": "u", "labels": {"app": "train"}, "annotations": {"note": "x"}}}
    asked = {"metadata": {"name": "a", "annotations": {RUN: RUN_LOCAL}}}
    for package_pod in (dispatcher, gate):
        assert RUN not in (package_pod["metadata"].get("annotations") or {})
        assert opted_in(package_pod)
        assert not _simulated_by_kwok(package_pod)
    assert dispatcher["metadata"]["labels"][CONTROLLER_LABEL] == PackageController.FLEET_DISPATCHER
    assert gate["metadata"]["labels"][CONTROLLER_LABEL] == PackageController.REMEDIATION_GATE
    assert opted_in(asked) and not _simulated_by_kwok(asked)
    assert not opted_in(user) and _simulated_by_kwok(user)
