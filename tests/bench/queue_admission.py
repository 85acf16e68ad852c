"""Section 8's queue figure: 100 one-pod trials submitted through a ``WorkloadQueue`` (Kueue v0.17 admitting
each, its Topology Aware Scheduling placing it) against the same 100 Jobs unqueued (the scheduler alone),
each timed from the first create to the last pod ``Running``.

A real ``pulumi up`` on a bare twin installs Kueue from its chart (``ClusterControllers(kueue=True)``, the
copy scripts/install-kubernetes takes from the pinned module) and the queue; the Jobs are the BatchJob
builder's (``fresh_job_per_attempt=False``: plain Jobs, the kind Kueue's Job integration suspends and admits),
one GPU each, with and without ``queue=``, created with the ``kubernetes`` client by :data:`CREATORS` at once, as
``pulumi up`` creates a Sweep's trials (its default ``--parallel``). Batches alternate, queued first then unqueued,
and the other way round, after one small untimed batch of each kind (the first batch after the install pays
the connections' and caches' warm-up, whichever kind it is). Goal: at most 1.5x.

Where the time goes (issue 40, part 4), counted per batch from the API server's own metrics
(:mod:`.api_server_counts`) and given in the figure's note: a queued trial costs about twice the writes of an
unqueued one (the Workload and its status, the Job's suspension and unsuspension, the pod's scheduling gate,
Kueue's events) and nearly three times the admission webhook calls (Kueue's webhooks on the Job, the Workload
and the pod), each of which on the twin reaches Kueue through the API server's egress proxy
(:mod:`together_clusters.emulator.kubernetes.service_proxy`), where a real cluster's pod network adds about a
millisecond; and the API server itself calls Kueue's CRD conversion webhook (v1beta2 to v1beta1, which Kueue's
CRDs still serve beside the stored v1beta2) several times per trial, with no client asking for v1beta1. Both
kinds wait for the Job controller, whose default request budget (20/s) creates every pod.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.components import (
    BatchJobArgs,
    ContainerSpec,
    NoCheckpoint,
    PodSettings,
    Retries,
    manifests,
)
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.provider.kubeconfig import kubeconfig_text

from . import api_server_counts
from .api_server_counts import ApiServerCounts
from .context import Context
from .figures import Figure, Goal, interleaved, unavailable
from .nodes import wait_for_ready_nodes
from .servers import API_KEY, Served, api_client, twin_emulator
from .stacks import PulumiFailed, engine_missing

NAME = "admission of 100 queued one-pod trials (Kueue) vs 100 unqueued Jobs, create to all Running"
TRIALS = 100
SPEED = 60.0
WAIT_S = 600.0
CHARTS = _engine.ROOT / ".kubernetes" / "charts"
REGION, GPU, DRIVER = "us-central-8", "H100_SXM", "nv-570-cu128-ubuntu2204"
PREEMPTIBLE_GPUS = 104
"""13 preemptible nodes: every trial fits at once, queued or not."""
CREATORS = 8
"""Jobs created at once: ``pulumi up``'s default ``--parallel`` (8 here), which creates a Sweep's trials."""
WARM_UP = 10
"""Jobs in the untimed batch of each kind before the timed ones."""

PROGRAM = f"""\
import pulumi

from together_clusters.components import ClusterControllersArgs, WorkloadQueue, WorkloadQueueArgs, provider_for
from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster("gpu", ClusterArgs(cluster_name="queue-bench", region={REGION!r}, gpu_type={GPU!r},
                                     num_gpus=8, num_preemptible_gpus={PREEMPTIBLE_GPUS},
                                     nvidia_version_id={DRIVER!r}, ready_timeout_minutes=5))
