"""TrainingRun's objects: a coordinator on standard nodes, torchrun workers on preemptible nodes, a login pod."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from together_clusters.platform import ComputeClass

from ..args import TrainingRunArgs, queue_name_of
from ..checkpoint import contract
from ..fleet_checks import is_fleet
from ..placement import Placement, placement_for
from ..violations import Violation
from .awaiting import DEPLOYMENT_ACCEPTED_ANNOTATIONS
from .checkpoints import CheckpointBinding, checkpoint_binding, lease_holder_label
from .checks import (
    at_least,
    container_violations,
    job_set_name_violations,
    refuse_invalid,
    shared_settings_violations,
    within,
)
from .common import (
    Manifest,
    env_entry,
    index_env_entry,
    labels_for,
    object_metadata,
    pod_annotations,
    pod_labels_of,
    selector_for,
    template_metadata_of,
)
from .jobs import (
    AttemptLimits,
    GangMember,
    attempt_job_set,
    gang_job_set,
    gang_pod_hostname,
    longest_pod_name,
    plain_job,
)
from .pods import container, job_pod_spec, pod_spec
from .run_keys import run_definition, run_key
from .workload_queue import submitted_to

CRITICAL_PLACEMENT = placement_for(ComputeClass.STANDARD)
"""The coordinator's and the login pod's: standard nodes, never preempted."""


def coordinator_host(service_name: str, namespace: str | None) -> str:
    """The DNS name workers use to reach the coordinator through its headless Service.

    Relative to the cluster domain (which is not always cluster.local): the pod's DNS search path
    completes it. Without a namespace, the Service is in the pod's own namespace.
    """
    return f"{service_name}.{namespace}.svc" if namespace is not None else service_name


FLEET_COORDINATOR_JOB = "coordinator"
FLEET_WORKERS_JOB = "workers"
"""The replicated Jobs of a TrainingRun in a FleetQueue (one JobSet named after the run)."""


def fleet_coordinator_name(run: str) -> str:
    """The coordinator's DNS name relative to its namespace in a fleet: its pod's hostname under the
    JobSet's own headless Service, which the worker cluster's JobSet controller creates where the run lands."""
    return f"{gang_pod_hostname(run, FLEET_COORDINATOR_JOB)}.{run}"


TORCHRUN_RDZV_BACKEND = "c10d"


def torchrun_env(args: TrainingRunArgs, endpoint: str, rendezvous_id: str) -> list[Manifest]:
    """torchrun's own settings, read from ``PET_<FLAG>`` variables (torch.distributed.run)."""
    return [
        env_entry("PET_NNODES", f"{_min_workers(args)}:{args.num_workers}"),
        env_entry("PET_NPROC_PER_NODE", str(_processes_per_worker(args))),
        env_entry("PET_RDZV_BACKEND", TORCHRUN_RDZV_BACKEND),
        env_entry("PET_RDZV_ENDPOINT", endpoint),
        env_entry("PET_RDZV_ID", rendezvous_id),
        # The store lives on the coordinator: agents are its clients, and wait long for a replacement.
        env_entry("PET_RDZV_CONF", f"is_host=false,join_timeout={args.rendezvous_timeout_seconds}"),
        env_entry("PET_MAX_RESTARTS", str(args.max_restarts)),
    ]


def _processes_per_worker(args: TrainingRunArgs) -> int:
    if args.processes_per_worker is not None:
        return args.processes_per_worker
    return args.worker.gpus or 1


NAME_FIELD = "run_name (or the component's name)"
"""The argument a TrainingRun's objects are named after, as errors name it."""


