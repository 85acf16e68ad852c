"""The Pulumi Python SDK's dynamic-provider host, serving as many calls at once as the engine sends.

``python -m pulumi.dynamic`` (what the SDK's ``pulumi-resource-pulumi-python`` starts) serves the engine
from ``grpc.server(futures.ThreadPoolExecutor(max_workers=4))``, while the engine runs up to ``--parallel``
steps at once (default 4 per CPU): the other calls queue, so 20 creates that each wait for a cluster go in
waves of 4. ``python -m together_clusters.provider.host`` runs the SDK's module unchanged, except that the
one gRPC server it creates gets a larger pool. Threads start only when calls arrive; the engine's
parallelism bounds how many ever run.

A project opts in through Pulumi's documented project-plugin override (``plugins.providers`` in
Pulumi.yaml) naming ``pulumi-python`` and the directory of :data:`PLUGIN_DIR`, whose launcher starts this
module in the project's virtualenv. README "Benchmarks" shows the lines.
"""

from __future__ import annotations

import os
import runpy
from collections.abc import Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

SDK_WORKERS = 4
# Above the engine's default on any machine this runs on; PULUMI_PARALLEL raises it further.
MIN_WORKERS = 32
PLUGIN_DIR = Path(__file__).resolve().parent / "plugin"


def worker_count(environ: Mapping[str, str] = os.environ) -> int:
    """Threads for the engine's calls: at least its default parallelism (4 per CPU) and PULUMI_PARALLEL."""
    configured = environ.get("PULUMI_PARALLEL", "").strip()
    asked = int(configured) if configured.isdigit() else 0
    return max(MIN_WORKERS, asked, 4 * (os.cpu_count() or 1))


def _serve_with_larger_pool() -> None:
    make_server = grpc.server

    def server(thread_pool: Any, *args: Any, **kwargs: Any) -> Any:
        return make_server(futures.ThreadPoolExecutor(max_workers=worker_count()), *args, **kwargs)

    grpc.server = server  # the only gRPC server of this process is the one pulumi.dynamic creates


def main() -> None:
    _serve_with_larger_pool()
    runpy.run_module("pulumi.dynamic", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
