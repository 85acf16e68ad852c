"""Typed arguments of the components: frozen dataclasses, no Pulumi import.

Text fields (names, images, env values, namespaces) may be ``pulumi.Input`` values, such as another
resource's output: the component resolves them where the engine does (see ``inputs.py``). Fields that
decide the layout the guard checks (counts, grace periods, compute class, taints) are plain, so a bad
layout is refused at preview rather than discovered on the cluster.
``namespace=None`` puts the objects in the Kubernetes provider's namespace (``default`` if it has none).
Secrets never appear here: S3 credentials and env from Secrets are named by Secret and key, and read
by the pod.

The settings several workloads share live in small groups, each defined once: :class:`NodePlacement`
(which nodes), :class:`PodSettings` (namespace, grace period, service account, labels), :class:`Retries`
(what counts as a failure and how often it is retried) and :class:`Checkpointing` (how many checkpoints
are kept, under which run key). A workload's arguments hold those groups, as pulumi-kubernetes nests a
pod's settings: ``BatchJobArgs(container, checkpoint, pod=PodSettings(grace_period_seconds=60))``.

Deprecated, removed in the next minor release: the flat keywords of each group's values
(``BatchJobArgs(compute_class=..., grace_period_seconds=...)``). They still work, folded into their group
(a flat keyword wins over the same value in a group given alongside it), each with a ``DeprecationWarning``
naming the nested path to use. The values read back as attributes (``args.compute_class`` is
``args.placement.compute_class``).
"""

from __future__ import annotations

import copy
import dataclasses
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from enum import Enum
from types import FrameType
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from together_clusters.platform import (
    DEFAULT_PREEMPTIBLE_TAINT,
    GRACE_PERIOD_LIMIT_SECONDS,
    REMEDIATION_MODES_BY_NAME,
    ComputeClass,
    Taint,
)


@dataclass(frozen=True)
class SecretEnv:
    """An environment variable read from a key of a Kubernetes Secret (never stored in Pulumi state)."""

    secret: str
    key: str
    optional: bool = False


@dataclass(frozen=True)
class DataVolume:
    """A volume mounted into the container: a dataset, a model cache, a config.

    Give exactly one source: ``claim_name`` (a PersistentVolumeClaim, e.g. the shared filesystem),
    ``config_map``, ``secret``, or ``host_path`` (a node's local disk: gone with a preempted node).
    """

    name: str
    mount_path: str
    claim_name: str | None = None
    config_map: str | None = None
    secret: str | None = None
    host_path: str | None = None
    sub_path: str | None = None
    read_only: bool = True


@dataclass(frozen=True)
class Probe:
    """An HTTP GET, TCP or command probe (the container's readiness, liveness or startup)."""

    http_path: str | None = None
    port: int | None = None
    command: tuple[str, ...] = ()
    initial_delay_seconds: int = 0
    period_seconds: int = 10
    timeout_seconds: int = 1
    failure_threshold: int = 3


@dataclass(frozen=True)
class ContainerSpec:
    """The workload's container.

    ``env`` holds non-secret values; ``secret_env`` reads values from Secrets. ``resources`` adds any
    extended resource (``rdma/ib``, ``ephemeral-storage``...) to the limits, next to ``gpus``;
    ``cpu``/``memory`` are requests, ``cpu_limit``/``memory_limit`` limits. ``shm_size`` mounts a
    memory-backed /dev/shm of that size (PyTorch data loaders and NCCL need more than the default 64 MiB).
    ``pod_annotations`` go on the pod that runs this container (a mesh sidecar's, a log shipper's, or the
    emulator's ``twin.together.ai/run: local``, which runs the pod as a real local process on the twin); the
    ones the component sets itself cannot be overridden.
    """

    image: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    secret_env: Mapping[str, SecretEnv] = field(default_factory=dict)
    gpus: int = 0
    cpu: str | None = None
    memory: str | None = None
    cpu_limit: str | None = None
    memory_limit: str | None = None
    resources: Mapping[str, str] = field(default_factory=dict)
    image_pull_policy: str | None = None
    image_pull_secrets: tuple[str, ...] = ()
    volumes: tuple[DataVolume, ...] = ()
    shm_size: str | None = None
    working_dir: str | None = None
    ports: Mapping[str, int] = field(default_factory=dict)
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    startup_probe: Probe | None = None
    pod_annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SharedVolume:
    """Checkpoints on the cluster's shared parallel filesystem, through a PersistentVolumeClaim.

    ``create=False`` uses an existing claim named ``claim_name`` instead of creating one.
    """

    claim_name: str
    size: str = "100Gi"
    storage_class: str | None = None
    access_mode: str = "ReadWriteMany"
    mount_path: str = "/checkpoints"
    create: bool = True


