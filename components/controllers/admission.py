"""Whether the cluster admits a JobSet yet: what :class:`~together_clusters.components.ClusterControllers` waits
for, at ``pulumi up``, after installing JobSet, before anything that depends on it creates a JobSet.

The charts' Deployments and Services are reported created once stored (their pods are not awaited: see
:data:`~together_clusters.components.manifests.awaiting.CHART_READY_WHEN_STORED`), so this wait is what tells
dependents the controllers serve. Even a Deployment available and a webhook Service with endpoints are not
yet a webhook the API server reaches: JobSet's manager reports ready once its webhook server
listens, and registers the webhook's paths afterwards, in a goroutine of its own; the API server's view of
the webhook configurations (the ``caBundle`` the rotator injects) and of the Service's endpoints follows a
moment later. A JobSet created in that gap is refused with a 500 from ``mjobset.kb.io`` (issue 41, seen on
the twin; the same race exists on a real cluster). So the component asks the API server itself: a
server-side dry run of a JobSet create, which runs admission (JobSet's webhooks, and Kueue's where it is
installed) and stores nothing, until it is admitted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import yaml

from together_clusters.platform import JOBSET_API
from together_clusters.provider.kubeconfig import kubeconfig_text

REQUEST_TIMEOUT_SECONDS = 10
WAIT_SECONDS = 300.0
"""How long ``pulumi up`` waits for the first JobSet to be admitted before it fails, naming the last answer."""
_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Refusal:
    """Why the cluster did not admit the probe JobSet."""

    why: str
    final: bool = False
    """Asking again would not help: the cluster cannot be asked (no ``kubernetes`` client, a kubeconfig it
    cannot use, a refusal of the probe itself such as a 403), so the wait is skipped."""


def probe(namespace: str) -> dict[str, Any]:
    """The JobSet the dry run asks to create in ``namespace`` (one Job of one pod; never stored)."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]}
    return {
        "apiVersion": JOBSET_API.api_version,
        "kind": JOBSET_API.kind,
        "metadata": {"name": "together-admission-probe", "namespace": namespace},
        "spec": {"replicatedJobs": [{"name": "probe", "template": {"spec": {"template": {"spec": pod}}}}]},
    }


def refusal(kubeconfig: str, namespace: str) -> Refusal | None:
    """``None`` when the cluster admits a JobSet in ``namespace`` now; else why not: worth asking again (the
    kind not served yet, a webhook failing or not reached, the API not answering) or ``final``."""
    try:
        from kubernetes import client, config
        from kubernetes.client.exceptions import ApiException
    except ModuleNotFoundError:
        return Refusal("the kubernetes client is not installed", final=True)
    text = kubeconfig_text(kubeconfig) or ""
    document = yaml.safe_load(text) if ":" in text else None
    try:
        if isinstance(document, dict):
            api = config.new_client_from_config_dict(document)
        else:
            api = config.new_client_from_config(config_file=text.strip())
    except Exception as error:  # a kubeconfig the client cannot use
        return Refusal(f"{type(error).__name__}: {str(error).splitlines()[0][:200]}", final=True)
    with api:
        try:
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                JOBSET_API.group,
                JOBSET_API.version,
                namespace,
                JOBSET_API.plural,
                probe(namespace),
                dry_run="All",
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except ApiException as error:
            answer = f"{error.status} {error.reason}: {str(error.body or '')[:300]}"
            return Refusal(answer, final=not (error.status == 404 or (error.status or 0) >= 500))
        except Exception as error:  # connection refused, a timeout: the API not answering yet
            return Refusal(f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
    return None


async def until_admitted(kubeconfig: str, namespace: str) -> Refusal | None:
    """``None`` once the cluster admits a JobSet in ``namespace``; a ``final`` refusal at once; after
    :data:`WAIT_SECONDS`, a refusal that names the wait and the last answer."""
    wait_seconds = WAIT_SECONDS
    deadline = time.monotonic() + wait_seconds
    while True:
        answer = await asyncio.to_thread(refusal, kubeconfig, namespace)
        if answer is None or answer.final:
            return answer
        if time.monotonic() >= deadline:
            return Refusal(
                f"the cluster did not admit a JobSet within {wait_seconds:g}s of installing JobSet; "
                f"its last answer to a dry-run create: {answer.why}"
            )
        await asyncio.sleep(_POLL_SECONDS)
