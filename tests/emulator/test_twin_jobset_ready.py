"""The twin calls a cluster's JobSet running (and the cluster ready) once a JobSet create gets through JobSet's
webhooks, not once its manager answers ``/readyz``: the manager registers the webhook's paths after its
webhook server listens, and a user's first JobSet create in that gap met a 500 from ``mjobset.kb.io``
(issue 41). On a real twin, tests/twin/test_jobset.py's
``test_a_cluster_the_api_calls_ready_accepts_a_job_set_at_once`` creates a JobSet once, with no retry, as
soon as the compute API says Ready; the gap is too short for it to hit every time, so these tests pin the
decision itself."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from together_clusters.emulator.kubernetes import jobset
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.emulator.kubernetes.twin import Twin


def test_jobset_is_running_only_once_its_webhook_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = [False, True]
    monkeypatch.setattr(jobset, "webhooks_answer", lambda client: answers.pop(0))
    twin: Any = SimpleNamespace(options=TwinOptions(jobset=True))
    manager_ready: Any = SimpleNamespace(jobset_ready=lambda: True)
    plane: Any = SimpleNamespace(jobset="starting", control_plane=manager_ready)
    no_client: Any = None  # the probe is the stand-in's

    assert not Twin._jobset_running(
        twin, plane, client=no_client
    )  # /readyz answers, the webhook does not yet
    assert plane.jobset == "starting"
    assert Twin._jobset_running(twin, plane, client=no_client)
    assert plane.jobset == "running"


class _Refusing:
    def __init__(self, status: int | None) -> None:
        self.status = status
        self.asked: list[dict[str, Any]] = []

    def create_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.asked.append(kwargs)
        if self.status is not None:
            raise ApiException(status=self.status, reason="refused")
        return {}


@pytest.mark.parametrize(("status", "answers"), [(None, True), (500, False), (503, False), (404, False)])
def test_the_webhook_answers_when_a_dry_run_create_of_a_job_set_is_admitted(
    monkeypatch: pytest.MonkeyPatch, status: int | None, answers: bool
) -> None:
    api = _Refusing(status)
    monkeypatch.setattr(jobset, "CustomObjectsApi", lambda client: api)
    assert jobset.webhooks_answer(client=None) is answers  # type: ignore[arg-type]
    assert api.asked[0]["dry_run"] == "All"  # nothing is stored


def test_a_refusal_of_the_probe_itself_is_the_twins_bug_not_a_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobset, "CustomObjectsApi", lambda client: _Refusing(422))
    with pytest.raises(ApiException):
        jobset.webhooks_answer(client=None)  # type: ignore[arg-type]
