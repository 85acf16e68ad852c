"""The :class:`ClusterArgs` a stack reads from its config, under the keys the templates and examples name.

One home for those keys: ``clusterName`` (default ``<project>-<stack>``), ``region``, ``gpuType`` and
:data:`~together_clusters.provider.settings.ADOPT_CONFIG_KEY`, so a template copied by ``pulumi new``
and the examples read a cluster's config the same way.
"""

from __future__ import annotations

from typing import Any

import pulumi

from .resource import ClusterArgs
from .settings import ADOPT_CONFIG_KEY


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
    return ClusterArgs(
        cluster_name=config.get("clusterName") or default_name,
        region=_setting(config, "region", default_region),
        gpu_type=_setting(config, "gpuType", default_gpu_type),
        num_gpus=num_gpus,
        num_preemptible_gpus=num_preemptible_gpus,
        adopt_cluster_id=config.get(ADOPT_CONFIG_KEY),
        **more,
    )


def _setting(config: pulumi.Config, key: str, default: str | None) -> str:
    """``key`` from ``config``, else ``default``; required when there is no default."""
    return (config.get(key) or default) if default is not None else config.require(key)
