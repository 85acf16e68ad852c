"""A pod's GPUs, counted once (together_clusters.platform.pod_gpu_request) as kube-scheduler counts them.

Plain pod specs, one per shape; tests/twin/test_pod_gpus.py holds the function to the real scheduler.
"""

from __future__ import annotations

from typing import Any

import pytest

from together_clusters.platform import GPU_RESOURCE, pod_gpu_request


def container(name: str, limits: Any = None, requests: Any = None, **fields: Any) -> dict[str, Any]:
    """A container asking for GPUs through ``limits`` and/or ``requests`` (a count, or ``None`` for unset)."""
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = {GPU_RESOURCE: limits, "cpu": "4"}
    if requests is not None:
        resources["requests"] = {GPU_RESOURCE: requests, "cpu": "2"}
    return {"name": name, "image": "registry.invalid/x:1", "resources": resources, **fields}


def sidecar(name: str, limits: Any) -> dict[str, Any]:
    """A restartable init container: it starts before the app containers and runs beside them."""
    return container(name, limits=limits, restartPolicy="Always")


CASES: list[tuple[str, dict[str, Any], int]] = [
    ("no-resources", {"containers": [{"name": "main", "image": "x"}]}, 0),
    ("empty-spec", {}, 0),
    ("other-resources-only", {"containers": [{"name": "m", "resources": {"limits": {"cpu": "8"}}}]}, 0),
    ("limits-only", {"containers": [container("a", limits="2"), container("b", limits=1)]}, 3),
    ("requests-only", {"containers": [container("a", requests="2")]}, 2),
    ("both", {"containers": [container("a", limits="4", requests="4")]}, 4),
    # The API server refuses GPU requests that differ from the limits; the scheduler reads the requests.
    ("requests-decide", {"containers": [container("a", limits="2", requests="1")]}, 1),
    ("mixed", {"containers": [container("a", limits="1"), container("b", requests="2")]}, 3),
    (
        "init-above-the-app",
        {"initContainers": [container("fetch", limits="8")], "containers": [container("a", limits="1")]},
        8,
    ),
    (
        "init-below-the-app",
        {"initContainers": [container("fetch", limits="1")], "containers": [container("a", limits="4")]},
        4,
    ),
    (
        "inits-one-at-a-time",
        {
            "initContainers": [container("one", limits="3"), container("two", requests="2")],
            "containers": [container("a", limits="1")],
        },
        3,
    ),
    ("sidecar-adds", {"initContainers": [sidecar("s", "1")], "containers": [container("a", limits="2")]}, 3),
    (
        "sidecar-runs-beside-the-later-inits",
        {
            "initContainers": [sidecar("s", "1"), container("fetch", limits="4")],
            "containers": [container("a", limits="2")],
        },
        5,
    ),
    (
        "init-before-the-sidecar-runs-alone",
        {
            "initContainers": [container("fetch", limits="4"), sidecar("s", "1")],
            "containers": [container("a", limits="2")],
        },
        4,
    ),
    (
        "init-with-restart-policy-never-is-no-sidecar",
        {
            "initContainers": [container("fetch", limits="1", restartPolicy="Never")],
            "containers": [container("a", limits="2")],
        },
        2,
    ),
    ("overhead", {"overhead": {GPU_RESOURCE: "1"}, "containers": [container("a", limits="2")]}, 3),
    (
        "overhead-of-other-resources",
        {"overhead": {"cpu": "250m"}, "containers": [container("a", limits=2)]},
        2,
    ),
]


@pytest.mark.parametrize(("spec", "gpus"), [(s, g) for _, s, g in CASES], ids=[i for i, _, _ in CASES])
def test_a_pods_gpus_are_what_the_scheduler_counts(spec: dict[str, Any], gpus: int) -> None:
    assert pod_gpu_request(spec) == gpus


def test_null_fields_as_the_api_returns_them_count_nothing() -> None:
    spec = {
        "containers": [{"name": "a", "resources": {"limits": None, "requests": None}}],
        "initContainers": None,
        "overhead": None,
    }
    assert pod_gpu_request(spec) == 0


def test_a_fractional_gpu_count_is_refused() -> None:
    with pytest.raises(ValueError, match="whole number"):
        pod_gpu_request({"containers": [container("a", limits="0.5")]})
