"""The plan-time guard refuses each bad layout, in components and in raw specs, with a message that helps."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from together_clusters.components import (
    BatchInference,
    BatchInferenceArgs,
    BatchJob,
    BatchJobArgs,
    ComputeClass,
    ContainerSpec,
    NodePlacement,
    PlacementRefused,
    PodSettings,
    Retries,
    Sweep,
    SweepArgs,
    Taint,
    TrainingRunArgs,
    guard,
    manifests,
)
from together_clusters.components.platform import COMPUTE_CLASS_LABEL, CRITICAL_LABEL

from .conftest import Program
from .guarded import IMAGE, SHARED, good_job, long_grace_on_standard_nodes


def pod_spec_of(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def rules_violated(obj: dict[str, Any], **kwargs: Any) -> list[str]:
    return [v.rule for v in guard.check_manifest(obj, **kwargs)]


# --- through the components (the error a user sees at preview) -------------------------------


def test_grace_period_over_the_limit_is_refused(program: Program) -> None:
    args = BatchJobArgs(
        container=ContainerSpec(image=IMAGE), checkpoint=SHARED, pod=PodSettings(grace_period_seconds=600)
    )
    with pytest.raises(PlacementRefused) as refused:
        program.run(lambda: BatchJob("ft", args))
    message = str(refused.value)
    assert message.startswith("BatchJob 'ft' refused by the preemptible placement guard:")
    # A BatchJob is a JobSet by default: the guard reads the pod template inside it.
    grace = "JobSet/ft spec.replicatedJobs[0].template.spec.template.spec.terminationGracePeriodSeconds=600"
    assert grace in message
    assert "a preempted node is deleted 300 s after SIGTERM" in message
    assert "Fix: set it to 300 or less (grace_period_seconds)" in message
    assert [v.rule for v in refused.value.violations] == ["grace-period"]
    assert program.mocks.registered == []


def test_missing_checkpoint_storage_is_refused(program: Program) -> None:
    args = BatchJobArgs(container=ContainerSpec(image=IMAGE), checkpoint=None)
    with pytest.raises(PlacementRefused) as refused:
        program.run(lambda: BatchJob("ft", args))
    (violation,) = refused.value.violations
    assert violation.rule == "checkpoint-storage"
    assert str(violation) == (
        "JobSet/ft spec.replicatedJobs[0].template.spec.template.spec.volumes=[]: no checkpoint storage: "
        "progress is lost at every preemption. "
        "Fix: mount a CheckpointStore (shared volume at CHECKPOINT_DIR, or the S3 backend) via the checkpoint "
        "argument; a run with no state to lose (an eval) or that checkpoints by itself says so with the pod "
        "annotation together.ai/checkpoint: none or user-managed (checkpoint=NoCheckpoint(...))"
    )


def test_sweep_without_checkpoint_storage_is_refused() -> None:
    args = SweepArgs(container=ContainerSpec(image=IMAGE), trials=({"lr": 1},), checkpoint=None)
    with pytest.raises(PlacementRefused, match=r"Sweep 's'(.|\n)*no checkpoint storage"):
        Sweep("s", args)


def test_critical_workload_on_preemptible_nodes_is_refused() -> None:
    args = BatchInferenceArgs(container=ContainerSpec(image=IMAGE), placement=NodePlacement(critical=True))
    with pytest.raises(PlacementRefused) as refused:
        BatchInference("prod", args)
    (violation,) = refused.value.violations
    assert violation.rule == "critical-on-preemptible"
    assert "BatchInference 'prod' refused" in str(refused.value)
    assert (
        "a critical workload (coordinator, login pod, production replica) can be placed on preemptible nodes"
        in str(violation)
    )
    assert (
        f"Fix: use standard placement: required node affinity {COMPUTE_CLASS_LABEL} NotIn [preemptible]"
        in str(violation)
    )


def test_inference_grace_period_over_the_limit_is_refused() -> None:
    args = BatchInferenceArgs(container=ContainerSpec(image=IMAGE), pod=PodSettings(grace_period_seconds=301))
    with pytest.raises(PlacementRefused, match=r"terminationGracePeriodSeconds=301"):
        BatchInference("infer", args)


def test_the_same_layouts_pass_on_standard_nodes(program: Program) -> None:
    program.run(lambda: BatchJob("long", long_grace_on_standard_nodes(critical=True)))
    assert any(r.typ == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet" for r in program.mocks.registered)


def test_everything_the_components_render_passes() -> None:
    assert guard.check_manifest(good_job()) == []


# --- raw specs -------------------------------------------------------------------------------


def test_raw_job_without_a_pod_failure_policy_is_refused() -> None:
    job = good_job()
    del job["spec"]["podFailurePolicy"]
    violations = guard.check_manifest(job)
    assert [v.rule for v in violations] == ["disruption-rule", "sigterm-exit-rule"]
    assert "preemptions would count as failures and burn backoffLimit" in str(violations[0])
    assert "Job/ft spec.podFailurePolicy.rules[0]=None" in str(violations[0])


def test_raw_job_whose_disruption_rule_is_not_first_is_refused() -> None:
    job = good_job()
    rules = job["spec"]["podFailurePolicy"]["rules"]
    rules.insert(0, {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}})
    assert rules_violated(job) == ["disruption-rule"]


def test_raw_job_that_counts_the_sigterm_exit_is_refused() -> None:
    job = good_job()
    rules = job["spec"]["podFailurePolicy"]["rules"]
    del rules[1]
    violations = guard.check_manifest(job)
    assert [v.rule for v in violations] == ["sigterm-exit-rule"]
    assert "a pod deleted without a disruption condition exits 143" in str(violations[0])
    assert "Job/ft spec.podFailurePolicy.rules" in str(violations[0])


@pytest.mark.parametrize(
    "catching_rule",
    [
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0]}},
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [143]}},
        {"action": "Count", "onExitCodes": {"operator": "In", "values": [1, 143]}},
    ],
)
def test_a_rule_that_catches_exit_143_before_it_is_ignored_is_refused(catching_rule: dict[str, Any]) -> None:
    job = good_job()
    job["spec"]["podFailurePolicy"]["rules"].insert(1, catching_rule)
    assert rules_violated(job) == ["sigterm-exit-rule"]


def test_rules_after_the_sigterm_rule_or_for_other_containers_pass() -> None:
    job = good_job()
    rules = job["spec"]["podFailurePolicy"]["rules"]
    rules.append({"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}})
    rules.insert(
        1,
        {"action": "FailJob", "onExitCodes": {"containerName": "sidecar", "operator": "In", "values": [143]}},
    )
    assert rules_violated(job) == []


def test_raw_job_that_restarts_in_place_is_refused() -> None:
    job = good_job()
    pod_spec_of(job)["restartPolicy"] = "OnFailure"
    assert rules_violated(job) == ["restart-policy"]


def test_raw_job_checkpointing_to_an_empty_dir_is_refused() -> None:
    job = good_job()
    pod_spec_of(job)["volumes"] = [{"name": "checkpoints", "emptyDir": {}}]
    assert rules_violated(job) == ["checkpoint-storage"]


def test_raw_job_with_checkpoint_dir_outside_the_mount_is_refused() -> None:
    job = good_job()
    for env in pod_spec_of(job)["containers"][0]["env"]:
        if env["name"] == "CHECKPOINT_DIR":
            env["value"] = "/scratch/ft"
    assert rules_violated(job) == ["checkpoint-storage"]


def test_save_budget_not_below_the_grace_period_is_refused() -> None:
    job = good_job()
    pod_spec_of(job)["terminationGracePeriodSeconds"] = 200
    assert rules_violated(job) == ["save-budget"]


def test_plain_s3_credentials_are_refused_anywhere() -> None:
    job = good_job()
    pod_spec_of(job)["containers"][0]["env"].append({"name": "AWS_SECRET_ACCESS_KEY", "value": "hunter2"})
    violations = guard.check_manifest(job)
    assert [v.rule for v in violations] == ["plain-secret"]
    assert "hunter2" not in str(violations[0])
    assert "valueFrom.secretKeyRef" in str(violations[0])


def test_bare_pod_on_preemptible_nodes_is_refused() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": copy.deepcopy(pod_spec_of(good_job())),
    }
    violations = guard.check_manifest(pod)
    assert [v.rule for v in violations] == ["bare-pod"]
    assert "Pod/p kind='Pod'" in str(violations[0])


def critical_deployment(**pod_fields: Any) -> dict[str, Any]:
    """A raw Deployment of critical pods with ``pod_fields`` in its pod spec."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "coordinator"},
        "spec": {
            "selector": {"matchLabels": {"app": "c"}},
            "template": {
                "metadata": {"labels": {"app": "c", CRITICAL_LABEL: "true"}},
                "spec": {"containers": [{"name": "c", "image": IMAGE}], **pod_fields},
            },
        },
    }


