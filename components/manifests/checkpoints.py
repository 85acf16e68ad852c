"""What a pod needs to reach its checkpoint storage (volumes, mounts, environment)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from together_clusters.platform import (
    CHECKPOINT_ANNOTATION,
    CHECKPOINT_NONE,
    CHECKPOINT_USER_MANAGED,
)

from ..args import (
    CheckpointChoice,
    NoCheckpoint,
    SharedVolume,
)
from ..checkpoint import contract
from .common import CHECKPOINT_VOLUME, Manifest, env_entry, secret_env_entry


@dataclass(frozen=True)
class CheckpointBinding:
    """What a pod needs to reach its checkpoint storage: volumes, mounts and environment."""

    volumes: tuple[Manifest, ...] = ()
    mounts: tuple[Manifest, ...] = ()
    env: tuple[Manifest, ...] = field(default=())
    pod_annotations: Mapping[str, str] = field(default_factory=dict)


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
    return CheckpointBinding(env=(*env, *common))
