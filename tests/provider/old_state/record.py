"""Record a stack state the way a released version writes it, as a fixture for test_engine_old_state.

Run from the repository root, at the commit whose state you want to keep (the fixture beside this file
was recorded at 747a1a0)::

    PYTHONPATH=$PWD .venv/bin/python tests/provider/old_state/record.py tests/provider/old_state/cluster-747a1a0.json

It starts an embedded emulator, runs a real ``pulumi up`` of a one-Cluster program (PROGRAM below,
project PROJECT, stack STACK, passphrase ``tests._engine.DEFAULT_PASSPHRASE``) and writes
``pulumi stack export``: the deployment with its passphrase secrets provider (the salt), the pickled
provider and the kubeconfig as ciphertext. The API key is never in it.

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

PROJECT = "old-state"
STACK = "released"
API_KEY = "tgp_v1_old-state-test-key-0123456789"
CLUSTER_NAME = "old-state-cluster"
PROGRAM = f'''"""One Cluster, as a user's program declares it."""

import pulumi

from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster(
    "cluster",
    ClusterArgs(
        cluster_name="{CLUSTER_NAME}",
        region="us-central-8",
        gpu_type="H100_SXM",
        num_gpus=8,
        num_preemptible_gpus=8,
    ),
)
pulumi.export("cluster_id", cluster.cluster_id)
'''


def record(target: Path) -> None:
    with tempfile.TemporaryDirectory() as work, start_emulator(speed=600) as emu:
        project = _engine.write_project(Path(work) / "prog", PROJECT, PROGRAM)
        env = _engine.engine_env(
            work,
            pythonpath=[_engine.ROOT],
            extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY},
        )
        _engine.run_pulumi(["stack", "init", STACK], cwd=project, env=env, check=True)
        _engine.run_pulumi(["up", *_engine.UP_FLAGS], cwd=project, env=env, check=True)
        exported = _engine.stack_export(project, env)
        _engine.run_pulumi(["destroy", *_engine.UP_FLAGS], cwd=project, env=env, check=True)
    target.write_text(json.dumps(exported, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    record(Path(sys.argv[1]))
