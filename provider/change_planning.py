""""What does going from the old inputs to the new ones do?": nothing, an in-place update, a replacement, or
something the platform refuses (a conversion between standard and preemptible). Pure. A value unknown at
preview is treated as "will change"."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .plan_types import ChangePlan, Failure, is_int, is_unknown, parse_time
from .schema import FIELDS, FieldSpec, OnChange


def normalize(name: str, value: Any) -> Any:
    """A value in the form it is compared in: times as instants, None-valued keys dropped."""
    if value is None:
        return None
    if name in ("reservation_start_time", "reservation_end_time"):
        return parse_time(value) or value
    return _drop_none(value)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_none(v) for v in value]
    return value


def differs(name: str, old: Any, new: Any) -> bool:
    if is_unknown(new):
        return True
    spec = FIELDS[name]
    if new is None:
        new = spec.default
        if new is None:
            # Left unset: the server's value (or none) stands. Not a change.
            return False
    if old is None:
        old = spec.default
    return normalize(name, old) != normalize(name, new)


def changes_by_effect(
    fields: Mapping[str, FieldSpec],
    olds: dict[str, Any],
    news: dict[str, Any],
    differs: Callable[[str, Any, Any], bool],
    adopt_field: str,
    adoption_changes: bool,
) -> tuple[list[str], list[str], list[str]]:
    """The fields of a resource's table whose value ``differs`` from ``olds`` to ``news``, sorted by what
    their change does: (replace, update, local), in table order. A ``replace_when`` field's change may be a
    replacement; the adoption field (``adopt_field``) is one when ``adoption_changes``."""
    by_effect: dict[OnChange, list[str]] = {effect: [] for effect in OnChange}
    for name, spec in fields.items():
        if name == adopt_field:
            if adoption_changes:
                by_effect[OnChange.REPLACE].append(name)
            continue
        if not differs(name, olds.get(name), news.get(name)):
            continue
        on_change = spec.on_change
        if spec.replace_when is not None and not is_unknown(news.get(name)):
            if spec.replace_when(olds.get(name), news.get(name)):
                on_change = OnChange.REPLACE
        by_effect[on_change].append(name)
    # A bring-up field's change has nothing to act on once the cluster is up: recorded like a local one.
    local = [n for n in fields if n in by_effect[OnChange.LOCAL] or n in by_effect[OnChange.BRING_UP]]
    return by_effect[OnChange.REPLACE], by_effect[OnChange.UPDATE], local


def plan_change(olds: dict[str, Any], news: dict[str, Any]) -> ChangePlan:
    """What going from ``olds`` (current state) to ``news`` (the code) does to the cluster."""
    replace, update, local = changes_by_effect(
        FIELDS,
        olds,
        news,
        differs,
        "adopt_cluster_id",
        _adoption_changes(olds, news.get("adopt_cluster_id")),
    )
    refusals = [] if replace else conversion_refusals(olds, news)
    if replace and (loss := inline_volume_loss(olds, news, replace)) is not None:
        refusals.append(loss)
    same_name = not differs("cluster_name", olds.get("cluster_name"), news.get("cluster_name"))
    # A volume is attached to one live cluster at a time: the new cluster can have it only once the old
    # one is gone, so a cluster with a volume_id is deleted before its replacement is made.
    with_volume = news.get("volume_id") is not None
    return ChangePlan(
        replace=replace,
        update=update,
        local=local,
        refusals=refusals,
        delete_before_replace=bool(replace) and (same_name or with_volume),
    )


def inline_volume_at_risk(inputs: dict[str, Any]) -> str | None:
    """The name of the cluster's inline ``shared_volume`` if it is deleted with the cluster, else None."""
    volume = inputs.get("shared_volume")
    if not isinstance(volume, dict) or volume.get("is_lifecycle_independent") is True:
        return None
    return str(volume.get("volume_name"))


def inline_volume_loss(olds: dict[str, Any], news: dict[str, Any], replace: list[str]) -> Failure | None:
    """The refusal of a replacement that would delete the old cluster's inline volume with its data."""
    volume_name = inline_volume_at_risk(olds)
    if volume_name is None or news.get("allow_data_loss") is True:
        return None
    cluster = repr(olds.get("cluster_name"))
    if olds.get("cluster_id"):
        cluster += f" ({olds['cluster_id']})"
    return Failure(
        replace[0],
        f"changing {', '.join(replace)} would replace cluster {cluster} and delete its inline shared_volume "
        f"{volume_name!r} with it (not lifecycle-independent), and every checkpoint on it. Ways out: keep "
        f"{', '.join(replace)} as it is; put the data on a Volume resource (together_clusters.provider.Volume, "
        "lifecycle-independent by default) attached with volume_id; for a new cluster, set "
        "shared_volume.is_lifecycle_independent=True; or set allow_data_loss=True on the Cluster to delete "
        "the volume.",
    )


def _adoption_changes(olds: dict[str, Any], new_adopt_id: Any) -> bool:
    """Adopting is a one-off: only naming a different existing cluster later forces a replacement."""
    if new_adopt_id is None:
        return False
    if is_unknown(new_adopt_id):
        return True
    return new_adopt_id not in (olds.get("adopt_cluster_id"), olds.get("cluster_id"))


def conversion_refusals(olds: dict[str, Any], news: dict[str, Any]) -> list[Failure]:
    """Refuse one update that shrinks one compute class while growing the other.

    The platform cannot turn a standard node into a preemptible one (or back) in place, and doing
    both moves in one step would ask it to.
    """
    counts = {}
    for name in ("num_gpus", "num_preemptible_gpus"):
        old, new = olds.get(name, FIELDS[name].default), news.get(name, FIELDS[name].default)
        if (
            old is None
            or new is None
            or is_unknown(old)
            or is_unknown(new)
            or not (is_int(old) and is_int(new))
        ):
            return []
        counts[name] = (old, new)
    (std_old, std_new), (pre_old, pre_new) = counts["num_gpus"], counts["num_preemptible_gpus"]
    if (std_new - std_old) * (pre_new - pre_old) >= 0:
        return []
    if std_new < std_old:
        direction = "standard nodes into preemptible ones"
        first = f"raise num_preemptible_gpus to {pre_new} with num_gpus kept at {std_old}, deploy, then lower num_gpus to {std_new}"
    else:
        direction = "preemptible nodes into standard ones"
        first = f"raise num_gpus to {std_new} with num_preemptible_gpus kept at {pre_old}, deploy, then lower num_preemptible_gpus to {pre_new}"
    return [
        Failure(
            "num_gpus",
            f"num_gpus {std_old} -> {std_new} together with num_preemptible_gpus {pre_old} -> {pre_new} would "
            f"convert {direction} in place, which the platform cannot do. Change one class per update: "
            f"{first}. Or replace the cluster (`pulumi up --replace <urn>`).",
        )
    ]
