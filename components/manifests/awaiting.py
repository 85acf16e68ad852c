"""What ``pulumi up`` waits for, per kind of workload object: that the cluster accepted it, never that its
pods run.

Every workload component behaves the same way when GPUs are short: ``up`` returns once the objects are
accepted (a Job started by its controller, a Deployment observed by its controller, a JobSet stored), and
warns of the work that cannot be placed (see :mod:`together_clusters.components.capacity`); the pods then
wait Pending for capacity, as Kubernetes' own scheduling does. Waiting for pods would make ``up`` block for
as long as preemptible capacity is short (hours, with no deadline of ours) for some kinds and not others.

Not ``pulumi.com/skipAwait``: that also skips waiting for deletion, so replacing an object under the same
name would race the old one's removal (and its pods' grace period to save or drain).
"""

from __future__ import annotations

from collections.abc import Mapping

WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
"""pulumi-kubernetes' annotation replacing its readiness check of an object by the condition it names."""

JOB_READY_ANNOTATIONS: Mapping[str, str] = {WAIT_FOR_ANNOTATION: "jsonpath={.status.startTime}"}
"""On every Job: ready once the Job controller has started it.

pulumi-kubernetes otherwise waits for a Job to complete, which fails ``pulumi up`` after 10 minutes
for a run that takes days.
"""

DEPLOYMENT_ACCEPTED_ANNOTATIONS: Mapping[str, str] = {
    WAIT_FOR_ANNOTATION: "jsonpath={.status.observedGeneration}"
}
"""On every Deployment: ready once the Deployment controller has observed it (and made its ReplicaSet).

pulumi-kubernetes otherwise waits for every replica to be available, with no deadline but its own
10 minutes: a preemptible BatchInference's ``up`` blocked until capacity came back (82 s measured on the
twin, or failed after 10 minutes), while a Job's ``up`` of the same pods returned at once.
"""


SERVICE_STORED_ANNOTATIONS: Mapping[str, str] = {WAIT_FOR_ANNOTATION: "jsonpath={.metadata.uid}"}
"""On a chart's Services, where the component waits for admission instead: ready once stored.

pulumi-kubernetes otherwise waits for a Service's endpoints, that is for its controller's pods to be ready."""

CHART_READY_WHEN_STORED: Mapping[str, Mapping[str, str]] = {
    "Deployment": DEPLOYMENT_ACCEPTED_ANNOTATIONS,
    "Service": SERVICE_STORED_ANNOTATIONS,
}
"""What a chart's objects of each kind pulumi-kubernetes would hold a step for (until their pods are ready) wait
for instead, when the component itself waits for the cluster to admit a JobSet
(:mod:`together_clusters.components.controllers.admission`).

Why: pulumi-kubernetes applies a chart's objects in no fixed order and holds one of the engine's steps
(``--parallel``, 8 on two cores) per Deployment and Service until its pods are ready. A Deployment applied
before the CRDs and RBAC its controller needs waits for objects that only a free step applies: with every
step so held (Kueue's Deployment and three Services on each of two workers in the fleet's benchmark), ``up``
stalled until the provider's 10 minutes ran out (issue 41). Stored, they free their step at once; the
component's admission probe then waits for what a user needs: the webhooks answering."""
