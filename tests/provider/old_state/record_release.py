"""Record the stack state a release writes for a Volume, a Cluster using it and a component, as the fixture of
test_engine_release_state.

Run it in a checkout of the release (a worktree at the commit, with its own ``.venv``, its ``.engine`` and
``.pulumi-home`` linked to a built engine), from that checkout's root::

    .venv/bin/python tests/provider/old_state/record_release.py tests/provider/old_state/release-2d0b321.json

The fixture beside this file was recorded at 2d0b321, the last commit before the package tree was
restructured (issue 29), so it holds what that release pickles and records: the provider classes
``together_clusters.provider.resource.ClusterProvider`` and ``...VolumeProvider`` and the type tokens of the
Cluster, the Volume and the CheckpointStore component.

It starts an embedded emulator, runs a real ``pulumi up`` of PROGRAM (project PROJECT, stack STACK,
passphrase ``tests._engine.DEFAULT_PASSPHRASE``), lets the emulated hour pass so the preemptible capacity is
filled, runs ``pulumi refresh`` (so the state holds what the release reads back: a stack a user has refreshed
once; without it the volume would still say ``available`` where the platform says ``bound``, and the test's
refresh would see that change rather than a change of ours), and writes ``pulumi stack export``. The API key
is never in it. No PYTHONPATH is given: the program and the dynamic provider import the installed package,
as in a user's project.

The Volume and the CheckpointStore allow their data to be lost (``allow_data_loss=True``), so that
``pulumi destroy`` of the imported state calls the pickled VolumeProvider's delete too and deletes the claim,
instead of retaining them (the release's default).

The component is a CheckpointStore whose claim is bound to the volume, on ``provider_for(cluster,
render_dir=...)``: a Kubernetes provider that writes its manifests to a folder, so no Kubernetes API (the
twin) is needed; its refresh needs REFRESH_ENV, for a reason of pulumi-kubernetes. The folder
(``RENDER_DIR_KEY`` in the stack's config) is recorded in the kubernetes provider's inputs and in the stack's
config the dynamic providers are given; the test moves it to a folder of its own as it moves the endpoint.

Never re-record an existing fixture to make the test pass: the fixture is what users' stacks hold.
Record a new file next to it instead, and keep testing the old one.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests import _engine  # noqa: E402
from together_clusters.emulator.server import start_emulator  # noqa: E402

PROJECT = "release-state"
STACK = "released"
API_KEY = "tgp_v1_release-state-test-key-0123456789"
REGION = "us-central-8"
CLUSTER_NAME = "release-state-cluster"
VOLUME_NAME = "release-state-checkpoints"
CLAIM_NAME = "checkpoints"
RENDER_DIR_KEY = "renderDir"
#: What ``pulumi refresh`` of this stack needs besides the stack's environment. pulumi-kubernetes (4.25.0)
#: refuses to read any resource of a provider whose cluster it cannot reach, even one that renders YAML to a
#: folder and never talks to a cluster (``Read`` checks for a cluster before it checks for render mode); with
#: this it reads the claim back as it is in the state, as render mode would. Nothing of ours is skipped.
REFRESH_ENV = {"PULUMI_K8S_SKIP_UPDATE_UNREACHABLE": "true"}
#: Emulated seconds the recorder (and the test) let pass before reading the cluster back: enough for it to be
#: Ready and for its preemptible GPUs to be handed out, so a read finds it settled.
SETTLE_S = 3600
PROGRAM = f'''"""A Volume, a Cluster using it and a CheckpointStore on the volume, as a user's program declares them."""

import pulumi

from together_clusters.components import CheckpointStore, CheckpointStoreArgs, SharedVolume, provider_for
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs

config = pulumi.Config()
volume = Volume(
    "checkpoints",
    VolumeArgs(volume_name="{VOLUME_NAME}", region="{REGION}", size_tib=1, allow_data_loss=True),
)
cluster = Cluster(
    "cluster",
    ClusterArgs(
        cluster_name="{CLUSTER_NAME}",
        region="{REGION}",
        gpu_type="H100_SXM",
        num_gpus=8,
        num_preemptible_gpus=8,
        volume_id=volume.volume_id,
    ),
)
k8s = provider_for(cluster, render_dir=config.require("{RENDER_DIR_KEY}"))
store = CheckpointStore(
    "store",
    CheckpointStoreArgs(storage=SharedVolume(claim_name="{CLAIM_NAME}", size="1Ti")),
    pulumi.ResourceOptions(provider=k8s),
    volume_name="{VOLUME_NAME}",
    allow_data_loss=True,
)
pulumi.export("cluster_id", cluster.cluster_id)
pulumi.export("volume_id", volume.volume_id)
pulumi.export("claim_name", store.claim_name)
'''


def record(target: Path) -> None:
    with tempfile.TemporaryDirectory() as work, start_emulator(speed=600) as emu:
        project = _engine.write_project(Path(work) / "prog", PROJECT, PROGRAM)
        env = _engine.engine_env(work, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})
        pulumi = _engine.pulumi_in(project, env)
        pulumi("stack", "init", STACK)
        pulumi("config", "set", RENDER_DIR_KEY, str(Path(work) / "rendered"))
        pulumi("up", *_engine.UP_FLAGS)
        emu.admin.advance(SETTLE_S)
        _engine.run_pulumi(["refresh", *_engine.UP_FLAGS], cwd=project, env=env | REFRESH_ENV, check=True)
        exported = _engine.stack_export(project, env)
        pulumi("destroy", *_engine.UP_FLAGS)
    text = json.dumps(exported, indent=2, sort_keys=True) + "\n"
    assert API_KEY not in text
    target.write_text(text)


if __name__ == "__main__":
    record(Path(sys.argv[1]))
