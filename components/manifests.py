"""Component arguments to Kubernetes objects, as plain dicts in the API's own field names (pure).

Every function here is a plain function of plain data: the components feed the result to the
guard and then to pulumi-kubernetes, and the tests read it directly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .args import (
    BatchInferenceArgs,
    BatchJobArgs,
    CheckpointChoice,
    CheckpointStoreArgs,
    ContainerSpec,
    DataVolume,
    NoCheckpoint,
    Probe,
    S3Bucket,
    SharedVolume,
    SweepArgs,
    TrainingRunArgs,
)
from .checkpoint import contract
from .placement import Placement, placement_for, standard_placement
from .platform import (
    CHECKPOINT_ANNOTATION,
    CHECKPOINT_NONE,
    CHECKPOINT_USER_MANAGED,
    CRITICAL_LABEL,
    DISRUPTION_CONDITION,
    ComputeClass,
)

Manifest = dict[str, Any]

MAIN_CONTAINER = "main"
CHECKPOINT_VOLUME = "checkpoints"
TRIALS_VOLUME = "trials"
TRIALS_MOUNT_PATH = "/etc/sweep"
TRIALS_FILE = "trials.json"
RUN_KEYS_FILE = "checkpoint-keys.json"
RUN_KEY_DIGEST_CHARS = 12
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
GPU_RESOURCE = "nvidia.com/gpu"

RESERVED_ENV = frozenset(
    value for key, value in vars(contract).items() if key.startswith("ENV_") and isinstance(value, str)
)

JOB_READY_ANNOTATIONS: Mapping[str, str] = {"pulumi.com/waitFor": "jsonpath={.status.startTime}"}
"""On every Job: ready once the Job controller has started it.

pulumi-kubernetes otherwise waits for a Job to complete, which fails ``pulumi up`` after 10 minutes
for a run that takes days. Not ``skipAwait``: that also skips waiting for deletion, so replacing a
Job under the same name would race the old one's removal.
"""

DISRUPTION_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": DISRUPTION_CONDITION, "status": "True"}],
}
"""First pod failure policy rule of every Job: a disrupted (e.g. evicted or GC'd) pod is not a failure."""

PREEMPTED_EXIT_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onExitCodes": {
        "containerName": MAIN_CONTAINER,
        "operator": "In",
        "values": [contract.PREEMPTED_EXIT_CODE],
    },
}
"""Second rule: the main container ended by SIGTERM (143) is not a failure either.

A plain pod delete sets no DisruptionTarget condition, so without this rule the runtime's exit after
its SIGTERM save (or a process killed by the signal) burns backoffLimit. It comes before any FailJob
or FailIndex rule, so no rule the user adds can count a preemption. A save that overruns the grace
period ends in SIGKILL (137) and still counts: the runtime's save budget ends before the grace does.
"""


@dataclass(frozen=True)
class CheckpointBinding:
    """What a pod needs to reach its checkpoint storage: volumes, mounts and environment."""

    volumes: tuple[Manifest, ...] = ()
    mounts: tuple[Manifest, ...] = ()
    env: tuple[Manifest, ...] = field(default=())
    pod_annotations: Mapping[str, str] = field(default_factory=dict)


