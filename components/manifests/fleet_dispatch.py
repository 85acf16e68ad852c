"""The fleet dispatcher's objects (pure): on the manager, the Deployment that runs
:mod:`together_clusters.components.fleet_dispatch`, its code and configuration in a ConfigMap, and the least it
is granted; on each worker, a read-only ServiceAccount whose token the dispatcher reads the worker's room with.

Kueue is told the fleet is dispatched externally (:data:`DISPATCHER_NAME` as ``multiKueue.dispatcherName``, see
:func:`~.fleet_queue.multikueue_settings`): MultiKueue then copies a workload only to the workers the dispatcher
nominates.

What the dispatcher may do, and so all it is granted:

- on the manager, in the fleet's namespace (a Role): ``get`` and ``list`` Workloads, ``patch`` their status
  (``status.nominatedClusterNames``); cluster-wide, ``get`` of the fleet's own ``MultiKueueCluster`` objects
  by name (whether MultiKueue reaches each worker). No Secrets: the workers' read-only kubeconfigs reach its
  pod as a Secret volume, through the kubelet.
- on each worker (a ClusterRole: nodes and pods are cluster-wide): ``list`` Nodes and Pods, to count the free
  GPUs of each node. Nothing else, no write at all.

Its code (the dispatcher's modules and :mod:`together_clusters.platform`, standard library only) travels in the
ConfigMap, so any Python image runs it; a change of code or configuration changes the pod template's
:data:`CONFIG_HASH_ANNOTATION` and so rolls the pod.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from together_clusters.platform import CONTROLLER_LABEL, PackageController
from together_clusters.platform.charts import KUEUE_API_VERSION

from ..args import FleetDispatchArgs
from ..placement import standard_placement
from ..violations import Violation, argument_violation
from .checks import at_least
from .common import Manifest, env_entry, token_service_account

DISPATCHER_NAME = "together.ai/fleet-dispatcher"
"""The manager's ``multiKueue.dispatcherName``: not one of Kueue's two, so MultiKueue's External mode."""
COMPONENT = "fleet-dispatcher"
CONFIG_HASH_ANNOTATION = "together.ai/config-hash"
"""On the dispatcher's pod template: a digest of its ConfigMap, so a new code or configuration rolls the pod."""
MODULE = "together_clusters.components.fleet_dispatch"
CODE_DIR = "/opt/fleet-dispatch"
CONFIG_DIR = "/etc/fleet-dispatch"
WORKERS_DIR = "/etc/fleet-dispatch-workers"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
CONFIG_KEY = "config.json"
NOBODY = 65534

SHIPPED_MODULES = (
    "together_clusters.platform",
    "together_clusters.platform.objects",
    "together_clusters.errors",
    "together_clusters.components.checkpoint.contract",
    "together_clusters.components.checkpoint.errors",
    MODULE,
    f"{MODULE}.__main__",
    f"{MODULE}.plan",
    f"{MODULE}.kube",
    f"{MODULE}.nomination",
)
"""The modules the dispatcher runs, as they are in this package (the platform's facts, with its readings of
Kubernetes objects that the command line shares, import the checkpoint contract, the error tree the runtime's
errors); every other package on their path is an empty one (:data:`STUB_PACKAGES`)."""
STUB_PACKAGES = (
    "together_clusters",
    "together_clusters.components",
    "together_clusters.components.checkpoint",
)
_STUB = '"""What the fleet dispatcher needs of this package, from the FleetQueue\'s ConfigMap."""\n'

MANAGER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
)
"""The dispatcher's Role in the fleet's namespace on the manager."""
WORKER_READER_RULES: tuple[Mapping[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]},
)
"""The dispatcher's ClusterRole on each worker: read-only (its pods watched, to act on a preemption at once; the
Workloads read for a copy MultiKueue left deactivated, :func:`..fleet_dispatch.plan.left_deactivated`, and
watched for the changes of a moved workload's copy that MultiKueue sees a second late,
:func:`..fleet_dispatch.plan.prompt_for`)."""


def dispatch_violations(dispatch: FleetDispatchArgs) -> list[Violation]:
    """Every problem of a FleetQueue's ``dispatch``."""
    found = at_least("dispatch.interval_seconds", dispatch.interval_seconds, 1)
    found += at_least("dispatch.patience_seconds", dispatch.patience_seconds, 0)
    if not dispatch.image.strip():
        found.append(
            argument_violation(
                "fleet-dispatch-image",
                "dispatch.image",
                dispatch.image,
                "dispatch.image is empty",
                "give an image with Python 3.11 or later, e.g. FleetDispatchArgs(image='python:3.12-slim')",
            )
        )
    return found


def dispatcher_name(queue: str) -> str:
    """The dispatcher's Deployment, ServiceAccount, roles and ConfigMap on the manager, and its read-only
    ServiceAccount (and token Secret) on each worker."""
    return f"{queue}-dispatcher"


def workers_secret_name(queue: str) -> str:
    """The Secret on the manager holding one read-only kubeconfig per worker (key: the worker's name)."""
    return f"{queue}-dispatcher-workers"


