"""BatchJob: an experiment, fine-tune, eval or distillation run that survives preemption."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent
from .args import BatchJobArgs


class BatchJob(ManifestComponent):
    """A Job on preemptible nodes: preemptions ignored by the failure policy, checkpoints mounted, resume on
    restart, grace period within the platform's limit (a longer one is refused at preview)."""

    job_name: pulumi.Output[str]

    def __init__(self, name: str, args: BatchJobArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("BatchJob", name, manifests.batch_job(name, args), opts, args.preemptible_taint)
        self.job_name = pulumi.Output.from_input(args.job_name or name)
        self.finish({"job_name": self.job_name})
