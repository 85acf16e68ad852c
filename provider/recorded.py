"""``python -m together_clusters.provider.recorded``: the API endpoint a stack's clusters were created on.

Reads a ``pulumi stack export`` on stdin and prints the one endpoint its Cluster resources record
(nothing when they record none, e.g. an empty stack). Exits 2 when they record several. Used by
``scripts/down`` to destroy against the endpoint the stack was made on, or refuse.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .schema import CLUSTER_TYPE


def recorded_endpoints(deployment: dict[str, Any]) -> set[str]:
    """The ``api_endpoint`` outputs of the Cluster resources in a ``pulumi stack export``."""
    resources = (deployment.get("deployment") or {}).get("resources") or []
    found = set()
    for resource in resources:
        endpoint = (resource.get("outputs") or {}).get("api_endpoint")
        if resource.get("type") == CLUSTER_TYPE and isinstance(endpoint, str) and endpoint:
            found.add(endpoint)
    return found


def main() -> int:
    raw = sys.stdin.read().strip()
    endpoints = recorded_endpoints(json.loads(raw)) if raw else set()
    if len(endpoints) > 1:
        print(
            f"the stack's clusters were created on several endpoints: {', '.join(sorted(endpoints))}",
            file=sys.stderr,
        )
        return 2
    if endpoints:
        print(endpoints.pop())
    return 0


if __name__ == "__main__":
    sys.exit(main())
