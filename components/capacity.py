"""Can a workload's GPUs be placed on its cluster now, and if not, why and what to do (pure).

``pulumi up`` never waits for a workload's pods to run (see :mod:`.manifests.awaiting`): short of GPUs, they
wait Pending. So that this is not silent, every component warns, once per ``up``, of the work its cluster
cannot place, from two pieces of plain data:

* what the workload needs at once, per compute class (:func:`gpu_needs`, read from its rendered objects:
  each pod's GPUs as the scheduler counts them, :func:`~together_clusters.platform.pod_gpu_request`, for
  every pod that runs at once);
* what the cluster has (:class:`ClusterCapacity`, the ``Cluster``'s outputs): its standard GPUs, and its
  preemptible GPUs allocated now against the target it fills toward.

The verdict (:func:`placement_verdict`) places the workload alone on the cluster's nodes of 8 GPUs (a pod's
GPUs are on one node; first fit, largest pod first): a warning means it cannot all be placed even on an
otherwise idle cluster (other workloads may hold more). Standard pods go on standard nodes, preemptible pods
on the allocated preemptible ones; ``PREEMPTIBLE_FIRST`` pods on the preemptible room left, then the standard
room left: placed on standard nodes they are noted (they run at full price until preemptible capacity
returns), not warned of.

A cluster created with ``auto_scale`` grows its standard GPUs from ``num_gpus`` up to ``auto_scale_max_gpus``
for pods Pending for lack of GPUs (standard nodes only: see the emulator's ``autoscaling`` module for what the
platform's docs leave open). Standard and preemptible-first work that does not fit on the floor but fits
under the ceiling is warned of as waiting for the platform to add nodes, not as short: nothing in the code
needs to change. Preemptible work is weighed as without autoscaling.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import (
    CRITICAL_LABEL,
    GPUS_PER_NODE,
    PLACEMENT_LABEL,
    ComputeClass,
    pod_gpu_request,
)

from .guard import may_run_on_preemptible, pod_templates


@dataclass(frozen=True)
class ClusterCapacity:
    """The GPUs of a cluster, as its ``Cluster`` outputs say. The platform owns the allocated count; the code
    owns the targets (``num_gpus``, ``num_preemptible_gpus``)."""

    gpu_type: str
    standard_gpus: int
    desired_preemptible_gpus: int
    allocated_preemptible_gpus: int
    autoscale_max_gpus: int | None = None
    """The standard GPUs the platform grows the cluster to under load (``auto_scale_max_gpus``, with
    ``auto_scale``); ``None``: it does not autoscale."""

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> ClusterCapacity | None:
        """From a ``Cluster``'s outputs (``gpu_type``, ``num_gpus``, ``desired_preemptible_gpus``,
        ``allocated_preemptible_gpus``, and its inputs ``auto_scale`` and ``auto_scale_max_gpus``); ``None``
        when a count is not known."""
        counts = [
            outputs.get(k) for k in ("num_gpus", "desired_preemptible_gpus", "allocated_preemptible_gpus")
        ]
        if not all(isinstance(c, int) for c in counts):
            return None
        standard, desired, allocated = (int(c) for c in counts)  # type: ignore[arg-type]
        ceiling = _whole(outputs.get("auto_scale_max_gpus"))
        grows = outputs.get("auto_scale") is True and ceiling is not None and ceiling > standard
        return cls(
            str(outputs.get("gpu_type") or "GPU"),
            standard,
            desired,
            allocated,
            autoscale_max_gpus=ceiling if grows else None,
        )


def _whole(value: Any) -> int | None:
    """A count as an int: an output of an input without a typed annotation comes back from the engine as a
    float (``32.0``); ``None`` for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, float) and value.is_integer() else None


# --- what a workload needs ----------------------------------------------------------------------


def gpu_needs(manifests: Iterable[Mapping[str, Any]]) -> dict[ComputeClass, list[int]]:
    """The GPUs of each pod a workload's objects run at once, per compute class, largest first (pods needing
    no GPU and classes needing none left out)."""
    needs: dict[ComputeClass, list[int]] = {}
    for manifest in manifests:
        for found in pod_templates(manifest):
            gpus = pod_gpu_request(found.template.get("spec") or {})
            pods = found.replicas * (_pods_of_job(found.job_spec) if found.job_spec is not None else 1)
            if gpus and pods:
                needs.setdefault(_class_of_pod(found.template), []).extend([gpus] * pods)
    return {compute_class: sorted(pods, reverse=True) for compute_class, pods in needs.items()}


def _pods_of_job(job_spec: Mapping[str, Any]) -> int:
    """A Job's pods at once: its parallelism (Kubernetes' default 1), never more than its completions."""
    parallelism = int(job_spec.get("parallelism", 1))
    completions = job_spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def _class_of_pod(template: Mapping[str, Any]) -> ComputeClass:
    """The class a pod asked for: its placement label; else standard for critical pods and for those the
    scheduler keeps off preemptible nodes, preemptible for the rest."""
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels.get(PLACEMENT_LABEL) in set(ComputeClass):
        return ComputeClass(labels[PLACEMENT_LABEL])
    if labels.get(CRITICAL_LABEL) == "true" or not may_run_on_preemptible(template.get("spec") or {}):
        return ComputeClass.STANDARD
    return ComputeClass.PREEMPTIBLE


