"""Issue 24's queue on the twin, through the real engine: ``ClusterControllers(kueue=True)`` installs Kueue's
official chart on a bare twin (its manager pod run as the Kueue binary built from the same module, its webhooks
reached through their Service), a ``WorkloadQueue`` sets up the flavors and queues, and workloads given
``queue=`` are admitted by the real Kueue.

One stack for the module: the region's preemptible capacity is 0 when the cluster is created (the fixture), so
the first test sees a cluster without a single preemptible node; later tests give the pool capacity.

Oracles: the objects as the API server has them (Kueue's Deployment, the Workload objects and their
conditions, the pods and the nodes they are bound to), read with the ``kubernetes`` client.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client

from tests import _engine
from together_clusters.cli.drill.runner import DrillArgs, run_drill
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions
from together_clusters.platform.charts import KUEUE, QUEUE_NAME_LABEL

from ._programs import TRAINER
from ._twin import (
    DRIVER,
    GPU,
    REGION,
    Stack,
    kept_off_preemptible,
    node_classes,
    ready_deployment,
    together_clusters_status,
    twin_stack,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-queue-key-0123456789abcdef"
CHARTS = _engine.ROOT / ".kubernetes" / "charts"
WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "default", "workloads")
PREEMPTIONS = 5

PROGRAM = f"""\
import json

import pulumi

from together_clusters.components import (
    BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ClusterControllersArgs, ComputeClass,
    ContainerSpec, KueueSettings, NodePlacement, PodSettings, SharedVolume, TrainingRun, TrainingRunArgs,
    WorkloadQueue, WorkloadQueueArgs, provider_for,
)
from together_clusters.provider import Cluster, ClusterArgs

config = pulumi.Config()
cluster = Cluster("gpu", ClusterArgs(cluster_name="queue", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, num_preemptible_gpus=16, nvidia_version_id={DRIVER!r},
                                     ready_timeout_minutes=5))
# Short timings: a workload whose pods are not all ready within 20 s is evicted and requeued 1-2 s later.
kueue = KueueSettings(pods_ready_timeout_seconds=20, requeue_backoff_base_seconds=1, requeue_backoff_max_seconds=2)
provider = provider_for(cluster, controllers=ClusterControllersArgs(kueue=True, chart_source={str(CHARTS)!r},
                                                                   kueue_settings=kueue))
queue = WorkloadQueue("queue", WorkloadQueueArgs.following(cluster), opts=pulumi.ResourceOptions(provider=provider))
store = CheckpointStore("checkpoints", CheckpointStoreArgs(storage=SharedVolume(claim_name="checkpoints", size="100Gi")),
                        opts=pulumi.ResourceOptions(provider=provider))
opts = pulumi.ResourceOptions(provider=provider, depends_on=[store])
trainer = {TRAINER}
for job_name, compute_class in json.loads(config.get("batchJobs") or "{{}}").items():
    BatchJob(job_name, BatchJobArgs(container=trainer, checkpoint=store.storage, job_name=job_name,
                                    pod=PodSettings(namespace="default"),
                                    placement=NodePlacement(ComputeClass(compute_class)), queue=queue),
             opts=opts)
for run in json.loads(config.get("trainingRuns") or "[]"):
    TrainingRun(run, TrainingRunArgs(coordinator=ContainerSpec(image=trainer.image, command=("coordinator",)),
                                     worker=trainer, num_workers=2, checkpoint=store.storage,
                                     pod=PodSettings(namespace="default"), run_name=run, queue=queue),
                opts=opts)
pulumi.export("kube_config", cluster.kube_config)
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The module's stack, its cluster created while the region has no preemptible capacity at all."""
    if not (CHARTS / "kueue" / "Chart.yaml").is_file():
        pytest.skip("scripts/install-kubernetes has not copied Kueue's chart")
    tmp = tmp_path_factory.mktemp("queue")
    with twin_stack(tmp, "twin-queue", PROGRAM, API_KEY, TwinOptions(jobset=False)) as created:
        created.emulator.admin.set_capacity(REGION, GPU, 0)
        yield created


