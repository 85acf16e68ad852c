"""The Kubernetes side of the shells: which provider to use, and dicts to pulumi-kubernetes resources.

The providers' registry lives here (the cluster of each provider, the ClusterControllers declared on it),
below both the installer (:mod:`.cluster_controllers`), which registers itself, and the shells, which look it
up; :func:`~together_clusters.components.provider_for`, which makes a provider with its installer, is above
them (:mod:`.providers`).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import pulumi
import pulumi_kubernetes as k8s
import yaml

from together_clusters.errors import KubernetesUnreachable
from together_clusters.platform import JOBSET_API

NEVER_RESOLVES = ".invalid"
"""The top-level domain reserved never to resolve (RFC 6761); the emulator without its Kubernetes twin
writes kubeconfigs whose server is on it."""


class HasKubeConfig(Protocol):
    """Anything with a kubeconfig output, such as ``together_clusters.provider.Cluster``."""

    @property
    def kube_config(self) -> pulumi.Output[str]: ...


_CLUSTER_OF_PROVIDER: weakref.WeakKeyDictionary[pulumi.ProviderResource, pulumi.Resource] = (
    weakref.WeakKeyDictionary()
)
"""The cluster each :func:`~together_clusters.components.provider_for` provider talks to, so the components
on it go with their cluster."""


def register_cluster(provider: pulumi.ProviderResource, cluster: pulumi.Resource) -> None:
    """Record ``cluster`` as the cluster ``provider`` talks to (by
    :func:`~together_clusters.components.provider_for`)."""
    _CLUSTER_OF_PROVIDER[provider] = cluster


_CONTROLLERS_OF_PROVIDER: weakref.WeakKeyDictionary[pulumi.ProviderResource, pulumi.ComponentResource] = (
    weakref.WeakKeyDictionary()
)
"""The :class:`~together_clusters.components.ClusterControllers` declared on each provider (by
:func:`~together_clusters.components.provider_for`, or by the program), so the components on that provider
wait for it."""


def register_controllers(provider: pulumi.ProviderResource, controllers: pulumi.ComponentResource) -> None:
    """Record ``controllers`` as the installer of ``provider``'s cluster (the first one declared wins)."""
    _CONTROLLERS_OF_PROVIDER.setdefault(provider, controllers)


def providers_named(opts: pulumi.ResourceOptions | None) -> list[pulumi.ProviderResource]:
    """The providers these options name: ``provider``, then those of ``providers``."""
    if opts is None:
        return []
    candidates = [opts.provider] if opts.provider is not None else []
    providers = opts.providers
    candidates += list(providers.values()) if isinstance(providers, Mapping) else list(providers or [])
    return [p for p in candidates if isinstance(p, pulumi.ProviderResource)]


def kubernetes_provider(opts: pulumi.ResourceOptions | None) -> pulumi.ProviderResource | None:
    """The Kubernetes provider these options name, else ``None`` (the default provider)."""
    return next((p for p in providers_named(opts) if p.package == "kubernetes"), None)


def controllers_of(opts: pulumi.ResourceOptions | None) -> pulumi.ComponentResource | None:
    """The ClusterControllers declared on the provider these options name, else ``None``."""
    return next(
        (_CONTROLLERS_OF_PROVIDER[p] for p in providers_named(opts) if p in _CONTROLLERS_OF_PROVIDER), None
    )


def kubeconfig_of(provider: pulumi.ProviderResource) -> pulumi.Output[str | None]:
    """The kubeconfig (contents or path) ``provider`` talks to the cluster with; ``None`` for a provider that
    renders YAML, or that uses the ambient configuration (no kubeconfig given, no ``KUBECONFIG``)."""
    rendering = getattr(provider, "render_yaml_to_directory", None)
    kubeconfig = getattr(provider, "kubeconfig", None)

    # At preview an input the provider was not given reads as unknown, not as None: only a str counts.
    def usable(found: list[Any]) -> str | None:
        renders = isinstance(found[0], str) and bool(found[0])
        return found[1] if isinstance(found[1], str) and not renders else None

    return pulumi.Output.all(rendering, kubeconfig).apply(usable, run_with_unknowns=True)


