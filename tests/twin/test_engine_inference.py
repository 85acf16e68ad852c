"""Issue 12's proof for BatchInference: no request lost and none served twice across preemptions.

A BatchInference of four workers (two per preemptible node) is deployed with a real ``pulumi up`` onto the
twin, whose local runtime runs each worker pod's main container as a real process: the test's worker program
(``inference_worker.py``, ``RequestDrain`` over HTTP). It serves requests from a counting queue the test runs
(``counting_queue.py``, leases as a real queue has them). For each termination mode the twin can produce, a
batch of requests is fed and the node the platform reclaims next is preempted at a moment its two workers
hold one request that fits in the drain budget (it must be finished) and one that does not (it must be
handed back) - then the queue must drain.

Oracles: the counting queue's ledger (every request completed exactly once, with its own result; no lease
ever had to expire, so every preempted worker drained; each preempted worker finished or handed back what it
held, as the contract says), and the Deployment controller's status for the replacements. The drill's report
is asserted too (the Deployment survived).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.modes import NODE_KEEPING_MODES, REMEDIATION_MODES
from together_clusters.cli.drill.report import Outcome
from together_clusters.components.checkpoint import RequestDrain
from together_clusters.components.checkpoint.contract import drain_budget_seconds
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions
from together_clusters.emulator.server import RunningEmulator

from . import inference_worker
from ._twin import (
    COMPUTE_CLASS,
    drill_twin,
    fast_remediations,
    remediation_drill_twin,
    twin_stack,
    up,
    wait_for,
)
from .counting_queue import CountingQueue, Held, Record, serve

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-inference-key-0123456789abcdef"
SPEED = 60
GRACE = 300
REPLICAS = 4
NAME = "infer"
# The worker's drain budget in real seconds: the runtime divides DRAIN_BUDGET_SECONDS by the clock's speed.
BUDGET = drain_budget_seconds(GRACE, 0) / SPEED
# Past this point of the budget the request in flight is asked to stop.
LAST_CALL = BUDGET - RequestDrain(BUDGET).stop_seconds
FITS = 0.8 * LAST_CALL
"""A request this long finishes within the budget even when SIGTERM comes as it starts."""
OVERRUNS = 4 * BUDGET
"""A request this long cannot finish within the budget: a worker preempted while serving it hands it back."""
QUICK = 0.2
LEASE_SECONDS = 20 * BUDGET
"""The queue's visibility timeout: longer than any request, so only a worker that died undrained needs it."""
GROUP = (OVERRUNS, FITS, QUICK, FITS)
"""What the test feeds, a group at a time, until the moment to preempt comes."""

PROGRAM = f"""\
import pulumi

from together_clusters.components import BatchInference, BatchInferenceArgs, ContainerSpec, PodSettings
from together_clusters.components.demo import demo_cluster
from together_clusters.emulator.kubernetes.kwok_config import RUN, RUN_LOCAL

config = pulumi.Config()
gpu = demo_cluster("inference", num_preemptible_gpus=16)
BatchInference(
    "{NAME}",
    BatchInferenceArgs(
        container=ContainerSpec(
            image="registry.invalid/inference-worker:1",
            command=("python", {str(Path(inference_worker.__file__))!r}),
            env={{"{inference_worker.ENV_QUEUE_URL}": config.require("queueUrl")}},
            gpus=4,  # two workers per preemptible node: a preemption drains two at once
            pod_annotations={{RUN: RUN_LOCAL}},  # the twin runs the worker as a real local process
        ),
        replicas={REPLICAS},
        deployment_name="{NAME}",
        pod=PodSettings(namespace="default", grace_period_seconds={GRACE}),
    ),
    opts=gpu.opts(),
)
pulumi.export("kube_config", gpu.cluster.kube_config)
"""


@dataclass(frozen=True)
class Deployed:
    api: client.ApiClient
    emulator: RunningEmulator
    queue: CountingQueue


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    tmp = tmp_path_factory.mktemp("inference")
    queue = CountingQueue(lease_seconds=LEASE_SECONDS)
    # The queue outlives the destroy: the deleted workers drain into it.
    with (
        serve(queue) as queue_url,
        twin_stack(tmp, "twin-inference", PROGRAM, API_KEY, options=TwinOptions(), speed=SPEED) as stack,
    ):
        stack.set_config("queueUrl", queue_url)
        api = up(stack)
        try:
            yield Deployed(api, stack.emulator, queue)
        finally:
            api.close()