def test_critical_raw_deployment_that_tolerates_everything_is_refused() -> None:
    deployment = critical_deployment(tolerations=[{"operator": "Exists"}])
    assert rules_violated(deployment) == ["critical-on-preemptible"]
    deployment["spec"]["template"]["spec"]["nodeSelector"] = {COMPUTE_CLASS_LABEL: "standard"}
    assert rules_violated(deployment) == []


def test_raw_cron_job_is_checked_like_a_job() -> None:
    job = good_job()
    del job["spec"]["podFailurePolicy"]
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"jobTemplate": job},
    }
    assert rules_violated(cron) == ["disruption-rule", "sigterm-exit-rule"]
    violation = guard.check_manifest(cron)[0]
    assert violation.field == "spec.jobTemplate.spec.podFailurePolicy.rules[0]"


def test_enforce_names_the_owner_and_lists_every_violation() -> None:
    job = good_job()
    del job["spec"]["podFailurePolicy"]
    pod_spec_of(job)["terminationGracePeriodSeconds"] = 400
    with pytest.raises(PlacementRefused) as refused:
        guard.enforce("my raw job", [job, {"kind": "ConfigMap", "metadata": {"name": "x"}}])
    assert str(refused.value).startswith("my raw job refused by the preemptible placement guard:\n  - ")
    assert {v.rule for v in refused.value.violations} == {
        "grace-period",
        "disruption-rule",
        "sigterm-exit-rule",
    }


