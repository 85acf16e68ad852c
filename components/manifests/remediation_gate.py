"""The RemediationGate's objects (pure): a Deployment that runs ``together-clusters remediations gate`` on a
standard node, the ServiceAccount it runs as, the least the gate needs granted to it, and the API key's Secret.

What the gate does with the Kubernetes API, and so all it is granted (a ClusterRole: Nodes and the pods on
them are cluster-wide):

- **read** Nodes and pods (the node's pods, each workload's pods elsewhere), and the owners it follows from
  a pod to its workload: Jobs, ReplicaSets, JobSets (``get``);
- **cordon**: ``patch`` on Nodes (``spec.unschedulable`` and its annotation recording the drain's plan);
- **evict**: ``create`` on ``pods/eviction`` (the Eviction API, so PodDisruptionBudgets hold).

No ``delete`` of anything, no ``update``, no Secrets (the API key reaches the pod as an environment variable
from its Secret, through the kubelet), no write to any workload. The compute API key is the only other
credential, kept in a Secret (from a Pulumi secret: never in the state in plain text).
"""

from __future__ import annotations

from typing import Any

from together_clusters.platform import CONTROLLER_LABEL, JOBSET_API, PackageController

from ..args import REMEDIATION_GATE_MODES, RemediationGateArgs
from ..placement import standard_placement
from ..violations import Violation, argument_violation
from .checks import at_least, refuse_invalid
from .common import Manifest, env_entry, labels_for, object_metadata, secret_env_entry, selector_for

API_KEY_KEY = "api-key"
"""The key of the API key in the gate's Secret (or in the user's ``api_key_secret``)."""
COMPONENT = "remediation-gate"
GATE_COMMAND = ("python", "-m", "together_clusters.cli", "remediations", "gate")
RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
    {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get"]},
    {"apiGroups": [JOBSET_API.group], "resources": [JOBSET_API.plural], "verbs": ["get"]},
]
"""Everything the gate is granted (see the module docstring)."""


def argument_violations(args: RemediationGateArgs) -> list[Violation]:
    """Every problem of a RemediationGate's arguments (``cluster_id`` and ``api_key`` may be outputs)."""
    found: list[Violation] = []
    modes = list(args.modes)
    if isinstance(args.modes, str) or not modes:
        found.append(
            argument_violation(
                "gate-modes",
                "modes",
                args.modes,
                f"modes={args.modes!r}: the gate approves only the modes listed (opt-in), and none is",
                f"list the modes it may approve, e.g. modes=['reboot-vm'] (any of {', '.join(REMEDIATION_GATE_MODES)})",
            )
        )
    else:
        for mode in modes:
            if mode not in REMEDIATION_GATE_MODES:
                found.append(
                    argument_violation(
                        "gate-modes",
                        "modes",
                        mode,
                        f"modes has {mode!r}, not a remediation mode",
                        f"use any of {', '.join(REMEDIATION_GATE_MODES)}",
                    )
                )
    if (args.api_key is None) == (args.api_key_secret is None):
        found.append(
            argument_violation(
                "gate-api-key",
                "api_key",
                "both" if args.api_key is not None else None,
                "the gate needs the API key from exactly one of api_key and api_key_secret",
                "give api_key=config.require_secret('apiKey') (kept in a Secret of the component's), or "
                f"api_key_secret='NAME' (an existing Secret in the namespace, key {API_KEY_KEY!r})",
            )
        )
    if args.api_key_secret is not None and args.create_namespace:
        found.append(
            argument_violation(
                "gate-api-key",
                "api_key_secret",
                args.api_key_secret,
                f"api_key_secret={args.api_key_secret!r} is read from namespace {args.namespace!r}, which this "
                "component creates (so it cannot hold the Secret yet)",
                "set create_namespace=False (the namespace and the Secret exist), or give api_key",
            )
        )
    if not args.image.strip():
        found.append(
            argument_violation(
                "gate-image",
                "image",
                args.image,
                "image is empty",
                "give an image with together-gpu-clusters[remediations] installed at this package's version",
            )
        )
    found += at_least("interval_seconds", args.interval_seconds, 1)
    found += at_least("drain_timeout_seconds", args.drain_timeout_seconds, 1)
    return found


def remediation_gate(name: str, args: RemediationGateArgs) -> list[Manifest]:
    """The gate's objects: its Namespace (unless it exists), ServiceAccount, ClusterRole and binding, the API
    key's Secret (unless the user's), and the Deployment."""
    refuse_invalid(f"RemediationGate {name!r}", argument_violations(args))
    labels = labels_for(name, COMPONENT)
    namespace = args.namespace
    objects: list[Manifest] = []
    if args.create_namespace:
        objects.append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}
        )
    objects.append(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_metadata(name, namespace, labels)}
    )
    role = f"{namespace}-{name}"
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": dict(labels)},
            "rules": [dict(rule) for rule in RULES],
        }
    )
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
    )
    secret = args.api_key_secret or f"{name}-api-key"
    if args.api_key_secret is None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": object_metadata(secret, namespace, labels),
                "type": "Opaque",
                "stringData": {API_KEY_KEY: args.api_key},
            }
        )
    env = [
        env_entry("TOGETHER_CLUSTER_ID", args.cluster_id),
        secret_env_entry("TOGETHER_API_KEY", secret, API_KEY_KEY),
        env_entry("PYTHONUNBUFFERED", "1"),
    ]
    if args.base_url is not None:
        env.append(env_entry("TOGETHER_BASE_URL", args.base_url))
    command = [
        *GATE_COMMAND,
        "--modes",
        ",".join(args.modes),
        "--interval",
        str(args.interval_seconds),
        "--timeout",
        str(args.drain_timeout_seconds),
    ]
    template_metadata: Manifest = {
        "labels": selector_for(name, COMPONENT)
        | labels
        | {CONTROLLER_LABEL: PackageController.REMEDIATION_GATE.value}
    }
    if args.pod_annotations:
        template_metadata["annotations"] = dict(args.pod_annotations)
    objects.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": object_metadata(name, namespace, labels),
            "spec": {
                "replicas": 1,
                # Never two gates draining at once: the old pod goes before the new one starts.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": selector_for(name, COMPONENT)},
                "template": {
                    "metadata": template_metadata,
                    "spec": {
                        "serviceAccountName": name,
                        **standard_placement().pod_spec_fields(),
                        "containers": [
                            {
                                "name": "gate",
                                "image": args.image,
                                "command": command,
                                "env": env,
                                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                            }
                        ],
                    },
                },
            },
        }
    )
    return objects
