"""Can a workload's GPUs be placed on its cluster now, and if not, why and what to do (pure).

``pulumi up`` never waits for a workload's pods to run (see :mod:`.manifests.awaiting`): short of GPUs, they
wait Pending. So that this is not silent, every component warns, once per ``up``, of the work its cluster
cannot place, from two pieces of plain data:

* what the workload needs at once, per compute class (:func:`gpu_needs`, read from its rendered objects:
  each pod template's GPU limits times the pods that run at once);
* what the cluster has (:class:`ClusterCapacity`, the ``Cluster``'s outputs): its standard GPUs, and its
  preemptible GPUs allocated now against the target it fills toward.

The verdict (:func:`placement_verdict`) weighs the workload alone against the cluster's totals: a warning
means it cannot be placed even on an otherwise idle cluster (other workloads may hold more). Standard pods
take standard GPUs, preemptible pods allocated preemptible ones; ``PREEMPTIBLE_FIRST`` pods take the
preemptible GPUs left, then the standard ones left: covered by standard GPUs they are noted (they run at full
price until preemptible capacity returns), not warned of.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import CRITICAL_LABEL, PLACEMENT_LABEL, ComputeClass

from .guard import may_run_on_preemptible
from .manifests.common import GPU_RESOURCE


@dataclass(frozen=True)
class ClusterCapacity:
    """The GPUs of a cluster, as its ``Cluster`` outputs say. The platform owns the allocated count; the code
    owns the targets (``num_gpus``, ``num_preemptible_gpus``)."""

    gpu_type: str
    standard_gpus: int
    desired_preemptible_gpus: int
    allocated_preemptible_gpus: int

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> ClusterCapacity | None:
        """From a ``Cluster``'s outputs (``gpu_type``, ``num_gpus``, ``desired_preemptible_gpus``,
        ``allocated_preemptible_gpus``); ``None`` when a count is not known."""
        counts = [
            outputs.get(k) for k in ("num_gpus", "desired_preemptible_gpus", "allocated_preemptible_gpus")
        ]
        if not all(isinstance(c, int) for c in counts):
            return None
        standard, desired, allocated = (int(c) for c in counts)  # type: ignore[arg-type]
        return cls(str(outputs.get("gpu_type") or "GPU"), standard, desired, allocated)


# --- what a workload needs ----------------------------------------------------------------------


def gpu_needs(manifests: Iterable[Mapping[str, Any]]) -> dict[ComputeClass, int]:
    """The GPUs a workload's objects ask for at once, per compute class (classes needing none left out)."""
    needs: dict[ComputeClass, int] = {}
    for pods, template in _pod_templates(manifests):
        gpus = pods * _gpus_of_pod(template.get("spec") or {})
        if gpus:
            compute_class = _class_of_pod(template)
            needs[compute_class] = needs.get(compute_class, 0) + gpus
    return needs


def _pod_templates(manifests: Iterable[Mapping[str, Any]]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Each pod template of the objects, with how many of its pods run at once."""
    for manifest in manifests:
        kind, spec = manifest.get("kind"), manifest.get("spec") or {}
        if kind == "Deployment":
            yield int(spec.get("replicas", 1)), spec.get("template") or {}
        elif kind == "Job":
            yield _pods_of_job(spec), spec.get("template") or {}
        elif kind == "JobSet":
            for replicated in spec.get("replicatedJobs") or []:
                job = (replicated.get("template") or {}).get("spec") or {}
                yield int(replicated.get("replicas", 1)) * _pods_of_job(job), job.get("template") or {}


def _pods_of_job(job_spec: Mapping[str, Any]) -> int:
    """A Job's pods at once: its parallelism (Kubernetes' default 1), never more than its completions."""
    parallelism = int(job_spec.get("parallelism", 1))
    completions = job_spec.get("completions")
    return min(parallelism, int(completions)) if completions is not None else parallelism


def _gpus_of_pod(pod_spec: Mapping[str, Any]) -> int:
    """The GPUs a pod's main containers ask for (its init containers run before, on the same GPUs)."""
    return sum(
        int(((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0))
        for c in pod_spec.get("containers") or []
    )


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
    subject: str, needs: Mapping[ComputeClass, int], capacity: ClusterCapacity
) -> PlacementVerdict:
    """Whether ``subject``'s GPUs (``needs``, per class) can be placed on a cluster of ``capacity``, and why
    not (see the module's docstring for how the classes are weighed)."""
    gpu = capacity.gpu_type
    standard = needs.get(ComputeClass.STANDARD, 0)
    preemptible = needs.get(ComputeClass.PREEMPTIBLE, 0)
    first = needs.get(ComputeClass.PREEMPTIBLE_FIRST, 0)
    has = (
        f"the cluster has {capacity.allocated_preemptible_gpus} of its {capacity.desired_preemptible_gpus} "
        f"desired preemptible GPUs allocated and {capacity.standard_gpus} standard"
    )
    problems: list[str] = []
    fixes: list[str] = []
    if standard > capacity.standard_gpus:
        problems.append(f"{standard} standard {gpu} GPUs")
        fixes.append("raise the cluster's num_gpus")
    if preemptible > capacity.allocated_preemptible_gpus:
        problems.append(f"{preemptible} preemptible {gpu} GPUs")
        if preemptible <= capacity.desired_preemptible_gpus:
            fixes.append("wait for the refill")
        else:
            fixes.append("raise the cluster's num_preemptible_gpus")
        fixes.append(
            "use compute_class=ComputeClass.PREEMPTIBLE_FIRST to run on idle standard GPUs meanwhile"
        )
    preemptible_room = max(capacity.allocated_preemptible_gpus - preemptible, 0)
    standard_room = max(capacity.standard_gpus - standard, 0)
    on_standard = max(first - preemptible_room, 0)
    if on_standard > standard_room:
        problems.append(f"{first} preemptible-first {gpu} GPUs")
        if first <= capacity.desired_preemptible_gpus + standard_room:
            fixes.append("wait for the refill")
    if problems:
        fixes.append("lower its size")
        return PlacementVerdict(
            warning=f"{subject} cannot be placed now: it needs {' and '.join(problems)} at once, {has}; what "
            f"does not fit waits Pending (pulumi up does not wait for it): {_either(fixes)}"
        )
    if on_standard:
        return PlacementVerdict(
            note=f"{subject}: {on_standard} of its {first} preemptible-first {gpu} GPUs run on standard GPUs "
            f"at full price until preemptible capacity returns ({has})"
        )
    return PlacementVerdict()


def _either(fixes: list[str]) -> str:
    """``a, b or c``, each fix once, in the order given."""
    unique = list(dict.fromkeys(fixes))
    return unique[0] if len(unique) == 1 else f"{', '.join(unique[:-1])} or {unique[-1]}"