# --- reading placement -----------------------------------------------------------------------


UNTOLERATED: dict[str, Any] = {"containers": []}


@pytest.mark.parametrize(
    ("pod_spec", "taint", "expected"),
    [
        (UNTOLERATED, guard.DEFAULT_PREEMPTIBLE_TAINT, False),
        (UNTOLERATED, None, True),
        ({"tolerations": [{"operator": "Exists"}]}, guard.DEFAULT_PREEMPTIBLE_TAINT, True),
        (
            {"tolerations": [{"key": COMPUTE_CLASS_LABEL, "operator": "Exists"}]},
            guard.DEFAULT_PREEMPTIBLE_TAINT,
            True,
        ),
        (
            {"tolerations": [{"key": COMPUTE_CLASS_LABEL, "operator": "Equal", "value": "other"}]},
            guard.DEFAULT_PREEMPTIBLE_TAINT,
            False,
        ),
        (
            {"tolerations": [{"key": COMPUTE_CLASS_LABEL, "value": "preemptible", "effect": "NoExecute"}]},
            guard.DEFAULT_PREEMPTIBLE_TAINT,
            False,
        ),
        ({"tolerations": [{"key": "spot", "operator": "Exists"}]}, Taint("spot", "true"), True),
        ({"nodeSelector": {COMPUTE_CLASS_LABEL: "preemptible"}}, None, True),
        ({"nodeSelector": {COMPUTE_CLASS_LABEL: "standard"}}, None, False),
    ],
)
def test_may_run_on_preemptible(pod_spec: dict[str, Any], taint: Taint | None, expected: bool) -> None:
    assert guard.may_run_on_preemptible(pod_spec, taint) is expected


def affinity(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
                }
            }
        }
    }


def expr(operator: str, *values: str, key: str = COMPUTE_CLASS_LABEL) -> dict[str, Any]:
    return {"key": key, "operator": operator, **({"values": list(values)} if values else {})}


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ([[expr("In", "preemptible")]], True),
        ([[expr("NotIn", "preemptible")]], False),
        ([[expr("In", "standard")]], False),
        ([[expr("DoesNotExist")]], False),
        ([[expr("Exists")]], True),
        ([[expr("In", "a100", key="gpu")]], True),
        ([[expr("NotIn", "preemptible")], [expr("In", "a100", key="gpu")]], True),
        ([[expr("NotIn", "preemptible"), expr("In", "a100", key="gpu")]], False),
    ],
)
def test_required_affinity_decides_preemptible(terms: list[list[dict[str, Any]]], expected: bool) -> None:
    assert guard.may_run_on_preemptible(affinity(*terms), None) is expected


