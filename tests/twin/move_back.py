"""Back to half price on a bare twin, shared by its test (tests/twin/test_engine_move_back.py) and its benchmark
(tests/bench/capacity.py): the program, the watch of the run's pods, and the timing of one move back.

The program is a bare cluster of one standard node with JobSet and the descheduler installed by
``ClusterControllers(descheduler=True)`` through a real ``pulumi up`` (the descheduler's chart is the copy
scripts/install-kubernetes takes from the pinned module; the twin runs its pod as the binary built from the
same module), with short intervals, and a ``PREEMPTIBLE_FIRST`` BatchJob (its default JobSet, a fresh Job per
attempt, so no move waits for the Job controller's growing failure backoff) whose pod is a real local process
(tests/twin/workloads/train_loop.py on the checkpoint runtime). The region has no preemptible capacity when the
cluster is created, so the run falls back to the standard node; :func:`move_back_after_refill` returns the
capacity and times the run's way back to a preemptible node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._programs import local_process
from ._twin import DRIVER, GPU, REGION, Stack, node_classes, pod_log, twin_stack, up, wait_for

API_KEY = "tgp_v1_twin-move-back-0123456789abcdef"
CHARTS = _engine.ROOT / ".kubernetes" / "charts"
TRAIN_LOOP = Path(__file__).resolve().parent / "workloads" / "train_loop.py"
MOVE_BACK_INTERVAL = 15
"""Seconds (the cluster's real time): the youngest a fallback pod is moved back."""
DESCHEDULING_INTERVAL = 5
"""Seconds between the descheduler's looks."""
SPEED = 60
GRACE = 300 / SPEED
"""The pod's grace period in real seconds (BatchJob's default 300 s at the emulator's speed)."""
JOB = "train"
SELECTOR = f"app.kubernetes.io/name={JOB}"


def program(
    num_preemptible_gpus: int, workload: str, descheduling_interval: int = DESCHEDULING_INTERVAL
) -> str:
    """A bare cluster of one standard node, the descheduler installed with short intervals (looking every
    ``descheduling_interval`` seconds), a checkpoint volume ``store``, and ``workload`` (statements)."""
    return f"""\
import pulumi

from together_clusters.components import BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs
from together_clusters.components import ClusterControllersArgs, ContainerSpec, SharedVolume, Sweep, SweepArgs
from together_clusters.components import NodePlacement, PodSettings, provider_for
from together_clusters.platform import ComputeClass
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="move-back", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, num_preemptible_gpus={num_preemptible_gpus},
                                     nvidia_version_id={DRIVER!r}, ready_timeout_minutes=5))
controllers = ClusterControllersArgs(
    descheduler=True,
    chart_source={str(CHARTS)!r},
    move_back_interval_seconds={MOVE_BACK_INTERVAL},
    descheduling_interval_seconds={descheduling_interval},
)
provider = provider_for(cluster, controllers=controllers)
store = CheckpointStore(
    "checkpoints",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="checkpoints", size="100Gi")),
    opts=pulumi.ResourceOptions(provider=provider),
)
{workload}
pulumi.export("kube_config", cluster.kube_config)
pulumi.export("cluster_id", cluster.id)
"""


def batch_job_program(descheduling_interval: int = DESCHEDULING_INTERVAL) -> str:
    """The program of :data:`BATCH_JOB`, its descheduler looking every ``descheduling_interval`` seconds."""
    return program(8, _BATCH_JOB_WORKLOAD, descheduling_interval)


_BATCH_JOB_WORKLOAD = f"""\
BatchJob(
    {JOB!r},
    BatchJobArgs(
        container={local_process(TRAIN_LOOP)},
        checkpoint=store.storage,
        job_name={JOB!r},
        placement=NodePlacement(ComputeClass.PREEMPTIBLE_FIRST),
        pod=PodSettings(namespace="default"),
    ),
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]),
)"""
BATCH_JOB = batch_job_program()


def charts_missing() -> str | None:
    """Why the descheduler cannot be installed here, or None when it can."""
    if (CHARTS / "descheduler" / "Chart.yaml").is_file():
        return None
    return "scripts/install-kubernetes has not copied the descheduler's chart"


@dataclass(frozen=True)
class FallbackRun:
    """The stack of :data:`BATCH_JOB` brought up while its region had no preemptible capacity."""

    stack: Stack
    api: client.ApiClient
    core: client.CoreV1Api
    admin: AdminClient
    cluster_id: str


@contextmanager
def fallback_run(
    tmp: Path, name: str = "move-back", descheduling_interval: int = DESCHEDULING_INTERVAL
) -> Iterator[FallbackRun]:
    """``pulumi up`` of :data:`BATCH_JOB` (its descheduler looking every ``descheduling_interval`` seconds) on a
    bare twin (the stack installs JobSet and the descheduler) whose region has no preemptible capacity: a
    shortfall from the start; the emulator and its twin stop on the way out."""
    source = batch_job_program(descheduling_interval)
    with twin_stack(tmp, name, source, API_KEY, TwinOptions(jobset=False), speed=SPEED) as stack:
        admin = stack.emulator.admin
        admin.set_capacity(REGION, GPU, 0)
        api = up(stack)
        cluster_id = str(_engine.stack_outputs(stack.project, stack.env)["cluster_id"])
        yield FallbackRun(stack, api, client.CoreV1Api(api), admin, cluster_id)


class Disruptions:
    """Watches the run's pods and keeps each one's ``DisruptionTarget`` condition (reason and time) and when
    its container ran and ended: the evicted pod is gone by the time a test looks (the Job deletes it).
    The API's times are whole seconds; ``seen_at[(what, uid)]`` is when the watch first saw each of them
    ("disrupted", "running", "ended"), on the ``time.monotonic`` clock."""

    def __init__(self, api: client.ApiClient, selector: str = SELECTOR) -> None:
        self._core = client.CoreV1Api(api)
        self._selector = selector
        self.disrupted: dict[str, tuple[str, datetime]] = {}
        self.running: dict[str, datetime] = {}
        self.ended: dict[str, datetime] = {}
        self.seen_at: dict[tuple[str, str], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Disruptions:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self._core.list_namespaced_pod,
                    "default",
                    label_selector=self._selector,
                    timeout_seconds=10,
                )
                for event in stream:
                    self._record(event["object"], time.monotonic())
            except (ApiException, urllib3.exceptions.HTTPError):
                self._stop.wait(0.5)

    def _record(self, pod: Any, now: float) -> None:
        uid = pod.metadata.uid
        for condition in pod.status.conditions or []:
            if condition.type == "DisruptionTarget" and condition.status == "True":
                self.disrupted.setdefault(uid, (condition.reason, condition.last_transition_time))
                self.seen_at.setdefault(("disrupted", uid), now)
        for status in pod.status.container_statuses or []:
            if status.state.running and status.state.running.started_at:
                self.running.setdefault(uid, status.state.running.started_at)
                self.seen_at.setdefault(("running", uid), now)
            if status.state.terminated and status.state.terminated.finished_at:
                self.ended.setdefault(uid, status.state.terminated.finished_at)
                self.seen_at.setdefault(("ended", uid), now)


def running_on(
    core: client.CoreV1Api, compute_class: str, besides: set[str], selector: str = SELECTOR
) -> Any:
    """The run's pod that is running on a node of ``compute_class``, if it is none of ``besides``."""
    classes = node_classes(core)
    for pod in core.list_namespaced_pod("default", label_selector=selector).items:
        if (
            pod.status.phase == "Running"
            and not pod.metadata.deletion_timestamp
            and pod.metadata.uid not in besides
            and classes.get(pod.spec.node_name) == compute_class
        ):
            return pod
    return None


def logged(core: client.CoreV1Api, pod: Any, wanted: Callable[[str], bool]) -> str | None:
    text = pod_log(core, pod.metadata.name, container="main")
    return text if wanted(text) else None


def saved_once(core: client.CoreV1Api, pod: Any) -> None:
    """Wait until the pod has saved a checkpoint of its own (train_loop logs ``saved step=`` after each)."""
    wait_for(lambda: logged(core, pod, lambda t: "saved step=" in t), f"{pod.metadata.name} to save")


def fall_back(core: client.CoreV1Api, admin: AdminClient, cluster_id: str, besides: set[str]) -> Any:
    """Preempt the run's preemptible node with no capacity to refill it: its replacement runs on the standard
    node at once (returned, once it has saved)."""
    admin.set_capacity(REGION, GPU, 0)
    admin.preempt(cluster_id)
    pod = wait_for(lambda: running_on(core, "standard", besides), "the replacement on the standard node")
    saved_once(core, pod)
    return pod


def fallen_back(run: FallbackRun) -> Any:
    """The run's first pod, on the standard node (no preemptible node at all), once it has saved."""
    pod = wait_for(lambda: running_on(run.core, "standard", set()), "the run on the standard node")
    saved_once(run.core, pod)
    return pod


def ready_preemptible_nodes(core: client.CoreV1Api) -> list[str] | None:
    nodes = [
        n.metadata.name
        for n in core.list_node().items
        if n.metadata.labels.get("together.ai/compute-class") == "preemptible"
        and not n.spec.unschedulable
        and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        and not any(t.key.startswith("node.kubernetes.io/") for t in n.spec.taints or [])
    ]
    return nodes or None


def wait_until_movable(pod: Any) -> None:
    """Sleep until ``pod`` is ``MOVE_BACK_INTERVAL`` old: the descheduler may move it from then on."""
    old_enough = pod.metadata.creation_timestamp.timestamp() + MOVE_BACK_INTERVAL
    time.sleep(max(0.0, old_enough - time.time()))


@dataclass(frozen=True)
class MoveBack:
    """One move back of a fallback pod, in real seconds, each part as the test's watches first saw its end."""

    replacement: Any
    """The moved-back pod, Running on a preemptible node."""
    total: float
    """The refill (``set_capacity``) to the replacement Running."""
    node_arrival: float
    """The refill to a Ready, schedulable preemptible node (the platform's provisioning)."""
    eviction: float
    """That node Ready to the descheduler's eviction (``DisruptionTarget``)."""
    save: float
    """The eviction to the evicted container's exit: the part of its grace the pod used to save."""
    start: float
    """That exit to the replacement's container running (the JobSet's fresh Job, the scheduler, the process)."""

    @property
    def since_node_ready(self) -> float:
        """The refilled node Ready to the replacement Running: what the descheduler, the pod and the scheduler
        take once there is room."""
        return self.total - self.node_arrival

    def parts(self) -> str:
        return (
            f"node arrival {self.node_arrival:.1f} s, eviction {self.eviction:.1f} s, "
            f"save {self.save:.1f} s (of a {GRACE:g} s grace), replacement running {self.start:.1f} s"
        )


def move_back_after_refill(
    run: FallbackRun, seen: Disruptions, fallback: Any, besides: set[str], delay: float = 0.0
) -> MoveBack:
    """Once ``fallback`` (Running on the standard node) is old enough to be moved, and ``delay`` seconds more,
    return the region's capacity and time the run back to a preemptible node: the replacement is none of
    ``besides``. (Moves repeated at the same pace meet the descheduler's loop at the same point of its
    interval: a delay chooses another.)"""
    uid = fallback.metadata.uid
    wait_until_movable(fallback)
    time.sleep(delay)
    refilled = time.monotonic()
    run.admin.set_capacity(REGION, GPU, 8)
    wait_for(lambda: ready_preemptible_nodes(run.core), "the refilled preemptible node", timeout=30)
    arrived = time.monotonic()
    back = wait_for(
        lambda: running_on(run.core, "preemptible", besides | {uid}),
        "the replacement moved back",
        timeout=6 * DESCHEDULING_INTERVAL + 60,
    )
    evicted = wait_for(lambda: seen.seen_at.get(("disrupted", uid)), "the eviction's condition")
    ended = wait_for(lambda: seen.seen_at.get(("ended", uid)), "the evicted container's end")
    started = wait_for(lambda: seen.seen_at.get(("running", back.metadata.uid)), "the replacement's start")
    return MoveBack(
        replacement=back,
        total=started - refilled,
        node_arrival=arrived - refilled,
        eviction=evicted - arrived,
        save=ended - evicted,
        start=started - ended,
    )
