"""Together AI GPU clusters with preemptible capacity, as a Pulumi resource.

    from together_clusters.provider import Cluster, ClusterArgs

    cluster = Cluster("gpu", ClusterArgs(cluster_name="demo", region="us-central-8",
                                         gpu_type="H100_SXM", num_gpus=8, num_preemptible_gpus=8))

The API client (``TogetherClient``) and the models are usable without Pulumi. The client is imported
on first use: a program declaring clusters loads neither httpx nor pydantic.
"""


from typing import TYPE_CHECKING, Any

from . import errors
from .errors import *  # noqa: F403  (the provider's errors: named once, in errors.__all__)
from .nested_inputs import (
    AcceptanceTestsArgs,
    AddOnArgs,
    AddOnConfigArgs,
    ClusterConfigArgs,
    EnabledFlagArgs,
    OidcConfigArgs,
    SharedVolumeArgs,
    SlurmStartupScriptsArgs,
)
from .resource import Cluster, ClusterArgs, ClusterProvider, Volume, VolumeArgs, VolumeProvider
from .retry import RetryPolicy

if TYPE_CHECKING:
    from .client import TogetherClient


def __getattr__(name: str) -> Any:
    if name == "TogetherClient":
        from .client import TogetherClient

        return TogetherClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AcceptanceTestsArgs",
    "AddOnArgs",
    "AddOnConfigArgs",
    "Cluster",
    "ClusterArgs",
    "ClusterConfigArgs",
    "ClusterProvider",
    "EnabledFlagArgs",
    "OidcConfigArgs",
    "RetryPolicy",
    "SharedVolumeArgs",
    "SlurmStartupScriptsArgs",
    "TogetherClient",
    "Volume",
    "VolumeArgs",
    "VolumeProvider",
]
__all__ += errors.__all__