def worker_pods(core: client.CoreV1Api) -> dict[str, bool]:
    """Every worker pod's name -> whether it runs."""
    pods = core.list_namespaced_pod("default", label_selector="app.kubernetes.io/managed-by").items
    return {p.metadata.name: p.status.phase == "Running" for p in pods}


def workers_by_node(core: client.CoreV1Api) -> dict[str, list[str]]:
    """Preemptible node -> the names of the worker pods running there (not being deleted)."""
    nodes = {
        n.metadata.name: n
        for n in core.list_node(label_selector=f"{COMPUTE_CLASS}=preemptible").items
        if not n.spec.unschedulable
    }
    by_node: dict[str, list[str]] = {name: [] for name in nodes}
    for pod in core.list_namespaced_pod("default", label_selector="app.kubernetes.io/managed-by").items:
        if (
            pod.status.phase == "Running"
            and not pod.metadata.deletion_timestamp
            and pod.spec.node_name in nodes
        ):
            by_node[pod.spec.node_name].append(pod.metadata.name)
    return by_node


def deployment_replaced(apps: client.AppsV1Api, core: client.CoreV1Api, lost_node: str) -> bool:
    status = apps.read_namespaced_deployment_status(NAME, "default").status
    placed = [n for pods in workers_by_node(core).values() for n in pods]
    return status.available_replicas == REPLICAS and len(placed) == REPLICAS and lost_node not in placed


class Feeder:
    """Keeps a few groups of requests ready, each request named after the mode and a counter."""

    def __init__(self, queue: CountingQueue, mode: TerminationMode) -> None:
        self.queue = queue
        self.mode = mode
        self.ids: list[str] = []
        self._counter = itertools.count()

    def top_up(self, ready: int = 2 * len(GROUP)) -> None:
        while len(self.ids) - self.queue.taken_at_least_once(self.ids) < ready:
            for seconds in GROUP:
                request_id = f"{self.mode.value}-{next(self._counter)}"
                self.queue.put(request_id, {"seconds": seconds})
                self.ids.append(request_id)


def the_moment(feeder: Feeder, core: client.CoreV1Api, victim: str) -> dict[str, Held] | None:
    """The victim's workers, when one has just taken a request that fits and another holds one that overruns
    with time to spare: the preemption then exercises both paths of the contract."""
    feeder.top_up()
    pods = set(workers_by_node(core)[victim])
    held = {w: h for w, h in feeder.queue.holding().items() if w.split(":")[0] in pods}
    fits = [h for h in held.values() if h.payload["seconds"] == FITS and h.held_seconds < FITS / 4]
    overruns = [
        h
        for h in held.values()
        if h.payload["seconds"] == OVERRUNS and h.held_seconds < OVERRUNS - 2 * BUDGET
    ]
    return held if fits and overruns else None


def oldest_preemptible(core: client.CoreV1Api) -> str:
    """The node the platform reclaims next: the oldest schedulable preemptible one."""
    nodes = [
        n
        for n in core.list_node(label_selector=f"{COMPUTE_CLASS}=preemptible").items
        if not n.spec.unschedulable
    ]
    return min(nodes, key=lambda n: (n.metadata.creation_timestamp, n.metadata.name)).metadata.name


def last_outcome(record: Record, worker: str) -> Any:
    return next(o for o in reversed(record.outcomes) if o.worker == worker)


