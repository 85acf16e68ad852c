"""Plan-time checks of workloads against the platform's rules (pure).

The checks read Kubernetes objects as plain dicts, so they apply equally to what the components
render and to raw specs a user writes. A pod "may run on preemptible nodes" when its required node
affinity and node selector admit the preemptible compute class and it tolerates the preemptible
taint (or preemptible nodes are not tainted, or only with PreferNoSchedule). For such a pod:

* every pod: ``terminationGracePeriodSeconds`` at most the platform's limit;
* Job pods: ``restartPolicy: Never``, a first pod failure policy rule ignoring ``DisruptionTarget``,
  exit code 143 (SIGTERM) of every container ignored before any rule can count it,
  checkpoint storage (the shared volume mounted at CHECKPOINT_DIR, or the S3 backend), and a save
  budget below the grace period;
* bare Pods are refused: nothing recreates them after preemption.

Anywhere: pods labelled critical must not be able to run on preemptible nodes, and S3 credentials
must come from a Secret. A pod labelled ``together.ai/placement: preemptible-first`` must run at the fallback
priority (so it yields a standard node to any other pod), and a critical pod never does.

Each rule is a small function of one :class:`PodContext` (the pod spec and what surrounds it), and
:data:`RULES` lists them all with the pods each applies to: a new rule is a function and a line there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any

from together_clusters.errors import PlacementRefused
from together_clusters.platform import (
    CHECKPOINT_ANNOTATION,
    CHECKPOINT_OPT_OUTS,
    COMPUTE_CLASS_LABEL,
    CRITICAL_LABEL,
    DEFAULT_PREEMPTIBLE_TAINT,
    DISRUPTION_CONDITION,
    FALLBACK_PRIORITY_CLASS,
    GRACE_PERIOD_LIMIT_SECONDS,
    JOBSET_API,
    PLACEMENT_LABEL,
    PREEMPTIBLE,
    ComputeClass,
    Taint,
)

from .checkpoint import contract
from .violations import Violation

DEFAULT_GRACE_PERIOD_SECONDS = 30
"""Kubernetes' default when a pod spec does not set terminationGracePeriodSeconds."""

DURABLE_VOLUME_SOURCES = frozenset(
    {"persistentVolumeClaim", "nfs", "csi", "cephfs", "glusterfs", "azureFile", "iscsi", "fc"}
)
"""Volume sources that outlive the node: an emptyDir or hostPath dies with a preempted node."""

JOB_FAILURE_REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
"""The reason a Job fails with when a pod failure policy FailJob rule matched."""
RESTART_IGNORING_MAX = "RestartJobSetAndIgnoreMaxRestarts"

SECRET_ENV = (contract.ENV_S3_ACCESS_KEY_ID, contract.ENV_S3_SECRET_ACCESS_KEY)

_POD_TEMPLATE_PATHS: Mapping[str, tuple[str, ...]] = {
    "Job": ("spec", "template"),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}
_REPLICATED_KINDS = frozenset({"Deployment", "StatefulSet", "ReplicaSet"})
"""Kinds whose ``spec.replicas`` (default 1) counts copies of their pod template."""


# --- reading placement ------------------------------------------------------------------------


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    """Whether any toleration matches ``taint`` (Kubernetes' matching rules)."""
    for t in tolerations:
        operator = t.get("operator", "Equal")
        key = t.get("key", "")
        if key and key != taint.key:
            continue
        if not key and operator != "Exists":
            continue
        if operator == "Equal" and t.get("value", "") != taint.value:
            continue
        if t.get("effect") and t.get("effect") != taint.effect:
            continue
        return True
    return False


def _expression_admits_preemptible(expression: Mapping[str, Any]) -> bool:
    if expression.get("key") != COMPUTE_CLASS_LABEL:
        return True
    operator = expression.get("operator")
    values = expression.get("values") or []
    if operator == "In":
        return PREEMPTIBLE in values
    if operator == "NotIn":
        return PREEMPTIBLE not in values
    return operator == "Exists"


