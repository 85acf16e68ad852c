"""ClusterControllers waits, at ``pulumi up``, until the cluster admits a JobSet (a server-side dry run of one
passes JobSet's webhooks) before what depends on it creates JobSets: the engine's readiness of the chart
(Deployment available, Service with endpoints) comes before the webhook answers, and a first JobSet met a
500 from ``mjobset.kb.io`` (issue 41). Under Pulumi's mocks, with the cluster's answers made up here; the
real answers are the twin's (tests/twin/test_engine_chart_rerun.py creates a JobSet right after an up)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from together_clusters.components import ClusterControllers
from together_clusters.components.controllers import admission

from .conftest import Program

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def test_jobset_counts_as_installed_once_the_cluster_admits_a_job_set(
    program: Program, served: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, str]] = []

    async def admitted(kubeconfig: str, namespace: str) -> None:
        asked.append((kubeconfig, namespace))
        return None

    monkeypatch.setattr(admission, "until_admitted", admitted)
    seen: dict[str, Any] = {}

    def build() -> None:
        controllers = ClusterControllers("controllers", kubeconfig=KUBECONFIG)
        controllers.installed.apply(seen.update)

    program.run(build)
    assert asked == [(KUBECONFIG, "jobset-system")]
    assert seen["jobset"] == "installed"


def test_a_cluster_that_never_admits_a_job_set_fails_the_up_naming_its_answer(
    program: Program, served: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        admission,
        "refusal",
        lambda kubeconfig, namespace: admission.Refusal("500 Internal Server Error: mjobset"),
    )
    monkeypatch.setattr(admission, "WAIT_SECONDS", 0.0)

    def build() -> None:
        ClusterControllers("controllers", kubeconfig=KUBECONFIG)

    with pytest.raises(
        Exception, match="did not admit a JobSet within 0s.*500 Internal Server Error: mjobset"
    ):
        program.run(build)


def test_the_wait_ends_at_the_first_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [
        admission.Refusal("404 Not Found"),
        admission.Refusal("500 Internal Server Error: failed calling webhook"),
        None,
    ]
    monkeypatch.setattr(admission, "refusal", lambda kubeconfig, namespace: answers.pop(0))
    monkeypatch.setattr(admission, "_POLL_SECONDS", 0.0)
    assert asyncio.run(admission.until_admitted(KUBECONFIG, "jobset-system")) is None
    assert answers == []


def test_a_cluster_that_cannot_be_asked_ends_the_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [admission.Refusal("403 Forbidden", final=True), None]
    monkeypatch.setattr(admission, "refusal", lambda kubeconfig, namespace: answers.pop(0))
    refused = asyncio.run(admission.until_admitted(KUBECONFIG, "jobset-system"))
    assert refused == admission.Refusal("403 Forbidden", final=True)
    assert answers == [None]


class _Answering:
    def __init__(self, status: int | None) -> None:
        self.status = status
        self.asked: list[tuple[Any, ...]] = []

    def __call__(self, api: Any) -> _Answering:
        return self

    def create_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.asked.append((*args, kwargs.get("dry_run")))
        if self.status is not None:
            raise ApiException(status=self.status, reason="refused")
        return {}


@pytest.mark.parametrize("status", [404, 500, 503])
def test_a_kind_not_served_or_a_webhook_not_answering_is_asked_again(
    monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    answering = _Answering(status)
    monkeypatch.setattr("kubernetes.client.CustomObjectsApi", answering)
    refused = admission.refusal(KUBECONFIG, "jobset-system")
    assert refused is not None and not refused.final and refused.why.startswith(str(status))
    ((group, version, namespace, plural, body, dry_run),) = answering.asked
    assert (group, version, namespace, plural, dry_run) == (
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobset-system",
        "jobsets",
        "All",
    )
    assert body["kind"] == "JobSet"


def test_an_admitted_dry_run_ends_the_wait_and_a_refused_probe_skips_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("kubernetes.client.CustomObjectsApi", _Answering(None))
    assert admission.refusal(KUBECONFIG, "jobset-system") is None
    monkeypatch.setattr("kubernetes.client.CustomObjectsApi", _Answering(403))  # not allowed to ask
    refused = admission.refusal(KUBECONFIG, "jobset-system")
    assert refused is not None and refused.final and refused.why.startswith("403")
