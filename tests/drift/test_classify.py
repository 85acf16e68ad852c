"""drift.classify on literal state exports and preview steps."""

from __future__ import annotations

from typing import Any

from together_clusters.drift.classify import EXIT_DRIFT, EXIT_IN_SYNC, changed_fields, classify
from together_clusters.drift.stack_state import CLUSTER_TYPE, SECRET_MARK, SECRET_SIG, UNKNOWN

URN = "urn:pulumi:dev::together-quickstart::" + CLUSTER_TYPE + "::quickstart"
SECRET = {SECRET_SIG: SECRET_MARK, "ciphertext": "v1:abc"}


def cluster(inputs: dict[str, Any] | None = None, **outputs: Any) -> dict[str, Any]:
    ins = {
        "cluster_name": "qs",
        "num_gpus": 8,
        "num_preemptible_gpus": 8,
        "__provider": SECRET,
        **(inputs or {}),
    }
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
    return {"urn": URN, "custom": True, "type": CLUSTER_TYPE, "id": "c-1", "inputs": ins, "outputs": outs}


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


def step(op: str, inputs: dict[str, Any], diff: list[str] | None = None) -> dict[str, Any]:
    return {"op": op, "urn": URN, "newState": {"urn": URN, "inputs": inputs}, "diffReasons": diff or []}


def test_in_sync():
    report = classify(export(cluster()), export(cluster()), [step("same", cluster()["inputs"])])
    assert report.in_sync and report.exit_code == EXIT_IN_SYNC
    assert report.to_dict()["drift"] == [] and report.to_dict()["missing"] == []


def test_out_of_band_change_is_spec_drift_with_code_and_live_values():
    deployed = export(cluster())
    live = export(cluster({"num_preemptible_gpus": 16}))
    report = classify(deployed, live, [step("update", cluster()["inputs"], ["num_preemptible_gpus"])])
    assert report.exit_code == EXIT_DRIFT
    [d] = report.drift
    assert (d.resource, d.type, d.field, d.code, d.live) == (
        "quickstart",
        "together_clusters:Cluster",
        "num_preemptible_gpus",
        8,
        16,
    )
    assert report.pending == []


def test_without_a_preview_the_deployed_value_stands_for_the_code():
    report = classify(export(cluster()), export(cluster({"num_gpus": 16})))
    [d] = report.drift
    assert (d.field, d.code, d.live) == ("num_gpus", 8, 16)


def test_code_changed_to_match_the_live_value_is_not_drift():
    live = export(cluster({"num_preemptible_gpus": 16}))
    report = classify(
        export(cluster()), live, [step("same", cluster({"num_preemptible_gpus": 16})["inputs"])]
    )
    assert report.in_sync


def test_deleted_out_of_band_is_missing():
    report = classify(export(cluster()), export(), [step("create", cluster()["inputs"])])
    assert report.exit_code == EXIT_DRIFT
    [m] = report.missing
    assert (m.resource, m.type, m.id) == ("quickstart", "together_clusters:Cluster", "c-1")
    assert report.pending == []  # the re-create is the consequence of the missing resource, not a code change


def test_shortfall_and_preemption_are_information_only():
    live = export(
        cluster(allocated_preemptible_gpus=0, recent_preemptions=2, last_preempted_at="2030-01-01T00:00:00Z")
    )
    report = classify(export(cluster()), live, [step("same", cluster()["inputs"])])
    assert report.in_sync
    [s] = report.shortfall
    assert (s.desired_preemptible_gpus, s.allocated_preemptible_gpus, s.shortfall_gpus) == (8, 0, 8)
    [c] = report.churn
    assert (c.preemptions_since_deployment, c.last_preempted_at) == (2, "2030-01-01T00:00:00Z")


def test_churn_counts_only_preemptions_since_the_deployment():
    deployed = export(cluster(recent_preemptions=3, last_preempted_at="2030-01-01T00:00:00Z"))
    same = export(cluster(recent_preemptions=3, last_preempted_at="2030-01-01T00:00:00Z"))
    assert classify(deployed, same).churn == []
    # Older preemptions aged out of the window while a new one happened.
    newer = export(cluster(recent_preemptions=1, last_preempted_at="2030-01-02T00:00:00Z"))
    [c] = classify(deployed, newer).churn
    assert c.preemptions_since_deployment == 1


def test_code_change_not_yet_deployed_is_pending_not_drift():
    code = cluster({"num_gpus": 16})["inputs"]
    report = classify(export(cluster()), export(cluster()), [step("update", code, ["num_gpus"])])
    assert report.in_sync
    [p] = report.pending
    assert (p.field, p.live, p.code, p.op) == ("num_gpus", 8, 16, "update")


def test_drift_and_pending_change_on_one_resource_are_told_apart():
    code = cluster({"num_gpus": 16})["inputs"]
    live = export(cluster({"num_preemptible_gpus": 0}))
    report = classify(export(cluster()), live, [step("update", code, ["num_gpus", "num_preemptible_gpus"])])
    assert [(d.field, d.code, d.live) for d in report.drift] == [("num_preemptible_gpus", 8, 0)]
    assert [(p.field, p.code) for p in report.pending] == [("num_gpus", 16)]


def test_new_resource_in_code_is_pending():
    other = "urn:pulumi:dev::together-quickstart::" + CLUSTER_TYPE + "::second"
    steps = [step("same", cluster()["inputs"]), {"op": "create", "urn": other, "newState": {"inputs": {}}}]
    report = classify(export(cluster()), export(cluster()), steps)
    assert report.in_sync
    assert [(p.resource, p.op, p.type) for p in report.pending] == [
        ("second", "create", "together_clusters:Cluster")
    ]


def test_secrets_internal_keys_and_bookkeeping_are_never_compared():
    live = cluster()
    live["inputs"]["__provider"] = {SECRET_SIG: SECRET_MARK, "ciphertext": "v1:other"}
    live["outputs"]["kube_config"] = {SECRET_SIG: SECRET_MARK, "ciphertext": "v1:other"}
    deployed = export(cluster())
    refreshed = export(live)
    refreshed["deployment"]["resources"][1]["inputs"] = {"version": "changed"}
    assert classify(deployed, refreshed).in_sync


def test_unknown_code_value_counts_as_different():
    assert changed_fields({"a": UNKNOWN}, {"a": UNKNOWN}) == ["a"]
    live = export(cluster({"num_gpus": 16}))
    report = classify(export(cluster()), live, [step("update", cluster({"num_gpus": UNKNOWN})["inputs"])])
    [d] = report.drift
    assert d.code == UNKNOWN


def test_to_dict_is_plain_json_data():
    import json

    live = export(cluster({"num_preemptible_gpus": 16}, allocated_preemptible_gpus=8))
    data = classify(export(cluster()), live).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["drift"][0]["field"] == "num_preemptible_gpus"
    assert data["info"]["capacity_shortfall"][0]["shortfall_gpus"] == 8