@dataclass(frozen=True)
class S3Bucket:
    """Checkpoints in an S3-compatible bucket; credentials come from the Secret ``credentials_secret``."""

    bucket: str
    credentials_secret: str
    endpoint: str | None = None
    prefix: str = ""
    region: str | None = None
    access_key_id_key: str = "AWS_ACCESS_KEY_ID"
    secret_access_key_key: str = "AWS_SECRET_ACCESS_KEY"


@dataclass(frozen=True)
class NoCheckpoint:
    """No checkpoint storage from the component, said out loud so the guard lets the run on preemptible nodes.

    ``user_managed=False``: nothing to lose (an eval, a scoring pass: a rerun from the start is as good).
    ``user_managed=True``: the workload saves and restores its own state (its own S3 code, a framework's).
    """

    user_managed: bool = False


CheckpointStorage = SharedVolume | S3Bucket
"""Where a workload keeps its checkpoints."""

CheckpointChoice = SharedVolume | S3Bucket | NoCheckpoint
"""A workload's ``checkpoint`` argument."""


@dataclass(frozen=True)
class CheckpointStoreArgs:
    """Arguments of :class:`together_clusters.components.CheckpointStore`."""

    storage: CheckpointStorage
    namespace: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


# --- settings several workloads share -----------------------------------------------------------


@dataclass(frozen=True)
class NodePlacement:
    """Which nodes a workload's pods run on. The code owns the choice; the platform owns the nodes.

    ``compute_class``: preemptible (the default: cheaper, reclaimed with a grace period), standard, or
    preemptible-first (preemptible nodes when there is room, idle standard ones when there is not, yielding
    them to any other pod: see :class:`~together_clusters.platform.ComputeClass`).
    ``critical=True`` marks pods that must never run on preemptible nodes (the guard refuses them there).
    ``preemptible_taint``: the taint the cluster's preemptible nodes carry (None when they carry none).
    """

    compute_class: ComputeClass = ComputeClass.PREEMPTIBLE
    critical: bool = False
    preemptible_taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT


@dataclass(frozen=True)
class PodSettings:
    """Where a workload's objects go and how its pods end.

    ``namespace=None`` puts the objects in the Kubernetes provider's namespace. ``grace_period_seconds``
    is what a pod gets after SIGTERM to save or drain; on preemptible nodes the platform deletes the node
    :data:`~.platform.GRACE_PERIOD_LIMIT_SECONDS` after SIGTERM, so a longer one is refused.
    ``labels`` go on every object and pod, next to the component's own.
    """

    namespace: str | None = None
    grace_period_seconds: int = GRACE_PERIOD_LIMIT_SECONDS
    service_account_name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Retries:
    """What counts as a real failure of a run and how often one is retried (preemptions never count).

    ``backoff_limit``: real failures tolerated (per Job for a BatchJob, per trial for a Sweep, where the
    deprecated flat keyword is ``backoff_limit_per_index``, per worker for a TrainingRun). A workload's own
    default may differ from this class's (a Sweep's is ``Retries(backoff_limit=2)``): a ``Retries`` given
    whole starts from this class's. ``non_retriable_exit_codes``
    end the run at once (a bug, not bad luck). ``fresh_job_per_attempt``: a JobSet whose Job is recreated
    fresh after each preemption (see :class:`BatchJobArgs`).
    """

    backoff_limit: int = 3
    non_retriable_exit_codes: tuple[int, ...] = ()
    fresh_job_per_attempt: bool = True


@dataclass(frozen=True)
class Checkpointing:
    """How a run's checkpoints are kept: ``keep_checkpoints`` newest ones, under a run key.

    ``run_id`` names the run key (keep it to resume across changes you know are compatible); without it
    the key is a digest of what defines the run, so a changed run starts fresh.
    """

    keep_checkpoints: int = 3
    run_id: str | None = None


class Unset(Enum):
    """A flat keyword not given (None is a value some of them take)."""

    UNSET = "unset"


UNSET = Unset.UNSET

ArgsType = TypeVar("ArgsType", bound="type[GroupedArgs]")


