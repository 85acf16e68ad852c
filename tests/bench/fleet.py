"""Section 10: the fleet (issue 31, part 9): admission of 100 one-pod workloads through a ``FleetQueue`` against
the same 100 on one cluster's queue, a failover against the same eviction requeued within one cluster, and
the memory of the three-cluster twin.

A real ``pulumi up`` on a twin of three clusters (a standard-only manager and two workers in two regions, 13
preemptible nodes each) installs Kueue and JobSet from their charts everywhere and the fleet: MultiKueue on
the manager, the fleet's queue on each worker. The workloads are the BatchJob builder's JobSets (one pod,
one GPU, PREEMPTIBLE), created with the ``kubernetes`` client.

- Admission: 100 JobSets created on the manager (MultiKueue copies each to both workers, the first to
  reserve runs it) against 100 created on one worker, in its own queue (the same ``WorkloadQueue`` builder,
  quota counted against real nodes), timed from the first create to the last pod ``Running``. Batches
  alternate, fleet first then one cluster, and the other way round. Goal: at most 1.5x.
- Failover: a JobSet running in the west loses its node (the region's capacity gone, the node preempted);
  timed until its pod runs in the east. Against: a JobSet on the east's own queue loses its node to the same
  platform preemption while another preemptible node there is free; timed until its pod runs again (until 7
  December the floor drained the node itself, cordon and a pod deleted at once, which skipped the notice's
  delivery and the pod's SIGTERM that the fleet's side pays). Alternated twice. Goal: at most
  1.5x. The fleet's path: the dispatcher sees the pod unschedulable in the west, with no room there and room
  in the east, and gives the workload back (its admission check set to Retry); the manager re-admits it and
  the dispatcher nominates the east, prompting MultiKueue when the western copy has released its quota and
  when the eastern one is admitted (MultiKueue handles a worker's change a second late). The worker's
  PodsReady timeout is only the net.
- Requests: every API server writes an audit log (the twin's ``--audit-log``); the requests each answered
  during the fleet's batches are counted per workload by client, and MultiKueue's to the workers by verb and
  resource. Reported, with the floor the busiest of MultiKueue's worker clients sets (v0.17.0: client-go's
  5 requests/s, burst 10, per worker and resource kind).
- Memory: the emulator's process tree (three API servers, their controllers, Kueue and JobSet on each,
  kwok's 29 nodes) once the fleet is up. Reported, no goal.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests import _engine
from together_clusters.components import (
    BatchJobArgs,
    ComputeClass,
    ContainerSpec,
    NoCheckpoint,
    NodePlacement,
    PodSettings,
    Retries,
    manifests,
)
from together_clusters.components.manifests.fleet_queue import KUEUE_NAMESPACE, worker_service_account
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.platform import COMPUTE_CLASS_LABEL, JOBSET_API, JOBSET_NAME_LABEL

from .audit_counts import Client, Request, audit_logs, by_client, requests_within
from .context import Context
from .figures import Figure, Goal, interleaved, unavailable
from .nodes import ready_for_pods, wait_for_ready_nodes
from .servers import API_KEY, Served, twin_emulator
from .stacks import PulumiFailed, engine_missing
from .twin import tree_rss_mib

SECTION = "10. Fleet"
ADMISSION = "fleet admission of 100 one-pod workloads (MultiKueue, 2 workers) vs one cluster's queue"
FAILOVER = "fleet failover (a worker's preemptible node gone, to running in the other region) vs a requeue in one cluster"
MEMORY = "memory of the three-cluster twin with the fleet installed"
REQUESTS = "requests per fleet workload from the manager's MultiKueue to the workers' API servers"
NAMES = (ADMISSION, FAILOVER, MEMORY, REQUESTS)
MULTIKUEUE_USER = f"system:serviceaccount:{KUEUE_NAMESPACE}:{worker_service_account('fleet')}"
"""Who the manager's MultiKueue is on each worker (the FleetQueue ``fleet``'s ServiceAccount there)."""
WORKER_CLIENT_QPS = 5.0
WORKER_CLIENT_BURST = 10
"""client-go's default rate and burst, which MultiKueue v0.17.0's client of each worker keeps for each resource
kind (no setting raises them; Kueue 0.18 and 0.19 reuse ``clientConnection`` for worker clients)."""
WORKLOADS = 100
SPEED = 60.0
WAIT_S = 900.0
PODS_READY_TIMEOUT_S = 30
CHARTS = _engine.ROOT / ".kubernetes" / "charts"
EAST, WEST, GPU = "us-east-2", "us-central-8", "H100_SXM"
PREEMPTIBLE_GPUS = 104
"""13 preemptible nodes per worker: 100 one-GPU workloads fit in either alone."""

PROGRAM = f"""\
import pulumi