def deploy(
    stack: Stack, batch_jobs: dict[str, str] | None = None, runs: tuple[str, ...] = ()
) -> client.ApiClient:
    stack.set_config("batchJobs", json.dumps(batch_jobs or {}))
    stack.set_config("trainingRuns", json.dumps(list(runs)))
    return up(stack)


def workload_of(api: client.ApiClient, owner: str) -> dict[str, Any] | None:
    """The Kueue Workload of the JobSet named ``owner``."""
    found = client.CustomObjectsApi(api).list_namespaced_custom_object(*WORKLOADS)["items"]
    for workload in found:
        if any(ref["name"] == owner for ref in workload["metadata"].get("ownerReferences") or []):
            return dict(workload)
    return None


def condition(workload: dict[str, Any] | None, kind: str, status: str = "True") -> dict[str, Any] | None:
    conditions = ((workload or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind and c["status"] == status), None)


def bound_pods(core: client.CoreV1Api, job_set: str) -> list[Any]:
    selector = f"jobset.sigs.k8s.io/jobset-name={job_set}"
    pods = core.list_namespaced_pod("default", label_selector=selector).items
    return [p for p in pods if p.spec.node_name and p.status.phase == "Running"]


def test_kueue_comes_up_and_a_stockout_falls_through_to_the_standard_node(stack: Stack) -> None:
    api = deploy(stack, {"fallback": "preemptible-first", "waits": "preemptible"})
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    # The component waited for Kueue's webhooks to admit a JobSet; its pod's readiness follows.
    deployment = wait_for(
        lambda: ready_deployment(apps, "kueue-controller-manager", KUEUE.namespace),
        "Kueue's Deployment ready",
    )
    (container,) = deployment.spec.template.spec.containers
    assert container.image == "registry.k8s.io/kueue/kueue:v0.17.0"
    # Kept off preemptible nodes, like every controller ClusterControllers installs.
    assert kept_off_preemptible(deployment)
    assert "preemptible" not in node_classes(core).values()  # not one preemptible node

    # Kueue's webhook created the JobSet suspended; Kueue admitted it, preemptible quota free but no node.
    workload = wait_for(
        lambda: condition(workload_of(api, "fallback"), "Admitted") and workload_of(api, "fallback"),
        "the fallback workload admitted",
    )
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["flavors"]["nvidia.com/gpu"] == "queue-standard"
    (pod,) = wait_for(lambda: bound_pods(core, "fallback") or None, "the fallback pod running")
    assert node_classes(core)[pod.spec.node_name] == "standard"
    # A plain PREEMPTIBLE workload does not fall back: Kueue keeps it queued (suspended, no pod), the standard
    # flavor refused for its node affinity.
    pending = wait_for(
        lambda: condition(workload_of(api, "waits"), "QuotaReserved", "False"),
        "Kueue trying the plain PREEMPTIBLE workload",
    )
    assert "flavor queue-standard doesn't match node affinity" in pending["message"], pending
    assert condition(workload_of(api, "waits"), "QuotaReserved") is None
    assert not core.list_namespaced_pod(
        "default", label_selector="jobset.sigs.k8s.io/jobset-name=waits"
    ).items


def test_two_training_runs_that_fit_one_at_a_time_run_whole_and_wait_whole(stack: Stack) -> None:
    stack.emulator.admin.set_capacity(REGION, GPU, 64)
    api = deploy(stack, runs=("run-a", "run-b"))
    core = client.CoreV1Api(api)
    wait_for(
        lambda: list(node_classes(core).values()).count("preemptible") == 2 or None, "two preemptible nodes"
    )

    def one_running_whole() -> tuple[str, str] | None:
        running = {run: len(bound_pods(core, f"{run}-workers")) for run in ("run-a", "run-b")}
        whole = [run for run, count in running.items() if count == 2]
        return (whole[0], "run-b" if whole[0] == "run-a" else "run-a") if whole else None

    admitted, waiting = wait_for(one_running_whole, "one TrainingRun running whole")
    assert condition(workload_of(api, f"{waiting}-workers"), "QuotaReserved") is None
    job_set = client.CustomObjectsApi(api).get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", "default", "jobsets", f"{waiting}-workers"
    )
    assert job_set["spec"]["suspend"] is True
    assert job_set["metadata"]["labels"][QUEUE_NAME_LABEL] == "queue"
    # Not one pod of the waiting run exists, bound or not: it holds nothing.
    selector = f"jobset.sigs.k8s.io/jobset-name={waiting}-workers"
    assert core.list_namespaced_pod("default", label_selector=selector).items == []
    assert len(bound_pods(core, f"{admitted}-workers")) == 2

    # `together-clusters status` reports the waiting run as stalled for capacity, and fails on request.
    reported = together_clusters_status(stack.project, stack.env, "--json", "--fail-on-stalled")
    assert reported.returncode == 4, _engine.output(reported)
    [cluster] = json.loads(reported.stdout)["clusters"]
    stalls = {(s["workload"], s["source"]) for s in cluster["workloads"]["stalled"]}
    assert (f"default/{waiting}", "kueue") in stalls, cluster["workloads"]


