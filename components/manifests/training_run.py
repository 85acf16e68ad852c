"""TrainingRun's objects: a coordinator on standard nodes, torchrun workers on preemptible nodes, a login pod."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from ..args import TrainingRunArgs
from ..checkpoint import contract
from ..placement import placement_for, standard_placement
from ..platform import ComputeClass
from .checkpoints import CheckpointBinding, checkpoint_binding
from .common import (
    Manifest,
    _at_least,
    _env,
    _index_env,
    _metadata,
    _pod_labels,
    _positive,
    _template_metadata,
    labels_for,
    pod_annotations,
    selector_for,
)
from .jobs import AttemptLimits, _job, attempt_job_set
from .pods import container, pod_spec
from .run_keys import run_definition, run_key


def coordinator_host(service_name: str, namespace: str | None) -> str:
    """The DNS name workers use to reach the coordinator through its headless Service.

    Relative to the cluster domain (which is not always cluster.local): the pod's DNS search path
    completes it. Without a namespace, the Service is in the pod's own namespace.
    """
    return f"{service_name}.{namespace}.svc" if namespace is not None else service_name


TORCHRUN_RDZV_BACKEND = "c10d"


def torchrun_env(args: TrainingRunArgs, endpoint: str, rendezvous_id: str) -> list[Manifest]:
    """torchrun's own settings, read from ``PET_<FLAG>`` variables (torch.distributed.run)."""
    minimum = args.num_workers if args.min_workers is None else args.min_workers
    return [
        _env("PET_NNODES", f"{minimum}:{args.num_workers}"),
        _env("PET_NPROC_PER_NODE", str(_processes_per_worker(args))),
        _env("PET_RDZV_BACKEND", TORCHRUN_RDZV_BACKEND),
        _env("PET_RDZV_ENDPOINT", endpoint),
        _env("PET_RDZV_ID", rendezvous_id),
        # The store lives on the coordinator: agents are its clients, and wait long for a replacement.
        _env("PET_RDZV_CONF", f"is_host=false,join_timeout={args.rendezvous_timeout_seconds}"),
        _env("PET_MAX_RESTARTS", str(args.max_restarts)),
    ]


def _processes_per_worker(args: TrainingRunArgs) -> int:
    if args.processes_per_worker is not None:
        return args.processes_per_worker
    return args.worker.gpus or 1