from together_clusters.components import (
    ClusterControllersArgs, FleetDispatchArgs, FleetQueue, FleetQueueArgs, KueueSettings, provider_for,
)
from together_clusters.provider import Cluster, ClusterArgs


def cluster(name, region, preemptible):
    return Cluster(name, ClusterArgs(cluster_name=f"bench-{{name}}", region=region, gpu_type={GPU!r}, num_gpus=8,
                                     num_preemptible_gpus=preemptible, ready_timeout_minutes=10))


hub = cluster("hub", {WEST!r}, 0)
east = cluster("east", {EAST!r}, {PREEMPTIBLE_GPUS})
west = cluster("west", {WEST!r}, {PREEMPTIBLE_GPUS})
kueue = KueueSettings(pods_ready_timeout_seconds={PODS_READY_TIMEOUT_S})
hub_k8s = provider_for(hub, name="hub", controllers=ClusterControllersArgs(kueue=True, kueue_settings=kueue))
# The dispatcher at its default interval (the twin runs its pod as a local process, as it runs every
# controller of the package's).
dispatch = FleetDispatchArgs()
fleet = FleetQueue("fleet", FleetQueueArgs(workers=[east, west], dispatch=dispatch),
                   opts=pulumi.ResourceOptions(provider=hub_k8s))
pulumi.export("queue", fleet.local_queue_name)
pulumi.export("hub", hub.kube_config)
pulumi.export("east", east.kube_config)
pulumi.export("west", west.kube_config)
"""

Apis = dict[str, client.ApiClient]


def run(ctx: Context) -> list[Figure]:
    if ctx.scale.quick:
        why = "the quick run skips it (a pulumi up of three clusters with Kueue on each takes minutes)"
        return [unavailable(SECTION, name, why) for name in NAMES]
    missing = engine_missing()
    if missing is None and not (CHARTS / "kueue" / "Chart.yaml").is_file():
        missing = "scripts/install-kubernetes has not copied Kueue's chart"
    if missing is not None:
        return [unavailable(SECTION, name, missing) for name in NAMES]
    # Every API server's audit log: who sent each request, to count what a workload costs and whom.
    with twin_emulator(SPEED, "--audit-log") as emulator:
        admin = AdminClient(emulator.url)
        for region in (EAST, WEST):
            admin.set_capacity(region, GPU, 2 * PREEMPTIBLE_GPUS)
        apis, queue = _deploy(ctx, emulator)
        for worker in ("east", "west"):
            wait_for_ready_nodes(client.CoreV1Api(apis[worker]), 1 + PREEMPTIBLE_GPUS // 8, WAIT_S)
        memory = tree_rss_mib(emulator.pid)
        logs = audit_logs(emulator.url, {_cluster_id(admin, name): name for name in ("hub", "east", "west")})
        windows: dict[str, list[tuple[float, float]]] = {}
        admission = _admission(ctx, apis, queue, windows)
        requests = _requests(ctx, logs, windows, admission)
        failover = _failover(ctx, apis, queue, admin)
    return [
        admission,
        failover,
        requests,
        Figure(
            SECTION,
            MEMORY,
            memory,
            "MiB",
            "reported (no goal): three control planes with Kueue and JobSet, 29 kwok nodes",
            note=f"the emulator's process tree once the fleet was up and its nodes Ready: {memory:.0f} MiB",
        ),
    ]


def _deploy(ctx: Context, emulator: Served) -> tuple[Apis, str]:
    project = _engine.write_project(ctx.workdir / "fleet-bench", "fleet-bench", PROGRAM)
    env = _engine.engine_env(
        ctx.workdir, extra={"TOGETHER_BASE_URL": emulator.url, "TOGETHER_API_KEY": API_KEY}
    )
    for args in (
        ["stack", "init", "bench"],
        ["config", "set", "together:chartSource", str(CHARTS)],
        ["up", *_engine.UP_FLAGS],
    ):
        proc = _engine.run_pulumi(args, cwd=project, env=env)
        if proc.returncode != 0:
            raise PulumiFailed(f"pulumi {args[0]}: {_engine.output(proc)[-3000:]}")
    ctx.progress("fleet: three clusters, Kueue and JobSet on each, and the FleetQueue installed by pulumi up")
    outputs = _engine.stack_outputs(project, env)
    apis = {
        name: config.new_client_from_config_dict(yaml.safe_load(str(outputs[name])))
        for name in ("hub", "east", "west")
    }
    return apis, str(outputs["queue"])


def _wait(done: Callable[[], bool], what: str, timeout: float = WAIT_S) -> float:
    """Seconds until ``done()``; RuntimeError naming ``what`` past ``timeout``."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if done():
            return time.perf_counter() - started
        time.sleep(0.2)
    raise RuntimeError(f"not within {timeout:g}s: {what}")


