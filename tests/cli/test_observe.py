"""drift.observe's reading of engine events, on events as the Automation API parses the engine's JSON."""

from __future__ import annotations

from pulumi import automation as auto

from together_clusters.cli.drift.observe import planned_step
from together_clusters.cli.stack_state import CLUSTER_TYPE

URN = "urn:pulumi:dev::p::" + CLUSTER_TYPE + "::c0"


def event(
    op: str, old: dict | None, new: dict | None, diffs: list[str] | None = None
) -> auto.StepEventMetadata:
    def state(inputs: dict | None) -> dict | None:
        if inputs is None:
            return None
        return {
            "type": CLUSTER_TYPE,
            "urn": URN,
            "id": "c-1",
            "custom": True,
            "inputs": inputs,
            "outputs": inputs,
        }

    body = {"op": op, "urn": URN, "type": CLUSTER_TYPE, "provider": "", "old": state(old), "new": state(new)}
    if diffs is not None:
        body["diffs"] = diffs
    return auto.StepEventMetadata.from_json(body)


def test_an_update_step_gives_live_and_code_with_whole_numbers():
    step = planned_step(
        event("update", {"num_gpus": 16.0, "cfg": {"n": 2.0}}, {"num_gpus": 8.0}, ["num_gpus"])
    )
    assert step is not None
    assert (step.op, step.name, step.diffs) == ("update", "c0", ("num_gpus",))
    assert step.live_inputs == {"num_gpus": 16, "cfg": {"n": 2}}
    assert isinstance(step.live_inputs["num_gpus"], int)
    assert step.code_inputs == {"num_gpus": 8}


def test_refresh_steps_are_not_the_plan():
    assert planned_step(event("refresh", {"num_gpus": 8}, {"num_gpus": 16})) is None


def test_a_create_has_no_live_side_and_a_delete_no_code_side():
    create = planned_step(event("create", None, {"num_gpus": 8}))
    delete = planned_step(event("delete", {"num_gpus": 8}, {"num_gpus": 8}))
    assert create is not None and create.live_inputs is None and create.code_inputs == {"num_gpus": 8}
    assert delete is not None and delete.code_inputs is None and delete.live_inputs == {"num_gpus": 8}
