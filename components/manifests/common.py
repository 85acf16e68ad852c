"""Helpers every builder shares: labels, metadata, environment entries, the names the component reserves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from together_clusters.platform import CRITICAL_LABEL

from ..args import ContainerSpec
from ..checkpoint import contract
from ..placement import Placement

Manifest = dict[str, Any]

MAIN_CONTAINER = "main"
CHECKPOINT_VOLUME = "checkpoints"
TRIALS_VOLUME = "trials"
TRIALS_MOUNT_PATH = "/etc/sweep"
TRIALS_FILE = "trials.json"
RUN_KEYS_FILE = "checkpoint-keys.json"
RUN_KEY_DIGEST_CHARS = 12
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"

RESERVED_ENV = frozenset(
    value for key, value in vars(contract).items() if key.startswith("ENV_") and isinstance(value, str)
)


def labels_for(name: str, component: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Recommended labels of one part of a workload; the first two also select its pods."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "pulumi",
        **(extra or {}),
    }


def selector_for(name: str, component: str) -> dict[str, str]:
    """The labels that select the pods of one part of a workload."""
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component}


def pod_labels_of(
    labels: Mapping[str, str], critical: bool, placement: Placement | None = None
) -> dict[str, str]:
    """A pod's labels: its part's, the class its placement asked for, and the critical label when it must stay
    off preemptible nodes."""
    own = {**labels, **(placement.pod_labels() if placement is not None else {})}
    return {**own, CRITICAL_LABEL: "true"} if critical else own


def pod_annotations(spec: ContainerSpec, own: Mapping[str, str] | None = None) -> dict[str, str]:
    """The annotations of the pod running ``spec``: the user's, then the component's ``own`` (checked apart)."""
    return {**spec.pod_annotations, **(own or {})}


def template_metadata_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Manifest:
    """The metadata of a pod template (annotations only when there are some)."""
    metadata: Manifest = {"labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def env_entry(name: str, value: str) -> Manifest:
    """A container environment entry with a plain value."""
    return {"name": name, "value": value}


def secret_env_entry(name: str, secret: str, key: str, optional: bool = False) -> Manifest:
    """A container environment entry read from a key of a Secret (the value never enters the state)."""
    ref: Manifest = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def index_env_entry(name: str) -> Manifest:
    """A container environment entry holding the pod's completion index in its Indexed Job."""
    path = f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def label_env_entry(name: str, label: str) -> Manifest:
    """A container environment entry holding the value of one of the pod's labels (empty if it has none)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


def object_metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> Manifest:
    """An object's metadata. Without a namespace, pulumi-kubernetes uses its provider's (``default`` if it
    has none)."""
    metadata: Manifest = {"name": name, "labels": dict(labels)}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


SERVICE_ACCOUNT_TOKEN_TYPE = "kubernetes.io/service-account-token"
"""A Secret the API server fills with a ServiceAccount's token (which does not expire) and the cluster's CA."""


def token_service_account(
    name: str, namespace: str, labels: Mapping[str, str], rules: Sequence[Mapping[str, Any]]
) -> list[Manifest]:
    """A ServiceAccount another cluster acts as: the account, a ClusterRole of ``rules`` and its binding, and
    the Secret its token is kept in (filled by the API server; create it after the account, which the API
    server requires)."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_metadata(name, namespace, labels)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": dict(labels)},
            "rules": [dict(rule) for rule in rules],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": SERVICE_ACCOUNT_TOKEN_TYPE,
            "metadata": {
                **object_metadata(name, namespace, labels),
                "annotations": {"kubernetes.io/service-account.name": name},
            },
        },
    ]