def labels_for(name: str, component: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Recommended labels of one part of a workload; the first two also select its pods."""
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "pulumi",
        **(extra or {}),
    }


def selector_for(name: str, component: str) -> dict[str, str]:
    """The labels that select the pods of one part of a workload."""
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component}


def _pod_labels(labels: Mapping[str, str], critical: bool) -> dict[str, str]:
    return {**labels, CRITICAL_LABEL: "true"} if critical else dict(labels)


def pod_annotations(spec: ContainerSpec, own: Mapping[str, str] | None = None) -> dict[str, str]:
    """The annotations of the pod running ``spec``: the user's, then the component's ``own`` (no clash)."""
    clashes = sorted(set(spec.pod_annotations).intersection(own or {}))
    if clashes:
        raise ValueError(f"pod_annotations sets {', '.join(clashes)}, which the component sets itself")
    return {**spec.pod_annotations, **(own or {})}


def _template_metadata(labels: Mapping[str, str], annotations: Mapping[str, str]) -> Manifest:
    metadata: Manifest = {"labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return metadata


def _env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def _secret_env(name: str, secret: str, key: str, optional: bool = False) -> Manifest:
    ref: Manifest = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def _index_env(name: str) -> Manifest:
    path = f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def checkpoint_binding(
    storage: CheckpointChoice | None, subpath: str, keep: int, grace_period_seconds: int
) -> CheckpointBinding:
    """Mounts and environment that tell the checkpoint runtime where this workload's checkpoints live.

    ``subpath`` separates workloads sharing one volume or bucket; it may reference earlier env vars.
    """
    if storage is None:
        return CheckpointBinding()
    if isinstance(storage, NoCheckpoint):
        declared = CHECKPOINT_USER_MANAGED if storage.user_managed else CHECKPOINT_NONE
        return CheckpointBinding(pod_annotations={CHECKPOINT_ANNOTATION: declared})
    common = (
        _env(contract.ENV_KEEP, str(keep)),
        _env(contract.ENV_RESUME, "true"),
        _env(contract.ENV_SAVE_BUDGET, str(contract.save_budget_seconds(grace_period_seconds))),
    )
    if isinstance(storage, SharedVolume):
        return CheckpointBinding(
            volumes=(
                {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": storage.claim_name}},
            ),
            mounts=({"name": CHECKPOINT_VOLUME, "mountPath": storage.mount_path},),
            env=(
                _env(contract.ENV_BACKEND, contract.BACKEND_FILESYSTEM),
                _env(contract.ENV_DIR, f"{storage.mount_path.rstrip('/')}/{subpath}"),
                *common,
            ),
        )
    env = [
        _env(contract.ENV_BACKEND, contract.BACKEND_S3),
        _env(contract.ENV_S3_BUCKET, storage.bucket),
        _env(contract.ENV_S3_PREFIX, "/".join(p for p in (storage.prefix.strip("/"), subpath) if p)),
    ]
    if storage.endpoint:
        env.append(_env(contract.ENV_S3_ENDPOINT, storage.endpoint))
    if storage.region:
        env.append(_env(contract.ENV_S3_REGION, storage.region))
    env += [
        _secret_env(contract.ENV_S3_ACCESS_KEY_ID, storage.credentials_secret, storage.access_key_id_key),
        _secret_env(
            contract.ENV_S3_SECRET_ACCESS_KEY, storage.credentials_secret, storage.secret_access_key_key
        ),
    ]
    return CheckpointBinding(env=(*env, *common))


def run_key(run_id: str | None, *definition: Any) -> str:
    """Where a run's checkpoints live under its workload: ``run_id`` if given, else a digest of what defines it.

    Only a run with the same definition resumes from these checkpoints; any change starts fresh.
    """
    if run_id is not None:
        if not run_id or run_id.startswith(".") or "/" in run_id or run_id != run_id.strip():
            raise ValueError(f"run_id={run_id!r}: use a non-empty name without '/' or a leading '.'")
        return run_id
    canonical = json.dumps(definition, sort_keys=True, default=_canonical)
    if INPUT_MARK in canonical:
        # A value is only known once Pulumi resolves it: digest the resolved text (inputs.py).
        return f"{DEFERRED_DIGEST_START}{canonical}{DEFERRED_DIGEST_END}"
    return _run_digest(canonical)


INPUT_MARK = "@@pulumi-input-"
"""How a placeholder for a ``pulumi.Input`` starts (see :mod:`.inputs`)."""
DEFERRED_DIGEST_START = "@@run-digest<<"
DEFERRED_DIGEST_END = ">>run-digest@@"
_DEFERRED_DIGEST = re.compile(
    re.escape(DEFERRED_DIGEST_START) + "(.*?)" + re.escape(DEFERRED_DIGEST_END), re.S
)


def _run_digest(canonical: str) -> str:
    return "run-" + hashlib.sha256(canonical.encode()).hexdigest()[:RUN_KEY_DIGEST_CHARS]


def finish_deferred_digests(text: str) -> str:
    """Replace each deferred run digest, now that the values in it are resolved, by the digest."""
    return _DEFERRED_DIGEST.sub(lambda m: _run_digest(m.group(1)), text)


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot key a run on {type(value).__name__}")


def run_definition(spec: ContainerSpec) -> Manifest:
    """The parts of a container that define what a run computes."""
    return {
        "image": spec.image,
        "command": list(spec.command),
        "args": list(spec.args),
        "env": dict(spec.env),
    }


def _resources(spec: ContainerSpec) -> Manifest:
    resources: Manifest = {}
    requests = {k: v for k, v in (("cpu", spec.cpu), ("memory", spec.memory)) if v}
    if requests:
        resources["requests"] = requests
    limits = {k: v for k, v in (("cpu", spec.cpu_limit), ("memory", spec.memory_limit)) if v}
    if GPU_RESOURCE in spec.resources:
        raise ValueError(f"resources sets {GPU_RESOURCE}: use gpus={spec.resources[GPU_RESOURCE]} instead")
    limits.update(spec.resources)
    if spec.gpus:
        limits[GPU_RESOURCE] = str(spec.gpus)
    if limits:
        resources["limits"] = limits
    return resources


SHM_VOLUME = "dshm"
SHM_MOUNT_PATH = "/dev/shm"
RESERVED_VOLUMES = frozenset({CHECKPOINT_VOLUME, TRIALS_VOLUME, SHM_VOLUME})


def _probe(probe: Probe) -> Manifest:
    result: Manifest
    if probe.http_path and probe.port is not None and not probe.command:
        result = {"httpGet": {"path": probe.http_path, "port": probe.port}}
    elif probe.command and probe.port is None and not probe.http_path:
        result = {"exec": {"command": list(probe.command)}}
    elif probe.port is not None and not probe.http_path and not probe.command:
        result = {"tcpSocket": {"port": probe.port}}
    else:
        raise ValueError(f"{probe}: give http_path with port (HTTP), port alone (TCP), or command (exec)")
    return {
        **result,
        "initialDelaySeconds": probe.initial_delay_seconds,
        "periodSeconds": probe.period_seconds,
        "timeoutSeconds": probe.timeout_seconds,
        "failureThreshold": probe.failure_threshold,
    }


def _volume_source(volume: DataVolume) -> Manifest:
    sources = {
        "persistentVolumeClaim": {"claimName": volume.claim_name, "readOnly": volume.read_only}
        if volume.claim_name
        else None,
        "configMap": {"name": volume.config_map} if volume.config_map else None,
        "secret": {"secretName": volume.secret} if volume.secret else None,
        "hostPath": {"path": volume.host_path} if volume.host_path else None,
    }
    given = {k: v for k, v in sources.items() if v is not None}
    if len(given) != 1:
        raise ValueError(
            f"volume {volume.name!r}: give exactly one of claim_name, config_map, secret, host_path "
            f"(got {', '.join(sorted(given)) or 'none'})"
        )
    return {"name": volume.name, **given}


def container_volumes(spec: ContainerSpec) -> list[Manifest]:
    """The pod volumes a container's data volumes and shared memory need."""
    names = [v.name for v in spec.volumes]
    clashes = sorted(RESERVED_VOLUMES.intersection(names) | {n for n in names if names.count(n) > 1})
    if clashes:
        raise ValueError(f"volume names {clashes} are taken (by the component or twice); rename them")
    volumes = [_volume_source(v) for v in spec.volumes]
    if spec.shm_size:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}})
    return volumes


