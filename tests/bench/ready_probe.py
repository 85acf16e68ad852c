"""Create clusters through the provider's own ``create`` (as the engine would call it), concurrently,
and print when each call returned (``time.monotonic``, one clock for every process of the machine).

    TOGETHER_BASE_URL=... TOGETHER_API_KEY=... python -m tests.bench.ready_probe NAME [NAME ...]
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from together_clusters.provider import ClusterProvider


def create(name: str) -> tuple[str, float, str]:
    provider = ClusterProvider()
    # check first, as the engine does: it fills in what create needs (the region's newest driver).
    checked = provider.check(
        {}, {"cluster_name": name, "region": "us-central-8", "gpu_type": "H100_SXM", "num_gpus": 8}
    )
    if checked.failures:
        raise SystemExit(f"{name}: check failed: {checked.failures}")
    result = provider.create(checked.inputs)
    returned = time.monotonic()
    return name, returned, str((result.outs or {}).get("status"))


def main(names: list[str]) -> None:
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(create, names))
    print(json.dumps({name: {"returned": at, "status": status} for name, at, status in results}))


if __name__ == "__main__":
    main(sys.argv[1:])
