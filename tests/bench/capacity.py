"""Section 8: capacity (issue 24): how much later a ``PREEMPTIBLE_FIRST`` pod runs when it falls back to a
standard node, against the scheduler alone placing the same pod there; and how soon a run that fell back is
moved back to a preemptible node once capacity returns (tests/bench/move_back.py).

On a twin cluster created while its region had no preemptible GPU (one standard node, a preemptible target
nobody can fill), pods of the components' placements are created one at a time and timed from the create
to ``Running`` (as a watch of the namespace first sees it): the ``PREEMPTIBLE_FIRST`` placement (a
preference the scheduler cannot meet, the fallback priority) against the ``STANDARD`` one (a requirement it
meets at once), interleaved A B then B A. The pods are kwok's: no image, no checkpoint to restore, so the
figure is the placement's own cost. Goal: at most 1.2x.

The move back needs the Pulumi engine too (a real ``pulumi up`` installs the descheduler); the quick run skips it.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3
import yaml
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.twin.move_back import charts_missing
from together_clusters.components.controllers.priorities import FALLBACK, priority_class_manifest
from together_clusters.components.placement import placement_for
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.platform import ComputeClass
from together_clusters.provider.kubeconfig import kubeconfig_text

from . import move_back, queue_admission
from .context import Context
from .figures import Figure, Goal, unavailable
from .servers import api_client, create_request, twin_emulator
from .stacks import engine_missing
from .twin import twin_missing

SECTION = "8. Capacity"
SPEED = 60.0
FALLBACK_NAME = "Pending to Running on fallback (PREEMPTIBLE_FIRST on a standard node) vs a STANDARD pod"
POLL_S = 0.02
PAIRS, PAIRS_QUICK = 15, 2
"""Interleaved pairs: a pod starts in tens of milliseconds, so many of them."""
TIMEOUT_S = 120.0
REGION, GPU = "us-central-8", "H100_SXM"


def run(ctx: Context) -> list[Figure]:
    missing = twin_missing()
    if missing is not None:
        names = (FALLBACK_NAME, move_back.NAME, move_back.NAME_DEFAULT, queue_admission.NAME)
        return [unavailable(SECTION, name, missing) for name in names]
    with _scarce_cluster(ctx) as core:
        fallback = _fallback_start(ctx, core)
    return [fallback, *_move_back(ctx), queue_admission.run(ctx, SECTION)]


def _move_back(ctx: Context) -> list[Figure]:
    names = (move_back.NAME, move_back.NAME_DEFAULT)
    if ctx.scale.quick:
        reason = f"the quick run skips it (two pulumi ups and {move_back.MOVES} moves back each take minutes)"
        return [unavailable(SECTION, name, reason, move_back.GOAL) for name in names]
    missing = engine_missing() or charts_missing()
    if missing is not None:
        return [unavailable(SECTION, name, missing, move_back.GOAL) for name in names]
    return move_back.run(ctx, SECTION)


@contextmanager
def _scarce_cluster(ctx: Context) -> Iterator[client.CoreV1Api]:
    with twin_emulator(SPEED) as emulator:
        AdminClient(emulator.url).set_capacity(REGION, GPU, 0)
        with api_client(emulator.url) as api:
            reply = api.post("/v1/compute/clusters", json=create_request("scarce", num_preemptible_gpus=16))
            reply.raise_for_status()
            cluster_id = reply.json()["cluster_id"]
            deadline = time.monotonic() + TIMEOUT_S
            while (cluster := api.get(f"/v1/compute/clusters/{cluster_id}").json())["status"] != "Ready":
                if time.monotonic() > deadline:
                    raise RuntimeError("the scarce cluster was not Ready in time")
                time.sleep(0.2)
        kube = config.new_client_from_config_dict(
            yaml.safe_load(kubeconfig_text(cluster["kube_config"]) or "")
        )
        with kube:
            core = client.CoreV1Api(kube)
            _wait_for_a_ready_node(core)
            client.SchedulingV1Api(kube).create_priority_class(priority_class_manifest(FALLBACK))
            ctx.progress("capacity: a cluster with one standard node and no preemptible capacity")
            yield core


def _wait_for_a_ready_node(core: client.CoreV1Api) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            nodes = core.list_node().items
        except ApiException:
            nodes = []
        if any(
            any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            and not any(t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or [])
            for n in nodes
        ):
            return
        time.sleep(0.2)
    raise RuntimeError("no Ready node in time")


def _pod(name: str, compute_class: ComputeClass) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": placement_for(compute_class).pod_labels()},
        "spec": {
            "containers": [
                {"name": "main", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
            ],
            "terminationGracePeriodSeconds": 0,
            **placement_for(compute_class).pod_spec_fields(),
        },
    }


class _RunningWatch:
    """When each pod was first seen Running, from a watch of the namespace (no poll interval to add)."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self._core = core
        self._seen: dict[str, float] = {}
        self._changed = threading.Condition()
        self._watch = watch.Watch()
        version = core.list_namespaced_pod("default").metadata.resource_version
        self._thread = threading.Thread(target=self._follow, args=(version,), daemon=True)
        self._thread.start()

    def _follow(self, version: str) -> None:
        try:
            for event in self._watch.stream(
                self._core.list_namespaced_pod, "default", resource_version=version
            ):
                pod = event["object"]
                if pod.status.phase == "Running":
                    with self._changed:
                        self._seen.setdefault(pod.metadata.name, time.perf_counter())
                        self._changed.notify_all()
        except (ApiException, urllib3.exceptions.HTTPError):
            pass  # the cluster went away after the last pod (a pod waited for in vain times out instead)

    def running_at(self, name: str) -> float:
        with self._changed:
            if not self._changed.wait_for(lambda: name in self._seen, timeout=TIMEOUT_S):
                raise RuntimeError(f"pod {name} did not run within {TIMEOUT_S:g}s")
            return self._seen[name]

    def stop(self) -> None:
        self._watch.stop()


