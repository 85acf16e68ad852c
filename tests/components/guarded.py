"""What the guard's tests render: a Job that passes every rule, and a standard-node BatchJob whose long
grace period only preemptible nodes forbid."""

from __future__ import annotations

import copy
from typing import Any

from together_clusters.components import (
    BatchJobArgs,
    ComputeClass,
    ContainerSpec,
    NodePlacement,
    PodSettings,
    Retries,
    SharedVolume,
    manifests,
)

IMAGE = "ghcr.io/example/trainer:1.0"
SHARED = SharedVolume(claim_name="ckpt")


def good_job(checkpoint: SharedVolume | None = SHARED) -> dict[str, Any]:
    """A BatchJob rendered as a plain Job (the guard's Job rules apply to it directly), which passes every
    rule; a copy of its own, free to change."""
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=checkpoint,
        retries=Retries(fresh_job_per_attempt=False),
    )
    rendered: dict[str, Any] = copy.deepcopy(manifests.batch_job("ft", args)[0])
    return rendered


def long_grace_on_standard_nodes(critical: bool = False) -> BatchJobArgs:
    """A BatchJob on standard nodes with a 900 s grace period: past the preemptible limit, fine here."""
    return BatchJobArgs(
        container=ContainerSpec(image=IMAGE),
        checkpoint=None,
        placement=NodePlacement(ComputeClass.STANDARD, critical=critical),
        pod=PodSettings(grace_period_seconds=900),
    )
