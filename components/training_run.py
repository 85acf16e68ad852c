"""TrainingRun: a coordinator on standard nodes and workers on preemptible nodes, sharing checkpoints."""

from __future__ import annotations

import pulumi

from . import manifests
from ._shell import ManifestComponent
from .args import TrainingRunArgs


class TrainingRun(ManifestComponent):
    """A headless Service for the coordinator, the coordinator Job (standard nodes, critical), the workers'
    Indexed Job (preemptible nodes) and optionally a critical login Deployment on standard nodes."""

    coordinator_host: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingRunArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            "TrainingRun", name, manifests.training_run(name, args), opts, args.preemptible_taint
        )
        run = args.run_name or name
        self.coordinator_host = pulumi.Output.from_input(
            manifests.coordinator_host(f"{run}-coordinator", args.namespace)
        )
        self.finish({"coordinator_host": self.coordinator_host})
