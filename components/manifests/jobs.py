"""Jobs and attempt JobSets: the pod failure policy that ignores preemptions, the JobSet that recreates a Job."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from together_clusters.platform import DISRUPTION_CONDITION, FALLBACK_PRIORITY_CLASS, JOBSET_API

from ..checkpoint import contract
from .awaiting import JOB_READY_ANNOTATIONS
from .common import MAIN_CONTAINER, Manifest, object_metadata, template_metadata_of

DISRUPTION_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": DISRUPTION_CONDITION, "status": "True"}],
}
"""First pod failure policy rule of every Job: a disrupted (e.g. evicted or GC'd) pod is not a failure."""

PREEMPTED_EXIT_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onExitCodes": {
        "containerName": MAIN_CONTAINER,
        "operator": "In",
        "values": [contract.PREEMPTED_EXIT_CODE],
    },
}
"""Second rule: the main container ended by SIGTERM (143) is not a failure either.

A plain pod delete sets no DisruptionTarget condition, so without this rule the runtime's exit after
its SIGTERM save (or a process killed by the signal) burns backoffLimit. It comes before any FailJob
or FailIndex rule, so no rule the user adds can count a preemption. A save that overruns the grace
period ends in SIGKILL (137) and still counts: the runtime's save budget ends before the grace does.
"""


NO_PRIORITY_LABEL_ANNOTATIONS: Mapping[str, str] = {"alpha.jobset.sigs.k8s.io/node-selector": "true"}
"""On the pods of a JobSet at the fallback priority: JobSet's pod webhook (v0.11.0, pod_mutating_webhook.go)
copies a pod's priority into the label ``jobset.sigs.k8s.io/priority``, and a negative one ("-100") is not a
valid label value, so the API server refuses every such pod (found on the twin: the Job's FailedCreate
events). The webhook skips pods marked with this flag (JobSet's node-selector strategy of exclusive
placement, which without the exclusive-placement annotation changes nothing else)."""


def pod_failure_policy(
    non_retriable_exit_codes: Sequence[int], action: str = "FailJob", on_preemption: str = "Ignore"
) -> Manifest:
    """The preemption rules first (disruption, then exit 143), then exit codes that mean "do not retry".

    ``on_preemption="FailJob"`` ends the Job on a preemption instead, for a JobSet to recreate it.
    """
    rules: list[Manifest] = [
        {**json.loads(json.dumps(rule)), "action": on_preemption}
        for rule in (DISRUPTION_RULE, PREEMPTED_EXIT_RULE)
    ]
    if non_retriable_exit_codes:
        rules.append(
            {
                "action": action,
                "onExitCodes": {
                    "containerName": MAIN_CONTAINER,
                    "operator": "In",
                    "values": sorted(set(non_retriable_exit_codes)),
                },
            }
        )
    return {"rules": rules}


def plain_job(
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    spec_of_pod: Manifest,
    job_fields: Mapping[str, Any],
    non_retriable_exit_codes: Sequence[int],
    exit_code_action: str = "FailJob",
    pod_annotations: Mapping[str, str] | None = None,
) -> Manifest:
    """A plain Job whose pod failure policy ignores preemptions; pulumi waits only for it to start."""
    template_metadata = template_metadata_of(pod_labels, pod_annotations or {})
    spec: Manifest = {
        **job_fields,
        "podFailurePolicy": pod_failure_policy(non_retriable_exit_codes, exit_code_action),
        # Required with podFailurePolicy: a replacement starts only once the old pod is gone.
        "podReplacementPolicy": "Failed",
        "template": {"metadata": template_metadata, "spec": spec_of_pod},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {**object_metadata(name, namespace, labels), "annotations": dict(JOB_READY_ANNOTATIONS)},
        "spec": spec,
    }


ATTEMPT_REPLICATED_JOB = "attempt"

JOBSET_FAILURE_POLICY: Mapping[str, Any] = {
    "maxRestarts": 0,
    # Old pods (maybe still saving) are gone before the next attempt starts and resumes.
    "restartStrategy": "BlockingRecreate",
    "rules": [
        # A FailJob preemption rule matched: recreate the Job, not counted.
        {
            "name": "preempted",
            "action": "RestartJobSetAndIgnoreMaxRestarts",
            "onJobFailureReasons": ["PodFailurePolicy"],
        },
        # Anything else (MaxFailedIndexesExceeded: crashes past the limit, a non-retriable exit code; a
        # deadline) ends the run. Explicit, since JobSet's default for an unmatched failure is a restart.
        {"name": "failed", "action": "FailJobSet", "onJobFailureReasons": []},
    ],
}
"""How the JobSet of ``fresh_job_per_attempt`` treats its Job's failures (first matching rule wins)."""


@dataclass(frozen=True)
class AttemptLimits:
    """The Job of one attempt: its size, and the limits within it that count real failures."""

    completions: int
    parallelism: int
    backoff_limit: int
    non_retriable_exit_codes: tuple[int, ...]
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None

    @classmethod
    def one_pod(cls, backoff_limit: int, non_retriable_exit_codes: tuple[int, ...]) -> AttemptLimits:
        """The attempt of one member of a group (a Sweep's trial, a TrainingRun's worker): a single pod."""
        return cls(1, 1, backoff_limit, non_retriable_exit_codes)


DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
POD_NAME_SUFFIX = "-abcde"
"""The random suffix of a pod's name, as JobSet's webhook counts it."""


def longest_pod_name(job_set_name: str, completions: int, job: str = ATTEMPT_REPLICATED_JOB) -> str:
    """The longest pod name of replicated Job ``job`` of a JobSet (``<jobset>-attempt-0-<last index>-xxxxx``).

    JobSet's webhook refuses the JobSet at apply unless it is a DNS label (RFC 1035) of at most 63
    characters; the argument checks refuse it at preview instead.
    """
    return f"{job_set_name}-{job}-0-{completions - 1}{POD_NAME_SUFFIX}"


@dataclass(frozen=True)
class GangMember:
    """One replicated Job of a gang JobSet: its name in the JobSet, its labels, its pods and their limits."""

    job: str
    labels: Mapping[str, str]
    pod_labels: Mapping[str, str]
    spec_of_pod: Manifest
    pod_annotations: Mapping[str, str]
    limits: AttemptLimits


def _attempt_job_spec(member: GangMember) -> Manifest:
    """The Job of one attempt: indexed, a crash counted per index, a preemption failing the Job (FailJob,
    which the JobSet's ``preempted`` rule recreates uncounted)."""
    pod_annotations = member.pod_annotations
    if member.spec_of_pod.get("priorityClassName") == FALLBACK_PRIORITY_CLASS:
        pod_annotations = {**pod_annotations, **NO_PRIORITY_LABEL_ANNOTATIONS}
    limits = member.limits
    job_spec: Manifest = {
        "completionMode": "Indexed",
        "completions": limits.completions,
        "parallelism": limits.parallelism,
        "backoffLimitPerIndex": limits.backoff_limit,
        "maxFailedIndexes": 0,
        "podFailurePolicy": pod_failure_policy(limits.non_retriable_exit_codes, "FailIndex", "FailJob"),
        "podReplacementPolicy": "Failed",
        "template": {
            "metadata": template_metadata_of(member.pod_labels, pod_annotations),
            "spec": member.spec_of_pod,
        },
    }
    if limits.active_deadline_seconds is not None:
        job_spec["activeDeadlineSeconds"] = limits.active_deadline_seconds
    return {
        "name": member.job,
        "replicas": 1,
        "template": {"metadata": {"labels": dict(member.labels)}, "spec": job_spec},
    }


def _job_set(name: str, namespace: str | None, labels: Mapping[str, str], spec: Manifest) -> Manifest:
    return {
        "apiVersion": JOBSET_API.api_version,
        "kind": JOBSET_API.kind,
        "metadata": object_metadata(name, namespace, labels),
        "spec": {"failurePolicy": json.loads(json.dumps(JOBSET_FAILURE_POLICY)), **spec},
    }


def attempt_job_set(
    name: str,
    namespace: str | None,
    labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    spec_of_pod: Manifest,
    pod_annotations: Mapping[str, str],
    limits: AttemptLimits,
) -> Manifest:
    """A JobSet holding one Job per attempt: a preemption fails that Job, the JobSet recreates it fresh.

    The Job controller delays each replacement pod by its failure backoff, and counts preempted pods
    too, ignored or not (kubernetes#130881): after a handful of preemptions every replacement waits
    10 minutes. A new Job has no history, so each attempt starts at once. Real failures still count:
    crashes against ``limits.backoff_limit`` (per index, within one attempt), non-retriable exit codes at
    once (FailIndex with maxFailedIndexes 0 fails the Job with a reason JobSet does not restart).
    """
    member = GangMember(ATTEMPT_REPLICATED_JOB, labels, pod_labels, spec_of_pod, pod_annotations, limits)
    spec: Manifest = {
        # No Service per JobSet, and the pod template's own subdomain (a TrainingRun's workers') kept.
        "network": {"enableDNSHostnames": False},
        "replicatedJobs": [_attempt_job_spec(member)],
    }
    if limits.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = limits.ttl_seconds_after_finished
    return _job_set(name, namespace, labels, spec)


def gang_job_set(
    name: str, namespace: str | None, labels: Mapping[str, str], members: Sequence[GangMember]
) -> Manifest:
    """One JobSet holding several replicated Jobs that only work together (one Kueue workload: admitted, and
    dispatched by MultiKueue, whole or not at all). A preemption of any member fails its Job and the JobSet
    recreates them all (``BlockingRecreate``). JobSet's own headless Service (named after the JobSet) gives
    each pod the DNS name ``<jobset>-<job>-0-<index>.<jobset>``, in whichever cluster the JobSet runs."""
    spec: Manifest = {
        "network": {"enableDNSHostnames": True, "subdomain": name, "publishNotReadyAddresses": True},
        "replicatedJobs": [_attempt_job_spec(member) for member in members],
    }
    return _job_set(name, namespace, labels, spec)


def gang_pod_hostname(job_set: str, job: str, index: int = 0) -> str:
    """The hostname JobSet gives pod ``index`` of the first Job of replicated Job ``job`` (DNS names need
    the subdomain after it: ``<hostname>.<jobset>``)."""
    return f"{job_set}-{job}-0-{index}"
