"""What a cluster serves is listed once per kubeconfig and process, but an absence is never read from that
cache: the plugin's one process serves every component of a program, and a ``ClusterControllers`` that listed
a bare cluster before it installed JobSet must not make the ``BatchJob`` constructed after it read "JobSet is
not served" (a YAML program on the twin was refused so, now and then)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from together_clusters.components.controllers import detection
from together_clusters.components.controllers.detection import Presence

JOBSET_CRD = "jobsets.jobset.x-k8s.io"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A cluster whose CRDs and PriorityClasses a test changes, and how often each was listed."""
    state: dict[str, Any] = {"crds": [], "priority_classes": [], "lists": 0}

    def listed(kubeconfig: str, what: str) -> list[Any]:
        state["lists"] += 1
        return [SimpleNamespace(metadata=SimpleNamespace(name=n, annotations={})) for n in state[what]]

    monkeypatch.setattr(detection, "_listed", listed)
    detection.installed_crds.cache_clear()
    detection.installed_priority_classes.cache_clear()
    yield state
    detection.installed_crds.cache_clear()
    detection.installed_priority_classes.cache_clear()


def test_a_crd_installed_after_the_first_look_is_found_by_the_next(cluster: dict[str, Any]) -> None:
    assert detection.find(JOBSET_CRD, "kubeconfig", "stack").presence is Presence.ABSENT
    cluster["crds"].append(JOBSET_CRD)  # the chart went in
    assert detection.find(JOBSET_CRD, "kubeconfig", "stack").presence is Presence.THEIRS


def test_a_priority_class_created_after_the_first_look_is_found_by_the_next(cluster: dict[str, Any]) -> None:
    assert detection.find_priority_class("together-fallback", "k", "s").presence is Presence.ABSENT
    cluster["priority_classes"].append("together-fallback")
    assert detection.find_priority_class("together-fallback", "k", "s").presence is Presence.THEIRS


def test_what_is_present_is_still_listed_once(cluster: dict[str, Any]) -> None:
    cluster["crds"].append(JOBSET_CRD)
    for _ in range(3):
        assert detection.find(JOBSET_CRD, "kubeconfig", "stack").presence is Presence.THEIRS
    assert cluster["lists"] == 1