def _container_mounts(spec: ContainerSpec) -> list[Manifest]:
    mounts = []
    for v in spec.volumes:
        mount: Manifest = {"name": v.name, "mountPath": v.mount_path, "readOnly": v.read_only}
        if v.sub_path:
            mount["subPath"] = v.sub_path
        mounts.append(mount)
    if spec.shm_size:
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_MOUNT_PATH})
    return mounts


def container(
    spec: ContainerSpec,
    env: Sequence[Manifest] = (),
    mounts: Sequence[Manifest] = (),
    name: str = MAIN_CONTAINER,
    extra: Mapping[str, Any] | None = None,
) -> Manifest:
    """A container: the contract's env first (so the user's may reference it), then the user's."""
    clashes = sorted(RESERVED_ENV.intersection(spec.env))
    if clashes:
        raise ValueError(
            f"container env sets {', '.join(clashes)}, which the component sets itself; "
            "use the component's arguments instead"
        )
    result: Manifest = {"name": name, "image": spec.image}
    if spec.command:
        result["command"] = list(spec.command)
    if spec.args:
        result["args"] = list(spec.args)
    secret_clashes = sorted(
        RESERVED_ENV.intersection(spec.secret_env) | set(spec.env).intersection(spec.secret_env)
    )
    if secret_clashes:
        raise ValueError(
            f"secret_env sets {', '.join(secret_clashes)}, which env or the component sets already"
        )
    all_env = [
        *env,
        *(_env(k, v) for k, v in spec.env.items()),
        *(_secret_env(k, s.secret, s.key, s.optional) for k, s in spec.secret_env.items()),
    ]
    if all_env:
        result["env"] = all_env
    all_mounts = [*mounts, *_container_mounts(spec)]
    if all_mounts:
        result["volumeMounts"] = all_mounts
    resources = _resources(spec)
    if resources:
        result["resources"] = resources
    if spec.image_pull_policy:
        result["imagePullPolicy"] = spec.image_pull_policy
    if spec.working_dir:
        result["workingDir"] = spec.working_dir
    if spec.ports:
        result["ports"] = [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in spec.ports.items()]
    for field_name, probe in (
        ("readinessProbe", spec.readiness_probe),
        ("livenessProbe", spec.liveness_probe),
        ("startupProbe", spec.startup_probe),
    ):
        if probe is not None:
            result[field_name] = _probe(probe)
    result.update(extra or {})
    return result


def pod_spec(
    containers: Sequence[Manifest],
    placement: Placement,
    grace_period_seconds: int,
    volumes: Sequence[Manifest] = (),
    restart_policy: str | None = None,
    service_account_name: str | None = None,
    container_specs: Sequence[ContainerSpec] = (),
) -> Manifest:
    """A pod spec with its placement, and the volumes and pull secrets of ``container_specs``."""
    spec: Manifest = {"containers": list(containers), "terminationGracePeriodSeconds": grace_period_seconds}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    all_volumes = [*volumes, *(v for c in container_specs for v in container_volumes(c))]
    if all_volumes:
        spec["volumes"] = all_volumes
    pull_secrets = sorted({s for c in container_specs for s in c.image_pull_secrets})
    if pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in pull_secrets]
    if service_account_name:
        spec["serviceAccountName"] = service_account_name
    spec.update(placement.pod_spec_fields())
    return spec