class GroupedArgs:
    """Base of a workload's arguments: folds the flat keywords given into their groups (see :func:`flat_keywords`)."""

    FLAT_KEYWORDS: ClassVar[Mapping[str, tuple[str, str]]] = {}
    """Each flat keyword: the group field that holds its value, and its name there."""

    def __post_init__(self, *flat_values: Any) -> None:
        # The dataclass passes the InitVars in declaration order: the flat keywords, UNSET when not given.
        given = {
            name: value
            for name, value in zip(_flat_keyword_names(self), flat_values, strict=True)
            if value is not UNSET
        }
        if not given:
            return
        caller, stacklevel = _caller_of_init()
        replaced = _instance_replaced_by(caller, type(self))
        changes: dict[str, dict[str, Any]] = {}
        for name, value in given.items():
            if replaced is not None and value is getattr(replaced, name):
                # dataclasses.replace passes every flat keyword, read back from the groups it passes too:
                # only the ones its caller changed are given.
                continue
            warnings.warn(
                _deprecation(type(self), name, by_replace=replaced is not None),
                DeprecationWarning,
                stacklevel=stacklevel,
            )
            group, group_field = self.FLAT_KEYWORDS[name]
            changes.setdefault(group, {})[group_field] = value
        for group, values in changes.items():
            object.__setattr__(self, group, dataclasses.replace(getattr(self, group), **values))


# Frames between a GroupedArgs' __post_init__ and the code that asked for the arguments, beyond the
# dataclass's generated __init__: dataclasses.replace, copy.replace (Python 3.13).
_FORWARDING_FILES = frozenset({dataclasses.__file__, copy.__file__})


def _caller_of_init() -> tuple[FrameType, int]:
    """The frame that called the dataclass's ``__init__`` (beyond ``dataclasses.replace``), and the
    ``stacklevel`` of a warning from ``__post_init__`` that names it (so Python shows it in ``__main__``)."""
    # 0: this function, 1: __post_init__, 2: the generated __init__, 3: its caller.
    frame, stacklevel = sys._getframe(3), 3
    while frame.f_back is not None and frame.f_code.co_filename in _FORWARDING_FILES:
        frame, stacklevel = frame.f_back, stacklevel + 1
    return frame, stacklevel


def _instance_replaced_by(caller: FrameType, cls: type) -> Any:
    """The instance ``dataclasses.replace`` (or ``copy.replace``) is copying, or None when not called by it."""
    init_frame = sys._getframe(3)
    if init_frame is caller:
        return None
    for value in init_frame.f_locals.values():
        if type(value) is cls:
            return value
    return None


def _deprecation(cls: type[GroupedArgs], name: str, by_replace: bool) -> str:
    """The DeprecationWarning of a flat keyword: the nested path to use instead."""
    group, group_field = cls.FLAT_KEYWORDS[name]
    if by_replace:
        return (
            f"dataclasses.replace({cls.__name__}, {name}=...) is deprecated: use dataclasses.replace(args, "
            f"{group}=dataclasses.replace(args.{group}, {group_field}=...))"
        )
    # A group given whole starts from its own defaults: name the workload's own where they differ.
    default = _default_group(cls, group)
    kept = {
        f.name: getattr(default, f.name)
        for f in dataclasses.fields(default)
        if f.name != group_field and getattr(default, f.name) != getattr(type(default)(), f.name)
    }
    kept_text = ", ".join(f"{key}={value!r}" for key, value in kept.items())
    nested = ", ".join([f"{group_field}=...", *([kept_text] if kept else [])])
    message = (
        f"{cls.__name__}({name}=...) is deprecated: use "
        f"{cls.__name__}({group}={type(default).__name__}({nested}))"
    )
    return f"{message} ({kept_text} keeps {cls.__name__}' default)" if kept else message


def _default_group(cls: type, group: str) -> Any:
    """A workload's default value of one of its groups."""
    spec = cls.__dataclass_fields__[group]  # type: ignore[attr-defined]
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return spec.default


def flat_keywords(table: Mapping[str, tuple[str, str]]) -> Callable[[ArgsType], ArgsType]:
    """Declare a :class:`GroupedArgs` dataclass's flat keywords, and make each readable as an attribute.

    ``table`` maps each flat keyword (an ``InitVar`` defaulting to :data:`UNSET`, declared where the
    field stood before the groups, so positional calls keep working) to its group field and the name
    there. A given flat keyword replaces that value in its group, with a ``DeprecationWarning`` naming
    the group (so does ``dataclasses.replace(args, compute_class=...)``); reading ``args.compute_class``
    reads the group. ``dataclasses.replace`` passes every flat keyword, read back from the groups: those it
    passes unchanged are not taken as given, so ``dataclasses.replace(args, pod=...)`` swaps a whole group.
    """

    def decorate(cls: ArgsType) -> ArgsType:
        flat_names = set(_flat_keyword_names(cls))
        if flat_names != set(table):
            raise TypeError(f"{cls.__name__}: flat keywords {sorted(flat_names)} differ from {sorted(table)}")
        cls.FLAT_KEYWORDS = dict(table)
        for name, (group, group_field) in table.items():
            setattr(cls, name, _reader(group, group_field))
        return cls

    return decorate


