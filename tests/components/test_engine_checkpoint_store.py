"""A checkpoint store through the real Pulumi engine (manifests rendered to YAML, a Cluster and a Volume on
the emulator): its claim is bound to the Together volume and kept on ``pulumi destroy`` unless opted in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import _engine

from .test_e2e_engine import emulator_url, rendered_objects, rendering_stack, stack_env  # noqa: F401 - the fixture

pytestmark = pytest.mark.engine

PROGRAM = """\
import pulumi

from together_clusters.components import (
    BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ContainerSpec, SharedVolume,
    provider_from_stack_config,
)
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs

config = pulumi.Config()
volume = Volume("ckpt-volume", VolumeArgs(volume_name="ckpt-volume", region="us-central-8", size_tib=1))
cluster = Cluster("gpu", ClusterArgs(cluster_name="store-e2e", region="us-central-8", gpu_type="RTX_6000_PCI",
                                     num_gpus=8, num_preemptible_gpus=8, volume_id=volume.volume_id))
kubernetes = pulumi.ResourceOptions(provider=provider_from_stack_config(cluster))
store = CheckpointStore("ckpt", CheckpointStoreArgs(storage=SharedVolume(claim_name="store-ckpt", size="1Ti")),
                        opts=kubernetes, volume_name="ckpt-volume",
                        allow_data_loss=config.get_bool("allowDataLoss") or False)
job = BatchJob("ft", BatchJobArgs(container=ContainerSpec(image="ghcr.io/example/trainer:1", gpus=8),
                                  checkpoint=store.storage),
               opts=pulumi.ResourceOptions.merge(kubernetes, pulumi.ResourceOptions(depends_on=[store])))
"""


@pytest.mark.parametrize("allow_data_loss", [False, True])
def test_destroy_keeps_the_checkpoint_claim_unless_opted_in(
    tmp_path: Path,
    emulator_url: str,  # noqa: F811 - the fixture
    allow_data_loss: bool,
) -> None:
    project = _engine.write_project(tmp_path / "program", "store-e2e", PROGRAM)
    env = stack_env(tmp_path, emulator_url)
    render_dir = tmp_path / "rendered"

    pulumi = rendering_stack(project, env, "store", render_dir)
    pulumi("config", "set", "allowDataLoss", str(allow_data_loss).lower())
    up = pulumi("up", *_engine.UP_FLAGS, check=False)
    assert up.returncode == 0, _engine.output(up)
    claim = rendered_objects(render_dir)["PersistentVolumeClaim/store-ckpt"]
    # Bound to the platform's static PersistentVolume named after the shared volume.
    assert claim["spec"]["volumeName"] == "ckpt-volume" and claim["spec"]["storageClassName"] == ""

    destroy = pulumi("destroy", *_engine.UP_FLAGS, check=False)
    assert destroy.returncode == 0, _engine.output(destroy)
    left = rendered_objects(render_dir)
    assert "Job/ft" not in left and "JobSet/ft" not in left
    assert ("PersistentVolumeClaim/store-ckpt" in left) is not allow_data_loss
