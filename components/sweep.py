"""Sweep: a hyperparameter sweep or ablation as an Indexed Job, one index per trial."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import SweepArgs


class Sweep(ManifestComponent):
    """A ConfigMap holding every trial's parameters (``trials.json``, a JSON list) and an Indexed Job.

    Pod ``i`` gets TRIAL_INDEX=i and TRIAL_PARAMETERS_FILE; the runtime's ``trial_parameters()`` reads
    entry ``i``. Each trial checkpoints under its own run key (a digest of the container and its
    parameters, from ``checkpoint-keys.json``), so a changed trial starts fresh; it is retried up to
    ``backoff_limit_per_index`` times; the sweep fails after ``max_failed_indexes`` failed trials.
    """

    job_name: pulumi.Output[str]
    namespace: pulumi.Output[str]
    trials_config_map: pulumi.Output[str]

    def __init__(self, name: str, args: SweepArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "Sweep", name, args, lambda plain: manifests.sweep(name, plain), opts, args.preemptible_taint
        )
        job = self.child("Job")
        self.job_name = metadata_field(job, "name")
        self.namespace = metadata_field(job, "namespace")
        self.trials_config_map = metadata_field(self.child("ConfigMap"), "name")
        self.finish(
            {
                "job_name": self.job_name,
                "namespace": self.namespace,
                "trials_config_map": self.trials_config_map,
            }
        )