def pods_ready_evictions(workload: dict[str, Any] | None) -> int:
    """How many times Kueue evicted ``workload`` for pods not ready in time (its scheduling stats)."""
    stats = ((workload or {}).get("status") or {}).get("schedulingStats") or {}
    return sum(
        e.get("count", 0) for e in stats.get("evictions") or [] if e.get("reason") == "PodsReadyTimeout"
    )


def test_a_queued_workload_preempted_five_times_is_requeued_each_time_never_deactivated(stack: Stack) -> None:
    """Each preemption comes with the refill late: the replacement has no node for longer than the PodsReady
    timeout, so Kueue evicts the workload and requeues it; when capacity returns it is admitted again and runs.
    Five in a row, and it is never deactivated (no backoffLimitCount, kubernetes-sigs/kueue#15255)."""
    stack.emulator.admin.set_capacity(REGION, GPU, 64)
    # Both preemptible nodes taken, so the preempted pod's replacement has nowhere to go but the refill.
    api = deploy(stack, {"preempted": "preemptible", "neighbour": "preemptible"})
    core = client.CoreV1Api(api)
    admin = AdminClient(stack.emulator.base_url)
    modes = list(TerminationMode)
    try:
        for attempt in range(PREEMPTIONS):
            (pod,) = wait_for(
                lambda: bound_pods(core, "preempted") or None, "the queued workload running", 240
            )
            wait_for(lambda: bound_pods(core, "neighbour") or None, "the neighbour on the other node", 240)
            evicted_before = pods_ready_evictions(workload_of(api, "preempted"))
            admin.set_capacity(REGION, GPU, 0)  # the refill comes late
            drill_args = DrillArgs(
                node=pod.spec.node_name,
                twin_url=stack.emulator.base_url,
                termination=modes[attempt % len(modes)],
                timeout_seconds=240,
                log_wait_seconds=0,
            )
            with ThreadPoolExecutor(max_workers=1) as pool:
                drill = pool.submit(run_drill, api, drill_args, progress=lambda _line: None)
                wait_for(
                    lambda before=evicted_before: (
                        pods_ready_evictions(workload_of(api, "preempted")) > before
                    ),
                    f"Kueue requeuing the workload its replacement could not run for, preemption {attempt + 1}",
                    120,
                )
                admin.set_capacity(REGION, GPU, 64)  # capacity returns
                report = drill.result()
            assert report.ok, report
            (again,) = wait_for(
                lambda old=pod.metadata.uid: (
                    [p for p in bound_pods(core, "preempted") if p.metadata.uid != old] or None
                ),
                f"the workload running again after preemption {attempt + 1}",
                240,
            )
            # Not pinned to one node by Kueue's topology (a replacement pinned to the preempted node waits for
            # a node that is gone): any node of the flavor, the refilled one included.
            assert "kubernetes.io/hostname" not in (again.spec.node_selector or {}), again.spec.node_selector
            workload = workload_of(api, "preempted")
            assert condition(workload, "Admitted") is not None, workload
            assert (workload or {})["spec"].get("active", True) is True, workload
            assert condition(workload, "DeactivationTarget") is None, workload
        assert pods_ready_evictions(workload) == PREEMPTIONS, workload
        print(
            f"\nqueued BatchJob, {PREEMPTIONS} preemptions with the refill late: requeued each time, still active"
        )
    finally:
        admin.set_capacity(REGION, GPU, 64)
        admin.close()
        api.close()