def _time_to_running(
    core: client.CoreV1Api, seen: _RunningWatch, name: str, compute_class: ComputeClass
) -> float:
    started = time.perf_counter()
    core.create_namespaced_pod("default", _pod(name, compute_class))
    elapsed = seen.running_at(name) - started
    core.delete_namespaced_pod(name, "default", grace_period_seconds=0)
    while time.perf_counter() - started < 2 * TIMEOUT_S:
        try:
            core.read_namespaced_pod_status(name, "default")
        except ApiException as gone:
            if gone.status == 404:
                return elapsed
            raise
        time.sleep(POLL_S)
    raise RuntimeError(f"pod {name} was not gone within {TIMEOUT_S:g}s")


def _fallback_start(ctx: Context, core: client.CoreV1Api) -> Figure:
    samples: dict[str, list[float]] = {"fallback": [], "standard": []}
    order = [ComputeClass.PREEMPTIBLE_FIRST, ComputeClass.STANDARD]
    seen = _RunningWatch(core)
    try:
        for repetition in range(PAIRS_QUICK if ctx.scale.quick else PAIRS):
            for compute_class in order if repetition % 2 == 0 else reversed(order):
                key = "fallback" if compute_class is ComputeClass.PREEMPTIBLE_FIRST else "standard"
                samples[key].append(_time_to_running(core, seen, f"{key}-{repetition}", compute_class))
    finally:
        seen.stop()
    ours, floor = statistics.median(samples["fallback"]), statistics.median(samples["standard"])
    return Figure(
        SECTION,
        FALLBACK_NAME,
        ours / floor,
        "x",
        f"a STANDARD pod placed on the same node by the scheduler alone: median {floor * 1000:.0f} ms",
        Goal("<=", 1.2),
        note=f"fallback median {ours * 1000:.0f} ms over {len(samples['fallback'])} pods (kwok's: no image, no checkpoint)",
        samples=samples,
    )
