"""Read a cluster's workloads from its Kubernetes API into the plain view ``together_clusters.cli.workloads``
classifies (the shell of the workloads report).

The kubeconfig is the cluster's own (its ``kube_config``, as ``together_clusters.cli.live`` reads it from the
Together API), loaded as ``together_clusters.components.controllers.detection`` loads it: the decoded document
as a dict. Read only: pods with the placement label, nodes, the Events of the platform's node repairs
(reasons ``TogetherRemediation...``, recorded on Nodes, in ``default`` as Node Events are), and Kueue Workloads
when Kueue is installed.
Whatever stops the read (no client installed, an API server that does not answer) becomes the view's
``error``, one line: the workloads are information, they never stop ``status`` or ``drift``.
"""

from __future__ import annotations

from typing import Any

import yaml

from together_clusters._extras import requires_extra
from together_clusters.errors import MissingExtraError
from together_clusters.platform import PLACEMENT_LABEL, REMEDIATION_REASON_PREFIX

REQUEST_TIMEOUT_SECONDS = 10
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
"""The Workload API versions tried, newest first (Kueue 0.15 added v1beta2; older ones serve v1beta1)."""
NODE_EVENTS_NAMESPACE = "default"
"""Where Kubernetes keeps the Events of Nodes (cluster-scoped objects)."""


def read(kubeconfig: str | None) -> dict[str, Any]:
    """``{"pods", "nodes", "node_events", "kueue_workloads"}`` of the cluster of ``kubeconfig`` (its text), or
    ``{"error"}``. ``node_events``: the repairs' Events only."""
    if not kubeconfig:
        return {"error": "the cluster has no kubeconfig yet"}
    try:
        with requires_extra("drill", "reading the workloads of a cluster"):
            import urllib3
            from kubernetes import client, config
            from kubernetes.client.exceptions import ApiException
    except MissingExtraError as error:
        return {"error": " ".join(str(error).split())}
    try:
        document = yaml.safe_load(kubeconfig) if ":" in kubeconfig else None
    except yaml.YAMLError:
        document = None
    if not isinstance(document, dict):
        return {"error": "the cluster's kube_config is not a kubeconfig document"}
    settings = client.Configuration()
    try:
        config.load_kube_config_from_dict(document, client_configuration=settings)
    except config.ConfigException as error:
        return {"error": f"its kubeconfig cannot be used: {' '.join(str(error).split())[:200]}"}
    # One retry, not urllib3's three: an API server that does not answer costs one timeout or two, not four.
    settings.retries = 1
    api = client.ApiClient(settings)
    try:
        with api:
            core = client.CoreV1Api(api)
            pods = core.list_pod_for_all_namespaces(
                label_selector=PLACEMENT_LABEL, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
            nodes = core.list_node(_request_timeout=REQUEST_TIMEOUT_SECONDS)
            return {
                "pods": api.sanitize_for_serialization(pods.items),
                "nodes": api.sanitize_for_serialization(nodes.items),
                "node_events": _repair_events(core, api, ApiException),
                "kueue_workloads": _kueue_workloads(client.CustomObjectsApi(api), ApiException),
            }
    except ApiException as error:
        return {"error": f"its Kubernetes API answered {error.status} {error.reason}"}
    except urllib3.exceptions.MaxRetryError as error:  # refused, timed out, a host that does not resolve
        cause = type(error.reason).__name__ if error.reason is not None else "no answer"
        return {"error": f"its Kubernetes API at {api.configuration.host} did not answer ({cause})"}
    except Exception as error:  # connection refused, DNS, TLS, a kubeconfig the client cannot use
        first = (str(error).splitlines() or [""])[0][:200]
        return {"error": f"its Kubernetes API could not be read: {type(error).__name__}: {first}"}


def _repair_events(core: Any, api: Any, api_exception: type[Exception]) -> list[dict[str, Any]]:
    """The Node Events of the platform's repairs; none when the key may not read Events (403): they only
    mark the timeline, and the pods and nodes are still worth showing."""
    try:
        events = core.list_namespaced_event(
            NODE_EVENTS_NAMESPACE,
            field_selector="involvedObject.kind=Node",
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
    except api_exception as error:
        if getattr(error, "status", None) in (403, 404):
            return []
        raise
    return [
        e
        for e in api.sanitize_for_serialization(events.items)
        if str(e.get("reason") or "").startswith(REMEDIATION_REASON_PREFIX)
    ]


def _kueue_workloads(custom: Any, api_exception: type[Exception]) -> list[dict[str, Any]]:
    """Kueue's Workloads in every namespace; none when Kueue is not installed (the API answers 404)."""
    for version in KUEUE_VERSIONS:
        try:
            listed = custom.list_cluster_custom_object(
                KUEUE_GROUP, version, "workloads", _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except api_exception as error:
            if getattr(error, "status", None) == 404:
                continue
            raise
        return list(listed.get("items") or [])
    return []
