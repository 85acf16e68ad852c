"""``python -m together_clusters.emulator --state FILE`` as a real process: a restart loses nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from together_clusters.emulator.admin_client import AdminClient

from .conftest import GPU, REGION, create_body

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def emulator_process(*args: str) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "together_clusters.emulator", "--port", "0", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), base_url
        yield base_url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_state_survives_restart(tmp_path: Path) -> None:
    state = tmp_path / "emulator.sqlite"
    headers = {"Authorization": "Bearer key-restart"}
    with emulator_process("--state", str(state), "--speed", "0") as url:
        admin = AdminClient(url)
        admin.set_capacity(REGION, GPU, 8)
        admin.set_grace_seconds(42)
        with httpx.Client(base_url=url, headers=headers) as client:
            ids = [
                client.post(
                    "/v1/compute/clusters", json=create_body(cluster_name=f"c{i}", num_preemptible_gpus=16)
                ).json()["cluster_id"]
                for i in range(3)
            ]
            admin.advance(700)
            admin.preempt(ids[0])
            before = {cid: client.get(f"/v1/compute/clusters/{cid}").json() for cid in ids}
            clock_before = admin.clock()["now_s"]
        admin.close()
    assert os.path.getsize(state) > 0

    with emulator_process("--state", str(state), "--speed", "0") as url:
        admin = AdminClient(url)
        assert admin.clock()["now_s"] >= clock_before
        assert {c["cluster_id"] for c in admin.clusters()} == set(ids)
        with httpx.Client(base_url=url, headers=headers) as client:
            after = {cid: client.get(f"/v1/compute/clusters/{cid}").json() for cid in ids}
            assert after == before
            # The preemption in flight carries on after the restart with the saved grace period.
            admin.advance(42)
            preempted = client.get(f"/v1/compute/clusters/{ids[0]}").json()
            assert len(preempted["deleted_gpu_worker_nodes"]) == 1
        assert admin.pool(REGION, GPU)["preemptible_gpus"] == 0
        admin.close()