def _flat_keyword_names(args: Any) -> list[str]:
    """A dataclass's InitVars (its flat keywords), in declaration order."""
    own = {f.name for f in dataclasses.fields(args)}
    return [name for name in args.__dataclass_fields__ if name not in own]


def _reader(group: str, group_field: str) -> property:
    return property(lambda self: getattr(getattr(self, group), group_field), doc=f"``{group}.{group_field}``")


_PLACEMENT = {name: ("placement", name) for name in ("compute_class", "critical", "preemptible_taint")}
_POD = {
    name: ("pod", name) for name in ("namespace", "grace_period_seconds", "service_account_name", "labels")
}
_RETRIES = {
    name: ("retries", name) for name in ("backoff_limit", "non_retriable_exit_codes", "fresh_job_per_attempt")
}
_SWEEP_RETRIES = {
    "backoff_limit_per_index": ("retries", "backoff_limit"),
    **{name: group for name, group in _RETRIES.items() if name != "backoff_limit"},
}
_CHECKPOINTING = {name: ("checkpointing", name) for name in ("keep_checkpoints", "run_id")}


@flat_keywords({**_PLACEMENT, **_POD, **_RETRIES, **_CHECKPOINTING})
@dataclass(frozen=True)
class BatchJobArgs(GroupedArgs):
    """Arguments of :class:`together_clusters.components.BatchJob`: one run (experiment, fine-tune, eval, distillation).

    ``checkpoint`` is required on preemptible nodes. ``retries=Retries(non_retriable_exit_codes=...)`` fail
    the Job at once (a bug, not bad luck). ``Retries.backoff_limit`` counts real failures only: preemptions
    are ignored.
    All pods of the Job share one checkpoint directory, so with ``parallelism`` above 1 only one of them
    should save; for per-pod checkpoints use a :class:`SweepArgs` (one trial per pod) instead.
    ``ttl_seconds_after_finished`` lets Kubernetes delete the finished Job behind Pulumi's back: after a
    ``pulumi refresh`` the next ``pulumi up`` creates it again, and the run starts over from its last
    checkpoint.
    ``Retries.fresh_job_per_attempt`` (the default) renders a JobSet whose one Job fails on a preemption and is
    recreated fresh, so the Job controller's pod-failure backoff (10 s doubling to 10 min, counting
    ignored failures too) never builds up: proven on the twin, the 10th replacement ran about 1 s after
    its predecessor ended. Real failures still end it (crashes count against ``backoff_limit`` within
    one attempt). It needs JobSet (v0.11, ``jobset.x-k8s.io/v1alpha2``) in the cluster:
    ``provider_for(cluster)`` installs it (:class:`~together_clusters.components.ClusterControllers`); on a
    provider of your own without one, a cluster without JobSet is refused at preview naming the fix. Or set
    ``retries=Retries(fresh_job_per_attempt=False)`` for a plain Job, which replaces preempted pods itself
    after that growing backoff.
    Checkpoints live under a run key: ``Checkpointing.run_id`` when given (keep it to resume across changes you know
    are compatible), else a digest of the image, command, arguments and env, so a changed run starts
    fresh instead of resuming another run's state.
    """

    container: ContainerSpec
    checkpoint: CheckpointChoice | None
    namespace: InitVar[str | None | Unset] = UNSET
    job_name: str | None = None
    compute_class: InitVar[ComputeClass | Unset] = UNSET
    critical: InitVar[bool | Unset] = UNSET
    preemptible_taint: InitVar[Taint | None | Unset] = UNSET
    grace_period_seconds: InitVar[int | Unset] = UNSET
    backoff_limit: InitVar[int | Unset] = UNSET
    completions: int = 1
    parallelism: int = 1
    non_retriable_exit_codes: InitVar[tuple[int, ...] | Unset] = UNSET
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    keep_checkpoints: InitVar[int | Unset] = UNSET
    service_account_name: InitVar[str | None | Unset] = UNSET
    run_id: InitVar[str | None | Unset] = UNSET
    fresh_job_per_attempt: InitVar[bool | Unset] = UNSET
    labels: InitVar[Mapping[str, str] | Unset] = UNSET
    _: KW_ONLY
    placement: NodePlacement = field(default_factory=NodePlacement)
    pod: PodSettings = field(default_factory=PodSettings)
    retries: Retries = field(default_factory=Retries)
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    queue: Queue | None = None
    """Submit the workload to this Kueue LocalQueue (its name, or a
    :class:`~together_clusters.components.WorkloadQueue`): created suspended, started once Kueue admits it."""


