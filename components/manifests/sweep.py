"""Sweep's objects: one attempt JobSet per trial, or a ConfigMap of trials and one Indexed Job."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from ..args import SweepArgs, queue_name_of
from ..checkpoint import contract
from ..placement import placement_for
from ..violations import Violation, argument_violation
from .checkpoints import checkpoint_binding, lease_holder_label
from .checks import (
    at_least,
    container_violations,
    job_set_name_violations,
    refuse_invalid,
    shared_settings_violations,
    within,
)
from .common import (
    RUN_KEYS_FILE,
    TRIALS_FILE,
    TRIALS_MOUNT_PATH,
    TRIALS_VOLUME,
    Manifest,
    env_entry,
    index_env_entry,
    labels_for,
    object_metadata,
    pod_annotations,
    pod_labels_of,
    selector_for,
)
from .jobs import AttemptLimits, attempt_job_set, plain_job
from .pods import container, job_pod_spec
from .run_keys import run_definition, run_key
from .workload_queue import submitted_to


def trial_run_keys(args: SweepArgs) -> list[str]:
    """Each trial's run key (see :func:`run_key`): its index and a digest of the container and its parameters."""
    return [
        f"{run_key(args.checkpointing.run_id)}/trial-{i}"
        if args.checkpointing.run_id is not None
        else f"trial-{i}-{run_key(None, run_definition(args.container), dict(t))}"
        for i, t in enumerate(args.trials)
    ]


def trials_config_map_data(args: SweepArgs) -> dict[str, str]:
    """The trials' parameters and each trial's run key, as the ConfigMap's files."""
    return {
        TRIALS_FILE: json.dumps([dict(t) for t in args.trials], indent=2, sort_keys=True),
        RUN_KEYS_FILE: json.dumps(trial_run_keys(args)),
    }


def trials_config_map_name(sweep_name: str, data: Mapping[str, str]) -> str:
    """Named after its content, so new trials give a new ConfigMap and so a new Job."""
    digest = hashlib.sha256(json.dumps(dict(data), sort_keys=True).encode()).hexdigest()[:8]
    return f"{sweep_name}-trials-{digest}"


NAME_FIELD = "sweep_name (or the component's name)"
"""The argument a Sweep's objects are named after, as errors name it."""

QUEUED_FIX = (
    "or set retries=Retries(fresh_job_per_attempt=False) for one Indexed Job that queues the trials and counts their "
    "failures (its replacements then wait on the Job controller's backoff, up to 10 minutes after "
    "repeated preemptions)"
)


def argument_violations(name: str, args: SweepArgs) -> list[Violation]:
    """Every problem of a Sweep's arguments (the guard then checks what they render)."""
    sweep_name = args.sweep_name or name
    count = len(args.trials)
    found: list[Violation] = []
    if not args.trials:
        found.append(
            argument_violation(
                "trials", "trials", (), "trials is empty", "give at least one trial's parameters"
            )
        )
    if args.parallelism is not None:
        found += at_least("parallelism", args.parallelism, 1)
    found += at_least("backoff_limit", args.retries.backoff_limit, 0)
    max_failed = _max_failed_indexes(args)
    found += within(
        "max-failed-indexes",
        "max_failed_indexes",
        max_failed,
        0,
        count,
        f"max_failed_indexes must be between 0 and the number of trials ({count}), got {max_failed}",
        "leave it unset (half the trials, rounded up) or choose a number in that range",
    )
    found += shared_settings_violations(args.pod, args.retries, args.checkpointing)
    own = checkpoint_binding(args.checkpoint, sweep_name, 1, args.pod.grace_period_seconds).pod_annotations
    found += container_violations(args.container, own)
    if args.retries.fresh_job_per_attempt:
        found += _sweep_wide_limit_violations(args)
        if args.trials:
            last = f"{sweep_name}-{count - 1}"
            found += job_set_name_violations(NAME_FIELD, sweep_name, last)
    return found


def _max_failed_indexes(args: SweepArgs) -> int:
    """The failed trials that fail the Indexed Job: past half, the sweep is more likely broken than unlucky."""
    count = len(args.trials)
    return args.max_failed_indexes if args.max_failed_indexes is not None else (count + 1) // 2


def sweep(name: str, args: SweepArgs) -> list[Manifest]:
    """One JobSet per trial (``fresh_job_per_attempt``, the default), or a ConfigMap of trial parameters and
    an Indexed Job whose completion index selects the trial; submitted to ``args.queue`` when given."""
    refuse_invalid(f"Sweep {name!r}", argument_violations(name, args))
    sweep_name = args.sweep_name or name
    queue = queue_name_of(args.queue)
    if args.retries.fresh_job_per_attempt:
        # Each trial a workload of its own: under a queue, trials wait their turn instead of all Pending.
        return [submitted_to(job_set, queue) for job_set in trial_job_sets(sweep_name, args)]
    config_map = _trials_config_map(sweep_name, args)
    return [config_map, submitted_to(_indexed_job(sweep_name, args, config_map["metadata"]["name"]), queue)]


def _trials_config_map(sweep_name: str, args: SweepArgs) -> Manifest:
    """Every trial's parameters and run key, as files of a ConfigMap named after its content."""
    data = trials_config_map_data(args)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_metadata(
            trials_config_map_name(sweep_name, data),
            args.pod.namespace,
            labels_for(sweep_name, "trials", args.pod.labels),
        ),
        "data": data,
    }


