"""BatchJob: an experiment, fine-tune, eval or distillation run that survives preemption."""

from __future__ import annotations

import pulumi

from together_clusters.platform import JOBSET_API

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import BatchJobArgs


class BatchJob(ManifestComponent):
    """A Job on preemptible nodes: preemptions ignored by the failure policy, checkpoints mounted, resume on
    restart, grace period within the platform's limit (a longer one is refused at preview). By default
    (``fresh_job_per_attempt``) a JobSet holding that Job, recreated fresh after each preemption, so
    replacements never wait for the Job controller's growing backoff; the JobSet waits for the
    :class:`~together_clusters.components.ClusterControllers` of its provider (``provider_for`` declares one).

    Outputs come from the created object: ``job_name`` and ``namespace`` as the API server has them.

    Short of GPUs, ``pulumi up`` does not wait for the pods: it returns once the cluster accepted the Job or
    JobSet (a Job once started) and warns of what cannot be placed now (see
    :mod:`~together_clusters.components.capacity`); the pods wait Pending.
    """

    job_name: pulumi.Output[str]
    namespace: pulumi.Output[str]

    def __init__(self, name: str, args: BatchJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "BatchJob",
            name,
            args,
            lambda plain: manifests.batch_job(name, plain),
            opts,
            args.placement.preemptible_taint,
        )
        job = self.child(JOBSET_API.kind if args.retries.fresh_job_per_attempt else "Job")
        self.job_name = metadata_field(job, "name")
        self.namespace = metadata_field(job, "namespace")
        self.finish({"job_name": self.job_name, "namespace": self.namespace})
