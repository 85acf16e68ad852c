"""Sweep: a hyperparameter sweep or ablation, one JobSet per trial (or one Indexed Job for all)."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent, metadata_field
from .args import SweepArgs


class Sweep(ManifestComponent):
    """One JobSet per trial (``fresh_job_per_attempt``, the default), or an Indexed Job and a ConfigMap
    holding every trial's parameters (see :class:`SweepArgs`).

    A trial's pod gets TRIAL_INDEX and its parameters (TRIAL_PARAMETERS, or entry ``i`` of
    TRIAL_PARAMETERS_FILE for the Indexed Job); the runtime's ``trial_parameters()`` reads either. Each
    trial checkpoints under its own run key (a digest of the container and its parameters), so a
    changed trial starts fresh.

    Short of GPUs, ``pulumi up`` does not wait for the pods: it returns once the cluster accepted the JobSets
    or the Job (a Job once started) and warns of what cannot be placed now (see
    :mod:`~together_clusters.components.capacity`); the pods wait Pending.
    """

    job_sets: pulumi.Output[list[str]]
    """The trials' JobSets, in trial order (empty for the Indexed Job)."""
    job_name: pulumi.Output[str | None]
    """The Indexed Job (None with a JobSet per trial)."""
    namespace: pulumi.Output[str]
    trials_config_map: pulumi.Output[str | None]
    """The Indexed Job's ConfigMap of trials (None with a JobSet per trial)."""

    def __init__(self, name: str, args: SweepArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "Sweep",
            name,
            args,
            lambda plain: manifests.sweep(name, plain),
            opts,
            args.placement.preemptible_taint,
        )
        job_sets = [r for key, r in self.resources.items() if key.startswith("JobSet/")]
        self.job_sets = pulumi.Output.all(*(metadata_field(r, "name") for r in job_sets))
        if job_sets:
            self.job_name = pulumi.Output.from_input(None)
            self.trials_config_map = pulumi.Output.from_input(None)
            self.namespace = metadata_field(job_sets[0], "namespace")
        else:
            job = self.child("Job")
            self.job_name = metadata_field(job, "name")
            self.trials_config_map = metadata_field(self.child("ConfigMap"), "name")
            self.namespace = metadata_field(job, "namespace")
        self.finish(
            {
                "job_sets": self.job_sets,
                "job_name": self.job_name,
                "namespace": self.namespace,
                "trials_config_map": self.trials_config_map,
            }
        )
