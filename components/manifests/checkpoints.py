"""What a pod needs to reach its checkpoint storage (volumes, mounts, environment)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from together_clusters.platform import (
    CHECKPOINT_ANNOTATION,
    CHECKPOINT_NONE,
    CHECKPOINT_USER_MANAGED,
    JOB_UID_LABEL,
    JOBSET_UID_LABEL,
)

from ..args import (
    CheckpointChoice,
    NoCheckpoint,
    SharedVolume,
)
from ..checkpoint import contract
from ..fleet_checks import is_fleet
from .common import CHECKPOINT_VOLUME, Manifest, env_entry, label_env_entry, secret_env_entry


@dataclass(frozen=True)
class CheckpointBinding:
    """What a pod needs to reach its checkpoint storage: volumes, mounts and environment."""

    volumes: tuple[Manifest, ...] = ()
    mounts: tuple[Manifest, ...] = ()
    env: tuple[Manifest, ...] = field(default=())
    pod_annotations: Mapping[str, str] = field(default_factory=dict)


def lease_holder_label(queue: object, runs_as_job_set: bool) -> str | None:
    """The pod label a workload's copies hold the checkpoint lease under, for the workloads of a FleetQueue (a
    copy may be left running in a region the workload moved out of); None elsewhere (one copy at a time)."""
    if not is_fleet(queue):
        return None
    return JOBSET_UID_LABEL if runs_as_job_set else JOB_UID_LABEL


def checkpoint_binding(
    storage: CheckpointChoice | None,
    subpath: str,
    keep: int,
    grace_period_seconds: int,
    lease_label: str | None = None,
) -> CheckpointBinding:
    """Mounts and environment that tell the checkpoint runtime where this workload's checkpoints live.

    ``subpath`` separates workloads sharing one volume or bucket; it may reference earlier env vars.
    ``lease_label`` (:func:`lease_holder_label`): the pod label naming the copy that holds the checkpoint lease,
    given to S3 checkpoints (a fleet's only kind).
    """
    if storage is None:
        return CheckpointBinding()
    if isinstance(storage, NoCheckpoint):
        declared = CHECKPOINT_USER_MANAGED if storage.user_managed else CHECKPOINT_NONE
        return CheckpointBinding(pod_annotations={CHECKPOINT_ANNOTATION: declared})
    common = (
        env_entry(contract.ENV_KEEP, str(keep)),
        env_entry(contract.ENV_RESUME, "true"),
        env_entry(contract.ENV_SAVE_BUDGET, str(contract.save_budget_seconds(grace_period_seconds))),
    )
    if isinstance(storage, SharedVolume):
        return CheckpointBinding(
            volumes=(
                {"name": CHECKPOINT_VOLUME, "persistentVolumeClaim": {"claimName": storage.claim_name}},
            ),
            mounts=({"name": CHECKPOINT_VOLUME, "mountPath": storage.mount_path},),
            env=(
                env_entry(contract.ENV_BACKEND, contract.BACKEND_FILESYSTEM),
                env_entry(contract.ENV_DIR, f"{storage.mount_path.rstrip('/')}/{subpath}"),
                *common,
            ),
        )
    env = [
        env_entry(contract.ENV_BACKEND, contract.BACKEND_S3),
        env_entry(contract.ENV_S3_BUCKET, storage.bucket),
        env_entry(contract.ENV_S3_PREFIX, "/".join(p for p in (storage.prefix.strip("/"), subpath) if p)),
    ]
    if storage.endpoint:
        env.append(env_entry(contract.ENV_S3_ENDPOINT, storage.endpoint))
    if storage.region:
        env.append(env_entry(contract.ENV_S3_REGION, storage.region))
    env += [
        secret_env_entry(
            contract.ENV_S3_ACCESS_KEY_ID, storage.credentials_secret, storage.access_key_id_key
        ),
        secret_env_entry(
            contract.ENV_S3_SECRET_ACCESS_KEY, storage.credentials_secret, storage.secret_access_key_key
        ),
    ]
    if lease_label is not None:
        env.append(label_env_entry(contract.ENV_LEASE_HOLDER, lease_label))
    return CheckpointBinding(env=(*env, *common))
