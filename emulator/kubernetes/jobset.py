"""JobSet in a twin cluster, as a cluster with JobSet installed has it: the manifests and configuration
(pure), and :func:`install`, which applies them.

The controller manager runs on loopback beside the control plane (see
:meth:`~together_clusters.emulator.kubernetes.controlplane.ControlPlane.start_jobset`) with a user of its own
bound to the ClusterRole of the pinned release (``jobset-role.yaml``, copied from its module by
scripts/install-kubernetes), and its real webhooks: the API server calls them at
``https://127.0.0.1:<port>/<path>`` instead of through a Service. The JobSet webhook matters: it sets the
defaults the reconciler relies on (and validates); the pod webhooks place and gate JobSet pods.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client import (
    AdmissionregistrationV1Api,
    ApiClient,
    ApiextensionsV1Api,
    CustomObjectsApi,
    RbacAuthorizationV1Api,
)
from kubernetes.client.exceptions import ApiException

from together_clusters.platform import JOBSET_API

Manifest = dict[str, Any]

USER = "system:jobset-controller-manager"
"""The controller manager's user (a static token, not in ``system:masters``: RBAC applies)."""
CLUSTER_ROLE = "jobset-manager-role"
CRD_NAME = JOBSET_API.crd_name
MUTATING = "jobset-mutating-webhook-configuration"
VALIDATING = "jobset-validating-webhook-configuration"
# From the release's config/components/webhook/manifests.yaml and its patches (the pod webhooks only see
# pods of a JobSet). The paths are the ones controller-runtime registers for the types, stable across releases:
# /<mutate|validate>-<group, dots as dashes>-<version>-<kind in lower case> (the core group is empty).
_TIMEOUT = 10
_JOBSET_RULE = {
    "apiGroups": [JOBSET_API.group],
    "apiVersions": [JOBSET_API.version],
    "resources": [JOBSET_API.plural],
}
_JOBSET_WEBHOOK = f"{JOBSET_API.group.replace('.', '-')}-{JOBSET_API.version}-{JOBSET_API.kind.lower()}"
_POD_RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
_JOBSET_PODS = {"matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
_MUTATING_HOOKS = (
    (
        "mjobset.kb.io",
        f"/mutate-{_JOBSET_WEBHOOK}",
        {**_JOBSET_RULE, "operations": ["CREATE"]},
        None,
    ),
    ("mpod.kb.io", "/mutate--v1-pod", _POD_RULE, _JOBSET_PODS),
)
_VALIDATING_HOOKS = (
    (
        "vjobset.kb.io",
        f"/validate-{_JOBSET_WEBHOOK}",
        {**_JOBSET_RULE, "operations": ["CREATE", "UPDATE"]},
        None,
    ),
    ("vpod.kb.io", "/validate--v1-pod", _POD_RULE, _JOBSET_PODS),
)


def configuration(webhook_port: int, health_port: int, cert_dir: str) -> str:
    """The manager's configuration file (config.jobset.x-k8s.io/v1alpha1): webhooks on a loopback port with
    certificates we provide (no internal cert management), no leader election, no metrics server, health
    probes on loopback."""
    config = {
        "apiVersion": f"config.{JOBSET_API.group}/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": cert_dir},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }
    return yaml.safe_dump(config, sort_keys=False)


def _hooks(hooks: tuple[Any, ...], webhook_port: int, ca_bundle: bytes) -> list[Manifest]:
    rendered = []
    for name, path, rule, object_selector in hooks:
        hook: Manifest = {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "url": f"https://127.0.0.1:{webhook_port}{path}",
                "caBundle": base64.b64encode(ca_bundle).decode(),
            },
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "rules": [dict(rule)],
        }
        if object_selector is not None:
            hook["objectSelector"] = object_selector
        rendered.append(hook)
    return rendered


def webhook_configurations(webhook_port: int, ca_bundle: bytes) -> tuple[Manifest, Manifest]:
    """The mutating and validating webhook configurations pointing at the manager on loopback."""
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING},
        "webhooks": _hooks(_MUTATING_HOOKS, webhook_port, ca_bundle),
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING},
        "webhooks": _hooks(_VALIDATING_HOOKS, webhook_port, ca_bundle),
    }
    return mutating, validating


def cluster_role(role_yaml: str) -> Manifest:
    """The release's ClusterRole for its manager, under a name of its own."""
    role: Manifest = yaml.safe_load(role_yaml)
    return {**role, "metadata": {"name": CLUSTER_ROLE}}


def cluster_role_binding() -> Manifest:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }


# --- applying them ----------------------------------------------------------------------------------