def _metadata(name: str, namespace: str | None, labels: Mapping[str, str]) -> Manifest:
    """Without a namespace, pulumi-kubernetes uses its provider's (``default`` if it has none)."""
    metadata: Manifest = {"name": name, "labels": dict(labels)}
    if namespace is not None:
        metadata["namespace"] = namespace
    return metadata


def pod_failure_policy(
    non_retriable_exit_codes: Sequence[int], action: str = "FailJob", on_preemption: str = "Ignore"
) -> Manifest:
    """The preemption rules first (disruption, then exit 143), then exit codes that mean "do not retry".

    ``on_preemption="FailJob"`` ends the Job on a preemption instead, for a JobSet to recreate it.
    """
    rules: list[Manifest] = [
        {**json.loads(json.dumps(rule)), "action": on_preemption}
        for rule in (DISRUPTION_RULE, PREEMPTED_EXIT_RULE)
    ]
    if non_retriable_exit_codes:
        if 0 in non_retriable_exit_codes or contract.PREEMPTED_EXIT_CODE in non_retriable_exit_codes:
            raise ValueError(
                f"non_retriable_exit_codes={tuple(non_retriable_exit_codes)}: 0 is success and "
                f"{contract.PREEMPTED_EXIT_CODE} is a checkpointed SIGTERM; leave both out"
            )
        rules.append(
            {
                "action": action,
                "onExitCodes": {
                    "containerName": MAIN_CONTAINER,
                    "operator": "In",
                    "values": sorted(set(non_retriable_exit_codes)),
                },
            }
        )
    return {"rules": rules}


def _job(
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    spec_of_pod: Manifest,
    job_fields: Mapping[str, Any],
    non_retriable_exit_codes: Sequence[int],
    exit_code_action: str = "FailJob",
    pod_annotations: Mapping[str, str] | None = None,
) -> Manifest:
    template_metadata = _template_metadata(pod_labels, pod_annotations or {})
    spec: Manifest = {
        **job_fields,
        "podFailurePolicy": pod_failure_policy(non_retriable_exit_codes, exit_code_action),
        # Required with podFailurePolicy: a replacement starts only once the old pod is gone.
        "podReplacementPolicy": "Failed",
        "template": {"metadata": template_metadata, "spec": spec_of_pod},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**_metadata(name, namespace, labels), "annotations": dict(JOB_READY_ANNOTATIONS)},
        "spec": spec,
    }


def _at_least(name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def _positive(name: str, value: int) -> None:
    _at_least(name, value, 1)


# --- components ------------------------------------------------------------------------------


def checkpoint_store(args: CheckpointStoreArgs) -> list[Manifest]:
    """A PersistentVolumeClaim on the shared volume, or nothing for a bucket (its Secret is the user's)."""
    storage = args.storage
    if isinstance(storage, S3Bucket) or not storage.create:
        return []
    spec: Manifest = {
        "accessModes": [storage.access_mode],
        "resources": {"requests": {"storage": storage.size}},
    }
    if storage.storage_class:
        spec["storageClassName"] = storage.storage_class
    labels = labels_for(storage.claim_name, "checkpoints", args.labels)
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _metadata(storage.claim_name, args.namespace, labels),
            "spec": spec,
        }
    ]


def batch_job(name: str, args: BatchJobArgs) -> list[Manifest]:
    """A Job that survives preemption: disruptions ignored, checkpoints mounted, resume on restart."""
    job_name = args.job_name or name
    for field_name in ("completions", "parallelism", "grace_period_seconds"):
        _positive(field_name, getattr(args, field_name))
    _at_least("backoff_limit", args.backoff_limit, 0)
    labels = labels_for(job_name, "batch", args.labels)
    key = run_key(args.run_id, run_definition(args.container))
    binding = checkpoint_binding(
        args.checkpoint, f"{job_name}/{key}", args.keep_checkpoints, args.grace_period_seconds
    )
    placement = placement_for(args.compute_class, selector_for(job_name, "batch"), args.preemptible_taint)
    main = container(args.container, binding.env, binding.mounts)
    spec_of_pod = pod_spec(
        [main],
        placement,
        args.grace_period_seconds,
        binding.volumes,
        "Never",
        args.service_account_name,
        [args.container],
    )
    job_fields: Manifest = {
        "backoffLimit": args.backoff_limit,
        "completions": args.completions,
        "parallelism": args.parallelism,
    }
    if args.active_deadline_seconds is not None:
        job_fields["activeDeadlineSeconds"] = args.active_deadline_seconds
    if args.ttl_seconds_after_finished is not None:
        job_fields["ttlSecondsAfterFinished"] = args.ttl_seconds_after_finished
    pod_labels = _pod_labels(labels, args.critical)
    annotations = pod_annotations(args.container, binding.pod_annotations)
    if args.fresh_job_per_attempt:
        limits = AttemptLimits(
            completions=args.completions,
            parallelism=args.parallelism,
            backoff_limit=args.backoff_limit,
            non_retriable_exit_codes=args.non_retriable_exit_codes,
            active_deadline_seconds=args.active_deadline_seconds,
            ttl_seconds_after_finished=args.ttl_seconds_after_finished,
            name_field="job_name (or the component's name)",
        )
        return [
            attempt_job_set(job_name, args.namespace, labels, pod_labels, spec_of_pod, annotations, limits)
        ]
    return [
        _job(
            job_name,
            args.namespace,
            labels,
            pod_labels,
            spec_of_pod,
            job_fields,
            args.non_retriable_exit_codes,
            pod_annotations=annotations,
        )
    ]


JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
ATTEMPT_REPLICATED_JOB = "attempt"

JOBSET_FAILURE_POLICY: Mapping[str, Any] = {
    "maxRestarts": 0,
    # Old pods (maybe still saving) are gone before the next attempt starts and resumes.
    "restartStrategy": "BlockingRecreate",
    "rules": [
        # A FailJob preemption rule matched: recreate the Job, not counted.
        {
            "name": "preempted",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"],
        },
        # Anything else (MaxFailedIndexesExceeded: crashes past the limit, a non-retriable exit code; a
        # deadline) ends the run. Explicit, since JobSet's default for an unmatched failure is a restart.
        {"name": "failed", "action": "FailJobSet", "onJobFailureReasons": []},
    ],
}
"""How the JobSet of ``fresh_job_per_attempt`` treats its Job's failures (first matching rule wins)."""


@dataclass(frozen=True)
class AttemptLimits:
    """The Job of one attempt: its size, and the limits within it that count real failures."""

    completions: int
    parallelism: int
    backoff_limit: int
    non_retriable_exit_codes: tuple[int, ...]
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    name_field: str = "name"
    """The argument the JobSet's name comes from, for the error when it is too long."""
    name_suffix: str = ""
    """What the component appends to that argument to name this JobSet (a trial's or worker's index)."""

    @classmethod
    def one_pod(
        cls, backoff_limit: int, non_retriable_exit_codes: tuple[int, ...], name_field: str, name_suffix: str
    ) -> AttemptLimits:
        """The attempt of one member of a group (a Sweep's trial, a TrainingRun's worker): a single pod."""
        return cls(
            1, 1, backoff_limit, non_retriable_exit_codes, name_field=name_field, name_suffix=name_suffix
        )


DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
POD_NAME_SUFFIX = "-abcde"
"""The random suffix of a pod's name, as JobSet's webhook counts it."""


def _check_job_set_name(name: str, limits: AttemptLimits) -> None:
    """Refuse at preview the names JobSet's webhook refuses at apply: its longest pod name
    (``<jobset>-attempt-0-<last index>-xxxxx``) must be a DNS label (RFC 1035) of at most 63 characters."""
    longest = f"{name}-{ATTEMPT_REPLICATED_JOB}-0-{limits.completions - 1}{POD_NAME_SUFFIX}"
    if len(longest) <= DNS_LABEL_MAX and DNS_LABEL.fullmatch(longest):
        return
    given = name.removesuffix(limits.name_suffix)
    room = len(given) + DNS_LABEL_MAX - len(longest)
    raise ValueError(
        f"{limits.name_field}={given!r}: its JobSet {name!r} would name pods like {longest!r} "
        f"({len(longest)} characters), which Kubernetes refuses (a DNS label: at most {DNS_LABEL_MAX} "
        "characters of lowercase letters, digits and '-', starting with a letter); use a name of at most "
        f"{room} characters that starts with a letter, or set fresh_job_per_attempt=False"
    )


def attempt_job_set(
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    spec_of_pod: Manifest,
    pod_annotations: Mapping[str, str],
    limits: AttemptLimits,
) -> Manifest:
    """A JobSet holding one Job per attempt: a preemption fails that Job, the JobSet recreates it fresh.

    The Job controller delays each replacement pod by its failure backoff, and counts preempted pods
    too, ignored or not (kubernetes#130881): after a handful of preemptions every replacement waits
    10 minutes. A new Job has no history, so each attempt starts at once. Real failures still count:
    crashes against ``limits.backoff_limit`` (per index, within one attempt), non-retriable exit codes at
    once (FailIndex with maxFailedIndexes 0 fails the Job with a reason JobSet does not restart).
    """
    _check_job_set_name(name, limits)
    template_metadata = _template_metadata(pod_labels, pod_annotations)
    job_spec: Manifest = {
        "completionMode": "Indexed",
        "completions": limits.completions,
        "parallelism": limits.parallelism,
        "backoffLimitPerIndex": limits.backoff_limit,
        "maxFailedIndexes": 0,
        "podFailurePolicy": pod_failure_policy(limits.non_retriable_exit_codes, "FailIndex", "FailJob"),
        "podReplacementPolicy": "Failed",
        "template": {"metadata": template_metadata, "spec": spec_of_pod},
    }
    if limits.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = limits.active_deadline_seconds
    spec: Manifest = {
        "failurePolicy": json.loads(json.dumps(JOBSET_FAILURE_POLICY)),
        # No Service per JobSet, and the pod template's own subdomain (a TrainingRun's workers') kept.
        "network": {"enableDNSHostnames": False},
        "replicatedJobs": [
            {
                "name": ATTEMPT_REPLICATED_JOB,
                "replicas": 1,
                "template": {"metadata": {"labels": dict(labels)}, "spec": job_spec},
            }
        ],
    }
    if limits.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = limits.ttl_seconds_after_finished
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": _metadata(name, namespace, labels),
        "spec": spec,
    }