def argument_violations(name: str, args: TrainingRunArgs) -> list[Violation]:
    """Every problem of a TrainingRun's arguments (the guard then checks what they render)."""
    run = args.run_name or name
    minimum = _min_workers(args)
    found = [
        *at_least("num_workers", args.num_workers, 1),
        *at_least("max_restarts", args.max_restarts, 1),
        *at_least("backoff_limit", args.retries.backoff_limit, 0),
        *at_least("processes_per_worker", _processes_per_worker(args), 1),
        *within(
            "min-workers",
            "min_workers",
            minimum,
            1,
            args.num_workers,
            f"min_workers={minimum} must be between 1 and num_workers={args.num_workers}",
            "leave it unset (all workers) or choose a number in that range",
        ),
        *shared_settings_violations(args.pod, args.retries, args.checkpointing),
    ]
    for field_name in ("coordinator", "worker", "login"):
        spec = getattr(args, field_name)
        if spec is not None:
            found += container_violations(spec, field=field_name)
    if is_fleet(args.queue):
        # One JobSet named after the run, whatever fresh_job_per_attempt says (see _fleet_job_set).
        job, completions = max(
            ((FLEET_COORDINATOR_JOB, 1), (FLEET_WORKERS_JOB, max(args.num_workers, 1))),
            key=lambda member: len(longest_pod_name(run, member[1], member[0])),
        )
        return [
            *found,
            *job_set_name_violations(NAME_FIELD, run, run, completions, job, attempts_optional=False),
        ]
    if args.retries.fresh_job_per_attempt and args.num_workers >= 1:
        if args.queue is not None:
            found += job_set_name_violations(NAME_FIELD, run, f"{run}-workers", args.num_workers)
        else:
            found += job_set_name_violations(NAME_FIELD, run, f"{run}-workers-{args.num_workers - 1}")
    return found


def _min_workers(args: TrainingRunArgs) -> int:
    return args.num_workers if args.min_workers is None else args.min_workers


@dataclass(frozen=True)
class _Run:
    """What every part of one training run shares: its names, the rendezvous, the world, the checkpoints."""

    name: str
    key: str
    """The run key: where the world's checkpoints live under the run."""
    rendezvous: tuple[Manifest, ...]
    world: tuple[Manifest, ...]
    storage: CheckpointBinding
    coordinator_address: str
    """The coordinator's DNS name, as workers reach it."""

    @property
    def coordinator_service(self) -> str:
        return f"{self.name}-coordinator"

    @property
    def workers_service(self) -> str:
        return f"{self.name}-workers"


def training_run(name: str, args: TrainingRunArgs) -> list[Manifest]:
    """Coordinator Service and Job (standard nodes), workers' headless Service and one attempt JobSet per
    worker (or one Indexed Job for all), on preemptible nodes, optional login; see :class:`TrainingRunArgs`."""
    refuse_invalid(f"TrainingRun {name!r}", argument_violations(name, args))
    run = _run(args.run_name or name, args)
    if is_fleet(args.queue):
        return [submitted_to(_fleet_job_set(run, args), queue_name_of(args.queue))]
    objects = [
        _coordinator_service(run, args),
        _coordinator_job(run, args),
        _headless_service(
            run.workers_service,
            args.pod.namespace,
            labels_for(run.name, "worker", args.pod.labels),
            selector_for(run.name, "worker"),
        ),
        *_workers(run, args),
    ]
    if args.login is not None:
        objects.append(_login(run.name, args, run.rendezvous, run.storage))
    return objects


def _run(name: str, args: TrainingRunArgs) -> _Run:
    in_fleet = is_fleet(args.queue)
    host = coordinator_host(
        fleet_coordinator_name(name) if in_fleet else f"{name}-coordinator", args.pod.namespace
    )
    key = run_key(args.checkpointing.run_id, run_definition(args.coordinator), run_definition(args.worker))
    return _Run(
        name=name,
        key=key,
        rendezvous=(
            env_entry(contract.ENV_COORDINATOR_HOST, host),
            env_entry(contract.ENV_COORDINATOR_PORT, str(args.coordinator_port)),
        ),
        world=(
            env_entry(contract.ENV_NUM_WORKERS, str(args.num_workers)),
            env_entry(contract.ENV_WORLD_SIZE, str(args.num_workers * _processes_per_worker(args))),
        ),
        # One checkpoint location for the whole world: a step is committed for every rank or not at all.
        storage=checkpoint_binding(
            args.checkpoint,
            f"{name}/{key}",
            args.checkpointing.keep_checkpoints,
            args.pod.grace_period_seconds,
            # Every rank of one copy of the run holds the lease under the JobSet's uid (one JobSet in a fleet).
            lease_holder_label(args.queue, runs_as_job_set=True),
        ),
        coordinator_address=host,
    )


def _coordinator_service(run: _Run, args: TrainingRunArgs) -> Manifest:
    return _headless_service(
        run.coordinator_service,
        args.pod.namespace,
        labels_for(run.name, "coordinator", args.pod.labels),
        selector_for(run.name, "coordinator"),
        [{"name": "rendezvous", "port": args.coordinator_port, "targetPort": args.coordinator_port}],
    )