def may_run_on_preemptible(
    pod_spec: Mapping[str, Any], taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
) -> bool:
    """Whether the scheduler could place this pod on a preemptible node."""
    # A PreferNoSchedule taint only discourages: the scheduler still uses the node when others are full.
    if (
        taint is not None
        and taint.effect != "PreferNoSchedule"
        and not tolerates(pod_spec.get("tolerations") or [], taint)
    ):
        return False
    node_selector = pod_spec.get("nodeSelector") or {}
    if COMPUTE_CLASS_LABEL in node_selector and node_selector[COMPUTE_CLASS_LABEL] != PREEMPTIBLE:
        return False
    required = (
        (pod_spec.get("affinity") or {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
    )
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(
        all(_expression_admits_preemptible(e) for e in term.get("matchExpressions") or []) for term in terms
    )


def _env_of(container: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {e["name"]: e for e in container.get("env") or [] if "name" in e}


def has_checkpoint_storage(pod_spec: Mapping[str, Any]) -> bool:
    """Whether some container follows the checkpoint contract with storage that outlives the node."""
    durable = {v["name"] for v in pod_spec.get("volumes") or [] if DURABLE_VOLUME_SOURCES.intersection(v)}
    for c in pod_spec.get("containers") or []:
        env = _env_of(c)
        backend = env.get(contract.ENV_BACKEND, {}).get("value", contract.BACKEND_FILESYSTEM)
        if backend == contract.BACKEND_S3 and contract.ENV_S3_BUCKET in env:
            return True
        directory = env.get(contract.ENV_DIR, {}).get("value")
        if backend == contract.BACKEND_FILESYSTEM and directory:
            for mount in c.get("volumeMounts") or []:
                path = mount.get("mountPath", "").rstrip("/") + "/"
                if mount.get("name") in durable and (directory.rstrip("/") + "/").startswith(path):
                    return True
    return False


def first_rule_ignores_disruption(
    job_spec: Mapping[str, Any], accepted: frozenset[str] = frozenset({"Ignore"})
) -> bool:
    """Whether the Job's first pod failure policy rule ignores pods with the DisruptionTarget condition.

    ``accepted`` adds FailJob for a Job in a JobSet that restarts on it (a fresh Job per attempt).
    """
    rules = (job_spec.get("podFailurePolicy") or {}).get("rules") or []
    if not rules:
        return False
    first = rules[0]
    return first.get("action") in accepted and any(
        c.get("type") == DISRUPTION_CONDITION and c.get("status", "True") == "True"
        for c in first.get("onPodConditions") or []
    )


def _rule_matches_exit(rule: Mapping[str, Any], container_name: str, exit_code: int) -> bool:
    """Whether a pod failure policy rule matches ``container_name`` ending with ``exit_code`` (the Job controller's rules)."""
    on_exit = rule.get("onExitCodes")
    if not isinstance(on_exit, Mapping):
        return False
    if on_exit.get("containerName") not in (None, container_name):
        return False
    values = on_exit.get("values") or []
    return (exit_code in values) == (on_exit.get("operator") == "In")


def sigterm_exit_counted_by(
    job_spec: Mapping[str, Any],
    container_names: Iterable[str],
    accepted: frozenset[str] = frozenset({"Ignore"}),
) -> str | None:
    """The first container whose exit 143 the pod failure policy does not ignore, or None if every one is.

    The first matching rule decides, so an Ignore rule comes too late behind a FailJob, FailIndex or
    Count rule that matches 143 (``NotIn [0]`` does); no matching rule at all counts the failure.
    """
    rules = (job_spec.get("podFailurePolicy") or {}).get("rules") or []
    for name in container_names:
        first = next(
            (r for r in rules if _rule_matches_exit(r, name, contract.PREEMPTED_EXIT_CODE)),
            None,
        )
        if first is None or first.get("action") not in accepted:
            return name
    return None


def jobset_restarts_preempted_jobs(jobset_spec: Mapping[str, Any], replicated_job: str) -> bool:
    """Whether a JobSet recreates ``replicated_job`` after a FailJob rule failed it, without counting it.

    JobSet applies the first rule that matches the Job's failure reason; with no rule matching it
    restarts and counts against maxRestarts.
    """
    for rule in (jobset_spec.get("failurePolicy") or {}).get("rules") or []:
        targets = rule.get("targetReplicatedJobs") or []
        reasons = rule.get("onJobFailureReasons") or []
        if targets and replicated_job not in targets:
            continue
        if reasons and JOB_FAILURE_REASON_POD_FAILURE_POLICY not in reasons:
            continue
        return bool(rule.get("action") == RESTART_IGNORING_MAX)
    return False


# --- the checks -----------------------------------------------------------------------------


def _dig(obj: Mapping[str, Any], path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key) or {}
    return obj


@dataclass(frozen=True)
class PodContext:
    """One pod spec to check, and what the rules need to know about its surroundings.

    ``job_spec`` when the pod belongs to a Job; ``critical`` for pods labelled critical; ``bare_pod`` for
    a Pod object of its own. ``restarted_by_jobset``: the Job is a JobSet's, which recreates it when a
    FailJob rule fails it, so FailJob is as good as Ignore for the preemption rules. ``field_prefix`` is
    the pod spec's path in its object, ``job_field_prefix`` the Job spec's, so each refusal names the
    field where the object has it.
    """

    pod_spec: Mapping[str, Any]
    subject: str
    field_prefix: str = ""
    critical: bool = False
    job_spec: Mapping[str, Any] | None = None
    job_field_prefix: str = "spec."
    bare_pod: bool = False
    taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
    annotations: Mapping[str, Any] | None = None
    restarted_by_jobset: bool = False
    placement: str | None = None
    """The pod's :data:`PLACEMENT_LABEL`: the compute class its workload asked for (``None``: not said)."""

    @cached_property
    def grace_period(self) -> int:
        """The pod's grace period in seconds (Kubernetes' default when unset or unreadable)."""
        return _grace_period(self.pod_spec.get("terminationGracePeriodSeconds"))[0]

    @cached_property
    def on_preemptible(self) -> bool:
        """Whether the scheduler could place the pod on a preemptible node."""
        return may_run_on_preemptible(self.pod_spec, self.taint)

    @property
    def accepted_on_preemption(self) -> frozenset[str]:
        """The pod failure policy actions that keep a preemption from counting as a failure."""
        return frozenset({"Ignore", "FailJob"} if self.restarted_by_jobset else {"Ignore"})

    @property
    def containers(self) -> list[Mapping[str, Any]]:
        """The pod's main containers (not its init or ephemeral ones)."""
        return list(self.pod_spec.get("containers") or [])

    @property
    def failure_rules(self) -> list[Mapping[str, Any]]:
        """The rules of the Job's pod failure policy (none for a pod outside a Job)."""
        return list(((self.job_spec or {}).get("podFailurePolicy") or {}).get("rules") or [])

    def refuse(self, rule: str, field: str, value: Any, problem: str, fix: str) -> Violation:
        """A violation of a field of the pod spec."""
        return Violation(rule, self.subject, f"{self.field_prefix}{field}", value, problem, fix)

    def refuse_job(self, rule: str, field: str, value: Any, problem: str, fix: str) -> Violation:
        """A violation of a field of the Job spec."""
        return Violation(rule, self.subject, f"{self.job_field_prefix}{field}", value, problem, fix)


# --- the rules: each a small function of one pod, listed in RULES ------------------------------


def plain_secret(pod: PodContext) -> Iterator[Violation]:
    """S3 credentials must come from a Secret, never as a plain value in the pod spec (or the state)."""
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for i, c in enumerate(pod.pod_spec.get(group) or []):
            for name in SECRET_ENV:
                entry = _env_of(c).get(name)
                if entry is not None and "value" in entry:
                    yield pod.refuse(
                        "plain-secret",
                        f"{group}[{i}].env[{name}].value",
                        "<redacted>",
                        "S3 credentials are set as a plain value",
                        "take them from a Secret with valueFrom.secretKeyRef (S3Bucket.credentials_secret)",
                    )


def node_name(pod: PodContext) -> Iterator[Violation]:
    """A pod must be placed by the scheduler: nodeName skips affinity and taints, and pins it to one node."""
    if pod.pod_spec.get("nodeName"):
        yield pod.refuse(
            "node-name",
            "nodeName",
            pod.pod_spec["nodeName"],
            "nodeName bypasses the scheduler: node affinity and taints are not applied, and the pod "
            "cannot move when that node is preempted or replaced",
            "remove nodeName; place the pod with node affinity (compute_class)",
        )


def grace_period_is_seconds(pod: PodContext) -> Iterator[Violation]:
    """The grace period must be a whole number of seconds (Kubernetes would refuse anything else)."""
    value = pod.pod_spec.get("terminationGracePeriodSeconds")
    problem = _grace_period(value)[1]
    if problem:
        yield pod.refuse(
            "grace-period",
            "terminationGracePeriodSeconds",
            value,
            problem,
            f"set a whole number of seconds, at most {GRACE_PERIOD_LIMIT_SECONDS}",
        )


def pre_stop_within_grace(pod: PodContext) -> Iterator[Violation]:
    """A preStop pause must leave part of the grace period for SIGTERM's save or drain."""
    for i, c in enumerate(pod.containers):
        pre_stop = _pre_stop_sleep_seconds(c)
        if pre_stop is not None and pre_stop >= pod.grace_period:
            yield pod.refuse(
                "pre-stop",
                f"containers[{i}].lifecycle.preStop.sleep.seconds",
                pre_stop,
                f"the preStop hook takes the whole grace period ({pod.grace_period} s): SIGTERM comes too late "
                "to save or drain anything",
                "make preStop shorter than terminationGracePeriodSeconds (pre_stop_seconds)",
            )


def critical_off_preemptible(pod: PodContext) -> Iterator[Violation]:
    """A critical pod must be kept off preemptible nodes by affinity (a taint the platform does not
    document cannot keep it off, so tolerations do not count)."""
    if pod.critical and may_run_on_preemptible(pod.pod_spec, None):
        yield pod.refuse(
            "critical-on-preemptible",
            "affinity",
            pod.pod_spec.get("affinity"),
            "a critical workload (coordinator, login pod, production replica) can be placed on "
            "preemptible nodes (a taint on them is not documented, so tolerations do not count)",
            f"use standard placement: required node affinity {COMPUTE_CLASS_LABEL} NotIn [{PREEMPTIBLE}] "
            "(compute_class=ComputeClass.STANDARD)",
        )


def fallback_yields(pod: PodContext) -> Iterator[Violation]:
    """A preemptible-first pod runs on standard nodes only as a fallback: at the fallback priority, so a
    critical pod takes the node back; and a critical pod is never at that priority, or it would yield."""
    priority = pod.pod_spec.get("priorityClassName")
    if pod.placement == ComputeClass.PREEMPTIBLE_FIRST and priority != FALLBACK_PRIORITY_CLASS:
        yield pod.refuse(
            "fallback-priority",
            "priorityClassName",
            priority,
            f"a {ComputeClass.PREEMPTIBLE_FIRST} pod on a standard node would keep it from critical pods",
            f"set priorityClassName: {FALLBACK_PRIORITY_CLASS} (compute_class=ComputeClass.PREEMPTIBLE_FIRST "
            "does), or use compute_class=ComputeClass.STANDARD",
        )
    if pod.critical and priority == FALLBACK_PRIORITY_CLASS:
        yield pod.refuse(
            "fallback-priority",
            "priorityClassName",
            priority,
            "a critical workload at the fallback priority is preempted by any pod that wants its node",
            "remove priorityClassName, or drop critical=True",
        )


def grace_period_within_limit(pod: PodContext) -> Iterator[Violation]:
    """On preemptible nodes the grace period must end before the platform deletes the node."""
    if pod.grace_period > GRACE_PERIOD_LIMIT_SECONDS:
        yield pod.refuse(
            "grace-period",
            "terminationGracePeriodSeconds",
            pod.grace_period,
            f"a preempted node is deleted {GRACE_PERIOD_LIMIT_SECONDS} s after SIGTERM, so the pod is "
            "killed before this grace period ends",
            f"set it to {GRACE_PERIOD_LIMIT_SECONDS} or less (grace_period_seconds)",
        )


def no_bare_pod(pod: PodContext) -> Iterator[Violation]:
    """A pod on preemptible nodes needs a controller that recreates it after its node is gone."""
    if pod.bare_pod:
        yield Violation(
            "bare-pod",
            pod.subject,
            "kind",
            "Pod",
            "nothing recreates a bare Pod after its preemptible node is deleted",
            "run it as a Job (BatchJob) or a Deployment (BatchInference)",
        )


def disruption_ignored_first(pod: PodContext) -> Iterator[Violation]:
    """A Job's first pod failure policy rule must ignore disrupted pods, so preemptions burn no retries."""
    job_spec = pod.job_spec or {}
    if not first_rule_ignores_disruption(job_spec, pod.accepted_on_preemption):
        yield pod.refuse_job(
            "disruption-rule",
            "podFailurePolicy.rules[0]",
            pod.failure_rules[0] if pod.failure_rules else None,
            "preemptions would count as failures and burn backoffLimit",
            f"make the first podFailurePolicy rule {{action: Ignore, onPodConditions: "
            f"[{{type: {DISRUPTION_CONDITION}, status: 'True'}}]}}",
        )


def sigterm_exit_ignored(pod: PodContext) -> Iterator[Violation]:
    """Every container's exit 143 (SIGTERM, a pod deleted without a disruption condition) must be ignored
    before any rule can count it."""
    names = [c.get("name", "") for c in pod.containers]
    counted = sigterm_exit_counted_by(pod.job_spec or {}, names, pod.accepted_on_preemption)
    if counted is not None:
        yield pod.refuse_job(
            "sigterm-exit-rule",
            "podFailurePolicy.rules",
            ((pod.job_spec or {}).get("podFailurePolicy") or {}).get("rules"),
            f"a pod deleted without a disruption condition exits {contract.PREEMPTED_EXIT_CODE} "
            f"(SIGTERM), and container {counted!r} ending so would count as a failure",
            f"add {{action: Ignore, onExitCodes: {{containerName: {counted}, operator: In, values: "
            f"[{contract.PREEMPTED_EXIT_CODE}]}}}} right after the {DISRUPTION_CONDITION} rule",
        )


def restart_policy_never(pod: PodContext) -> Iterator[Violation]:
    """A Job with a pod failure policy needs restartPolicy Never: the Job, not the kubelet, replaces pods."""
    restart = pod.pod_spec.get("restartPolicy", "Always")
    if restart != "Never":
        yield pod.refuse(
            "restart-policy",
            "restartPolicy",
            restart,
            "a pod failure policy needs restartPolicy Never",
            "set restartPolicy: Never and let the Job create a replacement pod",
        )


def checkpoint_storage(pod: PodContext) -> Iterator[Violation]:
    """A Job on preemptible nodes must keep checkpoints where they outlive the node, or say it needs none."""
    opted_out = (pod.annotations or {}).get(CHECKPOINT_ANNOTATION) in CHECKPOINT_OPT_OUTS
    if not opted_out and not has_checkpoint_storage(pod.pod_spec):
        yield pod.refuse(
            "checkpoint-storage",
            "volumes",
            [v.get("name") for v in pod.pod_spec.get("volumes") or []],
            "no checkpoint storage: progress is lost at every preemption",
            f"mount a CheckpointStore (shared volume at {contract.ENV_DIR}, or the S3 backend) via the "
            f"checkpoint argument; a run with no state to lose (an eval) or that checkpoints by itself "
            f"says so with the pod annotation {CHECKPOINT_ANNOTATION}: "
            f"{' or '.join(sorted(CHECKPOINT_OPT_OUTS))} (checkpoint=NoCheckpoint(...))",
        )


def save_budget_within_grace(pod: PodContext) -> Iterator[Violation]:
    """The checkpoint save budget must end before the grace period does, or the save is killed midway."""
    for i, c in enumerate(pod.containers):
        budget = _env_of(c).get(contract.ENV_SAVE_BUDGET, {}).get("value")
        if budget is not None and not _ends_before(budget, pod.grace_period):
            yield pod.refuse(
                "save-budget",
                f"containers[{i}].env[{contract.ENV_SAVE_BUDGET}]",
                budget,
                f"the checkpoint save budget is not a number of seconds that ends before the grace "
                f"period ({pod.grace_period} s)",
                "leave it to the component, or set it below terminationGracePeriodSeconds",
            )


class Scope(Enum):
    """Which pods a rule applies to."""

    EVERY_POD = "every pod"
    PREEMPTIBLE = "pods that may run on preemptible nodes"
    PREEMPTIBLE_JOB = "Job pods that may run on preemptible nodes"

    def covers(self, pod: PodContext) -> bool:
        """Whether a rule of this scope applies to ``pod``."""
        if self is Scope.EVERY_POD:
            return True
        return pod.on_preemptible and (self is Scope.PREEMPTIBLE or pod.job_spec is not None)


@dataclass(frozen=True)
class Rule:
    """One rule of the guard: the pods it applies to and the check that finds its violations."""

    scope: Scope
    check: Callable[[PodContext], Iterable[Violation]]

    @property
    def name(self) -> str:
        """The rule's name: its check function's."""
        return self.check.__name__


RULES: tuple[Rule, ...] = (
    Rule(Scope.EVERY_POD, plain_secret),
    Rule(Scope.EVERY_POD, node_name),
    Rule(Scope.EVERY_POD, grace_period_is_seconds),
    Rule(Scope.EVERY_POD, pre_stop_within_grace),
    Rule(Scope.EVERY_POD, critical_off_preemptible),
    Rule(Scope.EVERY_POD, fallback_yields),
    Rule(Scope.PREEMPTIBLE, grace_period_within_limit),
    Rule(Scope.PREEMPTIBLE, no_bare_pod),
    Rule(Scope.PREEMPTIBLE_JOB, disruption_ignored_first),
    Rule(Scope.PREEMPTIBLE_JOB, sigterm_exit_ignored),
    Rule(Scope.PREEMPTIBLE_JOB, restart_policy_never),
    Rule(Scope.PREEMPTIBLE_JOB, checkpoint_storage),
    Rule(Scope.PREEMPTIBLE_JOB, save_budget_within_grace),
)
"""Every rule of the guard, in the order their violations are reported."""


def check_pod_spec(pod: PodContext) -> list[Violation]:
    """Every violation of one pod spec: each rule of :data:`RULES` whose scope covers the pod."""
    return [v for rule in RULES if rule.scope.covers(pod) for v in rule.check(pod)]


def _grace_period(value: Any) -> tuple[int, str | None]:
    """The grace period in seconds, or the default with a problem for a value Kubernetes would not take."""
    if value is None:
        return DEFAULT_GRACE_PERIOD_SECONDS, None
    if isinstance(value, bool) or not isinstance(value, int | str):
        return DEFAULT_GRACE_PERIOD_SECONDS, "the grace period is not a number of seconds"
    try:
        return int(value), None
    except ValueError:
        return DEFAULT_GRACE_PERIOD_SECONDS, "the grace period is not a number of seconds"


def _pre_stop_sleep_seconds(container: Mapping[str, Any]) -> int | None:
    seconds = _dig(container, ("lifecycle", "preStop", "sleep", "seconds"))
    try:
        return int(seconds) if seconds not in (None, {}) else None
    except (TypeError, ValueError):
        return None


def _ends_before(budget: str, grace_period_seconds: int) -> bool:
    try:
        return float(budget) < grace_period_seconds
    except ValueError:
        return False


@dataclass(frozen=True)
class PodTemplate:
    """A pod template found in an object, with the Job spec that owns it (if any) and their paths."""

    template: Mapping[str, Any]
    path: str
    job_spec: Mapping[str, Any] | None = None
    job_path: str = "spec."
    restarted_by_jobset: bool = False
    bare_pod: bool = False
    """The object is a Pod of its own (its metadata and spec stand where a template's would)."""
    replicas: int = 1
    """Copies of the template that run at once: a Deployment's (StatefulSet's, ReplicaSet's) replicas, a
    replicated Job's; each Job among them runs its own parallelism (``job_spec``)."""


def _templates_anywhere(value: Any, path: str) -> Iterable[PodTemplate]:
    """Pod templates nested anywhere in an object we do not know (JobSet-like CRDs, operators' jobs)."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            child_path = f"{path}{key}"
            if key == "template" and isinstance(child, Mapping) and "containers" in (child.get("spec") or {}):
                yield PodTemplate(child, f"{child_path}.")
            else:
                yield from _templates_anywhere(child, f"{child_path}.")
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _templates_anywhere(child, f"{path.rstrip('.')}[{i}].")


def pod_templates(obj: Mapping[str, Any]) -> list[PodTemplate]:
    """Every pod template of an object: the workload kinds we know, else any nested ``template``."""
    kind = obj.get("kind", "")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return [PodTemplate(obj, "", bare_pod=True)]
    if kind == "Job":
        return [PodTemplate(_dig(obj, ("spec", "template")), "spec.template.", spec, "spec.")]
    if kind == "CronJob":
        job = _dig(obj, ("spec", "jobTemplate", "spec"))
        return [
            PodTemplate(
                _dig(job, ("template",)), "spec.jobTemplate.spec.template.", job, "spec.jobTemplate.spec."
            )
        ]
    if kind == JOBSET_API.kind:
        found = []
        for i, replicated in enumerate(spec.get("replicatedJobs") or []):
            job = _dig(replicated, ("template", "spec"))
            prefix = f"spec.replicatedJobs[{i}].template.spec."
            restarts = jobset_restarts_preempted_jobs(spec, replicated.get("name", ""))
            replicas = int(replicated.get("replicas", 1))
            found.append(
                PodTemplate(_dig(job, ("template",)), f"{prefix}template.", job, prefix, restarts, replicas=replicas)
            )
        return found
    template_path = _POD_TEMPLATE_PATHS.get(kind)
    if template_path is not None:
        replicas = int(spec.get("replicas", 1)) if kind in _REPLICATED_KINDS else 1
        return [PodTemplate(_dig(obj, template_path), ".".join(template_path) + ".", replicas=replicas)]
    return list(_templates_anywhere(spec, "spec."))


def check_manifest(
    obj: Mapping[str, Any], taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
) -> list[Violation]:
    """Check one Kubernetes object; kinds without pods pass."""
    kind = obj.get("kind", "")
    metadata = obj.get("metadata") or {}
    subject = f"{kind}/{metadata.get('name', '?')}"
    found: list[Violation] = []
    for found_template in pod_templates(obj):
        template_metadata = found_template.template.get("metadata") or {}
        labels = template_metadata.get("labels") or {}
        found += check_pod_spec(
            PodContext(
                found_template.template.get("spec") or {},
                subject=subject,
                field_prefix=f"{found_template.path}spec.",
                critical=labels.get(CRITICAL_LABEL) == "true",
                placement=labels.get(PLACEMENT_LABEL),
                job_spec=found_template.job_spec,
                job_field_prefix=found_template.job_path,
                taint=taint,
                annotations=template_metadata.get("annotations"),
                restarted_by_jobset=found_template.restarted_by_jobset,
                bare_pod=found_template.bare_pod,
            )
        )
    return found


def check_manifests(
    objects: Iterable[Mapping[str, Any]], taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
) -> list[Violation]:
    """Check every object."""
    return [v for obj in objects for v in check_manifest(obj, taint)]


def enforce(
    owner: str, objects: Iterable[Mapping[str, Any]], taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT
) -> None:
    """Raise :class:`PlacementRefused` naming ``owner`` if any object breaks a rule."""
    violations = check_manifests(objects, taint)
    if violations:
        raise PlacementRefused(owner, violations)