def _create_or_replace(
    body: Manifest, create: Callable[..., Any], read: Callable[..., Any], replace: Callable[..., Any]
) -> None:
    """Create ``body``; when it exists, replace it (a restart may have moved the webhook port)."""
    try:
        create(body, _request_timeout=_TIMEOUT)
        return
    except ApiException as exc:
        if exc.status != 409:
            raise
    name = body["metadata"]["name"]
    current = read(name, _request_timeout=_TIMEOUT)
    body = {**body, "metadata": {**body["metadata"], "resourceVersion": current.metadata.resource_version}}
    replace(name, body, _request_timeout=_TIMEOUT)


def install(client: ApiClient, crd: Path, role: Path, webhook_port: int, ca_bundle: bytes) -> None:
    """Apply the CRD, the manager's ClusterRole and binding, and the webhook configurations."""
    extensions = ApiextensionsV1Api(client)
    _create_or_replace(
        yaml.safe_load(crd.read_text()),
        extensions.create_custom_resource_definition,
        extensions.read_custom_resource_definition,
        extensions.replace_custom_resource_definition,
    )
    rbac = RbacAuthorizationV1Api(client)
    _create_or_replace(
        cluster_role(role.read_text()),
        rbac.create_cluster_role,
        rbac.read_cluster_role,
        rbac.replace_cluster_role,
    )
    _create_or_replace(
        cluster_role_binding(),
        rbac.create_cluster_role_binding,
        rbac.read_cluster_role_binding,
        rbac.replace_cluster_role_binding,
    )
    point_webhooks(client, webhook_port, ca_bundle)


def point_webhooks(client: ApiClient, webhook_port: int, ca_bundle: bytes) -> None:
    """Create the webhook configurations, or point them at the manager's port (it may have moved)."""
    admission = AdmissionregistrationV1Api(client)
    mutating, validating = webhook_configurations(webhook_port, ca_bundle)
    _create_or_replace(
        mutating,
        admission.create_mutating_webhook_configuration,
        admission.read_mutating_webhook_configuration,
        admission.replace_mutating_webhook_configuration,
    )
    _create_or_replace(
        validating,
        admission.create_validating_webhook_configuration,
        admission.read_validating_webhook_configuration,
        admission.replace_validating_webhook_configuration,
    )


def uninstall_webhooks(client: ApiClient) -> None:
    """Remove the webhook configurations (a twin restarted without JobSet: nothing would answer them)."""
    admission = AdmissionregistrationV1Api(client)
    for delete, name in (
        (admission.delete_mutating_webhook_configuration, MUTATING),
        (admission.delete_validating_webhook_configuration, VALIDATING),
    ):
        try:
            delete(name, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status != 404:
                raise


def crd_served(client: ApiClient) -> bool:
    """Whether the API server serves the JobSet CRD (its ``Established`` condition)."""
    crd = ApiextensionsV1Api(client).read_custom_resource_definition(CRD_NAME, _request_timeout=_TIMEOUT)
    conditions = crd.status.conditions if crd.status is not None else None
    return any(c.type == "Established" and c.status == "True" for c in conditions or [])


# A JobSet the API server is asked to create without storing it (a server-side dry run): admission, and so
# JobSet's webhooks, run as for a real create.
_PROBE: Manifest = {
    "apiVersion": JOBSET_API.api_version,
    "kind": JOBSET_API.kind,
    "metadata": {"name": "twin-webhook-probe", "namespace": "default"},
    "spec": {
        "replicatedJobs": [
            {
                "name": "probe",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "probe", "image": "registry.invalid/probe:1"}],
                            }
                        }
                    }
                },
            }
        ]
    },
}


def webhooks_answer(client: ApiClient) -> bool:
    """Whether a JobSet create gets through JobSet's webhooks now: a server-side dry run of one.

    The manager's ``/readyz`` is not enough: it reports ready once its webhook server listens, while the
    manager registers the JobSet webhook's paths afterwards, in a goroutine of its own (main.go's
    ``setupControllers``), and until the API server reaches them a create fails with a 500 from
    ``mjobset.kb.io``. Only a refusal of that kind (a 5xx, or a 404 while the kind is not served yet) means
    "not yet"; any other answer is the twin's bug, raised."""
    try:
        CustomObjectsApi(client).create_namespaced_custom_object(
            JOBSET_API.group,
            JOBSET_API.version,
            "default",
            JOBSET_API.plural,
            _PROBE,
            dry_run="All",
            _request_timeout=_TIMEOUT,
        )
    except ApiException as exc:
        if exc.status == 404 or (exc.status or 0) >= 500:
            return False
        raise
    return True