def _indexed_job(sweep_name: str, args: SweepArgs, config_map_name: str) -> Manifest:
    """One Indexed Job for every trial: pod ``i`` reads trial ``i`` from the mounted ConfigMap."""
    count = len(args.trials)
    labels = labels_for(sweep_name, "trial", args.pod.labels)
    binding = checkpoint_binding(
        args.checkpoint,
        sweep_name,
        args.checkpointing.keep_checkpoints,
        args.pod.grace_period_seconds,
        lease_holder_label(args.queue, runs_as_job_set=False),
    )
    env = [
        index_env_entry(contract.ENV_TRIAL_INDEX),
        env_entry(contract.ENV_TRIAL_PARAMETERS_FILE, f"{TRIALS_MOUNT_PATH}/{TRIALS_FILE}"),
        *binding.env,
    ]
    if binding.env:
        env.append(env_entry(contract.ENV_RUN_KEYS_FILE, f"{TRIALS_MOUNT_PATH}/{RUN_KEYS_FILE}"))
    mounts = [{"name": TRIALS_VOLUME, "mountPath": TRIALS_MOUNT_PATH, "readOnly": True}, *binding.mounts]
    volumes = [{"name": TRIALS_VOLUME, "configMap": {"name": config_map_name}}, *binding.volumes]
    placement = placement_for(
        args.placement.compute_class, selector_for(sweep_name, "trial"), args.placement.preemptible_taint
    )
    job_fields: Manifest = {
        "completionMode": "Indexed",
        "completions": count,
        "parallelism": count if args.parallelism is None else args.parallelism,
        "backoffLimitPerIndex": args.retries.backoff_limit,
        "maxFailedIndexes": _max_failed_indexes(args),
    }
    return plain_job(
        sweep_name,
        args.pod.namespace,
        labels,
        pod_labels_of(labels, args.placement.critical, placement),
        job_pod_spec(container(args.container, env, mounts), args.container, placement, args.pod, volumes),
        job_fields,
        args.retries.non_retriable_exit_codes,
        exit_code_action="FailIndex",
        pod_annotations=pod_annotations(args.container, binding.pod_annotations),
    )


def _sweep_wide_limit_violations(args: SweepArgs) -> list[Violation]:
    """Trials that are JobSets of their own share no controller: nothing can cap or count them together."""
    count = len(args.trials)
    found: list[Violation] = []
    if args.parallelism is not None and args.parallelism < count:
        found.append(
            argument_violation(
                "sweep-wide-limit",
                "parallelism",
                args.parallelism,
                f"parallelism={args.parallelism}: with fresh_job_per_attempt=True each of the {count} trials is "
                "a JobSet of its own and all of them start at once (trials beyond the free GPUs wait Pending)",
                f"leave parallelism unset, {QUEUED_FIX}",
            )
        )
    if args.max_failed_indexes is not None and args.max_failed_indexes < count:
        found.append(
            argument_violation(
                "sweep-wide-limit",
                "max_failed_indexes",
                args.max_failed_indexes,
                f"max_failed_indexes={args.max_failed_indexes}: with fresh_job_per_attempt=True each trial "
                "fails on its own (after Retries.backoff_limit failures or a non-retriable exit code) and "
                "the others go on",
                f"leave max_failed_indexes unset, {QUEUED_FIX}",
            )
        )
    return found


def trial_job_sets(sweep_name: str, args: SweepArgs) -> list[Manifest]:
    """One attempt JobSet per trial, named ``<sweep>-<index>``: a preempted trial's Job is recreated at once.

    Each pod gets its trial's index and parameters in its environment (TRIAL_INDEX, TRIAL_PARAMETERS) and
    its run key in its checkpoint location, so a changed trial changes only its own JobSet.
    """
    labels = labels_for(sweep_name, "trial", args.pod.labels)
    placement = placement_for(
        args.placement.compute_class, selector_for(sweep_name, "trial"), args.placement.preemptible_taint
    )
    pod_labels = pod_labels_of(labels, args.placement.critical, placement)
    job_sets = []
    for index, (trial, key) in enumerate(zip(args.trials, trial_run_keys(args), strict=True)):
        limits = AttemptLimits.one_pod(args.retries.backoff_limit, args.retries.non_retriable_exit_codes)
        binding = checkpoint_binding(
            args.checkpoint,
            f"{sweep_name}/{key}",
            args.checkpointing.keep_checkpoints,
            args.pod.grace_period_seconds,
            lease_holder_label(args.queue, runs_as_job_set=True),
        )
        env = [
            env_entry(contract.ENV_TRIAL_INDEX, str(index)),
            env_entry(contract.ENV_TRIAL_PARAMETERS, json.dumps(dict(trial), sort_keys=True)),
            *binding.env,
        ]
        spec_of_pod = job_pod_spec(
            container(args.container, env, binding.mounts),
            args.container,
            placement,
            args.pod,
            binding.volumes,
        )
        job_sets.append(
            attempt_job_set(
                f"{sweep_name}-{index}",
                args.pod.namespace,
                labels,
                pod_labels,
                spec_of_pod,
                pod_annotations(args.container, binding.pod_annotations),
                limits,
            )
        )
    return job_sets
