"""Back to half price: the descheduler policy that moves ``PREEMPTIBLE_FIRST`` pods which fell back to standard
nodes back onto preemptible ones once there is room again (pure).

A ``PREEMPTIBLE_FIRST`` pod prefers preemptible nodes (a preferred node affinity) and runs on idle standard
capacity when there is none. When capacity returns, nothing in Kubernetes moves it: the scheduler never
revisits a running pod. The descheduler's ``RemovePodsViolatingNodeAffinity``, for
``preferredDuringSchedulingIgnoredDuringExecution``, evicts a pod when some node scores higher on its preferred
affinity than the node it runs on; the eviction is survived as a preemption (SIGTERM, the checkpoint runtime
saves, the Job ignores the ``DisruptionTarget`` failure) and the scheduler places the replacement on the
preemptible node, where it resumes from the checkpoint. Its DefaultEvictor bounds that:

- ``labelSelector``: only pods labelled ``together.ai/placement=preemptible-first``
  (:data:`~together_clusters.platform.PLACEMENT_LABEL`); nothing else in the cluster is ever evicted by it.
- ``nodeFit`` with ``nodeSelector`` the preemptible nodes: the plugin alone evicts as soon as a preemptible
  node *exists* (it compares affinity weights over every node, full or not, and counts the pod's own node as
  room), so a pod would be evicted only to land on standard again. With these, it is evicted only when it
  fits on a ready preemptible node now (resources, taints, selectors).
- ``minPodAge`` = :attr:`ClusterControllersArgs.move_back_interval_seconds`: no pod younger is evicted, so a
  run is moved at most once per interval however often capacity comes and goes (each move costs a save and a
  restore).
- ``noEvictionPolicy: Mandatory``: a pod annotated :data:`NO_EVICTION_ANNOTATION` is never evicted.
- ``PodsWithLocalStorage`` protection off: a ``PREEMPTIBLE_FIRST`` pod already accepts losing its node; its
  state is in its checkpoint, not in an ``emptyDir``.

The descheduler runs as a Deployment that looks every ``descheduling_interval_seconds`` (a CronJob would start
a pod per run: slower, and more objects).
"""

from __future__ import annotations

from typing import Any

from together_clusters.platform import COMPUTE_CLASS_LABEL, PLACEMENT_LABEL, PREEMPTIBLE, ComputeClass

from ..violations import Violation, argument_violation

PROFILE_NAME = "move-back-to-preemptible"
"""The policy's one profile."""

NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
"""Pod annotation (any value) the descheduler honours under ``noEvictionPolicy: Mandatory``: never evict."""

PREFERRED_AFFINITY = "preferredDuringSchedulingIgnoredDuringExecution"


def descheduler_policy(move_back_interval_seconds: int) -> dict[str, Any]:
    """The ``deschedulerPolicy`` value of the descheduler's chart: one profile moving fallback pods back."""
    evictor = {
        "labelSelector": {"matchLabels": {PLACEMENT_LABEL: ComputeClass.PREEMPTIBLE_FIRST.value}},
        "nodeFit": True,
        "nodeSelector": f"{COMPUTE_CLASS_LABEL}={PREEMPTIBLE}",
        "minPodAge": f"{move_back_interval_seconds}s",
        "noEvictionPolicy": "Mandatory",
        "podProtections": {"defaultDisabled": ["PodsWithLocalStorage"]},
    }
    return {
        "profiles": [
            {
                "name": PROFILE_NAME,
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": evictor},
                    {
                        "name": "RemovePodsViolatingNodeAffinity",
                        "args": {"nodeAffinityType": [PREFERRED_AFFINITY]},
                    },
                ],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeAffinity"]}},
            }
        ]
    }


def descheduler_values(move_back_interval_seconds: int, descheduling_interval_seconds: int) -> dict[str, Any]:
    """The descheduler chart's values for moving back: a Deployment looking every interval, with the policy."""
    return {
        "kind": "Deployment",
        "deschedulingInterval": f"{descheduling_interval_seconds}s",
        "deschedulerPolicy": descheduler_policy(move_back_interval_seconds),
    }


DESCHEDULER_DEFAULTS_CHANGED: dict[str, str] = {
    "kind": "a Deployment looking every interval: a CronJob starts a pod per run, slower and more objects",
    "deschedulingInterval": "ClusterControllersArgs.descheduling_interval_seconds (120 s by default, the chart's "
    "5m): how late a fallback pod may be moved back once preemptible room returns",
    "deschedulerPolicy.profiles": "one profile that only moves PREEMPTIBLE_FIRST pods back (this module): the "
    "chart's default profile (RemoveDuplicates, LowNodeUtilization, RemovePodsViolatingNodeTaints, ...) would "
    "evict any pod of the cluster, training runs included",
}
"""Each default of the descheduler chart's values.yaml (v0.36.0) that :func:`descheduler_values` replaces, with
why (gathered in :data:`..releases.CHART_DEFAULTS_CHANGED`; tests/components/test_chart_defaults.py)."""


def interval_violations(
    move_back_interval_seconds: Any, descheduling_interval_seconds: Any
) -> list[Violation]:
    """What is wrong with the two intervals: each a whole number of seconds above zero."""
    problems = []
    for field, value in (
        ("move_back_interval_seconds", move_back_interval_seconds),
        ("descheduling_interval_seconds", descheduling_interval_seconds),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(
                argument_violation(
                    "move-back-interval",
                    field,
                    value,
                    f"{field}={value!r} is not a whole number of seconds above zero",
                    f"set {field} to a number of seconds such as 1800, or leave it unset",
                )
            )
    return problems