provider = provider_for(cluster, controllers=ClusterControllersArgs(kueue=True, chart_source={str(CHARTS)!r}))
queue = WorkloadQueue("queue", WorkloadQueueArgs.following(cluster), opts=pulumi.ResourceOptions(provider=provider))
pulumi.export("queue", queue.local_queue_name)
"""


def run(ctx: Context, section: str) -> Figure:
    if ctx.scale.quick:
        return unavailable(
            section, NAME, "the quick run skips it (a pulumi up installing Kueue takes minutes)"
        )
    missing = engine_missing()
    if missing is not None:
        return unavailable(section, NAME, missing)
    if not (CHARTS / "kueue" / "Chart.yaml").is_file():
        return unavailable(section, NAME, "scripts/install-kubernetes has not copied Kueue's chart")
    with twin_emulator(SPEED) as emulator:
        # The default pool (64 GPUs) is smaller than the cluster's target.
        AdminClient(emulator.url).set_capacity(REGION, GPU, 2 * PREEMPTIBLE_GPUS)
        kube, queue = _deploy(ctx, emulator)
        with kube:
            batch, core = client.BatchV1Api(kube), client.CoreV1Api(kube)
            wait_for_ready_nodes(core, 1 + PREEMPTIBLE_GPUS // 8, WAIT_S)
            for kind in ("queued", "unqueued"):
                _batch(batch, core, f"w{kind[0]}", queue if kind == "queued" else None, WARM_UP)
            counts: dict[str, list[ApiServerCounts]] = {"queued": [], "unqueued": []}

            def measure(kind: str, i: int) -> float:
                before = api_server_counts.read(kube)
                elapsed = _batch(batch, core, f"{kind[0]}{i}", queue if kind == "queued" else None)
                counts[kind].append(api_server_counts.read(kube) - before)  # before the batch's deletion
                return elapsed

            samples = interleaved(
                "queued", "unqueued", measure, lambda kind: ctx.progress(f"capacity: {TRIALS} {kind} trials")
            )
    ours, floor = statistics.median(samples["queued"]), statistics.median(samples["unqueued"])
    per_trial = {kind: _per_trial(c) for kind, c in counts.items()}
    return Figure(
        section,
        NAME,
        ours / floor,
        "x",
        f"the same {TRIALS} Jobs unqueued, placed by the scheduler alone: median {floor:.1f} s",
        Goal("<=", 1.5),
        note=(
            f"queued: median {ours:.1f} s for {TRIALS} trials (kwok's pods, one GPU each, 13 preemptible nodes, "
            f"created {CREATORS} at once); per trial, from the API server's metrics: "
            + "; ".join(f"{kind} {_described(c)}" for kind, c in per_trial.items())
        ),
        samples={
            **samples,
            **{f"{kind} {what} per trial": [v[i] for v in values] for kind, values in _by_batch(counts).items()
               for i, what in enumerate(("writes", "webhook calls", "webhook ms", "conversions"))},
        },
    )


def _per_trial(batches: list[ApiServerCounts]) -> tuple[float, float, float, float]:
    """Medians over the batches of writes, webhook calls, webhook milliseconds per call and conversions, per
    trial."""
    rows = [_row(c) for c in batches]
    return tuple(statistics.median(r[i] for r in rows) for i in range(4))  # type: ignore[return-value]


def _row(c: ApiServerCounts) -> tuple[float, float, float, float]:
    per_call = 1000 * c.webhook_seconds / c.webhook_calls if c.webhook_calls else 0.0
    return c.writes / TRIALS, c.webhook_calls / TRIALS, per_call, c.conversions / TRIALS


def _by_batch(counts: dict[str, list[ApiServerCounts]]) -> dict[str, list[tuple[float, float, float, float]]]:
    return {kind: [_row(c) for c in batches] for kind, batches in counts.items()}


def _described(row: tuple[float, float, float, float]) -> str:
    writes, calls, per_call, conversions = row
    return (
        f"{writes:.1f} writes, {calls:.1f} admission webhook calls of {per_call:.0f} ms each "
        f"(as the API server timed them), {conversions:.1f} conversion webhook calls"
    )


def _deploy(ctx: Context, emulator: Served) -> tuple[client.ApiClient, str]:
    project = _engine.write_project(ctx.workdir / "queue-bench", "queue-bench", PROGRAM)
    env = _engine.engine_env(
        ctx.workdir, extra={"TOGETHER_BASE_URL": emulator.url, "TOGETHER_API_KEY": API_KEY}
    )
    for args in (["stack", "init", "bench"], ["up", *_engine.UP_FLAGS]):
        proc = _engine.run_pulumi(args, cwd=project, env=env)
        if proc.returncode != 0:
            raise PulumiFailed(f"pulumi {args[0]}: {_engine.output(proc)[-3000:]}")
    ctx.progress("capacity: Kueue and the queue installed by pulumi up")
    queue = str(_engine.stack_outputs(project, env)["queue"])
    with api_client(emulator.url) as api:
        [cluster] = api.get("/v1/compute/clusters").json()["clusters"]
    settings = client.Configuration()
    settings.connection_pool_maxsize = CREATORS  # one connection per creating thread
    kube = config.new_client_from_config_dict(
        yaml.safe_load(kubeconfig_text(cluster["kube_config"]) or ""), client_configuration=settings
    )
    return kube, queue


def _jobs(prefix: str, queue: str | None, count: int = TRIALS) -> list[dict[str, Any]]:
    return [
        job
        for i in range(count)
        for job in manifests.batch_job(
            f"{prefix}-{i}",
            BatchJobArgs(
                container=ContainerSpec(image="trainer:1", gpus=1),
                checkpoint=NoCheckpoint(),
                job_name=f"{prefix}-{i}",
                pod=PodSettings(namespace="default"),
                retries=Retries(fresh_job_per_attempt=False),
                queue=queue,
            ),
        )
    ]


def _batch(
    batch: client.BatchV1Api, core: client.CoreV1Api, prefix: str, queue: str | None, count: int = TRIALS
) -> float:
    """Seconds from the first create to every pod of the batch Running; then the batch is deleted."""
    jobs = _jobs(prefix, queue, count)
    started = time.perf_counter()
    with ThreadPoolExecutor(CREATORS) as creators:
        list(creators.map(lambda job: batch.create_namespaced_job("default", job), jobs))
    deadline = started + WAIT_S
    names = {job["metadata"]["name"] for job in jobs}
    while time.perf_counter() < deadline:
        pods = core.list_namespaced_pod("default").items
        running = {
            (p.metadata.labels or {}).get("job-name")
            for p in pods
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp
        }
        if names <= running:
            elapsed = time.perf_counter() - started
            break
        time.sleep(0.2)
    else:
        raise RuntimeError(f"the {prefix} batch was not all Running within {WAIT_S:g}s")
    for name in names:
        batch.delete_namespaced_job(name, "default", propagation_policy="Background", grace_period_seconds=0)
    while time.perf_counter() < deadline + WAIT_S:
        left = [
            p
            for p in core.list_namespaced_pod("default").items
            if (p.metadata.labels or {}).get("job-name") in names
        ]
        if not left:
            return elapsed
        for pod in left:
            try:
                core.delete_namespaced_pod(pod.metadata.name, "default", grace_period_seconds=0)
            except ApiException as gone:
                if gone.status != 404:
                    raise
        time.sleep(0.5)
    raise RuntimeError(f"the {prefix} batch's pods were not gone in time")
