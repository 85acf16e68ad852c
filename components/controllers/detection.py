"""What a cluster already serves: is a controller's CustomResourceDefinition (or one of the package's
PriorityClasses) there, and who installed it.

:func:`classify` is pure; :func:`installed_crds` asks the cluster's API server (the ``kubernetes`` client,
once per kubeconfig and program run). Honest about its limits: it looks at the CRD alone (a CRD left behind
by an uninstalled controller counts as installed), and a cluster it cannot ask (no client, no answer) is
reported as such, never guessed to have the controller.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import yaml

from together_clusters.provider.kubeconfig import kubeconfig_text

from .releases import INSTALLED_BY_ANNOTATION

REQUEST_TIMEOUT_SECONDS = 10


class Presence(StrEnum):
    """What the cluster says about one controller's CRD."""

    ABSENT = "absent"
    """Not served: the controller is not installed."""
    OURS = "ours"
    """Served, installed by this stack: keep managing it."""
    THEIRS = "theirs"
    """Served, installed by another stack or by other means: use it, leave it alone."""
    UNKNOWN = "unknown"
    """The cluster could not be asked (kubeconfig not known yet, no client, no answer)."""


@dataclass(frozen=True)
class Finding:
    """One controller's presence, with who installed it (``None``: not marked by this package) or why the
    cluster could not be asked."""

    presence: Presence
    installed_by: str | None = None
    reason: str = ""


def classify(crd_annotations: Mapping[str, str] | None, this_stack: str) -> Finding:
    """The finding for a CRD with these annotations (``None``: the CRD is not there)."""
    if crd_annotations is None:
        return Finding(Presence.ABSENT)
    installed_by = crd_annotations.get(INSTALLED_BY_ANNOTATION)
    presence = Presence.OURS if installed_by == this_stack else Presence.THEIRS
    return Finding(presence, installed_by)


class _ClusterUnanswered(Exception):
    """The cluster could not be asked; the message says why (internal: turned into a Finding)."""


def _listed(kubeconfig: str, what: str) -> list[Any]:
    """The items of one cluster-wide list (``what``: ``crds`` or ``priority_classes``).

    Raises :class:`_ClusterUnanswered` when it cannot ask. A kubeconfig given as a path (as
    ``k8s.Provider(kubeconfig=...)`` accepts) is read from that file.
    """
    try:
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException
    except ModuleNotFoundError as error:
        raise _ClusterUnanswered(
            "the kubernetes client is not installed (pip install 'together-gpu-clusters[drill]')"
        ) from error
    text = kubeconfig_text(kubeconfig) or ""
    document = yaml.safe_load(text) if ":" in text else None
    try:
        if isinstance(document, dict):
            api = config.new_client_from_config_dict(document)
        else:
            api = config.new_client_from_config(config_file=text.strip())
        with api:
            listed: Any
            if what == "crds":
                listed = client.ApiextensionsV1Api(api).list_custom_resource_definition(
                    _request_timeout=REQUEST_TIMEOUT_SECONDS
                )
            else:
                listed = client.SchedulingV1Api(api).list_priority_class(
                    _request_timeout=REQUEST_TIMEOUT_SECONDS
                )
    except ApiException as error:
        raise _ClusterUnanswered(f"the API server answered {error.status} {error.reason}") from error
    except Exception as error:  # connection refused, DNS, TLS, a kubeconfig the client cannot use
        raise _ClusterUnanswered(f"{type(error).__name__}: {str(error).splitlines()[0][:200]}") from error
    return list(listed.items)


def _annotations_by_name(items: list[Any]) -> dict[str, Mapping[str, str]]:
    return {
        str(item.metadata.name): dict(item.metadata.annotations or {})
        for item in items
        if item.metadata is not None
    }


@functools.lru_cache(maxsize=16)
def installed_crds(kubeconfig: str) -> Mapping[str, Mapping[str, str]]:
    """The annotations of every CustomResourceDefinition the cluster serves, by name (once per kubeconfig
    and program run). Raises :class:`_ClusterUnanswered` when it cannot ask."""
    return _annotations_by_name(_listed(kubeconfig, "crds"))


@functools.lru_cache(maxsize=16)
def installed_priority_classes(kubeconfig: str) -> Mapping[str, Mapping[str, str]]:
    """The annotations of every PriorityClass of the cluster, by name (once per kubeconfig and program run)."""
    return _annotations_by_name(_listed(kubeconfig, "priority_classes"))


def _finding(
    name: str, kubeconfig: str | None, this_stack: str, listing: Callable[[str], Mapping[str, Any]]
) -> Finding:
    if kubeconfig is None:
        return Finding(Presence.UNKNOWN, reason="the cluster's kubeconfig is not known yet")
    try:
        present = listing(kubeconfig)
        forget = getattr(listing, "cache_clear", None)
        if name not in present and forget is not None:
            # The list is kept once per kubeconfig and process, and one process (the plugin's) serves every
            # component of a program: a ClusterControllers may have listed the cluster before it installed
            # what a later component asks for. An absence, which refuses, is decided on a fresh list.
            forget()
            present = listing(kubeconfig)
    except _ClusterUnanswered as error:
        return Finding(Presence.UNKNOWN, reason=str(error))
    return classify(present.get(name), this_stack)


def find_priority_class(name: str, kubeconfig: str | None, this_stack: str) -> Finding:
    """What the cluster of ``kubeconfig`` says about the PriorityClass ``name`` (as :func:`find` for a CRD)."""
    return _finding(name, kubeconfig, this_stack, installed_priority_classes)


def find(crd: str, kubeconfig: str | None, this_stack: str) -> Finding:
    """What the cluster of ``kubeconfig`` says about ``crd`` (``None``: not known yet, at a preview of a
    cluster still to be created)."""
    return _finding(crd, kubeconfig, this_stack, installed_crds)