def cluster_of(opts: pulumi.ResourceOptions | None) -> pulumi.Resource | None:
    """The cluster whose :func:`~together_clusters.components.provider_for` provider these options name, else
    ``None``.

    A component's objects on such a provider are ``deleted_with`` that cluster: when the cluster is
    replaced or destroyed the objects go with it, and the engine does not try to delete them one by one
    through the provider being replaced with it (which fails: "grpc: the client connection is closing",
    pulumi/pulumi#14650), so a ``gpu_type`` change of a stack with workloads goes through.
    """
    return next((_CLUSTER_OF_PROVIDER[p] for p in providers_named(opts) if p in _CLUSTER_OF_PROVIDER), None)


class _UnreachableShownOnOneLine(KubernetesUnreachable, pulumi.RunError):
    """:class:`KubernetesUnreachable` as Pulumi's language host prints a ``RunError``: the message alone, no
    traceback of the SDK's own frames."""


def unreachable_server(kubeconfig: str) -> str | None:
    """The API server of the kubeconfig's current context when its host can never resolve, else ``None``
    (a kubeconfig that cannot be read is left to the Kubernetes provider to judge)."""
    try:
        doc = yaml.safe_load(kubeconfig)
        contexts = {c["name"]: c["context"] for c in doc.get("contexts") or []}
        clusters = {c["name"]: c["cluster"] for c in doc.get("clusters") or []}
        server = str(clusters[contexts[doc["current-context"]]["cluster"]]["server"])
    except (yaml.YAMLError, AttributeError, KeyError, TypeError):
        return None
    host = (urlsplit(server).hostname or "").rstrip(".")
    return server if host.endswith(NEVER_RESOLVES) else None


def reachable(kubeconfig: str) -> str:
    """``kubeconfig`` unchanged; :class:`KubernetesUnreachable` when its server can never answer."""
    server = unreachable_server(kubeconfig)
    if server is not None:
        raise _UnreachableShownOnOneLine(
            f"the cluster's kubeconfig points at {server}, a host that never resolves (the emulator runs "
            "without its Kubernetes twin): start the emulator with --kubernetes, or write the manifests to "
            "files instead (stack config renderYamlTo=DIR in the templates, render_dir in provider_for)"
        )
    return kubeconfig


_RESOURCE_CLASSES: Mapping[tuple[str, str], Callable[..., pulumi.CustomResource]] = {
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("v1", "Service"): k8s.core.v1.Service,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
}


IMMUTABLE_SPEC_KINDS = frozenset({(JOBSET_API.api_version, JOBSET_API.kind)})
"""Custom kinds whose spec the API server refuses to change (JobSet's webhook: "spec.replicatedJobs: field
is immutable"). pulumi-kubernetes knows the immutable fields of built-in kinds (a Job's template) and
replaces those; for a custom kind it only patches, so a changed spec has to be declared a replacement."""


PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"
"""pulumi-kubernetes applies server-side with a field manager named at random per provider run
(``pulumi-kubernetes-<hex>``) and recorded in the state with the object. An ``up`` killed after it applied an
object but before it recorded it leaves the object owned by a manager no later run has: the rerun's apply
then fails with a field-manager conflict on every field it changes (``conflict with
"pulumi-kubernetes-78ac014f": ...env[name="QUEUE_URL"].value``). Forcing the apply lets the declared
value win, as the program owns these objects."""


def with_forced_apply(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with the annotation that makes pulumi-kubernetes force its server-side apply."""
    annotations = {**(metadata.get("annotations") or {}), PATCH_FORCE_ANNOTATION: "true"}
    return {**metadata, "annotations": annotations}


def create(
    resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """Create the pulumi-kubernetes resource for a rendered object (fields pass through unchanged).

    Kinds without a typed class (a JobSet) become ``apiextensions.CustomResource``. A changed JobSet is
    deleted, its pods given their grace period to save, before its successor is created under the same name.
    """
    fields = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    fields["metadata"] = with_forced_apply(fields.get("metadata") or {})
    kind = (manifest["apiVersion"], manifest["kind"])
    if kind in IMMUTABLE_SPEC_KINDS:
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)
        )
    cls = _RESOURCE_CLASSES.get(kind)
    if cls is None:
        return k8s.apiextensions.CustomResource(
            resource_name, api_version=manifest["apiVersion"], kind=manifest["kind"], opts=opts, **fields
        )
    # The typed classes take their top-level fields as Python keywords (``roleRef`` is ``role_ref``).
    return cls(resource_name, opts=opts, **{_snake(key): value for key, value in fields.items()})


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
