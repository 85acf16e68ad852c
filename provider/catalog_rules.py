"""The rules that need the region catalog (``list_regions``): which changed fields to check against it, the
check, and the driver a region defaults to. Pure: the catalog is handed in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .change_planning import differs
from .plan_types import Failure, is_unknown
from .schema import FIELDS

if TYPE_CHECKING:
    from .models import Region, RegionDriverVersion



def catalog_fields_to_check(olds: dict[str, Any], news: dict[str, Any]) -> set[str]:
    """The catalog-checked inputs that this change sets anew (all of them for a new cluster).

    An unchanged cluster is never refused because its region stopped offering its GPU or driver.
    """
    names = {n for n, spec in FIELDS.items() if spec.catalog}
    if not olds:
        return names
    return {n for n in names if differs(n, olds.get(n), news.get(n))}


def validate_against_catalog(
    inputs: dict[str, Any], regions: list[Region], fields: set[str] | None = None
) -> list[Failure]:
    """Region, GPU type and driver choices against what ``list_regions()`` offers.

    Only known values of ``fields`` (default: all catalog fields) are checked, against the region
    the inputs name. An empty catalog (the API could not be asked) checks nothing.
    """
    fields = fields if fields is not None else {n for n, spec in FIELDS.items() if spec.catalog}
    region_name, gpu_type = inputs.get("region"), inputs.get("gpu_type")
    if not regions or not fields or not isinstance(region_name, str) or is_unknown(region_name):
        return []
    by_name = {r.name: r for r in regions if r.name}
    region = by_name.get(region_name)
    if region is None:
        if "region" not in fields:
            return []
        return [
            Failure(
                "region", f"region {region_name!r} is not offered; use one of {', '.join(sorted(by_name))}."
            )
        ]
    failures = []
    offered = region.supported_instance_types
    if (
        "gpu_type" in fields
        and isinstance(gpu_type, str)
        and not is_unknown(gpu_type)
        and gpu_type not in offered
    ):
        failures.append(
            Failure(
                "gpu_type",
                f"gpu_type {gpu_type!r} is not offered in region {region_name}; it offers "
                f"{', '.join(offered)}. Pick one of those or another region.",
            )
        )
    version_id = inputs.get("nvidia_version_id")
    ids = [v.id for v in region.driver_versions if v.id]
    if (
        "nvidia_version_id" in fields
        and isinstance(version_id, str)
        and not is_unknown(version_id)
        and version_id not in ids
    ):
        failures.append(
            Failure(
                "nvidia_version_id",
                f"nvidia_version_id {version_id!r} is not offered in region {region_name}; use one of {', '.join(ids)}.",
            )
        )
    return failures


def has_driver_selector(inputs: dict[str, Any]) -> bool:
    """Whether the inputs choose a driver: ``nvidia_version_id``, or ``cuda_version`` with ``nvidia_driver_version``."""
    return inputs.get("nvidia_version_id") is not None or (
        inputs.get("cuda_version") is not None and inputs.get("nvidia_driver_version") is not None
    )


def default_driver(regions: list[Region], region_name: Any) -> RegionDriverVersion | None:
    """The driver a new cluster gets when the code names none: the newest the region offers."""
    region = next((r for r in regions if r.name == region_name), None)
    offered = [v for v in (region.driver_versions if region else []) if v.id and v.nvidia_driver_version]
    return max(offered, key=lambda v: _version_key(v.nvidia_driver_version), default=None)


def _version_key(version: Any) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in str(version).split("."))


def missing_driver_failure(region_name: Any, unread_because: str | None = None) -> Failure:
    """No driver chosen and none could be picked: says why the catalog was not read, when it knows."""
    if unread_because:
        return Failure(
            "nvidia_version_id",
            f"{unread_because}. The API is needed to pick region {region_name!r}'s default driver; or "
            "set nvidia_version_id (see `tg clusters list-regions`), or cuda_version with nvidia_driver_version.",
        )
    return Failure(
        "nvidia_version_id",
        f"no driver chosen and the catalog of region {region_name!r} could not be read to pick its default: "
        "set nvidia_version_id (see `tg clusters list-regions`), or cuda_version with nvidia_driver_version.",
    )