def training_run(name: str, args: TrainingRunArgs) -> list[Manifest]:
    """Coordinator Service and Job (standard nodes), workers' headless Service and one attempt JobSet per
    worker (or one Indexed Job for all), on preemptible nodes, optional login; see :class:`TrainingRunArgs`."""
    run = args.run_name or name
    _positive("num_workers", args.num_workers)
    _positive("grace_period_seconds", args.pod.grace_period_seconds)
    _positive("max_restarts", args.max_restarts)
    _at_least("backoff_limit", args.retries.backoff_limit, 0)
    minimum = args.num_workers if args.min_workers is None else args.min_workers
    if not 1 <= minimum <= args.num_workers:
        raise ValueError(f"min_workers={minimum} must be between 1 and num_workers={args.num_workers}")
    _positive("processes_per_worker", _processes_per_worker(args))
    service_name = f"{run}-coordinator"
    workers_name = f"{run}-workers"
    host = coordinator_host(service_name, args.pod.namespace)
    port = str(args.coordinator_port)
    rendezvous = [_env(contract.ENV_COORDINATOR_HOST, host), _env(contract.ENV_COORDINATOR_PORT, port)]
    world = [
        _env(contract.ENV_NUM_WORKERS, str(args.num_workers)),
        _env(contract.ENV_WORLD_SIZE, str(args.num_workers * _processes_per_worker(args))),
    ]
    key = run_key(args.checkpointing.run_id, run_definition(args.coordinator), run_definition(args.worker))
    # One checkpoint location for the whole world: a step is committed for every rank or not at all.
    storage = checkpoint_binding(
        args.checkpoint, f"{run}/{key}", args.checkpointing.keep_checkpoints, args.pod.grace_period_seconds
    )

    coordinator_labels = labels_for(run, "coordinator", args.pod.labels)
    coordinator_container = container(
        args.coordinator,
        [*rendezvous, *world, *storage.env],
        storage.mounts,
        extra={"ports": [{"name": "rendezvous", "containerPort": args.coordinator_port, "protocol": "TCP"}]},
    )
    coordinator = _job(
        service_name,
        args.pod.namespace,
        coordinator_labels,
        _pod_labels(coordinator_labels, critical=True),
        pod_spec(
            [coordinator_container],
            standard_placement(),
            args.pod.grace_period_seconds,
            storage.volumes,
            "Never",
            args.pod.service_account_name,
            [args.coordinator],
        ),
        {"backoffLimit": args.retries.backoff_limit, "completions": 1, "parallelism": 1},
        args.retries.non_retriable_exit_codes,
        pod_annotations=pod_annotations(args.coordinator),
    )
    service = _headless_service(
        service_name,
        args.pod.namespace,
        coordinator_labels,
        selector_for(run, "coordinator"),
        [{"name": "rendezvous", "port": args.coordinator_port, "targetPort": args.coordinator_port}],
    )
    worker_labels = labels_for(run, "worker", args.pod.labels)
    worker_spec = (
        args.worker if args.worker.shm_size else dataclasses.replace(args.worker, shm_size=args.shm_size)
    )
    worker_placement = placement_for(
        ComputeClass.PREEMPTIBLE, selector_for(run, "worker"), args.preemptible_taint
    )

    def worker_pod(rank: Manifest) -> Manifest:
        worker_container = container(
            worker_spec,
            [rank, *world, *rendezvous, *torchrun_env(args, f"{host}:{port}", key), *storage.env],
            storage.mounts,
        )
        pod = pod_spec(
            [worker_container],
            worker_placement,
            args.pod.grace_period_seconds,
            storage.volumes,
            "Never",
            args.pod.service_account_name,
            [worker_spec],
        )
        # Indexed Job pods are named <job>-<index> (a worker JobSet's Job: <jobset>-attempt-0); with the
        # subdomain they resolve as <job>-<index>.<service>, the address torchrun agents publish to each other.
        pod["subdomain"] = workers_name
        return pod

    workers: list[Manifest]
    if args.retries.fresh_job_per_attempt:
        workers = [
            attempt_job_set(
                f"{workers_name}-{rank}",
                args.pod.namespace,
                worker_labels,
                worker_labels,
                worker_pod(_env(contract.ENV_WORKER_RANK, str(rank))),
                pod_annotations(args.worker),
                AttemptLimits.one_pod(
                    args.retries.backoff_limit,
                    args.retries.non_retriable_exit_codes,
                    name_field="run_name (or the component's name)",
                    name_suffix=f"-workers-{rank}",
                ),
            )
            for rank in range(args.num_workers)
        ]
    else:
        workers = [
            _job(
                workers_name,
                args.pod.namespace,
                worker_labels,
                worker_labels,
                worker_pod(_index_env(contract.ENV_WORKER_RANK)),
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
    worker_service = _headless_service(
        workers_name, args.pod.namespace, worker_labels, selector_for(run, "worker")
    )
    objects = [service, coordinator, worker_service, *workers]
    if args.login is not None:
        objects.append(_login(run, args, rendezvous, storage))
    return objects


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
        "metadata": _metadata(name, namespace, labels),
        "spec": spec,
    }


def _login(run: str, args: TrainingRunArgs, env: Sequence[Manifest], storage: CheckpointBinding) -> Manifest:
    assert args.login is not None
    labels = labels_for(run, "login", args.pod.labels)
    mounts = storage.mounts
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(f"{run}-login", args.pod.namespace, labels),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector_for(run, "login")},
            "template": {
                "metadata": _template_metadata(
                    _pod_labels(labels, critical=True), pod_annotations(args.login)
                ),
                "spec": pod_spec(
                    [container(args.login, env, mounts)],
                    standard_placement(),
                    args.pod.grace_period_seconds,
                    storage.volumes,
                    service_account_name=args.pod.service_account_name,
                    container_specs=[args.login],
                ),
            },
        },
    }
