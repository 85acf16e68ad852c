"""Containers and pod specs: resources, probes, volumes, shared memory, placement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from together_clusters.platform import GPU_RESOURCE

from ..args import (
    ContainerSpec,
    DataVolume,
    PodSettings,
    Probe,
)
from ..placement import Placement
from .common import (
    CHECKPOINT_VOLUME,
    MAIN_CONTAINER,
    TRIALS_VOLUME,
    Manifest,
    env_entry,
    secret_env_entry,
)


def _resources(spec: ContainerSpec) -> Manifest:
    resources: Manifest = {}
    requests = {k: v for k, v in (("cpu", spec.cpu), ("memory", spec.memory)) if v}
    if requests:
        resources["requests"] = requests
    limits = {k: v for k, v in (("cpu", spec.cpu_limit), ("memory", spec.memory_limit)) if v}
    limits.update(spec.resources)
    if spec.gpus:
        limits[GPU_RESOURCE] = str(spec.gpus)
    if limits:
        resources["limits"] = limits
    return resources


SHM_VOLUME = "dshm"
SHM_MOUNT_PATH = "/dev/shm"
RESERVED_VOLUMES = frozenset({CHECKPOINT_VOLUME, TRIALS_VOLUME, SHM_VOLUME})


def probe_action(probe: Probe) -> Manifest | None:
    """What the probe does (HTTP GET, TCP or command), or None when its fields say no one thing."""
    if probe.http_path and probe.port is not None and not probe.command:
        return {"httpGet": {"path": probe.http_path, "port": probe.port}}
    if probe.command and probe.port is None and not probe.http_path:
        return {"exec": {"command": list(probe.command)}}
    if probe.port is not None and not probe.http_path and not probe.command:
        return {"tcpSocket": {"port": probe.port}}
    return None


def _probe(probe: Probe) -> Manifest:
    result = probe_action(probe)
    assert result is not None, "checked by container_violations"
    return {
        **result,
        "initialDelaySeconds": probe.initial_delay_seconds,
        "periodSeconds": probe.period_seconds,
        "timeoutSeconds": probe.timeout_seconds,
        "failureThreshold": probe.failure_threshold,
    }


def volume_sources(volume: DataVolume) -> Manifest:
    """The sources a data volume names (exactly one is valid), as pod volume fields."""
    sources = {
        "persistentVolumeClaim": {"claimName": volume.claim_name, "readOnly": volume.read_only}
        if volume.claim_name
        else None,
        "configMap": {"name": volume.config_map} if volume.config_map else None,
        "secret": {"secretName": volume.secret} if volume.secret else None,
        "hostPath": {"path": volume.host_path} if volume.host_path else None,
    }
    return {k: v for k, v in sources.items() if v is not None}


def _volume_source(volume: DataVolume) -> Manifest:
    return {"name": volume.name, **volume_sources(volume)}


def taken_volume_names(spec: ContainerSpec) -> list[str]:
    """The container's volume names the component uses itself, or that it gives twice."""
    names = [v.name for v in spec.volumes]
    return sorted(RESERVED_VOLUMES.intersection(names) | {n for n in names if names.count(n) > 1})


def container_volumes(spec: ContainerSpec) -> list[Manifest]:
    """The pod volumes a container's data volumes and shared memory need."""
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
    result: Manifest = {"name": name, "image": spec.image}
    if spec.command:
        result["command"] = list(spec.command)
    if spec.args:
        result["args"] = list(spec.args)
    all_env = [
        *env,
        *(env_entry(k, v) for k, v in spec.env.items()),
        *(secret_env_entry(k, s.secret, s.key, s.optional) for k, s in spec.secret_env.items()),
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


def job_pod_spec(
    main: Manifest,
    spec: ContainerSpec,
    placement: Placement,
    settings: PodSettings,
    volumes: Sequence[Manifest] = (),
) -> Manifest:
    """The pod of a Job: its one container ``main`` (rendered from ``spec``), and restartPolicy Never, which
    the pod failure policy needs (the Job, not the kubelet, replaces a failed pod)."""
    return pod_spec(
        [main],
        placement,
        settings.grace_period_seconds,
        volumes,
        "Never",
        settings.service_account_name,
        [spec],
    )