def _job_sets(prefix: str, count: int, queue: str) -> list[dict[str, Any]]:
    return [
        manifest
        for i in range(count)
        for manifest in manifests.batch_job(
            f"{prefix}-{i}",
            BatchJobArgs(
                container=ContainerSpec(image="trainer:1", gpus=1),
                checkpoint=NoCheckpoint(),
                job_name=f"{prefix}-{i}",
                pod=PodSettings(namespace="default"),
                placement=NodePlacement(ComputeClass.PREEMPTIBLE),
                retries=Retries(fresh_job_per_attempt=True),
                queue=queue,
            ),
        )
    ]


def _create(api: client.ApiClient, job_sets: list[dict[str, Any]]) -> None:
    custom = client.CustomObjectsApi(api)
    for job_set in job_sets:
        custom.create_namespaced_custom_object(
            JOBSET_API.group, JOBSET_API.version, "default", JOBSET_API.plural, job_set
        )


def _delete(api: client.ApiClient, names: set[str]) -> None:
    custom = client.CustomObjectsApi(api)
    for name in names:
        try:
            custom.delete_namespaced_custom_object(
                JOBSET_API.group,
                JOBSET_API.version,
                "default",
                JOBSET_API.plural,
                name,
                propagation_policy="Background",
            )
        except ApiException as gone:
            if gone.status != 404:
                raise


def _running(api: client.ApiClient, names: set[str]) -> dict[str, str]:
    """Each of ``names`` with a pod Running in the cluster of ``api``: the node it runs on."""
    found = {}
    for pod in client.CoreV1Api(api).list_namespaced_pod("default").items:
        name = (pod.metadata.labels or {}).get(JOBSET_NAME_LABEL)
        if name in names and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp:
            found[name] = pod.spec.node_name
    return found


def _gone(apis: Apis, names: set[str]) -> bool:
    return not any(
        (p.metadata.labels or {}).get(JOBSET_NAME_LABEL) in names
        for worker in ("east", "west")
        for p in client.CoreV1Api(apis[worker]).list_namespaced_pod("default").items
    )


def _batch(apis: Apis, where: str, prefix: str, queue: str, window: list[tuple[float, float]]) -> float:
    """Seconds from the first create (on ``where``: ``hub`` through the fleet, or one worker) to every pod
    Running in a worker; then the batch is deleted and its pods waited out. Its wall-clock span goes to
    ``window`` (for the audit logs)."""
    job_sets = _job_sets(prefix, WORKLOADS, queue)
    names = {j["metadata"]["name"] for j in job_sets}
    wall = time.time()
    started = time.perf_counter()
    _create(apis[where], job_sets)

    def all_running() -> bool:
        return names <= set(_running(apis["east"], names)) | set(_running(apis["west"], names))

    _wait(all_running, f"the {prefix} batch all Running")
    elapsed = time.perf_counter() - started
    window.append((wall, wall + elapsed))
    _delete(apis[where], names)
    _wait(lambda: _gone(apis, names), f"the {prefix} batch's pods gone")
    return elapsed


