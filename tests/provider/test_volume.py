"""The Volume resource: its rules as plain dicts, and its provider's calls against the emulator over HTTP."""

from __future__ import annotations

import httpx
import pytest

from together_clusters.provider import ConflictError, InputError, Volume, VolumeArgs, settings
from together_clusters.provider.resource import VolumeProvider
from together_clusters.provider.volume_rules import plan_volume_change, validate_volume

KEY = "volume-test-key"
REGION = "us-central-8"
STATE = {"volume_id": "vol-1", "volume_name": "ckpt", "region": REGION, "size_tib": 2}


def test_growing_is_in_place_and_shrinking_is_refused_naming_the_size():
    assert plan_volume_change(STATE, STATE | {"size_tib": 3}).update == ["size_tib"]
    [refusal] = plan_volume_change(STATE, STATE | {"size_tib": 1}).refusals
    assert refusal.field == "size_tib" and "vol-1" in refusal.message and "2 TiB" in refusal.message


def test_a_replacement_is_refused_unless_data_loss_is_allowed():
    plan = plan_volume_change(STATE, STATE | {"volume_name": "other"})
    assert plan.replace == ["volume_name"]
    [refusal] = plan.refusals
    assert "vol-1" in refusal.message and "allow_data_loss=True" in refusal.message
    allowed = plan_volume_change(STATE, STATE | {"volume_name": "other", "allow_data_loss": True})
    assert allowed.replace == ["volume_name"] and allowed.refusals == []


def test_bad_inputs_name_the_field():
    failures = {f.field: f.message for f in validate_volume({"volume_name": "", "size_tib": 0})}
    assert set(failures) == {"volume_name", "region", "size_tib"}
    assert "got 0" in failures["size_tib"]


def test_volume_args_are_the_schema():
    with pytest.raises(TypeError, match="nope"):
        Volume("v", VolumeArgs(volume_name="a", region=REGION, size_tib=1), nope=1)


@pytest.fixture
def admin(emu, monkeypatch):
    monkeypatch.setenv("TOGETHER_BASE_URL", emu.base_url)
    monkeypatch.setenv("TOGETHER_API_KEY", KEY)
    emu.admin.reset()
    settings.forget_clients()
    yield emu.admin


def _checked(provider: VolumeProvider, olds: dict, news: dict) -> dict:
    result = provider.check(olds, news)
    assert not result.failures, result.failures
    return result.inputs


def test_create_read_grow_adopt_delete(admin):
    provider = VolumeProvider()
    inputs = _checked(provider, {}, {"volume_name": "ckpt", "region": REGION, "size_tib": 2})
    assert inputs["is_lifecycle_independent"] is True  # the default: it outlives its clusters
    created = provider.create(inputs)
    outs = created.outs
    assert created.id == outs["volume_id"] and outs["status"] == "available" and outs["size_tib"] == 2
    [live] = admin.volumes()
    assert live["is_lifecycle_independent"] is True
    # project_id is sent on create: the key's project (from whoami) when the stack sets none.
    assert live["project_id"] == outs["api_project_id"] and live["project_id"]

    read = provider.read(created.id, outs)
    assert read.id == created.id and read.outs["size_tib"] == 2

    news = _checked(provider, outs, inputs | {"size_tib": 5})
    diff = provider.diff(created.id, outs, news)
    assert diff.changes and not diff.replaces
    grown = provider.update(created.id, outs, news).outs
    assert grown["size_tib"] == 5 and admin.volumes()[0]["size_tib"] == 5
    shrink = provider.check(grown, news | {"size_tib": 3})
    assert [f.property for f in shrink.failures] == ["size_tib"]

    adopting = _checked(
        provider, {}, {"volume_name": "ckpt", "region": REGION, "size_tib": 6, "adopt_volume_id": created.id}
    )
    adopted = provider.create(adopting)
    assert adopted.id == created.id and adopted.outs["size_tib"] == 6 and len(admin.volumes()) == 1

    provider.delete(created.id, adopted.outs)
    assert admin.volumes() == []
    assert provider.read(created.id, adopted.outs).id == ""
    provider.delete(created.id, adopted.outs)  # already gone: done


def test_adopting_a_bigger_volume_is_refused(admin):
    provider = VolumeProvider()
    created = provider.create(_checked(provider, {}, {"volume_name": "big", "region": REGION, "size_tib": 4}))
    inputs = _checked(
        provider, {}, {"volume_name": "big", "region": REGION, "size_tib": 2, "adopt_volume_id": created.id}
    )
    with pytest.raises(InputError, match="can only grow"):
        provider.create(inputs)


def test_deleting_a_volume_a_cluster_uses_says_what_to_do(admin, emu):
    provider = VolumeProvider()
    created = provider.create(
        _checked(provider, {}, {"volume_name": "used", "region": REGION, "size_tib": 1})
    )
    body = {
        "cluster_name": "user",
        "region": REGION,
        "gpu_type": "H100_SXM",
        "num_gpus": 8,
        "billing_type": "ON_DEMAND",
        "nvidia_version_id": "nv-570-cu128-ubuntu2204",
        "volume_id": created.id,
    }
    reply = httpx.post(
        f"{emu.base_url}/v1/compute/clusters", json=body, headers={"Authorization": f"Bearer {KEY}"}
    )
    assert reply.status_code == 200, reply.text
    with pytest.raises(ConflictError) as refused:
        provider.delete(created.id, created.outs)
    assert "delete that cluster first" in "\n".join(refused.value.__notes__)