@flat_keywords({**_PLACEMENT, **_POD, **_SWEEP_RETRIES, **_CHECKPOINTING})
@dataclass(frozen=True)
class SweepArgs(GroupedArgs):
    """Arguments of :class:`together_clusters.components.Sweep`: a hyperparameter sweep or ablation, one index per trial.

    Each entry of ``trials`` is a JSON object of that trial's parameters. Each trial checkpoints under
    its own run key: a digest of the container and that trial's parameters (or ``run_id`` and the
    index), so a changed trial starts fresh and the unchanged ones resume.

    ``Retries.fresh_job_per_attempt`` (the default): each trial is a JobSet of its own (``<sweep>-<index>``)
    whose Job is recreated fresh on a preemption, so no trial ever waits on the Job controller's
    growing backoff (see :class:`BatchJobArgs`), and a changed trial replaces only its own JobSet. A
    trial fails on its own after ``Retries.backoff_limit`` failures (2 by default) or a non-retriable exit code,
    and the others go on. Every trial starts at once (beyond the cluster's free GPUs they wait
    Pending): ``parallelism`` and ``max_failed_indexes`` below the number of trials are refused, as
    nothing can cap or count separate JobSets together. Needs JobSet in the cluster (``provider_for`` installs it).

    ``retries=Retries(backoff_limit=2, fresh_job_per_attempt=False)``: one Indexed Job, pod ``i`` runs trial ``i``, at most
    ``parallelism`` at once; the sweep fails after ``max_failed_indexes`` failed trials (default:
    half, rounded up: past that, the sweep is more likely broken than unlucky). Its replacements wait
    on the Job controller's backoff, which counts preemptions too: about 10 minutes after 7 of them.
    """

    container: ContainerSpec
    trials: tuple[Mapping[str, Any], ...]
    checkpoint: CheckpointChoice | None
    namespace: InitVar[str | None | Unset] = UNSET
    sweep_name: str | None = None
    parallelism: int | None = None
    backoff_limit_per_index: InitVar[int | Unset] = UNSET
    max_failed_indexes: int | None = None
    compute_class: InitVar[ComputeClass | Unset] = UNSET
    critical: InitVar[bool | Unset] = UNSET
    preemptible_taint: InitVar[Taint | None | Unset] = UNSET
    grace_period_seconds: InitVar[int | Unset] = UNSET
    non_retriable_exit_codes: InitVar[tuple[int, ...] | Unset] = UNSET
    keep_checkpoints: InitVar[int | Unset] = UNSET
    service_account_name: InitVar[str | None | Unset] = UNSET
    run_id: InitVar[str | None | Unset] = UNSET
    fresh_job_per_attempt: InitVar[bool | Unset] = UNSET
    labels: InitVar[Mapping[str, str] | Unset] = UNSET
    _: KW_ONLY
    placement: NodePlacement = field(default_factory=NodePlacement)
    pod: PodSettings = field(default_factory=PodSettings)
    retries: Retries = field(default_factory=lambda: Retries(backoff_limit=2))
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    queue: Queue | None = None
    """Submit the workload to this Kueue LocalQueue (its name, or a
    :class:`~together_clusters.components.WorkloadQueue`): created suspended, started once Kueue admits it."""


@flat_keywords({**_PLACEMENT, **_POD})
@dataclass(frozen=True)
class BatchInferenceArgs(GroupedArgs):
    """Arguments of :class:`together_clusters.components.BatchInference`: request workers that drain on SIGTERM.

    Queue workers (the default) pull their requests, so nothing routes to them and SIGTERM starts the
    drain at once. With ``service_port`` the component also creates a Service for the workers and a
    preStop pause of ``pre_stop_seconds`` (default 5) so endpoints stop routing before SIGTERM.
    The rest of the grace period (``PodSettings.grace_period_seconds``, 120 by default here: give it when
    you give ``pod=PodSettings(...)``), less a margin, is the drain budget for the request in flight.
    Preemptible workers get no PodDisruptionBudget: it cannot stop a node's deletion, and a refused
    eviction only means the pod dies undrained when the node goes. On standard nodes
    (``placement=NodePlacement(ComputeClass.STANDARD, critical=True)`` for production replicas) a budget of
    ``max_unavailable`` protects against voluntary disruptions such as upgrades.
    """

    container: ContainerSpec
    replicas: int = 2
    namespace: InitVar[str | None | Unset] = UNSET
    deployment_name: str | None = None
    compute_class: InitVar[ComputeClass | Unset] = UNSET
    critical: InitVar[bool | Unset] = UNSET
    preemptible_taint: InitVar[Taint | None | Unset] = UNSET
    grace_period_seconds: InitVar[int | Unset] = UNSET
    service_port: int | None = None
    pre_stop_seconds: int | None = None
    max_unavailable: int | str = 1
    service_account_name: InitVar[str | None | Unset] = UNSET
    labels: InitVar[Mapping[str, str] | Unset] = UNSET
    _: KW_ONLY
    placement: NodePlacement = field(default_factory=NodePlacement)
    pod: PodSettings = field(default_factory=lambda: PodSettings(grace_period_seconds=120))


