"""Pulumi components for workloads on Together GPU clusters with preemptible capacity.

Names are loaded on first use so that ``together_clusters.components.checkpoint`` (the in-container runtime, a
distribution of its own: ``runtime/``) and the pure
modules (``platform``, ``placement``, ``manifests``, ``guard``, ``validation``) import without Pulumi installed.
"""

from __future__ import annotations

# The checkpoint runtime (.checkpoint) is the distribution together-gpu-checkpoint, in runtime/: see
# together_clusters/__init__.py.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)


import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BatchJob": ".batch_job",
    "Sweep": ".sweep",
    "BatchInference": ".batch_inference",
    "TrainingRun": ".training_run",
    "CheckpointStore": ".checkpoint_store",
    "ClusterControllers": ".cluster_controllers",
    "ClusterControllersArgs": ".cluster_controllers",
    "KueueSettings": ".controllers.releases",
    "WorkloadQueue": ".workload_queue",
    "WorkloadQueueArgs": ".args",
    "FleetDispatchArgs": ".args",
    "FleetQueue": ".fleet_queue",
    "FleetQueueArgs": ".args",
    "FleetWorkerArgs": ".args",
    "RemediationGate": ".remediation_gate",
    "RemediationGateArgs": ".args",
    "provider_for": ".providers",
    "provider_from_stack_config": ".providers",
    "BatchJobArgs": ".args",
    "SweepArgs": ".args",
    "BatchInferenceArgs": ".args",
    "TrainingRunArgs": ".args",
    "CheckpointStoreArgs": ".args",
    "ContainerSpec": ".args",
    "SharedVolume": ".args",
    "S3Bucket": ".args",
    "NoCheckpoint": ".args",
    "NodePlacement": ".args",
    "PodSettings": ".args",
    "Retries": ".args",
    "Checkpointing": ".args",
    "ComputeClass": ".platform",
    "Taint": ".platform",
    "PlacementRefused": ".guard",
    "ArgsError": ".validation",
    "validate": ".validation",
}

__all__ = [
    "ArgsError",
    "BatchInference",
    "BatchInferenceArgs",
    "BatchJob",
    "BatchJobArgs",
    "CheckpointStore",
    "CheckpointStoreArgs",
    "Checkpointing",
    "ClusterControllers",
    "ClusterControllersArgs",
    "ComputeClass",
    "ContainerSpec",
    "FleetDispatchArgs",
    "FleetQueue",
    "FleetQueueArgs",
    "FleetWorkerArgs",
    "KueueSettings",
    "NoCheckpoint",
    "NodePlacement",
    "PlacementRefused",
    "PodSettings",
    "Retries",
    "S3Bucket",
    "SharedVolume",
    "Sweep",
    "SweepArgs",
    "Taint",
    "TrainingRun",
    "TrainingRunArgs",
    "RemediationGate",
    "RemediationGateArgs",
    "WorkloadQueue",
    "WorkloadQueueArgs",
    "provider_for",
    "provider_from_stack_config",
    "validate",
]

if TYPE_CHECKING:
    from .args import (
        BatchInferenceArgs,
        BatchJobArgs,
        Checkpointing,
        CheckpointStoreArgs,
        ContainerSpec,
        FleetDispatchArgs,
        FleetQueueArgs,
        FleetWorkerArgs,
        NoCheckpoint,
        NodePlacement,
        PodSettings,
        RemediationGateArgs,
        Retries,
        S3Bucket,
        SharedVolume,
        SweepArgs,
        TrainingRunArgs,
        WorkloadQueueArgs,
    )
    from .batch_inference import BatchInference
    from .batch_job import BatchJob
    from .checkpoint_store import CheckpointStore
    from .cluster_controllers import ClusterControllers, ClusterControllersArgs
    from .controllers.releases import KueueSettings
    from .fleet_queue import FleetQueue
    from .guard import PlacementRefused
    from .platform import ComputeClass, Taint
    from .providers import provider_for, provider_from_stack_config
    from .remediation_gate import RemediationGate
    from .sweep import Sweep
    from .training_run import TrainingRun
    from .validation import ArgsError, validate
    from .workload_queue import WorkloadQueue


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
