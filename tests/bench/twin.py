"""Section 7: the Kubernetes twin (issue 11): control plane cold start, memory per cluster, and a
preemption drill of the finetune example (tests/bench/twin_drill.py).

The emulator runs with ``--kubernetes``, as users start the twin. Without the twin's binaries
(scripts/install-kubernetes) every figure here says "not available", never a number; the drill also
needs the Pulumi engine.
"""

from __future__ import annotations

import base64
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import yaml

from together_clusters.emulator.kubernetes import binaries
from together_clusters.provider.kubeconfig import kubeconfig_text

from . import twin_drill
from .context import Context
from .figures import Figure, unavailable
from .servers import ROOT, Served, api_client, create_request, twin_emulator
from .stacks import engine_missing

SECTION = "7. Twin"
SPEED = 600.0
START_TIMEOUT_S = 180.0
NO_TWIN = "the emulator's kubeconfig reaches no Kubernetes API server"


def twin_missing() -> str | None:
    """Why the twin cannot run here, or None when it can."""
    check = subprocess.run(
        [str(ROOT / "scripts" / "install-kubernetes"), "--check"], capture_output=True, text=True, check=False
    )
    if check.returncode != 0 or binaries.find() is None:
        return "the Kubernetes twin is not built or out of date (run scripts/install-kubernetes)"
    return None


def kube_client(kubeconfig: str, scratch: Path) -> httpx.Client | None:
    """An httpx client of the API server a kubeconfig names, with its credentials; None if it names none."""
    config = yaml.safe_load(kubeconfig_text(kubeconfig) or "") or {}
    cluster = (config.get("clusters") or [{}])[0].get("cluster", {})
    user = (config.get("users") or [{}])[0].get("user", {})
    server = str(cluster.get("server", ""))
    if not server or (urlparse(server).hostname or "").endswith(".invalid"):
        return None
    options: dict[str, Any] = {"base_url": server, "timeout": 5}
    if cluster.get("insecure-skip-tls-verify"):
        options["verify"] = False
    elif cluster.get("certificate-authority-data"):
        ca = scratch / "ca.crt"
        ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
        options["verify"] = str(ca)
    if user.get("token"):
        options["headers"] = {"Authorization": f"Bearer {user['token']}"}
    if user.get("client-certificate-data"):
        cert, key = scratch / "client.crt", scratch / "client.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        options["cert"] = (str(cert), str(key))
    return httpx.Client(**options)


def tree_rss_mib(pid: int) -> float:
    """Resident memory of a process and all its descendants."""
    parents: dict[int, int] = {}
    rss: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            status = (stat.parent / "status").read_text()
        except OSError:
            continue
        child = int(stat.parent.name)
        parents[child] = int(fields[1])
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[child] = int(line.split()[1]) / 1024
    family = {pid}
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in family and child not in family:
                family.add(child)
                grew = True
    return sum(rss.get(p, 0.0) for p in family)


def _start_control_plane(emulator: Served, name: str, scratch: Path) -> float | None:
    """Seconds from the create request until the cluster's API server answers; None without a twin."""
    with api_client(emulator.url) as api:
        started = time.perf_counter()
        reply = api.post("/v1/compute/clusters", json=create_request(name))
        reply.raise_for_status()
        cluster_id = reply.json()["cluster_id"]
        while time.perf_counter() - started < START_TIMEOUT_S:
            cluster = api.get(f"/v1/compute/clusters/{cluster_id}").json()
            client = kube_client(cluster.get("kube_config") or "", scratch)
            if client is None and cluster.get("status") == "Ready":
                return None
            if client is not None:
                with client:
                    try:
                        if client.get("/version").status_code == 200:
                            answered = time.perf_counter() - started
                            _wait_until_ready(api, cluster_id, name)
                            return answered
                    except httpx.HTTPError:
                        pass
            time.sleep(0.1)
    raise RuntimeError(f"cluster {name}: its API server did not answer within {START_TIMEOUT_S:g}s")


def _wait_until_ready(api: httpx.Client, cluster_id: str, name: str) -> None:
    """Until the cluster is Ready (its twin serving, a pre-installed JobSet's webhooks included), so the memory
    measured after it is the whole cluster's."""
    deadline = time.perf_counter() + START_TIMEOUT_S
    while time.perf_counter() < deadline:
        if api.get(f"/v1/compute/clusters/{cluster_id}").json().get("status") == "Ready":
            return
        time.sleep(0.1)
    raise RuntimeError(f"cluster {name}: not Ready within {START_TIMEOUT_S:g}s")


BARE = ("control plane cold start (create to API server answering)", "memory per cluster (bare)")
PREPARED = (
    "control plane cold start, JobSet pre-installed (--jobset)",
    "memory per cluster, JobSet pre-installed (--jobset)",
)


def run(ctx: Context) -> list[Figure]:
    missing = twin_missing()
    if missing is not None:
        return [unavailable(SECTION, name, missing) for name in (*BARE, *PREPARED, twin_drill.NAME)]
    # Bare is what a new cluster is; pre-installed JobSet is the figure earlier runs measured (885 MiB).
    return [*_control_planes(ctx, BARE), *_control_planes(ctx, PREPARED, "--jobset"), _drill(ctx)]


def _drill(ctx: Context) -> Figure:
    if ctx.scale.quick:
        return unavailable(
            SECTION, twin_drill.NAME, "the quick run skips it (a pulumi up and a drill take minutes)"
        )
    missing = engine_missing()
    if missing is not None:
        return unavailable(SECTION, twin_drill.NAME, missing)
    return twin_drill.run(ctx)


def _control_planes(ctx: Context, names: tuple[str, str], *flags: str) -> list[Figure]:
    scratch = Path(tempfile.mkdtemp(dir=ctx.workdir))
    later = 1 if ctx.scale.quick else 2
    with twin_emulator(SPEED, *flags) as emulator:
        idle = tree_rss_mib(emulator.pid)
        first = _start_control_plane(emulator, "twin-0", scratch)
        if first is None:
            return [unavailable(SECTION, name, NO_TWIN) for name in names]
        one = tree_rss_mib(emulator.pid)
        more = [_start_control_plane(emulator, f"twin-{i}", scratch) for i in range(1, later + 1)]
        total = tree_rss_mib(emulator.pid)
    starts = [first, *(m for m in more if m is not None)]
    return [
        Figure(
            SECTION,
            names[0],
            min(starts),
            "s",
            "none (absolute)",
            None,
            note=f"first cluster {first:.1f} s, later ones {', '.join(f'{m:.1f}' for m in starts[1:])} s",
        ),
        Figure(
            SECTION,
            names[1],
            (total - one) / later,
            "MiB",
            f"the emulator without clusters: {idle:.0f} MiB",
            None,
            note=f"the emulator's process tree: {one:.0f} MiB with 1 cluster, {total:.0f} MiB with {later + 1}",
        ),
    ]