@flat_keywords({**_POD, **_RETRIES, **_CHECKPOINTING})
@dataclass(frozen=True)
class TrainingRunArgs(GroupedArgs):
    """Arguments of :class:`together_clusters.components.TrainingRun`: a coordinator on standard nodes, workers on preemptible.

    Designed for torchrun elastic (``torch.distributed.run``): each worker pod runs one torchrun agent,
    configured through its ``PET_*`` environment (c10d rendezvous at the coordinator, ``min_workers`` to
    ``num_workers`` nodes, ``processes_per_worker`` processes each, ``max_restarts``), so the worker's
    command is just ``python -m together_clusters.components.checkpoint.launch -- torchrun train.py``.
    The coordinator (standard node, never preempted) hosts the rendezvous store on ``coordinator_port``
    (e.g. ``torch.distributed.TCPStore(host, port, is_master=True)``); agents join as clients.
    When a worker is preempted, the other agents stay up, restart their processes and wait at the
    rendezvous (up to ``rendezvous_timeout_seconds``) for the replacement pod; then every rank resumes
    from the same world-committed checkpoint (``Checkpointer.for_world``). Workers get WORLD_SIZE
    (the process count), NUM_WORKERS, WORKER_RANK (their index), a /dev/shm of ``shm_size`` unless their
    spec sets one, and stable DNS names (a headless Service ``<run>-workers`` and ``subdomain``).
    ``login``, when given, is a critical login pod on standard nodes.

    ``Retries.fresh_job_per_attempt`` (the default): each worker is a JobSet of its own (``<run>-workers-<i>``,
    DNS name ``<run>-workers-<i>-attempt-0-0.<run>-workers``) whose Job is recreated fresh when its
    worker is preempted, so the replacement never waits on the Job controller's backoff (see
    :class:`BatchJobArgs`), however often that worker was preempted: while it waits, every rank waits.
    A worker that fails for real (``Retries.backoff_limit`` crashes, a non-retriable exit code) ends its own
    JobSet ``Failed``; the other agents then fail at the rendezvous once fewer than ``min_workers``
    remain. Needs JobSet in the cluster (``provider_for`` installs it). ``False``: one Indexed Job for all workers (DNS names
    ``<run>-workers-<i>.<run>-workers``), whose replacements wait on that growing backoff.
    """

    coordinator: ContainerSpec
    worker: ContainerSpec
    num_workers: int
    checkpoint: CheckpointStorage | None
    namespace: InitVar[str | None | Unset] = UNSET
    run_name: str | None = None
    coordinator_port: int = 29500
    min_workers: int | None = None
    processes_per_worker: int | None = None
    max_restarts: int = 100
    rendezvous_timeout_seconds: int = 24 * 3600
    shm_size: str = "32Gi"
    login: ContainerSpec | None = None
    preemptible_taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
    grace_period_seconds: InitVar[int | Unset] = UNSET
    backoff_limit: InitVar[int | Unset] = UNSET
    non_retriable_exit_codes: InitVar[tuple[int, ...] | Unset] = UNSET
    keep_checkpoints: InitVar[int | Unset] = UNSET
    service_account_name: InitVar[str | None | Unset] = UNSET
    run_id: InitVar[str | None | Unset] = UNSET
    fresh_job_per_attempt: InitVar[bool | Unset] = UNSET
    labels: InitVar[Mapping[str, str] | Unset] = UNSET

    _: KW_ONLY
    worker_compute_class: ComputeClass = ComputeClass.PREEMPTIBLE
    """Where the workers run: ``PREEMPTIBLE`` (the default) or ``PREEMPTIBLE_FIRST`` (standard nodes when
    preemptible ones are short); the coordinator and login pod are always on standard nodes."""
    pod: PodSettings = field(default_factory=PodSettings)
    retries: Retries = field(default_factory=Retries)
    checkpointing: Checkpointing = field(default_factory=Checkpointing)
    queue: Queue | None = None
    """Submit the workload to this Kueue LocalQueue (its name, or a
    :class:`~together_clusters.components.WorkloadQueue`): created suspended, started once Kueue admits it."""


