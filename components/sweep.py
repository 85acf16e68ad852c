"""Sweep: a hyperparameter sweep or ablation as an Indexed Job, one index per trial."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent
from .args import SweepArgs


class Sweep(ManifestComponent):
    """A ConfigMap holding every trial's parameters (``trials.json``, a JSON list) and an Indexed Job.

    Pod ``i`` gets TRIAL_INDEX=i and TRIAL_PARAMETERS_FILE; the runtime's ``trial_parameters()`` reads
    entry ``i``. Each trial checkpoints under its own ``<sweep>/trial-<i>`` and is retried up to
    ``backoff_limit_per_index`` times; the sweep fails after ``max_failed_indexes`` failed trials.
    """

    job_name: pulumi.Output[str]
    trials_config_map: pulumi.Output[str]

    def __init__(self, name: str, args: SweepArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("Sweep", name, manifests.sweep(name, args), opts, args.preemptible_taint)
        sweep_name = args.sweep_name or name
        self.job_name = pulumi.Output.from_input(sweep_name)
        self.trials_config_map = pulumi.Output.from_input(
            manifests.trials_config_map_name(sweep_name, manifests.trials_config_map_data(args))
        )
        self.finish({"job_name": self.job_name, "trials_config_map": self.trials_config_map})
