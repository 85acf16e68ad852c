"""The Pulumi Python SDK's dynamic-provider host, with as many gRPC worker threads as the engine runs steps.

``python -m pulumi.dynamic`` (what the shim ``pulumi-resource-pulumi-python`` starts) serves the engine's
calls from ``futures.ThreadPoolExecutor(max_workers=4)`` (pulumi/dynamic/__main__.py, ``main()``), while
the engine runs up to ``--parallel`` steps at once (default: 4 per CPU, 8 on 2 cores): the other calls
queue, so 20 creates that each wait for a cluster go in waves of 4. This host runs the same module
unchanged, except that the gRPC server it creates gets a pool as large as the engine's parallelism
(``PULUMI_PARALLEL`` when set, else 4 per CPU, never fewer than the SDK's 4). Threads are started only
when calls arrive, so a larger bound costs nothing while idle.

The benchmark runs it through a shim placed first on PATH, to measure what lifting the bound buys.
"""

from __future__ import annotations

import os
import runpy
from concurrent import futures
from typing import Any

import grpc

SDK_WORKERS = 4


def worker_count(environ: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """The engine's default parallelism (pkg/cmd/pulumi/operations/up.go ``defaultParallel``)."""
    configured = environ.get("PULUMI_PARALLEL", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return max(SDK_WORKERS, int(configured))
    return max(SDK_WORKERS, 4 * len(os.sched_getaffinity(0)))


def _serve_with_larger_pool() -> None:
    make_server = grpc.server

    def server(thread_pool: Any, *args: Any, **kwargs: Any) -> Any:
        return make_server(futures.ThreadPoolExecutor(max_workers=worker_count()), *args, **kwargs)

    grpc.server = server  # the only gRPC server of this process is the one pulumi.dynamic creates


if __name__ == "__main__":
    _serve_with_larger_pool()
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)