@runtime_checkable
class QueueReference(Protocol):
    """What a workload's ``queue=`` may be besides a LocalQueue's name: a
    :class:`~together_clusters.components.WorkloadQueue`, whose LocalQueue the workload is submitted to (and
    which its objects then wait for)."""

    @property
    def local_queue_name(self) -> str: ...


Queue = str | QueueReference
"""A workload's ``queue=``: the name of a Kueue LocalQueue in the workload's namespace, or a WorkloadQueue."""


def queue_name_of(queue: Queue | None) -> str | None:
    """The LocalQueue a workload's ``queue=`` names (``None``: not queued)."""
    if queue is None or isinstance(queue, str):
        return queue
    return queue.local_queue_name


@dataclass(frozen=True)
class WorkloadQueueArgs:
    """A Kueue queue for a cluster's workloads: what it may admit, on which capacity.

    ``standard_gpus`` and ``preemptible_gpus``: the cluster's GPUs of each class, plain ints or the
    ``Cluster``'s outputs (``cluster.num_gpus``, ``cluster.num_preemptible_gpus``: the code owns the target,
    the queue's quotas follow it). ``reserve_standard_gpus``: standard GPUs the queue never admits workloads
    to, kept for critical pods that are not queued (coordinators, login pods, serving replicas).
    ``namespace``: where the LocalQueue is (workloads submitted to it must be in the same namespace).
    ``queue_name``: the LocalQueue's name and the prefix of the cluster-wide objects (default: the
    component's name). ``preemptible_taint``: the taint preemptible nodes carry (``None``: untainted).
    """

    standard_gpus: Any
    """An int, or an output of one (``cluster.num_gpus``)."""
    preemptible_gpus: Any
    """An int, or an output of one (``cluster.num_preemptible_gpus``)."""
    reserve_standard_gpus: int = 0
    namespace: str = "default"
    queue_name: str | None = None
    preemptible_taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT

    @classmethod
    def following(cls, cluster: Any, reserve_standard_gpus: int = 0, **fields: Any) -> WorkloadQueueArgs:
        """The arguments whose quotas follow ``cluster``'s GPU counts (a ``Cluster`` resource)."""
        return cls(
            standard_gpus=cluster.num_gpus,
            preemptible_gpus=cluster.num_preemptible_gpus,
            reserve_standard_gpus=reserve_standard_gpus,
            **fields,
        )


@dataclass(frozen=True)
class FleetWorkerArgs:
    """One worker cluster of a :class:`FleetQueueArgs`, where more than the ``Cluster`` is needed.

    ``cluster``: the worker's ``Cluster`` resource (its kubeconfig is how the component sets the worker up;
    it never leaves the program). ``reserve_standard_gpus``: standard GPUs of the worker the fleet never
    admits workloads to (kept for pods that are not queued). ``name``: the worker's name in the fleet (its
    ``MultiKueueCluster``, what ``status`` shows); default: the ``Cluster`` resource's name.
    """

    cluster: Any
    reserve_standard_gpus: int = 0
    name: str | None = None


@dataclass(frozen=True)
class FleetDispatchArgs:
    """The fleet's dispatcher: a small controller on the manager that tells MultiKueue which one worker each
    admitted workload goes to (MultiKueue's External dispatch mode), half price first and then the order of
    ``workers`` (see :mod:`together_clusters.components.fleet_dispatch`).

    ``image``: any image with Python 3.11 or later; the dispatcher uses the standard library only and its code
    comes in a ConfigMap of the component's, so no image of this package is needed. ``interval_seconds``
    between passes (each pass reads the manager's pending workloads and each worker's nodes and pods); a
    workload that comes to await a worker, or a worker's pod being deleted, gone or found no node, starts a
    pass at once (watches of the manager's workloads and the workers' pods).
    ``patience_seconds``: how long a workload stays with the worker it was sent to, not yet admitted there,
    before it is sent to a better one (the dispatcher's count of free GPUs may be a moment behind a worker's
    Kueue). ``pod_annotations``: annotations on the dispatcher's pod.
    """

    image: str = "python:3.12-slim"
    interval_seconds: int = 2
    patience_seconds: int = 30
    pod_annotations: Mapping[str, str] = field(default_factory=dict)


FLEET_WORKER_LOST_TIMEOUT_SECONDS = 900
"""The default of :attr:`FleetQueueArgs.worker_lost_timeout_seconds`: Kueue's own (15 minutes)."""


