"""The platform's rules for Volume inputs, and how a change is carried out. Pure: plain dicts in, plain
answers out, no I/O (the Volume's counterpart of :mod:`together_clusters.provider.rules`).

A volume holds data: what would lose it is refused at preview unless the code opts in. A shrink is
refused outright (the API cannot shrink a volume); a replacement (a new name, region, project or
lifecycle) would make a new, empty volume and delete the old one with its data, so it is refused unless
``allow_data_loss`` is set.
"""

from __future__ import annotations

from typing import Any

from .change_planning import changes_by_effect, normalize
from .plan_types import ChangePlan, Failure, is_unknown
from .schema import VOLUME_FIELDS

# A LOCAL field (never sent): the code's explicit consent that a plan may delete the volume's data.
ALLOW_DATA_LOSS = "allow_data_loss"


def validate_volume(inputs: dict[str, Any]) -> list[Failure]:
    """Whether these Volume inputs may exist; unknown values are skipped (checked again once known)."""
    known = {k: v for k, v in inputs.items() if v is not None and not is_unknown(v)}
    failures = [
        Failure(spec.name, f"{spec.name} is required: {spec.doc}")
        for spec in VOLUME_FIELDS.values()
        if spec.required and inputs.get(spec.name) is None
    ]
    for name in ("volume_name", "region"):
        value = known.get(name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            failures.append(Failure(name, f"{name} must be a non-empty string; got {value!r}."))
    size = known.get("size_tib")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        failures.append(
            Failure("size_tib", f"size_tib must be a whole number of TiB, at least 1; got {size!r}.")
        )
    for name in ("is_lifecycle_independent", ALLOW_DATA_LOSS):
        value = known.get(name)
        if value is not None and not isinstance(value, bool):
            failures.append(Failure(name, f"{name} must be true or false; got {value!r}."))
    return failures


def _differs(name: str, old: Any, new: Any) -> bool:
    if is_unknown(new):
        return True
    spec = VOLUME_FIELDS[name]
    new = spec.default if new is None else new
    if new is None:
        return False
    old = spec.default if old is None else old
    return normalize(name, old) != normalize(name, new)


def plan_volume_change(olds: dict[str, Any], news: dict[str, Any]) -> ChangePlan:
    """What going from ``olds`` (current state) to ``news`` (the code) does to the volume."""
    adopt = news.get("adopt_volume_id")
    adoption_changes = adopt is not None and (
        is_unknown(adopt) or adopt not in (olds.get("adopt_volume_id"), olds.get("volume_id"))
    )
    replace, update, local = changes_by_effect(
        VOLUME_FIELDS, olds, news, _differs, "adopt_volume_id", adoption_changes
    )
    refusals: list[Failure] = []
    old_size, new_size = olds.get("size_tib"), news.get("size_tib")
    if (
        not replace
        and isinstance(old_size, int)
        and isinstance(new_size, int)
        and not isinstance(new_size, bool)
        and new_size < old_size
    ):
        refusals.append(
            Failure(
                "size_tib",
                f"size_tib {new_size} is smaller than volume {olds.get('volume_id')}'s {old_size} TiB: a "
                f"volume can only grow. Keep size_tib at {old_size} or more.",
            )
        )
    if replace and not news.get(ALLOW_DATA_LOSS):
        refusals.append(data_loss_refusal(olds, replace))
    return ChangePlan(
        replace=replace, update=update, local=local, refusals=refusals, delete_before_replace=bool(replace)
    )


def data_loss_refusal(olds: dict[str, Any], replace: list[str]) -> Failure:
    """The refusal of a plan that would replace a volume, deleting it with its data."""
    name = olds.get("volume_name")
    return Failure(
        replace[0],
        f"changing {', '.join(replace)} would replace volume {olds.get('volume_id')} ({name!r}): a new, empty "
        "volume would be made and this one deleted with its data (checkpoints). Keep "
        f"{', '.join(replace)} as they are, or set {ALLOW_DATA_LOSS}=True on the Volume to delete its data.",
    )
