"""The Volume resource under the real Pulumi engine, against the emulator: a cluster replaced for another
GPU type gets the same volume back; a volume grows in place, refuses a shrink at preview, and outlives
``pulumi destroy`` unless the code allows its data to go."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _engine

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_engine-volume-key-0123456789"
PREVIEW = ["preview", *_engine.PREVIEW_FLAGS]
UP = ["up", *_engine.UP_FLAGS]

PROGRAM = """
import pulumi
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs

config = pulumi.Config()
volume = Volume(
    "checkpoints",
    VolumeArgs(
        volume_name="checkpoints",
        region="us-central-8",
        size_tib=config.get_int("sizeTib") or 1,
        allow_data_loss=config.get_bool("allowDataLoss"),
    ),
)
cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name="volume-engine",
        region="us-central-8",
        gpu_type=config.get("gpuType") or "H100_SXM",
        num_gpus=8,
        nvidia_version_id="nv-570-cu128-ubuntu2204",
        volume_id=volume.volume_id,
        ready_timeout_minutes=5,
    ),
)
pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("volume_id", volume.volume_id)
"""


class Stack(_engine.ProjectStack):
    def __init__(
        self, workdir: Path, base_url: str, program: str = PROGRAM, name: str = "volume-engine"
    ) -> None:
        self.dir = _engine.write_project(workdir / "project", name, program)
        self.env = _engine.engine_env(
            workdir,
            pythonpath=[_engine.ROOT],
            extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY},
        )
        self.run("stack", "init", "test", check=True)


@pytest.fixture(scope="module")
def stack(emu, tmp_path_factory):
    stack = Stack(tmp_path_factory.mktemp("volume"), emu.base_url)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    return stack


def _volume(emu, volume_id: str) -> dict | None:
    return next((v for v in emu.admin.volumes() if v["volume_id"] == volume_id), None)


def test_the_cluster_uses_the_volume(stack, emu):
    outs = stack.outputs()
    volume = _volume(emu, outs["volume_id"])
    assert volume is not None and volume["cluster_id"] == outs["cluster_id"] and volume["status"] == "bound"
    assert volume["is_lifecycle_independent"] is True


def test_a_gpu_type_change_replaces_the_cluster_and_keeps_the_volume_attached(stack, emu):
    before = stack.outputs()
    stack.config("gpuType", "H200_SXM")
    preview = stack.run(*PREVIEW, "--diff")
    assert preview.returncode == 0, _engine.output(preview)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    after = stack.outputs()
    assert after["cluster_id"] != before["cluster_id"]
    assert after["volume_id"] == before["volume_id"]
    volume = _volume(emu, after["volume_id"])
    assert volume is not None and volume["cluster_id"] == after["cluster_id"]
    assert [c["cluster_id"] for c in emu.admin.clusters() if c["status"] != "Deleting"] == [
        after["cluster_id"]
    ]


def test_the_volume_grows_in_place_and_a_shrink_is_refused_at_preview(stack, emu):
    volume_id = stack.outputs()["volume_id"]
    stack.config("sizeTib", 3)
    cluster_id = stack.outputs()["cluster_id"]
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    assert stack.outputs()["volume_id"] == volume_id and _volume(emu, volume_id)["size_tib"] == 3
    # The volume kept its id, so the cluster using it was not replaced.
    assert stack.outputs()["cluster_id"] == cluster_id
    stack.config("sizeTib", 2)
    preview = stack.run(*PREVIEW)
    assert preview.returncode != 0
    assert "a volume can only grow" in _engine.output(preview)
    assert _volume(emu, volume_id)["size_tib"] == 3
    stack.config("sizeTib", 3)


def test_destroy_keeps_the_volume_unless_data_loss_is_allowed(stack, emu):
    volume_id = stack.outputs()["volume_id"]
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    kept = _volume(emu, volume_id)
    assert kept is not None and kept["status"] == "available" and kept["cluster_id"] is None
    assert [c for c in emu.admin.clusters() if c["status"] != "Deleting"] == []


INLINE_PROGRAM = """
import pulumi
from together_clusters.provider import Cluster, ClusterArgs

config = pulumi.Config()
cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name="inline-engine",
        region="us-central-8",
        gpu_type=config.get("gpuType") or "H100_SXM",
        num_gpus=8,
        nvidia_version_id="nv-570-cu128-ubuntu2204",
        shared_volume={"region": "us-central-8", "size_tib": 1, "volume_name": "inline-ckpt"},
        allow_data_loss=config.get_bool("allowDataLoss"),
        ready_timeout_minutes=5,
    ),
)
pulumi.export("cluster_id", cluster.cluster_id)
"""


def test_an_inline_dependent_volume_is_never_deleted_by_a_plan_unless_opted_in(emu, tmp_path):
    stack = Stack(tmp_path, emu.base_url, INLINE_PROGRAM, "inline-engine")
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    assert "is protected until the code sets allow_data_loss=True" in _engine.output(proc)
    cluster_id = stack.outputs()["cluster_id"]
    [volume] = [v for v in emu.admin.volumes() if v["cluster_id"] == cluster_id]

    # Another GPU type would replace the cluster and delete its volume: refused at preview, by name.
    stack.config("gpuType", "H200_SXM")
    preview = stack.run(*PREVIEW)
    assert preview.returncode != 0
    said = _engine.output(preview)
    assert "'inline-ckpt'" in said and "allow_data_loss=True" in said and "Volume resource" in said
    # And pulumi destroy is refused at preview too (the cluster is protected).
    destroy = stack.run("destroy", *_engine.UP_FLAGS)
    assert destroy.returncode != 0 and "protect" in _engine.output(destroy)
    assert _volume(emu, volume["volume_id"]) is not None
    assert stack.outputs()["cluster_id"] == cluster_id

    # Opted in: the replacement goes ahead, and the destroy too.
    stack.config("allowDataLoss", "true")
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    assert stack.outputs()["cluster_id"] != cluster_id
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
