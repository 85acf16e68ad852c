"""BatchJob's objects: one Job (or attempt JobSet) that survives preemption."""

from __future__ import annotations

from ..args import BatchJobArgs, queue_name_of
from ..placement import Placement, placement_for
from ..violations import Violation
from .checkpoints import CheckpointBinding, checkpoint_binding, lease_holder_label
from .checks import (
    at_least,
    container_violations,
    job_set_name_violations,
    refuse_invalid,
    shared_settings_violations,
)
from .common import Manifest, labels_for, pod_annotations, pod_labels_of, selector_for
from .jobs import AttemptLimits, attempt_job_set, plain_job
from .pods import container, job_pod_spec
from .run_keys import run_definition, run_key
from .workload_queue import submitted_to

NAME_FIELD = "job_name (or the component's name)"
"""The argument a BatchJob's Job is named after, as errors name it."""


def argument_violations(name: str, args: BatchJobArgs) -> list[Violation]:
    """Every problem of a BatchJob's arguments (the guard then checks what they render)."""
    job_name = args.job_name or name
    found = [
        *at_least("completions", args.completions, 1),
        *at_least("parallelism", args.parallelism, 1),
        *at_least("backoff_limit", args.retries.backoff_limit, 0),
        *shared_settings_violations(args.pod, args.retries, args.checkpointing),
        *container_violations(args.container, _binding(job_name, args).pod_annotations),
    ]
    if args.retries.fresh_job_per_attempt:
        found += job_set_name_violations(NAME_FIELD, job_name, job_name, max(args.completions, 1))
    return found


def batch_job(name: str, args: BatchJobArgs) -> list[Manifest]:
    """A Job that survives preemption: disruptions ignored, checkpoints mounted, resume on restart; submitted
    to ``args.queue`` when given."""
    refuse_invalid(f"BatchJob {name!r}", argument_violations(name, args))
    job_name = args.job_name or name
    labels = labels_for(job_name, "batch", args.pod.labels)
    binding = _binding(job_name, args)
    placement = placement_for(
        args.placement.compute_class, selector_for(job_name, "batch"), args.placement.preemptible_taint
    )
    spec_of_pod = _pod_spec(args, binding, placement)
    pod_labels = pod_labels_of(labels, args.placement.critical, placement)
    annotations = pod_annotations(args.container, binding.pod_annotations)
    if args.retries.fresh_job_per_attempt:
        limits = AttemptLimits(
            completions=args.completions,
            parallelism=args.parallelism,
            backoff_limit=args.retries.backoff_limit,
            non_retriable_exit_codes=args.retries.non_retriable_exit_codes,
            active_deadline_seconds=args.active_deadline_seconds,
            ttl_seconds_after_finished=args.ttl_seconds_after_finished,
        )
        job_set = attempt_job_set(
            job_name, args.pod.namespace, labels, pod_labels, spec_of_pod, annotations, limits
        )
        return [submitted_to(job_set, queue_name_of(args.queue))]
    job = plain_job(
        job_name,
        args.pod.namespace,
        labels,
        pod_labels,
        spec_of_pod,
        _job_fields(args),
        args.retries.non_retriable_exit_codes,
        pod_annotations=annotations,
    )
    return [submitted_to(job, queue_name_of(args.queue))]


def _binding(job_name: str, args: BatchJobArgs) -> CheckpointBinding:
    """The checkpoint storage of the run, under its run key."""
    key = run_key(args.checkpointing.run_id, run_definition(args.container))
    return checkpoint_binding(
        args.checkpoint,
        f"{job_name}/{key}",
        args.checkpointing.keep_checkpoints,
        args.pod.grace_period_seconds,
        lease_holder_label(args.queue, runs_as_job_set=args.retries.fresh_job_per_attempt),
    )


def _pod_spec(args: BatchJobArgs, binding: CheckpointBinding, placement: Placement) -> Manifest:
    return job_pod_spec(
        container(args.container, binding.env, binding.mounts),
        args.container,
        placement,
        args.pod,
        binding.volumes,
    )


def _job_fields(args: BatchJobArgs) -> Manifest:
    """The plain Job's size, retries and lifetime."""
    job_fields: Manifest = {
        "backoffLimit": args.retries.backoff_limit,
        "completions": args.completions,
        "parallelism": args.parallelism,
    }
    if args.active_deadline_seconds is not None:
        job_fields["activeDeadlineSeconds"] = args.active_deadline_seconds
    if args.ttl_seconds_after_finished is not None:
        job_fields["ttlSecondsAfterFinished"] = args.ttl_seconds_after_finished
    return job_fields