def _admission(ctx: Context, apis: Apis, queue: str, windows: dict[str, list[tuple[float, float]]]) -> Figure:
    samples = interleaved(
        "fleet",
        "one cluster",
        lambda kind, i: _batch(
            apis, "hub" if kind == "fleet" else "east", f"{kind[0]}{i}", queue, windows.setdefault(kind, [])
        ),
        lambda kind: ctx.progress(f"fleet: {WORKLOADS} one-pod workloads through {kind}"),
    )
    ours, floor = statistics.median(samples["fleet"]), statistics.median(samples["one cluster"])
    return Figure(
        SECTION,
        ADMISSION,
        ours / floor,
        "x",
        f"the same {WORKLOADS} JobSets on one worker's own queue: median {floor:.1f} s",
        Goal("<=", 1.5),
        note=f"through the fleet: median {ours:.1f} s (kwok's pods, one GPU each, 13 preemptible nodes per worker)",
        samples=samples,
    )


def _requests(
    ctx: Context, logs: dict[str, Path], windows: dict[str, list[tuple[float, float]]], admission: Figure
) -> Figure:
    """The requests each API server answered while the batches ran, per workload and by client (from the audit
    logs), and the floor MultiKueue's worker clients set: Kueue v0.17.0 builds each worker's client from the
    kubeconfig alone, and controller-runtime gives each resource kind its own REST client, so each worker and
    kind gets client-go's default token bucket (WORKER_CLIENT_QPS, burst WORKER_CLIENT_BURST)."""
    per_kind: dict[str, dict[str, Counter[Client]]] = {kind: {} for kind in windows}
    fleet: dict[str, Counter[Request]] = {}
    for cluster, log in logs.items():
        counted = requests_within(log, windows)
        for kind, counts in counted.items():
            per_kind[kind][cluster] = by_client(counts)
        fleet[cluster] = counted.get("fleet", Counter())
    batches = max(len(windows.get("fleet", [])), 1)

    def per_workload(n: float) -> float:
        return n / batches / WORKLOADS

    lines = [
        f"{kind}, {cluster}: "
        + ", ".join(f"{user} ({agent}) {per_workload(n):.1f}" for (user, agent), n in clients.most_common(6))
        for kind, clusters in per_kind.items()
        for cluster, clients in sorted(clusters.items())
    ]
    # MultiKueue's requests to each worker, by resource kind (each kind its own rate limit).
    by_resource: dict[str, Counter[str]] = {}
    for cluster in ("east", "west"):
        mine = Counter(
            {
                (verb, resource): n
                for ((user, _), verb, resource), n in fleet.get(cluster, Counter()).items()
                if user == MULTIKUEUE_USER
            }
        )
        by_resource[cluster] = Counter()
        for (_, resource), n in mine.items():
            by_resource[cluster][resource] += n
        lines.append(
            f"fleet, {cluster}, MultiKueue by verb: "
            + ", ".join(f"{v} {r} {per_workload(n):.2f}" for (v, r), n in mine.most_common(8))
        )
    for line in lines:
        ctx.progress(f"fleet requests per workload: {line}")
    total = sum(sum(c.values()) for c in by_resource.values())
    worker, resource, busiest = max(
        ((w, r, n) for w, c in by_resource.items() for r, n in c.items()),
        key=lambda found: found[2],
        default=("-", "-", 0),
    )
    floor_s = max(per_workload(busiest) * WORKLOADS - WORKER_CLIENT_BURST, 0) / WORKER_CLIENT_QPS
    measured = statistics.median(admission.samples["fleet"])
    return Figure(
        SECTION,
        REQUESTS,
        round(per_workload(total), 2),
        "requests",
        f"MultiKueue's busiest client ({worker}, {resource}): {per_workload(busiest):.2f} requests per workload at "
        f"{WORKER_CLIENT_QPS:g}/s after a burst of {WORKER_CLIENT_BURST} = at least {floor_s:.0f} s for "
        f"{WORKLOADS} workloads, of the fleet's median {measured:.1f} s",
        note="; ".join(lines),
    )


def _preemptible_nodes(api: client.ApiClient) -> list[str]:
    return [
        n.metadata.name
        for n in client.CoreV1Api(api).list_node().items
        if (n.metadata.labels or {}).get(COMPUTE_CLASS_LABEL) == ComputeClass.PREEMPTIBLE
        and ready_for_pods(n)
        and not n.spec.unschedulable
    ]


