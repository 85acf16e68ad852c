"""What must hold after every campaign sequence, checked against the emulator's own view of the clusters.

- no live cluster is untracked (except clusters made outside the stack and never adopted),
- no two live clusters share a name,
- no tracked cluster is missing,
- the state equals the live cluster on every field the code owns,
- no secret (API key, kubeconfig token) in plain text in the state or in any captured log.

Those hold as well when nothing happened (no state, no cluster), so after an operation that succeeded
``not_as_asked`` checks its outcome: the cluster the state names is live with what the code asked.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from together_clusters.provider.kubeconfig import kubeconfig_text

from .stack import Stack

# Field in the state -> field of the live cluster: what the code owns.
OWNED = {
    "cluster_name": "cluster_name",
    "region": "region",
    "gpu_type": "gpu_type",
    "num_gpus": "num_gpus",
    "num_preemptible_gpus": "desired_preemptible_gpus",
}
# Outputs the engine stores encrypted (additional_secret_outputs): checked in the real engine's state.
SECRET_OUTPUTS = {"kube_config"}


def kube_tokens(clusters: list[dict[str, Any]]) -> set[str]:
    return {
        m for c in clusters for m in re.findall(r"token: (\S+)", kubeconfig_text(c.get("kube_config")) or "")
    }


def violations(
    stack: Stack,
    live: list[dict[str, Any]],
    outside: set[str],
    secrets: set[str],
    logs: str,
) -> list[str]:
    """Every broken invariant, as a sentence. ``live`` excludes clusters being deleted."""
    found: list[str] = []
    tracked = {r.id: (name, r) for name, r in stack.resources.items()}
    live_by_id = {c["cluster_id"]: c for c in live}
    for cluster_id, cluster in live_by_id.items():
        if cluster_id not in tracked and cluster_id not in outside:
            found.append(f"untracked live cluster {cluster_id} ({cluster['cluster_name']})")
    for cluster_name, count in Counter(c["cluster_name"] for c in live).items():
        if count > 1:
            found.append(f"{count} live clusters named {cluster_name!r}")
    for cluster_id, (name, recorded) in tracked.items():
        cluster = live_by_id.get(cluster_id)
        if cluster is None:
            found.append(f"resource {name} tracks cluster {cluster_id}, which does not exist")
            continue
        for ours, theirs in OWNED.items():
            if recorded.outs.get(ours) != cluster.get(theirs):
                found.append(
                    f"resource {name}: state {ours}={recorded.outs.get(ours)!r}, live {theirs}={cluster.get(theirs)!r}"
                )
    public_state = json.dumps(
        [
            {"inputs": r.inputs, "outs": {k: v for k, v in r.outs.items() if k not in SECRET_OUTPUTS}}
            for r in stack.resources.values()
        ]
    )
    for secret in secrets:
        if secret and secret in public_state:
            found.append("a secret is in the state in plain text")
        if secret and secret in logs:
            found.append("a secret is in the captured logs")
    return found


def not_as_asked(stack: Stack, live: list[dict[str, Any]], asked: dict[str, Any]) -> list[str]:
    """After an ``up`` of a one-cluster stack that succeeded, every way its outcome is not what the code
    asked, as a sentence: the state tracks exactly one cluster, which is live with ``asked`` (state field
    names, as in ``OWNED``) on every field the code owns. ``violations`` compares the state with the live
    cluster only: a product that made nothing, or the wrong sizes and recorded them, passes it."""
    if len(stack.resources) != 1:
        return [f"the up succeeded, but the state tracks {len(stack.resources)} clusters, not 1"]
    ((name, recorded),) = stack.resources.items()
    cluster = next((c for c in live if c["cluster_id"] == recorded.id), None)
    if cluster is None:
        return [f"the up succeeded, but cluster {recorded.id}, which resource {name} tracks, is not live"]
    return [
        f"the up succeeded, but resource {name}'s cluster has {theirs}={cluster.get(theirs)!r}, "
        f"the code asked {ours}={asked[ours]!r}"
        for ours, theirs in OWNED.items()
        if ours in asked and cluster.get(theirs) != asked[ours]
    ]