# --- the verdict ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlacementVerdict:
    """What ``up`` says of a workload's placement: a ``warning`` (some of it cannot be placed now), a ``note``
    (it runs, but on standard GPUs at full price), or neither. Each is one line."""

    warning: str | None = None
    note: str | None = None


def placement_verdict(
    subject: str, needs: Mapping[ComputeClass, Sequence[int]], capacity: ClusterCapacity
) -> PlacementVerdict:
    """Whether ``subject``'s pods (``needs``: each one's GPUs, per class) can be placed on a cluster of
    ``capacity``, and why not (see the module's docstring for how the classes are weighed)."""
    gpu = capacity.gpu_type
    standard, preemptible, first = (
        sorted(needs.get(c, ()), reverse=True)
        for c in (ComputeClass.STANDARD, ComputeClass.PREEMPTIBLE, ComputeClass.PREEMPTIBLE_FIRST)
    )
    ceiling = capacity.autoscale_max_gpus
    has = (
        f"the cluster has {capacity.allocated_preemptible_gpus} of its {capacity.desired_preemptible_gpus} "
        f"desired preemptible GPUs allocated and {capacity.standard_gpus} standard"
        + ("" if ceiling is None else f" (autoscaling up to {ceiling})")
    )
    standard_free = _nodes(capacity.standard_gpus)
    preemptible_free = _nodes(capacity.allocated_preemptible_gpus)
    standard_left = _place(standard, standard_free)
    standard_room = list(standard_free)
    preemptible_left = _place(preemptible, preemptible_free)
    first_past_preemptible = _place(first, preemptible_free)
    first_left = _place(first_past_preemptible, standard_free)

    # What the refill would place: every desired preemptible node, beside the standard room there is now.
    refilled = _nodes(capacity.desired_preemptible_gpus)
    refill_places_preemptible = not _place(preemptible, refilled)
    refill_places_first = not _place(_place(first, refilled), standard_room)

    # With autoscaling, the standard room the platform grows to: standard pods first, then preemptible-first.
    grown_room = _nodes(ceiling or 0)
    waits_for_nodes = bool(
        ceiling is not None
        and (standard_left or first_left)
        and not _place(standard, grown_room)
        and not _place(first_past_preemptible, grown_room)
    )
    if waits_for_nodes:
        standard_left = first_left = []

    problems: list[str] = []
    fixes: list[str] = []
    if standard_left:
        problems.append(f"{sum(standard)} standard {gpu} GPUs")
        fixes.append("raise the cluster's num_gpus")
    if preemptible_left:
        problems.append(f"{sum(preemptible)} preemptible {gpu} GPUs")
        fixes.append(
            "wait for the refill" if refill_places_preemptible else "raise the cluster's num_preemptible_gpus"
        )
        fixes.append(
            "use compute_class=ComputeClass.PREEMPTIBLE_FIRST to run on idle standard GPUs meanwhile"
        )
    if first_left:
        problems.append(f"{sum(first)} preemptible-first {gpu} GPUs")
        if refill_places_first:
            fixes.append("wait for the refill")
    waiting = (
        f"waiting for the platform to add nodes: its {sum(standard) + sum(first_past_preemptible)} standard "
        f"{gpu} GPUs at once do not fit on the cluster's {capacity.standard_gpus} standard GPUs now; autoscaling "
        f"adds standard nodes for its Pending pods up to {ceiling} (pulumi up does not wait for them)"
    )
    if problems:
        fixes.append("lower its size")
        return PlacementVerdict(
            warning=f"{subject} cannot be placed now: it needs {' and '.join(problems)} at once, {has}; what "
            f"does not fit waits Pending (pulumi up does not wait for it): {_either(fixes)}"
            + (f"; and it is {waiting}" if waits_for_nodes else "")
        )
    if waits_for_nodes:
        return PlacementVerdict(warning=f"{subject} is {waiting}")
    if first_past_preemptible:
        return PlacementVerdict(
            note=f"{subject}: {sum(first_past_preemptible)} of its {sum(first)} preemptible-first {gpu} GPUs run on "
            f"standard GPUs at full price until preemptible capacity returns ({has})"
        )
    return PlacementVerdict()


def _nodes(gpus: int) -> list[int]:
    """The free GPUs of each node of a class with ``gpus`` GPUs (whole nodes of GPUS_PER_NODE)."""
    return [GPUS_PER_NODE] * (gpus // GPUS_PER_NODE)


def _place(pods: Sequence[int], free: list[int]) -> list[int]:
    """Place ``pods`` (GPUs each, in this order) on the nodes of ``free``, first fit, taking their GPUs out of
    ``free``; the pods that found no node. A pod's GPUs are on one node, so 8 GPUs free over two nodes do
    not take a pod of 8."""
    left: list[int] = []
    for gpus in pods:
        node = next((i for i, room in enumerate(free) if room >= gpus), None)
        if node is None:
            left.append(gpus)
        else:
            free[node] -= gpus
    return left


def _either(fixes: list[str]) -> str:
    """``a, b or c``, each fix once, in the order given."""
    unique = list(dict.fromkeys(fixes))
    return unique[0] if len(unique) == 1 else f"{', '.join(unique[:-1])} or {unique[-1]}"
