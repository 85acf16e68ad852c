"""drift.classify on literal state exports and planned steps (the pure core; the engine tests prove the rest)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pulumi.runtime.rpc import UNKNOWN

from together_clusters.cli.drift.baseline import Baseline, HistoryEntry
from together_clusters.cli.drift.classify import (
    PlannedStep,
    changed_fields,
    classify,
)
from together_clusters.cli.exit_codes import ExitCode
from together_clusters.cli.stack_state import CLUSTER_TYPE, SECRET_MARK, SECRET_SIG, clusters

URN = "urn:pulumi:dev::together-quickstart::" + CLUSTER_TYPE + "::quickstart"
SECRET = {SECRET_SIG: SECRET_MARK, "ciphertext": "v1:abc"}
DEPLOYED_AT = "2030-01-01T10:00:00.5Z"


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2030, 1, 1, hour, minute, second, tzinfo=UTC)


UP = HistoryEntry("update", at(9, 59, 58), at(10, 0, 1), changed=True)
# A state that the last `pulumi up` wrote and no refresh rewrote since.
AS_DEPLOYED = Baseline((UP,))
# A refresh at 11:00 that wrote live inputs of some resource into the state.
AFTER_REFRESH = Baseline((HistoryEntry("refresh", at(11), at(11, 0, 2), changed=True), UP))


def inputs(**changes: Any) -> dict[str, Any]:
    return {"cluster_name": "qs", "num_gpus": 8, "num_preemptible_gpus": 8, "__provider": SECRET, **changes}


def cluster(ins: dict[str, Any] | None = None, modified: str = DEPLOYED_AT, **outputs: Any) -> dict[str, Any]:
    ins = ins or inputs()
    outs = {
        "cluster_id": "c-1",
        "desired_preemptible_gpus": ins["num_preemptible_gpus"],
        "allocated_preemptible_gpus": ins["num_preemptible_gpus"],
        "recent_preemptions": 0,
        "last_preempted_at": None,
        "kube_config": SECRET,
        **ins,
        **outputs,
    }
    return {
        "urn": URN,
        "custom": True,
        "type": CLUSTER_TYPE,
        "id": "c-1",
        "inputs": ins,
        "outputs": outs,
        "modified": modified,
    }


def export(*resources: dict[str, Any]) -> dict[str, Any]:
    stack = {
        "urn": "urn:pulumi:dev::together-quickstart::pulumi:pulumi:Stack::q-dev",
        "type": "pulumi:pulumi:Stack",
    }
    provider = {
        "urn": "urn:pulumi:dev::together-quickstart::pulumi:providers:pulumi-python::default",
        "custom": True,
        "type": "pulumi:providers:pulumi-python",
        "id": "p",
    }
    return {"version": 3, "deployment": {"resources": [stack, provider, *resources]}}


def step(
    op: str,
    live: dict[str, Any] | None,
    code: dict[str, Any] | None,
    diffs: tuple[str, ...] = (),
    urn: str = URN,
    **live_outputs: Any,
) -> PlannedStep:
    outputs = None if live is None else {**cluster(live)["outputs"], **live_outputs}
    return PlannedStep(urn, CLUSTER_TYPE, op, live, outputs, code, diffs)


def test_in_sync():
    report = classify(export(cluster()), [step("same", inputs(), inputs())], AS_DEPLOYED)
    assert report.in_sync and report.exit_code() == ExitCode.OK
    assert report.drift == report.missing == report.pending == []


def test_out_of_band_change_is_drift_with_code_and_live_values():
    live = inputs(num_preemptible_gpus=16)
    report = classify(
        export(cluster()), [step("update", live, inputs(), ("num_preemptible_gpus",))], AS_DEPLOYED
    )
    assert report.exit_code() == ExitCode.DRIFT
    [d] = report.drift
    assert (d.resource, d.type, d.field, d.code, d.live, d.deployed) == (
        "quickstart",
        "together_clusters:Cluster",
        "num_preemptible_gpus",
        8,
        16,
        8,
    )
    assert report.pending == []


def test_drift_absorbed_by_a_refresh_is_still_drift():
    """The bug of issue 10: a refresh wrote the live 16 into the state; the code still says 8."""
    refreshed = export(cluster(inputs(num_preemptible_gpus=16), modified="2030-01-01T11:00:01.7Z"))
    live = inputs(num_preemptible_gpus=16)
    report = classify(refreshed, [step("update", live, inputs(), ("num_preemptible_gpus",))], AFTER_REFRESH)
    assert [(d.field, d.code, d.live) for d in report.drift] == [("num_preemptible_gpus", 8, 16)]
    assert report.pending == []


def test_a_refresh_that_rewrote_other_resources_leaves_this_ones_baseline_alone():
    unchanged_since_up = export(cluster())
    code = inputs(num_gpus=16)
    report = classify(unchanged_since_up, [step("update", inputs(), code, ("num_gpus",))], AFTER_REFRESH)
    assert report.in_sync
    assert [(p.field, p.live, p.code) for p in report.pending] == [("num_gpus", 8, 16)]


def test_without_a_deployment_in_the_history_every_difference_is_drift():
    report = classify(export(cluster()), [step("update", inputs(), inputs(num_gpus=16))], Baseline())
    assert [(d.field, d.code, d.live) for d in report.drift] == [("num_gpus", 16, 8)]


def test_code_changed_to_match_the_live_value_is_not_drift():
    live = inputs(num_preemptible_gpus=16)
    report = classify(export(cluster()), [step("same", live, live)], AS_DEPLOYED)
    assert report.in_sync and report.pending == []


def test_deleted_out_of_band_is_missing():
    report = classify(export(cluster()), [step("create", None, inputs())], AS_DEPLOYED)
    assert report.exit_code() == ExitCode.DRIFT
    [m] = report.missing
    assert (m.resource, m.type, m.id) == ("quickstart", "together_clusters:Cluster", "c-1")
    assert report.pending == []  # the re-create follows from the deletion, not from a code change


def test_deleted_out_of_band_and_dropped_from_the_code_is_nothing():
    assert classify(export(cluster()), [], AS_DEPLOYED).exit_code(fail_on_pending=True) == ExitCode.OK


def test_shortfall_and_preemption_are_information_only():
    live = step("same", inputs(), inputs(), allocated_preemptible_gpus=0, recent_preemptions=2,
                last_preempted_at="2030-01-01T00:00:00Z")  # fmt: skip
    report = classify(export(cluster()), [live], AS_DEPLOYED)
    assert report.in_sync and report.exit_code(fail_on_pending=True) == ExitCode.OK
    [s] = report.shortfall
    assert (s.desired_preemptible_gpus, s.allocated_preemptible_gpus, s.shortfall_gpus) == (8, 0, 8)
    [c] = report.churn
    assert (c.preemptions_since_deployment, c.last_preempted_at) == (2, "2030-01-01T00:00:00Z")


def test_churn_counts_only_preemptions_since_the_state_was_written():
    deployed = export(cluster(recent_preemptions=3, last_preempted_at="2030-01-01T00:00:00Z"))
    same = step("same", inputs(), inputs(), recent_preemptions=3, last_preempted_at="2030-01-01T00:00:00Z")
    assert classify(deployed, [same], AS_DEPLOYED).churn == []
    # Older preemptions aged out of the window while a new one happened.
    newer = step("same", inputs(), inputs(), recent_preemptions=1, last_preempted_at="2030-01-02T00:00:00Z")
    [c] = classify(deployed, [newer], AS_DEPLOYED).churn
    assert c.preemptions_since_deployment == 1


def test_code_change_not_yet_deployed_is_pending_with_its_own_exit_code_on_request():
    report = classify(
        export(cluster()), [step("update", inputs(), inputs(num_gpus=16), ("num_gpus",))], AS_DEPLOYED
    )
    assert report.in_sync
    [p] = report.pending
    assert (p.field, p.live, p.code, p.op) == ("num_gpus", 8, 16, "update")
    assert report.exit_code() == ExitCode.OK
    assert report.exit_code(fail_on_pending=True) == ExitCode.PENDING


def test_drift_and_pending_change_on_one_resource_are_told_apart():
    live = inputs(num_preemptible_gpus=0)
    code = inputs(num_gpus=16)
    report = classify(
        export(cluster()), [step("update", live, code, ("num_gpus", "num_preemptible_gpus"))], AS_DEPLOYED
    )
    assert [(d.field, d.code, d.live) for d in report.drift] == [("num_preemptible_gpus", 8, 0)]
    assert [(p.field, p.code) for p in report.pending] == [("num_gpus", 16)]


def test_fields_come_from_the_inputs_when_the_provider_names_none():
    report = classify(export(cluster()), [step("update", inputs(num_gpus=16), inputs())], AS_DEPLOYED)
    assert [(d.field, d.code, d.live) for d in report.drift] == [("num_gpus", 8, 16)]


def test_new_resource_and_dropped_resource_are_pending():
    other = "urn:pulumi:dev::together-quickstart::" + CLUSTER_TYPE + "::second"
    steps = [step("delete", inputs(), None), step("create", None, inputs(), urn=other)]
    report = classify(export(cluster()), steps, AS_DEPLOYED)
    assert report.in_sync
    assert [(p.resource, p.op) for p in report.pending] == [("quickstart", "delete"), ("second", "create")]


def test_a_replace_is_judged_on_its_replace_step():
    live = inputs(region="us-east-1")
    steps = [
        step("create-replacement", live, inputs(region="eu-1")),
        step("replace", live, inputs(region="eu-1"), ("region",)),
        step("delete-replaced", live, None),
    ]
    deployed = export(cluster(inputs(region="us-east-1")))
    [p] = classify(deployed, steps, AS_DEPLOYED).pending
    assert (p.op, p.field, p.live, p.code) == ("replace", "region", "us-east-1", "eu-1")


def test_secrets_and_internal_keys_are_never_compared():
    live = inputs(__provider="[secret]")
    assert classify(export(cluster()), [step("same", live, inputs())], AS_DEPLOYED).in_sync
    assert changed_fields({"a": SECRET, "b": "[secret]"}, {"a": {**SECRET, "ciphertext": "x"}, "b": 1}) == []


def test_a_secret_field_the_provider_changes_is_drift_when_it_cannot_be_compared_and_never_shown():
    shown_secret = {SECRET_SIG: SECRET_MARK, "plaintext": '"tk-live-123"'}  # as an export decrypts it
    live = inputs(token="[secret]")
    report = classify(
        export(cluster(inputs(token=shown_secret))),
        [step("update", live, inputs(token="[secret]"), ("token",))],
        AS_DEPLOYED,
    )
    assert [(d.field, d.code, d.live, d.deployed) for d in report.drift] == [
        ("token", "[secret]", "[secret]", "[secret]")
    ]
    assert "tk-live-123" not in json.dumps(report.to_dict())


def test_unknown_code_value_counts_as_different():
    assert changed_fields({"a": UNKNOWN}, {"a": UNKNOWN}) == ["a"]
    report = classify(
        export(cluster()), [step("update", inputs(num_gpus=16), inputs(num_gpus=UNKNOWN))], AS_DEPLOYED
    )
    [d] = report.drift
    assert d.code == UNKNOWN


def test_to_dict_is_plain_json_data():
    live = step("update", inputs(num_preemptible_gpus=16), inputs(), allocated_preemptible_gpus=8,
                desired_preemptible_gpus=16)  # fmt: skip
    data = classify(export(cluster()), [live], AS_DEPLOYED).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["exit_code"] == ExitCode.DRIFT and data["drift"][0]["field"] == "num_preemptible_gpus"
    assert data["info"]["capacity_shortfall"][0]["shortfall_gpus"] == 8


def test_baseline_trusts_what_an_update_wrote_and_nothing_a_rewriting_refresh_wrote():
    assert AFTER_REFRESH.trusts(at(10, 0, 0))  # written by the up, within its (whole-second) window
    assert not AFTER_REFRESH.trusts(at(11, 0, 1))  # written by the refresh
    assert not AFTER_REFRESH.trusts(at(12))  # no operation explains it
    assert not AFTER_REFRESH.trusts(None)
    assert not Baseline().trusts(at(10))  # no deployment in the history


def test_a_targeted_up_after_a_refresh_does_not_launder_what_the_refresh_wrote():
    history = Baseline(
        (
            HistoryEntry("update", at(12), at(12, 0, 5), changed=True),  # `up --target` of another resource
            HistoryEntry("refresh", at(11), at(11, 0, 2), changed=True),
            UP,
        )
    )
    assert not history.trusts(at(11, 0, 1))
    assert history.trusts(at(12, 0, 3))


def test_a_refresh_that_saw_only_new_outputs_keeps_the_deployment_trusted_unless_another_rewrote():
    outputs_only = HistoryEntry("refresh", at(11), at(11, 0, 2), changed=False)
    assert Baseline((outputs_only, UP)).trusts(at(11, 0, 1))
    rewriting = HistoryEntry("refresh", at(10, 30), at(10, 30, 2), changed=True)
    assert not Baseline((outputs_only, rewriting, UP)).trusts(at(11, 0, 1))
    later_up = HistoryEntry("update", at(10, 45), at(10, 45, 5), changed=True)
    assert Baseline((outputs_only, later_up, rewriting, UP)).trusts(at(11, 0, 1))


def test_history_is_read_back_to_an_update_older_than_every_resources_last_change():
    from together_clusters.cli.drift.baseline import reaches_back

    refresh = HistoryEntry("refresh", at(11), at(11, 0, 2), changed=True)
    assert not reaches_back([refresh], None)
    assert reaches_back([refresh, UP], at(11, 0, 1))
    assert not reaches_back([refresh, UP], at(9))  # a resource last changed before this update


def test_a_moment_two_operations_cover_is_judged_by_the_one_that_does_not_vouch():
    refresh = HistoryEntry("refresh", at(11), at(11, 0, 2), changed=True)  # ended at 11:00:02.x
    targeted_up = HistoryEntry("update", at(11, 0, 2), at(11, 0, 6), changed=False)  # started 11:00:02.y
    assert not Baseline((targeted_up, refresh, UP)).trusts(at(11, 0, 2) + timedelta(milliseconds=300))


def test_a_field_the_code_leaves_to_the_server_is_not_drift_though_the_engine_lists_it():
    """The provider resolves a driver at create; the code leaves it unset, so its live value is no drift.
    The engine's diff names every differing input: the provider's own rule decides."""
    live = inputs(num_preemptible_gpus=16, nvidia_version_id="nv-570-cu128-ubuntu2204", project_id="p-1")
    steps = [step("update", live, inputs(), ("num_preemptible_gpus", "nvidia_version_id", "project_id"))]
    report = classify(
        export(cluster(inputs(nvidia_version_id="nv-570-cu128-ubuntu2204"))), steps, AFTER_REFRESH
    )
    assert [(d.field, d.code, d.live) for d in report.drift] == [("num_preemptible_gpus", 8, 16)]


def test_the_plugins_cluster_is_read_in_the_rules_names_and_its_drift_named_as_the_program_writes_it():
    """A stack of the plugin's ``together:index:Cluster`` holds camelCase names: read as the same fields (a
    cluster, with its shortfall), and a drifted field named as the YAML, TypeScript or Go program writes it."""
    native = "together:index:Cluster"
    urn = f"urn:pulumi:dev::yaml-project::{native}::gpus"
    written = {"clusterName": "qs", "numGpus": 8, "numPreemptibleGpus": 8}
    outputs = {
        **written,
        "clusterId": "c-1",
        "desiredPreemptibleGpus": 8,
        "allocatedPreemptibleGpus": 0,
        "kubeConfig": SECRET,
    }
    resource = {
        "urn": urn,
        "custom": True,
        "type": native,
        "id": "c-1",
        "inputs": written,
        "outputs": outputs,
    }
    [found] = clusters(export(resource))
    assert found.inputs == {"cluster_name": "qs", "num_gpus": 8, "num_preemptible_gpus": 8}
    assert found.outputs["kube_config"] == SECRET and found.outputs["allocated_preemptible_gpus"] == 0

    code = {"cluster_name": "qs", "num_gpus": 8, "num_preemptible_gpus": 8}
    live = {**code, "num_preemptible_gpus": 16}
    live_outputs = {**found.outputs, **live, "allocated_preemptible_gpus": 0}
    planned = PlannedStep(urn, native, "update", live, live_outputs, code, ("num_preemptible_gpus",))
    report = classify(export(resource), [planned], AS_DEPLOYED)
    assert [(d.resource, d.type, d.field, d.code, d.live) for d in report.drift] == [
        ("gpus", native, "numPreemptibleGpus", 8, 16)
    ]
    [short] = report.shortfall
    assert (short.desired_preemptible_gpus, short.allocated_preemptible_gpus) == (8, 0)