def workers_secret(queue: str, namespace: str) -> Manifest:
    """The Secret on the manager of the workers' read-only kubeconfigs (:func:`workers_secret_name`; its
    ``stringData``, one key per worker, added by the shell as a Pulumi secret)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": workers_secret_name(queue),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": queue, "app.kubernetes.io/managed-by": "pulumi"},
        },
    }


def _labels(queue: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": queue,
        "app.kubernetes.io/component": COMPONENT,
        "app.kubernetes.io/managed-by": "pulumi",
    }


def _source_of(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the fleet dispatcher's module {module} is not installed with this package")
    return Path(spec.origin).read_text()


def shipped_files() -> dict[str, str]:
    """The dispatcher's code as files under :data:`CODE_DIR`: relative path -> text."""
    files = {f"{package.replace('.', '/')}/__init__.py": _STUB for package in STUB_PACKAGES}
    for module in SHIPPED_MODULES:
        spec = importlib.util.find_spec(module)
        is_package = spec is not None and spec.submodule_search_locations is not None
        path = module.replace(".", "/") + ("/__init__.py" if is_package else ".py")
        files[path] = _source_of(module)
    return files


def _key_of(path: str) -> str:
    """A ConfigMap key for a file path (keys may not hold '/')."""
    return path.replace("/", ".")


def dispatcher_config(
    queue: str, namespace: str, workers: Sequence[tuple[str, str]], dispatch: FleetDispatchArgs
) -> dict[str, Any]:
    """The dispatcher's ``config.json``: ``workers`` as (name in the fleet, MultiKueueCluster), in order."""
    return {
        "namespace": namespace,
        "admission_check": queue,
        "api_version": KUEUE_API_VERSION,
        "workers": [{"name": name, "cluster": cluster} for name, cluster in workers],
        "interval_seconds": dispatch.interval_seconds,
        "patience_seconds": dispatch.patience_seconds,
    }


def manager_dispatch_objects(
    queue: str,
    namespace: str,
    dispatcher_namespace: str,
    workers: Sequence[tuple[str, str]],
    dispatch: FleetDispatchArgs,
) -> list[Manifest]:
    """On the manager: the dispatcher's ServiceAccount, Role and binding (in ``namespace``, the fleet's),
    ClusterRole and binding (its MultiKueueClusters), ConfigMap and Deployment (in ``dispatcher_namespace``).
    The workers' kubeconfigs' Secret (:func:`workers_secret_name`) is the shell's, its data a Pulumi secret."""
    name = dispatcher_name(queue)
    labels = _labels(queue)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": dispatcher_namespace}]
    files = shipped_files()
    data = {_key_of(path): text for path, text in files.items()}
    data[CONFIG_KEY] = json.dumps(dispatcher_config(queue, namespace, workers, dispatch), indent=2)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    command = [
        "python",
        "-m",
        MODULE,
        "--config",
        f"{CONFIG_DIR}/{CONFIG_KEY}",
        "--workers-dir",
        WORKERS_DIR,
        "--service-account-dir",
        SERVICE_ACCOUNT_DIR,
    ]
    pod_labels = {"app.kubernetes.io/name": queue, "app.kubernetes.io/component": COMPONENT}
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": dispatcher_namespace, "labels": dict(labels)},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "rules": [dict(rule) for rule in MANAGER_RULES],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": dict(labels)},
            "rules": [
                {
                    "apiGroups": ["kueue.x-k8s.io"],
                    "resources": ["multikueueclusters"],
                    "resourceNames": [cluster for _, cluster in workers],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subject,
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": dispatcher_namespace, "labels": dict(labels)},
            "data": data,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": dispatcher_namespace, "labels": dict(labels)},
            "spec": {
                "replicas": 1,
                # Never two dispatchers at once: the old pod goes before the new one starts.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": dict(pod_labels)},
                "template": {
                    "metadata": {
                        "labels": {
                            **labels,
                            **pod_labels,
                            CONTROLLER_LABEL: PackageController.FLEET_DISPATCHER.value,
                        },
                        "annotations": {**dict(dispatch.pod_annotations), CONFIG_HASH_ANNOTATION: digest},
                    },
                    "spec": {
                        "serviceAccountName": name,
                        **standard_placement().pod_spec_fields(),
                        "securityContext": {"runAsNonRoot": True, "runAsUser": NOBODY, "fsGroup": NOBODY},
                        "containers": [
                            {
                                "name": "dispatcher",
                                "image": dispatch.image,
                                "command": command,
                                "env": [
                                    env_entry("PYTHONPATH", CODE_DIR),
                                    env_entry("PYTHONDONTWRITEBYTECODE", "1"),
                                    env_entry("PYTHONUNBUFFERED", "1"),
                                ],
                                "resources": {
                                    "requests": {"cpu": "20m", "memory": "64Mi"},
                                    "limits": {"memory": "256Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "code", "mountPath": CODE_DIR, "readOnly": True},
                                    {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                                    {"name": "workers", "mountPath": WORKERS_DIR, "readOnly": True},
                                ],
                            }
                        ],
                        "volumes": [
                            {
                                "name": "code",
                                "configMap": {
                                    "name": name,
                                    "items": [{"key": _key_of(path), "path": path} for path in files],
                                },
                            },
                            {
                                "name": "config",
                                "configMap": {
                                    "name": name,
                                    "items": [{"key": CONFIG_KEY, "path": CONFIG_KEY}],
                                },
                            },
                            {
                                "name": "workers",
                                "secret": {"secretName": workers_secret_name(queue), "defaultMode": 0o440},
                            },
                        ],
                    },
                },
            },
        },
    ]


def worker_reader_objects(queue: str, namespace: str) -> list[Manifest]:
    """On a worker: the dispatcher's read-only ServiceAccount (in ``namespace``, Kueue's), its ClusterRole and
    binding, and the Secret its token is kept in (filled by the worker's API server)."""
    return token_service_account(dispatcher_name(queue), namespace, _labels(queue), WORKER_READER_RULES)
