"""The remediation gate's decisions, on plain pods as the API returns them: what a drain takes, when the
gate may approve, what ``--force`` names as at risk."""

from __future__ import annotations

from typing import Any

from together_clusters.cli.remediations.cluster import last_checkpoint, plan_annotation, recorded_plan
from together_clusters.cli.remediations.plan import (
    WorkloadRef,
    WorkloadState,
    at_risk,
    drain_plan,
    progress,
)
from together_clusters.components.checkpoint import contract
from together_clusters.platform import REMEDIATION_GATE_ANNOTATION

NODE = "gpu-node-1"
RUN = WorkloadRef("JobSet", "ml", "llm")
EVAL = WorkloadRef("Job", "ml", "eval")


def pod(
    name: str,
    uid: str,
    *,
    node: str = NODE,
    phase: str = "Running",
    owner: str | None = "Job",
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": uid}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner, "name": name + "-owner", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "main"}]},
        "status": {"phase": phase},
    }


def plan_of(*pods: dict[str, Any]) -> Any:
    workloads = {"t0": RUN, "t1": RUN, "e0": EVAL}
    return drain_plan("rem-1", NODE, pods, workloads, {"t0": True, "t1": True})


def test_the_drain_takes_every_running_pod_but_daemonsets_mirrors_and_finished_ones() -> None:
    mirror = pod("static", "m0", owner=None)
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "x"}
    plan = plan_of(
        pod("trainer-0", "t0"),
        pod("eval-0", "e0"),
        pod("logs", "d0", owner="DaemonSet"),
        mirror,
        pod("done", "f0", phase="Succeeded"),
        pod("lonely", "b0", owner=None),
    )
    assert [p.ref for p in plan.pods] == ["ml/eval-0", "ml/lonely", "ml/trainer-0"]
    assert plan.left == ("ml/logs", "ml/static")
    assert plan.workloads == (EVAL, RUN)
    assert plan.bare_pods == ("ml/lonely",)


def test_not_done_while_a_drained_pod_still_runs_on_the_node_even_once_its_workload_is_queued() -> None:
    plan = plan_of(pod("trainer-0", "t0"))
    # Evicted, its SIGTERM handler still writing the checkpoint; the JobSet's new pod already pending.
    still_there = [pod("trainer-0", "t0", deleting=True)]
    states = {
        RUN: WorkloadState(
            pods=[pod("trainer-0", "t0", deleting=True), pod("trainer-0b", "t9", node="", phase="Pending")]
        )
    }
    now = progress(plan, still_there, states)
    assert not now.done
    assert now.writing == ("ml/trainer-0",)
    assert "checkpointing" in now.waiting_for()


def test_done_once_the_pod_has_exited_and_the_workload_runs_or_is_queued_elsewhere() -> None:
    plan = plan_of(pod("trainer-0", "t0"), pod("eval-0", "e0"))
    exited = [pod("trainer-0", "t0", phase="Failed")]
    states = {
        RUN: WorkloadState(pods=[pod("trainer-0b", "t9", node="other", phase="Running")]),
        EVAL: WorkloadState(pods=[pod("eval-0b", "e9", node="", phase="Pending")]),
    }
    now = progress(plan, exited, states)
    assert now.done, now.waiting_for()
    assert now.moved == {str(RUN): "running on other", str(EVAL): "queued (a pod pending)"}


def test_a_workload_with_no_pod_elsewhere_is_waited_for_unless_suspended_or_finished() -> None:
    plan = plan_of(pod("trainer-0", "t0"), pod("eval-0", "e0"))
    states = {RUN: WorkloadState(pods=[pod("trainer-0", "t0", phase="Failed")]), EVAL: WorkloadState()}
    now = progress(plan, [], states)
    assert now.homeless == (EVAL, RUN)
    assert not now.done
    states = {RUN: WorkloadState(suspended=True), EVAL: WorkloadState(finished=True)}
    assert progress(plan, [], states).done


def test_force_names_the_workloads_whose_pods_still_run_and_whether_they_checkpoint() -> None:
    plan = plan_of(pod("trainer-0", "t0"), pod("eval-0", "e0"), pod("lonely", "b0", owner=None))
    running = [
        pod("trainer-0", "t0", deleting=True),
        pod("lonely", "b0"),
        pod("eval-0", "e0", phase="Succeeded"),
    ]
    assert at_risk(plan, running) == (f"{RUN} (checkpointing)", "bare pod ml/lonely")


def test_the_plan_recorded_on_the_node_reads_back_the_same() -> None:
    plan = plan_of(pod("trainer-0", "t0"), pod("lonely", "b0", owner=None))
    node = {"metadata": {"annotations": {REMEDIATION_GATE_ANNOTATION: plan_annotation(plan)}}}
    assert recorded_plan(node) == plan
    assert recorded_plan({"metadata": {"annotations": {REMEDIATION_GATE_ANNOTATION: "{not json"}}}) is None
    assert recorded_plan({"metadata": {}}) is None


def test_the_last_checkpoint_is_read_from_the_runtime_s_own_report_lines() -> None:
    def line(at: str, step: int) -> str:
        saved = contract.SAVED_REPORT.format(name=f"ckpt-{step:012d}", step=step)
        return f"{at} {contract.REPORT_PREFIX} {saved}"

    log = "\n".join(
        [
            line("2026-12-02T10:00:00.000000001Z", 100),
            "2026-12-02T10:00:30Z step 150 loss 0.3",
            line("2026-12-02T10:01:00Z", 200) + " in 1.2s (budget 60s)",
        ]
    )
    step, at = last_checkpoint(log) or (None, None)
    assert step == 200
    assert at is not None and at.isoformat() == "2026-12-02T10:01:00+00:00"
    assert last_checkpoint("no runtime here\n") is None


def test_modes_read_as_the_command_line_spells_them_and_back() -> None:
    from typing import get_args

    from together_clusters.platform import REMEDIATION_MODES, REMEDIATION_MODES_BY_NAME, remediation_mode_name
    from together_clusters.provider.vocabulary import RemediationMode

    assert remediation_mode_name("REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT") == "evict-without-replacement"
    assert REMEDIATION_MODES_BY_NAME["host-power-cycle"] == "REMEDIATION_MODE_HOST_POWER_CYCLE"
    assert len(REMEDIATION_MODES_BY_NAME) == 5
    assert REMEDIATION_MODES == get_args(RemediationMode)