@dataclass(frozen=True)
class FleetQueueArgs:
    """One queue over several clusters (Kueue's MultiKueue): workloads submitted to it on the manager cluster
    run on one of ``workers``.

    ``workers``: the worker clusters in order of preference, each a ``Cluster`` resource or a
    :class:`FleetWorkerArgs`; never the manager (the cluster of the provider the ``FleetQueue`` is created
    with). ``namespace``: where the LocalQueue is, on the manager and on every worker (workloads submitted to
    it must be in it). ``queue_name``: the LocalQueue's name and the prefix of the fleet's objects (default:
    the component's name). ``worker_lost_timeout_seconds``: how long a workload stays with a worker whose API
    server stopped answering before the manager admits it elsewhere (MultiKueue's ``workerLostTimeout``).
    Shorter moves work off a dead region sooner; but the lost worker may still be running it, so the old
    copy runs on until that region comes back (it is then removed) and, for that while, two copies may write
    checkpoints. ``worker_controllers``: what is installed on each worker (default: the manager's
    ``ClusterControllersArgs``, with Kueue): JobSet and Kueue from their official charts. ``dispatch``: the
    dispatcher that sends each workload to one worker, half price first and then in the order of ``workers``
    (:class:`FleetDispatchArgs`); ``None`` leaves it to MultiKueue's default, which copies each workload to
    every worker and lets the first to admit it run it, in no order.
    """

    workers: Sequence[Any]
    namespace: str = "default"
    queue_name: str | None = None
    worker_lost_timeout_seconds: int = FLEET_WORKER_LOST_TIMEOUT_SECONDS
    worker_controllers: Any = None
    """A ``ClusterControllersArgs`` for every worker (``None``: the manager's, with Kueue)."""
    preemptible_taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
    dispatch: FleetDispatchArgs | None = field(default_factory=FleetDispatchArgs)

    def worker_args(self) -> tuple[FleetWorkerArgs, ...]:
        """Every worker as a :class:`FleetWorkerArgs`, in order of preference."""
        return tuple(w if isinstance(w, FleetWorkerArgs) else FleetWorkerArgs(cluster=w) for w in self.workers)


WIRE_TYPE = "wire_type"
"""Field metadata: the type of a field annotated ``Any`` (because a Python program may give it another resource's
output) as the plugin's schema declares it, for programs in every language (``cluster_id``: a string)."""
SECRET = "secret"
"""Field metadata: the field holds a secret (an API key). The plugin's schema marks it, so every SDK sends it as
a secret, and the plugin keeps it one even when a program gave it in plain text."""


REMEDIATION_GATE_MODES = tuple(REMEDIATION_MODES_BY_NAME)
"""The modes a :class:`RemediationGateArgs` may list, as ``together-clusters remediations gate --modes`` spells
them (``REMEDIATION_MODE_VM_ONLY`` is ``vm-only``)."""


@dataclass(frozen=True)
class RemediationGateArgs:
    """The unattended remediation gate of one cluster: which automated repairs it may approve, once the node's
    work has checkpointed and moved.

    ``cluster_id``: the cluster's id (``cluster.id`` of a ``Cluster`` resource). ``modes``: the remediation
    modes it may approve, opt-in (no default: a gate approves nothing it was not told to; any of
    :data:`REMEDIATION_GATE_MODES`). ``image``: an image with ``together-gpu-clusters[remediations]``
    installed, at this package's version (the gate runs ``python -m together_clusters.cli remediations gate``
    in it). The API key: ``api_key`` (a ``pulumi.Output`` secret, e.g. ``config.require_secret("apiKey")``:
    the component keeps it in a Secret of its own) or ``api_key_secret``, the name of an existing Secret in
    ``namespace`` whose key ``api-key`` holds it; exactly one. ``base_url``: the API's (default: the
    official). ``interval_seconds`` between passes; ``drain_timeout_seconds``: how long one drain may take
    before the gate tries again on a later pass (the node stays cordoned and the remediation pending).
    """

    cluster_id: Any = field(metadata={WIRE_TYPE: str})
    """A string, or an output of one (``cluster.id``)."""
    modes: Sequence[str]
    image: str
    api_key: Any = field(default=None, metadata={WIRE_TYPE: str, SECRET: True})
    """A string, or an output of one; held as a secret wherever it goes."""
    api_key_secret: str | None = None
    base_url: str | None = None
    namespace: str = "together-remediation-gate"
    create_namespace: bool = True
    """Create ``namespace`` (the component's own); ``False``: it exists (with the ``api_key_secret``)."""
    interval_seconds: int = 30
    drain_timeout_seconds: int = 900
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    """Annotations on the gate's pod."""