def trial_run_keys(args: SweepArgs) -> list[str]:
    """Each trial's run key (see :func:`run_key`): its index and a digest of the container and its parameters."""
    return [
        f"{run_key(args.run_id)}/trial-{i}"
        if args.run_id is not None
        else f"trial-{i}-{run_key(None, run_definition(args.container), dict(t))}"
        for i, t in enumerate(args.trials)
    ]


def trials_config_map_data(args: SweepArgs) -> dict[str, str]:
    """The trials' parameters and each trial's run key, as the ConfigMap's files."""
    return {
        TRIALS_FILE: json.dumps([dict(t) for t in args.trials], indent=2, sort_keys=True),
        RUN_KEYS_FILE: json.dumps(trial_run_keys(args)),
    }


def trials_config_map_name(sweep_name: str, data: Mapping[str, str]) -> str:
    """Named after its content, so new trials give a new ConfigMap and so a new Job."""
    digest = hashlib.sha256(json.dumps(dict(data), sort_keys=True).encode()).hexdigest()[:8]
    return f"{sweep_name}-trials-{digest}"


def sweep(name: str, args: SweepArgs) -> list[Manifest]:
    """One JobSet per trial (``fresh_job_per_attempt``, the default), or a ConfigMap of trial parameters and
    an Indexed Job whose completion index selects the trial."""
    sweep_name = args.sweep_name or name
    if not args.trials:
        raise ValueError("trials is empty: give at least one trial's parameters")
    if args.parallelism is not None:
        _positive("parallelism", args.parallelism)
    _positive("grace_period_seconds", args.grace_period_seconds)
    _at_least("backoff_limit_per_index", args.backoff_limit_per_index, 0)
    count = len(args.trials)
    max_failed = args.max_failed_indexes if args.max_failed_indexes is not None else (count + 1) // 2
    if not 0 <= max_failed <= count:
        raise ValueError(
            f"max_failed_indexes must be between 0 and the number of trials ({count}), got {max_failed}"
        )
    if args.fresh_job_per_attempt:
        return trial_job_sets(sweep_name, args)
    labels = labels_for(sweep_name, "trial", args.labels)
    data = trials_config_map_data(args)
    config_map_name = trials_config_map_name(sweep_name, data)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(config_map_name, args.namespace, labels_for(sweep_name, "trials", args.labels)),
        "data": data,
    }
    binding = checkpoint_binding(
        args.checkpoint, sweep_name, args.keep_checkpoints, args.grace_period_seconds
    )
    env = [
        _index_env(contract.ENV_TRIAL_INDEX),
        _env(contract.ENV_TRIAL_PARAMETERS_FILE, f"{TRIALS_MOUNT_PATH}/{TRIALS_FILE}"),
        *binding.env,
    ]
    if binding.env:
        env.append(_env(contract.ENV_RUN_KEYS_FILE, f"{TRIALS_MOUNT_PATH}/{RUN_KEYS_FILE}"))
    mounts = [{"name": TRIALS_VOLUME, "mountPath": TRIALS_MOUNT_PATH, "readOnly": True}, *binding.mounts]
    volumes = [{"name": TRIALS_VOLUME, "configMap": {"name": config_map_name}}, *binding.volumes]
    placement = placement_for(args.compute_class, selector_for(sweep_name, "trial"), args.preemptible_taint)
    spec_of_pod = pod_spec(
        [container(args.container, env, mounts)],
        placement,
        args.grace_period_seconds,
        volumes,
        "Never",
        args.service_account_name,
        [args.container],
    )
    job_fields: Manifest = {
        "completionMode": "Indexed",
        "completions": count,
        "parallelism": count if args.parallelism is None else args.parallelism,
        "backoffLimitPerIndex": args.backoff_limit_per_index,
        "maxFailedIndexes": max_failed,
    }
    job = _job(
        sweep_name,
        args.namespace,
        labels,
        _pod_labels(labels, args.critical),
        spec_of_pod,
        job_fields,
        args.non_retriable_exit_codes,
        exit_code_action="FailIndex",
        pod_annotations=pod_annotations(args.container, binding.pod_annotations),
    )
    return [config_map, job]


