"""Back to half price, on a bare twin with the real scheduler and the real descheduler: a PREEMPTIBLE_FIRST run
that fell back to the standard node (the region had no preemptible capacity when the cluster was created) is
moved back to a preemptible node once capacity returns, resumes from its checkpoint there, and nothing is
counted as a failure; it is not moved before it is ``move_back_interval_seconds`` old, nor while it is
annotated ``descheduler.alpha.kubernetes.io/prefer-no-eviction``. The issue's Sweep: with the region's capacity
back, the trial that waited starts on a preemptible node and the one that ran on standard is moved to the other.

``ClusterControllers(descheduler=True)`` installs the descheduler's chart (the copy scripts/install-kubernetes
takes from the pinned module) with the move-back policy, and JobSet's, through a real ``pulumi up``; the twin
runs their pods as the binaries built from the same modules. The run is a BatchJob (its default JobSet, a
fresh Job per attempt, so no move waits for the Job controller's growing failure backoff) whose pod is a real
local process (tests/twin/workloads/train_loop.py on the checkpoint runtime).

Oracles: the pods as the API server has them (node, ``DisruptionTarget`` condition and its reason, times), the
JobSet's conditions, the replacement's log (the runtime's ``resumed step=`` line).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.components.controllers.move_back import NO_EVICTION_ANNOTATION
from together_clusters.drift.drill_report import parse_resumed
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.platform import FALLBACK_PRIORITY_CLASS, PLACEMENT_LABEL, ComputeClass

from ._programs import local_process
from ._twin import DRIVER, GPU, REGION, failed_workloads, node_classes, twin_stack, up, wait_for

pytestmark = [pytest.mark.engine, pytest.mark.twin]
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
SWEEP = "lr"
TRIALS = f"app.kubernetes.io/name={SWEEP}"


def program(num_preemptible_gpus: int, workload: str) -> str:
    """A bare cluster of one standard node, the descheduler installed with short intervals, a checkpoint
    volume ``store``, and ``workload`` (statements)."""
    return f"""\
import pulumi

from together_clusters.components import BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs
from together_clusters.components import ClusterControllersArgs, ContainerSpec, SharedVolume, Sweep, SweepArgs
from together_clusters.components import provider_for
from together_clusters.platform import ComputeClass
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="move-back", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, num_preemptible_gpus={num_preemptible_gpus},
                                     nvidia_version_id={DRIVER!r}, ready_timeout_minutes=5))
