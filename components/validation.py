"""Every problem of a workload's arguments, found in one step before anything is declared (pure).

First the arguments' own checks (each workload module's ``argument_violations``); when they pass, the
preemptible placement guard's checks of the objects they render (a layout is only worth checking once
its arguments make sense). The components run the same two steps at construction, so at preview:
:class:`~together_clusters.errors.ArgsError` lists every problem of the arguments,
:class:`~together_clusters.errors.PlacementRefused` every refusal of the guard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from together_clusters.errors import ArgsError
from together_clusters.platform import Taint

from . import guard
from .args import BatchInferenceArgs, BatchJobArgs, SweepArgs, TrainingRunArgs
from .manifests import batch_inference, batch_job, sweep, training_run
from .manifests.batch_inference import argument_violations as batch_inference_violations
from .manifests.batch_job import argument_violations as batch_job_violations
from .manifests.sweep import argument_violations as sweep_violations
from .manifests.training_run import argument_violations as training_run_violations
from .violations import Violation

__all__ = ["ArgsError", "WorkloadArgs", "preemptible_taint", "validate"]

WorkloadArgs = BatchJobArgs | SweepArgs | BatchInferenceArgs | TrainingRunArgs

_Check = Callable[[str, Any], list[Violation]]
_Render = Callable[[str, Any], Sequence[dict[str, Any]]]

_WORKLOADS: dict[type, tuple[_Check, _Render]] = {
    BatchJobArgs: (batch_job_violations, batch_job),
    SweepArgs: (sweep_violations, sweep),
    BatchInferenceArgs: (batch_inference_violations, batch_inference),
    TrainingRunArgs: (training_run_violations, training_run),
}


def preemptible_taint(args: WorkloadArgs) -> Taint | None:
    """The taint the workload's preemptible nodes carry, as the guard needs it."""
    if isinstance(args, TrainingRunArgs):
        return args.preemptible_taint
    return args.placement.preemptible_taint


def validate(name: str, args: WorkloadArgs) -> list[Violation]:
    """Every violation of the workload ``name`` with ``args``: its arguments' own, else the guard's."""
    check, render = _WORKLOADS[type(args)]
    found = check(name, args)
    if found:
        return found
    return guard.check_manifests(render(name, args), preemptible_taint(args))
