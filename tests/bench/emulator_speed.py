"""Section 5: the emulator's GET/s with concurrent clients, and list latency with many clusters.

The emulator runs as users start it (``python -m together_clusters.emulator``), in its own process; the
load comes from two other processes of 4 threads each (tests/bench/load_client.py). The floor is uvicorn
serving the same bytes with no framework and no state (tests/bench/bare_server.py), measured
interleaved with the emulator in the same run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .context import Context
from .figures import Figure, Goal, median
from .servers import ROOT, Served, api_client, create_request, shipped_emulator

SECTION = "5. Emulator"
CLIENT_PROCESSES = 2
THREADS_PER_CLIENT = 4
LIST_SAMPLES = 10


def populate(base_url: str, names: list[str]) -> list[str]:
    """Create clusters named ``names``; their ids."""
    with api_client(base_url) as client, ThreadPoolExecutor(8) as pool:

        def create(name: str) -> str:
            reply = client.post("/v1/compute/clusters", json=create_request(name))
            reply.raise_for_status()
            return str(reply.json()["cluster_id"])

        return list(pool.map(create, names))


def gets_per_second(base_url: str, paths: list[str], duration: float) -> float:
    """GETs answered per second by ``base_url`` under the load of the client processes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "tests.bench.load_client",
        base_url,
        f"{duration:g}",
        str(THREADS_PER_CLIENT),
    ]
    clients = [
        subprocess.Popen([*command, *paths], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(CLIENT_PROCESSES)
    ]
    outcomes = [json.loads(c.communicate(timeout=600)[0].strip().splitlines()[-1]) for c in clients]
    if any(o["errors"] for o in outcomes):
        raise RuntimeError(f"GET errors under load: {outcomes}")
    return sum(o["requests"] / o["seconds"] for o in outcomes)


def list_latency(base_url: str) -> float:
    with api_client(base_url) as client:
        client.get("/v1/compute/clusters").raise_for_status()  # connection made, not timed
        samples = []
        for _ in range(LIST_SAMPLES):
            started = time.perf_counter()
            client.get("/v1/compute/clusters").raise_for_status()
            samples.append(time.perf_counter() - started)
    return median(samples)


def _body(base_url: str, path: str, into: Path) -> Path:
    with api_client(base_url) as client:
        reply = client.get(path)
        reply.raise_for_status()
        into.write_bytes(reply.content)
    return into


def run(ctx: Context) -> list[Figure]:
    n, n_list = ctx.scale.emulator_clusters, ctx.scale.list_clusters
    duration = ctx.scale.load_seconds
    figures = []
    state = ctx.workdir / "emulator-state.db"
    with shipped_emulator(60) as plain, shipped_emulator(60, state) as stateful:
        ids = populate(plain.url, [f"load-{i}" for i in range(n)])
        stateful_ids = populate(stateful.url, [f"load-{i}" for i in range(n)])
        body = _body(plain.url, f"/v1/compute/clusters/{ids[0]}", ctx.workdir / "one-cluster.json")
        with Served("tests.bench.bare_server", [str(body)]) as bare:
            paths = [f"/v1/compute/clusters/{i}" for i in ids]
            stateful_paths = [f"/v1/compute/clusters/{i}" for i in stateful_ids]
            samples: dict[str, list[float]] = {"emulator": [], "emulator --state": [], "bare": []}
            for rep in range(ctx.scale.repetitions):
                runs = [
                    ("emulator", plain.url, paths),
                    ("emulator --state", stateful.url, stateful_paths),
                    ("bare", bare.url, paths),
                ]
                for name, url, p in runs if rep % 2 == 0 else reversed(runs):
                    samples[name].append(gets_per_second(url, p, duration))
                    ctx.progress(f"  {name}: {samples[name][-1]:.0f} GET/s")
        floor = median(samples["bare"])
        for name in ("emulator", "emulator --state"):
            value = median(samples[name])
            figures.append(
                Figure(
                    SECTION,
                    f"GET /clusters/{{id}} per second, {CLIENT_PROCESSES * THREADS_PER_CLIENT} clients, "
                    f"{n} clusters, {name}",
                    value,
                    "GET/s",
                    f"bare uvicorn, same bytes: {floor:.0f} GET/s",
                    Goal(">=", 1000, "GET/s"),
                    note=f"{value / floor:.2f}x the floor",
                    samples={"ours": samples[name], "floor": samples["bare"]},
                )
            )
        populate(plain.url, [f"list-{i}" for i in range(n_list - n)])
        list_body = _body(plain.url, "/v1/compute/clusters", ctx.workdir / "cluster-list.json")
        with Served("tests.bench.bare_server", [str(list_body)]) as bare_list:
            ours: list[float] = []
            floors: list[float] = []
            for rep in range(ctx.scale.repetitions):
                pair = [(ours, plain.url), (floors, bare_list.url)]
                for into, url in pair if rep % 2 == 0 else reversed(pair):
                    into.append(list_latency(url))
        figures.append(
            Figure(
                SECTION,
                f"list latency, {n_list} clusters",
                median(ours) * 1000,
                "ms",
                f"bare uvicorn, same {list_body.stat().st_size / 1e6:.1f} MB: {median(floors) * 1000:.1f} ms",
                None,
                note=f"{median(ours) / median(floors):.1f}x the floor; issue 13 sets no goal for it",
                samples={"ours_s": ours, "floor_s": floors},
            )
        )
    return figures