controllers = ClusterControllersArgs(
    descheduler=True,
    chart_source={str(CHARTS)!r},
    move_back_interval_seconds={MOVE_BACK_INTERVAL},
    descheduling_interval_seconds={DESCHEDULING_INTERVAL},
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


BATCH_JOB = program(
    8,
    f"""\
BatchJob(
    {JOB!r},
    BatchJobArgs(
        container={local_process(TRAIN_LOOP)},
        checkpoint=store.storage,
        job_name={JOB!r},
        namespace="default",
        compute_class=ComputeClass.PREEMPTIBLE_FIRST,
    ),
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]),
)""",
)
SWEEP_OF_TWO = program(
    16,
    f"""\
Sweep(
    {SWEEP!r},
    SweepArgs(
        container={local_process(TRAIN_LOOP)},
        trials=({{"lr": 0.1}}, {{"lr": 0.2}}),
        checkpoint=store.storage,
        namespace="default",
        sweep_name={SWEEP!r},
        compute_class=ComputeClass.PREEMPTIBLE_FIRST,
    ),
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]),
)""",
)


class Disruptions:
    """Watches the run's pods and keeps each one's ``DisruptionTarget`` condition (reason and time) and when
    its container ran and ended: the evicted pod is gone by the time a test looks (the Job deletes it).
    The API's times are whole seconds."""

    def __init__(self, api: client.ApiClient, selector: str = SELECTOR) -> None:
        self._core = client.CoreV1Api(api)
        self._selector = selector
        self.disrupted: dict[str, tuple[str, datetime]] = {}
        self.running: dict[str, datetime] = {}
        self.ended: dict[str, datetime] = {}
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
                    pod = event["object"]
                    uid = pod.metadata.uid
                    for condition in pod.status.conditions or []:
                        if condition.type == "DisruptionTarget" and condition.status == "True":
                            self.disrupted.setdefault(uid, (condition.reason, condition.last_transition_time))
                    for status in pod.status.container_statuses or []:
                        if status.state.running and status.state.running.started_at:
                            self.running.setdefault(uid, status.state.running.started_at)
                        if status.state.terminated and status.state.terminated.finished_at:
                            self.ended.setdefault(uid, status.state.terminated.finished_at)
            except (ApiException, urllib3.exceptions.HTTPError):
                self._stop.wait(0.5)


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
    try:
        text = str(core.read_namespaced_pod_log(pod.metadata.name, "default", container="main"))
    except ApiException:
        return None
    return text if wanted(text) else None


def saved_once(core: client.CoreV1Api, pod: Any) -> None:
    """Wait until the pod has trained long enough to have saved (train_loop saves every 20 steps of 0.05 s)."""
    wait_for(lambda: logged(core, pod, lambda t: "training from" in t), f"{pod.metadata.name} to train")
    time.sleep(2)


def fall_back(core: client.CoreV1Api, admin: AdminClient, cluster_id: str, besides: set[str]) -> Any:
    """Preempt the run's preemptible node with no capacity to refill it: its replacement runs on the standard
    node at once (returned, once it has saved)."""
    admin.set_capacity(REGION, GPU, 0)
    admin.preempt(cluster_id)
    pod = wait_for(lambda: running_on(core, "standard", besides), "the replacement on the standard node")
    saved_once(core, pod)
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


def test_a_fallback_run_is_moved_back_to_preemptible_when_capacity_returns_and_resumes(
    tmp_path: Path,
) -> None:
    if not (CHARTS / "descheduler" / "Chart.yaml").is_file():
        pytest.skip("scripts/install-kubernetes has not copied the descheduler's chart")
    options = TwinOptions(jobset=False)  # bare: the stack installs JobSet and the descheduler
    with twin_stack(tmp_path, "move-back", BATCH_JOB, API_KEY, options, speed=SPEED) as stack:
        admin = stack.emulator.admin
        admin.set_capacity(REGION, GPU, 0)  # a shortfall from the start: no preemptible node at all
        api = up(stack)
        core = client.CoreV1Api(api)
        cluster_id = _engine.stack_outputs(stack.project, stack.env)["cluster_id"]
        with Disruptions(api) as seen:
            # Short of preemptible capacity, the run takes the idle standard node.
            fallback = wait_for(lambda: running_on(core, "standard", set()), "the run on the standard node")
            assert ready_preemptible_nodes(core) is None
            assert fallback.spec.priority_class_name == FALLBACK_PRIORITY_CLASS
            assert fallback.metadata.labels[PLACEMENT_LABEL] == ComputeClass.PREEMPTIBLE_FIRST.value
            saved_once(core, fallback)

            # Capacity returns while the pod is young: the descheduler waits until it is old enough.
            admin.set_capacity(REGION, GPU, 8)
            wait_for(lambda: ready_preemptible_nodes(core), "the refilled preemptible node")
            moved = wait_for(
                lambda: running_on(core, "preemptible", {fallback.metadata.uid}),
                "the run moved back to the preemptible node",
                timeout=MOVE_BACK_INTERVAL + 6 * DESCHEDULING_INTERVAL + 60,
            )
            reason, evicted_at = seen.disrupted[fallback.metadata.uid]
            assert reason == "EvictionByEvictionAPI"  # the descheduler's eviction, survived as a disruption
            age = (evicted_at - fallback.metadata.creation_timestamp).total_seconds()
            # Condition times are whole seconds.
            assert age >= MOVE_BACK_INTERVAL - 1, f"moved back at {age:.1f} s old"
            resumed = wait_for(
                lambda: logged(core, moved, lambda t: parse_resumed(t) is not None), "the resumed line"
            )
            step = parse_resumed(resumed)
            assert step is not None and step.step > 0, resumed
            print(f"moved back at {age:.1f} s old, resumed from step {step.step}")

            # Preempted there, with no capacity to refill: the replacement falls back to standard at once...
            been = {fallback.metadata.uid, moved.metadata.uid}
            again = fall_back(core, admin, cluster_id, been)
            # ...and once it is old enough to move, capacity returns: how long until it runs on preemptible.
            old_enough = again.metadata.creation_timestamp.timestamp() + MOVE_BACK_INTERVAL
            time.sleep(max(0.0, old_enough - time.time()))
            refilled = time.monotonic()
            admin.set_capacity(REGION, GPU, 8)
            wait_for(lambda: ready_preemptible_nodes(core), "the refilled preemptible node", timeout=30)
            arrived, arrived_at = time.monotonic() - refilled, datetime.now(UTC)
            been.add(again.metadata.uid)
            back = wait_for(
                lambda: running_on(core, "preemptible", been),
                "the replacement moved back",
                timeout=6 * DESCHEDULING_INTERVAL + 60,
            )
            elapsed = time.monotonic() - refilled
            uid = again.metadata.uid
            _, evicted_at = wait_for(lambda: seen.disrupted.get(uid), "the eviction's condition")
            ended = wait_for(lambda: seen.ended.get(uid), "the evicted container's end")
            started = wait_for(lambda: seen.running.get(back.metadata.uid), "the replacement's start")
            waited, saving, starting = (
                (evicted_at - arrived_at).total_seconds(),
                (ended - evicted_at).total_seconds(),
                (started - ended).total_seconds(),
            )
            print(
                f"refill -> moved-back pod Running: {elapsed:.1f} s = {elapsed / DESCHEDULING_INTERVAL:.2f} "
                f"descheduling intervals of {DESCHEDULING_INTERVAL} s (refill -> node Ready {arrived:.1f} s, "
                f"-> eviction ~{waited:.0f} s, "
                f"eviction -> exit after the save ~{saving:.0f} s of a {GRACE:.0f} s grace, exit -> replacement "
                f"Running ~{starting:.0f} s; whole seconds)"
            )
            # Evicted within one interval of the node's arrival (the API's times are whole seconds); then the
            # pod's save and its replacement's start (the Job's backoff, the scheduler, the process).
            assert waited <= DESCHEDULING_INTERVAL + 1, waited
            wait_for(lambda: logged(core, back, lambda t: parse_resumed(t) is not None), "the resumed line")

            # A pod annotated prefer-no-eviction (what a pod says while it saves) stays where it is, old enough
            # and with room on a preemptible node, until the annotation goes.
            been.add(back.metadata.uid)
            kept = fall_back(core, admin, cluster_id, been)
            marked = {"metadata": {"annotations": {NO_EVICTION_ANNOTATION: "saving"}}}
            core.patch_namespaced_pod(kept.metadata.name, "default", marked)
            old_enough = kept.metadata.creation_timestamp.timestamp() + MOVE_BACK_INTERVAL
            time.sleep(max(0.0, old_enough - time.time()))
            admin.set_capacity(REGION, GPU, 8)
            wait_for(lambda: ready_preemptible_nodes(core), "the refilled preemptible node", timeout=30)
            time.sleep(2 * DESCHEDULING_INTERVAL)
            assert kept.metadata.uid not in seen.disrupted
            assert running_on(core, "standard", been) is not None
            unmarked = {"metadata": {"annotations": {NO_EVICTION_ANNOTATION: None}}}
            core.patch_namespaced_pod(kept.metadata.name, "default", unmarked)
            released = time.monotonic()
            been.add(kept.metadata.uid)
            wait_for(lambda: running_on(core, "preemptible", been), "the pod moved once unmarked", timeout=60)
            print(f"kept on standard while marked; moved {time.monotonic() - released:.1f} s after unmarking")

        # Every move was a disruption the JobSet restarts the run from: nothing counted as a failure.
        assert failed_workloads(api) == []


def test_a_sweep_trial_that_ran_on_standard_is_moved_back_beside_the_one_that_waited(tmp_path: Path) -> None:
    if not (CHARTS / "descheduler" / "Chart.yaml").is_file():
        pytest.skip("scripts/install-kubernetes has not copied the descheduler's chart")
    with twin_stack(tmp_path, "move-back-sweep", SWEEP_OF_TWO, API_KEY, TwinOptions(jobset=False)) as stack:
        admin = stack.emulator.admin
        admin.set_capacity(REGION, GPU, 0)  # a shortfall from the start
        api = up(stack)
        core = client.CoreV1Api(api)
        with Disruptions(api, TRIALS) as seen:
            # One standard node: the first trial takes it, the second waits.
            first = wait_for(
                lambda: running_on(core, "standard", set(), TRIALS), "a trial on the standard node"
            )
            saved_once(core, first)
            assert running_on(core, "standard", {first.metadata.uid}, TRIALS) is None

            # Capacity returns (two nodes): the waiting trial starts on one at once, the first moves to the
            # other once it is old enough, and resumes from its checkpoint.
            admin.set_capacity(REGION, GPU, 16)
            waited = wait_for(
                lambda: running_on(core, "preemptible", {first.metadata.uid}, TRIALS), "the waiting trial"
            )
            moved = wait_for(
                lambda: running_on(core, "preemptible", {first.metadata.uid, waited.metadata.uid}, TRIALS),
                "the first trial moved back",
                timeout=MOVE_BACK_INTERVAL + 6 * DESCHEDULING_INTERVAL + 60,
            )
            reason, _ = seen.disrupted[first.metadata.uid]
            assert reason == "EvictionByEvictionAPI"
            assert waited.metadata.uid not in seen.disrupted  # the trial already on preemptible stays
            resumed = wait_for(
                lambda: logged(core, moved, lambda t: parse_resumed(t) is not None), "the resumed line"
            )
            step = parse_resumed(resumed)
            assert step is not None and step.step > 0, resumed
            trial = "jobset.sigs.k8s.io/jobset-name"  # each trial is a JobSet of its own
            assert (
                moved.metadata.labels[trial] == first.metadata.labels[trial] != waited.metadata.labels[trial]
            )
        assert failed_workloads(api) == []