def test_a_prefer_no_schedule_taint_does_not_keep_critical_pods_off() -> None:
    soft = Taint(COMPUTE_CLASS_LABEL, "preemptible", "PreferNoSchedule")
    assert guard.may_run_on_preemptible(UNTOLERATED, soft)
    unplaced = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "serving"},
        "spec": {
            "template": {
                "metadata": {"labels": {CRITICAL_LABEL: "true"}},
                "spec": {"containers": [{"name": "c", "image": IMAGE}]},
            }
        },
    }
    assert rules_violated(unplaced, taint=soft) == ["critical-on-preemptible"]
    standard = BatchInferenceArgs(
        container=ContainerSpec(image=IMAGE),
        placement=NodePlacement(ComputeClass.STANDARD, critical=True, preemptible_taint=soft),
    )
    assert guard.check_manifests(manifests.batch_inference("prod", standard), soft) == []


def test_a_save_budget_that_is_not_a_number_is_refused_not_a_crash() -> None:
    job = good_job()
    for env in pod_spec_of(job)["containers"][0]["env"]:
        if env["name"] == "CHECKPOINT_SAVE_BUDGET_SECONDS":
            env["value"] = "$(BUDGET)"
    (violation,) = guard.check_manifest(job)
    assert violation.rule == "save-budget"
    assert "CHECKPOINT_SAVE_BUDGET_SECONDS]='$(BUDGET)'" in str(violation)


def test_an_explicit_null_grace_period_is_the_kubernetes_default() -> None:
    job = good_job()
    pod_spec_of(job)["terminationGracePeriodSeconds"] = None
    # Kubernetes' default of 30 s is within the limit, but the component's 270 s save budget is not.
    assert rules_violated(job) == ["save-budget"]


def test_every_component_layout_passes_the_guard() -> None:
    container = ContainerSpec(image=IMAGE, gpus=1)
    layouts = [
        *manifests.batch_job("ft", BatchJobArgs(container=container, checkpoint=SHARED)),
        *manifests.batch_job(
            "plain",
            BatchJobArgs(
                container=container, checkpoint=SHARED, retries=Retries(fresh_job_per_attempt=False)
            ),
        ),
        *manifests.sweep("s", SweepArgs(container=container, trials=({"lr": 1},), checkpoint=SHARED)),
        *manifests.batch_inference("i", BatchInferenceArgs(container=container)),
        *manifests.training_run(
            "r",
            TrainingRunArgs(
                coordinator=container, worker=container, num_workers=2, checkpoint=SHARED, login=container
            ),
        ),
    ]
    assert guard.check_manifests(layouts) == []


# --- critical pods: affinity, not a taint ----------------------------------------------------


@pytest.mark.parametrize("taint", [None, guard.DEFAULT_PREEMPTIBLE_TAINT])
def test_a_critical_pod_without_affinity_is_refused_whether_or_not_nodes_are_tainted(
    taint: Taint | None,
) -> None:
    # It does not tolerate the assumed taint, but nothing says preemptible nodes carry it.
    assert rules_violated(critical_deployment(), taint=taint) == ["critical-on-preemptible"]
    standard = manifests.standard_placement().pod_spec_fields()
    assert rules_violated(critical_deployment(**standard), taint=taint) == []


# --- what the guard used to miss -------------------------------------------------------------


def jobset(grace: Any = 300, **job_overrides: Any) -> dict[str, Any]:
    job = good_job()
    job["spec"].update(job_overrides)
    pod_spec_of(job)["terminationGracePeriodSeconds"] = grace
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": job["spec"]}}]},
    }


def test_a_grace_period_over_the_limit_inside_a_job_set_is_refused() -> None:
    (violation,) = guard.check_manifest(jobset(3600))
    assert violation.rule == "grace-period"
    assert (
        violation.field == "spec.replicatedJobs[0].template.spec.template.spec.terminationGracePeriodSeconds"
    )


def test_a_grace_period_over_the_limit_in_an_unknown_custom_resource_is_refused() -> None:
    template = copy.deepcopy(good_job()["spec"]["template"])
    template["spec"]["terminationGracePeriodSeconds"] = 3600
    crd = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt"},
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4, "template": template}}},
    }
    (violation,) = guard.check_manifest(crd)
    assert violation.rule == "grace-period"
    assert violation.field == "spec.pytorchReplicaSpecs.Worker.template.spec.terminationGracePeriodSeconds"


