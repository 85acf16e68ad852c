"""What a workload given ``queue=`` a FleetQueue must be: created on the manager, its checkpoints where every
region reaches them (refused at construction, so at preview, one line naming the field and the fix)."""

from __future__ import annotations

from typing import Any

from .args import SharedVolume
from .violations import Violation, argument_violation


def is_fleet(queue: Any) -> bool:
    """Whether a workload's ``queue=`` is a FleetQueue (it knows its manager and workers)."""
    return hasattr(queue, "worker_names") and hasattr(queue, "manager_cluster")


def fleet_workload_violations(args: Any, cluster: Any) -> list[Violation]:
    """The problems of a workload submitted to a FleetQueue: ``cluster`` is the one of the provider it is
    created with (``None``: not known, e.g. a provider made from a kubeconfig)."""
    queue: Any = getattr(args, "queue", None)
    if not is_fleet(queue):
        return []
    found = []
    manager = queue.manager_cluster
    if cluster is not None and manager is not None and cluster is not manager:
        worker = next((name for name, worker in queue.worker_clusters.items() if worker is cluster), None)
        where = f"the provider of worker {worker!r}" if worker else "the provider of another cluster"
        found.append(
            argument_violation(
                "fleet-provider",
                "opts.provider",
                worker or "another cluster",
                f"queue={queue.local_queue_name!r} is a FleetQueue, but the workload is created with {where}: "
                "only the manager cluster dispatches it",
                "create it with the manager's provider, the one the FleetQueue was created with",
            )
        )
    if getattr(args, "login", None) is not None:
        found.append(
            argument_violation(
                "fleet-login",
                "login",
                "ContainerSpec(...)",
                f"queue={queue.local_queue_name!r} is a FleetQueue: the run goes whole to one worker cluster, "
                "and a login pod would stay on the manager, which reaches none of its pods",
                "leave login unset for a run in a fleet, and reach its pods through the worker cluster it "
                "runs in (together-clusters status names it)",
            )
        )
    checkpoint = getattr(args, "checkpoint", None)
    if isinstance(checkpoint, SharedVolume):
        found.append(
            argument_violation(
                "fleet-checkpoint",
                "checkpoint",
                checkpoint.claim_name,
                f"checkpoint=SharedVolume(claim_name={checkpoint.claim_name!r}) is a volume of one region, but "
                f"queue={queue.local_queue_name!r} is a FleetQueue whose workloads may resume in another region",
                "keep the checkpoints where every region reaches them: checkpoint=S3Bucket(...)",
            )
        )
    return found