def _cluster_id(admin: AdminClient, name: str) -> str:
    return next(c["cluster_id"] for c in admin.clusters() if c["cluster_name"] == f"bench-{name}")


def _fleet_failover(apis: Apis, queue: str, admin: AdminClient, prefix: str) -> float:
    """A JobSet of the fleet runs in the west; the west's preemptible nodes go (its capacity with them):
    seconds until it runs in the east. The west's capacity is then given back and its nodes awaited."""
    (job_set,) = _job_sets(prefix, 1, queue)
    name = job_set["metadata"]["name"]
    admin.set_capacity(EAST, GPU, 0)  # only the west can take it
    east = _cluster_id(admin, "east")
    admin.preempt(east, count=PREEMPTIBLE_GPUS // 8)  # the east's nodes go now: the workload goes west
    _wait(lambda: not _preemptible_nodes(apis["east"]), "the east without preemptible nodes")
    _create(apis["hub"], [job_set])
    _wait(lambda: name in _running(apis["west"], {name}), f"{name} running in the west")
    admin.set_capacity(EAST, GPU, 2 * PREEMPTIBLE_GPUS)
    _wait(lambda: len(_preemptible_nodes(apis["east"])) >= PREEMPTIBLE_GPUS // 8, "the east refilled")
    admin.set_capacity(WEST, GPU, 0)
    started = time.perf_counter()
    admin.preempt(_cluster_id(admin, "west"), count=PREEMPTIBLE_GPUS // 8)
    _wait(lambda: name in _running(apis["east"], {name}), f"{name} running in the east")
    elapsed = time.perf_counter() - started
    _delete(apis["hub"], {name})
    admin.set_capacity(WEST, GPU, 2 * PREEMPTIBLE_GPUS)
    _wait(lambda: len(_preemptible_nodes(apis["west"])) >= PREEMPTIBLE_GPUS // 8, "the west refilled")
    _wait(lambda: _gone(apis, {name}), f"{name}'s pods gone")
    return elapsed


def _local_requeue(apis: Apis, queue: str, admin: AdminClient, prefix: str) -> float:
    """A JobSet on the east's own queue loses its node to the same preemption the fleet's workload meets (the
    platform's call: the node cordoned, the notice, SIGTERM, the node gone after the grace) while other
    preemptible nodes there are free: seconds until it runs again, on another node. The east is then refilled
    to its count."""
    (job_set,) = _job_sets(prefix, 1, queue)
    name = job_set["metadata"]["name"]
    east = _cluster_id(admin, "east")
    _create(apis["east"], [job_set])
    _wait(lambda: name in _running(apis["east"], {name}), f"{name} running in the east")
    node = _running(apis["east"], {name})[name]
    started = time.perf_counter()
    admin.preempt(east, node_ids=[admin.kubernetes_node(node)["node_id"]])
    _wait(
        lambda: _running(apis["east"], {name}).get(name) not in (None, node),
        f"{name} running again in the east",
    )
    elapsed = time.perf_counter() - started
    _delete(apis["east"], {name})
    _wait(lambda: _gone(apis, {name}), f"{name}'s pods gone")
    _wait(lambda: len(_preemptible_nodes(apis["east"])) >= PREEMPTIBLE_GPUS // 8, "the east refilled")
    return elapsed


def _failover(ctx: Context, apis: Apis, queue: str, admin: AdminClient) -> Figure:
    def measure(kind: str, i: int) -> float:
        prefix = f"f{kind[0]}{i}"
        if kind == "fleet":
            return _fleet_failover(apis, queue, admin, prefix)
        return _local_requeue(apis, queue, admin, prefix)

    samples = interleaved(
        "fleet", "one cluster", measure, lambda kind: ctx.progress(f"fleet: a failover through {kind}")
    )
    ours, floor = statistics.median(samples["fleet"]), statistics.median(samples["one cluster"])
    return Figure(
        SECTION,
        FAILOVER,
        ours / floor,
        "x",
        f"the same workload on one cluster's own queue, its node preempted, run again there: median {floor:.1f} s",
        Goal("<=", 1.5),
        note=(
            f"through the fleet: median {ours:.1f} s (the dispatcher gives back a workload whose worker has no "
            f"room left for its pods; the worker's PodsReady timeout, {PODS_READY_TIMEOUT_S} s here, is the net)"
        ),
        samples=samples,
    )