def test_plain_credentials_in_an_init_container_are_refused() -> None:
    job = good_job()
    pod_spec_of(job)["initContainers"] = [
        {"name": "fetch", "image": IMAGE, "env": [{"name": "AWS_ACCESS_KEY_ID", "value": "AKIA123"}]}
    ]
    (violation,) = guard.check_manifest(job)
    assert violation.rule == "plain-secret"
    assert violation.field == "spec.template.spec.initContainers[0].env[AWS_ACCESS_KEY_ID].value"
    assert "AKIA123" not in str(violation)


def test_a_pre_stop_hook_as_long_as_the_grace_period_is_refused() -> None:
    job = good_job()
    pod_spec_of(job)["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 300}}}
    assert rules_violated(job) == ["pre-stop"]
    pod_spec_of(job)["containers"][0]["lifecycle"] = {"preStop": {"sleep": {"seconds": 5}}}
    assert rules_violated(job) == []


def test_pinning_to_a_node_by_name_is_refused() -> None:
    job = good_job()
    pod_spec_of(job)["nodeName"] = "gpu-node-7"
    assert rules_violated(job) == ["node-name"]
    assert rules_violated(critical_deployment(nodeName="standard-1")) == [
        "node-name",
        "critical-on-preemptible",
    ]


@pytest.mark.parametrize(
    ("grace", "expected"), [("300", []), ("301", ["grace-period"]), ("soon", ["grace-period"])]
)
def test_a_grace_period_given_as_text_is_read_not_a_crash(grace: str, expected: list[str]) -> None:
    job = good_job()
    pod_spec_of(job)["terminationGracePeriodSeconds"] = grace
    violations = [v for v in guard.check_manifest(job) if v.rule != "save-budget"]
    assert [v.rule for v in violations] == expected


# --- what the guard used to refuse wrongly ---------------------------------------------------


def job_without_checkpoints() -> dict[str, Any]:
    job = good_job()
    spec = pod_spec_of(job)
    del spec["volumes"]
    del spec["containers"][0]["volumeMounts"]
    return job


@pytest.mark.parametrize("declared", ["none", "user-managed"])
def test_a_job_that_declares_it_needs_no_checkpoint_storage_passes(declared: str) -> None:
    job = job_without_checkpoints()
    assert rules_violated(job) == ["checkpoint-storage"]
    job["spec"]["template"]["metadata"]["annotations"] = {"together.ai/checkpoint": declared}
    assert rules_violated(job) == []


@pytest.mark.parametrize(
    "source",
    [
        {"csi": {"driver": "weka.io", "volumeAttributes": {"filesystem": "ckpt"}}},
        {"cephfs": {"monitors": ["10.0.0.1:6789"], "path": "/ckpt"}},
    ],
)
def test_csi_and_cephfs_checkpoint_volumes_pass(source: dict[str, Any]) -> None:
    job = good_job()
    pod_spec_of(job)["volumes"] = [{"name": "checkpoints", **source}]
    assert rules_violated(job) == []


def test_a_job_set_whose_jobs_fail_on_preemption_passes_only_if_the_job_set_restarts_them() -> None:
    failing = {
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "main", "operator": "In", "values": [143]},
                },
            ]
        }
    }
    without_policy = jobset(**failing)
    assert rules_violated(without_policy) == ["disruption-rule", "sigterm-exit-rule"]
    restarting = jobset(**failing)
    restarting["spec"]["failurePolicy"] = {
        "rules": [
            {
                "name": "p",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
            }
        ]
    }
    assert rules_violated(restarting) == []
    counting = copy.deepcopy(restarting)
    counting["spec"]["failurePolicy"]["rules"][0]["action"] = "RestartJobSet"
    assert rules_violated(counting) == ["disruption-rule", "sigterm-exit-rule"]


def test_an_eval_says_it_needs_no_checkpoint_through_the_component(program: Program) -> None:
    from together_clusters.components import NoCheckpoint

    for declared, expected in ((NoCheckpoint(), "none"), (NoCheckpoint(user_managed=True), "user-managed")):
        args = BatchJobArgs(
            container=ContainerSpec(image=IMAGE),
            checkpoint=declared,
            retries=Retries(fresh_job_per_attempt=False),
        )
        (job,) = manifests.batch_job("eval", args)
        assert job["spec"]["template"]["metadata"]["annotations"] == {"together.ai/checkpoint": expected}
        assert guard.check_manifest(job) == []
        assert "CHECKPOINT_DIR" not in str(job)