def _coordinator_pod(run: _Run, args: TrainingRunArgs) -> Manifest:
    """The coordinator's pod: on standard nodes (never preempted), hosting the rendezvous store."""
    coordinator_container = container(
        args.coordinator,
        [*run.rendezvous, *run.world, *run.storage.env],
        run.storage.mounts,
        extra={"ports": [{"name": "rendezvous", "containerPort": args.coordinator_port, "protocol": "TCP"}]},
    )
    return job_pod_spec(
        coordinator_container, args.coordinator, CRITICAL_PLACEMENT, args.pod, run.storage.volumes
    )


def _coordinator_job(run: _Run, args: TrainingRunArgs) -> Manifest:
    """The coordinator: on standard nodes (never preempted), critical, hosting the rendezvous store."""
    labels = labels_for(run.name, "coordinator", args.pod.labels)
    return plain_job(
        run.coordinator_service,
        args.pod.namespace,
        labels,
        pod_labels_of(labels, critical=True, placement=CRITICAL_PLACEMENT),
        _coordinator_pod(run, args),
        {"backoffLimit": args.retries.backoff_limit, "completions": 1, "parallelism": 1},
        args.retries.non_retriable_exit_codes,
        pod_annotations=pod_annotations(args.coordinator),
    )


def _worker_pod(run: _Run, args: TrainingRunArgs, rank: Manifest) -> Manifest:
    """A torchrun agent's pod on preemptible nodes, reachable by a stable DNS name."""
    worker_spec = (
        args.worker if args.worker.shm_size else dataclasses.replace(args.worker, shm_size=args.shm_size)
    )
    endpoint = f"{run.coordinator_address}:{args.coordinator_port}"
    worker_container = container(
        worker_spec,
        [rank, *run.world, *run.rendezvous, *torchrun_env(args, endpoint, run.key), *run.storage.env],
        run.storage.mounts,
    )
    pod = job_pod_spec(
        worker_container,
        worker_spec,
        _worker_placement(run, args),
        args.pod,
        run.storage.volumes,
    )
    if not is_fleet(args.queue):
        # Indexed Job pods are named <job>-<index> (a worker JobSet's Job: <jobset>-attempt-0); with the
        # subdomain they resolve as <job>-<index>.<service>, the address torchrun agents publish to each
        # other. In a fleet, the JobSet's own Service and subdomain do it.
        pod["subdomain"] = run.workers_service
    return pod


def _worker_placement(run: _Run, args: TrainingRunArgs) -> Placement:
    return placement_for(args.worker_compute_class, selector_for(run.name, "worker"), args.preemptible_taint)


def _workers(run: _Run, args: TrainingRunArgs) -> list[Manifest]:
    """One attempt JobSet per worker (``fresh_job_per_attempt``), or one Indexed Job for all of them; under
    a queue, one workload holding every worker (see :func:`_queued_workers`)."""
    labels = labels_for(run.name, "worker", args.pod.labels)
    pod_labels = pod_labels_of(labels, critical=False, placement=_worker_placement(run, args))
    queue = queue_name_of(args.queue)
    if queue is not None and args.retries.fresh_job_per_attempt:
        return [submitted_to(_queued_workers(run, args, labels, pod_labels), queue)]
    if queue is not None:
        return [submitted_to(job, queue) for job in _indexed_workers(run, args, labels, pod_labels)]
    if args.retries.fresh_job_per_attempt:
        return [
            attempt_job_set(
                f"{run.workers_service}-{rank}",
                args.pod.namespace,
                labels,
                pod_labels,
                _worker_pod(run, args, env_entry(contract.ENV_WORKER_RANK, str(rank))),
                pod_annotations(args.worker),
                AttemptLimits.one_pod(args.retries.backoff_limit, args.retries.non_retriable_exit_codes),
            )
            for rank in range(args.num_workers)
        ]
    return _indexed_workers(run, args, labels, pod_labels)


def _queued_workers(
    run: _Run, args: TrainingRunArgs, labels: Mapping[str, str], pod_labels: Mapping[str, str]
) -> Manifest:
    """Every worker in one attempt JobSet (one Job, an index per worker): one Kueue workload, so the run is
    admitted whole or not at all, never half-placed holding GPUs. A preempted worker fails that Job and the
    JobSet recreates it whole (the workers' rendezvous restarts from the last checkpoint anyway)."""
    limits = AttemptLimits(
        completions=args.num_workers,
        parallelism=args.num_workers,
        backoff_limit=args.retries.backoff_limit,
        non_retriable_exit_codes=args.retries.non_retriable_exit_codes,
    )
    return attempt_job_set(
        run.workers_service,
        args.pod.namespace,
        labels,
        pod_labels,
        _worker_pod(run, args, index_env_entry(contract.ENV_WORKER_RANK)),
        pod_annotations(args.worker),
        limits,
    )


