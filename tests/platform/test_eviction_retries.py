"""An eviction the API server refuses for now is tried again, not raised: a PodDisruptionBudget (429), and a
namespace being deleted (403, cause NamespaceTerminating: the namespace controller deletes the pod soon, as
kubectl drain treats it). Any other refusal is raised."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client import V1ObjectMeta, V1Pod, V1PodSpec
from kubernetes.client.exceptions import ApiException

from together_clusters.platform import TerminationMode
from together_clusters.sequences import preemption


class RefusingCore:
    def __init__(self, status: int, reason: str = "") -> None:
        self.status, self.reason = status, reason

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any, **_: Any) -> None:
        refusal = ApiException(status=self.status, reason="refused")
        refusal.body = json.dumps({"kind": "Status", "details": {"causes": [{"reason": self.reason}]}})
        raise refusal


def a_pod() -> Any:
    return V1Pod(metadata=V1ObjectMeta(name="work", namespace="ml"), spec=V1PodSpec(containers=[]))


@pytest.mark.parametrize(("status", "reason"), [(429, ""), (403, preemption.NAMESPACE_TERMINATING)])
def test_an_eviction_refused_for_now_is_tried_again(status: int, reason: str) -> None:
    assert preemption.terminate(RefusingCore(status, reason), a_pod(), TerminationMode.EVICTION, 300) is False  # type: ignore[arg-type]


def test_any_other_forbidden_eviction_is_raised() -> None:
    with pytest.raises(ApiException):
        preemption.terminate(RefusingCore(403, "SomethingElse"), a_pod(), TerminationMode.EVICTION, 300)  # type: ignore[arg-type]
