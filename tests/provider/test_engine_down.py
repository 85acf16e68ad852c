"""scripts/down destroys against the endpoint the stack's clusters were created on, or refuses."""

from __future__ import annotations

import subprocess

import pytest

from tests import _engine
from together_clusters.emulator.server import start_emulator

pytestmark = pytest.mark.engine

KEY = "tgp_v1_down-test-secret-0123456789"
STACK = "downtest"


def test_down_refuses_another_endpoint_and_destroys_on_the_recorded_one(tmp_path):
    _engine.require_engine()
    stack_file = _engine.ROOT / f"Pulumi.{STACK}.yaml"
    with start_emulator(speed=600) as emu, start_emulator(speed=600) as elsewhere:
        env = _engine.engine_env(
            tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": KEY, "KEEP_EMULATOR": "1"}
        )
        try:
            _engine.run_pulumi(["stack", "init", STACK], cwd=_engine.ROOT, env=env, check=True)
            _engine.run_pulumi(
                ["up", *_engine.UP_FLAGS, "--stack", STACK], cwd=_engine.ROOT, env=env, check=True
            )
            (cluster,) = emu.admin.clusters()

            def down(base_url: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [str(_engine.ROOT / "scripts" / "down"), STACK],
                    env={**env, "TOGETHER_BASE_URL": base_url},
                    capture_output=True,
                    text=True,
                    timeout=600,
                )

            refused = down(elsewhere.base_url)
            assert refused.returncode != 0
            assert (
                f"created on {emu.base_url}" in refused.stderr and "nothing was destroyed" in refused.stderr
            )
            assert [c["cluster_id"] for c in emu.admin.clusters() if c["status"] != "Deleting"] == [
                cluster["cluster_id"]
            ]

            destroyed = down(emu.base_url + "/v1")  # the same endpoint, spelled as older SDKs do
            assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
            assert [c for c in emu.admin.clusters() if c["status"] != "Deleting"] == []
        finally:
            _engine.run_pulumi(["stack", "rm", "--yes", "--force", STACK], cwd=_engine.ROOT, env=env)
            stack_file.unlink(missing_ok=True)
