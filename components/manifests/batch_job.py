"""BatchJob's objects: one Job (or attempt JobSet) that survives preemption."""

from __future__ import annotations

from ..args import BatchJobArgs
from ..placement import placement_for
from .checkpoints import checkpoint_binding
from .common import Manifest, _at_least, _pod_labels, _positive, labels_for, pod_annotations, selector_for
from .jobs import AttemptLimits, _job, attempt_job_set
from .pods import container, pod_spec
from .run_keys import run_definition, run_key


def batch_job(name: str, args: BatchJobArgs) -> list[Manifest]:
    """A Job that survives preemption: disruptions ignored, checkpoints mounted, resume on restart."""
    job_name = args.job_name or name
    for field_name in ("completions", "parallelism", "grace_period_seconds"):
        _positive(field_name, getattr(args, field_name))
    _at_least("backoff_limit", args.retries.backoff_limit, 0)
    labels = labels_for(job_name, "batch", args.pod.labels)
    key = run_key(args.checkpointing.run_id, run_definition(args.container))
    binding = checkpoint_binding(
        args.checkpoint,
        f"{job_name}/{key}",
        args.checkpointing.keep_checkpoints,
        args.pod.grace_period_seconds,
    )
    placement = placement_for(
        args.placement.compute_class, selector_for(job_name, "batch"), args.placement.preemptible_taint
    )
    main = container(args.container, binding.env, binding.mounts)
    spec_of_pod = pod_spec(
        [main],
        placement,
        args.pod.grace_period_seconds,
        binding.volumes,
        "Never",
        args.pod.service_account_name,
        [args.container],
    )
    job_fields: Manifest = {
        "backoffLimit": args.retries.backoff_limit,
        "completions": args.completions,
        "parallelism": args.parallelism,
    }
    if args.active_deadline_seconds is not None:
        job_fields["activeDeadlineSeconds"] = args.active_deadline_seconds
    if args.ttl_seconds_after_finished is not None:
        job_fields["ttlSecondsAfterFinished"] = args.ttl_seconds_after_finished
    pod_labels = _pod_labels(labels, args.placement.critical)
    annotations = pod_annotations(args.container, binding.pod_annotations)
    if args.retries.fresh_job_per_attempt:
        limits = AttemptLimits(
            completions=args.completions,
            parallelism=args.parallelism,
            backoff_limit=args.retries.backoff_limit,
            non_retriable_exit_codes=args.retries.non_retriable_exit_codes,
            active_deadline_seconds=args.active_deadline_seconds,
            ttl_seconds_after_finished=args.ttl_seconds_after_finished,
            name_field="job_name (or the component's name)",
        )
        return [
            attempt_job_set(
                job_name, args.pod.namespace, labels, pod_labels, spec_of_pod, annotations, limits
            )
        ]
    return [
        _job(
            job_name,
            args.pod.namespace,
            labels,
            pod_labels,
            spec_of_pod,
            job_fields,
            args.retries.non_retriable_exit_codes,
            pod_annotations=annotations,
        )
    ]
