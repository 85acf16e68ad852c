"""What the emulated platform offers: regions, GPU types per region and driver versions."""

from __future__ import annotations

from .errors import invalid
from .shapes import Region, RegionDriverVersion

# Free preemptible GPUs per (region, gpu_type) after start or reset. Standard capacity is unlimited.
DEFAULT_PREEMPTIBLE_POOL_GPUS = 64
# The emulator keeps its own node size on purpose rather than importing together_clusters.platform's: it plays
# the platform, whose rule it takes from the official SDK ("must be a multiple of 8", cluster_create_params), as
# it keeps its SDK-mirrored shapes. Its request validation then checks the provider's preview rules instead of
# agreeing with them by construction; tests/platform/test_vocabulary.py checks both against the SDK's wording.
GPUS_PER_NODE = 8

_DRIVERS = (
    RegionDriverVersion(
        id="nv-550-cu124-ubuntu2204", cuda_version="12.4", nvidia_driver_version="550", os="ubuntu-22.04"
    ),
    RegionDriverVersion(
        id="nv-570-cu128-ubuntu2204", cuda_version="12.8", nvidia_driver_version="570", os="ubuntu-22.04"
    ),
)

_GPU_TYPES_BY_REGION: dict[str, tuple[str, ...]] = {
    "us-central-8": ("H100_SXM", "H200_SXM", "B200_SXM", "RTX_6000_PCI"),
    "us-east-2": ("H100_SXM", "L40_PCIE", "RTX_6000_PCI"),
    "eu-north-1": ("H200_SXM", "B200_SXM", "GB200_SXM"),
}


def regions() -> list[Region]:
    """Every region, as ``GET /v1/compute/regions`` lists them."""
    return [
        Region(
            name=name, supported_instance_types=list(gpus), driver_versions=[d.model_copy() for d in _DRIVERS]
        )
        for name, gpus in _GPU_TYPES_BY_REGION.items()
    ]


def pool_keys() -> list[tuple[str, str]]:
    """Every (region, gpu_type) pair that has a preemptible pool."""
    return [(region, gpu) for region, gpus in _GPU_TYPES_BY_REGION.items() for gpu in gpus]


def check_offered(region: str, gpu_type: str) -> None:
    """Refuse a region the platform does not have, or a GPU type the region does not offer."""
    _check_region(region)
    offered = _GPU_TYPES_BY_REGION[region]
    if gpu_type not in offered:
        raise invalid(
            f"gpu_type {gpu_type!r} is not offered in region {region!r}; offered: {', '.join(offered)}",
            "gpu_type",
        )


def resolve_driver(
    region: str,
    nvidia_version_id: str | None,
    cuda_version: str | None,
    nvidia_driver_version: str | None,
    default_driver: bool = False,
) -> RegionDriverVersion:
    """The region's driver entry the request selects.

    The real API refuses a request that selects none; ``default_driver`` (an emulator option for clients
    that predate the rule) picks the region's newest driver instead.
    """
    _check_region(region)
    by_id = {d.id: d for d in _DRIVERS}
    if nvidia_version_id is None and cuda_version is None and nvidia_driver_version is None:
        if default_driver:
            return max(_DRIVERS, key=lambda d: int(d.nvidia_driver_version)).model_copy()
        raise invalid(
            "a driver is required: give nvidia_version_id (in region "
            f"{region!r}: {', '.join(by_id)}) or cuda_version with nvidia_driver_version; got neither",
            "nvidia_version_id",
        )
    if (cuda_version is None) != (nvidia_driver_version is None):
        missing = "nvidia_driver_version" if nvidia_driver_version is None else "cuda_version"
        raise invalid(
            f"cuda_version and nvidia_driver_version must be given together; {missing} is missing", missing
        )
    by_pair = None
    if cuda_version is not None and nvidia_driver_version is not None:
        by_pair = next(
            (
                d
                for d in _DRIVERS
                if d.cuda_version == cuda_version and d.nvidia_driver_version == nvidia_driver_version
            ),
            None,
        )
        if by_pair is None:
            pairs = ", ".join(f"{d.cuda_version}/{d.nvidia_driver_version}" for d in _DRIVERS)
            raise invalid(
                f"cuda_version/nvidia_driver_version {cuda_version}/{nvidia_driver_version} is not offered in "
                f"region {region!r}; offered: {pairs}",
                "cuda_version",
            )
    if nvidia_version_id is not None:
        chosen = by_id.get(nvidia_version_id)
        if chosen is None:
            raise invalid(
                f"nvidia_version_id must be one of {', '.join(by_id)} in region {region!r}; got {nvidia_version_id!r}",
                "nvidia_version_id",
            )
        if by_pair is not None and by_pair.id != chosen.id:
            raise invalid(
                f"nvidia_version_id {nvidia_version_id!r} does not match cuda_version/nvidia_driver_version "
                f"{cuda_version}/{nvidia_driver_version}",
                "nvidia_version_id",
            )
        return chosen.model_copy()
    assert by_pair is not None
    return by_pair.model_copy()


def _check_region(region: str) -> None:
    """Refuse a region the platform does not have."""
    if region not in _GPU_TYPES_BY_REGION:
        known = ", ".join(_GPU_TYPES_BY_REGION)
        raise invalid(f"region must be one of {known}; got {region!r}", "region")