@pytest.mark.parametrize("mode", list(TerminationMode), ids=[m.value for m in TerminationMode])
def test_no_request_is_lost_or_served_twice_across_a_preemption(
    stack: Deployed, mode: TerminationMode
) -> None:
    core, apps = client.CoreV1Api(stack.api), client.AppsV1Api(stack.api)
    admin = AdminClient(stack.emulator.base_url)
    queue = stack.queue
    try:
        wait_for(lambda: sum(map(len, workers_by_node(core).values())) == REPLICAS, "every worker to run")
        feeder = Feeder(queue, mode)
        victim = oldest_preemptible(core)
        held = wait_for(
            lambda: the_moment(feeder, core, victim),
            f"the workers on {victim} to hold a request that fits and one that overruns",
        )
        before = set(worker_pods(core))
        report = drill_twin(stack.api, admin, stack.emulator.base_url, mode, node=victim)
        assert [(w.kind, w.name, w.outcome, w.pods_lost) for w in report.workloads] == [
            ("Deployment", NAME, Outcome.SURVIVED, len(held))
        ], report
        # "Survived" means replacements run, not the replicas that were never preempted.
        replacements = [name for name, running in worker_pods(core).items() if running and name not in before]
        assert len(replacements) >= len(held), (report, worker_pods(core))
        wait_for(
            lambda: deployment_replaced(apps, core, victim), "the Deployment's replacements to be available"
        )
        wait_for(queue.drained, "every request to be completed", timeout=300)
    finally:
        admin.close()

    records = queue.records()
    assert queue.problems() == []
    assert [(i, o) for i, r in records.items() for o in r.outcomes if o.kind == "expired"] == [], (
        "a lease expired: a worker died without finishing or handing back its request"
    )
    # What the preempted workers held: the request that fits was finished, the other handed back.
    for worker, h in held.items():
        outcome = last_outcome(records[h.request_id], worker)
        expected = "complete" if h.payload["seconds"] == FITS else "hand-back"
        assert (outcome.kind, outcome.draining) == (expected, True), (worker, h, records[h.request_id])
    # The handed-back request was then served by a worker that was not preempted.
    victims = {worker.split(":")[0] for worker in held}
    for h in held.values():
        final = records[h.request_id].outcomes[-1]
        assert final.kind == "complete", records[h.request_id]
        if h.payload["seconds"] == OVERRUNS:
            assert final.worker.split(":")[0] not in victims, records[h.request_id]


REPAIR_S = GRACE + 60
"""How long a repair runs (nominal seconds): past the workers' grace, so a drain is never cut by the VM going."""


def held_on(queue: CountingQueue, core: client.CoreV1Api, victim: str, mode: str, fed: list[str]) -> bool:
    """Whether a worker on ``victim`` holds a request (feeding more while none does)."""
    pods = set(workers_by_node(core)[victim])
    if any(worker.split(":")[0] in pods for worker in queue.holding()):
        return True
    if len(fed) - queue.taken_at_least_once(fed) < len(GROUP):
        for seconds in GROUP:
            fed.append(f"remediation-{mode}-{len(fed)}")
            queue.put(fed[-1], {"seconds": seconds})
    return False


def test_no_request_is_lost_or_served_twice_across_every_remediation_mode(stack: Deployed) -> None:
    """Issue 32: each repair mode hits a node whose workers hold requests; the Deployment is whole again and
    the queue drains with every request completed exactly once. A drain (the modes that delete the VM) lets
    each worker finish or hand back what it holds (no lease expires); a reboot or power cycle kills them, and
    what they held comes back only when its lease expires - still served once."""
    core, apps = client.CoreV1Api(stack.api), client.AppsV1Api(stack.api)
    queue = stack.queue
    with fast_remediations(stack.emulator.admin, running_s=REPAIR_S):
        for mode in REMEDIATION_MODES:
            wait_for(lambda: sum(map(len, workers_by_node(core).values())) == REPLICAS, "every worker to run")
            victim = oldest_preemptible(core)
            fed: list[str] = []
            wait_for(
                partial(held_on, queue, core, victim, mode, fed), f"a worker on {victim} to hold a request"
            )
            report = remediation_drill_twin(stack.api, stack.emulator, API_KEY, victim, mode)
            assert [(w.kind, w.name, w.outcome) for w in report.workloads] == [
                ("Deployment", NAME, Outcome.SURVIVED)
            ], (mode, report)
            wait_for(
                partial(deployment_replaced, apps, core, victim), f"the Deployment whole again after {mode}"
            )
            wait_for(queue.drained, f"every request to be completed after {mode}", timeout=300)
            records = queue.records()
            assert queue.problems() == [], mode
            expired = [i for i in fed for o in records[i].outcomes if o.kind == "expired"]
            if REMEDIATION_MODES[mode] not in NODE_KEEPING_MODES:
                assert expired == [], (mode, "a drained worker died without finishing or handing back")
