"""How the drill reads a workload's end from its controller's conditions (cli/drill/runner.py ``_finished``):
a Job read through the Kubernetes client's models and a JobSet read as JSON go through the same platform
reading (:func:`together_clusters.platform.objects.condition_true`), so a condition that is not ``True`` never
ends the watch."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill import runner
from together_clusters.cli.drill.report import Outcome
from together_clusters.platform import JOBSET_API


class _Jobs:
    def __init__(self, conditions: list[client.V1JobCondition]) -> None:
        self.job = client.V1Job(status=client.V1JobStatus(conditions=conditions))

    def read_namespaced_job_status(self, *_: Any, **__: Any) -> client.V1Job:
        return self.job


class _Custom:
    def __init__(self, conditions: list[dict[str, str]]) -> None:
        self.obj = {"status": {"conditions": conditions}}

    def get_namespaced_custom_object_status(self, *_: Any, **__: Any) -> dict[str, Any]:
        return self.obj


JOB = runner.Workload("Job", "default", "train", "batch/v1")
JOBSET = runner.Workload(JOBSET_API.kind, "default", "train", f"{JOBSET_API.group}/{JOBSET_API.version}")


def test_a_failed_job_read_through_the_clients_models_is_reported_with_its_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failed = client.V1JobCondition(
        type="Failed", status="True", reason="BackoffLimitExceeded", message="too many"
    )
    monkeypatch.setattr(runner.client, "BatchV1Api", lambda api: _Jobs([failed]))
    assert runner._finished(client.ApiClient(), JOB) == (Outcome.FAILED, "BackoffLimitExceeded: too many")


def test_a_condition_that_is_not_true_does_not_end_the_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        runner.client,
        "BatchV1Api",
        lambda api: _Jobs([client.V1JobCondition(type="Failed", status="False")]),
    )
    assert runner._finished(client.ApiClient(), JOB) is None


def test_a_completed_jobset_survived(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        runner.client, "CustomObjectsApi", lambda api: _Custom([{"type": "Completed", "status": "True"}])
    )
    assert runner._finished(client.ApiClient(), JOBSET) == (Outcome.SURVIVED, "completed")