def _refuse_sweep_wide_limits(args: SweepArgs) -> None:
    """Trials that are JobSets of their own share no controller: nothing can cap or count them together."""
    count = len(args.trials)
    queued_fix = (
        "or set fresh_job_per_attempt=False for one Indexed Job that queues the trials and counts their "
        "failures (its replacements then wait on the Job controller's backoff, up to 10 minutes after "
        "repeated preemptions)"
    )
    if args.parallelism is not None and args.parallelism < count:
        raise ValueError(
            f"parallelism={args.parallelism}: with fresh_job_per_attempt=True each of the {count} trials is a "
            "JobSet of its own and all of them start at once (trials beyond the free GPUs wait Pending); "
            f"leave parallelism unset, {queued_fix}"
        )
    if args.max_failed_indexes is not None and args.max_failed_indexes < count:
        raise ValueError(
            f"max_failed_indexes={args.max_failed_indexes}: with fresh_job_per_attempt=True each trial fails "
            "on its own (after backoff_limit_per_index failures or a non-retriable exit code) and the others "
            f"go on; leave max_failed_indexes unset, {queued_fix}"
        )


def trial_job_sets(sweep_name: str, args: SweepArgs) -> list[Manifest]:
    """One attempt JobSet per trial, named ``<sweep>-<index>``: a preempted trial's Job is recreated at once.

    Each pod gets its trial's index and parameters in its environment (TRIAL_INDEX, TRIAL_PARAMETERS) and
    its run key in its checkpoint location, so a changed trial changes only its own JobSet.
    """
    _refuse_sweep_wide_limits(args)
    labels = labels_for(sweep_name, "trial", args.labels)
    placement = placement_for(args.compute_class, selector_for(sweep_name, "trial"), args.preemptible_taint)
    pod_labels = _pod_labels(labels, args.critical)
    job_sets = []
    for index, (trial, key) in enumerate(zip(args.trials, trial_run_keys(args), strict=True)):
        limits = AttemptLimits.one_pod(
            args.backoff_limit_per_index,
            args.non_retriable_exit_codes,
            name_field="sweep_name (or the component's name)",
            name_suffix=f"-{index}",
        )
        binding = checkpoint_binding(
            args.checkpoint, f"{sweep_name}/{key}", args.keep_checkpoints, args.grace_period_seconds
        )
        env = [
            _env(contract.ENV_TRIAL_INDEX, str(index)),
            _env(contract.ENV_TRIAL_PARAMETERS, json.dumps(dict(trial), sort_keys=True)),
            *binding.env,
        ]
        spec_of_pod = pod_spec(
            [container(args.container, env, binding.mounts)],
            placement,
            args.grace_period_seconds,
            binding.volumes,
            "Never",
            args.service_account_name,
            [args.container],
        )
        job_sets.append(
            attempt_job_set(
                f"{sweep_name}-{index}",
                args.namespace,
                labels,
                pod_labels,
                spec_of_pod,
                pod_annotations(args.container, binding.pod_annotations),
                limits,
            )
        )
    return job_sets


DEFAULT_PRE_STOP_SECONDS = 5


