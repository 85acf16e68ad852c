"""The :class:`ClusterArgs` a stack reads from its config, under the keys the templates and examples name.

One home for those keys: ``clusterName`` (default ``<project>-<stack>``), ``region``, ``gpuType``,
:data:`~together_clusters.provider.settings.ADOPT_CONFIG_KEY` and, in a stack of several clusters,
:data:`~together_clusters.provider.settings.ADOPT_MANY_CONFIG_KEY`, so a template copied by ``pulumi new``
and the examples read a cluster's config the same way.
"""

from __future__ import annotations

from typing import Any

import pulumi

from .resource import ClusterArgs
from .settings import ADOPT_CONFIG_KEY, ADOPT_MANY_CONFIG_KEY


def cluster_args_from_config(
    config: pulumi.Config,
    *,
    num_gpus: int,
    num_preemptible_gpus: int,
    default_name: str | None = None,
    default_region: str | None = None,
    default_gpu_type: str | None = None,
    **more: Any,
) -> ClusterArgs:
    """A cluster's arguments from ``config``, with the GPU counts given and any further ``ClusterArgs`` fields.

    ``default_name`` is the cluster's name when ``clusterName`` is not set (``<project>-<stack>`` if
    omitted); ``region`` and ``gpuType`` are required unless a default is given. ``adoptClusterId`` is set
    only to take in a cluster this stack made but never recorded (the error of a rerun names it).
    """
    default_name = default_name or f"{pulumi.get_project()}-{pulumi.get_stack()}"
    cluster_name = config.get("clusterName") or default_name
    return ClusterArgs(
        cluster_name=cluster_name,
        region=_setting(config, "region", default_region),
        gpu_type=_setting(config, "gpuType", default_gpu_type),
        num_gpus=num_gpus,
        num_preemptible_gpus=num_preemptible_gpus,
        adopt_cluster_id=adopted_cluster_id(config, cluster_name) or config.get(ADOPT_CONFIG_KEY),
        **more,
    )


def adopted_cluster_id(config: pulumi.Config, cluster_name: str) -> str | None:
    """The id to adopt for the cluster named ``cluster_name`` in a stack of several clusters: its entry under
    ``adoptClusterIds`` (what the error of a rerun after a killed create names), else None."""
    entries = config.get_object(ADOPT_MANY_CONFIG_KEY) or {}
    if not isinstance(entries, dict):
        # A RunError: Pulumi's language host prints its message alone, on one line, no traceback.
        raise pulumi.RunError(
            f"{ADOPT_MANY_CONFIG_KEY}: {entries!r} is not an object of cluster_name to cluster id; set one "
            f"entry with `pulumi config set --path {ADOPT_MANY_CONFIG_KEY}.<cluster_name> <id>`"
        )
    found = entries.get(cluster_name)
    return str(found) if found else None


def _setting(config: pulumi.Config, key: str, default: str | None) -> str:
    """``key`` from ``config``, else ``default``; required when there is no default."""
    return (config.get(key) or default) if default is not None else config.require(key)