def _fleet_job_set(run: _Run, args: TrainingRunArgs) -> Manifest:
    """The whole run as one JobSet, for a FleetQueue: one Kueue workload, which MultiKueue dispatches whole to
    one worker cluster (the coordinator and the workers must reach each other, and clusters in different
    regions cannot). Two replicated Jobs: ``coordinator`` (one pod, standard nodes) and ``workers`` (an index
    per worker, preemptible nodes). A preempted worker fails its Job and the JobSet recreates both, so the
    run starts again where its copy landed, from the last world checkpoint (which the rendezvous does
    anyway). No login pod: it would run on the manager, which reaches neither."""
    coordinator_labels = labels_for(run.name, "coordinator", args.pod.labels)
    worker_labels = labels_for(run.name, "worker", args.pod.labels)
    members = [
        GangMember(
            FLEET_COORDINATOR_JOB,
            coordinator_labels,
            pod_labels_of(coordinator_labels, critical=True, placement=CRITICAL_PLACEMENT),
            _coordinator_pod(run, args),
            pod_annotations(args.coordinator),
            AttemptLimits.one_pod(args.retries.backoff_limit, args.retries.non_retriable_exit_codes),
        ),
        GangMember(
            FLEET_WORKERS_JOB,
            worker_labels,
            pod_labels_of(worker_labels, critical=False, placement=_worker_placement(run, args)),
            _worker_pod(run, args, index_env_entry(contract.ENV_WORKER_RANK)),
            pod_annotations(args.worker),
            AttemptLimits(
                completions=args.num_workers,
                parallelism=args.num_workers,
                backoff_limit=args.retries.backoff_limit,
                non_retriable_exit_codes=args.retries.non_retriable_exit_codes,
            ),
        ),
    ]
    return gang_job_set(run.name, args.pod.namespace, labels_for(run.name, "run", args.pod.labels), members)


def _indexed_workers(
    run: _Run, args: TrainingRunArgs, labels: Mapping[str, str], pod_labels: Mapping[str, str]
) -> list[Manifest]:
    return [
        plain_job(
            run.workers_service,
            args.pod.namespace,
            labels,
            pod_labels,
            _worker_pod(run, args, index_env_entry(contract.ENV_WORKER_RANK)),
            {
                "completionMode": "Indexed",
                "completions": args.num_workers,
                "parallelism": args.num_workers,
                # Per worker: one worker's crashes never use up another's retries.
                "backoffLimitPerIndex": args.retries.backoff_limit,
                "maxFailedIndexes": 0,
            },
            args.retries.non_retriable_exit_codes,
            exit_code_action="FailIndex",
            pod_annotations=pod_annotations(args.worker),
        )
    ]


def _headless_service(
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    ports: Sequence[Manifest] = (),
) -> Manifest:
    spec: Manifest = {
        "clusterIP": "None",
        "selector": dict(selector),
        # Peers look each other up before they report ready.
        "publishNotReadyAddresses": True,
    }
    if ports:
        spec["ports"] = list(ports)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_metadata(name, namespace, labels),
        "spec": spec,
    }


def _login(run: str, args: TrainingRunArgs, env: Sequence[Manifest], storage: CheckpointBinding) -> Manifest:
    assert args.login is not None
    labels = labels_for(run, "login", args.pod.labels)
    mounts = storage.mounts
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            **object_metadata(f"{run}-login", args.pod.namespace, labels),
            "annotations": dict(DEPLOYMENT_ACCEPTED_ANNOTATIONS),
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector_for(run, "login")},
            "template": {
                "metadata": template_metadata_of(
                    pod_labels_of(labels, critical=True, placement=CRITICAL_PLACEMENT),
                    pod_annotations(args.login),
                ),
                "spec": pod_spec(
                    [container(args.login, env, mounts)],
                    CRITICAL_PLACEMENT,
                    args.pod.grace_period_seconds,
                    storage.volumes,
                    service_account_name=args.pod.service_account_name,
                    container_specs=[args.login],
                ),
            },
        },
    }