def batch_inference(name: str, args: BatchInferenceArgs) -> list[Manifest]:
    """Request workers (Deployment) with a drain budget; a Service and preStop pause when they are routed
    to; a PodDisruptionBudget only on standard nodes (see :class:`BatchInferenceArgs`)."""
    deployment_name = args.deployment_name or name
    _positive("replicas", args.replicas)
    pre_stop = args.pre_stop_seconds
    if pre_stop is None:
        pre_stop = DEFAULT_PRE_STOP_SECONDS if args.service_port is not None else 0
    if args.service_port is None and pre_stop:
        raise ValueError(
            f"pre_stop_seconds={pre_stop} without service_port: nothing routes to queue workers, so a "
            "preStop pause only takes time from the drain; set service_port or leave pre_stop_seconds out"
        )
    if not 0 <= pre_stop < args.grace_period_seconds:
        raise ValueError(
            f"pre_stop_seconds={pre_stop} must be >= 0 and below "
            f"grace_period_seconds={args.grace_period_seconds}: the preStop hook spends the grace period"
        )
    labels = labels_for(deployment_name, "inference-worker", args.labels)
    selector = selector_for(deployment_name, "inference-worker")
    budget = contract.drain_budget_seconds(args.grace_period_seconds, pre_stop)
    extra: Manifest = {}
    if pre_stop:
        extra["lifecycle"] = {"preStop": {"sleep": {"seconds": pre_stop}}}
    spec = args.container
    if args.service_port is not None and args.service_port not in spec.ports.values():
        spec = dataclasses.replace(spec, ports={**spec.ports, "serving": args.service_port})
    main = container(spec, [_env(contract.ENV_DRAIN_BUDGET, str(budget))], extra=extra)
    placement = placement_for(args.compute_class, selector, args.preemptible_taint)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(deployment_name, args.namespace, labels),
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": _template_metadata(
                    _pod_labels(labels, args.critical), pod_annotations(args.container)
                ),
                "spec": pod_spec(
                    [main],
                    placement,
                    args.grace_period_seconds,
                    service_account_name=args.service_account_name,
                    container_specs=[args.container],
                ),
            },
        },
    }
    objects: list[Manifest] = [deployment]
    if args.service_port is not None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _metadata(deployment_name, args.namespace, labels),
                "spec": {
                    "selector": dict(selector),
                    "ports": [
                        {"name": "serving", "port": args.service_port, "targetPort": args.service_port}
                    ],
                },
            }
        )
    if args.compute_class is ComputeClass.STANDARD:
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _metadata(deployment_name, args.namespace, labels),
                "spec": {
                    "maxUnavailable": args.max_unavailable,
                    "selector": {"matchLabels": selector},
                    # A drain must not be blocked by workers that are not serving anyway.
                    "unhealthyPodEvictionPolicy": "AlwaysAllow",
                },
            }
        )
    return objects


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
    _positive("grace_period_seconds", args.grace_period_seconds)
    _positive("max_restarts", args.max_restarts)
    _at_least("backoff_limit", args.backoff_limit, 0)
    minimum = args.num_workers if args.min_workers is None else args.min_workers
    if not 1 <= minimum <= args.num_workers:
        raise ValueError(f"min_workers={minimum} must be between 1 and num_workers={args.num_workers}")
    _positive("processes_per_worker", _processes_per_worker(args))
    service_name = f"{run}-coordinator"
    workers_name = f"{run}-workers"
    host = coordinator_host(service_name, args.namespace)
    port = str(args.coordinator_port)
    rendezvous = [_env(contract.ENV_COORDINATOR_HOST, host), _env(contract.ENV_COORDINATOR_PORT, port)]
    world = [
        _env(contract.ENV_NUM_WORKERS, str(args.num_workers)),
        _env(contract.ENV_WORLD_SIZE, str(args.num_workers * _processes_per_worker(args))),
    ]
    key = run_key(args.run_id, run_definition(args.coordinator), run_definition(args.worker))
    # One checkpoint location for the whole world: a step is committed for every rank or not at all.
    storage = checkpoint_binding(
        args.checkpoint, f"{run}/{key}", args.keep_checkpoints, args.grace_period_seconds
    )

    coordinator_labels = labels_for(run, "coordinator", args.labels)
    coordinator_container = container(
        args.coordinator,
        [*rendezvous, *world, *storage.env],
        storage.mounts,
        extra={"ports": [{"name": "rendezvous", "containerPort": args.coordinator_port, "protocol": "TCP"}]},
    )
    coordinator = _job(
        service_name,
        args.namespace,
        coordinator_labels,
        _pod_labels(coordinator_labels, critical=True),
        pod_spec(
            [coordinator_container],
            standard_placement(),
            args.grace_period_seconds,
            storage.volumes,
            "Never",
            args.service_account_name,
            [args.coordinator],
        ),
        {"backoffLimit": args.backoff_limit, "completions": 1, "parallelism": 1},
        args.non_retriable_exit_codes,
        pod_annotations=pod_annotations(args.coordinator),
    )
    service = _headless_service(
        service_name,
        args.namespace,
        coordinator_labels,
        selector_for(run, "coordinator"),
        [{"name": "rendezvous", "port": args.coordinator_port, "targetPort": args.coordinator_port}],
    )
    worker_labels = labels_for(run, "worker", args.labels)
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
            args.grace_period_seconds,
            storage.volumes,
            "Never",
            args.service_account_name,
            [worker_spec],
        )
        # Indexed Job pods are named <job>-<index> (a worker JobSet's Job: <jobset>-attempt-0); with the
        # subdomain they resolve as <job>-<index>.<service>, the address torchrun agents publish to each other.
        pod["subdomain"] = workers_name
        return pod

    workers: list[Manifest]
    if args.fresh_job_per_attempt:
        workers = [
            attempt_job_set(
                f"{workers_name}-{rank}",
                args.namespace,
                worker_labels,
                worker_labels,
                worker_pod(_env(contract.ENV_WORKER_RANK, str(rank))),
                pod_annotations(args.worker),
                AttemptLimits.one_pod(
                    args.backoff_limit,
                    args.non_retriable_exit_codes,
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
                args.namespace,
                worker_labels,
                worker_labels,
                worker_pod(_index_env(contract.ENV_WORKER_RANK)),
                {
                    "completionMode": "Indexed",
                    "completions": args.num_workers,
                    "parallelism": args.num_workers,
                    # Per worker: one worker's crashes never use up another's retries.
                    "backoffLimitPerIndex": args.backoff_limit,
                    "maxFailedIndexes": 0,
                },
                args.non_retriable_exit_codes,
                exit_code_action="FailIndex",
                pod_annotations=pod_annotations(args.worker),
            )
        ]
    worker_service = _headless_service(
        workers_name, args.namespace, worker_labels, selector_for(run, "worker")
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
    labels = labels_for(run, "login", args.labels)
    mounts = storage.mounts
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(f"{run}-login", args.namespace, labels),
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
                    args.grace_period_seconds,
                    storage.volumes,
                    service_account_name=args.service_account_name,
                    container_specs=[args.login],
                ),
            },
        },
    }
